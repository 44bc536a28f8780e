"""The serving engine's formulas: KV-cache paging, speculative decoding, and sharding for decode.

What a serving engine changes and how to count it:

- Paged attention (Kwon et al., SOSP 2023) stores each sequence's KV cache in fixed blocks of
  ``block_size`` tokens, allocated as the sequence grows, instead of reserving the maximum length
  up front. A sequence of l tokens holds ⌈l/b⌉ blocks; the waste is at most b - 1 tokens per
  sequence, against max_len - l when the maximum is preallocated (:func:`kv_waste`).
- Speculative decoding (Leviathan et al., ICML 2023, eq. 1): γ drafted tokens, each accepted
  with probability α, give (1 - α^(γ+1)) / (1 - α) tokens per target step
  (:func:`expected_tokens_per_step`; the speed-up with the draft's cost is
  :func:`scaling_lib.serving.speculative_speedup`).
- Model parallelism for decode (Pope et al., "Efficiently Scaling Transformer Inference", MLSys
  2023; Austin et al., "How to Scale Your Model", 2025, Part 7): one matmul of B tokens, D x F
  weights sharded Y ways, takes a·D·F/(Y·W_hbm) to read its weights but a·B·D/W_ici to move its
  activations over the chip-to-chip links, so it turns communication-bound once
  Y > F / (B·β) with β = W_hbm / W_ici (:func:`model_parallel_limit`).
- 2D weight-stationary sharding splits the weights over D (X ways) and F (n/X ways), so the
  activation traffic falls as 1/√n instead of staying flat (:func:`weight_stationary_comm_time`).
- The KV cache is sharded by kv heads first (at most K ways), then by batch
  (:func:`kv_cache_layout`).

Left out: the all-to-alls that move queries between head and batch sharding, block tables'
own memory, rejected drafts' KV writes, and link latency (see :mod:`scaling_lib.inference` for the
latency-bound all-reduces).

See: Chapter "Serving at scale".
"""

from __future__ import annotations

import math

import numpy as np

from .. import hardware
from ..breakdown import Breakdown
from ..units import (_brief, check_choice, check_count, check_fraction, check_int, check_positive,
                    dtype_bytes, scalar_or_array as _out)

__all__ = ["kv_blocks", "allocate_kv_blocks", "kv_waste", "expected_tokens_per_step",
           "ici_bytes_per_s", "hbm_ici_ratio", "model_parallel_limit", "model_parallel_times",
           "weight_stationary_comm_time", "best_2d_split", "kv_cache_layout",
           "freed_tokens_per_step", "speculative_break_even_cost", "chunked_prefill",
           "ridge_chunk_tokens"]


def _lengths(lengths):
    arr = np.atleast_1d(np.asarray(check_count("lengths", lengths), dtype=float))
    if arr.ndim != 1 or arr.size > 1_000_000:
        raise ValueError(f"lengths={_brief(lengths)} must be a 1-D list of 1 to 1,000,000 "
                         "sequence lengths (tokens)")
    return arr


def kv_blocks(lengths, block_size=16):
    """KV-cache blocks each sequence holds under paging: ⌈l / b⌉ (an array like ``lengths``).

    >>> kv_blocks([1, 16, 17, 100], 16).tolist()
    [1, 1, 2, 7]

    See: Chapter "Serving at scale", "Paged attention".
    """
    b = check_int("block_size", block_size, maximum=2**20)
    return np.ceil(_lengths(lengths) / b).astype(np.int64)


def allocate_kv_blocks(lengths, block_size, n_blocks) -> int:
    """How many requests, first come first served, get their blocks from a pool of ``n_blocks``.

    Requests are admitted in order while the blocks they need (:func:`kv_blocks`) still fit in
    what is left of the pool; the first one that does not fit stops the queue (no skipping
    ahead: first-come-first-served keeps the order fair). Returns the number admitted.

    >>> allocate_kv_blocks([100, 30, 50, 10], 16, 12)  # 7 + 2 blocks fit, then 4 do not
    2

    See: Chapter "Serving at scale", "Paged attention".
    """
    n = check_int("n_blocks", n_blocks, minimum=0, maximum=2**40)
    need = np.cumsum(kv_blocks(lengths, block_size))
    return int(np.searchsorted(need, n, side="right"))


def kv_waste(lengths, *, max_len=None, block_size=None):
    """Fraction of the reserved KV-cache memory that holds no token.

    Exactly one of: ``max_len`` (every sequence reserves the maximum length up front: waste
    1 - Σl / (n·max_len)) or ``block_size`` (paged: waste 1 - Σl / (b·Σ⌈l/b⌉)).

    >>> round(kv_waste([500, 1500, 3000], max_len=4096), 3), round(kv_waste([500, 1500, 3000],
    ...                                                                     block_size=16), 4)
    (0.593, 0.0048)

    See: Chapter "Serving at scale", "Paged attention".
    """
    arr = _lengths(lengths)
    if (max_len is None) == (block_size is None):
        raise ValueError("give exactly one of max_len (preallocation) or block_size (paging)")
    if max_len is not None:
        m = check_count("max_len", max_len)
        if np.any(arr > m):
            raise ValueError(f"a length of {arr.max():g} tokens exceeds max_len={m:g}; every "
                             "sequence must fit its reservation")
        return float(1 - arr.sum() / (arr.size * m))
    reserved = kv_blocks(arr, block_size).sum() * block_size
    return float(1 - arr.sum() / reserved)


def expected_tokens_per_step(alpha, gamma):
    """Tokens one target-model step yields with speculative decoding: (1 - α^(γ+1)) / (1 - α).

    γ drafted tokens are checked in one target step; each is accepted with probability α
    independently, the first rejection ends the round, and the target always adds one token of
    its own (Leviathan, Kalman & Matias 2023, eq. 1). γ + 1 at α = 1; 1 at α = 0. Broadcasts.

    >>> round(expected_tokens_per_step(0.8, 4), 4), expected_tokens_per_step(1.0, 4)
    (3.3616, 5.0)

    See: Chapter "Serving at scale", "Speculative decoding".
    """
    a = np.asarray(check_fraction("alpha", alpha, allow_zero=True), dtype=float)
    g = check_count("gamma", gamma, minimum=0)
    one = np.isclose(a, 1.0)
    safe = np.where(one, 0.5, a)
    return _out(np.where(one, g + 1.0, (1 - safe ** (g + 1)) / (1 - safe)))


def speculative_break_even_cost(alpha, gamma):
    """The draft cost c (in target steps) at which speculation stops paying: (E - 1) / γ.

    A round of γ drafts and one target step costs 1 + γ·c target steps and yields
    E = :func:`expected_tokens_per_step` tokens; it beats plain decoding (one token per step)
    while E / (1 + γ·c) > 1, i.e. c < (E - 1) / γ. Broadcasts.

    >>> round(speculative_break_even_cost(0.8, 4), 4)
    0.5904

    See: Chapter "Serving at scale", "Speculative decoding".
    """
    g = check_count("gamma", gamma)
    return _out((np.asarray(expected_tokens_per_step(alpha, g)) - 1) / g)


def ici_bytes_per_s(accelerator) -> float:
    """Bandwidth one chip moves activations at over one axis: both directions of one link.

    A bidirectional ring along one mesh axis uses both directions of the chip's link to each
    neighbour, so W_ici = 2 x the one-way bandwidth of one link (TPU v5e: 2 x 45 GB/s). For a
    GPU, the NVLink bandwidth per GPU one way (all its links through the switch).

    >>> ici_bytes_per_s("tpu-v5e") / 1e9
    90.0
    """
    acc = hardware.get(accelerator)
    cl = hardware.cluster(acc, 8)
    link = cl.intra_node
    if cl.topology == "switch":
        return float(link.bytes_per_s)
    return float(2 * link.per_link_bytes_per_s)


def hbm_ici_ratio(accelerator) -> float:
    """β = W_hbm / W_ici: how many times faster a chip reads its HBM than it talks to a neighbour.

    >>> round(hbm_ici_ratio("tpu-v5e"), 1)
    9.1
    """
    acc = hardware.get(accelerator)
    return acc.hbm_bytes_per_s / ici_bytes_per_s(acc)


def model_parallel_limit(ffn, batch, beta):
    """Model-parallel degree past which a decode matmul is communication-bound: F / (B·β).

    T_ici = a·B·D / W_ici (the activations) exceeds T_hbm = a·D·F / (Y·W_hbm) (the weight
    shard) once Y > F / (B·β), β = W_hbm / W_ici. Small batches allow wide model parallelism;
    large ones do not. Broadcasts. (Austin et al. 2025, Part 7; weights and activations in the
    same dtype.)

    >>> model_parallel_limit(28672, 64, 8)  # Llama 3 70B, batch 64, β = 8: 56-way
    56.0

    See: Chapter "Serving at scale", "When model parallelism becomes communication-bound".
    """
    F = check_positive("ffn", ffn)
    B = check_positive("batch", batch)
    beta = check_positive("beta", beta)
    denom = np.asarray(B, dtype=float) * beta
    if np.any(denom == 0):
        raise ValueError(f"batch={_brief(batch)} x beta={_brief(beta)} underflows to 0; give "
                         "a batch of at least 1 and a positive bandwidth ratio")
    return _out(F / denom)


def model_parallel_times(batch, D, F, Y, accelerator, *, dtype="bf16", act_dtype="bf16",
                         ici_bytes_per_s_=None) -> Breakdown:
    """Times of one model-parallel decode matmul [B, D] x [D, F/Y] per chip: ICI, HBM and math.

    "ici": a·B·D / W_ici (gathering the activations); "hbm": w·D·F / (Y·W_hbm) (the weight
    shard); "math": 2·B·D·F / (Y·C). Whichever is largest bounds the matmul.

    >>> t = model_parallel_times(64, 8192, 28672, 32, "tpu-v5e")
    >>> [round(v * 1e6, 1) for v in t.values()]  # µs: ici, hbm, math
    [11.7, 17.9, 4.8]
    """
    acc = hardware.get(accelerator)
    B = check_positive("batch", batch)
    D = check_count("D", D)
    F = check_count("F", F)
    Y = check_count("Y", Y)
    w_ici = ici_bytes_per_s(acc) if ici_bytes_per_s_ is None else check_positive(
        "ici_bytes_per_s_", ici_bytes_per_s_)
    return Breakdown({
        "ici": _out(dtype_bytes(act_dtype) * B * D / w_ici),
        "hbm": _out(dtype_bytes(dtype) * D * F / (Y * acc.hbm_bytes_per_s)),
        "math": _out(2 * B * D * F / (Y * acc.peak_flops_per_s(act_dtype))),
    }, unit="s")


def best_2d_split(D, F, n_devices) -> float:
    """The X (ways over D) that minimises 2D weight-stationary traffic: √(n·D/F), real-valued."""
    n = check_int("n_devices", n_devices, maximum=2**24)
    return _out(np.sqrt(n * np.asarray(check_count("D", D), dtype=float)
                        / np.asarray(check_count("F", F), dtype=float)))


def weight_stationary_comm_time(batch, D, F, n_devices, link_bytes_per_s, *, layout="2d",
                                X=None, act_bytes=2.0):
    """Activation traffic time of one MLP (two matmuls) per chip, 1D or 2D weight-stationary.

    1D (Megatron: weights split over F, activations replicated): one all-reduce of B·D
    activations, ≈ 2·a·B·D / W whatever n. 2D (weights split X ways over D and n/X over F;
    Pope et al. 2023): all-gather and reduce-scatter of [B, D/X] plus an all-reduce of
    [B, F·X/n]: (2·a·B·D/X + 2·a·B·F·X/n) / W. At the best X = √(n·D/F) that is
    4·a·B·√(D·F/n) / W, which falls as 1/√n and beats 1D once n > 4F/D. Ring bandwidth terms
    only (no latency).

    >>> w = 9e10
    >>> t1 = weight_stationary_comm_time(64, 8192, 28672, 64, w, layout="1d")
    >>> t2 = weight_stationary_comm_time(64, 8192, 28672, 64, w)
    >>> round(t1 * 1e6, 1), round(t2 * 1e6, 1)  # µs
    (23.3, 10.9)

    See: Chapter "Serving at scale", "2D weight-stationary sharding".
    """
    B = check_positive("batch", batch)
    D = check_count("D", D)
    F = check_count("F", F)
    n = check_int("n_devices", n_devices, maximum=2**24)
    W = check_positive("link_bytes_per_s", link_bytes_per_s)
    a = check_positive("act_bytes", act_bytes)
    layout = check_choice("layout", layout, ("1d", "2d"))
    if layout == "1d":
        return _out(2 * a * B * D / W)
    x = best_2d_split(D, F, n) if X is None else check_positive("X", X)
    if np.any(np.asarray(x) > n):
        raise ValueError(f"X={_brief(x)} exceeds n_devices={n}; choose 1 <= X <= n")
    return _out((2 * a * B * D / x + 2 * a * B * F * x / n) / W)


def kv_cache_layout(K, Y, batch=None):
    """How Y model-parallel devices split the KV cache: (ways over kv heads, ways over batch).

    Heads first, gcd(K, Y) ways (a head cannot be split), then the remaining Y / gcd(K, Y) ways
    over the batch, which must divide ``batch`` when one is given (Austin et al. 2025, Part 7,
    "Sharding the KV cache"). Every device then holds 1/Y of the cache. This is the
    batch-sharded alternative (two all-to-alls per attention layer); Megatron-style engines copy
    each kv head instead once Y > K, and the bytes per device the estimate charges have one home,
    :func:`scaling_lib.serving.kv_cache_bytes_per_device`.

    >>> kv_cache_layout(8, 32, batch=64)
    (8, 4)
    """
    K = check_int("K", K, maximum=2**20)
    Y = check_int("Y", Y, maximum=2**24)
    heads = math.gcd(K, Y)
    rest = Y // heads
    if batch is not None:
        B = check_int("batch", batch, maximum=2**40)
        if B % rest:
            raise ValueError(f"batch={B} is not divisible by the {rest} batch shards that Y={Y} "
                             f"leaves after {heads}-way head sharding (K={K}); choose a batch "
                             f"that is a multiple of {rest}")
    return heads, rest


def freed_tokens_per_step(batch, prompt_len, gen_len):
    """KV-cache tokens a full decode server frees per step, on average: B·(P + G) / G.

    Each of the B sequences lives G steps, so B/G finish per step, each freeing its P + G
    tokens; a continuous-batching server must prefill that many prompt tokens' worth of new
    requests per step to stay full. Broadcasts.

    >>> freed_tokens_per_step(32, 8192, 4096)
    96.0

    See: Chapter "Serving at scale", "Continuous batching".
    """
    B = check_positive("batch", batch)
    P = check_count("prompt_len", prompt_len, minimum=0)
    G = check_count("gen_len", gen_len)
    return _out(B * (P + G) / G)


def chunked_prefill(cfg, accelerator, tp, *, prompt_len, chunk_tokens, batch, context, pp=1,
                    dtype="bf16", kv_dtype=None, prefill_mfu=0.4):
    """(TTFT, step time) when a P-token prompt joins ``batch`` running sequences in chunks.

    Each iteration runs the running batch's decode tokens and one chunk of c prompt tokens as
    one batch (Agrawal et al., Sarathi-Serve, OSDI 2024): the weights are read once for all of
    them, so the iteration costs :func:`scaling_lib.serving.estimator.mixed_step_parts`, not a
    decode step plus a separate prefill. The new request's first token comes after ⌊P/c⌋ full
    iterations and one with the remaining P mod c tokens; the running sequences see every
    iteration as their time per output token. Unchunked (c >= P) they stall once for the whole
    prompt. Broadcasts over ``chunk_tokens``.

    >>> ttft, step = chunked_prefill("llama3-70b", "h100", 8, prompt_len=8192, chunk_tokens=512,
    ...                              batch=64, context=1152)
    >>> round(float(ttft), 3), round(float(step) * 1e3, 1)  # 16 iterations of 30.9 ms
    (0.494, 30.9)

    See: Chapter "Serving at scale", "Chunked prefill".
    """
    from .estimator import mixed_step_parts

    P = check_count("prompt_len", prompt_len)
    c = np.minimum(np.asarray(check_count("chunk_tokens", chunk_tokens), dtype=float), P)
    kw = dict(decode_batch=batch, context=context, prompt_len=P, pp=pp, dtype=dtype,
              kv_dtype=kv_dtype, prefill_mfu=prefill_mfu)
    step = np.asarray(mixed_step_parts(cfg, accelerator, tp, prefill_tokens=c, **kw)["time"])
    rest = P - np.floor(P / c) * c
    last = np.asarray(mixed_step_parts(cfg, accelerator, tp, prefill_tokens=rest, **kw)["time"])
    ttft = np.floor(P / c) * step + np.where(rest > 0, last, 0.0)
    return _out(ttft), _out(step)


def ridge_chunk_tokens(cfg, accelerator, tp, *, batch, context, prompt_len, pp=1, dtype="bf16",
                       kv_dtype=None, prefill_mfu=0.4) -> float:
    """The chunk c at which a mixed iteration's compute time equals its memory time.

    Below it the decode batch leaves the device waiting on HBM and a chunk's FLOPs hide under
    the weight read (the iteration is barely slower than a decode step); above it every prompt
    token adds its full FLOP time. From :func:`scaling_lib.serving.estimator.mixed_step_parts`,
    both terms linear in c:

        c* = (memory(0) - compute(0)) / (d compute/dc - d memory/dc)

    0 when the decode batch alone is already compute-bound. The communication is left out of
    the balance (it grows with c on either side).

    >>> round(ridge_chunk_tokens("llama3-70b", "h100", 8, batch=64, context=1152,
    ...                          prompt_len=8192))
    104

    See: Chapter "Serving at scale", "Chunked prefill".
    """
    from .estimator import mixed_step_parts

    kw = dict(decode_batch=batch, context=context, prompt_len=prompt_len, pp=pp, dtype=dtype,
              kv_dtype=kv_dtype, prefill_mfu=prefill_mfu)
    p0 = mixed_step_parts(cfg, accelerator, tp, prefill_tokens=0, **kw)
    p1 = mixed_step_parts(cfg, accelerator, tp, prefill_tokens=1024, **kw)
    slope = (float(p1["compute"]) - float(p0["compute"])
             - float(p1["memory"]) + float(p0["memory"])) / 1024
    gap = float(p0["memory"]) - float(p0["compute"])
    return max(gap / slope, 0.0) if slope > 0 else float("inf")
