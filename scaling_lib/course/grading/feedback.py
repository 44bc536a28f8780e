"""Verdict lines, and how far off a wrong number is, said without saying the number.

Every checker call ends in one line that starts with a fixed marker, so a grading tool can read a
folder of notebooks:

    PASS  ·  NOT SOLVED YET  ·  FAIL

A miss is described by its direction and rough size: "about 2x too large", "about 8x too small:
bits vs bytes?", "off by ~1.07, too large: GB vs GiB?", "close, but outside the 2% tolerance:
about 3% too small". A factor that betrays a common slip (unit prefixes, binary vs decimal
units, one-way vs both ways, a percentage for a fraction) is named (``_NAMED``).

See: "How to use this book", section "Exercises".
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction

import numpy as np

PASS = "PASS"
NOT_SOLVED = "NOT SOLVED YET"
FAIL = "FAIL"

DEFAULT_RTOL = 0.02


def _is_unanswered(answer) -> bool:
    return answer is None or answer is Ellipsis


def _fmt(x) -> str:
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    if isinstance(x, (int, np.integer)):
        return f"{int(x):,}"
    if isinstance(x, (float, np.floating, Fraction, Decimal)):
        try:
            return f"{float(x):.4g}"
        except (OverflowError, ValueError):
            return str(x)
    if isinstance(x, str):
        return repr(x)
    arr = np.asarray(x)
    if arr.ndim:
        return np.array2string(arr, precision=4, threshold=8)
    try:
        return f"{float(arr):.4g}"  # a 0-d array (numpy, JAX)
    except (TypeError, ValueError):
        return repr(x)


def _emit(verdict: str, name: str, message: str, hint: str = "", *, hints=None) -> None:
    """Print one verdict line. A FAIL of a checker call (``hints`` given, possibly empty) counts a
    try and shows the hint it earns (the first FAIL the first hint, a later one the second); a
    PASS says how many hints were seen; NOT SOLVED YET shows none. ``hint`` alone (an old-style
    ``check(..., hint=)``) is shown after a FAIL as the only hint."""
    from . import session

    line = f"{verdict}: {name}: {message}"
    if hints is None and hint:
        hints = (hint,)
    if verdict == FAIL and hints is not None:
        earned = session.next_hint(name, tuple(hints))
        if earned:
            line += "\n" + session.hint_line(earned[0], len(hints), earned[1])
    elif verdict == PASS:
        line += session.seen_mark(name)
    print(line)


def _short(x) -> str:
    text = repr(x)
    return text if len(text) <= 40 else text[:37] + "..."


# (factor, how to say it, cause when the answer is too large, cause when it is too small, the
# kinds of unit the cause can occur in). A ratio near a named factor gets its cause only when the
# exercise's unit makes that slip possible (bits vs bytes needs bytes; 6 vs 2 FLOPs per parameter
# needs FLOPs); otherwise only the size of the miss is said. Within 1% (in log space) for the big
# factors, 0.1% for the binary-vs-decimal ones, which sit close to near misses (kB vs KiB, 1.024,
# is left out: it cannot be told from a near miss at the usual 2% tolerance).
_TWO = "one-way vs both ways, or bytes per value (2 vs 4, 8 vs 16)?"
_BYTES, _TIME, _RATE, _FLOPS, _PLAIN, _ANY = "bytes", "time", "rate", "flops", "plain", "any"
_NAMED = [
    (2**20 / 1e6, "off by ~1.05, {}", "MB vs MiB?", "MB vs MiB?", {_BYTES}),
    (2**30 / 1e9, "off by ~1.07, {}", "GB vs GiB?", "GB vs GiB?", {_BYTES}),
    (2**40 / 1e12, "off by ~1.10, {}", "TB vs TiB?", "TB vs TiB?", {_BYTES}),
    (2, "about 2x {}", _TWO, _TWO, {_BYTES, _RATE}),
    (3, "about 3x {}", "6 vs 2 FLOPs per parameter (backward included)?",
     "2 vs 6 FLOPs per parameter (forward only)?", {_FLOPS}),
    (8, "about 8x {}", "bits vs bytes?", "bits vs bytes?", {_BYTES, _RATE}),
    (24, "about 24x {}", "hours vs days?", "hours vs days?", {_TIME}),
    (60, "about 60x {}", "seconds vs minutes, or minutes vs hours?",
     "seconds vs minutes, or minutes vs hours?", {_TIME}),
    (100, "100x {}", "a percentage instead of a fraction?", "a fraction instead of a percentage?",
     {_PLAIN}),
    (1000, "1000x {}", "a unit prefix: ms vs s, or MB vs GB?",
     "a unit prefix: ms vs s, or MB vs GB?", {_ANY}),
    (1024, "1024x {}", "KiB vs bytes, or MiB vs GiB?", "KiB vs bytes, or MiB vs GiB?", {_BYTES}),
    (3600, "about 3600x {}", "seconds vs hours?", "seconds vs hours?", {_TIME}),
    (86400, "about 86,400x {}", "seconds vs days?", "seconds vs days?", {_TIME}),
    (1e6, "1e6x {}", "two unit prefixes: µs vs s, or MB vs TB?",
     "two unit prefixes: µs vs s, or MB vs TB?", {_ANY}),
    (2**20, "2^20x {}", "MiB vs bytes?", "MiB vs bytes?", {_BYTES}),
    (1e9, "1e9x {}", "GB vs bytes, or ns vs s?", "GB vs bytes, or ns vs s?", {_ANY}),
    (2**30, "2^30x {}", "GiB vs bytes?", "GiB vs bytes?", {_BYTES}),
    (1e12, "1e12x {}", "TFLOP/s vs FLOP/s, or TB vs bytes?",
     "TFLOP/s vs FLOP/s, or TB vs bytes?", {_FLOPS, _BYTES}),
]
_TIME_UNITS = {"s", "ms", "µs", "us", "ns", "second", "seconds", "min", "minute", "minutes", "h",
               "hour", "hours", "day", "days", "s/step", "gpu-hours", "gpu-days"}


def _unit_kinds(unit: str) -> set:
    """The kinds of slip an answer in ``unit`` can show (see ``_NAMED``)."""
    u = unit.strip()
    low = u.lower()
    if not u or u in ("%", "fraction", "x", "×"):
        return {_PLAIN}
    kinds = {_ANY}
    if "flop" in low:
        kinds.add(_FLOPS)
    if "byte" in low or re.search(r"(^|[^a-z])[kmgtp]?i?b(/s)?$", low) or "b/s" in low:
        kinds.add(_BYTES)
    if "/s" in low or "per s" in low:
        kinds.add(_RATE)
    if low in _TIME_UNITS or low.endswith(" s") or low.startswith("s "):
        kinds.add(_TIME)
    return kinds


def _named_factor(f: float, unit: str = "bytes"):
    """The named slip whose factor is near ``f`` >= 1 (see ``_NAMED``), if any, and possible in
    an answer in ``unit``."""
    best = min(_NAMED, key=lambda n: abs(math.log(f / n[0])))
    window = 0.001 if best[0] < 1.2 else 0.01
    if abs(math.log(f / best[0])) > window:
        return None
    return best if best[4] & _unit_kinds(unit) else best[:2] + ("", "", set())


def _pct(x: float) -> str:
    """A fraction as a percentage rounded up to one significant digit: 0.0247 -> '3%'."""
    p = 100 * x
    step = 10 ** math.floor(math.log10(p))
    return f"{math.ceil(p / step - 1e-9) * step:.10g}%"


def _factor_phrase(r: float, rtol: float, atol: float, unit: str = "") -> str:
    """How a positive ratio answer/expected (outside tolerance) reads: direction and rough size,
    and the usual slip of that factor where the unit allows it."""
    big = r > 1
    f = r if big else 1 / r
    word = "too large" if big else "too small"
    named = _named_factor(f, unit)
    if named:  # a named factor; its cause only where this exercise's unit can have it
        cause = named[2] if big else named[3]
        return f"{named[1].format(word)}: {cause}" if cause else named[1].format(word)
    off = abs(r - 1)
    if f < 1.1:
        tol = _tol(rtol, atol)
        close = ("close, but not exact" if tol == "exact" else
                 f"close, but outside the {tol} tolerance")
        return f"{close}: about {_pct(off)} {word}"
    if f < 1.5:
        return f"about {_pct(off)} {word}"
    if f < 10:
        return f"about {round(2 * f) / 2:g}x {word}"
    if f < 1e4:
        return f"about {float(f'{f:.1g}'):,.0f}x {word}"
    return f"about 10^{round(math.log10(f))} times {word}"


def _miss(got: float, want: float, rtol: float, atol: float, unit: str = "") -> str:
    """Why ``got`` is not close to ``want``, without revealing ``want``."""
    if math.isnan(got):
        return "the answer is NaN (a 0/0 or inf - inf somewhere?)"
    if math.isinf(got):
        return "the answer is infinite (a division by zero or an overflow?)"
    if math.isinf(want) or want == 0:
        return "too large" if got > want else "too small"
    if got == 0:
        return "but the answer is not zero"
    if (got > 0) != (want > 0):
        r = abs(got / want)
        if abs(r - 1) <= rtol:
            return "the sign is wrong (the size is right)"
        return "the sign is wrong, and the size is " + _factor_phrase(r, rtol, atol, unit)
    return _factor_phrase(got / want, rtol, atol, unit)


def _tol(rtol: float, atol: float) -> str:
    """The tolerance in words: '2%', '1e-12 relative', '±0.01', '2% or ±0.01', 'exact'."""
    parts = []
    if rtol:
        parts.append(f"{100 * rtol:.3g}%" if rtol >= 1e-4 else f"{rtol:.0e} relative")
    if atol:
        parts.append(f"±{atol:g}")
    return " or ".join(parts) if parts else "exact"


def _within(rtol: float, atol: float) -> str:
    tol = _tol(rtol, atol)
    return "exactly" if tol == "exact" else f"within {tol}"
