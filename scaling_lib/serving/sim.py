"""A request-level simulator of one decode server with continuous batching and a KV budget.

Requests arrive over time (Poisson at ``rate`` per second, or at given times), each with P prompt
tokens and G tokens to generate. The server runs iterations (Orca-style continuous batching, Yu
et al., OSDI 2022): at the start of an iteration it admits waiting requests, first come first
served, while their KV reservation of P + G tokens fits in ``kv_budget_tokens`` (reserved whole at
admission: no preemption, no paging); it prefills the new ones (``prefill_time`` each, which
yields their first token) and decodes one token for every sequence already running. So

    iteration time = n_new · t_prefill + t_step(b),      t_step(b) = t0 + t1·b   (b ≥ 1; 0 if b = 0)

with b the running sequences: t0 the weight read (and all-reduces) of a memory-bound step, t1 the
KV cache one sequence adds (:func:`linear_step_time` takes both from the roofline). A request
leaves after its G-th token. Closed forms it reproduces (tests): one request alone has
TTFT = t_prefill and latency t_prefill + (G - 1)·t_step(1); a saturated server with b sequences
gives b / (t_step(b) + b·t_prefill/G) tokens/s; and Little's law, L = λ·W.

See: Chapter "Serving at scale", "A request-level simulator".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import hardware, inference
from ..units import _brief, check_count, check_int, check_positive

__all__ = ["SimResult", "simulate", "linear_step_time", "saturated_tokens_per_s",
           "schedule_step"]

MAX_REQUESTS = 100_000
MAX_TOKENS = 2e5  # generated tokens a run may simulate (the loop is pure Python)


@dataclass(frozen=True)
class SimResult:
    """Per-request times (seconds, arrays in arrival order) and summary figures.

    arrival, first_token, finish: when each request arrived, got its first token, left;
    ttft = first_token - arrival; latency = finish - arrival; tokens_per_s: output tokens over
    the span from the first arrival to the last finish; mean_batch: time-averaged running
    sequences; max_batch: the largest batch the KV budget allowed.
    """

    arrival: np.ndarray
    first_token: np.ndarray
    finish: np.ndarray
    ttft: np.ndarray
    latency: np.ndarray
    tokens_per_s: float
    mean_batch: float
    max_batch: int


def linear_step_time(cfg, accelerator, n_devices, context, *, dtype="bf16", kv_dtype=None):
    """(t0, t1): a decode step of b sequences at ``context`` tokens takes about t0 + t1·b seconds.

    From :func:`scaling_lib.inference.decode_step_time` with tp = n_devices, memory-bound:
    t1 = one sequence's KV cache / (n·W_hbm), t0 = step(1) - t1 (weights and all-reduces). Good
    while the step stays memory-bound (b well below the critical batch) and the all-reduces stay
    latency-bound.

    >>> t0, t1 = linear_step_time("llama3-70b", "h100", 8, 2048)
    >>> round(t0 * 1e3, 2), round(t1 * 1e6, 1)  # ms, µs per sequence
    (9.71, 25.0)
    """
    acc = hardware.get(accelerator)
    n = check_int("n_devices", n_devices, maximum=2**24)
    S = check_count("context", context)
    if np.ndim(S):
        raise ValueError(f"context={_brief(context)} must be a single number")
    kv = inference.decode_bytes(cfg, 1, S, dtype, kv_dtype)["kv cache"]
    t1 = kv / (n * acc.hbm_bytes_per_s)
    one = inference.decode_step_time(cfg, 1, S, acc, n, dtype, kv_dtype, tp=n)
    return float(one - t1), float(t1)


def saturated_tokens_per_s(batch, gen_len, prefill_time, t0, t1):
    """Throughput of a server kept full at ``batch`` sequences: b / (t0 + t1·b + b·t_prefill/G).

    Each sequence spends G iterations in the batch, so b/G requests are admitted (and prefilled)
    per iteration on average. Broadcasts over arrays.

    >>> round(saturated_tokens_per_s(64, 256, 0.05, 0.01, 1e-4), 1)
    2214.5
    """
    b = check_positive("batch", batch)
    G = check_count("gen_len", gen_len)
    tp = check_positive("prefill_time", prefill_time, allow_zero=True)
    t0 = check_positive("t0", t0, allow_zero=True)
    t1 = check_positive("t1", t1, allow_zero=True)
    denom = np.asarray(t0 + t1 * b + b * tp / G)
    if np.any(denom <= 0):
        raise ValueError("t0, t1 and prefill_time are all 0: a step must take some time")
    out = b / denom
    return float(out) if np.ndim(out) == 0 else out


def schedule_step(left, waiting, max_batch, gen_len):
    """One iteration of the continuous-batching server: (tokens left per running request, waiting).

    ``left``: tokens each running request still has to generate; ``waiting``: requests queued.
    At the start of the iteration up to max_batch - len(left) waiting requests are admitted
    (first come, first served); the new ones are prefilled, which yields their first token
    (gen_len - 1 left); every request already running generates one token; requests with
    nothing left leave. Returns the new ``left`` list (running requests first, then the new
    ones, in order) and the number still waiting: the step :func:`simulate` repeats (tested).

    >>> schedule_step([1, 3], 5, 4, 10)  # one finishes, two join with 9 left
    ([2, 9, 9], 3)
    """
    try:
        items = [] if isinstance(left, (str, bytes)) else list(left)
    except TypeError:
        items = None
    if items is None or isinstance(left, (str, bytes)) or len(items) > MAX_REQUESTS:
        raise ValueError(f"left={_brief(left)} must be a list of at most {MAX_REQUESTS:,} whole "
                         "numbers: the tokens each running request still has to generate")
    run = [check_int("left", x, minimum=1, maximum=2**40) for x in items]
    w = check_int("waiting", waiting, minimum=0, maximum=2**40)
    cap = check_int("max_batch", max_batch, maximum=2**40)
    G = check_int("gen_len", gen_len, maximum=2**40)
    if len(run) > cap:
        raise ValueError(f"{len(run)} running requests exceed max_batch={cap}")
    new = min(w, cap - len(run))
    after = [x - 1 for x in run] + [G - 1] * new
    return [x for x in after if x > 0], w - new


def simulate(*, prompt_len, gen_len, kv_budget_tokens, prefill_time, t0, t1, rate=None,
             n_requests=None, arrival_times=None, seed=0) -> SimResult:
    """Run the continuous-batching server over a stream of requests (see the module docstring).

    Give either ``rate`` (requests/s, Poisson arrivals) with ``n_requests``, or
    ``arrival_times`` (seconds, sorted). Every request has ``prompt_len`` + ``gen_len`` tokens,
    which must fit in ``kv_budget_tokens``.

    >>> r = simulate(prompt_len=512, gen_len=4, kv_budget_tokens=4096, prefill_time=0.02,
    ...              t0=0.01, t1=0.0, arrival_times=[0.0])
    >>> round(float(r.ttft[0]), 3), round(float(r.latency[0]), 3)  # 0.02 + 3 x 0.01
    (0.02, 0.05)
    """
    P = check_count("prompt_len", prompt_len)
    G = check_count("gen_len", gen_len)
    budget = check_count("kv_budget_tokens", kv_budget_tokens)
    t_pre = check_positive("prefill_time", prefill_time, allow_zero=True)
    t0 = check_positive("t0", t0, allow_zero=True)
    t1 = check_positive("t1", t1, allow_zero=True)
    for name, v in (("prompt_len", P), ("gen_len", G), ("kv_budget_tokens", budget),
                    ("prefill_time", t_pre), ("t0", t0), ("t1", t1)):
        if np.ndim(v):
            raise ValueError(f"{name}={_brief(v)} must be a single number")
    if t_pre == 0 and t0 == 0 and t1 == 0:
        raise ValueError("prefill_time, t0 and t1 are all 0: an iteration must take some time")
    need = P + G
    if need > budget:
        raise ValueError(f"prompt_len + gen_len = {need:g} tokens exceed kv_budget_tokens="
                         f"{budget:g}: one request cannot fit; raise the budget")
    max_batch = int(budget // need)
    if (arrival_times is None) == (rate is None):
        raise ValueError("give either rate (with n_requests) or arrival_times, not both/neither")
    if arrival_times is not None:
        arr = np.asarray(check_positive("arrival_times", arrival_times, allow_zero=True),
                         dtype=float).ravel()
        if arr.size == 0 or arr.size > MAX_REQUESTS:
            raise ValueError(f"arrival_times must hold 1 to {MAX_REQUESTS:,} times, not "
                             f"{arr.size}")
        if np.any(np.diff(arr) < 0):
            raise ValueError("arrival_times must be sorted (earliest first)")
    else:
        lam = check_positive("rate", rate)
        n = check_int("n_requests", n_requests, maximum=MAX_REQUESTS) \
            if n_requests is not None else None
        if n is None or np.ndim(lam):
            raise ValueError(f"rate={_brief(rate)} needs n_requests (1 to {MAX_REQUESTS:,}) and "
                             "must be a single number")
        rng = np.random.default_rng(check_int("seed", seed, minimum=0, maximum=2**63 - 1))
        arr = np.cumsum(rng.exponential(1.0 / lam, n))
    n = arr.size
    if n * G > MAX_TOKENS:
        raise ValueError(f"{n} requests x gen_len={G:g} = {n * G:g} tokens is too large to "
                         f"simulate: keep it <= {MAX_TOKENS:g}")
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    left = np.zeros(n, dtype=np.int64)  # tokens still to generate, per running request
    running: list[int] = []
    nxt = 0  # next request not yet admitted
    now = float(arr[0])
    busy_batch_time = 0.0
    while nxt < n or running:
        if not running and nxt < n and arr[nxt] > now:
            now = float(arr[nxt])  # idle until the next arrival
        new = []
        while nxt < n and arr[nxt] <= now and len(running) + len(new) < max_batch:
            new.append(nxt)
            nxt += 1
        b = len(running)
        dt = len(new) * t_pre + (t0 + t1 * b if b else 0.0)
        now += dt
        busy_batch_time += b * dt
        for i in running:
            left[i] -= 1
        for i in new:
            first[i] = now
            left[i] = G - 1
        done = [i for i in running + new if left[i] == 0]
        for i in done:
            finish[i] = now
        running = [i for i in running + new if left[i] > 0]
    span = finish.max() - arr[0]
    return SimResult(arrival=arr, first_token=first, finish=finish, ttft=first - arr,
                     latency=finish - arr, tokens_per_s=float(n * G / span) if span > 0 else 0.0,
                     mean_batch=float(busy_batch_time / span) if span > 0 else 0.0,
                     max_batch=max_batch)
