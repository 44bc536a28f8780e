"""Serving at scale: latency, throughput, memory and cost of a model laid out on n devices.

A served request has two phases with different rooflines (Chapter 8). Prefill runs the P prompt
tokens of each sequence through the model: many tokens share each weight read, so it is
compute-bound for any real prompt. Decode then makes one token per sequence per step: every
weight and every cached key and value is read once per step, so it is memory-bound until B is in
the hundreds. The n devices hold ``replicas`` copies of the model, each tp-way tensor parallel
and pp pipeline stages (:mod:`.layout`); with B_r = B / replicas sequences per copy:

    TPOT  = decode step of a micro-batch B_r/m over tp devices (m = min(pp, B_r) in flight)
          = max(max(F/(tp·C), bytes/(tp·W_hbm)) + (2L+1) all-reduces + pp sends, launch floor)
    TTFT  = the batch's B_r·P prompt tokens in chunks of c tokens (chunked prefill, Sarathi-Serve:
            Agrawal et al., OSDI 2024) or in one pass (static batching, the teaching baseline):
            n_chunks·t_chunk (pipelined over the pp stages)
    tokens/s = B / t_round   (chunked: in steady state each decode round also carries the
               B_r·P/G prompt tokens of the requests that replace finished ones)
             = B·G / (TTFT + G·TPOT)   (static: prefill, then decode)
    $/1M tokens = price · n / (3600 · tokens/s) · 1e6

with C the peak FLOP/s of :func:`scaling_lib.inference.compute_dtype` and W_hbm the HBM
bandwidth. The time per output token has one home, :func:`scaling_lib.inference.decode_step_time`;
the all-reduces come from the training model's collectives (small messages on NVSwitch and ICI,
the network beyond the scale-up domain). Left free, the layout is the one with the lowest time
per output token among those that fit (the lowest TTFT among equals).

What it leaves out: requests arriving at different times (the simulator: :mod:`.sim`),
paged-attention fragmentation, kernel efficiency, sampling, the memory a framework reserves for
itself, and expert parallelism (an MoE model is sharded like a dense one; its decode reads only
the experts the batch is expected to touch).

See: Chapter "Serving at scale".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import hardware, inference, models, transformer
from ..breakdown import Breakdown
from ..units import (_brief, check_choice, check_count, check_fraction, check_int, check_positive,
                     dtype_bytes, scalar_or_array as _out)
from . import layout as _layout

__all__ = ["ServeEstimate", "estimate", "comm_link", "compute_dtype", "DEFAULT_CHUNK_TOKENS",
           "mixed_step_parts", "dollars_per_million_tokens"]

def dollars_per_million_tokens(price_per_device_hour, n_devices, tokens_per_s):
    """Dollars per million output tokens: price · n / (3600 · tokens/s) · 1e6.

    Every device is paid for by the hour whether it is busy or not; broadcasts over arrays.

    >>> round(dollars_per_million_tokens(2.0, 8, 4000.0), 3)
    1.111
    """
    price = check_positive("price_per_device_hour", price_per_device_hour)
    n = np.asarray(check_count("n_devices", n_devices), dtype=float)
    tok = check_positive("tokens_per_s", tokens_per_s)
    return _out(_dollars_per_million(price, n, tok))


def _dollars_per_million(price, n, tok):
    return price * n / (3600 * tok) * 1e6


# Token budget of one chunked-prefill iteration: Sarathi-Serve's larger budget (Agrawal et al.,
# "Taming Throughput-Latency Tradeoff in LLM Inference with Sarathi-Serve", OSDI 2024, evaluates
# token budgets of 512 and 2048); vLLM calls it max_num_batched_tokens.
DEFAULT_CHUNK_TOKENS = 2048


@dataclass(frozen=True)
class ServeEstimate:
    """What :func:`estimate` returns (SI units; arrays where ``batch`` was an array).

    ttft: seconds until every sequence of the batch has its first token; tpot: seconds per
    output token of one sequence (one decode step, :func:`scaling_lib.inference.decode_step_time`);
    tpot_mixed: a decode round with the prefill chunks that ride along in steady state (chunked
    prefill; = tpot for static batching); latency: ttft + gen_len·tpot; tokens_per_s: output
    tokens/s of the system; decode_tokens_per_s: B / TPOT, the pure decode rate; memory: bytes
    per device (weights, kv cache, activations); fits: memory.total <= HBM;
    cost_per_million_tokens: dollars per million output tokens, None without a price;
    prefill_bound / decode_bound: "compute", "memory", "communication" or "launch", the largest
    term; tp, pp, replicas: the layout (chosen or given); prefill: "chunked" or "static".
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
    tp: int = 1
    pp: int = 1
    replicas: int = 1
    tpot_mixed: float = 0.0
    latency: float = 0.0
    prefill: str = "chunked"
    chunk_tokens: int = DEFAULT_CHUNK_TOKENS

    @property
    def layout(self) -> str:
        """The layout as text (scalar estimates): "tp=8 pp=2 replicas=1"."""
        return str(_layout.Layout(int(np.ravel(self.tp)[0]), int(np.ravel(self.pp)[0]),
                                  int(np.ravel(self.replicas)[0])))


def comm_link(accelerator, n_devices):
    """The link a tensor-parallel group of ``n_devices`` crosses, and the scale-up size.

    Returns (link, devices_per_node): ``None`` (the node's own NVLink / ICI) when n fits in one
    scale-up domain, else the scale-out link (InfiniBand, DCN) that every all-reduce of a group
    spanning domains must cross (the collectives model prices both phases).

    >>> comm_link("h100", 8)[0] is None, comm_link("h100", 16)[0].name, comm_link("h100", 1)[1]
    (True, 'InfiniBand NDR', 8)
    """
    acc = hardware.get(accelerator)
    n = check_int("n_devices", n_devices, maximum=2**24)
    per_node = _layout.scale_up_domain(acc)
    if n > 1 and acc.name not in hardware.clusters._SCALE_OUT:
        raise ValueError(f"n_devices={n} needs the links of {acc.name!r}, which has no default "
                         "cluster; use n_devices=1 or one of the chips "
                         f"{', '.join(hardware.clusters._SCALE_OUT)}")
    return (None if n <= per_node else hardware.cluster(acc, n).inter_node), per_node


def _bound(**terms):
    names = np.array(list(terms))
    which = np.argmax(np.stack(np.broadcast_arrays(*terms.values())), axis=0)
    out = names[which]
    return str(out) if out.ndim == 0 else out


compute_dtype = inference.compute_dtype


def _evaluate(c, acc, lay, B, P, G, dtype, kv_dtype, mfu, chunk, cuda_graphs):
    """Every figure of one layout, as arrays over B (the whole deployment's batch)."""
    tp, pp, reps = lay.tp, lay.pp, lay.replicas
    act = inference.compute_dtype(acc, dtype)
    peak = acc.peak_flops_per_s(act)
    W = acc.hbm_bytes_per_s
    Br = np.asarray(B, dtype=float) / reps                  # sequences per replica
    m = np.minimum(pp, np.maximum(np.ceil(Br), 1))           # micro-batches in flight
    bm = Br / m
    S = P + G // 2                                           # mean context, whole tokens
    r = inference.kv_replication(c, tp)
    # ---- decode: the one home of the time per output token
    dec = inference.decode_step_parts(c, bm, S, acc, tp * pp, dtype, kv_dtype, tp=tp, pp=pp,
                                      launch=True, cuda_graphs=cuda_graphs)
    tpot = np.maximum(np.maximum(dec["compute"], dec["memory"]) + dec["communication"]
                      + dec["pipeline"], dec["launch"])  # the launch is a floor
    # ---- prefill: B_r·P prompt tokens in chunks of c tokens (static: one chunk of them all)
    prompt = Br * P
    ck = prompt if chunk is None else np.minimum(float(chunk), prompt)
    n_chunks = np.ceil(prompt / ck)
    f_seq = transformer.forward_flops(c, 1, P, causal=True)  # one prompt, causal attention
    f_chunk = f_seq * Br / n_chunks
    w_read = inference.weight_bytes_read(c, dtype)
    t_math = f_chunk / (tp * peak * mfu)
    t_mem = (w_read + r * transformer.kv_cache_bytes(c, 1, 1, kv_dtype) * ck) / (tp * W)
    t_comm = (inference.tp_decode_comm_time(c, ck, tp, accelerator=acc, dtype=act)
              + inference.pipeline_send_time(c, ck, tp, pp, acc, dtype=act))
    t_launch = inference.launch_time(c, pp=pp, cuda_graphs=cuda_graphs)
    t_chunk = np.maximum(np.maximum(t_math, t_mem) + t_comm, t_launch)
    ttft = t_chunk + (n_chunks - 1) * t_chunk / pp           # chunks pipeline over the stages
    # ---- throughput: static (prefill, then decode) or chunked (prefill rides along)
    if chunk is None:
        t_round = tpot
        tokens_per_s = np.asarray(B, dtype=float) * G / (ttft + G * tpot)
    else:
        ride = bm * P / G                                    # prompt tokens per round
        n_it = np.maximum(np.ceil((bm + ride) / chunk), 1)
        t_round = _mixed(c, acc, tp, pp, bm, S, ride, P, dtype, kv_dtype, mfu, cuda_graphs,
                         n_it, dec)["time"]
        tokens_per_s = np.asarray(B, dtype=float) / t_round
    # ---- memory per device
    Bmax = np.ceil(Br)
    mem = {
        "weights": _layout.weight_bytes_per_device(c, tp, pp, dtype) + 0.0 * Br,
        "kv cache": _layout.kv_cache_bytes_per_device(c, tp, Bmax, P + G, kv_dtype, pp=pp)
        + 0.0 * Br,
        "activations": ck * (2 * c.D + 2 * c.F / tp) * dtype_bytes(act) + 0.0 * Br,
    }
    total = mem["weights"] + mem["kv cache"] + mem["activations"]
    return dict(
        ttft=ttft, tpot=tpot, tpot_mixed=t_round, tokens_per_s=tokens_per_s,
        decode_tokens_per_s=np.asarray(B, dtype=float) / tpot, latency=ttft + G * tpot,
        fits=total <= acc.memory_capacity_bytes, mem=mem,
        prefill_bound=np.where(t_launch > np.maximum(t_math, t_mem) + t_comm, "launch",
                               _bound(compute=t_math, memory=t_mem, communication=t_comm)),
        decode_bound=np.where(np.asarray(dec["launch"]) >= tpot, "launch",
                              _bound(compute=dec["compute"], memory=dec["memory"],
                                     communication=np.asarray(dec["communication"])
                                     + dec["pipeline"])),
        ok=Br >= 1)


def _mixed(c, acc, tp, pp, b, S, ride, P, dtype, kv_dtype, mfu, cuda_graphs, n_it=1, dec=None):
    """Parts of n_it iterations that together run b decode tokens and ``ride`` prompt tokens
    (each iteration reads the weights once; the decode parts come from the one home)."""
    act = inference.compute_dtype(acc, dtype)
    peak = acc.peak_flops_per_s(act)
    W = acc.hbm_bytes_per_s
    r = inference.kv_replication(c, tp)
    if dec is None:
        dec = inference.decode_step_parts(c, b, S, acc, tp * pp, dtype, kv_dtype, tp=tp, pp=pp,
                                          launch=True, cuda_graphs=cuda_graphs)
    f_seq = transformer.forward_flops(c, 1, P, causal=True)  # one prompt, causal attention
    w_read = inference.weight_bytes_read(c, dtype)
    r_math = np.asarray(dec["compute"]) + f_seq * ride / P / (tp * peak * mfu)
    r_mem = (np.asarray(dec["memory"]) + (n_it - 1) * w_read / (tp * W)
             + r * transformer.kv_cache_bytes(c, 1, 1, kv_dtype) * ride / (tp * W))
    per_it = (b + ride) / n_it
    r_rest = n_it * (inference.tp_decode_comm_time(c, per_it, tp, accelerator=acc, dtype=act)
                     + inference.pipeline_send_time(c, per_it, tp, pp, acc, dtype=act))
    t_launch = n_it * inference.launch_time(c, pp=pp, cuda_graphs=cuda_graphs)
    time = np.maximum(np.maximum(r_math, r_mem) + r_rest, t_launch)
    return {"compute": r_math, "memory": r_mem, "communication": r_rest, "launch": t_launch,
            "time": time}


def mixed_step_parts(cfg, accelerator, tp, *, decode_batch, context, prefill_tokens, prompt_len,
                     pp=1, dtype="bf16", kv_dtype=None, prefill_mfu=0.4,
                     cuda_graphs=True) -> Breakdown:
    """One chunked-prefill iteration: ``decode_batch`` decode tokens and ``prefill_tokens``
    prompt tokens (a chunk of a ``prompt_len``-token prompt) go through the model together.

    The weights are read once for all b + c tokens (what makes a chunk ride along cheaply):

        compute       = F_decode(b, S)/(tp·C) + c · F_prefill(P)/P / (tp·C·mfu)
        memory        = (weights + b·KV(S)·r + c·KV(1)·r) / (tp·W_hbm)
        communication = 2L + 1 all-reduces (and pp sends) of b + c tokens
        time          = max(max(compute, memory) + communication, launch)

    with the decode terms from :func:`scaling_lib.inference.decode_step_parts` (the one home of
    the time per output token) and the prompt's FLOPs at ``prefill_mfu`` of peak (the same
    convention as :func:`estimate`'s TTFT). While memory > compute the chunk's FLOPs hide under
    the weight read; the chunk that makes them equal puts the mixed batch at the ridge point
    (:func:`scaling_lib.serving.engine.ridge_chunk_tokens`). Broadcasts over ``prefill_tokens``
    and ``decode_batch``. (Agrawal et al., Sarathi-Serve, OSDI 2024.)

    Returns a Breakdown (seconds): "compute", "memory", "communication", "launch", "time".

    >>> p = mixed_step_parts("llama3-70b", "h100", 8, decode_batch=64, context=1152,
    ...                      prefill_tokens=256, prompt_len=8192)
    >>> round(p["memory"] * 1e3, 2), round(p["compute"] * 1e3, 2), round(p["time"] * 1e3, 2)
    (6.09, 13.26, 16.75)

    See: Chapter "Serving at scale", "Chunked prefill".
    """
    c = models.get(cfg)
    acc = hardware.get(accelerator)
    t = _layout.check_tp(c, tp)
    p = _layout._check_pp(c, pp)
    b = check_count("decode_batch", decode_batch)
    S = check_count("context", context)
    P = check_count("prompt_len", prompt_len)
    ride = np.asarray(check_positive("prefill_tokens", prefill_tokens, allow_zero=True),
                      dtype=float)
    mfu = check_fraction("prefill_mfu", prefill_mfu)
    kv_dtype = kv_dtype or dtype
    if np.ndim(S) or np.ndim(P):
        raise ValueError(f"context={_brief(context)} and prompt_len={_brief(prompt_len)} must be "
                         "single numbers")
    parts = _mixed(c, acc, t, p, b, S, ride, P, dtype, kv_dtype, mfu, cuda_graphs)
    return Breakdown({k: _out(v) for k, v in parts.items()}, unit="s")


def estimate(cfg, accelerator, n_devices, *, batch, prompt_len, gen_len, dtype="bf16",
             kv_dtype=None, prefill_mfu=0.4, price_per_device_hour=None, tp=None, pp=None,
             replicas=None, prefill="chunked", chunk_tokens=DEFAULT_CHUNK_TOKENS,
             cuda_graphs=True) -> ServeEstimate:
    """Latency, throughput, memory and cost of serving ``cfg`` on ``n_devices``.

    ``batch`` sequences (over the whole deployment, split evenly over the replicas) of
    ``prompt_len`` prompt tokens decode ``gen_len`` tokens each (formulas: the module
    docstring). The layout: ``tp``, ``pp``, ``replicas`` (tp·pp·replicas = n); left as None,
    every layout the model allows is tried (:func:`scaling_lib.serving.layouts`: tp inside the
    scale-up domain, pipeline stages across nodes) and the one with the lowest time per output
    token among those that fit is kept (TTFT breaks ties) (per batch, for an array of batches; the
    smallest one when none fits). A tp the heads do not allow raises ValueError with the valid
    choices. ``prefill``: "chunked" (default; ``chunk_tokens`` per iteration, decode rides along)
    or "static" (the whole batch's prompts in one pass, then decode: the teaching baseline).
    Memory per device: weights/(tp·pp), the KV cache of :func:`scaling_lib.serving.
    kv_cache_bytes_per_device` (heads, copies beyond K, stages), and the activations of the
    tokens of one iteration (the chunk, or B·P for static batching), tokens·(2D + 2F/tp)·a.

    Args: cfg (preset name or TransformerConfig), accelerator (name or Accelerator),
    n_devices (int), batch, prompt_len, gen_len (counts), dtype / kv_dtype (weights / cache),
    prefill_mfu (fraction of peak the prefill reaches), price_per_device_hour (dollars),
    cuda_graphs (decode launched as one graph per step and stage, else kernel by kernel).

    >>> e = estimate("llama3-70b", "h100", 8, batch=1, prompt_len=1024, gen_len=256)
    >>> e.layout, round(e.tpot * 1e3, 1), e.decode_bound, e.fits
    ('tp=8 pp=1 replicas=1', 6.2, 'memory', True)
    >>> e = estimate("llama3-405b", "h100", 16, batch=1, prompt_len=1024, gen_len=256)
    >>> e.layout, e.fits   # bf16 weights: two nodes, tensor parallel inside, stages across
    ('tp=8 pp=2 replicas=1', True)

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
    prefill = check_choice("prefill", prefill, ("chunked", "static"))
    chunk = None if prefill == "static" else int(check_int("chunk_tokens", chunk_tokens,
                                                           maximum=2**24))
    kv_dtype = kv_dtype or dtype
    dtype_bytes(dtype), dtype_bytes(kv_dtype)  # unknown precisions raise here
    _, per_node = comm_link(acc, n)
    options = _layout.layouts(c, acc, n, tp=tp, pp=pp, replicas=replicas)
    explicit = tp is not None or pp is not None or replicas is not None
    runs = [_evaluate(c, acc, lay, B, P, G, dtype, kv_dtype, mfu, chunk, cuda_graphs)
            for lay in options]
    shape = np.shape(B)
    # the layout with the lowest TPOT among those that fit (and give each replica a sequence)
    lat = np.stack([np.broadcast_to(np.asarray(r["tpot"]) * (1 + 1e-9) + 1e-9 * r["ttft"], shape)
                    for r in runs])  # TPOT first, then TTFT
    fits = np.stack([np.broadcast_to(r["fits"], shape) for r in runs])
    ok = np.stack([np.broadcast_to(r["ok"] | explicit, shape) for r in runs])
    key = np.where(ok, np.where(fits, lat, 1e9 + lat), 1e18 + lat)
    pick = np.argmin(key, axis=0)

    def take(getter, dtype_=float):
        stack = np.stack([np.broadcast_to(np.asarray(getter(r), dtype=dtype_), shape)
                          for r in runs])
        got = np.asarray(np.take_along_axis(stack, pick[None, ...], axis=0)[0])
        return got if got.ndim else got[()]

    def num(name):
        return _out(take(lambda r: r[name]))

    tok = take(lambda r: r["tokens_per_s"])
    mem = Breakdown({k: _out(take(lambda r, k=k: r["mem"][k])) for k in runs[0]["mem"]},
                    unit="bytes")
    fit = take(lambda r: r["fits"], bool)
    cost = None
    if price_per_device_hour is not None:
        cost = _out(_dollars_per_million(price_per_device_hour, n, tok))
    lay_of = [(lay.tp, lay.pp, lay.replicas) for lay in options]
    ints = [take(lambda r, i=i: lay_of[next(j for j, x in enumerate(runs) if x is r)][i], int)
            for i in range(3)]
    ints = [int(x) if np.ndim(x) == 0 else x for x in ints]
    return ServeEstimate(
        ttft=num("ttft"), tpot=num("tpot"), tokens_per_s=_out(tok),
        tokens_per_s_per_device=_out(tok / n), decode_tokens_per_s=num("decode_tokens_per_s"),
        memory=mem, fits=bool(fit) if np.ndim(fit) == 0 else fit,
        cost_per_million_tokens=cost,
        prefill_bound=_str(take(lambda r: r["prefill_bound"], object)),
        decode_bound=_str(take(lambda r: r["decode_bound"], object)),
        n_devices=n, scale_up_domain=per_node, tp=ints[0], pp=ints[1], replicas=ints[2],
        tpot_mixed=num("tpot_mixed"), latency=num("latency"), prefill=prefill,
        chunk_tokens=chunk or 0)


def _str(x):
    return str(x) if np.ndim(x) == 0 else np.asarray(x, dtype=str)
