"""What the checker remembers in one kernel: the numbers drawn per exercise, and the hints shown.

:func:`~scaling_lib.course.grading.draw` records each exercise's drawn parameters, so a FAIL can
compute what each listed mistake would have given. Each FAIL of an exercise counts a try: the
first shows the exercise's first hint (a nudge), a later one its second (the method).

Hints shown are written into the notebook's output in a fixed form a grading tool can read back
from a submitted notebook (:func:`hints_seen_in`)::

    FAIL: 5.4: got 1.1e+24 FLOPs: that is the forward pass only: ...
        hint 1 of 2: which passes does training run over each token?
    PASS: 5.4: 3.306e+24 FLOPs (expected 3.306e+24 within 2%) [hints seen: 2]

:func:`hints_seen` gives the same count from inside the kernel.
"""

from __future__ import annotations

import re

_DRAWN: dict = {}       # exercise name -> its last drawn Params
_LAST: list = [None]    # the last Params drawn (for a cell whose draw names another exercise)
_TRIES: dict = {}       # exercise name -> FAILs so far
_SEEN: dict = {}        # exercise name -> hints shown so far (0, 1, 2)

HINT_LINE = re.compile(r"^\s+hint (\d+) of (\d+): ", re.M)
SEEN_MARK = re.compile(r"\[hints seen: (\d+)\]")
VERDICT_LINE = re.compile(r"^(PASS|FAIL|NOT SOLVED YET): ([^:\s]+): ", re.M)


def record_draw(exercise: str, params) -> None:
    _DRAWN[exercise] = params
    _LAST[0] = params


def drawn(exercise: str):
    """The parameters last drawn for ``exercise`` (else the last drawn at all, or None)."""
    return _DRAWN.get(exercise, _LAST[0])


def next_hint(name: str, hints: tuple) -> tuple[int, str] | None:
    """Count a FAIL of ``name``; the hint it earns as (number, text), or None without hints."""
    _TRIES[name] = _TRIES.get(name, 0) + 1
    if not hints:
        return None
    k = min(_TRIES[name], len(hints))
    _SEEN[name] = max(_SEEN.get(name, 0), k)
    return k, hints[k - 1]


def hints_seen(name: str | None = None):
    """Hints shown so far in this kernel: for one exercise (an int), or all (a dict)."""
    return _SEEN.get(name, 0) if name is not None else dict(_SEEN)


def hint_line(k: int, n: int, text: str) -> str:
    return f"    hint {k} of {n}: {text}"


def seen_mark(name: str) -> str:
    """' [hints seen: k]' after a PASS of an exercise whose hints were shown, else ''."""
    k = _SEEN.get(name, 0)
    return f" [hints seen: {k}]" if k else ""


def hints_seen_in(text: str) -> dict:
    """How many hints each exercise's stored output shows the student saw.

    Reads the verdict lines of a graded cell's output (or a whole notebook's outputs joined):
    the largest ``hint k of n`` after an exercise's FAIL, or the ``[hints seen: k]`` of its PASS.

    >>> hints_seen_in("FAIL: 5.4: got 2, about 2x too small\\n    hint 1 of 2: think\\n")
    {'5.4': 1}
    >>> hints_seen_in("PASS: 5.4: 4 (expected 4 within 2%) [hints seen: 2]\\n")
    {'5.4': 2}
    """
    out: dict = {}
    current = None
    for line in text.splitlines():
        v = VERDICT_LINE.match(line)
        if v:
            current = v.group(2)
            out.setdefault(current, 0)
            m = SEEN_MARK.search(line)
            if m:
                out[current] = max(out[current], int(m.group(1)))
            continue
        h = HINT_LINE.match(line)
        if h and current is not None:
            out[current] = max(out[current], int(h.group(1)))
    return out


def reset() -> None:
    """Forget draws and tries (tests; a fresh kernel starts empty)."""
    _DRAWN.clear()
    _TRIES.clear()
    _SEEN.clear()
    _LAST[0] = None
