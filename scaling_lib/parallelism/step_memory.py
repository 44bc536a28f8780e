"""What the estimator reads from the memory model for arrays of plans.

Memory per device by part is :func:`scaling_lib.memory.training_memory_arrays` (the one memory
model; ``memory.training_memory`` is its scalar view, so ``estimate(...).memory`` equals it).
The per-stage parameter counts that size the data-parallel collectives come from
``memory._first_stage_params``, evaluated once per distinct (tp, pp, ep); ZeRO shards over the
plan's shard group (``shard_group``, or all dp·cp replicas).

See: the chapter "Memory for training".
"""

from __future__ import annotations

import numpy as np

from .. import memory as _memory
from .plan import ParallelPlan

# Megatron-Core's default gradient bucket (40M parameters) in bf16 bytes; DDP's is 25 MB.
GRAD_BUCKET_BYTES = 80e6


def groups(*cols):
    """(unique rows as a 2-D int array, inverse index) of equal-length integer columns: np.unique
    over rows, via one integer key (a 1-D sort is far faster than unique(axis=0))."""
    key = np.zeros(len(cols[0]), np.int64)
    for col in cols:
        u, inv = np.unique(np.asarray(col), return_inverse=True)
        key = key * len(u) + inv.ravel()
    ukey, first, inv = np.unique(key, return_index=True, return_inverse=True)
    rows = np.stack([np.asarray(col)[first] for col in cols], axis=1)
    return rows, inv.ravel()


def stage_params(c, P):
    """(dense, expert) parameters of the first stage on one device (before ZeRO), per plan,
    from ``memory._first_stage_params`` evaluated once per distinct (tp, pp, ep)."""
    uniq, inv = groups(P["tp"], P["pp"], P["ep"])
    dense = np.empty(len(uniq))
    expert = np.empty(len(uniq))
    for i, (tp, pp, ep) in enumerate(uniq):
        plan = ParallelPlan(tp=int(tp), pp=int(min(pp, c.L)), dp=int(ep), ep=int(ep))
        d, e, _, _ = _memory._first_stage_params(c, plan)
        dense[i], expert[i] = d, e
    return dense[inv], expert[inv]


def zero_group(P):
    """Ranks ZeRO shards over, per plan: ``shard_group`` (0 = all) or dp·cp."""
    S = (P["dp"] * P["cp"]).astype(float)
    return np.where(P["shard_group"] > 0, P["shard_group"], S)


def memory_arrays(c, P, B, T, dtype, recipe, flash, cluster):
    """The memory by part of each plan: :func:`scaling_lib.memory.training_memory_arrays`,
    the one memory model (its plan columns include ``shard_group``, ``pp_layout`` and
    ``reshard_after_forward``)."""
    cols = {k: P[k] for k in ("dp", "tp", "pp", "cp", "ep", "zero", "micro_batch",
                              "virtual_stages", "schedule", "recompute", "sequence_parallel",
                              "shard_group", "cp_variant", "pp_layout", "reshard_after_forward")}
    return _memory.training_memory_arrays(c, cols, B, T, dtype=dtype, recipe=recipe,
                                          flash_attention=flash,
                                          devices_per_node=cluster.devices_per_node)
