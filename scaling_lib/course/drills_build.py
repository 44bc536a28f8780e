"""Write the drill notebooks solutions/90-93 from the question bank in ``scaling_lib.course.drills``.

    python -m scaling_lib.course.drills_build [ROOT]   # then: python -m scaling_lib.course.exercises run ... build

The graded cells keep the checker protocol of every solutions notebook (``p = draw(SEED, ...)``,
a solution region, one ``check``/``check_function`` call naming the answer key), so the exercise
notebooks, the wrong-method audit and the grading tool treat the drills like chapters.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .drills import LEVELS, MINUTES, QUESTIONS

IMPORTS = """import math

from scaling_lib import collectives as co
from scaling_lib.course import drills, nbtools
from scaling_lib import hardware as hw
from scaling_lib import inference as inf
from scaling_lib import memory as mem
from scaling_lib import models
from scaling_lib import roofline as rl
from scaling_lib import transformer as tf
from scaling_lib.course.grading import check, check_function, draw
from scaling_lib.course.keys import {key_module} as key

SEED = 0  # change me for new numbers"""

KEY_MODULES = {"90_numbers": "drills_numbers", "91_interview_junior": "interview_junior",
               "92_interview_mid": "interview_mid", "93_interview_senior": "interview_senior"}
# Concept questions (keys of the concept bank) and design questions (keys of mock.DESIGNS) of
# each drill page; the rest of the bank is on the book's "Concept bank and rubrics" page.
EXTRAS = {
    "91_interview_junior": {"concepts": ["parallelism", "sync_sgd", "step_memory", "kv_sizing",
                                         "roofline"]},
    "92_interview_mid": {"concepts": ["nvlink", "dp_bottleneck", "zero_stages", "mfu_at_scale",
                                      "speculative"],
                         "design": ["serving"]},
    "93_interview_senior": {"concepts": ["frontier_time", "tp_decode", "context_parallelism",
                                         "failures", "diverging_run"],
                            "design": ["training", "gpt4", "low_mfu", "long_context"]},
}


def _graded_source(q) -> str:
    if q.signature:
        body = "\n".join("    " + ln for ln in q.solution.splitlines())
        return (f"{q.signature}\n    # BEGIN SOLUTION\n{body}\n    # END SOLUTION\n\n\n"
                f"check_function({q.signature[4:q.signature.index('(')]}, key.{q.key},\n"
                f"               {q.cases},\n"
                f"               name={q.name!r})")
    unit = f", unit={q.unit!r}" if q.unit else ""
    return (f"p = draw(SEED, {q.name!r}, {q.draw})\nprint(p)\n# BEGIN SOLUTION\n{q.solution}\n"
            f"# STUB: answer = None  # {q.unit or 'a fraction'}\n# END SOLUTION\n"
            f"check(answer, key.{q.key}(p), name={q.name!r}{unit}{q.tol})")


def notebook(stem: str, setup_source: str):
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

    from .drills.mock import MOCK_MINUTES

    title = LEVELS[stem]
    cells = [new_markdown_cell(
        f"# Solutions: {title}\n\nSelf-study: set a timer for **{MINUTES[stem]} minutes** for "
        "the graded questions (the "
        f"[instructor guide](../book/instructor_guide.ipynb)'s {MOCK_MINUTES}-minute mock "
        "interview takes three of a level's questions into a 12-minute section). Each question "
        "draws its numbers from `SEED`: change it for a fresh set (an instructor hands out one "
        "seed per student). Answer in SI units (bytes, seconds, FLOPs) as plain numbers; the "
        "checker names the usual slips (bits vs bytes, GB vs GiB, one-way vs both ways, 8 vs 16 "
        "bytes per parameter, the sparsity FLOP/s) when an answer falls on one, and gives a "
        "hint after a failed try.\n\n"
        "The expected answers come from the same answer keys as the chapters' exercises.")]
    setup = new_code_cell(setup_source)
    setup.metadata["tags"] = ["remove-cell"]
    cells += [setup, new_code_cell(IMPORTS.format(key_module=KEY_MODULES[stem]))]
    from .keys.drills import ERRATA

    for q in QUESTIONS[stem]:
        if q.name == next((n for n in ERRATA if n.startswith(stem[:2] + ".")), None):
            cells.append(new_markdown_cell(
                "## Errata drills\nFour claims heard in interviews, each as a graded question "
                "whose answer comes out wrong if you believe the claim. When yours falls on "
                "the claim the checker names it and says what is right; the concept bank's "
                "rubrics treat them as red flags."))
        cells.append(new_markdown_cell(f"## {q.name} {q.title}\n{q.prompt} *({q.topic})*"))
        g = new_code_cell(_graded_source(q))
        g.metadata["tags"] = ["graded"]
        cells.append(g)
        if q.worked:
            w = new_markdown_cell(f":::{{admonition}} Worked answer\n:class: dropdown\n{q.worked}\n:::")
            w.metadata["tags"] = ["solution"]
            cells.append(w)
    extra = EXTRAS.get(stem, {})
    if extra.get("design"):
        cells.append(new_markdown_cell(
            "## System design\nSketch your answer first (numbers, assumptions, what you would "
            "measure); the worked answer is computed by the library."))
        from .drills.mock import DESIGNS

        for key in extra["design"]:
            question, call = DESIGNS[key]
            cells.append(new_markdown_cell(f"### {question}"))
            c = new_code_cell(f"# BEGIN SOLUTION\nnbtools.md({call})\n"
                              "# STUB: pass  # your estimate: write it here or on paper\n"
                              "# END SOLUTION")
            cells.append(c)
    if extra.get("concepts"):
        from .drills import concepts

        table = concepts()
        cells.append(new_markdown_cell(
            "## Concepts\nAnswer aloud or in writing first, then open the model answers (three "
            "depths) and score yourself 0-3 on the rubric. The whole bank is on the "
            "[concept bank](../book/concept_bank.ipynb) page."))
        for k in extra["concepts"]:
            cells.append(new_markdown_cell(f"### {table[k][0]}"))
            cells.append(new_code_cell(f"drills.reveal({k!r})"))
    for i, cell in enumerate(cells):  # stable ids: regenerating does not churn the diff
        cell["id"] = f"{stem[:2]}-{i:03d}"
    nb = new_notebook(cells=cells)
    nb.metadata.update({"kernelspec": {"display_name": "Python 3", "language": "python",
                                       "name": "python3"},
                        "language_info": {"name": "python"}})
    return nb


def write_notebooks(root: Path = Path(".")) -> list[Path]:
    """Write solutions/9x_*.ipynb (without outputs; run them with scaling_lib.course.exercises run)."""
    import nbformat

    root = Path(root)
    first = nbformat.read(root / "solutions" / "01_rooflines.ipynb", as_version=4)
    setup = next(c for c in first.cells if c.cell_type == "code").source
    out = []
    for stem in QUESTIONS:
        path = root / "solutions" / f"{stem}.ipynb"
        nbformat.write(notebook(stem, setup), path)
        out.append(path)
    return out


if __name__ == "__main__":
    for p in write_notebooks(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(".")):
        print(f"wrote {p}")
