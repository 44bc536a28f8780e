"""A request-level simulator of a decode server with continuous batching and a KV budget.

Requests arrive over time (Poisson at ``rate`` per second, or at given times), each with P prompt
tokens and G tokens to generate (one length for all, or one per request). The server runs
iterations (Orca-style continuous batching, Yu et al., OSDI 2022): at the start of an iteration it
admits waiting requests, first come first served, while the KV cache has room; it prefills the new
ones (``prefill_time`` each, scaled by the prompt's share not found in the prefix cache, which
yields their first token) and decodes one token for every sequence already running:

    iteration time = Σ_new t_prefill·(1 - h) + t_step(b),     t_step(b) = t0 + t1·b (0 if b = 0)

with b the running sequences (t0: weights, all-reduces and launch of a memory-bound step; t1: one
sequence's KV read; :func:`linear_step_time` takes both from the decode step's one home). KV
policies: "reserve" (P + G tokens reserved at admission, never preempted: the first engines) or
"paged" (vLLM: blocks allocated as sequences grow; when the cache runs out the newest running
request is preempted, its cache dropped and recomputed on readmission; Kwon et al., SOSP 2023),
which counts preemptions. With ``chunk_tokens`` (chunked prefill, Sarathi-Serve) the prompts go
through in chunks that ride in the decode iterations, each costing max(t_step(b), chunk time).
Disaggregated serving (DistServe: Zhong et al., OSDI 2024) runs the
prefills on separate servers (FIFO) whose caches travel to the decode server in
``kv_transfer_time`` (:func:`kv_transfer_time`, priced on the link): the first token comes from the
prefill server, decode steps carry no prefill.

A request leaves after its G-th token. Reported: the time to first token (TTFT), the time per
output token after the first (TPOT = (finish - first token)/(G - 1)) and the end-to-end latency,
each with p50/p90/p99 (:meth:`SimResult.percentiles`), and the goodput under latency targets: the
requests per second that meet both the TTFT and TPOT targets (DistServe's measure).
The loop jumps from event to event (an arrival that can join, a finish, a full cache), so
10,000 requests take about a second (``benchmarks/serving_sim.py``).

Closed forms it reproduces (tests): one request alone has TTFT = t_prefill and latency
t_prefill + (G - 1)·t_step(1); a saturated server with b sequences gives b / (t_step(b) +
b·t_prefill/G) tokens/s; and Little's law, L = λ·W.

See: Chapter "Serving at scale", "A request-level simulator".
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

import numpy as np

from .. import collectives, hardware, inference, models, transformer
from ..units import _brief, check_choice, check_count, check_fraction, check_int, check_positive

__all__ = ["SimResult", "simulate", "linear_step_time", "saturated_tokens_per_s",
           "schedule_step", "kv_transfer_time"]

MAX_REQUESTS = 100_000
MAX_TOKENS = 1e8  # generated tokens a run may simulate


@dataclass(frozen=True)
class SimResult:
    """Per-request times (seconds, arrays in arrival order) and summary figures.

    arrival, first_token, finish: when each request arrived, got its first token, left;
    ttft = first_token - arrival; tpot = (finish - first_token) / (G - 1) (nan where G = 1);
    latency = finish - arrival; tokens_per_s: output tokens over the span from the first
    arrival to the last finish; mean_batch: time-averaged running sequences; max_batch: the
    largest batch allowed; preemptions: requests evicted when the paged cache ran out;
    slo_met: per request, TTFT and TPOT within the targets (all True without targets);
    goodput: requests/s that met them over the span.
    """

    arrival: np.ndarray
    first_token: np.ndarray
    finish: np.ndarray
    ttft: np.ndarray
    latency: np.ndarray
    tokens_per_s: float
    mean_batch: float
    max_batch: int
    tpot: np.ndarray = field(default_factory=lambda: np.array([]))
    preemptions: int = 0
    slo_met: np.ndarray = field(default_factory=lambda: np.array([], dtype=bool))
    goodput: float = 0.0

    def percentiles(self, which="ttft", q=(50, 90, 99)) -> dict:
        """{"p50": ..., "p90": ..., "p99": ...} seconds of ``which`` ("ttft", "tpot",
        "latency") over the requests (nan TPOTs of one-token requests left out)."""
        which = check_choice("which", which, ("ttft", "tpot", "latency"))
        x = np.asarray(getattr(self, which), dtype=float)
        x = x[~np.isnan(x)]
        return {f"p{int(v)}": (float(np.percentile(x, v)) if x.size else float("nan"))
                for v in q}

    @property
    def slo_attainment(self) -> float:
        """Fraction of requests that met both latency targets."""
        return float(np.mean(self.slo_met)) if self.slo_met.size else 1.0


def kv_transfer_time(cfg, prompt_len, accelerator="h100", *, kv_dtype="bf16", link=None):
    """Seconds to move one request's KV cache from a prefill server to a decode server:
    latency + kv_cache(1, P) / W, one point-to-point send
    (:func:`scaling_lib.collectives.send_recv_time`) on ``link`` (default: the scale-out
    network of ``accelerator``'s cluster, one NIC per GPU, as when prefill and decode run on
    different nodes). Broadcasts over prompt_len.

    >>> round(kv_transfer_time("llama3-70b", 4096) * 1e3, 1)  # 1.34 GB over a 50 GB/s NIC
    26.8
    """
    c = models.get(cfg)
    P = check_count("prompt_len", prompt_len)
    if link is None:
        link = hardware.cluster(accelerator, 2 * hardware.cluster(accelerator, 2**16)
                                .devices_per_node).inter_node
    if not isinstance(link, hardware.Link):
        raise ValueError(f"link={_brief(link)} must be a hardware.Link or None")
    return collectives.send_recv_time(transformer.kv_cache_bytes(c, 1, P, kv_dtype),
                                      link.bytes_per_s, link.latency)


def linear_step_time(cfg, accelerator, n_devices, context, *, dtype="bf16", kv_dtype=None):
    """(t0, t1): a decode step of b sequences at ``context`` tokens takes about t0 + t1·b seconds.

    From :func:`scaling_lib.inference.decode_step_time` with tp = n_devices (and its launch floor),
    memory-bound:
    t1 = one sequence's KV cache / (n·W_hbm), t0 = step(1) - t1 (weights and all-reduces). Good
    while the step stays memory-bound (b well below the critical batch) and the all-reduces stay
    latency-bound.

    >>> t0, t1 = linear_step_time("llama3-70b", "h100", 8, 2048)
    >>> round(t0 * 1e3, 2), round(t1 * 1e6, 1)  # ms, µs per sequence
    (6.16, 25.0)
    """
    acc = hardware.get(accelerator)
    n = check_int("n_devices", n_devices, maximum=2**24)
    S = check_count("context", context)
    if np.ndim(S):
        raise ValueError(f"context={_brief(context)} must be a single number")
    kv = inference.decode_bytes(cfg, 1, S, dtype, kv_dtype)["kv cache"]
    t1 = kv / (n * acc.hbm_bytes_per_s)
    one = inference.decode_step_time(cfg, 1, S, acc, n, dtype, kv_dtype, tp=n, launch=True)
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


def _per_request(name, value, n):
    v = np.asarray(check_count(name, value), dtype=np.int64)
    if v.ndim == 0:
        return np.full(n, int(v))
    if v.shape != (n,):
        raise ValueError(f"{name}={_brief(value)} must be one number or one per request ({n})")
    return v


def simulate(*, prompt_len, gen_len, kv_budget_tokens, prefill_time, t0, t1, rate=None,
             n_requests=None, arrival_times=None, seed=0, kv_policy="reserve", max_batch=None,
             prefix_hit_rate=0.0, slo_ttft=None, slo_tpot=None, disaggregated=False,
             prefill_servers=1, kv_transfer_time=0.0, chunk_tokens=None) -> SimResult:
    """Run the continuous-batching server over a stream of requests (see the module docstring).

    Give either ``rate`` (requests/s, Poisson arrivals) with ``n_requests``, or
    ``arrival_times`` (seconds, sorted). ``prompt_len`` and ``gen_len``: one number, or one per
    request; ``prefill_time``: seconds to prefill one prompt of ``prompt_len`` (a per-request
    array, or scaled by P_i/P for per-request lengths when given as one number for the first
    request's length). ``kv_policy``: "reserve" or "paged" (preemption, counted);
    ``max_batch``: the most running sequences (default: what the budget allows under
    "reserve", 256 under "paged", vLLM's default max_num_seqs); ``prefix_hit_rate``: the share
    of each prompt found in the prefix cache (its prefill is skipped); ``slo_ttft`` /
    ``slo_tpot``: latency targets (seconds) for the goodput; ``disaggregated``: prefill on
    ``prefill_servers`` separate servers, the cache moved in ``kv_transfer_time`` seconds.
    ``chunk_tokens``: chunked prefill (Sarathi-Serve, Agrawal et al., OSDI 2024; one server,
    "reserve" policy): each iteration carries at most that many prompt tokens of the admitted
    requests, first come first served, next to the running batch's decode step, and costs
    max(t_step(b), chunk tokens x t_prefill/P): the chunk's FLOPs hide under the memory-bound
    decode step until they exceed it (the detailed iteration is
    :func:`scaling_lib.serving.estimator.mixed_step_parts`). A request's first token comes at
    the end of the iteration that finishes its prompt.

    >>> r = simulate(prompt_len=512, gen_len=4, kv_budget_tokens=4096, prefill_time=0.02,
    ...              t0=0.01, t1=0.0, arrival_times=[0.0])
    >>> round(float(r.ttft[0]), 3), round(float(r.latency[0]), 3)  # 0.02 + 3 x 0.01
    (0.02, 0.05)
    """
    budget = check_count("kv_budget_tokens", kv_budget_tokens)
    t0 = check_positive("t0", t0, allow_zero=True)
    t1 = check_positive("t1", t1, allow_zero=True)
    hit = check_fraction("prefix_hit_rate", prefix_hit_rate, allow_zero=True)
    policy = check_choice("kv_policy", kv_policy, ("reserve", "paged"))
    t_xfer = check_positive("kv_transfer_time", kv_transfer_time, allow_zero=True)
    for name, v in (("kv_budget_tokens", budget), ("t0", t0), ("t1", t1),
                    ("prefix_hit_rate", hit), ("kv_transfer_time", t_xfer)):
        if np.ndim(v):
            raise ValueError(f"{name}={_brief(v)} must be a single number")
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
    P = _per_request("prompt_len", prompt_len, n)
    G = _per_request("gen_len", gen_len, n)
    pre = np.asarray(check_positive("prefill_time", prefill_time, allow_zero=True), dtype=float)
    if pre.ndim == 0:
        pre = pre * P / P[0]  # one prompt's prefill, scaled to each prompt's length
    elif pre.shape != (n,):
        raise ValueError(f"prefill_time={_brief(prefill_time)} must be one number or one per "
                         f"request ({n})")
    pre = pre * (1 - hit)
    if np.all(pre == 0) and t0 == 0 and t1 == 0:
        raise ValueError("prefill_time, t0 and t1 are all 0: an iteration must take some time")
    need = P + G
    if need.max() > budget:
        raise ValueError(f"prompt_len + gen_len = {need.max():g} tokens exceed kv_budget_tokens="
                         f"{budget:g}: one request cannot fit; raise the budget")
    if G.sum() > MAX_TOKENS:
        raise ValueError(f"{n} requests generating {G.sum():g} tokens is too large to "
                         f"simulate: keep it <= {MAX_TOKENS:g}")
    chunk = None
    if chunk_tokens is not None:
        chunk = check_int("chunk_tokens", chunk_tokens, maximum=2**24)
        if disaggregated or policy != "reserve":
            raise ValueError(f"chunk_tokens={chunk} works on one server with kv_policy="
                             "'reserve'; choose disaggregated=False and kv_policy='reserve', or "
                             "chunk_tokens=None")
    if max_batch is None:
        cap = int(budget // need.max()) if policy == "reserve" else 256
    else:
        cap = check_int("max_batch", max_batch, maximum=2**24)
    first = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    join = arr.copy()  # when a request may join the decode server
    if disaggregated:
        servers = check_int("prefill_servers", prefill_servers, maximum=4096)
        free = np.full(servers, float(arr[0]))
        for i in range(n):  # FIFO over the prefill servers: the first free one takes it
            k = int(np.argmin(free))
            done = max(free[k], arr[i]) + pre[i]
            free[k] = done
            first[i] = done
        join = first + t_xfer
        order = np.argsort(join, kind="stable")
        pre_decode = np.zeros(n)  # decode steps carry no prefill
    else:
        order = np.arange(n)
        pre_decode = pre
    left = G.copy()            # tokens still to generate
    cached = np.zeros(n, dtype=np.int64)  # tokens held in the KV cache (paged)
    done_tok = np.zeros(n, dtype=np.int64)  # tokens generated so far (kept on preemption)
    if disaggregated:  # the prefill server made the first token
        left -= 1
        done_tok += 1
    run = np.zeros(0, dtype=np.int64)  # running requests, in admission order
    waiting: deque = deque()
    prefilling: deque = deque()  # chunked: admitted, prompt not yet through
    rem_tok = P.astype(float) * (1 - hit)  # chunked: prompt tokens still to prefill
    t_tok = np.where(rem_tok > 0, pre / np.maximum(rem_tok, 1e-30), 0.0)
    nxt = 0
    now = float(join[order[0]])
    busy = 0.0
    used = 0
    preempted = 0
    was_preempted = np.zeros(n, dtype=bool)
    jt = join[order]
    while nxt < n or waiting or run.size or prefilling:
        while nxt < n and jt[nxt] <= now:
            waiting.append(int(order[nxt]))
            nxt += 1
        if not run.size and not waiting and not prefilling:
            now = float(jt[nxt])
            continue
        new = []
        while waiting and run.size + len(prefilling) + len(new) < cap:
            i = waiting[0]
            want = int(need[i]) if policy == "reserve" else int(P[i] + done_tok[i] + 1)
            if used + want > budget:
                break
            waiting.popleft()
            new.append(i)
            used += want
            cached[i] = want
        b = run.size
        step = t0 + t1 * b if b else 0.0
        if chunk is not None and (new or prefilling):
            prefilling.extend(new)
            room, t_chunk, through = float(chunk), 0.0, []
            for i in prefilling:
                take = min(room, rem_tok[i])
                rem_tok[i] -= take
                room -= take
                t_chunk += take * t_tok[i]
                if rem_tok[i] <= 0:
                    through.append(i)
                if room <= 0:
                    break
            for _ in through:
                prefilling.popleft()
            dt = max(step, t_chunk)
            if dt <= 0 and not through:
                dt = 1e-9
            now += dt
            busy += b * dt
            if b:
                left[run] -= 1
                done_tok[run] += 1
            if through:
                idx = np.array(through, dtype=np.int64)
                first[idx] = now
                left[idx] -= 1
                done_tok[idx] += 1
                run = np.concatenate([run, idx])
        elif new:
            idx = np.array(new, dtype=np.int64)
            # a new request's prefill makes its first token; a preempted one recomputes
            redo = was_preempted[idx]
            dt = float(np.sum(np.where(redo, pre[idx] * (P[idx] + done_tok[idx]) / P[idx],
                                       pre_decode[idx]))) + step
            now += dt
            busy += b * dt
            if b:
                left[run] -= 1
                done_tok[run] += 1
                if policy == "paged":
                    cached[run] += 1
                    used += b
            fresh = idx[np.isnan(first[idx])]
            first[fresh] = now
            gen_now = idx[~redo]
            if not disaggregated:
                left[gen_now] -= 1
                done_tok[gen_now] += 1
            was_preempted[idx] = False
            run = np.concatenate([run, idx])
        else:
            k = int(left[run].min())
            if nxt < n and not waiting and run.size < cap and step > 0:
                k = min(k, max(1, int(np.ceil((jt[nxt] - now) / step))))
            if policy == "paged":
                room = (budget - used) // b
                if room < 1:
                    # the cache is full: preempt the newest running request (vLLM's recompute)
                    j = int(run[-1])
                    run = run[:-1]
                    used -= int(cached[j])
                    cached[j] = 0
                    waiting.appendleft(j)
                    was_preempted[j] = True
                    preempted += 1
                    continue
                k = min(k, int(room))
            dt = k * step
            now += dt
            busy += b * dt
            left[run] -= k
            done_tok[run] += k
            if policy == "paged":
                cached[run] += k
                used += k * b
        gone = run[left[run] <= 0]
        if gone.size:
            finish[gone] = now
            used -= int(cached[gone].sum())
            cached[gone] = 0
            run = run[left[run] > 0]
    span = finish.max() - arr[0]
    ttft = first - arr
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(G > 1, (finish - first) / np.maximum(G - 1, 1), np.nan)
    ok = np.ones(n, dtype=bool)
    if slo_ttft is not None:
        ok &= ttft <= check_positive("slo_ttft", slo_ttft)
    if slo_tpot is not None:
        ok &= ~(tpot > check_positive("slo_tpot", slo_tpot))
    return SimResult(arrival=arr, first_token=first, finish=finish, ttft=ttft,
                     latency=finish - arr, tokens_per_s=float(G.sum() / span) if span > 0 else 0.0,
                     mean_batch=float(busy / span) if span > 0 else 0.0, max_batch=cap,
                     tpot=tpot, preemptions=preempted, slo_met=ok,
                     goodput=float(ok.sum() / span) if span > 0 else 0.0)
