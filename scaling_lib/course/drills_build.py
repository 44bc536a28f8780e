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
from scaling_lib import roofline as rl
from scaling_lib import transformer as tf
from scaling_lib.course.grading import check, check_function, draw
from scaling_lib.course.keys import {key_module} as key

SEED = 0  # change me for new numbers"""

KEY_MODULES = {"90_numbers": "drills_numbers", "91_interview_junior": "interview_junior",
               "92_interview_mid": "interview_mid", "93_interview_senior": "interview_senior"}
EXTRAS = {
    "91_interview_junior": {"concepts": ["parallelism", "sync_sgd"]},
    "92_interview_mid": {"concepts": ["nvlink", "dp_bottleneck"],
                         "design": [("Serve Llama 3 70B at 50 ms per output token: how many H100s?",
                                     "drills.serving_answer(model='llama3-70b', "
                                     "accelerator='h100', tpot=0.050, batch=32, context=8192)")]},
    "93_interview_senior": {"concepts": ["frontier_time"],
                            "design": [("Train a 70B model on 1,024 H100s in 30 days: what plan, "
                                        "what MFU, does it fit?",
                                        "drills.training_answer(model='llama3-70b', "
                                        "accelerator='h100', n=1024, days=30, mfu=0.40)"),
                                       ("Serve Llama 3 70B at 50 ms per output token with batch "
                                        "64 at 32K context: how many H100s?",
                                        "drills.serving_answer(model='llama3-70b', "
                                        "accelerator='h100', tpot=0.050, batch=64, context=32768)")]},
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

    title = LEVELS[stem]
    cells = [new_markdown_cell(
        f"# Solutions: {title}\n\nSet a timer for **{MINUTES[stem]} minutes**. Each question "
        "draws its numbers from `SEED`: change it for a fresh set (an instructor hands out one "
        "seed per student). Answer in SI units (bytes, seconds, FLOPs) as plain numbers; the "
        "checker names the usual slips (bits vs bytes, GB vs GiB, one-way vs both ways, 8 vs 16 "
        "bytes per parameter, the sparsity FLOP/s) when an answer falls on one.\n\n"
        "The expected answers come from the same answer keys as the chapters' exercises.")]
    setup = new_code_cell(setup_source)
    setup.metadata["tags"] = ["remove-cell"]
    cells += [setup, new_code_cell(IMPORTS.format(key_module=KEY_MODULES[stem]))]
    for q in QUESTIONS[stem]:
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
        for question, call in extra["design"]:
            cells.append(new_markdown_cell(f"### {question}"))
            c = new_code_cell(f"# BEGIN SOLUTION\nnbtools.md({call})\n"
                              "# STUB: pass  # your estimate: write it here or on paper\n"
                              "# END SOLUTION")
            cells.append(c)
    if extra.get("concepts"):
        from .drills import concepts

        table = concepts()
        cells.append(new_markdown_cell(
            "## Concepts\nAnswer aloud or in writing first, then open the model answer and score "
            "yourself against its rubric."))
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
