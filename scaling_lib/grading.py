"""The checker behind every graded exercise cell.

A graded cell ends with one call to :func:`check` (a number) or :func:`check_function` (a function
the student wrote). The checker prints one clear verdict line, and never lets a raw traceback
escape: an unanswered exercise, a wrong type, NaN, or an exception inside the student's function
all become feedback, and the notebook keeps running.

Verdict lines start with a fixed marker so a grading tool can read a folder of notebooks:

    PASS  ·  NOT SOLVED YET  ·  FAIL

A wrong number is answered with its direction and rough size, never with the expected value:
"about 2x too large", "about 8x too small: bits vs bytes?", "off by ~1.07, too large: GB vs GiB?",
"close, but outside the tolerance: about 3% too small". Factors that betray a common slip (unit
prefixes, binary vs decimal units, one-way vs both ways, a percentage for a fraction) are named.

Each exercise sets its own tolerance with ``check(..., rtol=, atol=)``; the default is 2%
relative. :func:`assess` is the comparison itself (a verdict and its message, printed by
:func:`check`); ``tests/test_wrong_methods.py`` calls it to show that each exercise's listed wrong
methods FAIL and its accepted approximations PASS.

Parametric exercises draw their numbers with :func:`draw` from a seed, so the question changes
when the seed does and the expected answer (computed by ``scaling_lib``) follows.

In exercise notebooks each graded cell starts with the ``%%graded NAME`` cell magic (loaded with
``%load_ext scaling_lib.grading``): an exception, ``exit()`` or an interrupted endless loop in the
student's own lines then becomes one FAIL line naming the error and the line of the cell, instead
of a traceback that stops "Run all".

See: "How to use this book", section "Exercises".
"""

from __future__ import annotations

import contextlib
import datetime
import math
import numbers
import os
import signal
import threading
import time
import traceback
import zlib
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from types import MappingProxyType

import numpy as np

PASS = "PASS"
NOT_SOLVED = "NOT SOLVED YET"
FAIL = "FAIL"

DEFAULT_RTOL = 0.02
CASE_TIME_LIMIT = 10.0  # seconds per case in check_function


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


def _emit(verdict: str, name: str, message: str, hint: str = "") -> None:
    line = f"{verdict}: {name}: {message}"
    if hint and verdict != PASS:
        line += f"\n    hint: {hint}"
    print(line)


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


def _short(x) -> str:
    text = repr(x)
    return text if len(text) <= 40 else text[:37] + "..."


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


# ---- Saying how far off a number is, without saying the number --------------------------------

# (factor, how to say it, cause when the answer is too large, cause when it is too small). A
# ratio near a named factor gets its cause: within 1% (in log space) for the big factors, 0.1% for
# the binary-vs-decimal ones, which sit close to near misses (kB vs KiB, 1.024, is left out: it
# cannot be told from a near miss at the usual 2% tolerance).
_TWO = "one-way vs both ways, or bytes per value (2 vs 4, 8 vs 16)?"
_NAMED = [
    (2**20 / 1e6, "off by ~1.05, {}", "MB vs MiB?", "MB vs MiB?"),
    (2**30 / 1e9, "off by ~1.07, {}", "GB vs GiB?", "GB vs GiB?"),
    (2**40 / 1e12, "off by ~1.10, {}", "TB vs TiB?", "TB vs TiB?"),
    (2, "about 2x {}", _TWO, _TWO),
    (3, "about 3x {}", "6 vs 2 FLOPs per parameter (backward included)?",
     "2 vs 6 FLOPs per parameter (forward only)?"),
    (8, "about 8x {}", "bits vs bytes?", "bits vs bytes?"),
    (24, "about 24x {}", "hours vs days?", "hours vs days?"),
    (60, "about 60x {}", "seconds vs minutes, or minutes vs hours?",
     "seconds vs minutes, or minutes vs hours?"),
    (100, "100x {}", "a percentage instead of a fraction?", "a fraction instead of a percentage?"),
    (1000, "1000x {}", "a unit prefix: ms vs s, or MB vs GB?",
     "a unit prefix: ms vs s, or MB vs GB?"),
    (1024, "1024x {}", "KiB vs bytes, or MiB vs GiB?", "KiB vs bytes, or MiB vs GiB?"),
    (3600, "about 3600x {}", "seconds vs hours?", "seconds vs hours?"),
    (86400, "about 86,400x {}", "seconds vs days?", "seconds vs days?"),
    (1e6, "1e6x {}", "two unit prefixes: µs vs s, or MB vs TB?",
     "two unit prefixes: µs vs s, or MB vs TB?"),
    (2**20, "2^20x {}", "MiB vs bytes?", "MiB vs bytes?"),
    (1e9, "1e9x {}", "GB vs bytes, or ns vs s?", "GB vs bytes, or ns vs s?"),
    (2**30, "2^30x {}", "GiB vs bytes?", "GiB vs bytes?"),
    (1e12, "1e12x {}", "TFLOP/s vs FLOP/s, or TB vs bytes?",
     "TFLOP/s vs FLOP/s, or TB vs bytes?"),
]


def _named_factor(f: float):
    """The named slip whose factor is near ``f`` >= 1 (see ``_NAMED``), if any."""
    best = min(_NAMED, key=lambda n: abs(math.log(f / n[0])))
    window = 0.001 if best[0] < 1.2 else 0.01
    return best if abs(math.log(f / best[0])) <= window else None


def _pct(x: float) -> str:
    """A fraction as a percentage rounded up to one significant digit: 0.0247 -> '3%'."""
    p = 100 * x
    step = 10 ** math.floor(math.log10(p))
    return f"{math.ceil(p / step - 1e-9) * step:.10g}%"


def _factor_phrase(r: float, rtol: float, atol: float) -> str:
    """How a positive ratio answer/expected (outside tolerance) reads: direction and rough size."""
    big = r > 1
    f = r if big else 1 / r
    word = "too large" if big else "too small"
    named = _named_factor(f)
    if named:
        cause = named[2] if big else named[3]
        return f"{named[1].format(word)}: {cause}"
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


def _miss(got: float, want: float, rtol: float, atol: float) -> str:
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
        return "the sign is wrong, and the size is " + _factor_phrase(r, rtol, atol)
    return _factor_phrase(got / want, rtol, atol)


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


# ---- check_function: the student's function against the library's -----------------------------

class _TimeLimit(BaseException):
    """Raised inside the student's code when one case runs past its time limit.

    A BaseException, so that a student's ``except Exception`` cannot swallow it.
    """


def _alarm_available() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


def _limited_call(fn: Callable, args: tuple, kwargs: dict, seconds: float | None):
    """``fn(*args, **kwargs)``, raising :class:`_TimeLimit` if it runs longer than ``seconds``.

    On POSIX in the main thread (a notebook kernel) a SIGALRM timer interrupts the call; an outer
    timer is put back afterwards. Elsewhere (Windows, or a worker thread) the call runs in a
    daemon thread and a Python-level exception is injected into it when time is up, which stops a
    loop of Python code but not a single long call into C.
    """
    if seconds is None:
        return fn(*args, **kwargs)
    if _alarm_available():
        def on_alarm(signum, frame):
            raise _TimeLimit

        old_handler = signal.signal(signal.SIGALRM, on_alarm)
        old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
        start = time.monotonic()
        try:
            return fn(*args, **kwargs)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM,
                          signal.SIG_DFL if old_handler is None else old_handler)
            if old_delay:
                left = max(old_delay - (time.monotonic() - start), 1e-3)
                signal.setitimer(signal.ITIMER_REAL, left, old_interval)
    return _thread_call(fn, args, kwargs, seconds)


def _thread_call(fn: Callable, args: tuple, kwargs: dict, seconds: float):
    import ctypes

    box: dict = {}

    def target():
        try:
            box["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # handed back to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=target, daemon=True, name="check_function case")
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(worker.ident),
                                                   ctypes.py_object(_TimeLimit))
        worker.join(1.0)
        raise _TimeLimit
    if "error" in box:
        raise box["error"]
    return box["value"]


def _split_case(case) -> tuple[tuple, dict]:
    args, kwargs = case if (isinstance(case, tuple) and len(case) == 2 and
                            isinstance(case[1], Mapping)) else (case, {})
    if not isinstance(args, tuple):
        args = (args,)
    return args, dict(kwargs)


def _case_str(args, kwargs) -> str:
    parts = [_fmt(a) if not isinstance(a, str) else repr(a) for a in args]
    parts += [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"({', '.join(parts)})"


_LIBRARY = os.path.dirname(os.path.abspath(__file__))


def _student_line(tb) -> str:
    """' (line N)' for the deepest frame of the student's own code in ``tb``, or ''.

    Frames in scaling_lib (this checker, the library) and in installed packages are not the
    student's; a function defined in a ``%%graded`` cell carries the cell's own line numbers.
    """
    mine = [f for f in traceback.extract_tb(tb) if _is_students(f.filename)]
    return f" (line {mine[-1].lineno})" if mine else ""


def _is_students(filename: str) -> bool:
    import sysconfig

    if filename.startswith("<"):  # a cell ("<exercise cell>", "<ipython-input-...>"), not "<frozen"
        return not filename.startswith("<frozen")
    path = os.path.abspath(filename)
    outside = [_LIBRARY] + [sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")]
    return not any(path.startswith(d + os.sep) for d in outside)


def check_function(fn: Callable, reference: Callable, cases: Sequence, *, name: str = "exercise",
                   rtol: float = 1e-6, atol: float = 0.0, hint: str = "",
                   time_limit: float | None = CASE_TIME_LIMIT) -> None:
    """Run the student's ``fn`` on each case and compare with ``reference`` (a library function).

    Each case is a tuple of positional arguments, or ``(args, kwargs)``. A function that raises
    NotImplementedError is "not solved yet"; any other exception is reported with its type, message,
    the failing case and the student's line (one line, no traceback). A case running longer than
    ``time_limit`` seconds (None: no limit) is stopped and reported, and the kernel keeps running.

    >>> def mine(B, D, F):
    ...     return 2 * B * D * F
    >>> from scaling_lib.roofline import matmul_flops
    >>> check_function(mine, matmul_flops, [(1, 2, 3), (8, 16, 32)], name="1.5")
    PASS: 1.5: 2 of 2 cases match
    >>> check_function(lambda B, D, F: B * D * F / 1e3, matmul_flops, [(8, 16, 32)], name="1.5")
    FAIL: 1.5: case 1 (8, 16, 32): got 4.096, about 2,000x too small
    """
    if time_limit is not None and (isinstance(time_limit, bool) or
                                   not isinstance(time_limit, (int, float)) or
                                   not 0 < time_limit < math.inf):
        raise ValueError(f"time_limit={time_limit!r} must be a positive number of seconds, "
                         "or None for no limit")
    if not callable(fn):
        return _emit(FAIL, name, f"expected a function, got {type(fn).__name__}", hint)
    for i, case in enumerate(cases, start=1):
        args, kwargs = _split_case(case)
        want = reference(*args, **kwargs)
        label = f"case {i} {_case_str(args, kwargs)}"
        try:
            got = _limited_call(fn, args, kwargs, time_limit)
        except NotImplementedError:
            return _emit(NOT_SOLVED, name, "replace the `raise NotImplementedError` line with "
                         "your code", hint)
        except _TimeLimit:
            return _emit(FAIL, name, f"case {i} took longer than {time_limit:g} s (input "
                         f"{_case_str(args, kwargs)}): does a loop never end?", hint)
        except Exception as exc:  # student code: report, never crash the notebook
            return _emit(FAIL, name, f"{label}: your function raised {type(exc).__name__}: "
                         f"{exc}{_student_line(exc.__traceback__)}", hint)
        if _is_unanswered(got):
            return _emit(NOT_SOLVED, name, "the function returned None; return your result",
                         hint)
        ok, reason = _compare(got, want, rtol, atol)
        if not ok:
            return _emit(FAIL, name, f"{label}: {reason}", hint)
    return _emit(PASS, name, f"{len(cases)} of {len(cases)} cases match")


class Params(Mapping):
    """The numbers drawn for one parametric exercise: a read-only mapping with attribute access.

    >>> p = draw(0, "1.3", B=[128, 256])
    >>> p.B in (128, 256)
    True
    """

    def __init__(self, values: dict):
        object.__setattr__(self, "_values", MappingProxyType(values))

    def __getattr__(self, key):
        try:
            return self._values[key]
        except KeyError:
            raise AttributeError(key) from None

    def __setattr__(self, key, value):
        raise AttributeError("Params are read-only")

    def __getitem__(self, key):
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self):
        return len(self._values)

    def __repr__(self):
        return ", ".join(f"{k} = {_fmt(v) if not isinstance(v, str) else v}"
                         for k, v in self._values.items())


def draw(seed: int, exercise: str, **spec) -> Params:
    """Draw the numbers of a parametric exercise from ``seed`` (same seed, same numbers).

    Each keyword names a parameter: a list or tuple of choices picks one of them; a pair
    ``(low, high)`` of ints draws a power of two in [low, high]; a ``range`` draws from it;
    a pair of floats draws uniformly and rounds to 3 significant digits. ``exercise`` is mixed
    into the seed so different exercises get different numbers from one notebook seed.

    >>> draw(1, "x", D=(1024, 8192)) == draw(1, "x", D=(1024, 8192))
    True
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed={seed!r} must be an integer")
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(exercise.encode())])
    out = {}
    for key, rule in spec.items():
        if isinstance(rule, range):
            out[key] = int(rng.choice(rule))
        elif (isinstance(rule, tuple) and len(rule) == 2 and
              all(isinstance(v, (int, np.integer)) for v in rule)):
            lo, hi = int(rule[0]), int(rule[1])
            if lo < 1 or hi < lo:
                raise ValueError(f"{key}={rule}: need 1 <= low <= high for a power-of-two draw")
            exps = np.arange(math.ceil(math.log2(lo)), math.floor(math.log2(hi)) + 1)
            out[key] = int(2 ** rng.choice(exps))
        elif (isinstance(rule, tuple) and len(rule) == 2 and
              all(isinstance(v, (float, int)) for v in rule)):
            x = rng.uniform(float(rule[0]), float(rule[1]))
            out[key] = float(f"{x:.3g}")
        elif isinstance(rule, (list, tuple)) and rule:
            choice = rule[int(rng.integers(len(rule)))]
            out[key] = choice.item() if isinstance(choice, np.generic) else choice
        else:
            raise ValueError(f"{key}={rule!r}: give a list of choices, a (low, high) pair "
                             "or a range")
    return Params(out)


# ---- The %%graded cell magic (IPython extension) ------------------------------------------------

_CELL = "<exercise cell>"
_MISSING = object()


def _refuse_exit(*args, **kwargs):
    """Stands in for ``exit``/``quit`` while a graded cell runs: stop the cell, not the kernel."""
    raise SystemExit(*args[:1])


def _cell_line(tb) -> str:
    frames = [f for f in traceback.extract_tb(tb) if f.filename == _CELL]
    return f" (line {frames[-1].lineno})" if frames else ""


def run_graded(name: str, source: str, namespace: dict, *, first_line: int = 1) -> None:
    """Run a graded cell's ``source`` in ``namespace``; report the student's errors as a FAIL line.

    ``first_line`` is the line number the reader sees for the first line of ``source`` (2 under
    ``%%graded``, whose own line is line 1), so reported lines match the cell on screen. An
    exception, ``exit()``/``quit()``/``sys.exit()`` (SystemExit) and an interrupt
    (KeyboardInterrupt, e.g. the reader stopping an endless loop) each become one FAIL line, and
    "Run all" goes on.

    >>> ns = {}
    >>> run_graded("1.1", "answer = 1 / 0", ns)
    FAIL: 1.1: your code raised ZeroDivisionError: division by zero (line 1)
    >>> run_graded("1.1", "answer = 2\\nexit()", ns, first_line=2); ns["answer"]
    FAIL: 1.1: your code called exit() or sys.exit() (line 3): remove that line
    2
    """
    name = name.strip() or "exercise"
    try:
        code = compile("\n" * (first_line - 1) + source, _CELL, "exec")
    except SyntaxError as exc:
        _emit(FAIL, name, f"SyntaxError on line {exc.lineno}: {exc.msg}")
        return
    saved = {k: namespace.get(k, _MISSING) for k in ("exit", "quit")}
    namespace.update(exit=_refuse_exit, quit=_refuse_exit)
    try:
        exec(code, namespace)
    except SystemExit as exc:
        _emit(FAIL, name, f"your code called exit() or sys.exit(){_cell_line(exc.__traceback__)}: "
              "remove that line")
    except KeyboardInterrupt as exc:
        _emit(FAIL, name, f"interrupted{_cell_line(exc.__traceback__)}: does a loop never end?")
    except Exception as exc:  # student code: report, never crash the notebook
        _emit(FAIL, name, f"your code raised {type(exc).__name__}: {exc}"
              f"{_cell_line(exc.__traceback__)}")
    finally:
        for k, old in saved.items():
            if namespace.get(k) is _refuse_exit:
                if old is _MISSING:
                    del namespace[k]
                else:
                    namespace[k] = old


def load_ipython_extension(ipython) -> None:
    """``%load_ext scaling_lib.grading`` registers the ``%%graded NAME`` cell magic."""

    def graded(line, cell):
        run_graded(line, cell, ipython.user_ns, first_line=2)

    ipython.register_magic_function(graded, magic_kind="cell", magic_name="graded")
