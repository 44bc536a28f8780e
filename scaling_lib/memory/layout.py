"""The layout of a plan on one device: plan columns, a stage's parameters, micro-batches in flight.

The pieces of :mod:`.training` that depend only on how the plan cuts the model: which layers and
parameters a pipeline stage holds (:func:`stage_params`) and how many micro-batches of activations
its schedule keeps alive (:func:`in_flight_microbatches`), for one plan or numpy columns of many
(:func:`plan_columns`).

See: Chapter 6, "Memory for training"; Chapter 13 for the schedules.
"""

from __future__ import annotations

import numpy as np

from .. import models
from ..plan import CP_VARIANTS, PP_LAYOUTS, RECOMPUTE, SCHEDULES, ParallelPlan
from ..transformer import (_attention_biases, _attention_weights, _layer_norms, _mlp_biases,
                           _mlp_weights, _norm_params)
from ..units import _brief, check_choice, check_count

PLAN_COLUMNS = ("dp", "tp", "pp", "cp", "ep", "zero", "micro_batch", "virtual_stages",
                "schedule", "recompute", "sequence_parallel")
# Columns a plans dict may leave out, with the ParallelPlan default they then take
# (shard_group 0: shard over all dp·cp replicas).
OPTIONAL = {"shard_group": 0, "cp_variant": "allgather", "pp_layout": "even",
            "reshard_after_forward": True}


def _check_plan(plan):
    if not isinstance(plan, ParallelPlan):
        raise ValueError(f"plan={_brief(plan)} must be a ParallelPlan")


# ---- the columns of many plans -----------------------------------------------------------------
def plan_columns(plans) -> dict:
    """Equal-length numpy columns of a list of ParallelPlans (every field, ``shard_group`` 0 when
    None), the ``plans`` argument of :func:`training_memory_arrays`.

    >>> plan_columns([ParallelPlan(dp=8, zero=3, shard_group=4)])["shard_group"]
    array([4])
    """
    if isinstance(plans, ParallelPlan) or not isinstance(plans, (list, tuple)) or not plans:
        raise ValueError(f"plans={_brief(plans)} must be a non-empty list of ParallelPlans")
    for p in plans:
        _check_plan(p)
    cols = {k: np.array([getattr(p, k) for p in plans]) for k in PLAN_COLUMNS}
    cols["shard_group"] = np.array([p.shard_group or 0 for p in plans], np.int64)
    for k in ("cp_variant", "pp_layout", "reshard_after_forward"):
        cols[k] = np.array([getattr(p, k) for p in plans])
    return cols


def _columns(plans) -> dict:
    """Validated, broadcast columns; the :data:`OPTIONAL` ones take the ParallelPlan default
    when missing."""
    if not isinstance(plans, dict):
        raise ValueError(f"plans={_brief(plans)} must be a dict of equal-length arrays "
                         f"{', '.join(PLAN_COLUMNS)} (plan_columns(list_of_plans) makes one)")
    missing = [k for k in PLAN_COLUMNS if k not in plans]
    if missing:
        raise ValueError(f"plans is missing {missing}; it needs arrays {', '.join(PLAN_COLUMNS)}")
    raw = {k: np.asarray(plans[k]) for k in PLAN_COLUMNS}
    for k, default in OPTIONAL.items():
        raw[k] = np.asarray(plans.get(k, default))
    try:
        shape = np.broadcast_shapes(*(v.shape for v in raw.values()))
    except ValueError:
        raise ValueError("plans must hold arrays of one length (or scalars), got shapes "
                         f"{sorted({v.shape for v in raw.values()})}") from None
    P = {k: np.broadcast_to(v, shape).ravel() for k, v in raw.items()}
    for k in ("dp", "tp", "pp", "cp", "ep", "zero", "micro_batch", "virtual_stages",
              "shard_group"):
        v = P[k]
        low = 0 if k in ("zero", "shard_group") else 1
        if v.dtype.kind not in "iuf" or (v.dtype.kind == "f" and np.any(v != np.round(v))) \
                or np.any(v < low):
            raise ValueError(f"plans[{k!r}]={_brief(plans.get(k))} must hold whole numbers "
                             f">= {low}")
        P[k] = v.astype(np.int64)
    if np.any(P["zero"] > 3):
        raise ValueError("plans['zero'] holds a stage above 3; valid choices: 0, 1, 2, 3")
    for k, valid in (("schedule", SCHEDULES), ("recompute", RECOMPUTE),
                     ("cp_variant", CP_VARIANTS), ("pp_layout", PP_LAYOUTS)):
        # one equality per valid value (np.unique over strings is slow on many plans); the
        # index into ``valid`` stays as P["<k>_idx"] for the model's own tests
        idx = np.full(len(P[k]), -1)
        for j, v in enumerate(valid):
            idx[P[k] == v] = j
        if np.any(idx < 0):
            bad = sorted(set(map(str, np.unique(P[k][idx < 0]))))
            raise ValueError(f"plans[{k!r}] holds {bad}; valid choices: {', '.join(valid)}")
        P[f"{k}_idx"] = idx
    if P["sequence_parallel"].dtype.kind not in "bi":
        raise ValueError("plans['sequence_parallel'] must hold booleans")
    P["sequence_parallel"] = P["sequence_parallel"].astype(bool)
    if P["reshard_after_forward"].dtype.kind not in "bi":
        raise ValueError("plans['reshard_after_forward'] must hold booleans")
    P["reshard_after_forward"] = P["reshard_after_forward"].astype(bool)
    return P


# ---- what one stage holds ----------------------------------------------------------------------
def stage_params(cfg, tp, pp, ep, *, stage="first", stage_layers=None) -> dict:
    """Parameters one device of a pipeline stage holds before ZeRO, by kind (numpy arrays).

    Returns ``dense`` (attention, norms, dense MLPs, shared experts, routers, the embedding on the
    first stage and the output layer on the last, all split t ways; vocabulary-parallel
    embeddings), ``experts`` (routed experts, split e·t ways), ``layers`` on the stage, of which
    ``moe_layers``, and ``unit``: the largest unit ZeRO-3 gathers at once (a layer, or the
    embedding). ``stage_layers``: the layers on this stage (default ⌈L/p⌉, the busiest). Dense
    layers come first (DeepSeek's first k layers), so the first stage holds them. With p > 1 the
    last stage keeps its own copy of a tied embedding for the output layer (Megatron-LM).
    Broadcasts over tp, pp and ep.

    >>> s = stage_params("llama3-8b", 1, 1, 1)
    >>> int(s["dense"][()]) == 8030261248   # every parameter of Llama 3 8B on one device
    True
    """
    c = models.get(cfg)
    check_choice("stage", stage, ("first", "last"))
    for name, v in (("tp", tp), ("pp", pp), ("ep", ep)):
        try:
            ok = np.all(np.asarray(v, dtype=float) >= 1)
        except (TypeError, ValueError, OverflowError):
            ok = False
        if not ok:
            raise ValueError(f"{name}={_brief(v)} must be a degree (a number of at least 1)")
    tp, pp, ep = (np.asarray(x, dtype=float) for x in np.broadcast_arrays(tp, pp, ep))
    if stage_layers is None:
        n = np.ceil(c.L / pp)
    else:
        try:
            n = np.asarray(stage_layers, float) + 0 * pp
        except (TypeError, ValueError, OverflowError):
            n = np.array(np.nan)
        if not np.all((n >= 0) & (n <= c.L)):
            raise ValueError(f"stage_layers={_brief(stage_layers)} must be a number of layers "
                             f"from 0 to {c.L}")
    n_dense_total = c.L - c.n_moe_layers
    if stage == "first":
        n_dense = np.minimum(n_dense_total, n)
        n_moe = n - n_dense
    else:
        n_moe = np.minimum(c.n_moe_layers, n)
        n_dense = n - n_moe
    attn = (_attention_weights(c) + _attention_biases(c)) / tp + _layer_norms(c)
    mlp = (_mlp_weights(c, c.F) + _mlp_biases(c, c.F)) / tp
    expert_one = _mlp_weights(c, c.F_e) + _mlp_biases(c, c.F_e)
    moe_shared = c.n_shared_experts * expert_one / tp + c.D * c.E
    dense = n * attn + n_dense * mlp + n_moe * moe_shared
    embedding = (c.V * c.D + c.learned_positions * c.D) / tp
    output = np.where(pp > 1, c.V * c.D, 0 if c.tied_embeddings else c.V * c.D) / tp \
        + _norm_params(c, c.D)
    first, last = stage == "first", stage == "last"
    dense = dense + np.where(first | (pp == 1), embedding, 0.0) \
        + np.where(last | (pp == 1), output, 0.0)
    experts = n_moe * c.E * expert_one / (ep * tp)
    layer = attn + np.maximum(np.where(n_dense > 0, mlp, 0.0),
                              np.where(n_moe > 0, moe_shared + c.E * expert_one / (ep * tp), 0.0))
    return {"dense": dense, "experts": experts, "layers": n, "moe_layers": n_moe,
            "unit": np.maximum(layer, embedding)}


def _in_flight(P, m, stage, group=None):
    """Micro-batches of activations a stage holds at its peak, in units of the stage's layers
    (see :func:`in_flight_microbatches`)."""
    p = P["pp"].astype(float)
    v = P["virtual_stages"].astype(float)
    r = 0.0 if stage == "first" else p - 1
    one_f_one_b = np.minimum(p - r, m)
    # interleaved 1F1B (Megatron-LM schedules.py): rank r runs 2(p - r - 1) + (v - 1)·N warm-up
    # chunk forwards, N the micro-batches taken per group (microbatch_group_size_per_vp_stage,
    # default p), then one more before its first backward; each chunk is 1/v of the stage
    N = p if group is None else np.minimum(float(group), p)
    interleaved = np.minimum(2 * (p - r - 1) + (v - 1) * N + 1, m * v) / v
    out = np.where(v > 1, interleaved, one_f_one_b)
    gpipe = P["schedule_idx"] == SCHEDULES.index("gpipe") if "schedule_idx" in P \
        else P["schedule"] == "gpipe"
    out = np.where(gpipe, m, out)
    return np.where(p == 1, 1.0, out)


def in_flight_microbatches(plan: ParallelPlan, n_microbatches, *, stage="first",
                           microbatch_group=None):
    """Micro-batches whose activations a pipeline stage holds at its peak.

    1 without a pipeline (gradient accumulation runs micro-batches one after another); GPipe:
    all m; 1F1B: min(p - r, m) on stage r, so min(p, m) on the first and 1 on the last;
    interleaved with v chunks: the first stage runs 2(p - 1) + (v - 1)·p warm-up chunk forwards
    and one more before its first backward, each 1/v of its layers, so p + (p - 1)/v stages' worth
    = p·(1 + (p - 1)/(p·v)) (Korthikanti et al. 2022, section 4.2.3), at most m.
    ``microbatch_group``: N, the micro-batches the interleaved schedule runs per group
    (Megatron-LM's ``--microbatch-group-size-per-virtual-pipeline-stage``, default p; the Llama 3
    paper, section 3.3.2, makes it tunable): the warm-up is 2(p - 1) + (v - 1)·N chunk forwards.

    >>> in_flight_microbatches(ParallelPlan(pp=4), 16)
    4.0
    >>> in_flight_microbatches(ParallelPlan(pp=4, virtual_stages=2, schedule="interleaved"),
    ...                        16)
    5.5
    >>> in_flight_microbatches(ParallelPlan(pp=4), 16, stage="last")
    1.0
    """
    _check_plan(plan)
    check_choice("stage", stage, ("first", "last"))
    m = np.asarray(check_count("n_microbatches", n_microbatches), float)
    P = {k: np.asarray(getattr(plan, k)) for k in ("pp", "virtual_stages", "schedule")}
    if microbatch_group is not None:
        check_count("microbatch_group", microbatch_group)
    out = _in_flight(P, m, stage, microbatch_group)
    return float(out) if np.ndim(out) == 0 else out
