"""Serving at scale: latency, throughput, memory and cost of a model sharded over n devices.

A served request has two phases with different rooflines (Chapter 8). Prefill runs the P prompt
tokens of each of the B sequences in one forward pass: B·P tokens share each weight read, so it
is compute-bound for any real prompt. Decode then makes one token per sequence per step: every
weight and every cached key and value is read once per step, so it is memory-bound until B is in
the hundreds. Here the model is tensor-parallel over all n devices (weights and KV cache split
evenly, 2·L all-reduces per forward pass), and:

    TTFT  = max(F_prefill / (n·C·MFU), W_bytes / (n·W_hbm)) + T_comm(B·P tokens)
    TPOT  = max(F_step / (n·C), bytes_step / (n·W_hbm)) + T_comm(B tokens)     (at S = P + G/2)
    tokens/s = B·G / (TTFT + G·TPOT)                                           (output tokens)
    $/1M tokens = price · n / (3600 · tokens/s) · 1e6

with C the peak FLOP/s, W_hbm the HBM bandwidth and G the generated tokens per sequence. The
all-reduces run over the accelerator's scale-up domain (NVLink inside an 8-GPU node, ICI inside
a TPU pod); a tensor-parallel group wider than that crosses the scale-out network on every
all-reduce, which the estimate models by costing the all-reduces on the inter-node link. Decode
becomes communication-bound once T_comm exceeds the roofline time: at batch 1 the all-reduces
are latency-bound (2(n-1) hops each), so adding devices past that point makes TPOT worse.

Built on :mod:`scaling_lib.inference` (decode step, bytes, FLOPs, tensor-parallel all-reduces)
and :func:`scaling_lib.transformer.kv_cache_bytes`; what it leaves out: batching of requests
that arrive at different times (continuous batching: :mod:`scaling_lib.serving_sim`),
paged-attention fragmentation, kernel launch overheads and kernel efficiency, sampling, the
memory a framework reserves for itself, and expert parallelism (an MoE model is sharded like a
dense one; its decode reads only the experts the batch is expected to touch).

See: Chapter "Serving at scale".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import hardware, inference, models, roofline, transformer
from .breakdown import Breakdown
from .units import (_brief, check_count, check_fraction, check_int, check_positive, dtype_bytes,
                    scalar_or_array as _out)

__all__ = ["ServeEstimate", "estimate", "min_devices", "prefill_decode_ratio",
           "speculative_speedup", "comm_link", "comm_bound_devices", "pareto_mask"]


@dataclass(frozen=True)
class ServeEstimate:
    """What :func:`estimate` returns (SI units; arrays where ``batch`` was an array).

    ttft: seconds to the first token (prefill of the batch's prompts); tpot: seconds per output
    token of one sequence (one decode step); tokens_per_s: output tokens/s of the system over a
    request's life (prefill included); decode_tokens_per_s: B / TPOT, the steady decode rate;
    memory: bytes per device (weights, kv cache, activations); fits: memory.total <= HBM;
    cost_per_million_tokens: dollars per million output tokens, None without a price;
    prefill_bound / decode_bound: "compute", "memory" or "communication", the largest term.
    """

    ttft: float
    tpot: float
    tokens_per_s: float
    tokens_per_s_per_device: float
    decode_tokens_per_s: float
    memory: Breakdown
    fits: bool
    cost_per_million_tokens: float | None
    prefill_bound: str
    decode_bound: str
    n_devices: int
    scale_up_domain: int


def comm_link(accelerator, n_devices):
    """The link the tensor-parallel all-reduces of ``n_devices`` run on, and the scale-up size.

    Returns (link, devices_per_node): ``None`` (the default intra-node link that
    :func:`scaling_lib.inference.tp_decode_comm_time` picks: NVLink through a switch, or the ICI
    torus) when n fits in one scale-up domain, else the scale-out link (InfiniBand, DCN), which
    every all-reduce of a group that spans domains must cross.

    >>> comm_link("h100", 8)[0] is None, comm_link("h100", 16)[0].name, comm_link("h100", 1)[1]
    (True, 'InfiniBand NDR', 8)
    """
    acc = hardware.get(accelerator)
    n = check_int("n_devices", n_devices, maximum=2**24)
    if n == 1:  # no all-reduces: any chip, even one without a default cluster
        try:
            return None, _domain(acc)
        except ValueError:
            return None, 1
    try:
        per_node = _domain(acc)
    except ValueError:
        raise ValueError(f"n_devices={n} needs the links of {acc.name!r}, which has no default "
                         "cluster; use n_devices=1 or one of the chips "
                         f"{', '.join(hardware.clusters._SCALE_OUT)}") from None
    return (None if n <= per_node else hardware.cluster(acc, n).inter_node), per_node


def _domain(acc) -> int:
    """Devices in one scale-up domain: a full node of a large cluster."""
    return hardware.cluster(acc, 2**16).devices_per_node


def _bound(t_math, t_mem, t_comm):
    names = np.array(["compute", "memory", "communication"])
    which = np.argmax(np.stack(np.broadcast_arrays(t_math, t_mem, t_comm)), axis=0)
    out = names[which]
    return str(out) if out.ndim == 0 else out


def compute_dtype(accelerator, dtype) -> str:
    """The precision the matmuls run in for weights stored in ``dtype`` on ``accelerator``.

    ``dtype`` itself when the chip lists a peak for it (fp8 or int8 matmuls), else bf16:
    weight-only quantization (int4 on GPUs) dequantizes the weights before each matmul, so it
    saves bytes, not FLOPs, and the activations stay in bf16.

    >>> compute_dtype("h100", "int4"), compute_dtype("h100", "fp8")
    ('bf16', 'fp8')
    """
    acc = hardware.get(accelerator)
    return dtype if acc.supports(dtype) else "bf16"


def estimate(cfg, accelerator, n_devices, *, batch, prompt_len, gen_len, dtype="bf16",
             kv_dtype=None, prefill_mfu=0.4, price_per_device_hour=None) -> ServeEstimate:
    """Latency, throughput, memory and cost of serving ``cfg`` tensor-parallel over n devices.

    Static batching: ``batch`` sequences of ``prompt_len`` prompt tokens are prefilled together,
    then decode ``gen_len`` tokens each. TTFT = max(F_prefill/(n·C·MFU), W_bytes/(n·W_hbm)) +
    2L all-reduces of B·P·D·a bytes; TPOT = :func:`scaling_lib.inference.decode_step_time` at
    the mean context S = P + ⌊G/2⌋ with tp = n; tokens/s = B·G/(TTFT + G·TPOT); cost =
    price·n/(3600·tokens/s)·1e6 dollars per million output tokens. Memory per device: weights
    (all parameters)/n, the KV cache of B sequences of P + G tokens / n, and a rough activation
    working set of one prefill layer, B·P·(2D + 2F/n)·a. Broadcasts over an array of ``batch``.

    FLOPs and activations run in :func:`compute_dtype` (bf16 for weight-only int4).

    Args: cfg (preset name or TransformerConfig), accelerator (name or Accelerator),
    n_devices (int), batch, prompt_len, gen_len (counts), dtype / kv_dtype (weights / cache),
    prefill_mfu (fraction of peak the prefill reaches), price_per_device_hour (dollars).

    >>> e = estimate("llama3-70b", "h100", 8, batch=1, prompt_len=1024, gen_len=256)
    >>> round(e.tpot * 1e3, 1), round(e.ttft * 1e3, 1), e.decode_bound, e.prefill_bound, e.fits
    (9.7, 60.3, 'memory', 'compute', True)
    >>> e = estimate("llama3-70b", "h100", 8, batch=64, prompt_len=1024, gen_len=256,
    ...              price_per_device_hour=2.0)
    >>> round(e.tokens_per_s), round(e.cost_per_million_tokens, 2)
    (2540, 1.75)

    See: Chapter "Serving at scale", "The two phases and their metrics".
    """
    c = models.get(cfg)
    acc = hardware.get(accelerator)
    n = check_int("n_devices", n_devices, maximum=2**24)
    B = check_count("batch", batch)
    P = check_count("prompt_len", prompt_len)
    G = check_count("gen_len", gen_len)
    if np.ndim(P) or np.ndim(G):
        raise ValueError(f"prompt_len={_brief(prompt_len)} and gen_len={_brief(gen_len)} must be "
                         "single numbers (only batch may be an array)")
    mfu = check_fraction("prefill_mfu", prefill_mfu)
    if price_per_device_hour is not None:
        price_per_device_hour = check_positive("price_per_device_hour", price_per_device_hour)
    kv_dtype = kv_dtype or dtype
    act = compute_dtype(acc, dtype)
    peak = acc.peak_flops_per_s(act)
    w = dtype_bytes(dtype)
    link, per_node = comm_link(acc, n)

    def comm(tokens):
        return inference.tp_decode_comm_time(c, tokens, n, link, accelerator=acc, dtype=act)

    # prefill: the B·P prompt tokens in one causal forward pass
    t_pre_math = roofline.t_math(transformer.forward_flops(c, B, P, causal=True),
                                 n * peak * mfu)
    t_pre_mem = roofline.t_comms(inference.weight_bytes_read(c, dtype) +
                                 transformer.kv_cache_bytes(c, B, P, kv_dtype),
                                 n * acc.hbm_bytes_per_s)
    t_pre_comm = comm(B * P)
    ttft = roofline.time_bounds(t_pre_math, t_pre_mem)[0] + t_pre_comm

    # decode: one step at the mean context length
    S = P + G // 2  # the mean context, in whole tokens
    t_dec_math = roofline.t_math(inference.decode_flops(c, B, S).total, n * peak)
    t_dec_mem = roofline.t_comms(inference.decode_bytes(c, B, S, dtype, kv_dtype).total,
                                 n * acc.hbm_bytes_per_s)
    t_dec_comm = comm(B)
    tpot = roofline.time_bounds(t_dec_math, t_dec_mem)[0] + t_dec_comm  # = decode_step_time

    tokens_per_s = B * G / (ttft + G * tpot)
    mem = Breakdown({
        "weights": transformer.n_params(c) * w / n,
        "kv cache": transformer.kv_cache_bytes(c, B, P + G, kv_dtype) / n,
        "activations": _out(B * P * (2 * c.D + 2 * c.F / n) * dtype_bytes(act)),
    }, unit="bytes")
    fits = np.asarray(mem.total) <= acc.hbm_bytes
    cost = None
    if price_per_device_hour is not None:
        cost = _out(price_per_device_hour * n / (3600 * tokens_per_s) * 1e6)
    return ServeEstimate(
        ttft=_out(ttft), tpot=_out(tpot), tokens_per_s=_out(tokens_per_s),
        tokens_per_s_per_device=_out(tokens_per_s / n), decode_tokens_per_s=_out(B / tpot),
        memory=mem, fits=bool(fits) if fits.ndim == 0 else fits,
        cost_per_million_tokens=cost,
        prefill_bound=_bound(t_pre_math, t_pre_mem, t_pre_comm),
        decode_bound=_bound(t_dec_math, t_dec_mem, t_dec_comm),
        n_devices=n, scale_up_domain=per_node)


def comm_bound_devices(cfg, accelerator, *, batch=1, context=2048, dtype="bf16", kv_dtype=None,
                       max_devices=4096):
    """Smallest power-of-two n at which decode turns communication-bound, or None up to max.

    Tensor parallelism over n devices divides the roofline step, max(F/(n·C), bytes/(n·W_hbm)),
    by n, but its 2·L all-reduces per step cost at least 2(n-1) link latencies each, so they
    grow with n: the step is communication-bound from the first n where T_comm(n) >= the
    roofline time (all-reduces on :func:`comm_link`'s link: the scale-out network once n
    passes the scale-up domain). Past that point more devices make each token slower.

    >>> comm_bound_devices("llama3-70b", "h100"), comm_bound_devices("llama3-70b", "tpu-v5e")
    (16, 128)

    See: Chapter "Serving at scale", "When model parallelism becomes communication-bound".
    """
    c = models.get(cfg)
    acc = hardware.get(accelerator)
    B = check_count("batch", batch)
    S = check_count("context", context)
    top = check_int("max_devices", max_devices, maximum=2**24)
    if np.ndim(B) or np.ndim(S):
        raise ValueError(f"batch={_brief(batch)} and context={_brief(context)} must be single "
                         "numbers")
    n = 2
    while n <= top:
        link, _ = comm_link(acc, n)
        t_roof = inference.decode_step_time(c, B, S, acc, n, dtype, kv_dtype)
        t_comm = inference.tp_decode_comm_time(c, B, n, link, accelerator=acc, dtype=dtype)
        if t_comm >= t_roof:
            return n
        n *= 2
    return None


def pareto_mask(latency, throughput):
    """True where a point is on the latency-throughput Pareto front (no other point is better).

    A point is dominated when another has latency <= and throughput >= it, one of them strictly.
    Pass e.g. ``e.tpot`` and ``e.tokens_per_s`` of an :func:`estimate` over an array of batches
    (or several device counts, concatenated). Equal points are all kept.

    >>> pareto_mask([1.0, 2.0, 2.0, 3.0], [10.0, 30.0, 20.0, 25.0]).tolist()
    [True, True, False, False]

    See: Chapter "Serving at scale", "The latency-throughput trade-off".
    """
    lat = np.atleast_1d(np.asarray(check_positive("latency", latency), dtype=float))
    thr = np.atleast_1d(np.asarray(check_positive("throughput", throughput, allow_zero=True),
                                   dtype=float))
    if lat.shape != thr.shape or lat.ndim != 1:
        raise ValueError(f"latency and throughput must be 1-D arrays of one shape, not "
                         f"{lat.shape} and {thr.shape}")
    if lat.size > 100_000:
        raise ValueError(f"{lat.size} points: at most 100,000")
    order = np.lexsort((-thr, lat))  # by latency, then the best throughput first
    keep = np.zeros(lat.size, dtype=bool)
    best = -np.inf
    last = (None, None)
    for i in order:
        if thr[i] > best or (lat[i], thr[i]) == last:
            keep[i] = True
            best = max(best, thr[i])
            last = (lat[i], thr[i])
    return keep


def best_batch(cfg, accelerator, n_devices, *, tpot_budget, prompt_len, gen_len, dtype="bf16",
               kv_dtype=None, max_batch=4096) -> int:
    """The batch with the most tokens/s whose TPOT stays within ``tpot_budget`` and which fits.

    Evaluates :func:`estimate` at every batch 1..max_batch and keeps the feasible ones (memory
    fits, TPOT <= budget); returns the one with the highest tokens/s, or 0 when even batch 1 is
    infeasible. In this model tokens/s grows with the batch, so it is the largest feasible one.

    >>> best_batch("llama3-70b", "h100", 8, tpot_budget=0.02, prompt_len=1024, gen_len=256)
    425

    See: Chapter "Serving at scale", "The latency-throughput trade-off".
    """
    budget = check_positive("tpot_budget", tpot_budget)
    top = check_int("max_batch", max_batch, maximum=65536)
    if np.ndim(budget):
        raise ValueError(f"tpot_budget={_brief(tpot_budget)} must be a single number")
    B = np.arange(1, top + 1)
    e = estimate(cfg, accelerator, n_devices, batch=B, prompt_len=prompt_len, gen_len=gen_len,
                 dtype=dtype, kv_dtype=kv_dtype)
    ok = np.asarray(e.fits) & (np.asarray(e.tpot) <= budget)
    if not ok.any():
        return 0
    return int(B[ok][np.argmax(np.asarray(e.tokens_per_s)[ok])])


def decode_time_breakdown(cfg, accelerator, n_devices, *, batch, context, dtype="bf16",
                          kv_dtype=None) -> Breakdown:
    """A decode step's parts in seconds: reading weights, reading KV, FLOPs, all-reduces.

    "weights" = weight bytes / (n·W_hbm), "kv cache" = B sequences' cache at ``context`` tokens /
    (n·W_hbm), "flops" = FLOPs / (n·C), "communication" = the 2L tensor-parallel all-reduces on
    :func:`comm_link`'s link. The step (:func:`estimate`'s TPOT at that context) is
    max(weights + kv cache, flops) + communication: the first three overlap, the last does not.
    Broadcasts over an array of ``batch``.

    >>> t = decode_time_breakdown("llama3-70b", "h100", 8, batch=1, context=1152)
    >>> {k: round(v * 1e3, 2) for k, v in t.items()}  # ms
    {'weights': 5.19, 'kv cache': 0.01, 'flops': 0.02, 'communication': 4.49}

    See: Chapter "Serving at scale", "The latency-throughput trade-off".
    """
    c = models.get(cfg)
    acc = hardware.get(accelerator)
    n = check_int("n_devices", n_devices, maximum=2**24)
    B = check_count("batch", batch)
    S = check_count("context", context)
    if np.ndim(S):
        raise ValueError(f"context={_brief(context)} must be a single number")
    link, _ = comm_link(acc, n)
    act = compute_dtype(acc, dtype)
    nbytes = inference.decode_bytes(c, B, S, dtype, kv_dtype)
    return Breakdown({
        "weights": _out(nbytes["weights"] / (n * acc.hbm_bytes_per_s) + 0.0 * B),
        "kv cache": _out(nbytes["kv cache"] / (n * acc.hbm_bytes_per_s)),
        "flops": _out(inference.decode_flops(c, B, S).total / (n * acc.peak_flops_per_s(act))),
        "communication": _out(inference.tp_decode_comm_time(c, B, n, link, accelerator=acc,
                                                            dtype=act)),
    }, unit="s")


__all__ += ["best_batch", "decode_time_breakdown", "compute_dtype"]


def min_devices(cfg, accelerator, *, dtype="bf16", kv_bytes=0.0) -> int:
    """Fewest devices whose HBM holds the weights plus ``kv_bytes``: ⌈(n_params·w + kv)/HBM⌉.

    Every parameter counts (the embedding table too: it must be resident). A real deployment
    rounds up further, to a tensor-parallel degree that divides the heads (1, 2, 4, 8), and
    keeps room for activations and the framework; this is the floor.

    >>> min_devices("llama3-70b", "h100"), min_devices("llama3-70b", "h100", dtype="fp8")
    (2, 1)
    >>> min_devices("llama3-405b", "h100")  # 811 GB of bf16 weights: more than one node
    11

    See: Chapter "Serving at scale", "How many chips".
    """
    c = models.get(cfg)
    acc = hardware.get(accelerator)
    kv = check_positive("kv_bytes", kv_bytes, allow_zero=True)
    if np.ndim(kv):
        raise ValueError(f"kv_bytes={_brief(kv_bytes)} must be a single number")
    if not acc.hbm_bytes:
        raise ValueError(f"accelerator {acc.name!r} has no HBM size on record; choose one of "
                         f"{', '.join(hardware.names())}")
    need = transformer.n_params(c) * dtype_bytes(dtype) + kv
    n = math.ceil(need / acc.hbm_bytes)
    if n > 2**24:
        raise ValueError(f"kv_bytes={kv:g} needs {n:g} devices: more than 2**24; choose a "
                         "smaller cache")
    return max(n, 1)


def prefill_decode_ratio(prefill_time, decode_step_time, batch, gen_len):
    """Prefill servers per decode server so that neither waits (disaggregated serving).

    A decode server with ``batch`` slots finishes a sequence every gen_len·decode_step_time /
    batch seconds on average; a prefill server prepares one every ``prefill_time`` seconds (the
    prefill of one prompt). Balance: ratio = batch · prefill_time / (gen_len · decode_step_time).
    Broadcasts over arrays.

    >>> prefill_decode_ratio(0.1, 0.02, 64, 500)  # 64 x 0.1 s of prefill per 10 s of decode
    0.64

    See: Chapter "Serving at scale", "Disaggregated prefill and decode".
    """
    tp = check_positive("prefill_time", prefill_time)
    td = check_positive("decode_step_time", decode_step_time)
    B = check_positive("batch", batch)
    G = check_count("gen_len", gen_len)
    return _out(B * tp / (G * td))


def speculative_speedup(alpha, gamma, draft_cost=0.0):
    """Expected speed-up of speculative decoding over plain decoding.

    Each round the draft model proposes γ tokens and the target checks them in one step; with
    each token accepted independently with probability α, the expected tokens per round are
    (1 - α^(γ+1)) / (1 - α) (γ + 1 at α = 1), Leviathan, Kalman & Matias, "Fast Inference from
    Transformers via Speculative Decoding", ICML 2023, eq. (1). A round costs one target step
    plus γ draft steps of ``draft_cost`` target steps each, so

        speed-up = (1 - α^(γ+1)) / ((1 - α)(1 + γ·c)).

    It pays (> 1) only when the draft is cheap and agrees often. Broadcasts over arrays.

    >>> round(speculative_speedup(0.8, 4, 0.05), 3)
    2.801
    >>> speculative_speedup(0.0, 4, 0.05)  # nothing accepted: the draft is pure overhead
    0.8333333333333334

    See: Chapter "Serving at scale", "Speculative decoding".
    """
    a = np.asarray(check_fraction("alpha", alpha, allow_zero=True))
    g = check_count("gamma", gamma, minimum=0)
    cost = check_positive("draft_cost", draft_cost, allow_zero=True)
    one = np.isclose(a, 1.0)
    safe = np.where(one, 0.5, a)
    tokens = np.where(one, g + 1.0, (1 - safe ** (g + 1)) / (1 - safe))
    return _out(tokens / (1 + g * cost))
