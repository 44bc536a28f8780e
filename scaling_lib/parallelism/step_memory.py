"""Memory per device of arrays of plans, for the estimator (the first pipeline stage).

Stands in for ``scaling_lib.memory.training_memory_arrays`` (the one memory model, owned by the
memory module) until that lands: the same parts, from the same per-layer activation terms
(``memory._activation_terms``) and per-stage parameters (``memory._first_stage_params``),
evaluated once per distinct (tp, pp, ep) or (tp, SP, recompute) and broadcast over the plans.
ZeRO shards over the plan's shard group S (``shard_group``, or all dp·cp replicas); ZeRO-3 with
``reshard_after_forward=False`` keeps the stage's gathered weights for the step.

See: the chapter "Memory for training".
"""

from __future__ import annotations

import numpy as np

from .. import memory as _memory
from .plan import RECOMPUTE, ParallelPlan
from .rules import stage_layers

# Megatron-Core's default gradient bucket (40M parameters) in bf16 bytes; DDP's is 25 MB.
GRAD_BUCKET_BYTES = 80e6
# Fixed memory a training process holds besides tensors: CUDA context and cuBLAS workspaces
# (about 0.5-1 GB per device), NCCL's channel buffers (a few hundred MB per communicator):
# an allowance, as in the memory chapter's timeline.
FRAMEWORK_RESERVE_BYTES = 2e9
# The caching allocator rounds and fragments: a share of the allocated bytes it cannot reuse.
ALLOCATOR_FRAGMENTATION = 0.05


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


def _activation_per_token(c, P, n_first, T, a, flash):
    """Bytes per token of the first stage's layers kept for the backward (and the one
    layer's working set recomputed under full recomputation)."""
    n = len(n_first)
    n_moe = np.minimum(c.n_moe_layers, n_first)
    n_dense = n_first - n_moe
    per_tok, work, r_idx = np.zeros(n), np.zeros(n), np.zeros(n, np.int64)
    for j, r in enumerate(RECOMPUTE):
        r_idx[P["recompute"] == r] = j
    uniq, inv = groups(P["tp"], P["sequence_parallel"].astype(np.int64), r_idx)
    for i, (t, s, r) in enumerate(uniq):
        sel = inv == i
        for moe, k in ((False, n_dense[sel]), (True, n_moe[sel])):
            if moe and not c.is_moe:
                continue
            terms = _memory._activation_terms(c, moe, T, float(t), bool(s), RECOMPUTE[r],
                                              flash, a)
            per_tok[sel] += k * float(sum(terms.values()))
            if RECOMPUTE[r] == "full":
                full = _memory._activation_terms(c, moe, T, float(t), bool(s), "none", flash, a)
                work[sel] = np.maximum(work[sel], float(sum(full.values())))
    return per_tok, work


def memory_parts(c, P, m, T, a, recipe, flash, params):
    """Bytes per device by part, per plan, on the first pipeline stage (which holds the most
    activations; with pp = 1 also the output layer and the logits). ``params``:
    :func:`stage_params`."""
    p_b, g_b, o_b = _memory._recipe(recipe, "adam")
    dense, experts = params
    zero = P["zero"]
    S = zero_group(P)
    S_e = np.maximum(S / P["ep"], 1.0)
    keep = (zero >= 3) & ~P["reshard_after_forward"]  # gathered weights kept for the step

    def sharded(bytes_per, stage, kept=False):
        on = (zero >= stage) & ~kept
        return bytes_per * (np.where(on, dense / S, dense) + np.where(on, experts / S_e, experts))

    tp, cp, pp = (P[k].astype(float) for k in ("tp", "cp", "pp"))
    n_first = np.ceil(stage_layers(c.L, P["pp"], P["virtual_stages"], P["pp_layout"])[0])
    per_tok, work = _activation_per_token(c, P, n_first, T, a, flash)
    b = P["micro_batch"].astype(float)
    tokens = b * T / cp
    v = P["virtual_stages"].astype(float)
    inflight = np.where(P["schedule"] == "gpipe", m, np.minimum(pp, m))  # memory.in_flight_..
    inflight = np.where((P["schedule"] != "gpipe") & (v > 1),
                        inflight * (1 + (pp - 1) / (pp * v)), inflight)
    inflight = np.where(pp == 1, 1.0, inflight)
    acts = (per_tok * inflight + work) * tokens
    # fp32 logits on the last stage; with pp = 1 that is this device (2 copies at the loss peak)
    logits = np.where(pp == 1, _memory.logits_bytes(c, b, T / cp, 1, copies=2) / tp, 0.0)
    gbuf = np.where(S > 1, 2 * np.minimum(GRAD_BUCKET_BYTES, (dense + experts) * a), 0.0)
    gbuf = gbuf + np.where((zero >= 3) & ~keep, 2 * (dense + experts) / n_first * a, 0.0)
    parts = {"parameters": sharded(p_b, 3, keep),
             "gradients": sharded(g_b, 2), "optimizer": sharded(o_b, 1),
             "activations": acts, "logits": logits, "communication buffers": gbuf}
    allocated = sum(parts.values())
    parts["allocator fragmentation"] = ALLOCATOR_FRAGMENTATION * allocated
    parts["framework reserve"] = np.full(len(zero), FRAMEWORK_RESERVE_BYTES)
    return parts


def memory_arrays(c, P, m, T, a, recipe, flash, params):
    """The memory by part of each plan: ``memory.training_memory_arrays`` when the memory
    module has it, else :func:`memory_parts`."""
    return memory_parts(c, P, m, T, a, recipe, flash, params)
