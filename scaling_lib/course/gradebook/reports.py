"""Reports of a graded class: the gradebook CSV, the printed table, feedback files, a plot.

Also :func:`catalog`, the instructor's table of what each chapter's exercises test (kind,
tolerance, and the wrong methods the answer key lists).
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from .chapter import Course, _graded_name

SYMBOL = {"pass": "P", "fail": "F", "unanswered": "-", "error": "E"}


def _order(name: str):
    return tuple(int(x) if x.isdigit() else x for x in re.split(r"[.]", name))


def exercise_names(results) -> list[str]:
    return sorted({n for r in results for n in r.exercises}, key=_order)


def write_csv(results, path) -> None:
    names = exercise_names(results)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "notebook", "chapter", "seed", *names, "passed", "total",
                    "seconds", "flags"])
        for r in results:
            w.writerow([r.student, r.notebook, r.chapter or "", "" if r.seed is None else r.seed,
                        *[r.exercises.get(n, "") for n in names], r.passed, r.total,
                        f"{r.seconds:.1f}", "; ".join(r.flags)])


def table(results) -> str:
    """The printed gradebook: one row per notebook, one letter per exercise."""
    head = ["student", "chapter", "seed", "exercises", "score", "time", "flags"]
    rows = [head]
    for r in results:
        marks = " ".join(f"{n}:{SYMBOL[v]}" for n, v in r.exercises.items())
        rows.append([r.student, r.chapter or "?", "" if r.seed is None else str(r.seed),
                     marks or "(nothing graded)", f"{r.passed}/{r.total}", f"{r.seconds:.1f} s",
                     str(len(r.flags))])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("P pass, F fail, - unanswered, E error")
    flagged = [(r.student, r.notebook, f) for r in results for f in r.flags]
    if flagged:
        lines.append("flags:")
        lines += [f"  {nb}: {f}" for _, nb, f in flagged]
    return "\n".join(lines)


def write_feedback(results, folder) -> list[Path]:
    """One Markdown file per notebook: each exercise's verdict, the checker's message and hint."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for r in results:
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", r.notebook.removesuffix(".ipynb").replace("/", "__"))
        lines = [f"# Feedback: {r.notebook}", "",
                 f"Chapter {r.chapter or '?'}, seed {r.seed}: {r.passed} of {r.total} passed.", ""]
        for n, v in r.exercises.items():
            msg, hint = r.messages.get(n, ("", ""))
            lines.append(f"- **{n}** {v.upper()}: {msg}")
            if hint and v != "pass":
                lines.append(f"  - hint: {hint}")
        if r.flags:
            lines += ["", "Notes from the grader:"] + [f"- {f}" for f in r.flags]
        p = folder / f"{name}.md"
        p.write_text("\n".join(lines) + "\n")
        written.append(p)
    return written


def plot_pass_rates(results, path) -> None:
    """A bar chart of the share of notebooks passing each exercise (PNG)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = exercise_names(results)
    rates = []
    for n in names:
        graded = [r.exercises[n] for r in results if n in r.exercises]
        rates.append(sum(v == "pass" for v in graded) / len(graded) if graded else 0.0)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.45 * len(names) + 1.5), 3.2))
    ax.bar(range(len(names)), [100 * x for x in rates], color="tab:blue")
    ax.set_xticks(range(len(names)), names, rotation=90 if len(names) > 20 else 0)
    ax.set_ylim(0, 100)
    ax.set_ylabel("notebooks passing (%)")
    ax.set_xlabel("exercise")
    ax.set_title(f"Pass rate per exercise ({sum(bool(r.exercises) for r in results)} notebooks)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def catalog(root=None) -> list[dict]:
    """What each chapter's exercises test: one row per graded exercise of ``solutions/``.

    Columns: chapter, exercise, title (the heading above the cell), kind ("number" or
    "function"), parametric (draws from the seed), tolerance, and the wrong methods the answer
    key lists (the slips the tolerance is chosen to catch).
    """
    import types

    course = Course(root)
    rows = []
    for stem in course.paths:
        ch = course.chapter(stem)
        wrong = {}
        for mod in ch.base().values():  # the answer key's listed wrong methods
            if isinstance(mod, types.ModuleType):
                wrong.update(getattr(mod, "WRONG_METHODS", {}))
        titles, last = {}, ""
        for cell in ch.solutions.cells:
            if cell.cell_type == "markdown" and cell.source.startswith("#"):
                last = cell.source.splitlines()[0].lstrip("#").strip()
            elif cell.cell_type == "code" and "graded" in cell.metadata.get("tags", []):
                name = _graded_name({"cell_type": "code", "source": cell.source})
                titles[name] = last
        for name, ex in ch.exercises.items():
            tol = ", ".join(f"{k}={v:g}" for k, v in ex.tolerance.items()) or "default"
            rows.append({"chapter": stem, "exercise": name,
                         "title": titles.get(name, "").removeprefix(name).strip(),
                         "kind": "number" if ex.kind == "check" else "function",
                         "parametric": "yes" if ch.checks[name].draw is not None else "no",
                         "tolerance": tol,
                         "wrong methods caught": "; ".join(wrong.get(name, {})) or "-"})
    return rows
