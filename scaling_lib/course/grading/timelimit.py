"""A time limit on one call of the student's function, so an endless loop cannot hang the kernel.

The limit raises :class:`_TimeLimit`, a BaseException, inside the student's code. On POSIX in the
main thread a SIGALRM timer does it; elsewhere the call runs in a daemon thread that is sent the
exception when time is up.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable

CASE_TIME_LIMIT = 10.0  # seconds per case in check_function (and in the grading tool's probe)
FIRST_CASE_FACTOR = 3   # the first case may compile (JAX) and import: it gets 3x the limit


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
