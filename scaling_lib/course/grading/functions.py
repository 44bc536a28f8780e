"""The checker of a function: the student's function against the library's, case by case.

:func:`check_function` runs each case under a time limit (see :mod:`.timelimit`) and reports the
first wrong, failing or endless case in one line, naming the student's own line of code when it
raised.
"""

from __future__ import annotations

import math
import os
import traceback
from collections.abc import Callable, Mapping, Sequence

import re

import numpy as np

from .answers import _compare, _distance
from .feedback import FAIL, NOT_SOLVED, PASS, _emit, _fmt, _is_unanswered
from .timelimit import CASE_TIME_LIMIT, FIRST_CASE_FACTOR, _limited_call, _TimeLimit


def _split_case(case) -> tuple[tuple, dict]:
    args, kwargs = case if (isinstance(case, tuple) and len(case) == 2 and
                            isinstance(case[1], Mapping)) else (case, {})
    if not isinstance(args, tuple):
        args = (args,)
    return args, dict(kwargs)


def _arg_str(a) -> str:
    """One argument of a case, short: an array by its shape, a long value cut."""
    if isinstance(a, str):
        return repr(a)
    if hasattr(a, "shape") and getattr(a, "ndim", 0) and getattr(a, "size", 0) > 8:
        return f"an array of shape {tuple(a.shape)}"
    if isinstance(a, (list, tuple)) and len(repr(a)) > 60:
        return f"a {type(a).__name__} of {len(a)} items"
    text = _fmt(a) if isinstance(a, (int, float, np.number, np.ndarray)) else repr(a)
    text = " ".join(text.split())
    return text if len(text) <= 60 else text[:57] + "..."


def _case_str(args, kwargs) -> str:
    parts = [_arg_str(a) for a in args]
    parts += [f"{k}={_arg_str(v)}" for k, v in kwargs.items()]
    return f"({', '.join(parts)})"


# scaling_lib/ itself: frames in it are the library's, not the student's
_LIBRARY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


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


_REPLICATED = re.compile(r"replicated across mesh axis(?:es)? ([^,\n]+?)(?:,| but)")
_UNBOUND = re.compile(r"unbound axis name:? '?([\w-]+)'?", re.I)


def sharding_slip(exc: BaseException) -> str | None:
    """One sentence on the likely slip behind a JAX ``shard_map`` error, or None for another error.

    >>> e = ValueError("out_specs is P() which implies that the corresponding output value is "
    ...                "replicated across mesh axis 'dp', but could not infer replication")
    >>> slip = sharding_slip(e)
    >>> "along mesh axis 'dp'" in slip and "lax.psum" in slip
    True
    """
    text = str(exc)
    if "out_specs" in text and "replicat" in text:
        m = _REPLICATED.search(text)
        axis = m.group(1).strip() if m else "of the mesh"
        return (f"your function returns a value that still differs from device to device along "
                f"mesh axis {axis}, where the result must be the same on every device: reduce "
                "it over that axis (lax.psum, or a lax.psum_scatter whose result is gathered) "
                "before returning")
    m = _UNBOUND.search(text)
    if m:
        return (f"a collective names the axis {m.group(1)!r}, which is not an axis of the mesh "
                "your function runs on: use the mesh axis the question names")
    if "out_specs" in text and ("rank" in text or "shape" in text):
        return ("your function returns an array of another shape or rank than the sharding of "
                "the result expects: check which axes are still split across devices")
    return None


def _mistake_for(got, want, args, kwargs, mistakes, rtol, atol):
    """The listed mistake (a function of the case's arguments) whose result ``got`` matches."""
    best, best_d = None, float("inf")
    for m in mistakes:
        try:
            value = m.fn(*args, **kwargs)
            if _compare(value, want, 1e-12, 0.0)[0] or not _compare(got, value, rtol, atol)[0]:
                continue
        except Exception:  # a mistake that cannot be computed for this case is not named
            continue
        d = _distance(got, value)
        if best is None or d < best_d:
            best, best_d = m, d
    return best


def _mistake_raising(exc, args, kwargs, mistakes):
    """The listed mistake that raises the same error as the student's function on this case (a
    harness that checks the compiled collectives raises on a wrong program)."""
    text = str(exc)[:300]
    for m in mistakes:
        try:
            m.fn(*args, **kwargs)
        except Exception as other:
            if type(other) is type(exc) and str(other)[:300] == text:
                return m
    return None


def check_function(fn: Callable, reference: Callable, cases: Sequence, *, name: str = "exercise",
                   rtol: float = 1e-6, atol: float = 0.0, hint: str = "",
                   time_limit: float | None = CASE_TIME_LIMIT) -> None:
    """Run the student's ``fn`` on each case and compare with ``reference`` (a library function).

    Each case is a tuple of positional arguments, or ``(args, kwargs)``. A function that raises
    NotImplementedError is "not solved yet"; any other exception is reported with its type, message,
    the failing case and the student's line (one line, no traceback). A case running longer than
    ``time_limit`` seconds (the first case, which may compile and import, ``FIRST_CASE_FACTOR``
    times that; None: no limit) is stopped and reported, and the kernel keeps running.

    >>> def mine(B, D, F):
    ...     return 2 * B * D * F
    >>> from scaling_lib.roofline import matmul_flops
    >>> check_function(mine, matmul_flops, [(1, 2, 3), (8, 16, 32)], name="f")
    PASS: f: 2 of 2 cases match
    >>> check_function(lambda B, D, F: B * D * F / 1e3, matmul_flops, [(8, 16, 32)], name="f")
    FAIL: f: case 1 (8, 16, 32): got 4.096, about 2,000x too small
    """
    if time_limit is not None and (isinstance(time_limit, bool) or
                                   not isinstance(time_limit, (int, float)) or
                                   not 0 < time_limit < math.inf):
        raise ValueError(f"time_limit={time_limit!r} must be a positive number of seconds, "
                         "or None for no limit")
    from .checks import _say, _shown
    from .tables import tables

    t = tables(name)
    hints = t.hints or ((hint,) if hint else ())
    if not callable(fn):
        return _emit(FAIL, name, f"expected a function, got {type(fn).__name__}", hints=hints)
    for i, case in enumerate(cases, start=1):
        args, kwargs = _split_case(case)
        want = reference(*args, **kwargs)
        label = f"case {i} {_case_str(args, kwargs)}"
        try:
            limit = (None if time_limit is None
                     else time_limit * (FIRST_CASE_FACTOR if i == 1 else 1))
            got = _limited_call(fn, args, kwargs, limit)
        except NotImplementedError:
            return _emit(NOT_SOLVED, name, "replace the `raise NotImplementedError` line with "
                         "your code")
        except _TimeLimit:
            return _emit(FAIL, name, f"case {i} took longer than {limit:g} s (input "
                         f"{_case_str(args, kwargs)}): does a loop never end?", hints=hints)
        except Exception as exc:  # student code: report, never crash the notebook
            m = _mistake_raising(exc, args, kwargs, t.mistakes)
            if m is not None:
                return _emit(FAIL, name, f"{label}: {_say(m)}", hints=hints)
            slip = sharding_slip(exc)
            if slip:
                return _emit(FAIL, name, f"{label}: {slip}{_student_line(exc.__traceback__)}",
                             hints=hints)
            text = " ".join(str(exc).split())
            text = text if len(text) <= 300 else text[:297] + "..."
            return _emit(FAIL, name, f"{label}: your function raised {type(exc).__name__}: "
                         f"{text}{_student_line(exc.__traceback__)}", hints=hints)
        if _is_unanswered(got):
            return _emit(NOT_SOLVED, name, "the function returned None; return your result")
        ok, reason = _compare(got, want, rtol, atol, synonyms=t.synonyms)
        if not ok:
            m = _mistake_for(got, want, args, kwargs, t.mistakes, rtol, atol)
            if m is not None:
                reason = f"{_shown(got)}: {_say(m)}"
            return _emit(FAIL, name, f"{label}: {reason}", hints=hints)
    return _emit(PASS, name, f"{len(cases)} of {len(cases)} cases match")
