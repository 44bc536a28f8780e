"""The checker behind every graded exercise cell.

A graded cell ends with one call to :func:`check` (a number) or :func:`check_function` (a function
the student wrote). The checker prints one clear verdict line, and never lets a raw traceback
escape: an unanswered exercise, a wrong type, NaN, or an exception inside the student's function
all become feedback, and the notebook keeps running.

Verdict lines start with a fixed marker so a grading tool can read a folder of notebooks:

    PASS  ·  NOT SOLVED YET  ·  FAIL

Parametric exercises draw their numbers with :func:`draw` from a seed, so the question changes
when the seed does and the expected answer (computed by ``scaling_lib``) follows.

In exercise notebooks each graded cell starts with the ``%%graded NAME`` cell magic (loaded with
``%load_ext scaling_lib.grading``): an exception in the student's own lines then becomes one FAIL
line naming the error and the line, instead of a traceback that stops "Run all".

See: "How to use this book", section "Exercises".
"""

from __future__ import annotations

import math
import traceback
import zlib
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType

import numpy as np

PASS = "PASS"
NOT_SOLVED = "NOT SOLVED YET"
FAIL = "FAIL"


def _is_unanswered(answer) -> bool:
    return answer is None or answer is Ellipsis


def _magnitude(x: float) -> str:
    if x == 0 or not math.isfinite(x):
        return f"{x:g}"
    return f"~1e{math.floor(math.log10(abs(x))):+d}"


def _fmt(x) -> str:
    if isinstance(x, (bool, np.bool_)):
        return str(bool(x))
    if isinstance(x, (int, np.integer)):
        return f"{int(x):,}"
    if isinstance(x, (float, np.floating)):
        return f"{float(x):.4g}"
    arr = np.asarray(x)
    if arr.ndim:
        return np.array2string(arr, precision=4, threshold=8)
    return repr(x)


def _emit(verdict: str, name: str, message: str, hint: str = "") -> None:
    line = f"{verdict}: {name}: {message}"
    if hint and verdict != PASS:
        line += f"\n    hint: {hint}"
    print(line)


def _compare(answer, expected, rtol: float, atol: float) -> tuple[bool, str]:
    """(ok, reason) for a numeric or array answer, or an exact answer of another type."""
    if isinstance(expected, (str, bool, np.bool_)) or expected is None:
        if isinstance(expected, (bool, np.bool_)) and not isinstance(answer, (bool, np.bool_)):
            return False, f"expected True or False, got {type(answer).__name__} {answer!r}"
        return bool(answer == expected), f"got {answer!r}, which is not the right answer"
    try:
        got = np.asarray(answer, dtype=float)
    except (TypeError, ValueError):
        return False, f"expected a number, got {type(answer).__name__} {answer!r}"
    want = np.asarray(expected, dtype=float)
    if got.shape != want.shape:
        return False, f"expected shape {want.shape}, got shape {got.shape}"
    if np.any(np.isnan(got)):
        return False, "the answer contains NaN"
    ok = bool(np.all(np.isclose(got, want, rtol=rtol, atol=atol) | (got == want)))
    return ok, ""


def check(answer, expected, *, name: str = "exercise", rtol: float = 0.02, atol: float = 0.0,
          unit: str = "", hint: str = "") -> None:
    """Compare a student's ``answer`` with ``expected`` and print one verdict line.

    ``answer`` of None or ``...`` means the exercise is not solved yet. Numbers (and arrays) pass
    when within ``rtol`` relative (or ``atol`` absolute) tolerance; strings and booleans must match
    exactly. On failure the message gives the expected order of magnitude, not the value.
    Prints the verdict and returns None (so a notebook shows only the verdict line); a grading
    tool reads the line's leading marker.

    >>> check(295.0, 295.3, name="1.2", unit="tokens")
    PASS: 1.2: 295 tokens (expected 295.3 within 2%)
    >>> check(None, 295.3, name="1.2")
    NOT SOLVED YET: 1.2: replace None with your answer
    >>> check(30.0, 295.3, name="1.2", hint="C / W")
    FAIL: 1.2: got 30; expected magnitude ~1e+2 (within 2%)
        hint: C / W
    """
    if _is_unanswered(answer):
        return _emit(NOT_SOLVED, name, "replace None with your answer", hint)
    u = f" {unit}" if unit else ""
    ok, reason = _compare(answer, expected, rtol, atol)
    if ok and reason:  # an exact answer (string, boolean)
        return _emit(PASS, name, f"{_fmt(answer)}{u}")
    if ok:
        shown = _fmt(expected) if np.ndim(expected) == 0 else "all values"
        return _emit(PASS, name, f"{_fmt(answer)}{u} (expected {shown} within {rtol:.0%})")
    if reason:
        return _emit(FAIL, name, reason, hint)
    if np.ndim(expected) == 0:
        mag = _magnitude(float(expected))
        return _emit(FAIL, name, f"got {_fmt(answer)}{u}; expected magnitude {mag}{u} "
                     f"(within {rtol:.0%})", hint)
    return _emit(FAIL, name, f"got {_fmt(answer)}; some values differ from the expected ones",
                 hint)


def _call(fn: Callable, case) -> tuple[bool, object]:
    args, kwargs = case if (isinstance(case, tuple) and len(case) == 2 and
                            isinstance(case[1], Mapping)) else (case, {})
    if not isinstance(args, tuple):
        args = (args,)
    return fn(*args, **kwargs), (args, kwargs)


def _case_str(args, kwargs) -> str:
    parts = [_fmt(a) if not isinstance(a, str) else repr(a) for a in args]
    parts += [f"{k}={v!r}" for k, v in kwargs.items()]
    return f"({', '.join(parts)})"


def check_function(fn: Callable, reference: Callable, cases: Sequence, *, name: str = "exercise",
                   rtol: float = 1e-6, atol: float = 0.0, hint: str = "") -> None:
    """Run the student's ``fn`` on each case and compare with ``reference`` (a library function).

    Each case is a tuple of positional arguments, or ``(args, kwargs)``. A function that raises
    NotImplementedError is "not solved yet"; any other exception is reported with its type, message
    and the failing case (one line, no traceback).

    >>> def mine(B, D, F):
    ...     return 2 * B * D * F
    >>> from scaling_lib.roofline import matmul_flops
    >>> check_function(mine, matmul_flops, [(1, 2, 3), (8, 16, 32)], name="1.5")
    PASS: 1.5: 2 of 2 cases match
    """
    if not callable(fn):
        return _emit(FAIL, name, f"expected a function, got {type(fn).__name__}", hint)
    for case in cases:
        want, (args, kwargs) = _call(reference, case)
        try:
            got, _ = _call(fn, case)
        except NotImplementedError:
            return _emit(NOT_SOLVED, name, "replace the `raise NotImplementedError` line with "
                         "your code", hint)
        except Exception as exc:  # student code: report, never crash the notebook
            where = traceback.extract_tb(exc.__traceback__)[-1]
            return _emit(FAIL, name, f"{type(exc).__name__}: {exc} (on input "
                         f"{_case_str(args, kwargs)}, line {where.lineno})", hint)
        if _is_unanswered(got):
            return _emit(NOT_SOLVED, name, "the function returned None; return your result",
                         hint)
        ok, reason = _compare(got, want, rtol, atol)
        if not ok:
            detail = reason or (f"expected magnitude {_magnitude(float(np.max(np.abs(want))))}"
                                if np.size(want) else "")
            return _emit(FAIL, name, f"on input {_case_str(args, kwargs)} got {_fmt(got)}; "
                         f"{detail}", hint)
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


def run_graded(name: str, source: str, namespace: dict) -> None:
    """Run a graded cell's ``source`` in ``namespace``; report student errors as a FAIL line.

    >>> ns = {}
    >>> run_graded("1.1", "answer = 1 / 0", ns)
    FAIL: 1.1: your code raised ZeroDivisionError: division by zero (line 1)
    >>> run_graded("1.1", "answer = 2", ns); ns["answer"]
    2
    """
    name = name.strip() or "exercise"
    try:
        code = compile(source, _CELL, "exec")
    except SyntaxError as exc:
        _emit(FAIL, name, f"SyntaxError on line {exc.lineno}: {exc.msg}")
        return
    try:
        exec(code, namespace)
    except Exception as exc:  # student code: report, never crash the notebook
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if f.filename == _CELL]
        where = f" (line {frames[-1].lineno})" if frames else ""
        _emit(FAIL, name, f"your code raised {type(exc).__name__}: {exc}{where}")


def load_ipython_extension(ipython) -> None:
    """``%load_ext scaling_lib.grading`` registers the ``%%graded NAME`` cell magic."""

    def graded(line, cell):
        run_graded(line, cell, ipython.user_ns)

    ipython.register_magic_function(graded, magic_kind="cell", magic_name="graded")
