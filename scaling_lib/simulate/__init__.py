"""Simulated devices: run real collectives on N fake CPU devices and read what XLA compiled.

JAX can split one CPU into N "devices" that run a sharded program exactly as N accelerators would
(numerically), just not at their speed. This module asks for them, builds meshes, shows how an
array is sharded in the book's notation (A[I_X, J]), and lists the collectives XLA emitted for a
function, with their replica groups and per-device bytes, so a cost model can be checked against
the compiled program. :func:`train_step` runs one real training step of the library's small
transformer on as many devices as a :class:`~scaling_lib.parallelism.ParallelPlan` says.

Modules: ``devices`` (asking for devices, meshes, the notation), ``hlo`` (reading compiled
programs), ``model`` (the reference transformer, written once for every plan), one module per
strategy mirroring :mod:`scaling_lib.parallelism` (``data``, ``fsdp``, ``tensor``,
``context``, ``pipeline``, ``moe`` for expert parallelism) and ``step`` (the training step
that puts them together) and ``decode`` (one tensor-parallel decode step with its KV cache).

JAX is an optional dependency: importing this module never imports jax; the functions that need
it import it when called (``pip install "scaling_lib[jax]"``).

XLA:CPU rewrites to know about when comparing with a cost model (measured on jax 0.10.2):

- bf16 and fp8 collectives are promoted: a bf16 all-reduce runs in f32 (fp8 in f16), converted
  before and after, so the CPU moves twice the bytes an accelerator would (:data:`CPU_PROMOTED`).
- An all-to-all is emitted in tuple form: n operands of 1/n of the shard each (same total bytes).
- All-reduces over the same replica groups are combined into one tuple all-reduce (the
  cpu-all-reduce-combiner); their operand bytes add up.

Where the simulated training step differs from the cost model on purpose or by XLA's doing
(SP's backward re-gather, ring attention's kept K/V blocks, dropless MoE's padded buffers,
FSDP's re-gather CSE, the pipeline's SPMD program), :mod:`.expected` names each difference and
:func:`expected_collectives` applies them.

See: Chapter "Networks and collectives", "Running collectives for real".
"""

from .devices import make_mesh, notation, shard, show_sharding, use_cpu_devices, use_devices
from .hlo import (
    COLLECTIVE_OPCODES,
    CPU_PROMOTED,
    HLO_TYPE_BYTES,
    Collective,
    collectives_in,
    compiled_text,
    cpu_collective_dtype,
    emitted_totals,
    full_array_bytes,
    hlo_shape_bytes,
    hlo_type,
    parse_hlo_collectives,
    parse_replica_groups,
)
from .decode import DecodeResult, decode_step
from .expected import DIFFERENCES, differences, expected_collectives
from .step import StepResult, train_step

__all__ = ["COLLECTIVE_OPCODES", "CPU_PROMOTED", "DIFFERENCES", "HLO_TYPE_BYTES", "Collective",
           "DecodeResult", "differences", "expected_collectives",
           "StepResult", "decode_step",
           "collectives_in", "compiled_text", "cpu_collective_dtype", "emitted_totals",
           "full_array_bytes", "hlo_shape_bytes",
           "hlo_type", "make_mesh", "notation", "parse_hlo_collectives", "parse_replica_groups",
           "shard", "show_sharding", "train_step", "use_cpu_devices", "use_devices"]
