"""Profiling a function on its device: compile, warm up, trace ``n_calls`` calls, read back.

:func:`profile` returns a :class:`Profile`: the events of the function's HLO module, the wall
time per call and the compiled program, with its op table and busiest-device time.

See: Chapter "Profiling JAX programs".
"""

from __future__ import annotations

import re
import tempfile
import time
from dataclasses import dataclass

from .compiled import _jax
from .hlo import HloOp, hlo_ops
from .table import op_table
from .trace import read_trace

@dataclass(frozen=True)
class Profile:
    """A function profiled on its device: the events of its module, the compiled program, and
    the wall-clock time per call (mean over ``n_calls``, including dispatch)."""

    events: tuple
    wall_time: float
    n_calls: int
    module: str
    hlo_text: str
    logdir: str

    @property
    def devices(self) -> tuple:
        return tuple(sorted({e.device for e in self.events}, key=str))

    def ops(self) -> dict[str, HloOp]:
        return hlo_ops(self.hlo_text)

    def table(self) -> list[dict]:
        """:func:`op_table` of the events, joined with the compiled program."""
        return op_table(self.events, self.n_calls, self.ops())

    def device_time(self) -> float:
        """Seconds of operations per call on the busiest device."""
        per = {}
        for e in self.events:
            per[e.device] = per.get(e.device, 0.0) + e.duration
        return max(per.values()) / self.n_calls if per else 0.0


def profile(fn, *args, n_calls: int = 3, logdir: str | None = None) -> Profile:
    """Run ``jax.jit(fn)(*args)`` ``n_calls`` times under ``jax.profiler.trace`` and read the trace.

    The function is compiled and run once before tracing (so compilation is not in the trace).
    Only events of this function's HLO module are kept. Works on whatever devices the arguments
    live on (CPU, GPU or TPU).
    """
    jax = _jax()
    if isinstance(n_calls, bool) or not isinstance(n_calls, int) or n_calls < 1:
        raise ValueError(f"n_calls={n_calls!r} must be a whole number >= 1")
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    compiled = jitted.lower(*args).compile()
    text = compiled.as_text()
    m = re.match(r"\s*HloModule\s+([\w.\-]+)", text)
    module = m.group(1) if m else ""
    jax.block_until_ready(jitted(*args))  # warm-up
    logdir = logdir or tempfile.mkdtemp(prefix="jax_trace_")
    with jax.profiler.trace(logdir):
        t0 = time.perf_counter()
        for _ in range(n_calls):
            jax.block_until_ready(jitted(*args))
        wall = (time.perf_counter() - t0) / n_calls
    events = [e for e in read_trace(logdir) if not module or e.module == module]
    return Profile(tuple(events), wall, n_calls, module, text, logdir)
