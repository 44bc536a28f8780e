"""The checker of a number: :func:`check` prints the verdict that :func:`assess` gives.

Each exercise sets its own tolerance with ``check(..., rtol=, atol=)``; the default is 2%
relative. :func:`assess` is the comparison itself (a verdict and its message);
``tests/test_wrong_methods.py`` calls it to show that each exercise's listed wrong methods FAIL,
each with its own message, and its accepted approximations PASS.
"""

from __future__ import annotations

import numpy as np

from .answers import _compare
from .feedback import DEFAULT_RTOL, FAIL, NOT_SOLVED, PASS, _emit, _fmt, _is_unanswered, _within


_UNSET = object()


def named_mistakes(answer, expected, mistakes, p, *, rtol: float = DEFAULT_RTOL,
                   atol: float = 0.0, values: dict | None = None) -> list:
    """The listed mistakes (:class:`~.tables.Mistake`) that ``answer`` matches: the closest, and
    any that give the same answer (a yes/no exercise has one wrong answer for all its slips).

    Each mistake's answer is computed from the drawn parameters ``p``; ``answer`` matches it when
    within the exercise's tolerance of it. A mistake that gives the right answer for these
    parameters is skipped. ``values`` (label -> answer) gives mistakes' answers already computed.

    >>> from .tables import Mistake
    >>> m = [Mistake("forward only", lambda p: p * 2, "that is the forward pass only")]
    >>> [x.message for x in named_mistakes(20.0, 60.0, m, 10)]
    ['that is the forward pass only']
    """
    from .answers import _distance
    from .tables import apply

    found = []
    for m in mistakes:
        try:
            value = values[m.label] if values and m.label in values else apply(m.fn, p)
            if _compare(value, expected, 1e-12, 0.0)[0]:
                continue
            ok = _compare(answer, value, rtol, atol)[0]
        except Exception:  # a mistake that cannot be computed here is not named
            continue
        if ok:
            d = _distance(answer, value)
            found.append((0.0 if d != d or d == float("inf") else d, m))
    if not found:
        return []
    best = min(d for d, _ in found)
    return [m for d, m in found if d <= best + 1e-12]


def named_mistake(answer, expected, mistakes, p, **kw):
    """The first of :func:`named_mistakes`, or None."""
    found = named_mistakes(answer, expected, mistakes, p, **kw)
    return found[0] if found else None


def assess(answer, expected, *, rtol: float = DEFAULT_RTOL, atol: float = 0.0,
           unit: str = "", name: str | None = None, mistakes=None, p=_UNSET,
           synonyms=None) -> tuple[str, str]:
    """The verdict on ``answer`` and its message, as :func:`check` prints them (without the name).

    Numbers (int, float, numpy numbers and arrays, Fraction, Decimal) pass when
    ``|answer - expected| <= atol + rtol * |expected|``; yes/no and named answers ignore case and
    spaces and take the listed ``synonyms``. Text, booleans, complex numbers, dates and values
    too large for a float are refused with a message saying what was expected.

    A wrong answer that matches one of the exercise's listed ``mistakes`` (the answer key's
    WRONG_METHODS of exercise ``name``, computed from its drawn parameters ``p``) is named in
    the student's words; otherwise the miss is described by direction and rough factor, naming
    the usual slip of that factor only where the ``unit`` allows it.

    >>> assess(8 * 295.3, 295.3, unit="bytes")
    ('FAIL', 'got 2362 bytes, about 8x too large: bits vs bytes?')
    >>> assess(8 * 295.3, 295.3)
    ('FAIL', 'got 2362, about 8x too large')
    >>> assess(None, 1.0)
    ('NOT SOLVED YET', 'replace None with your answer')
    >>> assess(" Yes ", True)
    ('PASS', "' Yes '")
    """
    if _is_unanswered(answer):
        return NOT_SOLVED, "replace None with your answer"
    if name is not None and (mistakes is None or synonyms is None):
        from .tables import tables

        t = tables(name)
        mistakes = t.mistakes if mistakes is None else mistakes
        synonyms = t.synonyms if synonyms is None else synonyms
    ok, reason = _compare(answer, expected, rtol, atol, unit, synonyms)
    if not ok:
        if mistakes:
            from . import session

            params = session.drawn(name) if p is _UNSET and name is not None else (
                None if p is _UNSET else p)
            found = named_mistakes(answer, expected, mistakes, params, rtol=rtol, atol=atol)
            if found:
                return FAIL, f"{_shown(answer, unit)}: " + "; or ".join(_say(m) for m in found)
        return FAIL, reason
    u = f" {unit}" if unit else ""
    if isinstance(expected, (str, bool, np.bool_)):
        return PASS, f"{_fmt(answer)}{u}"
    shown = _fmt(expected) if np.ndim(expected) == 0 else "all values"
    return PASS, f"{_fmt(answer)}{u} (expected {shown} {_within(rtol, atol)})"


def _shown(answer, unit: str = "") -> str:
    """'got <answer> <unit>' as a FAIL begins (an array by its shape)."""
    u = f" {unit}" if unit else ""
    if isinstance(answer, (list, tuple)) or (not isinstance(answer, str) and np.ndim(answer)):
        return f"got an array of shape {np.shape(answer)}{u}"
    return f"got {_fmt(answer)}{u}"


def _say(m) -> str:
    """A listed mistake in the student's words: its message, or its label as a common slip."""
    return m.message if m.message != m.label else f"that matches a common slip: {m.label}"


def check(answer, expected, *, name: str = "exercise", rtol: float = DEFAULT_RTOL,
          atol: float = 0.0, unit: str = "", hint: str = "") -> None:
    """Compare a student's ``answer`` with ``expected`` and print one verdict line.

    ``answer`` of None or ``...`` means the exercise is not solved yet. Numbers (and arrays) pass
    when within ``rtol`` relative (or ``atol`` absolute) tolerance; yes/no and named answers
    ignore case and spaces. A wrong answer that matches one of the exercise's listed mistakes
    (its answer key's WRONG_METHODS) is named; otherwise the message says in which direction and
    by roughly what factor it is off, never the expected value. The exercise's hints (its key's
    HINTS) come after a FAIL: the first FAIL shows the nudge, a later one the method.
    Prints the verdict and returns None (so a notebook shows only the verdict line); a grading
    tool reads the line's leading marker, and the hints seen (see :mod:`.session`).

    >>> check(295.0, 295.3, name="ex", unit="tokens")
    PASS: ex: 295 tokens (expected 295.3 within 2%)
    >>> check(None, 295.3, name="ex")
    NOT SOLVED YET: ex: replace None with your answer
    >>> check(295.3 * 2**30 / 1e9, 295.3, name="ex", unit="bytes")
    FAIL: ex: got 317.1 bytes, off by ~1.07, too large: GB vs GiB?
    >>> check(288.0, 295.3, name="ex")
    FAIL: ex: got 288, close, but outside the 2% tolerance: about 3% too small
    >>> check("295", 295.3, name="ex")
    FAIL: ex: expected a number, got the text '295': write the number without quotes
    """
    from .tables import tables

    t = tables(name)
    verdict, message = assess(answer, expected, rtol=rtol, atol=atol, unit=unit, name=name,
                              mistakes=t.mistakes, synonyms=t.synonyms)
    _emit(verdict, name, message, hints=t.hints or ((hint,) if hint else ()))
