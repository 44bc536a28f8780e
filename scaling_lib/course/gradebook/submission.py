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

    cells: list    # [(kind, source, exercise name)]; kind "locked", "graded" or "added"
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
            cells.append(("graded", src, name))
            student_code[name] = (src, mine)
            continue
        norm = _normal(src)
        hit = next((j for j in range(ti, len(wanted)) if wanted[j][0] == norm), None)
        if hit is not None:
            for j in range(ti, hit):
                flags.append(f"locked cell edited or removed: `{_first(wanted[j][1])}`")
            ti = hit + 1
            cells.append(("locked", src, None))
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
    missing = [n for n in chapter.exercises if n not in seen]
    for n in missing:
        flags.append(f"{n}: its graded cell is missing")
    seed = None
    if seed_cells:
        seed = int(_SEED_LINE.search(seed_cells[0]).group(2))
    elif loose_seeds:  # the set-up cell was edited: take its SEED line, and say so
        seed = int(_SEED_LINE.search(loose_seeds[0]).group(2))
        flags.append(f"SEED = {seed} read from an edited set-up cell")
    else:
        flags.append("no `SEED = <integer>` line before the first exercise: the seed is unknown")
    return Plan(cells, seed, flags, student_code, missing)


def _first(src: str) -> str:
    lines = [ln for ln in src.splitlines() if ln.strip() and not ln.startswith("#")]
    text = lines[0].strip() if lines else src.strip()[:40]
    return text if len(text) <= 60 else text[:57] + "..."
