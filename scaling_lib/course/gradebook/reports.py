"""Reports of a graded class: the gradebook CSV, the printed table, feedback files, a plot.

Also :func:`catalog`, the instructor's table of what each chapter's exercises test (kind,
tolerance, and the wrong methods the answer key lists).
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import os
import re
from pathlib import Path

from .chapter import Course, _graded_name

SYMBOL = {"pass": "P", "fail": "F", "unanswered": "-", "error": "E"}


def _order(name: str):
    return tuple(int(x) if x.isdigit() else x for x in re.split(r"[.]", name))


def exercise_names(results) -> list[str]:
    return sorted({n for r in results for n in r.exercises}, key=_order)


def default_key_file() -> Path:
    """Where the instructor's checksum key lives: ``$SCALING_LIB_GRADING_KEY`` or
    ``~/.config/scaling_lib/grading.key`` (made, mode 0600, on first use). Jails never see it."""
    env = os.environ.get("SCALING_LIB_GRADING_KEY")
    return Path(env) if env else Path.home() / ".config" / "scaling_lib" / "grading.key"


def grading_key(path=None) -> bytes:
    """The secret key of the row checksums (32 random bytes, made on first use)."""
    path = Path(path) if path else default_key_file()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(32).hex().encode())
    return path.read_bytes().strip()


def row_checksum(row: list, key: bytes) -> str:
    """HMAC-SHA256 of a CSV row (its cells joined by the unit separator), in hex."""
    return hmac.new(key, "\x1f".join(map(str, row)).encode(), hashlib.sha256).hexdigest()


def write_csv(results, path, key: bytes | None = None) -> None:
    """The gradebook CSV, one row per notebook, each with an HMAC ``checksum`` of its cells
    (``key``: :func:`grading_key`); written to a temporary file, then renamed."""
    key = grading_key() if key is None else key
    names = exercise_names(results)
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "notebook", "chapter", "seed", *names, "passed", "total",
                    "seconds", "status", "hints seen", "flags", "checksum"])
        for r in results:
            row = [r.student, r.notebook, r.chapter or "", "" if r.seed is None else r.seed,
                   *[r.exercises.get(n, "") for n in names], r.passed, r.total,
                   f"{r.seconds:.1f}", r.status,
                   "; ".join(f"{k}:{v}" for k, v in getattr(r, "hints", {}).items()),
                   "; ".join(r.flags)]
            w.writerow(row + [row_checksum(row, key)])
    os.replace(tmp, path)


def verify_csv(path, key: bytes | None = None) -> list[str]:
    """The problems of a gradebook CSV written by :func:`write_csv`: one line per row whose
    checksum does not match its cells (edited after grading); empty when every row checks."""
    key = grading_key() if key is None else key
    bad = []
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows or rows[0][-1:] != ["checksum"]:
        return [f"{path}: no checksum column (not written by the grader)"]
    for i, row in enumerate(rows[1:], start=2):
        if not row:
            continue
        if not hmac.compare_digest(row_checksum(row[:-1], key), row[-1]):
            bad.append(f"{path} line {i} ({row[1] if len(row) > 1 else '?'}): the checksum does "
                       "not match: the row was changed after grading")
    return bad


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
        name = name[:150]
        lines = [f"# Feedback: {r.notebook}", "",
                 f"Chapter {r.chapter or '?'}, seed {r.seed}: {r.passed} of {r.total} passed.", ""]
        for n, v in r.exercises.items():
            msg, hint = r.messages.get(n, ("", ""))
            seen = getattr(r, "hints", {}).get(n)
            lines.append(f"- **{n}** {v.upper()}: {msg}" + (f" (hints seen: {seen})" if seen
                                                              else ""))
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
