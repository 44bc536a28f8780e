"""Bringing the student's answers out: a probe for values, a fresh process for functions.

A value exercise: after the graded cell ran (without its checker call, see
:func:`~.submission.runnable`), a probe cell prints, on one line prefixed by a random nonce, the
*value* of the checker call's first argument (``answer``), as tagged JSON (:data:`CODEC`). The
kernel never sees the expected value: nothing the student's code reads, hooks or wraps can reveal
it. A probe line that is missing, rewritten or garbled costs only that exercise ("error").

An implement-it exercise: :func:`run_functions` starts a fresh process in a fresh jail, which
runs the exercise notebook's locked cells before the exercise (:meth:`Chapter.prelude`), then the
student's cell (without its checker call), then calls the function, wrapped as the exercise
wraps it, on the cases the grader computed, each under :data:`CASE_TIME_LIMIT`; only the results
come back (tagged JSON). The reference values are computed by the grader.
"""

from __future__ import annotations

import json
import pickle
import secrets
import time

from ..grading.timelimit import CASE_TIME_LIMIT, FIRST_CASE_FACTOR  # one home for the limits
from .chapter import Exercise
from .codec import CODEC

# The probe cell (kernel side). {nonce} prefixes the one line the grader reads.
_PROBE_VALUE = r'''
def _probe(g):
    try:
        v = eval({expr!r}, g)
    except BaseException as exc:
        return {{"missing": f"{{type(exc).__name__}}: {{str(exc)[:200]}}"}}
    return {{"value": _enc(v)}}
print({nonce!r} + __import__("json").dumps(_probe(__g)), flush=True)
'''


def probe_cell(expr: str, nonce: str) -> str:
    """A cell that prints ``nonce`` + the tagged JSON of ``expr``, its helpers kept out of the
    student's namespace."""
    src = CODEC + _PROBE_VALUE.format(expr=expr, nonce=nonce)
    return f"exec({src!r}, {{'__g': globals(), '__builtins__': __builtins__}})"


def forget(name: str) -> str:
    return f"globals().pop({name!r}, None)"


def new_nonce() -> str:
    return "@@grader-" + secrets.token_hex(8) + "@@"


def payload(text: str, nonce: str):
    """The JSON after the last line starting with ``nonce``; None if there is none or it is bad."""
    for line in reversed(text.splitlines()):
        if line.startswith(nonce):
            try:
                return json.loads(line[len(nonce):])
            except (ValueError, RecursionError):
                return None
    return None


# The fresh process for implement-it exercises: reads a pickled job on stdin (from the grader:
# trusted), writes one JSON line on the stdout it kept (the student's prints go to /dev/null).
_FUNCTION_CHILD = CODEC + r'''
import os, sys, json, pickle, signal
job = pickle.loads(sys.stdin.buffer.read())
out = os.fdopen(os.dup(1), "w")
null = os.open(os.devnull, os.O_WRONLY)
os.dup2(null, 1)
os.dup2(null, 2)
sys.stdout = sys.stderr = open(os.devnull, "w")
class _Late(BaseException):
    pass
def late(signum, frame):
    raise _Late
def send(obj):
    out.write(json.dumps(obj) + "\n")
    out.flush()
ns = {"__name__": "__main__"}
try:
    exec(compile(job["prelude"], "<locked cells>", "exec"), ns)
except BaseException as exc:
    send({"prelude": f"{type(exc).__name__}: {str(exc)[:200]}"})
    raise SystemExit
try:
    exec(compile(job["cell"], "<exercise cell>", "exec"), ns)
    fn = eval(job["target"], ns)
except BaseException as exc:
    send({"missing": f"{type(exc).__name__}: {str(exc)[:200]}"})
    raise SystemExit
if not callable(fn):
    send({"value": _enc(fn), "not_callable": True})
    raise SystemExit
res = []
for i, case in enumerate(job["cases"]):
    args, kwargs = _split_case(case)
    signal.signal(signal.SIGALRM, late)
    # the first call may compile (JAX) and import: it gets FIRST_CASE_FACTOR times the limit
    signal.setitimer(signal.ITIMER_REAL, job["limit"] * (job["first"] if i == 0 else 1))
    try:
        res.append({"ok": _enc(fn(*args, **kwargs))})
    except _Late:
        res.append({"late": True})
    except BaseException as exc:
        res.append({"raised": type(exc).__name__, "text": str(exc)[:200]})
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
send({"cases": res})
'''


def run_function(jail_factory, ex: Exercise, prelude: str, cell: str, cases: list,
                 *, timeout: float, env: dict) -> tuple[dict | None, str]:
    """Evaluate the student's function of ``ex`` in a fresh jail: (payload, problem).

    ``jail_factory()`` makes the jail (closed here, every process killed); ``cell`` is the
    student's graded cell without its checker call and magics; ``cases`` the grader's cases.
    """
    import subprocess

    from ..sandbox import python_argv

    try:
        job = pickle.dumps({"prelude": prelude, "cell": cell, "target": ex.target,
                            "cases": list(cases), "limit": CASE_TIME_LIMIT,
                            "first": FIRST_CASE_FACTOR})
    except Exception as exc:
        return None, f"the cases could not be sent ({type(exc).__name__})"
    jail = jail_factory()
    try:
        proc = jail.popen(python_argv(jail, ["-c", _FUNCTION_CHILD]), env=env,
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        try:
            text, _ = proc.communicate(job, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, f"ran past {timeout:g} s"
        line = text[:4_000_000].decode("utf-8", errors="replace").strip().splitlines()
        if not line:
            return None, "the process ended without results (exit, crash or memory)"
        try:
            return json.loads(line[-1]), ""
        except (ValueError, RecursionError):
            return None, "its results could not be read"
    except OSError as exc:
        return None, f"it could not start ({type(exc).__name__})"
    finally:
        jail.close()


def function_timeout(n_cases: int, cell_timeout: float) -> float:
    """Seconds a fresh process for an implement-it exercise gets: the locked cells and the
    student's cell (a cell limit each), then every case."""
    return 2 * cell_timeout + CASE_TIME_LIMIT * (n_cases + FIRST_CASE_FACTOR)


def elapsed(start: float) -> float:
    return time.monotonic() - start
