"""Units, dtype sizes and human-readable formatting.

Every quantity in ``scaling_lib`` is stored in SI base units as a plain float: bytes, seconds,
FLOPs, FLOP/s, bytes/s. Prefixes and ``%`` appear only when a number is formatted for a reader.
Decimal prefixes follow vendors' datasheets (1 GB = 1e9 bytes); binary ones (GiB) are separate.

See: Chapter 1, "Where time goes".
"""

from __future__ import annotations

import math

import numpy as np

# SI decimal prefixes (BIPM SI Brochure, 9th edition, table 7).
KILO = 1e3
MEGA = 1e6
GIGA = 1e9
TERA = 1e12
PETA = 1e15
EXA = 1e18
ZETTA = 1e21
MICRO = 1e-6
MILLI = 1e-3
NANO = 1e-9

# IEC binary prefixes (IEC 80000-13).
KiB = 2**10
MiB = 2**20
GiB = 2**30
TiB = 2**40

# Time.
MINUTE = 60.0
HOUR = 3600.0
DAY = 86400.0

# Bytes per element of each numeric format. tf32 is stored in 4 bytes (it is an fp32 number whose
# mantissa the tensor core truncates to 10 bits). fp8 covers e4m3 and e5m2; int4/fp4 pack two
# values per byte.
DTYPE_BYTES: dict[str, float] = {
    "fp64": 8.0,
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
    "fp4": 0.5,
}

# Common spellings mapped to the canonical names above.
_DTYPE_ALIASES = {
    "float64": "fp64",
    "float32": "fp32",
    "float": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float8": "fp8",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "e4m3": "fp8",
    "e5m2": "fp8",
    "uint8": "int8",
}


def canonical_dtype(dtype) -> str:
    """Return the canonical name of ``dtype`` (``"bfloat16"`` -> ``"bf16"``).

    Accepts our names, common aliases and numpy dtypes. Raises ValueError naming the valid choices.

    >>> canonical_dtype("bfloat16")
    'bf16'
    """
    name = getattr(dtype, "name", dtype)
    if not isinstance(name, str):
        name = str(name)
    key = name.strip().lower()
    key = _DTYPE_ALIASES.get(key, key)
    if key not in DTYPE_BYTES:
        raise ValueError(
            f"unknown dtype {dtype!r}; valid choices: {', '.join(DTYPE_BYTES)} "
            f"(aliases: {', '.join(sorted(_DTYPE_ALIASES))})"
        )
    return key


def dtype_bytes(dtype) -> float:
    """Bytes per element of ``dtype``.

    >>> dtype_bytes("bf16"), dtype_bytes("fp32"), dtype_bytes("int4")
    (2.0, 4.0, 0.5)
    """
    return DTYPE_BYTES[canonical_dtype(dtype)]


# ---- input validation -----------------------------------------------------------------------
# Every public function checks its arguments with these, so bad input raises one kind of error,
# ValueError, naming the value, the rule and (where there are some) the valid choices.

# Largest count accepted: above 2**53 a float can no longer hold every integer, so a count that
# large has lost its last digits (and is a typo in any estimate this book makes).
MAX_COUNT = 2**53
# Largest number of devices (and parallel degree) accepted: 16.7 million accelerators, far beyond
# any cluster, and small enough that listing its divisors (for an error message) stays instant.
MAX_DEVICES = 2**24

_NOT_REAL = (str, bytes, bytearray, bool, np.bool_, complex, np.complexfloating)


def _real_array(name: str, value) -> np.ndarray:
    """``value`` as a float array, or ValueError for anything that is not real numbers."""
    if value is None or isinstance(value, _NOT_REAL):
        raise ValueError(f"{name}={_brief(value)} must be a number, not {type(value).__name__}")
    try:
        arr = np.asarray(value)
    except Exception:  # ragged nested lists and other shapes numpy refuses
        raise ValueError(f"{name}={_brief(value)} must be a number or an array of numbers") from None
    if arr.dtype.kind not in "iufO":  # bool, complex, strings, datetimes, structured
        raise ValueError(f"{name}={_brief(value)} must be a number (or an array of numbers), "
                         f"not {arr.dtype}")
    if arr.dtype.kind == "O" and any(v is None or isinstance(v, _NOT_REAL)
                                     for v in arr.ravel()[:1000]):
        raise ValueError(f"{name}={_brief(value)} must be a number (or an array of numbers)")
    try:
        return arr.astype(float)
    except OverflowError:
        raise ValueError(f"{name}={_brief(value)} is too large: it does not fit in a float "
                         "(about 1.8e308)") from None
    except (TypeError, ValueError):
        raise ValueError(f"{name}={_brief(value)} must be a number (or an array of numbers)") from None


def _brief(value) -> str:
    """``repr(value)`` cut to a readable length (huge integers show their digit count)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**30:
        return _short_int(value)
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _shown(value, arr, bad):
    return _brief(value) if arr.ndim == 0 else _brief(arr[bad].ravel()[:5].tolist())


def _result(arr: np.ndarray):
    return float(arr) if arr.ndim == 0 else arr


def check_positive(name: str, value, *, allow_zero: bool = False, maximum=None):
    """Raise ValueError unless every element of ``value`` is a positive finite number.

    Rejects bools, strings, bytes, complex numbers and None; ``maximum`` (optional) is an upper
    bound. Returns the value as a float or a float numpy array, so callers can use the result
    directly.

    >>> check_positive("B", 8)
    8.0
    >>> check_positive("B", -1)
    Traceback (most recent call last):
    ...
    ValueError: B=-1 is not allowed: B must be finite and > 0
    """
    if maximum is not None:
        maximum = _bound("maximum", maximum)
    arr = _real_array(name, value)
    rule = ">= 0" if allow_zero else "> 0"
    bad = ~np.isfinite(arr) | ((arr < 0) if allow_zero else (arr <= 0))
    if np.any(bad):
        raise ValueError(f"{name}={_shown(value, arr, bad)} is not allowed: {name} must be "
                         f"finite and {rule}")
    if maximum is not None and np.any(arr > maximum):
        raise ValueError(f"{name}={_shown(value, arr, arr > maximum)} is too large: {name} must "
                         f"be <= {maximum:g}")
    return _result(arr)


def check_real(name: str, value):
    """Raise ValueError unless ``value`` is a finite real number or array of them (any sign).

    >>> check_real("factor", -2)
    -2.0
    """
    arr = _real_array(name, value)
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{name}={_shown(value, arr, ~np.isfinite(arr))} must be finite")
    return _result(arr)


def check_count(name: str, value, *, minimum: int = 1, maximum: int = MAX_COUNT,
                sweep: bool = False):
    """Raise ValueError unless every element of ``value`` is a whole number in [minimum, maximum].

    For counts (sequences, tokens, devices, layers, degrees of parallelism): accepts Python and
    numpy integers, integral floats (4096.0) and arrays of them; rejects bools, strings, complex
    numbers, fractions (``dp=0.5``), NaN and infinities, and values above ``maximum`` (2**53 by
    default: beyond it floats skip integers). Returns a float or a float array, ready for
    arithmetic (use :func:`check_int` for an exact Python int).

    ``sweep=True`` lets an *array* hold non-integral values (a figure sweeping T or S over a
    geometric grid treats them as continuous); a single value must still be whole.

    >>> check_count("T", 4096)
    4096.0
    >>> check_count("dp", 0.5)
    Traceback (most recent call last):
    ...
    ValueError: dp=0.5 is not allowed: dp must be a whole number >= 1
    """
    minimum, maximum = _bound("minimum", minimum), _bound("maximum", maximum)
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)) \
            and int(value) > maximum:  # exact test before any float conversion
        raise ValueError(f"{name}={_short_int(value)} is too large: {name} must be <= "
                         f"{maximum:,}")
    arr = _real_array(name, value)
    fractional = (arr != np.round(arr)) if not (sweep and arr.ndim) else False
    bad = ~np.isfinite(arr) | fractional | (arr < minimum)
    if np.any(bad):
        raise ValueError(f"{name}={_shown(value, arr, bad)} is not allowed: {name} must be a "
                         f"whole number >= {minimum}")
    if np.any(arr > maximum):
        raise ValueError(f"{name}={_shown(value, arr, arr > maximum)} is too large: {name} "
                         f"must be <= {maximum:,}")
    return _result(arr)


def _bound(name: str, value):
    """A bound passed to a validator: a real number, returned unchanged (ints stay exact)."""
    _number(name, value)
    return value


def _short_int(value) -> str:
    text = str(int(value))
    return text if len(text) <= 30 else f"{text[:6]}...({len(text.lstrip('-'))} digits)"


def check_int(name: str, value, *, minimum: int = 1, maximum: int = MAX_COUNT) -> int:
    """One integer in [minimum, maximum], returned as a Python ``int``.

    For fields of records (a config's L, a plan's tp) and sizes that must be exact: accepts
    Python and numpy integers only (a float there, even 4096.0, is usually a division gone
    wrong); rejects bools, floats, strings, arrays and values outside the bounds.

    >>> check_int("tp", np.int64(8))
    8
    >>> check_int("K", 0)
    Traceback (most recent call last):
    ...
    ValueError: K=0 is not allowed: K must be a whole number >= 1
    >>> check_int("D", 4096.0)
    Traceback (most recent call last):
    ...
    ValueError: D=4096.0 must be an integer (Python or numpy), not float
    """
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name}={_brief(value)} must be an integer (Python or numpy), not "
                         f"{type(value).__name__}")
    return _exact_int(name, value, minimum, maximum)


def _exact_int(name, value, minimum, maximum) -> int:
    minimum, maximum = _bound("minimum", minimum), _bound("maximum", maximum)
    v = int(value)
    if v < minimum:
        raise ValueError(f"{name}={v!r} is not allowed: {name} must be a whole number "
                         f">= {minimum}")
    if v > maximum:
        raise ValueError(f"{name}={_short_int(v)} is too large: {name} must be <= {maximum:,}")
    return v


def check_fraction(name: str, value, *, allow_zero: bool = False, allow_one: bool = True):
    """Raise ValueError unless every element of ``value`` is a fraction: in (0, 1] by default.

    For MFU, efficiencies, acceptance rates: ``mfu=40`` (a percentage) or ``mfu=6502`` is a
    mistake, not a fast job. Returns a float or a float array.

    >>> check_fraction("mfu", 0.4)
    0.4
    >>> check_fraction("mfu", 40)
    Traceback (most recent call last):
    ...
    ValueError: mfu=40 is not a fraction: mfu must be in (0, 1] (0.4 means 40%)
    """
    arr = _real_array(name, value)
    lo_ok = (arr >= 0) if allow_zero else (arr > 0)
    hi_ok = (arr <= 1) if allow_one else (arr < 1)
    bad = ~np.isfinite(arr) | ~lo_ok | ~hi_ok
    if np.any(bad):
        interval = ("[" if allow_zero else "(") + "0, 1" + ("]" if allow_one else ")")
        raise ValueError(f"{name}={_shown(value, arr, bad)} is not a fraction: {name} must be "
                         f"in {interval} (0.4 means 40%)")
    return _result(arr)


def check_choice(name: str, value, choices):
    """Return ``value`` if it is one of ``choices``, else raise ValueError listing them.

    Bools are not taken for the integers 0 and 1, nor numpy arrays for anything.

    >>> check_choice("zero", 3, (0, 1, 2, 3))
    3
    >>> check_choice("schedule", "zb", ("1f1b", "gpipe"))
    Traceback (most recent call last):
    ...
    ValueError: schedule='zb'; valid choices: 1f1b, gpipe
    """
    if isinstance(choices, (str, bytes)) or not hasattr(choices, "__iter__"):
        raise ValueError(f"choices={_brief(choices)} must be a collection of the valid values")
    choices = tuple(choices)
    ok = False
    if not isinstance(value, np.ndarray) and not (
            isinstance(value, (bool, np.bool_)) and not any(isinstance(c, bool) for c in choices)):
        try:
            ok = any((type(value) is type(c) or isinstance(value, str) and isinstance(c, str))
                     and value == c for c in choices) or \
                any(isinstance(value, np.integer) and isinstance(c, int)
                    and not isinstance(c, bool) and int(value) == c for c in choices)
        except Exception:
            ok = False
    if not ok:
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise ValueError(f"{name}={shown}; valid choices: {', '.join(map(str, choices))}")
    return int(value) if isinstance(value, np.integer) else value


def divisors(n: int) -> list[int]:
    """Every divisor of ``n``, ascending, found in pairs (d, n // d) with d up to √n.

    For the valid choices an error message lists; ``n`` at most 2**40 (a million steps).

    >>> divisors(12), divisors(1)
    ([1, 2, 3, 4, 6, 12], [1])
    """
    n = check_int("n", n, maximum=2**40)
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return small + large[::-1]


def scalar_or_array(x):
    """A 0-d result as a Python float, an array as a float numpy array (for clean output).

    >>> scalar_or_array(np.float64(2.0)), scalar_or_array([1, 2])
    (2.0, array([1., 2.]))
    """
    return _result(_real_array("x", x))


def _number(name: str, value) -> float:
    """One real number (any sign, NaN and infinities allowed) for formatting."""
    arr = _real_array(name, value)
    if arr.ndim:
        raise ValueError(f"{name}={_brief(value)} must be one number, not an array; format "
                         "each element")
    return float(arr)


def _digits(digits) -> int:
    return check_int("digits", digits, minimum=1, maximum=17)


def _format(value: float, unit: str, prefixes: list[tuple[float, str]], digits: int) -> str:
    value = _number("value", value)
    digits = _digits(digits)
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}"
    mag = abs(value)
    for scale, prefix in prefixes:
        if mag >= scale:
            return f"{value / scale:.{digits}g} {prefix}{unit}"
    scale, prefix = prefixes[-1]
    return f"{value / scale:.{digits}g} {prefix}{unit}"


_SI = [
    (EXA, "E"),
    (PETA, "P"),
    (TERA, "T"),
    (GIGA, "G"),
    (MEGA, "M"),
    (KILO, "k"),
    (1.0, ""),
]


def fmt_bytes(nbytes: float, digits: int = 3, binary: bool = False) -> str:
    """Format a byte count with decimal (default) or binary prefixes.

    >>> fmt_bytes(80e9), fmt_bytes(16 * GiB, binary=True)
    ('80 GB', '16 GiB')
    """
    if not isinstance(binary, (bool, np.bool_)):
        raise ValueError(f"binary={_brief(binary)} must be True or False")
    if binary:
        prefixes = [(TiB, "Ti"), (GiB, "Gi"), (MiB, "Mi"), (KiB, "Ki"), (1.0, "")]
        return _format(nbytes, "B", prefixes, digits)
    return _format(nbytes, "B", _SI, digits)


def fmt_flops(flops: float, digits: int = 3) -> str:
    """Format a FLOP count.

    >>> fmt_flops(3.8e25)
    '3.8e+25 FLOPs'
    >>> fmt_flops(2e12)
    '2 TFLOPs'
    """
    flops, digits = _number("flops", flops), _digits(digits)
    if abs(flops) >= 1e21:
        return f"{flops:.{digits}g} FLOPs"
    return _format(flops, "FLOPs", _SI, digits)


def fmt_flops_per_s(flops_per_s: float, digits: int = 3) -> str:
    """Format a FLOP rate.

    >>> fmt_flops_per_s(989.4e12)
    '989 TFLOP/s'
    """
    return _format(flops_per_s, "FLOP/s", _SI, digits)


def fmt_bytes_per_s(bytes_per_s: float, digits: int = 3) -> str:
    """Format a bandwidth.

    >>> fmt_bytes_per_s(3.35e12)
    '3.35 TB/s'
    """
    return _format(bytes_per_s, "B/s", _SI, digits)


def fmt_seconds(seconds: float, digits: int = 3) -> str:
    """Format a duration, from nanoseconds to days.

    >>> fmt_seconds(2.5e-6), fmt_seconds(0.25), fmt_seconds(3 * DAY)
    ('2.5 µs', '250 ms', '3 days')
    """
    s, digits = _number("seconds", seconds), _digits(digits)
    mag = abs(s)
    if mag >= DAY:
        return f"{s / DAY:.{digits}g} days"
    if mag >= HOUR:
        return f"{s / HOUR:.{digits}g} h"
    if mag >= MINUTE:
        return f"{s / MINUTE:.{digits}g} min"
    if mag >= 1 or mag == 0:
        return f"{s:.{digits}g} s"
    if mag >= MILLI:
        return f"{s / MILLI:.{digits}g} ms"
    if mag >= MICRO:
        return f"{s / MICRO:.{digits}g} µs"
    return f"{s / NANO:.{digits}g} ns"


def fmt_percent(fraction: float, digits: int = 1) -> str:
    """Format a fraction in [0, 1] as a percentage.

    >>> fmt_percent(0.4123)
    '41.2%'
    """
    fraction = _number("fraction", fraction)
    digits = check_int("digits", digits, minimum=0, maximum=17)
    return f"{100 * fraction:.{digits}f}%"
