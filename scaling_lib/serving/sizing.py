"""Sizing a deployment from the estimate: the fewest devices, the best batch under a latency
budget, where tensor parallelism turns communication-bound, the decode step's parts, the
prefill:decode server ratio, speculative decoding's speed-up and the latency-throughput front.

See: Chapter "Serving at scale".
"""

from __future__ import annotations

import math

import numpy as np

from .. import hardware, inference, models, transformer
from ..breakdown import Breakdown
from ..units import (_brief, check_count, check_int, check_positive, dtype_bytes,
                     scalar_or_array as _out)
from . import layout as _layout
from .estimator import estimate

__all__ = ["comm_bound_devices", "pareto_mask", "best_batch", "decode_time_breakdown",
           "min_devices", "prefill_decode_ratio", "speculative_speedup"]


def comm_bound_devices(cfg, accelerator, *, batch=1, context=2048, dtype="bf16", kv_dtype=None,
                       max_devices=4096):
    """Smallest power-of-two tensor-parallel degree at which decode turns communication-bound,
    or None up to ``max_devices`` (or the largest tp the heads allow).

    Tensor parallelism over n devices divides the roofline step, max(F/(n·C), bytes/(n·W_hbm)),
    by n, but its 2L + 1 all-reduces per step cost at least a few link latencies each
    (:func:`scaling_lib.inference.tp_decode_comm_time`: small-message algorithms inside the
    scale-up domain, the network beyond it): the step is communication-bound from the first n
    where T_comm(n) >= the roofline time. Past that point more devices make each token slower.

    >>> comm_bound_devices("llama3-70b", "h100") > 8  # never inside one NVLink node
    True

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
    ok = _layout.tp_choices(c)
    n = 2
    while n <= top and n <= max(ok):
        if n in ok:
            p = inference.decode_step_parts(c, B, S, acc, n, dtype, kv_dtype, tp=n)
            if p["communication"] >= max(p["compute"], p["memory"]):
                return n
        n *= 2
    return None


def pareto_mask(latency, throughput):
    """True where a point is on the latency-throughput Pareto front (no other point is better).

    A point is dominated when another has latency <= and throughput >= it, one of them strictly.
    The front has one home, :func:`scaling_lib.planner.pareto` (two costs to minimise): this is
    ``pareto(latency, -throughput)``. Pass e.g. ``e.tpot`` and ``e.tokens_per_s`` of an
    :func:`estimate` over an array of batches (or several device counts, concatenated).

    >>> pareto_mask([1.0, 2.0, 2.0, 3.0], [10.0, 30.0, 20.0, 25.0]).tolist()
    [True, True, False, False]

    See: Chapter "Serving at scale", "The latency-throughput trade-off".
    """
    from ..planner import pareto

    lat = np.atleast_1d(np.asarray(check_positive("latency", latency), dtype=float))
    thr = np.atleast_1d(np.asarray(check_positive("throughput", throughput, allow_zero=True),
                                   dtype=float))
    if lat.shape != thr.shape or lat.ndim != 1:
        raise ValueError(f"latency and throughput must be 1-D arrays of one shape, not "
                         f"{lat.shape} and {thr.shape}")
    if lat.size > 100_000:
        raise ValueError(f"{lat.size} points: at most 100,000")
    return pareto(lat, -thr)


def best_batch(cfg, accelerator, n_devices, *, tpot_budget, prompt_len, gen_len, dtype="bf16",
               kv_dtype=None, max_batch=4096, tp=None, pp=None, replicas=None,
               prefill="chunked") -> int:
    """The batch with the most tokens/s whose TPOT stays within ``tpot_budget`` and which fits.

    Evaluates :func:`estimate` at every batch 1..max_batch and keeps the feasible ones (memory
    fits, TPOT <= budget); returns the one with the highest tokens/s, or 0 when even batch 1 is
    infeasible. In this model tokens/s grows with the batch, so it is the largest feasible one.
    ``tp``, ``pp``, ``replicas``, ``prefill``: as in :func:`estimate` (default: the layout is
    chosen per batch).

    >>> best_batch("llama3-70b", "h100", 8, tpot_budget=0.02, prompt_len=1024, gen_len=256)
    409

    See: Chapter "Serving at scale", "The latency-throughput trade-off".
    """
    budget = check_positive("tpot_budget", tpot_budget)
    top = check_int("max_batch", max_batch, maximum=65536)
    if np.ndim(budget):
        raise ValueError(f"tpot_budget={_brief(tpot_budget)} must be a single number")
    B = np.arange(1, top + 1)
    e = estimate(cfg, accelerator, n_devices, batch=B, prompt_len=prompt_len, gen_len=gen_len,
                 dtype=dtype, kv_dtype=kv_dtype, tp=tp, pp=pp, replicas=replicas,
                 prefill=prefill)
    ok = np.asarray(e.fits) & (np.asarray(e.tpot) <= budget)
    if not ok.any():
        return 0
    return int(B[ok][np.argmax(np.asarray(e.tokens_per_s)[ok])])


def decode_time_breakdown(cfg, accelerator, n_devices, *, batch, context, dtype="bf16",
                          kv_dtype=None, tp=None, pp=1, launch=True) -> Breakdown:
    """A decode step's parts in seconds: reading weights, reading KV, FLOPs, all-reduces, launch.

    From :func:`scaling_lib.inference.decode_step_parts` with tp = n_devices (or the given tp
    and pp): "weights" and "kv cache" split its memory term (weight bytes and the cache, with
    the kv copies of tp > K, over n/pp devices), "flops" is its compute, "communication" its
    all-reduces and pipeline sends, "launch" its launch floor (0 with ``launch=False``). The step
    (:func:`scaling_lib.inference.decode_step_time`, :func:`estimate`'s TPOT for that layout) is
    max(max(weights + kv cache, flops) + communication, launch): the first three overlap, the
    communication does not, and the launch is a floor. Broadcasts over an array of ``batch``.

    >>> t = decode_time_breakdown("llama3-70b", "h100", 8, batch=1, context=1152)
    >>> {k: round(v * 1e3, 2) for k, v in t.items() if k != "communication"}  # ms
    {'weights': 5.19, 'kv cache': 0.01, 'flops': 0.02, 'launch': 0.01}

    See: Chapter "Serving at scale", "The latency-throughput trade-off".
    """
    c = models.get(cfg)
    acc = hardware.get(accelerator)
    n = check_int("n_devices", n_devices, maximum=2**24)
    B = check_count("batch", batch)
    S = check_count("context", context)
    if np.ndim(S):
        raise ValueError(f"context={_brief(context)} must be a single number")
    t = n if tp is None else _layout.check_tp(c, tp)
    parts = inference.decode_step_parts(c, B, S, acc, n, dtype, kv_dtype, tp=t, pp=pp,
                                        launch=launch)
    nbytes = inference.decode_bytes(c, B, S, dtype, kv_dtype)
    w = np.asarray(nbytes["weights"], dtype=float)
    kv = inference.kv_replication(c, t) * np.asarray(nbytes["kv cache"], dtype=float)
    mem = np.asarray(parts["memory"])
    return Breakdown({
        "weights": _out(mem * w / (w + kv)), "kv cache": _out(mem * kv / (w + kv)),
        "flops": parts["compute"],
        "communication": _out(np.asarray(parts["communication"]) + parts["pipeline"]),
        "launch": parts["launch"],
    }, unit="s")


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
    from .engine import expected_tokens_per_step  # the one home of E(α, γ)

    g = check_count("gamma", gamma, minimum=0)
    cost = check_positive("draft_cost", draft_cost, allow_zero=True)
    return _out(np.asarray(expected_tokens_per_step(alpha, g)) / (1 + g * cost))
