"""ZeRO stages 1-3, FSDP and HSDP: data parallelism whose model states are sharded.

The dp ranks are split into shard groups of S = ``plan.zero_group`` ranks (S = dp unless
``shard_group`` says otherwise); each rank of a group owns 1/S of the optimizer state (stage 1),
of the gradients (stage 2) and of the weights (stage 3 = FSDP). With Ψ parameters per device
and a bytes per element, per step and micro-batch count m:

    stage 1   ReduceScatter a·Ψ once (last micro-batch)    + AllGather a·Ψ of updated weights
    stage 2   ReduceScatter a·Ψ per micro-batch (m times)   + AllGather a·Ψ of updated weights
    stage 3   AllGather a·Ψ forward, AllGather a·Ψ backward (re-gathered: not kept between the
              passes; the embedding table's backward needs no weights), ReduceScatter a·Ψ,
              each once per micro-batch

The reduce-scatters overlap with the backward pass (as DDP's bucketed all-reduce does); the
all-gather of updated weights follows the optimizer step. ReduceScatter + AllGather moves what
one AllReduce moves, so stages 1-2 cost plain DP's traffic and stage 3 1.5 times it. HSDP
(S < dp) adds an AllReduce of the a·Ψ/S gradient shard across the dp/S groups: the weight
traffic (AllGathers) stays inside a group (a node's fast links), only the gradient shard
crosses groups.

See: the chapter "Data parallelism, ZeRO/FSDP and HSDP".
"""

from __future__ import annotations

from .. import memory as _memory
from .. import models
from ..breakdown import Breakdown
from .comms import Comm, element_bytes, params_per_device
from .plan import ParallelPlan, check_step_args


def comms(cfg, plan: ParallelPlan, B, T, *, dtype="bf16") -> list[Comm]:
    """ZeRO's collectives over the dp ranks (empty for zero = 0: see ``data``).

    >>> from scaling_lib.models import TransformerConfig
    >>> c = TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64)
    >>> [(x.kind, x.group_size, x.nbytes, x.phase) for x in comms(c, ParallelPlan(dp=8, zero=1),
    ...                                                           8, 16, dtype="f32")]
    [('reduce-scatter', 8, 90752.0, 'backward'), ('all-gather', 8, 90752.0, 'optimizer')]
    """
    check_step_args(plan, B, T)
    if not plan.zero or plan.dp * plan.cp == 1:
        return []
    a = element_bytes(dtype)
    emb, rest, experts = params_per_device(cfg, plan)
    psi = emb + rest + experts
    S = plan.zero_group
    R = plan.dp * plan.cp // S  # the cp ranks are replicas too (zero_group is dp·cp)
    m = plan.n_microbatches(B)
    out = []
    if S > 1:
        if plan.zero == 3:
            out += [Comm("all-gather", "dp", S, a * psi, m, "forward", True),
                    Comm("all-gather", "dp", S, a * (psi - (0 if _tied(cfg) else emb)), m,
                         "backward", True),
                    Comm("reduce-scatter", "dp", S, a * psi, m, "backward", True)]
        else:
            n_rs = m if plan.zero == 2 else 1
            out += [Comm("reduce-scatter", "dp", S, a * psi, n_rs, "backward", True),
                    Comm("all-gather", "dp", S, a * psi, 1, "optimizer", False)]
    if R > 1:  # HSDP: the gradient shards are summed across the groups
        out.append(Comm("all-reduce", "dp", R, a * psi / S, 1, "backward", True))
    return out


def _tied(cfg) -> bool:
    """Whether the embedding table is also the output layer (then re-gathered for backward)."""
    return models.get(cfg).tied_embeddings


def memory(cfg, plan: ParallelPlan, B, T, **options):
    """Model states per device after ZeRO sharding over the shard group (stage by stage).

    The memory module's accounting (:func:`scaling_lib.memory.model_state_bytes`): stage 1
    shards the optimizer state, 2 also the gradients, 3 also the weights, over S ranks.

    >>> from scaling_lib.models import TransformerConfig
    >>> c = TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64)
    >>> m0, m3 = (memory(c, ParallelPlan(dp=8, zero=z), 8, 16).total for z in (0, 3))
    >>> m0 / m3  # every model state split 8 ways
    8.0
    """
    check_step_args(plan, B, T, options)
    full = _memory.training_memory(cfg, plan, B, T, **options)
    return Breakdown({k: full[k] for k in ("parameters", "gradients", "optimizer")},
                             unit="bytes")


def constraints(cfg, plan: ParallelPlan, B, T) -> list[str]:
    """A shard group only means something with ZeRO.

    >>> constraints(None, ParallelPlan(dp=4, shard_group=2), 8, 16)
    ['shard_group=2 needs zero >= 1 (it says how ZeRO shards states); use zero=3 for HSDP']
    """
    check_step_args(plan, B, T)
    if plan.shard_group is not None and plan.zero == 0 and plan.shard_group != plan.dp:
        return [f"shard_group={plan.shard_group} needs zero >= 1 (it says how ZeRO shards "
                "states); use zero=3 for HSDP"]
    return []
