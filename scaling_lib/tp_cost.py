"""Tensor parallelism's costs: the compute-bound limit on tp, and the best FSDP x TP split.

Megatron's split puts two AllReduces of the layer's activations a·BT·D on the critical path of
every layer's forward pass (one after attention, one after the MLP; Shoeybi et al. 2019), while
each tp rank does 1/tp of the layer's matmuls. With f = forward matmul FLOPs of one layer per
token (2·(2D(N+K)H + 3DF) for a SwiGLU layer) and C the peak FLOP/s, on a switch or ring whose
one-way bandwidth per device is W:

    T_math = BT·f / (tp·C),   T_comm = 2 · 2(tp-1)/tp · a·BT·D / W

The token count BT cancels: communication stays hidden (T_comm <= T_math) while

    tp <= 1 + f·W / (4·a·D·C)

Left out: the attention core (QK^T and AV, which grows with T and only loosens the bound),
latency (small for the megabyte activations of real batches), and the backward pass, which has
twice the matmuls for the same two collectives (so the forward pass is the binding one).

The split search (:func:`split_table`) enumerates tp x fsdp plans of a GPU cluster, with ranks
laid out tp-innermost (a tp group is consecutive devices, inside a node when tp <= 8), keeps
those whose memory fits, and times each as max(compute, FSDP traffic) + TP traffic: FSDP's
gathers and reduce-scatters overlap compute (prefetch), TP's collectives do not.

See: the chapter "Tensor and sequence parallelism".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import collectives as C
from . import hardware, memory, models
from .parallelism import ParallelPlan, collectives, constraints
from .parallelism.comms import element_bytes
from .transformer import _attention_weights, _mlp_weights, train_flops


def layer_flops_per_token(cfg) -> float:
    """Forward matmul FLOPs of one dense layer per token: f = 2·(2D(N+K)H + 3DF) (SwiGLU).

    >>> layer_flops_per_token("llama3-8b") == 2 * (2 * 4096 * 40 * 128 + 3 * 4096 * 14336)
    True
    """
    c = models.get(cfg)
    if c.is_moe or c.mla is not None:
        raise ValueError(f"{c.name or 'cfg'} is an MoE or MLA model; layer_flops_per_token "
                         "covers dense layers with standard attention only")
    return float(2 * (_attention_weights(c) + _mlp_weights(c, c.F)))


def layer_times(cfg, tp, tokens, accelerator, bytes_per_s, *, topology="switch", latency=0.0,
                dtype="bf16"):
    """(T_math, T_comm) of one layer's forward pass on tp ranks, in seconds.

    T_math = tokens·f / (tp·C); T_comm = 2 AllReduces of a·tokens·D bytes over tp devices
    (:func:`scaling_lib.collectives.collective_time`, ``bytes_per_s`` one-way as it says).
    Broadcasts over tp and tokens.

    >>> t_math, t_comm = layer_times("llama3-70b", 8, 8192, "h100", 450e9)
    >>> round(t_math * 1e3, 3), round(t_comm * 1e3, 3)
    (1.771, 1.044)
    """
    c = models.get(cfg)
    acc = hardware.get(accelerator)
    tp = np.asarray(tp)
    t_math = np.asarray(tokens) * layer_flops_per_token(c) / (tp * acc.peak_flops_per_s(dtype))
    V = element_bytes(dtype) * np.asarray(tokens, dtype=float) * c.D
    t_comm = 2 * C.collective_time("all_reduce", V, tp, bytes_per_s, topology=topology,
                                   latency=latency)
    return _scalar(t_math), _scalar(t_comm)


def tp_limit(cfg, accelerator, bytes_per_s, *, dtype="bf16") -> float:
    """The largest (real) tp whose forward AllReduces hide behind its matmuls: 1 + f·W/(4·a·D·C).

    ``bytes_per_s`` (W) is one-way per device on a switch or ring (for a torus axis, a
    bidirectional ring: twice one link's). Latency is left out.

    >>> round(tp_limit("llama3-70b", "h100", 450e9), 2)   # NVLink inside a DGX H100
    12.88
    >>> round(tp_limit("llama3-70b", "h100", 50e9), 2)    # one 400 Gb/s NIC per GPU
    2.32
    """
    c = models.get(cfg)
    C_ = hardware.get(accelerator).peak_flops_per_s(dtype)
    return 1.0 + layer_flops_per_token(c) * bytes_per_s / (4 * element_bytes(dtype) * c.D * C_)


def max_tp_degree(cfg, accelerator, bytes_per_s, *, dtype="bf16", divisors_only=True) -> int:
    """The largest integer tp <= :func:`tp_limit`; with ``divisors_only``, also dividing K.

    A tp that does not divide the K kv heads needs them replicated (see :func:`kv_replication`);
    ``divisors_only`` keeps the degrees that split N and K evenly.

    >>> max_tp_degree("llama3-70b", "h100", 450e9), max_tp_degree("llama3-8b", "h100", 450e9)
    (8, 4)
    """
    c = models.get(cfg)
    top = int(math.floor(tp_limit(c, accelerator, bytes_per_s, dtype=dtype) + 1e-9))
    ok = [t for t in range(1, top + 1)
          if not divisors_only or (c.N % t == 0 and c.K % t == 0)]
    return max(ok)


def kv_replication(cfg, tp) -> int:
    """Copies of each kv head across the tp ranks: 1 when tp divides K, tp / K when K divides tp.

    Each rank needs the kv heads its N/tp query heads read; with tp > K a kv head is shared by
    tp / K ranks, each holding (and computing) its own copy.

    >>> kv_replication("llama3-70b", 8), kv_replication("llama3-70b", 32)
    (1, 4)
    >>> kv_replication("llama3-70b", 3)
    Traceback (most recent call last):
    ...
    ValueError: tp=3 must divide N=64 query heads and divide or be a multiple of K=8 kv heads; choose tp in [1, 2, 4, 8, 16, 32, 64]
    """
    c = models.get(cfg)
    if c.N % tp or (c.K % tp and tp % c.K):
        ok = [t for t in range(1, c.N + 1) if c.N % t == 0 and (c.K % t == 0 or t % c.K == 0)]
        raise ValueError(f"tp={tp} must divide N={c.N} query heads and divide or be a multiple "
                         f"of K={c.K} kv heads; choose tp in {ok}")
    return 1 if c.K % tp == 0 else tp // c.K


@dataclass(frozen=True)
class Split:
    """One FSDP x TP plan of a cluster: its memory, whether it fits, and its step time (s)."""

    plan: ParallelPlan
    memory_bytes: float
    fits: bool
    compute_time: float
    tp_time: float
    fsdp_time: float

    @property
    def step_time(self) -> float:
        """max(compute, FSDP traffic) + TP traffic: FSDP overlaps, TP does not."""
        return max(self.compute_time, self.fsdp_time) + self.tp_time


def _group_time(kind, nbytes, group, stride, cluster) -> float:
    """One collective over ``group`` devices spaced ``stride`` apart (tp-innermost ranks)."""
    if group == 1 or nbytes == 0:
        return 0.0
    node = cluster.devices_per_node
    per_node = max(1, min(group, node // stride)) if stride < node else 1
    sub = hardware.cluster(cluster.accelerator.name, group, devices_per_node=per_node)
    return float(C.hierarchical_time(kind, nbytes, sub).total)


def split_time(cfg, cluster, plan: ParallelPlan, B, T, *, dtype="bf16", flash_attention=True,
               efficiency=1.0) -> Split:
    """Memory and step time of ``plan`` (dp x tp, any ZeRO stage) for B sequences of T tokens.

    Compute: :func:`scaling_lib.transformer.train_flops` (one more forward pass with full
    recomputation) at ``efficiency`` times the peak, over the world size. Communication:
    :func:`scaling_lib.parallelism.collectives`, each timed with
    :func:`scaling_lib.collectives.hierarchical_time` over the nodes its group spans.
    Memory: :func:`scaling_lib.memory.training_memory` against the accelerator's HBM.
    """
    c = models.get(cfg)
    if cluster.topology != "switch":
        raise ValueError(f"cluster topology={cluster.topology!r}; split_time models GPU "
                         "clusters (switch inside a node) only")
    acc = cluster.accelerator
    mem = memory.training_memory(c, plan, B, T, flash_attention=flash_attention, dtype=dtype)
    fits, _ = memory.check_fit(mem, acc)
    flops = train_flops(c, B, T, causal=True, recompute=plan.recompute,
                        flash_attention=flash_attention)
    t_compute = flops / (plan.world_size * efficiency * acc.peak_flops_per_s(dtype))
    t_tp = t_fsdp = 0.0
    for x in collectives(c, plan, B, T, dtype=dtype):
        stride = 1 if x.axis == "tp" else plan.tp
        t = x.count * _group_time(x.kind, x.nbytes, x.group_size, stride, cluster)
        if x.axis == "tp" and not x.overlappable:
            t_tp += t
        else:
            t_fsdp += t
    return Split(plan, float(mem.total), bool(fits), float(t_compute), t_tp, t_fsdp)


def split_table(cfg, cluster, B, T, *, recompute=("none", "selective", "full"),
                sequence_parallel=True, dtype="bf16", efficiency=1.0) -> list:
    """Every FSDP x TP split of ``cluster`` (tp a power of two), fastest first.

    For each tp, FSDP (ZeRO-3) over dp = n / tp ranks, and the fastest recomputation setting
    and micro-batch (a power of two dividing B / dp) that fit; when none fits, the one needing
    least memory (``fits`` False). Plans the strategies' constraints rule out are left out.
    """
    c = models.get(cfg)
    n = cluster.n_devices
    rows = []
    tp = 1
    while tp <= n and n % tp == 0:
        dp = n // tp
        if B % dp:
            tp *= 2
            continue
        mbs = [b for b in (2 ** k for k in range(B.bit_length())) if (B // dp) % b == 0]
        plans = [ParallelPlan(dp=dp, tp=tp, zero=3 if dp > 1 else 0, micro_batch=b,
                              recompute=r, sequence_parallel=sequence_parallel and tp > 1)
                 for r in recompute for b in mbs]
        plans = [p for p in plans if not constraints(c, p, B, T)]
        if plans:
            cands = [split_time(c, cluster, p, B, T, dtype=dtype, efficiency=efficiency)
                     for p in plans]
            fit = [s for s in cands if s.fits]
            rows.append(min(fit, key=lambda s: s.step_time) if fit
                        else min(cands, key=lambda s: s.memory_bytes))
        tp *= 2
    return sorted(rows, key=lambda s: (not s.fits, s.step_time))


def best_split(cfg, cluster, B, T, **options) -> Split:
    """The fastest split of :func:`split_table` that fits in memory."""
    rows = [s for s in split_table(cfg, cluster, B, T, **options) if s.fits]
    if not rows:
        raise ValueError(f"no FSDP x TP split of {cluster.n_devices} devices fits B={B}, T={T}; "
                         "add devices or recompute more")
    return rows[0]


def _scalar(x):
    x = np.asarray(x, dtype=float)
    return float(x) if x.ndim == 0 else x
