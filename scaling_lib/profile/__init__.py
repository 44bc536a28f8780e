"""Profiling JAX programs: what XLA compiled, what it costs on paper, and where the time went.

Three views of one jitted function, each in the library's units (seconds, FLOPs, bytes):

- the compiled program: :func:`hlo_ops` reads the optimised HLO text into one record per top-level
  instruction (its opcode, shape, named scope, and the FLOPs and bytes it implies);
  :func:`cost_analysis` and :func:`memory_analysis` wrap XLA's own estimates;
- the trace: :func:`profile` runs the function under ``jax.profiler.trace`` and
  :func:`read_trace` reads back the ``*.trace.json.gz`` file the installed JAX writes next to its
  ``xplane.pb`` (plain gzip + JSON: no TensorBoard or XProf needed), one :class:`OpEvent` per
  executed HLO operation; :func:`op_table` aggregates them per operation;
- the roofline: :func:`roofline_time` and :func:`op_roofline` put a measured time next to
  max(F / C, N / W) on an accelerator (a preset, or one measured with ``scaling_lib.measure``).

JAX is imported only inside the functions that need it; ``import scaling_lib.profile`` is instant.

The FLOPs counted per HLO instruction follow XLA's cost model: a dot is 2 x (output elements) x
(contracted elements); an elementwise or reduce op is one FLOP per element; transcendentals (exp,
tanh, ...) are not FLOPs. Bytes are the operands read plus the result written, each once.

See: Chapter "Profiling JAX programs".

The package, one concept per module (every name is also importable from here):
:mod:`.hlo` (reading HLO text), :mod:`.compiled` (compiling, XLA's cost and memory estimates),
:mod:`.trace` (reading traces), :mod:`.overlap` (async collectives' -start/-done pairs), :mod:`.table` (per-op aggregation), :mod:`.run`
(:func:`profile`) and :mod:`.bounds` (against the roofline).
"""

from .bounds import bound, op_roofline, roofline_time
from .compiled import Cost, Memory, _jax, compile_fn, cost_analysis, memory_analysis
from .hlo import (
    _HEADER,
    _INSTR,
    _SKIP,
    ELEMENTWISE_OPCODES,
    TRANSCENDENTAL_OPCODES,
    HloOp,
    _computation_flops,
    _dims,
    _elements,
    _instr_flops,
    _parse_computations,
    _split_call,
    hlo_ops,
)
from .overlap import async_collectives
from .run import Profile, profile
from .table import op_table, slowest_op
from .trace import OpEvent, _trace_file, parse_trace_events, read_trace

__all__ = ["Cost", "async_collectives", "ELEMENTWISE_OPCODES", "HloOp", "Memory", "OpEvent", "Profile",
           "TRANSCENDENTAL_OPCODES", "bound", "compile_fn", "cost_analysis", "hlo_ops",
           "memory_analysis", "op_roofline", "op_table", "parse_trace_events", "profile",
           "read_trace", "roofline_time", "slowest_op"]
