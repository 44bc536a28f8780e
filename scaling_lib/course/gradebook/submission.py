"""Reading a submission: match its cells with the chapter's, find its seed, note edits.

:func:`plan_submission` walks the submitted notebook and sorts each code cell into "locked" (a
cell of the exercise notebook, unchanged), "graded" (an exercise's ``%%graded`` cell, whose locked
lines must all still be there, in order) or "added" (anything else). The :class:`Plan` says what to
run, the seed (the ``SEED = n`` literal of the locked set-up cell), which lines are the student's
own (for :func:`~scaling_lib.course.gradebook.flags.scan`) and what to flag.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .chapter import Chapter, _graded_name, _lines

_SEED_LINE = re.compile(r"^(\s*SEED\s*=\s*)(-?\d+)", re.M)
SEED_RANGE = 2**32   # seeds are 0 <= SEED < 2**32 (what `draw` uses)


def seed_value(text: str) -> int | None:
    """The integer of a ``SEED = n`` literal if 0 <= n < 2**32, else None (a SEED with thousands
    of digits is never converted)."""
    text = text.strip()
    if not text.isdigit() or len(text) > 10:
        return None
    n = int(text)
    return n if n < SEED_RANGE else None


def with_seed(source: str, seed: int) -> str:
    """``source`` with its ``SEED = n`` lines set to ``seed``."""
    return _SEED_LINE.sub(lambda m: m.group(1) + str(int(seed)), source)


def runnable(source: str, ex) -> tuple[str, bool]:
    """The graded cell without its checker call (its lines blanked, line numbers kept), and
    whether the call was found as the exercise wrote it. The expected value is never computed
    where the student's code runs."""
    import ast

    lines = source.splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    n = len(ex.check_lines)
    if n and [ln.rstrip() for ln in lines[-n:]] == list(ex.check_lines):
        return "\n".join(lines[:-n] + [""] * n), True
    body = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in lines)
    try:
        tree = ast.parse(body)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return source, False   # it does not parse: the %%graded magic runs none of it
    for st in reversed(tree.body):
        f = st.value.func if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call) else None
        name = f.id if isinstance(f, ast.Name) else getattr(f, "attr", None)
        if name in ("check", "check_function"):
            for i in range(st.lineno - 1, st.end_lineno):
                lines[i] = ""
            break
    return "\n".join(lines), False


def _normal(source: str) -> list[str]:
    return _lines(_SEED_LINE.sub(lambda m: m.group(1) + "<seed>", source))


def _match_segments(lines: list[str], segs: list[list[str]]) -> tuple[bool, set]:
    """Whether ``lines`` keep every locked segment in order (first at the top, last at the
    bottom); and the numbers (1-based) of the lines that are not locked: the student's."""
    segs = [_lines("\n".join(s)) if i == len(segs) - 1 else s for i, s in enumerate(segs)]
    locked, pos, ok = set(), 0, True
    for i, seg in enumerate(segs):
        n = len(seg)
        if not n:
            continue
        if i == 0:
            at = 0 if lines[:n] == seg else -1
        elif i == len(segs) - 1:
            at = len(lines) - n if len(lines) - n >= pos and lines[len(lines) - n:] == seg else -1
        else:
            at = next((j for j in range(pos, len(lines) - n + 1) if lines[j:j + n] == seg), -1)
        if at < 0:
            ok = False
            continue
        locked.update(range(at, at + n))
        pos = at + n
    return ok, {j + 1 for j in range(len(lines)) if j not in locked}


@dataclass
class Plan:
    """A submission read and compared with its chapter: what to run, what to flag."""

    cells: list    # [(kind, source, exercise name)]; kind "locked" (the exercise notebook's own
                   # source), "graded" (the student's, without the checker call) or "added"
    seed: int | None
    flags: list
    student_code: dict            # where -> (source, set of line numbers that are the student's)
    missing: list                 # exercises without a graded cell


def plan_submission(nb, chapter: Chapter) -> Plan:
    flags: list = []
    tmpl = [c for c in chapter.template.cells if c.cell_type == "code"
            and "graded" not in c.metadata.get("tags", [])]
    wanted = [(_normal(c.source), c.source) for c in tmpl]
    cells, student_code, seen, seed_cells, loose_seeds = [], {}, set(), [], []
    ti = 0
    for number, c in enumerate(nb.cells, start=1):
        if c.get("cell_type") != "code":
            continue
        src = c.get("source", "")
        name = _graded_name(c)
        if name in chapter.exercises and name not in seen:
            seen.add(name)
            ex = chapter.exercises[name]
            ok, mine = _match_segments(_lines(src), ex.locked)
            if not ok:
                flags.append(f"{name}: locked lines of the graded cell were edited")
            run, _ = runnable(src, ex)
            cells.append(("graded", run, name))
            student_code[name] = (src, mine)
            continue
        norm = _normal(src)
        hit = next((j for j in range(ti, len(wanted)) if wanted[j][0] == norm), None)
        if hit is not None:
            for j in range(ti, hit):   # skipped locked cells still run, as the exercise has them
                flags.append(f"locked cell edited or removed: `{_first(wanted[j][1])}`")
                cells.append(("locked", wanted[j][1], None))
            ti = hit + 1
            cells.append(("locked", wanted[hit][1], None))
            if _SEED_LINE.search(src):
                seed_cells.append(src)
        else:
            cells.append(("added", src, None))
            student_code[f"cell {number} (not in the exercise)"] = (
                src, set(range(1, len(_lines(src)) + 1)))
            if not seen and _SEED_LINE.search(src):
                loose_seeds.append(src)
    for j in range(ti, len(wanted)):
        flags.append(f"locked cell edited or removed: `{_first(wanted[j][1])}`")
        cells.append(("locked", wanted[j][1], None))
    missing = [n for n in chapter.exercises if n not in seen]
    for n in missing:
        flags.append(f"{n}: its graded cell is missing")
    seed = None
    if seed_cells or loose_seeds:
        text = _SEED_LINE.search((seed_cells or loose_seeds)[0]).group(2)
        seed = seed_value(text)
        if seed is None:
            shown = text if len(text) <= 20 else f"{text[:12]}... ({len(text)} digits)"
            flags.append(f"SEED = {shown} is not in 0 <= SEED < 2**32: the seed is unknown")
        elif not seed_cells:  # the set-up cell was edited: take its SEED line, and say so
            flags.append(f"SEED = {seed} read from an edited set-up cell")
    else:
        flags.append("no `SEED = <integer>` line before the first exercise: the seed is unknown")
    return Plan(cells, seed, flags, student_code, missing)


def _first(src: str) -> str:
    lines = [ln for ln in src.splitlines() if ln.strip() and not ln.startswith("#")]
    text = lines[0].strip() if lines else src.strip()[:40]
    return text if len(text) <= 60 else text[:57] + "..."
