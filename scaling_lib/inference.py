"""First-order accounting for autoregressive decoding: FLOPs, bytes and the roofline of one step.

A decode step feeds one new token for each of B sequences that already hold S tokens in their KV
cache. Every weight matrix is read once per step (shared by the B tokens) and every cached key and
value is read once (used only by its own sequence):

    FLOPs = B · (2·W + L·4·S·N·H),        bytes = w·W_read + B · S · 2·L·K·H · a,

with W the matmul weights touched per token (Chapter 5), w and a the bytes per weight and per
cache element. The weights give an intensity of about 2B/w, the cache about N/K FLOPs per byte
in bf16, whatever the batch: far below the few hundred a modern accelerator needs, which is why
decoding is memory-bound. W_read counts every weight of a dense model; a mixture-of-experts step
reads only the experts its B tokens are expected to touch, E·(1 - (1 - k/E)^B) per layer under
uniform routing. Tensor parallelism adds 2·L latency-bound all-reduces per step when asked for
(``tp=``). Activations, norms, sampling and other communication are left out.

See: Chapter 8, "Inference basics".
"""

from __future__ import annotations

import numpy as np

from . import collectives, hardware, models, roofline, transformer
from .breakdown import Breakdown
from .units import check_count, check_positive, dtype_bytes, scalar_or_array as _out


def _cfg(cfg) -> models.TransformerConfig:
    return models.get(cfg)


def expected_experts(E, k, B):
    """Expected number of distinct experts B tokens touch in one MoE layer: E·(1 - (1 - k/E)^B).

    Each token picks k of the E experts; assuming uniform, independent routing, an expert is
    missed by one token with probability 1 - k/E and by all B with (1 - k/E)^B. Real routers
    are not uniform (some experts are popular), which touches fewer distinct experts; the
    formula is the uniform case. Broadcasts over B.

    >>> float(expected_experts(8, 2, 1)), round(float(expected_experts(8, 2, 16)), 2)
    (2.0, 7.92)

    See: Chapter 8, "Mixture-of-experts decode reads only the experts it touches".
    """
    E = check_positive("E", E)
    k = check_positive("k", k)
    if np.any(k > E):
        raise ValueError(f"k={k!r} active experts exceed E={E!r}; choose k <= E")
    B = check_positive("B", B)
    return _out(E * (1 - (1 - k / E) ** B))


def weight_bytes_read(cfg, dtype="bf16", B=None):
    """Bytes of weights one decode step reads: every parameter except the input embedding table.

    The embedding lookup touches only B rows, so an untied table is left out; a tied table is read
    by the output matmul and counted. MoE models: with ``B=None`` every expert is counted (the
    bound once B·k is large); with a batch B, only the experts it is expected to touch
    (:func:`expected_experts`, uniform routing), so batch 1 reads k of the E experts per layer.

    >>> round(weight_bytes_read("llama3-8b") / 1e9, 2)  # (8.03e9 - 0.525e9) params x 2 bytes
    15.01
    >>> all_experts = weight_bytes_read("mixtral-8x7b")
    >>> round(all_experts / 1e9, 1), round(weight_bytes_read("mixtral-8x7b", B=1) / 1e9, 1)
    (93.1, 25.5)
    """
    c = _cfg(cfg)
    parts = transformer.param_count(c)
    n = parts.total - (0 if c.tied_embeddings else parts["embedding"])
    if B is not None and c.is_moe:
        routed = parts["experts"]
        n = n - routed + routed * expected_experts(c.E, c.k, B) / c.E
    return _out(n * dtype_bytes(dtype))


def weight_read_time(n_params, accelerator, n_devices=1, dtype="bf16"):
    """Lower bound on a decode step from weights alone: n_params · w / (n · W_hbm) seconds.

    Every weight is read once per step, split evenly over ``n_devices`` chips; a bound whatever
    the batch (the KV cache and compute only add to it). For a model given as a config, use
    :func:`weight_bytes_read` for the exact bytes.

    >>> round(weight_read_time(200e9, "tpu-v5e", 32) * 1e3, 1)  # ms
    15.3
    """
    acc = hardware.get(accelerator)
    n = check_count("n_devices", n_devices)
    nbytes = check_positive("n_params", n_params) * dtype_bytes(dtype)
    return roofline.t_comms(nbytes / n, acc.hbm_bytes_per_s)


def decode_flops(cfg, B, S) -> Breakdown:
    """FLOPs of one decode step by part: the weight matmuls, and attention over the cache.

    "weights": B · 2 · (W + D·V), every matmul weight once per new token (active experts only);
    "attention": B · L · 4 · S · N · H, one query against S cached keys and values (no masked
    half: the new token sees every cached one). The total is B · flops_per_token(cfg, S,
    training=False).

    >>> f = decode_flops("llama3-70b", 1, 8192)
    >>> round(f["weights"] / 1e9), round(f["attention"] / 1e9)
    (139, 21)
    """
    c = _cfg(cfg)
    B = check_positive("B", B)  # may be fractional: figures mark where the cache stops fitting
    S = check_count("S", S, sweep=True)
    weights = transformer.flops_per_token(c, 1.0, training=False, include_attention=False)
    attention = np.asarray(transformer.flops_per_token(c, S, training=False)) - weights
    return Breakdown({"weights": _out(B * weights), "attention": _out(B * attention)},
                     unit="FLOPs")


def decode_bytes(cfg, B, S, dtype="bf16", kv_dtype=None) -> Breakdown:
    """HBM bytes one decode step reads: the weights once, plus the B sequences' KV caches.

    ``dtype``: the weights' format; ``kv_dtype``: the cache's (default: the same). An MoE model
    reads only the experts the B tokens are expected to touch (:func:`weight_bytes_read`).

    >>> b = decode_bytes("llama3-70b", 1, 8192)
    >>> round(b["weights"] / 1e9, 1), round(b["kv cache"] / 1e9, 2)
    (139.0, 2.68)
    """
    kv = transformer.kv_cache_bytes(cfg, B, S, kv_dtype or dtype)
    return Breakdown({"weights": weight_bytes_read(cfg, dtype, B), "kv cache": kv}, unit="bytes")


def decode_intensity(cfg, B, S, dtype="bf16", kv_dtype=None):
    """Arithmetic intensity of a decode step: FLOPs per byte of HBM traffic.

    About B for the weights in bf16 when the cache is small; never above N/K for the cache part.

    >>> round(decode_intensity("llama3-70b", 1, 8192), 2)
    1.13
    """
    return roofline.arithmetic_intensity(decode_flops(cfg, B, S).total,
                                         decode_bytes(cfg, B, S, dtype, kv_dtype).total)


def tp_decode_comm_time(cfg, B, tp, link=None, *, accelerator="h100", dtype="bf16"):
    """Time of the tensor-parallel all-reduces of one decode step (seconds).

    Megatron-style tensor parallelism ends each layer's attention and MLP with an all-reduce of
    the B tokens' activations (B·D·a bytes): 2·L all-reduces per step, one after the other on
    the critical path (each layer needs the previous one's output). At small B each is
    latency-bound: about 2(tp - 1) hops of the link's latency, whatever the bytes. ``link``: a
    :class:`scaling_lib.hardware.Link` (default: the intra-node link of ``accelerator``'s
    cluster of tp devices, NVLink through a switch for GPUs), costed by
    :func:`scaling_lib.collectives.all_reduce_time`. 0 when tp = 1.

    >>> round(tp_decode_comm_time("llama3-70b", 1, 8) * 1e3, 2)  # ms: 160 all-reduces of 16 KB
    4.49

    See: Chapter 8, "Tensor-parallel decode pays all-reduces".
    """
    c = _cfg(cfg)
    B = check_positive("B", B)
    tp = check_positive("tp", tp)
    if np.any(np.asarray(tp) != np.round(tp)):
        raise ValueError(f"tp={tp!r} must be a whole number of devices (1, 2, 4, 8, ...)")
    if np.all(np.asarray(tp) == 1):
        return _out(0.0 * B)
    if link is not None and not isinstance(link, hardware.Link):
        raise ValueError(f"link={link!r} must be a hardware.Link or None (the accelerator's "
                         "intra-node link)")
    if link is None:
        cl = hardware.cluster(accelerator, int(np.max(tp)))
        topology, link = cl.topology, cl.intra_node
        bw = collectives.intra_node_link_bytes_per_s(cl)
    else:
        topology, bw = "switch", link.bytes_per_s
    one = collectives.all_reduce_time(B * c.D * dtype_bytes(dtype), tp, bw, topology=topology,
                                      latency=link.latency)
    return _out(2 * c.L * np.where(np.asarray(tp) > 1, one, 0.0))


def decode_step_time(cfg, B, S, accelerator, n_devices=1, dtype="bf16", kv_dtype=None, *,
                     tp=1, link=None):
    """Roofline lower bound on one decode step (seconds), work split evenly over ``n_devices``.

    T = max(FLOPs / (n·C), bytes / (n·W_hbm)) + T_comm: perfect overlap of compute and HBM
    traffic, perfect sharding; T_comm = :func:`tp_decode_comm_time` for ``tp``-way tensor
    parallelism over ``link`` (2·L all-reduces, not overlapped: each layer waits for the
    previous one's). The default tp = 1 leaves communication out. Each sequence gets one token
    per step, so B / T is the tokens/s of the system.

    >>> round(decode_step_time("llama3-70b", 1, 8192, "h100", 8) * 1e3, 2)  # ms
    5.29
    >>> round(decode_step_time("llama3-70b", 1, 8192, "h100", 8, tp=8) * 1e3, 2)  # + all-reduces
    9.78
    """
    acc = hardware.get(accelerator)
    n = check_count("n_devices", n_devices)
    t_math = roofline.t_math(decode_flops(cfg, B, S).total, n * acc.peak_flops_per_s(dtype))
    t_mem = roofline.t_comms(decode_bytes(cfg, B, S, dtype, kv_dtype).total,
                             n * acc.hbm_bytes_per_s)
    t_comm = tp_decode_comm_time(cfg, B, tp, link, accelerator=acc, dtype=dtype)
    return _out(roofline.time_bounds(t_math, t_mem)[0] + t_comm)


def max_cached_tokens(cfg, accelerator, n_devices=1, dtype="bf16", kv_dtype=None):
    """Tokens of KV cache that fit in the HBM left after the weights, over ``n_devices``.

    (n · HBM - weight bytes) / (KV bytes per token); 0 when the weights alone do not fit.
    Activations and the framework's own reserve are left out, so real servers fit fewer.

    >>> int(max_cached_tokens("llama3-70b", "h100", 8))  # about 185 sequences of 8K tokens
    1522499
    """
    c = _cfg(cfg)
    acc = hardware.get(accelerator)
    n = check_count("n_devices", n_devices)
    free = n * acc.hbm_bytes - transformer.n_params(c) * dtype_bytes(dtype)
    per_token = transformer.kv_cache_bytes(c, 1, 1, kv_dtype or dtype)
    return _out(np.maximum(free, 0.0) / per_token)
