"""What the simulated training step compiles, predicted from the cost model: every difference
between :func:`scaling_lib.parallelism.collectives` (how frameworks run a step on accelerators)
and the program :func:`~scaling_lib.simulate.train_step` runs on XLA:CPU, named one by one.

:func:`expected_collectives` starts from the model's collectives of the same cfg, plan, B, T
and turns them into the compiled program's:

- ``cpu-widening``: XLA:CPU runs bf16 (and fp8) collectives in f32 (f16): the model at the
  widened dtype (:data:`~scaling_lib.simulate.CPU_PROMOTED`).
- ``sp-regather-kept``: with sequence parallelism, Megatron-LM all-gathers each
  column-parallel linear's input again in the backward pass for its weight gradient; JAX's
  autodiff keeps the gathered input as a residual instead, so the program has no backward
  re-gather (the model with ``sp_regather=False``).
- ``ring-kv-kept``: ring attention's backward sends the K/V blocks again with dK/dV in
  Transformer Engine; autodiff keeps the forward's blocks, so only dK/dV travel back
  (``ring_keeps_kv=True``).
- ``dropless-padded``: XLA has no ragged AllToAll on CPU, so a dropless MoE layer sends
  static buffers of C = T slots per expert and sequence, E/k times the routed tokens a ragged
  dispatcher sends (``dispatch="padded"``; 2x at E = 4, k = 2).
- ``fsdp-regather-cse``: with ZeRO-3 the program asks for each weight's all-gather again in
  the backward pass (the layers are rematerialised without their gathered weights); XLA's
  CSE merges it into the same micro-batch's forward gather (a host has no memory pressure).
- ``pipeline-spmd``: a pipelined step is one SPMD program on every stage
  (:func:`scaling_lib.simulate.pipeline.as_spmd_compiles`, which names its own terms).

Each difference applies only where its condition holds (:func:`differences` lists them for a
plan). Left as it is (not a difference in bytes): XLA:CPU's all-reduce combiner, which merges
all-reduces over the same groups; the comparison is on totals per (kind, group size).

See: Chapter "Networks and collectives", "Running collectives for real".
"""

from __future__ import annotations

from ..parallelism.comms import Comm, collectives
from .hlo import CPU_PROMOTED

DIFFERENCES = ("cpu-widening", "sp-regather-kept", "ring-kv-kept", "dropless-padded",
               "fsdp-regather-cse", "pipeline-spmd")
_HLO = {"bf16": "bf16", "fp32": "f32", "f32": "f32", "fp16": "f16", "f16": "f16"}


def differences(cfg, plan, *, dtype="f32") -> tuple:
    """The named differences (:data:`DIFFERENCES`) that apply to this cfg, plan and dtype.

    >>> from scaling_lib.parallelism import ParallelPlan
    >>> from scaling_lib.models import TransformerConfig
    >>> c = TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64)
    >>> differences(c, ParallelPlan(tp=2, sequence_parallel=True), dtype="bf16")
    ('cpu-widening', 'sp-regather-kept')
    """
    out = []
    if _HLO.get(dtype, dtype) in CPU_PROMOTED:
        out.append("cpu-widening")
    if plan.sequence_parallel and plan.tp > 1:
        out.append("sp-regather-kept")
    if plan.cp > 1 and plan.cp_variant == "ring":
        out.append("ring-kv-kept")
    if cfg.is_moe and cfg.capacity_factor is None and plan.ep > 1:
        out.append("dropless-padded")
    if plan.zero == 3 and plan.zero_group > 1:
        out.append("fsdp-regather-cse")
    if plan.pp > 1:
        out.append("pipeline-spmd")
    return tuple(out)


def expected_collectives(cfg, plan, B, T, *, dtype="f32") -> list[Comm]:
    """The collectives :func:`~scaling_lib.simulate.train_step` compiles for these settings,
    from the cost model with each of :func:`differences` applied (module docstring).

    >>> from scaling_lib.parallelism import ParallelPlan, collectives, totals
    >>> from scaling_lib.models import TransformerConfig
    >>> c = TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64)
    >>> p = ParallelPlan(tp=2, sequence_parallel=True, micro_batch=8)
    >>> model = totals(collectives(c, p, 8, 16, dtype="fp32"))[("all-gather", 2)]
    >>> totals(expected_collectives(c, p, 8, 16))[("all-gather", 2)] / model  # 10 of 15 gathers
    0.6666666666666666
    """
    wide = CPU_PROMOTED.get(_HLO.get(dtype, dtype), _HLO.get(dtype, dtype))
    comms = collectives(cfg, plan, B, T, dtype=wide, sp_regather=False, ring_keeps_kv=True,
                        dispatch="padded")
    if plan.zero == 3:
        comms = [c for c in comms if not (c.axis == "dp" and c.kind == "all-gather"
                                          and c.phase == "backward")]
    if plan.pp > 1:
        from .pipeline import as_spmd_compiles

        comms = as_spmd_compiles(comms, cfg, plan, B, T, dtype=wide)
    return comms
