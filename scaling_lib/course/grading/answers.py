"""What counts as an answer, and whether it is close enough to the expected one.

Numbers (int, float, numpy numbers and arrays, lists of numbers, Fraction, Decimal, JAX arrays)
are compared as floats within a tolerance; booleans and strings must match exactly. Text,
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


def _compare(answer, expected, rtol: float, atol: float, unit: str = "") -> tuple[bool, str]:
    """(ok, reason): reason is empty for an answer in tolerance, else the feedback."""
    if isinstance(expected, (str, bool, np.bool_)):
        if isinstance(expected, (bool, np.bool_)):
            if not isinstance(answer, (bool, np.bool_)):
                return False, (f"expected True or False, got {type(answer).__name__} "
                               f"{_short(answer)}")
            ok = bool(answer) == bool(expected)
        else:
            if not isinstance(answer, str):
                return False, (f"expected text (a string), got {type(answer).__name__} "
                               f"{_short(answer)}")
            ok = answer == expected
        return ok, "" if ok else f"got {answer!r}, which is not the right answer"
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
    plain = isinstance(answer, (numbers.Real, np.ndarray)) and not isinstance(answer, Fraction)
    shown = f"got {_fmt(answer if plain else got[()])}{' ' + unit if unit else ''}, "
    if want.ndim == 0:
        return False, shown + _miss(float(got), float(want), rtol, atol)
    bad = np.argwhere(~close)
    first = tuple(int(i) for i in bad[0])
    how = _miss(float(got[first]), float(want[first]), rtol, atol)
    where = first[0] if len(first) == 1 else first
    return False, (f"{shown}{len(bad)} of {want.size} values are off; the first, at index "
                   f"{where}, is {how}")
