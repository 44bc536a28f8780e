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


def check_positive(name: str, value, *, allow_zero: bool = False):
    """Raise ValueError unless every element of ``value`` is a positive finite number.

    Returns the value as a float or a float numpy array, so callers can use the result directly.

    >>> check_positive("B", 8)
    8.0
    """
    try:
        arr = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"{name}={value!r} must be a number (or an array of numbers)") from None
    rule = ">= 0" if allow_zero else "> 0"
    bad = ~np.isfinite(arr) | ((arr < 0) if allow_zero else (arr <= 0))
    if np.any(bad):
        shown = value if arr.ndim == 0 else arr[bad].ravel()[:5].tolist()
        raise ValueError(f"{name}={shown!r} is not allowed: {name} must be finite and {rule}")
    return float(arr) if arr.ndim == 0 else arr


def scalar_or_array(x):
    """A 0-d result as a Python float, an array as a float numpy array (for clean output).

    >>> scalar_or_array(np.float64(2.0)), scalar_or_array([1, 2])
    (2.0, array([1., 2.]))
    """
    arr = np.asarray(x, dtype=float)
    return float(arr) if arr.ndim == 0 else arr


def _format(value: float, unit: str, prefixes: list[tuple[float, str]], digits: int) -> str:
    value = float(value)
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
    s = float(seconds)
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
    return f"{100 * float(fraction):.{digits}f}%"
