"""The step assembly of the estimator: one training step of arrays of plans, part by part.

One step of ``global_batch`` sequences of T tokens on one device of a (dp, tp, pp, cp, ep) plan:

    step = busy + bubble + exposed communication + optimizer

- busy: m = global_batch / (dp · micro_batch) micro-batches of the slowest pipeline stage
  (:func:`scaling_lib.parallelism.rules.stage_layers`: the first stage holds the embedding, the
  last the output layer and loss), each timed by :mod:`~scaling_lib.parallelism.kernels`.
- bubble: ``pipeline_bubble_fraction`` of the schedule, (p - 1) / (v·m + p - 1) of the step.
- communication: tensor-parallel all-reduces (or SP's all-gather + reduce-scatter), pipeline
  sends (:func:`scaling_lib.parallelism.pipeline.send_bytes`, Megatron-LM's scatter-gather),
  expert all-to-alls and the context-parallel exchange of the plan's ``cp_variant``
  (:func:`scaling_lib.parallelism.context.comms`) are on the critical path, except what a
  variant overlaps with attention; the data-parallel gradient reduction (reduce-scatter over
  the ZeRO shard group, and HSDP's all-reduce across groups) hides under the last micro-batch's
  backward except its last bucket (``overlap_grad_reduce``); ZeRO-3 gathers hide under compute
  where they can (every micro-batch with ``reshard_after_forward``, else once per step).
  Every collective is timed on the links its group crosses, its neighbours' distance from the
  one device order (:data:`scaling_lib.parallelism.mesh.ORDER`, TP innermost, then CP, PP, DP).
- optimizer: Adam's update, memory-bound: ``ADAM_BYTES_PER_PARAM`` bytes over HBM for each
  parameter of the local shard, plus ZeRO-1/2's all-gather of the updated weights.

Left out: overlap of tensor-parallel communication with compute (Megatron's TP comm overlap),
stragglers and network congestion between jobs, and load imbalance among experts.

See: the chapters "Planning a training run" and "Validating the planner".
"""

from __future__ import annotations

import numpy as np

from .. import models, transformer
from . import context, mesh, pipeline
from .kernels import (ADAM_BYTES_PER_PARAM, _host_bound, _stream_time, microbatch_parts,
                      stage_compute)
from .links import group_time
from .plan import RECOMPUTE, SCHEDULES, ParallelPlan, pipeline_bubble_fraction
from .rules import stage_layers
from .step_memory import GRAD_BUCKET_BYTES, groups, memory_arrays, stage_params, zero_group

# Host work of the optimizer step besides its kernels' streaming: the fused Adam, the gradient
# norm, the loss-scale check (about 10 kernel launches on Megatron-LM's distributed optimizer).
OPTIMIZER_KERNELS = 10


def _compute(c, acc, a, cal, P, T, flash, causal):
    """Per plan: the slowest stage's micro-batch (fb seconds, forward seconds), its layers,
    and the kernel parts."""
    parts = microbatch_parts(c, acc, a, cal, P, T, flash, causal)
    rec = P["recompute"]
    first, mid, last = (np.ceil(x) for x in stage_layers(c.L, P["pp"], P["virtual_stages"],
                                                          P["pp_layout"]))
    one = P["pp"] == 1
    t1, f1 = stage_compute(c, parts, first, rec, cal, embedding=True, head=False)
    t2, f2 = stage_compute(c, parts, mid, rec, cal)
    t3, f3 = stage_compute(c, parts, last, rec, cal, head=True)
    t0, f0 = stage_compute(c, parts, c.L, rec, cal, embedding=True, head=True)
    slowest = np.argmax(np.stack([t1, t2, t3]), axis=0)
    pick = lambda *xs: np.choose(slowest, xs)  # noqa: E731
    # the bubble is the ramp of the other stages (a step of 1F1B lasts (m - 1)·t_slowest plus
    # one micro-batch through every stage): p - 1 slots of a middle stage, and what the end
    # stages add to their slot (the embedding's gradient, the output layer) beyond the slowest
    slowest_t = np.maximum(np.maximum(t1, t2), t3)
    return {"mb": np.where(one, t0, pick(t1, t2, t3)), "f": np.where(one, f0, pick(f1, f2, f3)),
            "ramp": t2, "ends": np.where(one, 0.0, t1 + t3 - t2 - slowest_t),
            "layers": np.where(one, c.L, np.maximum(np.maximum(first, mid), last)),
            "parts": parts}


def _cp_layer(c, P, T, a, cluster, cal, core_f, stride):
    """Context-parallel communication per layer and micro-batch, (exposed, total) seconds:
    the plan's ``cp_variant`` collectives from :func:`scaling_lib.parallelism.context.comms`
    (one layer, one micro-batch); an overlappable one hides under attention's forward (its
    backward: twice that). One vectorised collective time per variant and collective."""
    n = len(P["cp"])
    exposed, total = np.zeros(n), np.zeros(n)
    one = c.with_changes(L=1)
    for variant in np.unique(P["cp_variant"][P["cp"] > 1]):
        sel = np.flatnonzero((P["cp"] > 1) & (P["cp_variant"] == variant))
        uniq, inv = groups(P["tp"][sel], P["cp"][sel], P["micro_batch"][sel])
        per_group = [context.comms(one, ParallelPlan(tp=int(tp), cp=int(cp), micro_batch=int(b),
                                                     cp_variant=str(variant)), int(b), T,
                                   dtype=_dt(a)) for tp, cp, b in uniq]
        for j, comm in enumerate(per_group[0]):  # the same collectives for every group
            nbytes = np.array([g[j].nbytes for g in per_group])[inv]
            count = np.array([g[j].count for g in per_group])[inv]
            t = group_time(comm.kind, nbytes, P["cp"][sel], stride[sel], cluster, cal) * count
            window = core_f[sel] * (2 if comm.phase == "backward" else 1)
            exposed[sel] += np.maximum(0.0, t - window) if comm.overlappable else t
            total[sel] += t
    return exposed, total


def _critical_comms(c, P, T, a, cluster, cal, comp, st):
    """Per micro-batch seconds of the communication on the critical path, by axis."""
    tp, cp, pp, ep = (P[k].astype(float) for k in ("tp", "cp", "pp", "ep"))
    sp, rec, v = P["sequence_parallel"], P["recompute"], P["virtual_stages"].astype(float)
    n_stage, M = comp["layers"], comp["parts"]["M"]
    full = np.where(rec == "full", 1, 0)
    act = M * c.D * a
    one_tp = np.where(sp, group_time("all-gather", act, tp, 1, cluster, cal)
                      + group_time("reduce-scatter", act, tp, 1, cluster, cal),
                      group_time("all-reduce", act, tp, 1, cluster, cal))
    # per layer on the critical path: the forward's two all-reduces (attention and MLP
    # outputs); the backward's two overlap the weight-gradient matmuls (Megatron-LM's
    # asynchronous input-gradient all-reduce); full recomputation adds one (the fitted count)
    tp_mb = n_stage * (2 + full) * one_tp
    # expert dispatch and combine: each device's M·k token copies (V/ep of the array V, /tp
    # with SP), forward and back, per MoE layer of the stage
    n_moe = np.minimum(c.n_moe_layers, n_stage)
    node = cluster.devices_per_node
    ep_stride = node / np.minimum(ep, mesh._replica_members_per_node(P, node))
    a2a = group_time("all-to-all", act * c.k * ep / np.where(sp, tp, 1.0), ep, ep_stride,
                     cluster, cal) if c.is_moe else 0.0 * M
    ep_mb = n_moe * 2 * (2 + full) * a2a
    cp_exp, cp_tot = _cp_layer(c, P, T, a, cluster, cal, comp["parts"]["core_f"], st["cp"])
    cp_mb = n_stage * (1 + full) * cp_exp
    # pipeline sends: an activation forward and a gradient back per micro-batch and chunk
    send = pipeline.send_bytes(c.D, P["micro_batch"], T, cp, tp, dtype=_dt(a),
                               sequence_parallel=sp)
    p2p = group_time("collective-permute", send, pp, st["pp"], cluster, cal)
    gather = np.where(sp | (tp == 1), 0.0, group_time("all-gather", send * tp, tp, 1, cluster,
                                                      cal))
    pp_mb = np.where(pp > 1, 2 * v * (p2p + gather), 0.0)
    return {"tp": tp_mb, "ep": ep_mb, "cp": cp_mb, "pp": pp_mb,
            "cp_total": n_stage * (1 + full) * cp_tot}


def _dt(a):
    return {1: "fp8", 2: "bf16"}.get(int(a), "fp32")


def _data_parallel(c, P, m, a, cluster, cal, comp, params, overlap_grad_reduce):
    """Seconds of the data-parallel side: ZeRO-3 gathers (exposed), the gradient reduction
    (time, exposed), the optimizer and ZeRO-1/2's weight all-gather."""
    dense, expert = params
    zero, ep = P["zero"], P["ep"].astype(float)
    S = zero_group(P)
    R = (P["dp"] * P["cp"]) / S  # HSDP: replicas of each shard
    node = cluster.devices_per_node
    in_node = mesh._replica_members_per_node(P, node, shard=S)
    s_stride = node / np.maximum(in_node, 1)
    r_stride = node / np.maximum(mesh._replica_members_per_node(P, node) // np.maximum(in_node, 1), 1)
    stage_bytes = (dense + expert) * a
    f = comp["f"]
    ag3 = group_time("all-gather", stage_bytes, S, s_stride, cluster, cal)
    per_mb = np.maximum(0, ag3 - f) + np.maximum(0, ag3 - 2 * f)  # before forward, backward
    z3 = np.where(zero >= 3, np.where(P["reshard_after_forward"], m * per_mb,
                                      np.maximum(0, ag3 - f)), 0.0)
    z3_total = np.where(zero >= 3, np.where(P["reshard_after_forward"], 2 * m, 1) * ag3, 0.0)
    kind = np.where(zero >= 1, 1, 0)
    g_dense = np.where(kind, group_time("reduce-scatter", dense * a, S, s_stride, cluster, cal),
                       group_time("all-reduce", dense * a, S, s_stride, cluster, cal))
    S_e = np.maximum(S / ep, 1.0)
    g_exp = np.where(kind, group_time("reduce-scatter", expert * a, S_e, s_stride, cluster, cal),
                     group_time("all-reduce", expert * a, S_e, s_stride, cluster, cal))
    hsdp = np.where((zero >= 1) & (R > 1), group_time("all-reduce", stage_bytes / S, R,
                                                      r_stride, cluster, cal), 0.0)
    grad = g_dense + g_exp + hsdp
    window = 2 * f if overlap_grad_reduce else 0.0 * f
    last_bucket = grad * np.minimum(1.0, GRAD_BUCKET_BYTES / np.maximum(stage_bytes, 1.0))
    n_rep = P["dp"] * P["cp"]
    dp_exposed = np.where(n_rep > 1, np.maximum(grad - window, last_bucket if overlap_grad_reduce
                                                else grad), 0.0)
    shard = np.where(zero >= 1, dense / S + expert / S_e, dense + expert)
    opt = _host_bound(_stream_time(shard * ADAM_BYTES_PER_PARAM, cluster.accelerator, cal),
                      OPTIMIZER_KERNELS, cal) + cal.step_overhead
    ag_opt = np.where((zero >= 1) & (zero < 3), group_time("all-gather", stage_bytes, S,
                                                           s_stride, cluster, cal), 0.0)
    return {"z3": z3, "z3_total": z3_total, "grad": grad, "dp_exposed": dp_exposed,
            "opt": opt, "ag_opt": ag_opt, "S": S}


def _bubble_fraction(P, m):
    frac = np.zeros_like(m)
    for s in SCHEDULES:
        sel = P["schedule"] == s
        if np.any(sel):
            vv = np.where(s == "gpipe", 1, P["virtual_stages"][sel])
            frac[sel] = pipeline_bubble_fraction(P["pp"][sel], m[sel].astype(np.int64), vv, s)
    return frac


def _utilisation(c, P, B, T, step, acc, dtype):
    n_dev = (P["dp"] * P["tp"] * P["pp"] * P["cp"]).astype(float)
    peak = acc.peak_flops_per_s(dtype) * n_dev
    mfu = float(transformer.train_flops(c, B, T, causal=False)) / step / peak
    hw = np.zeros_like(step)
    for r in RECOMPUTE:
        sel = P["recompute"] == r
        if np.any(sel):
            hw[sel] = float(transformer.train_flops(c, B, T, causal=False, recompute=r))
    return mfu, hw / step / peak


def assemble(c, cluster, P, B, T, *, dtype, cal, flash, causal, overlap_grad_reduce, recipe,
             detail, order=mesh.ORDER) -> dict:
    """The arrays of :func:`scaling_lib.parallelism.estimate.estimate_arrays` (checked
    plans ``P``, model ``c``)."""
    from ..units import dtype_bytes

    acc = cluster.accelerator
    a = dtype_bytes(dtype)
    m = np.maximum(np.floor(B / (P["dp"] * P["micro_batch"])), 1.0)
    st = mesh._axis_strides(P, order)
    comp = _compute(c, acc, a, cal, P, T, flash, causal)
    crit = _critical_comms(c, P, T, a, cluster, cal, comp, st)
    params = stage_params(c, P)
    dpp = _data_parallel(c, P, m, a, cluster, cal, comp, params, overlap_grad_reduce)
    path_mb = crit["tp"] + crit["ep"] + crit["cp"] + crit["pp"]
    frac = _bubble_fraction(P, m)
    bubble = frac / (1 - frac) * m * (comp["ramp"] + path_mb) + np.maximum(comp["ends"], 0.0)
    compute_time = m * comp["mb"]
    exposed = m * path_mb + dpp["z3"] + dpp["dp_exposed"]
    step = compute_time + exposed + bubble + dpp["opt"] + dpp["ag_opt"]
    mfu, hfu = _utilisation(c, P, B, T, step, acc, dtype)
    mem_parts = memory_arrays(c, P, B, T, dtype, recipe, flash, cluster)
    mem = sum(mem_parts.values())
    out = dict(step_time=step, compute_time=compute_time, exposed_comm_time=exposed + dpp["ag_opt"],
               bubble_time=bubble, optimizer_time=dpp["opt"], memory_bytes=mem,
               fits=mem <= acc.memory_capacity_bytes, mfu=mfu, hfu=hfu, tokens_per_s=B * T / step)
    if detail:
        S = dpp["S"]
        out["memory_parts"] = mem_parts
        out["comms"] = [
            ("tensor-parallel all-reduces", "tp", "all-reduce", P["tp"], m * crit["tp"],
             m * crit["tp"]),
            ("expert all-to-alls", "ep", "all-to-all", P["ep"], m * crit["ep"], m * crit["ep"]),
            (f"context parallelism ({P['cp_variant'][0]})", "cp", "all-gather", P["cp"],
             m * crit["cp_total"], m * crit["cp"]),
            ("pipeline sends", "pp", "collective-permute", P["pp"], m * crit["pp"],
             m * crit["pp"]),
            ("ZeRO-3 weight gathers", "dp", "all-gather", S, dpp["z3_total"], dpp["z3"]),
            ("gradient reduction", "dp", "reduce-scatter" if P["zero"][0] else "all-reduce",
             P["dp"] * P["cp"], dpp["grad"], dpp["dp_exposed"]),
            ("ZeRO weight all-gather", "dp", "all-gather", S, dpp["ag_opt"], dpp["ag_opt"])]
    return out


__all__ = ["assemble"]
