"""Context (sequence) parallelism: the T tokens of each sequence split over cp ranks.

Every part of a layer but attention treats tokens independently (norms, projections, the MLP,
the loss), so a rank that holds T/cp tokens computes them alone. Attention does not: each query
needs the keys and values of every earlier token. The three ways the cp ranks share them, the
plan's ``cp_variant``:

- ``"allgather"`` (Llama 3, Grattafiori et al. 2024, section 3.3.2): all-gather K and V before
  attention, reduce-scatter dK and dV after its backward. The sequence is cut into 2·cp chunks
  and rank i holds chunks i and 2·cp-1-i (:func:`chunk_assignment`), so each rank has an equal
  share of the causal mask's work (:func:`causal_pairs`).
- ``"ring"`` (ring attention, Liu et al. 2023): each rank passes its K/V block to the next
  rank in a ring (collective-permute), cp - 1 times per layer, and merges each block's
  partial attention into its output with the online softmax. The backward pass circulates the
  K/V blocks again together with the dK/dV blocks they accumulate (Transformer Engine's and
  ring-flash-attention's backward: the blocks are not kept, which is the point of ring
  attention at extreme lengths), twice the forward bytes. Each step's send can hide behind
  the previous block's attention. Same load-balanced chunks.
- ``"ulysses"`` (DeepSpeed-Ulysses, Jacobs et al. 2023): an AllToAll turns q, k and v from
  "my T/cp tokens, all heads" into "all T tokens, my heads/cp heads", attention runs locally
  per head, and a second AllToAll turns the output back; the backward pass does the same in
  reverse. The local query heads must split over cp; with fewer key/value heads than cp
  (GQA, cp > k) each is replicated cp/k times before the AllToAll, so every rank gets one
  (DeepSpeed's Ulysses with GQA), which sends k_u = max(k, cp) key/value heads' bytes.

Per device and step, with a bytes per element, b sequences per micro-batch, m micro-batches,
L layers (on the first pipeline stage), n = N/tp query heads and k key/value heads per tensor
rank (one copy when tp > K) of width H (``nbytes`` is V, the full array, as in ``Comm``; for a
collective-permute, the bytes each device sends):

    allgather  AllGather of K and V, V = 2·a·b·T·k·H, L·m times forward;
               ReduceScatter of dK and dV, the same V, L·m times backward
    ring       collective-permute of one K/V block, 2·a·b·(T/cp)·k·H bytes sent,
               (cp - 1)·L·m times forward; backward the K/V block and the dK/dV block,
               (cp - 1)·L·m times each (``ring_keeps_kv=True``: dK/dV only)
    ulysses    AllToAll of q, k, v: V = a·b·T·(n + 2 k_u)·H, and of the output: V = a·b·T·n·H,
               L·m times each forward, and as many backward

The simulated step (``simulate``) keeps the K/V blocks a rank received in the forward pass
(autodiff's residuals), so only dK/dV travel back: ``ring_keeps_kv=True`` models it. The
all-gather variant likewise keeps the gathered K and V (Llama 3's does).

Each device sends (cp - 1)/cp · 2·a·b·T·k·H per layer forward with the all-gather and with the
ring alike; Ulysses sends (cp - 1)/cp² · a·b·T·(2n + 2k_u)·H, which shrinks with cp but carries
the query heads too: with GQA (k much smaller than n) the all-gather sends less until cp is
larger than (n + k)/k (:func:`layer_bytes`). Beyond cp = k the replicated key/value heads add
(cp - 1)/cp · 2·a·b·T·H per device, a term that no longer shrinks; Ulysses' limit is cp <= n. The gradient AllReduce of data parallelism runs
over the dp·cp replicas (the weights are replicated over cp).

See: the chapter "Context parallelism".
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import collectives as _collectives
from .. import hardware, models
from .. import memory as _memory
from ..breakdown import Breakdown
from ..transformer import _attention_core_flops_per_token
from ..units import MAX_DEVICES, check_choice, check_count, check_positive, divisors
from .comms import Comm, element_bytes
from . import rules as _rules
from .chunks import (MAX_TOKENS, _check_T, causal_pairs, chunk_assignment,  # noqa: F401
                     imbalance, token_order)
from .plan import CP_VARIANTS, ParallelPlan, check_plan, check_step_args

VARIANTS = CP_VARIANTS


def ulysses_kv_heads(cfg, cp, tp=1) -> float:
    """Key/value heads per tensor rank that Ulysses' AllToAll carries: k_u = max(k, cp), the
    k heads replicated cp/k times when there are fewer than cp (each rank needs one).

    >>> ulysses_kv_heads("llama3-8b", 4), ulysses_kv_heads("llama3-8b", 16)
    (8.0, 16.0)
    """
    _, k = heads_per_rank(cfg, tp)
    cp = check_count("cp", cp)
    return float(max(k, cp))


def heads_per_rank(cfg, tp=1) -> tuple[float, float]:
    """(n, k): query heads and key/value heads on one tensor rank (one kv copy when tp > K).

    >>> heads_per_rank("llama3-70b", 8), heads_per_rank("llama3-70b", 16)
    ((8.0, 1.0), (4.0, 1.0))
    """
    c = models.get(cfg)
    tp = check_count("tp", tp)
    return c.N / tp, max(c.K / tp, 1.0)


def _micro(cfg, plan, B, T):
    c = models.get(cfg)
    m = plan.n_microbatches(B)
    b = B // (plan.dp * m)
    layers = -(-c.L // plan.pp)
    return c, m, b, layers


def comms(cfg, plan: ParallelPlan, B, T, *, dtype="bf16", ring_keeps_kv=False) -> list[Comm]:
    """Context parallelism's collectives in one step, per device (the plan's ``cp_variant``).

    The ring's backward sends the K/V blocks again with the dK/dV blocks, unless
    ``ring_keeps_kv`` (the forward's blocks are kept: dK/dV only).

    >>> from scaling_lib.models import TransformerConfig
    >>> c = TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64)
    >>> plan = ParallelPlan(cp=2, micro_batch=8)  # K and V: 2 · 2 bytes · 8 · 16 · 2 · 8
    >>> [(x.kind, x.nbytes, x.count, x.phase) for x in comms(c, plan, 8, 16)]
    [('all-gather', 8192.0, 2, 'forward'), ('reduce-scatter', 8192.0, 2, 'backward')]
    >>> [(x.kind, x.nbytes, x.count) for x in comms(c, plan.with_changes(cp_variant="ring"),
    ...                                             8, 16)]
    [('collective-permute', 4096.0, 2), ('collective-permute', 4096.0, 2), ('collective-permute', 4096.0, 2)]
    """
    check_step_args(plan, B, T)
    if plan.cp == 1:
        return []
    c, m, b, layers = _micro(cfg, plan, B, T)
    a, cp = element_bytes(dtype), plan.cp
    n, k = heads_per_rank(c, plan.tp)
    per = layers * m
    if plan.cp_variant == "allgather":
        kv = 2 * a * b * T * k * c.H
        return [Comm("all-gather", "cp", cp, kv, per, "forward", False),
                Comm("reduce-scatter", "cp", cp, kv, per, "backward", False)]
    if plan.cp_variant == "ring":
        block = 2 * a * b * T / cp * k * c.H
        sends = ("forward", "backward") if ring_keeps_kv else ("forward", "backward", "backward")
        return [Comm("collective-permute", "cp", cp, block, (cp - 1) * per, phase, True)
                for phase in sends]
    k = ulysses_kv_heads(c, cp, plan.tp)
    qkv, out = a * b * T * (n + 2 * k) * c.H, a * b * T * n * c.H
    return [Comm("all-to-all", "cp", cp, V, per, phase, False)
            for phase in ("forward", "backward") for V in (qkv, out)]


def memory(cfg, plan: ParallelPlan, B, T, **options):
    """Activations and logits per device (split cp ways) and the variant's attention buffers.

    ``activations`` and ``logits`` are :func:`scaling_lib.memory.training_memory`'s, which
    divide every token's bytes by cp; ``attention buffers`` is what one layer's attention holds
    beyond its own tokens: the gathered K and V of the whole sequence (allgather), the block
    being used and the one arriving (ring), or q, k, v and the output of all T tokens for n/cp
    heads (ulysses), in bf16.

    >>> from scaling_lib.models import TransformerConfig
    >>> c = TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64)
    >>> memory(c, ParallelPlan(cp=2), 1, 16)["attention buffers"]  # 2 · 2 · 16 · 2 · 8
    1024.0
    """
    check_step_args(plan, B, T, options)
    full = _memory.training_memory(cfg, plan, B, T, **options)
    c = models.get(cfg)
    a = element_bytes(options.get("dtype", "bf16"))
    n, k = heads_per_rank(c, plan.tp)
    b, cp = plan.micro_batch, plan.cp
    if cp == 1:
        buf = 0.0
    elif plan.cp_variant == "allgather":
        buf = 2 * a * b * T * k * c.H
    elif plan.cp_variant == "ring":
        buf = 2 * 2 * a * b * T / cp * k * c.H
    else:
        buf = a * b * T * (2 * n + 2 * ulysses_kv_heads(c, cp, plan.tp)) * c.H / cp
    return Breakdown({"activations": full["activations"], "logits": full["logits"],
                      "attention buffers": float(buf)}, unit="bytes")


def constraints(cfg, plan: ParallelPlan, B, T) -> list[str]:
    """The context-parallel rules of :mod:`~scaling_lib.parallelism.rules` that ``plan``
    breaks, as sentences with the numbers: the sequence splits into 2·cp load-balanced chunks
    (cp_seq); Ulysses splits the query heads of a tensor rank over cp (cp_heads; fewer kv heads
    than cp are replicated).

    >>> from scaling_lib.models import TransformerConfig
    >>> c = TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64)
    >>> constraints(c, ParallelPlan(cp=4), 8, 12)  # doctest: +NORMALIZE_WHITESPACE
    ['cp_seq: T=12 tokens must be divisible by 2·cp = 8 (load-balanced causal chunks: rank i
      holds chunks i and 2·cp-1-i)']
    >>> uly = ParallelPlan(cp=8, cp_variant="ulysses")  # K=2 < cp is fine (replicated), N=4 not
    >>> constraints(c, uly, 8, 16)  # doctest: +NORMALIZE_WHITESPACE
    ['cp_heads: ulysses: N=4 query heads per tensor rank are not divisible by cp=8; choose cp
      in [1, 2, 4], or the allgather or ring variant']
    """
    check_step_args(plan, B, T)
    cp = plan.cp
    if cp == 1:
        return []
    c = models.get(cfg)
    broken = set(_rules.broken(c, plan, B, T))
    n, _ = heads_per_rank(c, plan.tp)
    ok = divisors(int(n)) if n % 1 == 0 else [1]
    sentences = {
        "cp_seq": f"T={T} tokens must be divisible by 2·cp = {2 * cp} (load-balanced causal "
                  "chunks: rank i holds chunks i and 2·cp-1-i)",
        "cp_heads": f"ulysses: N={n:g} query heads per tensor rank are not divisible by "
                    f"cp={cp}; choose cp in {ok}, or the allgather or ring variant"}
    return [f"{name}: {sentences[name]}" for name in sentences if name in broken]


def layer_bytes(cfg, variant, cp, T, *, b=1, tp=1, dtype="bf16"):
    """Bytes one device sends in one layer's forward pass (the backward sends as many).

    allgather and ring: (cp - 1)/cp · 2·a·b·T·k·H; ulysses: (cp - 1)/cp² · a·b·T·(2n + 2k_u)·H
    (k_u = max(k, cp), :func:`ulysses_kv_heads`).

    >>> [round(layer_bytes("llama3-70b", v, 8, 131072) / 2**20, 1) for v in VARIANTS]
    [448.0, 448.0, 504.0]
    >>> # tp=8 leaves one kv head per rank: Ulysses replicates it 8 times
    >>> [round(layer_bytes("llama3-70b", v, 8, 131072, tp=8) / 2**20, 1) for v in VARIANTS]
    [56.0, 56.0, 112.0]
    """
    check_choice("variant", variant, VARIANTS)
    c = models.get(cfg)
    cp = np.asarray(check_count("cp", cp), dtype=float)
    T = np.asarray(check_count("T", T, sweep=True), dtype=float)
    b = check_count("b", b)
    a = element_bytes(dtype)
    n, k = heads_per_rank(c, tp)
    if variant == "ulysses":
        out = (cp - 1) / cp**2 * a * b * T * (2 * n + 2 * np.maximum(k, cp)) * c.H
    else:
        out = (cp - 1) / cp * 2 * a * b * T * k * c.H
    return _scalar(out)


class LayerTimes(NamedTuple):
    """One layer's forward pass on one cp rank: attention compute, communication, and the part
    of the communication that compute does not hide (seconds)."""

    attention: float
    comm: float
    exposed: float


def layer_times(cfg, variant, cp, T, accelerator, bytes_per_s, *, b=1, tp=1,
                topology="switch", latency=0.0, dtype="bf16", mfu=1.0) -> LayerTimes:
    """Attention and CP communication of one layer's forward pass on one rank, in seconds.

    attention: the causal attention core (QKᵀ and PV, half the T² pairs) of b sequences,
    divided over tp·cp ranks, at ``mfu`` of the accelerator's peak. Communication:

    - allgather: one AllGather of K and V (V = 2·a·b·T·k·H), before attention: exposed;
    - ring: cp - 1 sends of one K/V block (2·a·b·(T/cp)·k·H) over one link, each hidden behind
      one block's attention (attention / cp): exposed (cp - 1)·max(0, send - attention / cp);
    - ulysses: AllToAlls of q, k, v and of the output (V = a·b·T·(2n + 2k_u)·H): exposed.

    ``bytes_per_s`` is one-way per device (a switch by default: NVLink in a node).

    >>> t = layer_times("llama3-70b", "allgather", 16, 131072, "h100", 50e9, tp=8)
    >>> round(t.attention * 1e3, 1), round(t.comm * 1e3, 2)
    (2.2, 1.26)
    """
    check_choice("variant", variant, VARIANTS)
    c = models.get(cfg)
    acc = hardware.get(accelerator)
    cp_ = check_count("cp", cp)
    T_ = check_count("T", T, sweep=True)
    check_positive("bytes_per_s", bytes_per_s)
    mfu = check_positive("mfu", mfu)
    b = check_count("b", b)
    cp_a, T_a = np.asarray(cp_, float), np.asarray(T_, float)
    flops = b * T_a * _attention_core_flops_per_token(c, T_a, True) / (tp * cp_a)
    t_att = flops / (mfu * acc.peak_flops_per_s(dtype))
    a = element_bytes(dtype)
    n, k = heads_per_rank(c, tp)
    kw = dict(topology=topology, latency=latency)
    if variant == "allgather":
        V = 2 * a * b * T_a * k * c.H
        t_comm = _collectives.collective_time("all-gather", V, cp_a, bytes_per_s, **kw)
        exposed = t_comm
    elif variant == "ring":
        block = 2 * a * b * T_a / cp_a * k * c.H
        step = _collectives.send_recv_time(block, bytes_per_s, latency)
        t_comm = (cp_a - 1) * step
        exposed = (cp_a - 1) * np.maximum(0.0, step - t_att / cp_a)
    else:
        V = a * b * T_a * (2 * n + 2 * np.maximum(k, cp_a)) * c.H
        t_comm = _collectives.collective_time("all-to-all", V, cp_a, bytes_per_s, **kw)
        exposed = t_comm
    return LayerTimes(_scalar(t_att), _scalar(t_comm), _scalar(exposed))


def best_variant(cfg, cp, T, accelerator, bytes_per_s, *, b=1, tp=1, topology="switch",
                 latency=0.0, dtype="bf16") -> str:
    """The variant with the least exposed communication per layer that can run (ties: the
    first of allgather, ring, ulysses; Ulysses needs the query heads to split over cp).

    >>> best_variant("llama3-70b", 16, 131072, "h100", 50e9, tp=8)
    'ring'
    >>> best_variant("llama3-70b", 4, 131072, "h100", 450e9)
    'ring'
    """
    c = models.get(cfg)
    cp = check_count("cp", cp)
    n, k = heads_per_rank(c, tp)
    best, t_best = None, math.inf
    for v in VARIANTS:
        if v == "ulysses" and (n % cp or (k % cp and cp % k)):
            continue
        t = float(np.max(layer_times(c, v, cp, T, accelerator, bytes_per_s, b=b, tp=tp,
                                     topology=topology, latency=latency, dtype=dtype).exposed))
        if t < t_best - 1e-15:
            best, t_best = v, t
    return best


def cp_for_context(cfg, T, budget_bytes, plan: ParallelPlan | None = None, *,
                   max_cp=MAX_DEVICES, global_batch=None, **options) -> int:
    """The smallest power-of-two cp with which one sequence of T tokens fits in the budget.

    Memory per device is :func:`scaling_lib.memory.training_memory` of ``plan`` (default one
    device) with cp changed, one sequence per micro-batch (``options`` are its keywords), and
    ``global_batch`` sequences per step (default dp: one micro-batch per pipeline; with
    pp > 1 pass the step's batch, since 1F1B keeps min(pp, m) micro-batches in flight);
    ``budget_bytes`` is a number of bytes or an accelerator name (its HBM). ZeRO shards over
    dp·cp, so with ``zero`` the model states shrink with cp too. Raises ValueError if no cp up
    to ``max_cp`` (and T / 2) fits.

    >>> base = ParallelPlan(tp=8, pp=16, recompute="full")
    >>> cp_for_context("llama3-405b", 131072, "h100", base)
    4
    """
    c = models.get(cfg)
    T = check_count("T", T)
    plan = check_plan(ParallelPlan() if plan is None else plan)
    check_step_args(plan, 1, T, options)  # options must be training_memory's keywords
    max_cp = check_count("max_cp", max_cp)
    B = plan.dp if global_batch is None else int(check_count("global_batch", global_batch))
    if np.ndim(B) or B % plan.dp:
        raise ValueError(f"global_batch={global_batch!r} must be one multiple of dp={plan.dp} "
                         "(one sequence per micro-batch)")
    if isinstance(budget_bytes, str):
        budget = float(hardware.get(budget_bytes).hbm_bytes)
    else:
        budget = float(check_positive("budget_bytes", budget_bytes))
    cp, tried = 1, []
    while cp <= min(max_cp, T // 2 if T > 1 else 1) and plan.world_size * cp <= MAX_DEVICES:
        p = plan.with_changes(cp=cp, micro_batch=1)
        total = float(_memory.training_memory(c, p, B, T, **options).total)
        tried.append((cp, total))
        if total <= budget and T % (2 * cp if cp > 1 else 1) == 0:
            return cp
        cp *= 2
    last = f"; at cp={tried[-1][0]}: {tried[-1][1] / 1e9:.1f} GB" if tried else ""
    raise ValueError(f"T={T:,} tokens do not fit in {budget / 1e9:.1f} GB per device with any "
                     f"cp up to {min(max_cp, T // 2)}{last}: add tp, pp, ZeRO or recomputation")


def _scalar(x):
    x = np.asarray(x, dtype=float)
    return float(x) if x.ndim == 0 else x
