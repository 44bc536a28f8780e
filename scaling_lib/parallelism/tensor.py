"""Tensor parallelism (Megatron-LM) and sequence parallelism over tp ranks.

Attention is split by heads and the MLP by its hidden units: each block's first matmul is
column-parallel, its second row-parallel, so each block needs one collective pair: without
sequence parallelism an AllReduce of the block output forward (g) and of the block input's
gradient backward (f), V = a·b·T·D bytes each, b sequences per micro-batch. Per micro-batch,
with L layers, the embedding (vocabulary-parallel: one g) and the output layer (one f):

    no SP:  AllReduce a·b·T·D, 2L + 1 times forward and 2L + 1 times backward
    SP:     each AllReduce becomes ReduceScatter + AllGather of the same V (same bytes), and
            the norm weights' gradients (replicated, fed by sequence shards) are summed:
            AllReduce of a·(2L + 1)·D. Megatron-LM (its default) keeps only the sequence
            shard of each column-parallel linear's input and all-gathers it again in the
            backward pass for the weight gradient: one more AllGather of V per column-parallel
            linear (2L + 1 per micro-batch), a third more tensor-parallel traffic, to save the
            gathered activations' memory (``sp_regather=False``: the gathered input is kept,
            as JAX's autodiff does in ``simulate``)
    loss:   vocabulary-parallel cross-entropy: 3 AllReduces of 4·b·T bytes (fp32: the largest
            logit, the sum of exponentials, the target logit)

These sit on the critical path (not overlappable) unless a collective matmul hides them.
With pp > 1 the counts are the first pipeline stage's (as the memory module reports): its
⌈L/pp⌉ layers and the embedding's g; the output layer's f and the loss belong to the last stage.

The compute-bound limit on tp: the two forward AllReduces of a layer (a·BT·D each) against
its matmuls, with f = forward matmul FLOPs of one layer per token (2·(2D(N+K)H + 3DF) for a
SwiGLU layer), C the peak FLOP/s and W the one-way bandwidth per device of a switch or ring:

    T_math = BT·f / (tp·C),   T_comm = 2 · 2(tp-1)/tp · a·BT·D / W

BT cancels: the AllReduces stay hidden while tp <= 1 + f·W / (4·a·D·C) (:func:`tp_limit`).
Left out: the attention core (grows with T, only loosens the bound), latency, and the backward
pass (twice the matmuls for the same two collectives, so the forward pass binds).

See: the chapter "Tensor and sequence parallelism".
"""

from __future__ import annotations

import math

import numpy as np

from .. import collectives as _collectives
from .. import hardware, models
from .. import memory as _memory
from ..breakdown import Breakdown
from ..transformer import _attention_weights, _mlp_weights, _norm_params
from ..units import _brief, check_count, check_positive, divisors
from .comms import Comm, element_bytes
from . import rules as _rules
from .plan import ParallelPlan, check_step_args


def comms(cfg, plan: ParallelPlan, B, T, *, dtype="bf16", sp_regather=True) -> list[Comm]:
    """Tensor (and sequence) parallelism's collectives in one step, per device.

    With sequence parallelism and ``sp_regather`` (Megatron-LM's default) the backward pass
    all-gathers each column-parallel linear's input again for its weight gradient.

    >>> from scaling_lib.models import TransformerConfig
    >>> c = TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64)
    >>> plan = ParallelPlan(tp=2, micro_batch=8)  # one micro-batch of 8 sequences
    >>> [(x.kind, x.nbytes, x.count, x.phase) for x in comms(c, plan, 8, 16)]  # V = 2·8·16·32
    [('all-reduce', 8192.0, 5, 'forward'), ('all-reduce', 8192.0, 5, 'backward'), ('all-reduce', 512.0, 3, 'forward')]
    """
    check_step_args(plan, B, T)
    if plan.tp == 1:
        return []
    c = models.get(cfg)
    t, a = plan.tp, element_bytes(dtype)
    m = plan.n_microbatches(B)
    b = B // (plan.dp * m)  # sequences per micro-batch
    act = a * b * T / plan.cp * c.D
    last = plan.pp == 1  # does this device hold the output layer and the loss?
    layers = math.ceil(c.L / plan.pp)
    n = (2 * layers + 1) * m
    n_back = (2 * layers + last) * m
    if plan.sequence_parallel:
        out = [Comm("all-gather", "tp", t, act, n_back, "forward", False),
               Comm("reduce-scatter", "tp", t, act, n, "forward", False),
               Comm("reduce-scatter", "tp", t, act, n_back, "backward", False),
               Comm("all-gather", "tp", t, act, n, "backward", False),
               Comm("all-reduce", "tp", t, a * (2 * layers + last) * _norm_params(c, c.D), m,
                    "backward", True)]
        if sp_regather:  # the weight gradient's input, gathered again (overlaps the dgrad)
            out.append(Comm("all-gather", "tp", t, act, n_back, "backward", True))
    else:
        out = [Comm("all-reduce", "tp", t, act, n, "forward", False),
               Comm("all-reduce", "tp", t, act, n_back, "backward", False)]
    if last:
        out.append(Comm("all-reduce", "tp", t, 4.0 * b * T / plan.cp, 3 * m, "forward", False))
    return out


def memory(cfg, plan: ParallelPlan, B, T, **options):
    """Activations and logits per device, which tp splits (and SP splits further).

    From :func:`scaling_lib.memory.training_memory` (Korthikanti et al. 2022); the weights' tp
    split is already in every model-state figure (see ``data.memory``, ``fsdp.memory``).
    """
    check_step_args(plan, B, T, options)
    full = _memory.training_memory(cfg, plan, B, T, **options)
    return Breakdown({k: full[k] for k in ("activations", "logits")}, unit="bytes")


def constraints(cfg, plan: ParallelPlan, B, T) -> list[str]:
    """The tensor-parallel rules of :mod:`~scaling_lib.parallelism.rules` that ``plan`` breaks
    (tp_heads, tp_kv_heads, tp_ffn and, with sequence parallelism, sp_seq), as sentences with
    the numbers and the valid choices. The vocabulary never refuses a tp: frameworks pad it.

    >>> c = models.TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64)
    >>> plan = ParallelPlan(tp=8, sequence_parallel=True)
    >>> constraints(c, plan, 8, 12)  # doctest: +NORMALIZE_WHITESPACE
    ['tp_heads: tp=8 does not divide N=4 query heads; choose tp in [1, 2, 4]',
     'sp_seq: T=12 tokens must be divisible by tp=8 (sequence parallelism splits the sequence)']
    """
    check_step_args(plan, B, T)
    t = plan.tp
    if t == 1:
        return []
    c = models.get(cfg)
    broken = set(_rules.broken(c, plan, B, T))
    ok = _rules.tp_choices(c)
    width = c.F_e if c.is_moe else c.F
    sentences = {
        "tp_heads": f"tp={t} does not divide N={c.N} query heads; choose tp in {ok}",
        "tp_kv_heads": f"K={c.K} kv heads must divide or be divisible by tp={t} (tp > K "
                       f"replicates kv heads); choose tp in {ok}",
        "tp_ffn": f"MLP width F={width} is not divisible by tp={t}; choose tp in {ok}",
        "sp_seq": f"T={T} tokens must be divisible by tp={t} (sequence parallelism splits "
                  "the sequence)"}
    return [f"{name}: {sentences[name]}" for name in sentences if name in broken]


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
    tp = np.asarray(check_positive("tp", tp))
    tokens = check_positive("tokens", tokens)
    if np.any(tp < 1):
        raise ValueError(f"tp={tp.tolist()!r} must be >= 1 (devices in the tensor-parallel group)")
    _check_bandwidth(bytes_per_s)
    t_math = np.asarray(tokens) * layer_flops_per_token(c) / (tp * acc.peak_flops_per_s(dtype))
    V = element_bytes(dtype) * np.asarray(tokens, dtype=float) * c.D
    t_comm = 2 * _collectives.collective_time("all_reduce", V, tp, bytes_per_s,
                                             topology=topology, latency=latency)
    return _scalar(t_math), _scalar(t_comm)


def tp_limit(cfg, accelerator, bytes_per_s, *, dtype="bf16") -> float:
    """The largest (real) tp whose forward AllReduces hide behind its matmuls.

    tp_max = 1 + f·W / (4·a·D·C), f = :func:`layer_flops_per_token`, C the peak FLOP/s.

    ``bytes_per_s`` (W) is one-way per device on a switch or ring (for a torus axis, a
    bidirectional ring: twice one link's). Latency is left out.

    >>> round(tp_limit("llama3-70b", "h100", 450e9), 2)   # NVLink inside a DGX H100
    12.88
    >>> round(tp_limit("llama3-70b", "h100", 50e9), 2)    # one 400 Gb/s NIC per GPU
    2.32
    """
    c = models.get(cfg)
    _check_bandwidth(bytes_per_s)
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
    # no degree beyond N: a rank needs at least one query head (and inf must not reach int())
    top = int(math.floor(min(tp_limit(c, accelerator, bytes_per_s, dtype=dtype), c.N) + 1e-9))
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
    tp_in = tp
    try:
        tp = check_count("tp", tp)
    except ValueError:
        tp = 0.5  # reported below with the valid choices
    if np.ndim(tp) or tp % 1 or c.N % tp or (c.K % tp and tp % c.K):
        ok = [t for t in divisors(c.N) if c.K % t == 0 or t % c.K == 0]
        raise ValueError(f"tp={_brief(tp_in)} must divide N={c.N} query heads and divide or be "
                         f"a multiple of K={c.K} kv heads; choose tp in {ok}")
    tp = int(tp)
    return 1 if c.K % tp == 0 else tp // c.K


def _check_bandwidth(bytes_per_s):
    if np.any(~(np.asarray(check_positive("bytes_per_s", bytes_per_s), dtype=float) > 0)):
        raise ValueError(f"bytes_per_s={bytes_per_s!r} must be a positive one-way bandwidth per "
                         "device (bytes/s)")


def _scalar(x):
    x = np.asarray(x, dtype=float)
    return float(x) if x.ndim == 0 else x
