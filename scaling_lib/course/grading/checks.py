"""The checker of a number: :func:`check` prints the verdict that :func:`assess` gives.

Each exercise sets its own tolerance with ``check(..., rtol=, atol=)``; the default is 2%
relative. :func:`assess` is the comparison itself (a verdict and its message);
``tests/test_wrong_methods.py`` calls it to show that each exercise's listed wrong methods FAIL
and its accepted approximations PASS.
"""

from __future__ import annotations

import numpy as np

from .answers import _compare
from .feedback import DEFAULT_RTOL, FAIL, NOT_SOLVED, PASS, _emit, _fmt, _is_unanswered, _within


def assess(answer, expected, *, rtol: float = DEFAULT_RTOL, atol: float = 0.0,
           unit: str = "") -> tuple[str, str]:
    """The verdict on ``answer`` and its message, as :func:`check` prints them (without the name).

    Numbers (int, float, numpy numbers and arrays, Fraction, Decimal) pass when
    ``|answer - expected| <= atol + rtol * |expected|``; booleans and strings must match exactly.
    Text, booleans, complex numbers, dates and values too large for a float are refused with a
    message saying what was expected. A miss is described by direction and rough factor.

    >>> assess(8 * 295.3, 295.3)
    ('FAIL', 'got 2362, about 8x too large: bits vs bytes?')
    >>> assess(None, 1.0)
    ('NOT SOLVED YET', 'replace None with your answer')
    """
    if _is_unanswered(answer):
        return NOT_SOLVED, "replace None with your answer"
    ok, reason = _compare(answer, expected, rtol, atol, unit)
    if not ok:
        return FAIL, reason
    u = f" {unit}" if unit else ""
    if isinstance(expected, (str, bool, np.bool_)):
        return PASS, f"{_fmt(answer)}{u}"
    shown = _fmt(expected) if np.ndim(expected) == 0 else "all values"
    return PASS, f"{_fmt(answer)}{u} (expected {shown} {_within(rtol, atol)})"


def check(answer, expected, *, name: str = "exercise", rtol: float = DEFAULT_RTOL,
          atol: float = 0.0, unit: str = "", hint: str = "") -> None:
    """Compare a student's ``answer`` with ``expected`` and print one verdict line.

    ``answer`` of None or ``...`` means the exercise is not solved yet. Numbers (and arrays) pass
    when within ``rtol`` relative (or ``atol`` absolute) tolerance; strings and booleans must match
    exactly. On failure the message says in which direction and by roughly what factor the answer
    is off (naming the usual slip for factors like 2, 8, 1000 or 1.07), never the expected value.
    Prints the verdict and returns None (so a notebook shows only the verdict line); a grading
    tool reads the line's leading marker.

    >>> check(295.0, 295.3, name="1.2", unit="tokens")
    PASS: 1.2: 295 tokens (expected 295.3 within 2%)
    >>> check(None, 295.3, name="1.2")
    NOT SOLVED YET: 1.2: replace None with your answer
    >>> check(30.0, 295.3, name="1.2", hint="C / W")
    FAIL: 1.2: got 30, about 10x too small
        hint: C / W
    >>> check(295.3 * 2**30 / 1e9, 295.3, name="1.2", unit="bytes")
    FAIL: 1.2: got 317.1 bytes, off by ~1.07, too large: GB vs GiB?
    >>> check(288.0, 295.3, name="1.2")
    FAIL: 1.2: got 288, close, but outside the 2% tolerance: about 3% too small
    >>> check("295", 295.3, name="1.2")
    FAIL: 1.2: expected a number, got the text '295': write the number without quotes
    """
    verdict, message = assess(answer, expected, rtol=rtol, atol=atol, unit=unit)
    _emit(verdict, name, message, hint)
