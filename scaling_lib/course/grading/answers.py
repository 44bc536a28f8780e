"""What counts as an answer, and whether it is close enough to the expected one.

Numbers (int, float, numpy numbers and arrays, lists of numbers, Fraction, Decimal, JAX arrays)
are compared as floats within a tolerance. Yes/no and named answers ignore case and surrounding
spaces: a yes/no exercise takes True/False or the words ("Yes", " no "), and a named answer takes
the spellings its key lists in ``SYNONYMS``. Arrays that differ are summarised (shape, how many
values differ, the first index and its value), never printed whole. Text,
booleans, complex numbers, dates and values too large for a float are refused (``_Rejected``)
with a message saying what was expected instead, never with a traceback.
"""

from __future__ import annotations

import contextlib
import datetime
import math
import numbers
from decimal import Decimal
from fractions import Fraction

import numpy as np

from .feedback import _fmt, _miss, _short

# ---- What counts as a numeric answer ---------------------------------------------------------

class _Rejected(Exception):
    """An answer of the wrong kind; the message says what was expected instead."""


def _scalar(x) -> float:
    """``x`` as a float, or :class:`_Rejected` saying why it is not a real number."""
    if isinstance(x, (bool, np.bool_)):
        raise _Rejected(f"expected a number, got the boolean {bool(x)}")
    if isinstance(x, (str, bytes, bytearray, np.str_, np.bytes_)):
        raise _Rejected(f"expected a number, got the text {x!r}: write the number without quotes")
    if isinstance(x, (complex, np.complexfloating)):
        raise _Rejected(f"expected a real number, got the complex number {x}")
    if isinstance(x, datetime.timedelta):
        raise _Rejected("expected a number, got a timedelta: give seconds as a number "
                        "(.total_seconds())")
    if isinstance(x, (datetime.date, datetime.time, np.datetime64, np.timedelta64)):
        raise _Rejected(f"expected a number, got the date or time {x}")
    if isinstance(x, (numbers.Real, Decimal)):
        try:
            return float(x)
        except OverflowError:
            digits = int(math.log10(abs(int(x)))) if isinstance(x, numbers.Rational) else None
            size = f" (about 1e{digits})" if digits else ""
            raise _Rejected(f"the answer is too large to be a float{size}: check its units and "
                            "exponents") from None
        except (ValueError, TypeError) as exc:
            raise _Rejected(f"expected a number, got {x!r} ({exc})") from None
    if x is None or x is Ellipsis or x is NotImplemented:
        raise _Rejected(f"expected a number, got {x!r}")
    raise _Rejected(f"expected a number, got {type(x).__name__} {_short(x)}")


def _as_floats(x) -> np.ndarray:
    """A real answer (number, array, list of numbers) as a float array, or :class:`_Rejected`."""
    if isinstance(x, (list, tuple)):
        vals = [_as_floats(v) for v in x]
        try:
            return np.array(vals, dtype=float)
        except ValueError:
            raise _Rejected("expected a rectangular array of numbers, got a ragged list") from None
    if isinstance(x, np.ndarray) or (hasattr(x, "__array__") and not isinstance(x, np.generic)):
        try:
            arr = np.asarray(x)
        except Exception as exc:  # an exotic object: say what it was
            raise _Rejected(f"expected a number, got {type(x).__name__} ({exc})") from None
        kind = arr.dtype.kind
        if kind in "iuf":
            return arr.astype(float)
        if kind == "b":
            raise _Rejected("expected numbers, got an array of booleans")
        if kind == "c":
            raise _Rejected("expected real numbers, got an array of complex numbers")
        if kind in "USa":
            raise _Rejected("expected numbers, got an array of text")
        if kind in "Mm":
            raise _Rejected("expected numbers, got an array of dates or times")
        if kind == "O":
            return np.array([_scalar(v) for v in arr.ravel()], dtype=float).reshape(arr.shape)
        if arr.dtype.names is None:  # e.g. bfloat16 from JAX (ml_dtypes): convertible to float
            with contextlib.suppress(TypeError, ValueError):
                return arr.astype(float)
        raise _Rejected(f"expected numbers, got an array of dtype {arr.dtype}")
    return np.asarray(_scalar(x))


_YES = ("yes", "y", "true")
_NO = ("no", "n", "false")


def _words(x: str) -> str:
    """Text as compared: case folded, surrounding and repeated spaces removed."""
    return " ".join(str(x).split()).casefold()


def _text_matches(answer: str, expected: str, synonyms=None) -> bool:
    """``answer`` names ``expected``: case and spaces ignored, yes/no spellings and the
    exercise's listed synonyms (``{answer: (spelling, ...)}``) accepted."""
    got, want = _words(answer), _words(expected)
    accepted = {want}
    for spellings in (_YES, _NO):
        if want in spellings:
            accepted.update(spellings)
    for canonical, others in (synonyms or {}).items():
        if _words(canonical) == want:
            accepted.update(_words(o) for o in ((others,) if isinstance(others, str) else others))
    return got in accepted


def _compare_named(answer, expected, synonyms=None) -> tuple[bool, str]:
    """Yes/no (a boolean or the words) and named answers (text)."""
    if isinstance(expected, (bool, np.bool_)):
        if isinstance(answer, str) and _words(answer) in _YES + _NO:
            ok = (_words(answer) in _YES) == bool(expected)
        elif isinstance(answer, (bool, np.bool_)):
            ok = bool(answer) == bool(expected)
        else:
            return False, (f"expected True or False (or yes/no), got {type(answer).__name__} "
                           f"{_short(answer)}")
    else:
        if isinstance(answer, (bool, np.bool_)) and _words(expected) in _YES + _NO:
            ok = bool(answer) == (_words(expected) in _YES)
        elif not isinstance(answer, str):
            return False, (f"expected text (a string), got {type(answer).__name__} "
                           f"{_short(answer)}")
        else:
            ok = _text_matches(answer, expected, synonyms)
    return ok, "" if ok else f"got {_short(answer)}, which is not the right answer"


def _array_miss(got: np.ndarray, want: np.ndarray, close: np.ndarray, rtol: float,
                atol: float, unit: str = "") -> str:
    """How two arrays of one shape differ, summarised: how many values, the first index, its
    value and how it misses (the expected values are not shown)."""
    bad = np.argwhere(~close)
    first = tuple(int(i) for i in bad[0])
    where = first[0] if len(first) == 1 else first
    how = _miss(float(got[first]), float(want[first]), rtol, atol, unit)
    return (f"{len(bad)} of {want.size} values differ; the first, at index {where}, "
            f"is {_fmt(float(got[first]))}, {how}")


def _compare(answer, expected, rtol: float, atol: float, unit: str = "",
             synonyms=None) -> tuple[bool, str]:
    """(ok, reason): reason is empty for an answer in tolerance, else the feedback."""
    if isinstance(expected, (str, bool, np.bool_)):
        return _compare_named(answer, expected, synonyms)
    try:
        want = _as_floats(expected)
    except _Rejected as exc:
        raise ValueError(f"the answer key gave {expected!r}, which the checker cannot compare "
                         f"({exc}); this is a bug in the exercise, not in your answer") from None
    try:
        got = _as_floats(answer)
    except _Rejected as exc:
        return False, str(exc)
    if got.shape != want.shape:
        if want.ndim == 0:
            return False, f"expected one number, got an array of shape {got.shape}"
        return False, f"expected an array of shape {want.shape}, got shape {got.shape}"
    close = np.isclose(got, want, rtol=rtol, atol=atol) | (got == want)
    if bool(np.all(close)):
        return True, ""
    u = " " + unit if unit else ""
    if want.ndim == 0:
        plain = isinstance(answer, (numbers.Real, np.ndarray)) and not isinstance(answer, Fraction)
        return False, f"got {_fmt(answer if plain else got[()])}{u}, " + _miss(
            float(got), float(want), rtol, atol, unit)
    return False, (f"got an array of shape {got.shape}{u}: "
                   + _array_miss(got, want, close, rtol, atol, unit))


def _distance(answer, value) -> float:
    """The largest relative difference between two answers of one shape (inf if not numbers)."""
    try:
        a, b = _as_floats(answer), _as_floats(value)
    except _Rejected:
        return math.inf
    if a.shape != b.shape:
        return math.inf
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.abs(a - b) / np.maximum(np.abs(b), 1e-300)
    return float(np.max(d)) if d.size else 0.0
