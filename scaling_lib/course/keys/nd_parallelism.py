"""Answer key for Chapter 16 (N-dimensional parallelism) exercises."""

from __future__ import annotations

import math

from ... import hardware, memory, models, transformer
from ...collectives import collective_bytes
from ...parallelism import ParallelPlan
from ...parallelism import mesh as M
from ..grading.tables import with_messages

LLAMA3_405B = "llama3-405b"
GPU = "h100"


def _psi(p):
    """Parameters per GPU of Llama 3 405B split t x p ways (even split, no embedding detail)."""
    return transformer.n_params(LLAMA3_405B) / (p.tp * p.pp)


def model_states(p):
    """Ex 16.1: bytes of model states per GPU (mixed precision, Adam), ZeRO-1 over the d·c
    replicas, Ψ/(t·p) parameters per GPU."""
    return float(memory.model_state_bytes(_psi(p), p.dp * p.cp, 1).total)


def nodes_spanned(p):
    """Ex 16.2: nodes one group of ``p.axis`` spans, order [TP, CP, PP, DP]."""
    plan = ParallelPlan(tp=p.tp, cp=p.cp, pp=p.pp, dp=p.dp)
    g = M.groups(plan, p.axis)[0]
    return float(len(set((g // p.node).tolist())))


def scale_out_bytes(p):
    """Ex 16.3: bytes one GPU sends over the network per step in the gradient all-reduce
    (bf16, ring) of Ψ/(t·p) parameters over d ranks; tp fills the node."""
    V = 2 * _psi(p)
    return float(collective_bytes("all-reduce", V, p.dp).sent_bytes)


def cp_for_context(p):
    """Ex 16.4: the power-of-two cp keeping at most ``p.per_gpu`` tokens of a sequence per GPU."""
    return M.context_degree(p.T, p.per_gpu)


def dp_degree(p):
    """Ex 16.5: d = n / (t·c·p)."""
    return M.dp_degree(p.n, p.tp, p.cp, p.pp)


def batch_tokens(p):
    """Ex 16.6: tokens per step, d · (sequences per DP rank) · T."""
    return float(p.dp * p.per_dp * p.T)


def coordinates(rank, t, c, p, d):
    """Ex 16.7: (tp, cp, pp, dp) coordinates of GPU ``rank`` in the order [TP, CP, PP, DP]."""
    co = M.coordinates(rank, ParallelPlan(tp=t, cp=c, pp=p, dp=d))
    return tuple(co[a] for a in M.AXES)


def link_of(per_node, t, c, p, d, axis):
    """Ex 16.8: "intra-node" or "inter-node" for the groups of ``axis`` on nodes of
    ``per_node`` GPUs (no pods), order [TP, CP, PP, DP]; "none" for a degree of 1."""
    plan = ParallelPlan(tp=t, cp=c, pp=p, dp=d)
    cl = hardware.cluster(GPU, plan.world_size, devices_per_node=per_node)
    return M.link_class(cl, plan, axis)


def tp_nvlink_seconds(p):
    """Ex 16.9: seconds a GPU's tensor-parallel all-reduces take per step at NVLink line rate:
    4 all-reduces per layer (2 forward, 2 backward) of b·T·D bf16 activations, L/p layers,
    m micro-batches, each sending 2(t-1)/t of the array."""
    c = models.get(LLAMA3_405B)
    V = 2 * p.b * p.T * c.D
    per = float(collective_bytes("all-reduce", V, p.tp).sent_bytes)
    n = 4 * math.ceil(c.L / p.pp) * p.m
    W = hardware.cluster(GPU, 8).intra_node.bytes_per_s
    return n * per / W


# ---- wrong methods (tests/test_wrong_methods.py: each must FAIL at the cell's tolerance) ---------

def _states_unsharded(p):
    return float(memory.model_state_bytes(_psi(p), 1, 0).total)


def _states_dp_only(p):
    return float(memory.model_state_bytes(_psi(p), p.dp, 1).total)


def _states_no_pp(p):
    return float(memory.model_state_bytes(_psi(p) * p.pp, p.dp * p.cp, 1).total)


def _nodes_stride_ignored(p):
    return float(max(1, math.ceil({"tp": p.tp, "cp": p.cp, "pp": p.pp, "dp": p.dp}[p.axis]
                                  / p.node)))


def _nodes_reversed(p):
    plan = ParallelPlan(tp=p.tp, cp=p.cp, pp=p.pp, dp=p.dp)
    g = M.groups(plan, p.axis, ("dp", "pp", "cp", "tp"))[0]
    return float(len(set((g // p.node).tolist())))


WRONG_METHODS = {
    "16.1": {"optimizer not sharded (ZeRO-0)": _states_unsharded,
             "sharded over d only, not d·c": _states_dp_only,
             "pipeline split left out": _states_no_pp},
    "16.2": {"stride ignored (group members consecutive)": _nodes_stride_ignored,
             "order reversed (DP innermost)": _nodes_reversed},
    "16.3": {"all-reduce sends V, not 2(n-1)/n V": lambda p: 2 * _psi(p),
             "fp32 gradients": lambda p: 2 * scale_out_bytes(p),
             "whole model, not one stage's shard": lambda p: scale_out_bytes(p) * p.tp * p.pp},
    "16.4": {"no rounding to a power of two": lambda p: p.T / p.per_gpu,
             "split over tp too": lambda p: max(1, M.context_degree(p.T, p.per_gpu) // 8)},
    "16.5": {"cp left out": lambda p: p.n // (p.tp * p.pp),
             "tp left out": lambda p: p.n // (p.cp * p.pp)},
    "16.6": {"multiplied by cp": lambda p: batch_tokens(p) * p.cp,
             "sequences per DP rank only": lambda p: float(p.per_dp * p.T)},
    "16.9": {"all layers, not one stage's": lambda p: tp_nvlink_seconds(p) * p.pp,
             "forward only": lambda p: tp_nvlink_seconds(p) / 2,
             "V instead of 2(t-1)/t V": lambda p: tp_nvlink_seconds(p) * p.tp / (2 * (p.tp - 1))},
}

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '16.1': ('Which states does this plan shard, and over which axes?',
             'weights and gradients whole; the optimizer states over the replicas that share them'),
    '16.2': ("A group's members are a stride apart: how many consecutive devices does it cover?",
             "the stride is the product of the inner axes' degrees; count the nodes the span "
             'touches'),
    '16.3': ('What does a ring all-reduce send from each device?',
             '2(n-1)/n of the array from every device, for the group that crosses nodes'),
    '16.4': ('How many tokens can one GPU hold, and how many GPUs share a sequence?',
             'divide T by the tokens per GPU and round up to a power of two'),
    '16.5': ('The degrees multiply to the number of GPUs.',
             'divide the GPUs by the product of the other degrees'),
    '16.6': ('Does context parallelism add sequences?',
             'CP splits each sequence; only dp and the micro-batches add sequences'),
    '16.7': ('Mesh coordinates are digits of a mixed-radix number.',
             "an axis' stride is the product of the degrees inside it; divide and take the "
             'remainder'),
    '16.8': ('A group spans stride × degree consecutive devices.',
             'compare the span with the devices per node'),
    '16.9': ("Count TP's all-reduces for the layers of one stage.",
             "four all-reduces per layer and micro-batch, forward and backward, on one stage's "
             'layers'),
}


# ---- More listed mistakes, each with what the student reads (issue 21).

WRONG_METHODS["16.7"] = {
    "dp innermost (axes reversed)": (
        lambda rank, t, c, p, d: coordinates(rank, d, p, c, t)[::-1],
        "the tensor axis is innermost (stride 1), then cp, pp and dp outermost"),
    "strides without the inner degrees": (
        lambda rank, t, c, p, d: (rank % t, (rank // c) % c, (rank // p) % p, rank // d % d),
        "an axis' stride is the product of the degrees of all the axes inside it"),
}
WRONG_METHODS["16.8"] = {
    "the degree alone decides (stride ignored)": (
        lambda per_node, t, c, p, d, axis: (
            "none" if {"tp": t, "cp": c, "pp": p, "dp": d}[axis] == 1 else
            "intra-node" if {"tp": t, "cp": c, "pp": p, "dp": d}[axis] <= per_node
            else "inter-node"),
        "a group's members are a stride apart: it spans stride × degree consecutive GPUs, "
        "which may leave the node even when the degree is small"),
    "every axis but tp crosses nodes": (
        lambda per_node, t, c, p, d, axis: (
            "none" if {"tp": t, "cp": c, "pp": p, "dp": d}[axis] == 1 else
            "intra-node" if axis == "tp" else "inter-node"),
        "an inner axis with small degrees can still fit in a node: compare the group's span "
        "with the GPUs per node"),
}

with_messages(WRONG_METHODS, {
    "16.1": {"optimizer not sharded (ZeRO-0)": "the optimizer states are sharded over d·c",
             "sharded over d only, not d·c": "context-parallel ranks hold replicas too",
             "pipeline split left out": "each device holds one stage's layers"},
    "16.2": {"stride ignored (group members consecutive)": "members are a stride apart",
             "order reversed (DP innermost)": "tp is innermost, dp outermost"},
    "16.3": {"all-reduce sends V, not 2(n-1)/n V": "a ring all-reduce sends 2(n-1)/n of it",
             "fp32 gradients": "the gradients are bf16",
             "whole model, not one stage's shard": "each device all-reduces its stage's shard"},
    "16.4": {"no rounding to a power of two": "round cp up to a power of two",
             "split over tp too": "tensor parallelism does not split the sequence here"},
    "16.5": {"cp left out": "n = t · c · p · d: divide by c too",
             "tp left out": "n = t · c · p · d: divide by t too"},
    "16.6": {"multiplied by cp": "context parallelism splits sequences, it adds none",
             "sequences per DP rank only": "multiply by the data-parallel degree"},
    "16.9": {"all layers, not one stage's": "a device runs only its stage's layers",
             "forward only": "the backward all-reduces as often",
             "V instead of 2(t-1)/t V": "a ring all-reduce sends 2(t-1)/t of the array"},
})
