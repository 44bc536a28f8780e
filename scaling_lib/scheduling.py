"""Sharing a cluster: several training jobs, one pool of GPUs, three ways to divide it.

A training job's throughput does not grow in proportion to its GPUs: past some size the batch
per GPU shrinks, communication stops hiding behind compute and the pipeline bubble grows. The
planner (:func:`scaling_lib.planner.search`) gives each job's **scaling curve**: the tokens/s of
its best plan at each allocation. A scheduler that knows those curves can put each GPU where it
buys the most work; one that does not leaves throughput on the table.

- :class:`Job`: a model, a token budget, a global batch and sequence length, an arrival time.
- :func:`scaling_curve`: the job's best plan and tokens/s at each allowed allocation (cached).
  :func:`allocation_sizes` are the allowed allocations: whole nodes, in powers of two.
- :func:`simulate`: a discrete-event simulation of the cluster under a scheduler (``SCHEDULERS``):

  * ``"fcfs"``: first come, first served with fixed allocations. Each job asks for ``request``
    GPUs (by default the allocation at which it runs fastest alone) and waits, in arrival order,
    until that many are free; it keeps them to the end.
  * ``"proportional"``: a fixed rule. Whenever a job arrives or finishes, every job present gets
    GPUs in proportion to its parameter count (rounded down to an allowed allocation, at least
    its smallest feasible one; left-over GPUs go to the oldest jobs that can use them).
  * ``"guided"``: the planner-guided scheduler. Whenever a job arrives or finishes it starts
    every job at its smallest feasible allocation (oldest first, while GPUs last) and then hands
    out the remaining GPUs greedily, each time to the (job, larger allocation) with the highest
    marginal model FLOP/s per added GPU. A running job is only grown when the time it saves
    exceeds the re-plan cost.
  * ``"srpt"``: curve-blind preemptive shortest-remaining-processing-time first. Whenever a job
    arrives or finishes, the jobs present are ranked by remaining model FLOPs (fewest first) and
    each in turn gets the largest allocation it can run on that fits in the free GPUs (the whole
    cluster for the first, when it can use it); the others wait, preempted if they were running.
    It reads the curves only to know which sizes a job fits on, never their shape: the baseline
    that shows how much of the guided scheduler's gain is remaining-work weighting alone.

  Changing a running job's allocation costs ``replan_cost`` seconds (checkpoint, restart,
  re-shard) during which it holds its new GPUs and makes no progress; a job's first start is free.

:class:`Schedule` holds the timeline (:class:`Segment` per job and interval), each job's
completion time, the average job completion time (finish minus arrival), the makespan and the
cluster utilisation: GPU-hours doing model FLOPs over GPU-hours available until the makespan.

See: the chapter "Sharing a cluster".
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from . import hardware, models, transformer
from .units import MAX_DEVICES, _brief, check_choice, check_int, check_positive

SCHEDULERS = ("fcfs", "proportional", "guided", "srpt")
OBJECTIVES = ("completion", "throughput")
REPLAN_COST = 600.0  # s: save a checkpoint, restart on new GPUs, re-shard (an assumption; vary it)
_DONE = 1e-9  # a job whose remaining tokens fall below this fraction of its budget has finished


@dataclass(frozen=True)
class Job:
    """One training job: ``model`` (a TransformerConfig or a ``models.get`` name) trained on
    ``tokens`` tokens in global batches of ``global_batch`` sequences of ``seq_len`` tokens,
    arriving ``arrival`` seconds after the start. ``request`` is the GPU count it asks for under
    first-come-first-served (None: the allocation at which it runs fastest alone).

    >>> Job("a", "llama3-8b", 1e12).model.L
    32
    >>> Job("a", "llama3-8b", -1)
    Traceback (most recent call last):
    ...
    ValueError: tokens=-1 is not allowed: tokens must be finite and > 0
    """

    name: str
    model: object
    tokens: float
    global_batch: int = 1024
    seq_len: int = 4096
    arrival: float = 0.0
    request: int | None = None

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"name={_brief(self.name)} must be a non-empty string")
        cfg = self.model
        if isinstance(cfg, str):
            cfg = models.get(cfg)
        elif not isinstance(cfg, models.TransformerConfig):
            raise ValueError(f"model={_brief(cfg)} must be a TransformerConfig or one of "
                             f"{', '.join(models.names())}")
        object.__setattr__(self, "model", cfg)
        for name in ("tokens", "arrival"):
            if np.ndim(getattr(self, name)) != 0:
                raise ValueError(f"{name}={_brief(getattr(self, name))} must be one number")
        object.__setattr__(self, "tokens", float(check_positive("tokens", self.tokens)))
        object.__setattr__(self, "global_batch", check_int("global_batch", self.global_batch))
        object.__setattr__(self, "seq_len", check_int("seq_len", self.seq_len))
        object.__setattr__(self, "arrival",
                           float(check_positive("arrival", self.arrival, allow_zero=True)))
        if self.request is not None:
            object.__setattr__(self, "request", check_int("request", self.request))

    @property
    def flops_per_token(self) -> float:
        """Model FLOPs per trained token (forward and backward, no recomputation)."""
        return float(transformer.flops_per_token(self.model, self.seq_len))


def allocation_sizes(n_gpus, gpus_per_node=8) -> np.ndarray:
    """Allowed allocations: whole nodes in powers of two, up to ``n_gpus``.

    >>> allocation_sizes(1024).tolist()
    [8, 16, 32, 64, 128, 256, 512, 1024]
    >>> allocation_sizes(4, gpus_per_node=8).tolist()
    [4]
    """
    n_gpus = check_int("n_gpus", n_gpus)
    node = min(check_int("gpus_per_node", gpus_per_node), n_gpus)
    out, s = [], node
    while s <= n_gpus:
        out.append(s)
        s *= 2
    return np.array(out, dtype=np.int64)


@dataclass(frozen=True)
class ScalingCurve:
    """A job's best throughput at each allowed allocation.

    ``sizes`` (GPUs, increasing), ``tokens_per_s`` (0 where no plan fits), ``plans`` (the best
    plan at each size, or None), ``flops_per_token`` (model FLOPs) and ``peak_flops_per_s`` (per
    GPU, for utilisation).
    """

    sizes: np.ndarray
    tokens_per_s: np.ndarray
    flops_per_token: float
    peak_flops_per_s: float
    plans: tuple = field(default=(), compare=False)

    def __post_init__(self):
        try:
            raw = np.asarray(self.sizes, dtype=float)
            thr = np.asarray(self.tokens_per_s, dtype=float)
        except (TypeError, ValueError, OverflowError):
            raw = thr = np.array([])
        if raw.ndim != 1 or not np.all(np.isfinite(raw)) or np.any(raw != np.round(raw)) \
                or np.any(raw > MAX_DEVICES):
            raise ValueError(f"sizes={_brief(self.sizes)} must be a 1-D list of GPU counts "
                             f"(whole numbers up to {MAX_DEVICES:,})")
        sizes = raw.astype(np.int64)
        if sizes.ndim != 1 or sizes.size == 0 or thr.shape != sizes.shape:
            raise ValueError(f"sizes={_brief(self.sizes)} and tokens_per_s="
                             f"{_brief(self.tokens_per_s)} must be 1-D arrays of equal length")
        if np.any(np.diff(sizes) <= 0) or sizes[0] < 1:
            raise ValueError(f"sizes={sizes.tolist()} must be positive and increasing")
        if not np.all(np.isfinite(thr)) or np.any(thr < 0):
            raise ValueError(f"tokens_per_s={_brief(thr)} must be finite and >= 0")
        object.__setattr__(self, "sizes", sizes)
        object.__setattr__(self, "tokens_per_s", thr)
        for name in ("flops_per_token", "peak_flops_per_s"):
            if np.ndim(getattr(self, name)) != 0:
                raise ValueError(f"{name}={_brief(getattr(self, name))} must be one number")
            object.__setattr__(self, name, float(check_positive(name, getattr(self, name))))

    def throughput(self, n) -> float:
        """Tokens/s on ``n`` GPUs: the best allowed allocation not above n (0 if none fits)."""
        n = check_int("n", n, minimum=0)
        i = np.searchsorted(self.sizes, n, side="right") - 1
        return float(self.tokens_per_s[:i + 1].max()) if i >= 0 else 0.0

    def min_size(self) -> int | None:
        """The smallest allocation with a feasible plan (None if none fits)."""
        ok = np.flatnonzero(self.tokens_per_s > 0)
        return int(self.sizes[ok[0]]) if ok.size else None

    def best_size(self, max_gpus=None) -> int | None:
        """The allocation (at most ``max_gpus``) with the highest tokens/s; the smallest on ties."""
        mask = self.tokens_per_s > 0
        if max_gpus is not None:
            mask &= self.sizes <= check_int("max_gpus", max_gpus)
        if not mask.any():
            return None
        thr = np.where(mask, self.tokens_per_s, -1.0)
        return int(self.sizes[int(np.argmax(thr))])

    def mfu(self) -> np.ndarray:
        """Model FLOPs utilisation at each size (0 where nothing fits)."""
        return self.tokens_per_s * self.flops_per_token / (self.sizes * self.peak_flops_per_s)


@functools.lru_cache(maxsize=512)
def _best(cfg, accelerator, n, gpus_per_node, global_batch, seq_len):
    from . import planner

    cluster = hardware.cluster(accelerator, int(n), devices_per_node=min(int(n), gpus_per_node))
    try:
        plans = planner.search(cfg, cluster, global_batch, seq_len, top=1)
    except ValueError:  # e.g. no degree divides the batch: nothing runs at this size
        return 0.0, None
    if not plans:
        return 0.0, None
    return float(plans[0].tokens_per_s), plans[0]


def scaling_curve(job: Job, accelerator, sizes=None, *, n_gpus=None, gpus_per_node=8
                  ) -> ScalingCurve:
    """The planner's best tokens/s for ``job`` at each allocation in ``sizes``.

    ``sizes`` defaults to :func:`allocation_sizes` (n_gpus, gpus_per_node). Each point is a full
    :func:`scaling_lib.planner.search` on a cluster of that many GPUs, cached per process.
    """
    if not isinstance(job, Job):
        raise ValueError(f"job={_brief(job)} must be a scheduling.Job")
    acc = hardware.get(accelerator)
    if sizes is None:
        if n_gpus is None:
            raise ValueError("give sizes (GPU counts) or n_gpus (the cluster size)")
        sizes = allocation_sizes(n_gpus, gpus_per_node)
    sizes = np.asarray(sizes, dtype=np.int64)
    gpus_per_node = check_int("gpus_per_node", gpus_per_node)
    best = [_best(job.model, acc.name, int(n), gpus_per_node, job.global_batch, job.seq_len)
            for n in sizes]
    return ScalingCurve(sizes, [b[0] for b in best], job.flops_per_token,
                        acc.peak_flops_per_s("bf16"), tuple(b[1] for b in best))


@dataclass(frozen=True)
class Segment:
    """``job`` held ``gpus`` GPUs from ``start`` to ``end`` (s); ``restarting`` while it paid
    the re-plan cost (no progress)."""

    job: str
    start: float
    end: float
    gpus: int
    restarting: bool = False


@dataclass(frozen=True)
class Schedule:
    """The outcome of :func:`simulate`: the timeline and the figures that judge it."""

    scheduler: str
    n_gpus: int
    segments: tuple
    completion: dict  # job name -> finish time (s)
    arrival: dict  # job name -> arrival time (s)
    useful_flops: float  # model FLOPs of every job's token budget
    replans: int = 0  # allocation changes of jobs already running (each paid the re-plan cost)

    @property
    def makespan(self) -> float:
        """Time from the first arrival to the last completion (s)."""
        return max(self.completion.values()) - min(self.arrival.values())

    @property
    def average_completion(self) -> float:
        """Mean job completion time (finish minus arrival), s."""
        return float(np.mean([self.completion[j] - self.arrival[j] for j in self.completion]))

    def utilization(self, peak_flops_per_s) -> float:
        """Model FLOPs done over what every GPU could do at peak until the makespan."""
        return self.useful_flops / (self.n_gpus * peak_flops_per_s * self.makespan)

    def gpu_seconds(self) -> float:
        """GPU-seconds allocated to jobs (restarts included)."""
        return float(sum((s.end - s.start) * s.gpus for s in self.segments))


def _check_inputs(jobs, curves, n_gpus, scheduler, replan_cost):
    if isinstance(jobs, Job) or not hasattr(jobs, "__iter__"):
        raise ValueError(f"jobs={_brief(jobs)} must be a list of scheduling.Job")
    jobs = list(jobs)
    if not jobs or any(not isinstance(j, Job) for j in jobs):
        raise ValueError(f"jobs={_brief(jobs)} must be a non-empty list of scheduling.Job")
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise ValueError(f"job names must be unique, got {names}")
    if not isinstance(curves, dict) or set(curves) != set(names):
        raise ValueError(f"curves must be a dict with one ScalingCurve per job name {names}")
    if any(not isinstance(c, ScalingCurve) for c in curves.values()):
        raise ValueError("every value of curves must be a ScalingCurve")
    n_gpus = check_int("n_gpus", n_gpus)
    check_choice("scheduler", scheduler, SCHEDULERS)
    replan_cost = float(check_positive("replan_cost", replan_cost, allow_zero=True))
    for j in jobs:
        c = curves[j.name]
        lo = c.min_size()
        if lo is None or lo > n_gpus:
            raise ValueError(f"job {j.name!r} has no feasible plan on at most {n_gpus:,} GPUs "
                             f"(its curve's sizes: {c.sizes.tolist()})")
        if j.request is not None and (j.request not in c.sizes or c.throughput(j.request) == 0
                                      or j.request > n_gpus):
            ok = [int(s) for s, t in zip(c.sizes, c.tokens_per_s) if t > 0 and s <= n_gpus]
            raise ValueError(f"job {j.name!r}: request={j.request} is not a feasible allocation; "
                             f"valid choices: {ok}")
    return jobs, n_gpus, replan_cost


def _fcfs(jobs, curves, n_gpus, current, *_, **__):
    """Running jobs keep their GPUs; waiting ones start in arrival order, no overtaking."""
    alloc = dict(current)
    free = n_gpus - sum(alloc.values())
    for j in jobs:  # jobs present, in arrival order
        if alloc.get(j.name, 0):
            continue
        want = j.request or curves[j.name].best_size(n_gpus)
        if want > free:
            break  # head-of-line blocking: nobody overtakes the oldest waiting job
        alloc[j.name] = want
        free -= want
    return alloc


def _admit_minimum(jobs, curves, n_gpus):
    alloc, free = {}, n_gpus
    for j in jobs:
        lo = curves[j.name].min_size()
        if lo <= free:
            alloc[j.name] = lo
            free -= lo
    return alloc, free


def _proportional(jobs, curves, n_gpus, *_, **__):
    """GPUs in proportion to parameter count, rounded down to an allowed size."""
    alloc, free = _admit_minimum(jobs, curves, n_gpus)
    admitted = [j for j in jobs if j.name in alloc]
    weight = {j.name: float(transformer.n_params(j.model)) for j in admitted}
    total = sum(weight.values())
    for j in admitted:
        c = curves[j.name]
        share = n_gpus * weight[j.name] / total
        fit = c.sizes[(c.sizes <= share) & (c.sizes - alloc[j.name] <= free)]
        if fit.size and fit[-1] > alloc[j.name]:
            free -= int(fit[-1]) - alloc[j.name]
            alloc[j.name] = int(fit[-1])
    for j in admitted:  # left-overs: oldest first, next size up while it fits
        c = curves[j.name]
        while True:
            up = c.sizes[c.sizes > alloc[j.name]]
            if not up.size or up[0] - alloc[j.name] > free:
                break
            free -= int(up[0]) - alloc[j.name]
            alloc[j.name] = int(up[0])
    return alloc


def _srpt(jobs, curves, n_gpus, current, remaining, *_, **__):
    """Fewest remaining model FLOPs first, each the largest feasible allocation that fits."""
    alloc, free = {}, n_gpus
    order = sorted(jobs, key=lambda j: remaining[j.name] * curves[j.name].flops_per_token)
    for j in order:
        c = curves[j.name]
        fit = c.sizes[(c.sizes <= free) & (c.tokens_per_s > 0)]
        if fit.size:
            alloc[j.name] = int(fit[-1])
            free -= int(fit[-1])
    return alloc


def grant_values(curves: dict, alloc: dict, free, weights: dict | None = None) -> dict:
    """For each job of ``alloc``: (the most added model FLOP/s per added GPU over its grants that
    fit in ``free`` GPUs, the size that gives it); (0.0, None) when no grant adds throughput.

    ``alloc`` maps the jobs that may grow to their current GPUs; ``weights`` (default 1 for every
    job) multiplies each job's gain: the guided scheduler's "completion" objective weighs a job by
    one over its remaining model FLOPs, so the gain becomes the rate its remaining work shrinks.
    Ties go to the smaller size.

    >>> c = ScalingCurve([8, 16, 32], [1e5, 1.6e5, 1.8e5], 6e9, 1e15)
    >>> grant_values({"a": c}, {"a": 8}, 24)
    {'a': (45000000000000.0, 16)}
    """
    free = check_int("free", free, minimum=0)
    if not isinstance(curves, dict) or not isinstance(alloc, dict) or not set(alloc) <= set(curves):
        raise ValueError(f"curves={_brief(curves)} must be a dict of ScalingCurve and "
                         f"alloc={_brief(alloc)} a dict of GPU counts for some of its keys")
    for name, n in alloc.items():
        _check_curve(curves[name])
        check_int(f"alloc[{name!r}]", n, minimum=0)
    if weights is not None and (not isinstance(weights, dict) or not set(alloc) <= set(weights)):
        raise ValueError(f"weights={_brief(weights)} must be a dict with a weight per job of alloc")
    out = {}
    for name, n in alloc.items():
        w = 1.0 if weights is None else float(check_positive(f"weights[{name!r}]", weights[name]))
        c = curves[name]
        up = c.sizes[(c.sizes > n) & (c.sizes - n <= free)]
        out[name] = (0.0, None)
        if up.size:
            gain = (np.array([c.throughput(s) for s in up]) - c.throughput(n)) * c.flops_per_token
            per_gpu = w * gain / (up - n)
            k = int(np.argmax(per_gpu))
            if per_gpu[k] > 0:
                out[name] = (float(per_gpu[k]), int(up[k]))
    return out


def next_grant(curves: dict, alloc: dict, free, weights: dict | None = None) -> tuple | None:
    """The guided scheduler's next step: (job, new size) with the most added model FLOP/s per
    added GPU among the grants that fit in ``free`` GPUs (:func:`grant_values`), or None when no
    grant adds throughput. Ties go to the job listed first.

    >>> c = {"a": ScalingCurve([8, 16, 32], [1e5, 1.6e5, 1.8e5], 6e9, 1e15),
    ...      "b": ScalingCurve([8, 16, 32], [1e5, 1.9e5, 2.6e5], 6e9, 1e15)}
    >>> next_grant(c, {"a": 8, "b": 8}, 16)
    ('b', 16)
    >>> next_grant(c, {"a": 8, "b": 8}, 0) is None
    True
    """
    best = None
    for name, (value, size) in grant_values(curves, alloc, free, weights).items():
        if size is not None and (best is None or value > best[0]):
            best = (value, name, size)
    return None if best is None else best[1:]


def _greedy(jobs, curves, n_gpus, pinned, weights=None):
    """Smallest feasible allocations first, then GPUs to the best marginal FLOP/s per GPU."""
    alloc, free = {}, n_gpus
    for j in jobs:
        lo = pinned.get(j.name) or curves[j.name].min_size()
        if lo <= free:
            alloc[j.name] = lo
            free -= lo
    while True:
        grant = next_grant(curves, {k: v for k, v in alloc.items() if k not in pinned}, free,
                           weights)
        if grant is None:
            return alloc
        name, size = grant
        free -= size - alloc[name]
        alloc[name] = size


def _guided_greedy(jobs, curves, n_gpus, current, remaining, replan_cost, objective, pinned=None):
    """The marginal-throughput greedy, keeping a running job's GPUs when growing it won't pay."""
    weights = None
    if objective == "completion":
        weights = {j.name: 1.0 / (remaining[j.name] * curves[j.name].flops_per_token)
                   for j in jobs}
    pinned = dict(pinned or {})
    for _ in range(len(jobs) + 1):
        alloc = _greedy(jobs, curves, n_gpus, pinned, weights)
        unpaid = []
        for j in jobs:
            old, new = current.get(j.name, 0), alloc.get(j.name, 0)
            if old and new > old and j.name not in pinned:
                c = curves[j.name]
                saved = remaining[j.name] * (1 / c.throughput(old) - 1 / c.throughput(new))
                if saved <= replan_cost:
                    unpaid.append(j.name)
        if not unpaid:
            return alloc
        for name in unpaid:
            pinned[name] = current[name]
    return alloc


def _guided(jobs, curves, n_gpus, current, remaining, replan_cost, objective="completion",
            t=0.0, state=None):
    """The guided scheduler. Three candidate allocations: the greedy re-plan; every running job
    keeps its GPUs and the greedy places only the waiting jobs; or they wait in line as under
    FCFS. It takes the one the planner's curves predict finishes the present jobs soonest (sum of
    completion times for "completion", the last completion for "throughput"), counting the
    re-plan costs and assuming no further arrivals."""
    replan = _guided_greedy(jobs, curves, n_gpus, current, remaining, replan_cost, objective)
    running = {k: v for k, v in current.items() if v}
    keep = _guided_greedy(jobs, curves, n_gpus, current, remaining, replan_cost, objective,
                          pinned=running)
    queue = _fcfs(jobs, curves, n_gpus, running)
    candidates = [replan] + [c for c in (keep, queue) if c != replan]
    if len(candidates) == 1 or state is None:
        return replan

    def outcome(first):
        fresh = (dict(state[0]), dict(state[1]), dict(state[2]), set(state[3]))
        done, *_ = _play(jobs, curves, n_gpus, _guided_greedy, replan_cost, objective,
                         t=t, state=fresh, first=first)
        times = list(done.values())
        return sum(times) if objective == "completion" else max(times)

    scores = [outcome(c) for c in candidates]
    return candidates[int(np.argmin(scores))]


_POLICIES = {"fcfs": _fcfs, "proportional": _proportional, "guided": _guided, "srpt": _srpt}


def _play(jobs, curves, n_gpus, policy, replan_cost, objective, *, t, state, first=None):
    """The event loop. ``state`` = (remaining, alloc, busy_until, started), updated in place;
    ``first`` forces the first allocation. Returns (done, segments, replans)."""
    remaining, alloc, busy_until, started = state
    done: dict = {}
    segments: list = []
    replans = 0
    for _ in range(100 * len(jobs) + 100):
        present = [j for j in jobs if j.arrival <= t and j.name not in done]
        if first is not None:
            new, first = first, None
        elif policy is _guided:
            snapshot = (dict(remaining), dict(alloc), dict(busy_until), set(started))
            new = policy(present, curves, n_gpus, alloc, remaining, replan_cost, objective,
                         t=t, state=snapshot)
        else:
            new = policy(present, curves, n_gpus, alloc, remaining, replan_cost,
                         objective=objective)
        for j in present:
            old, now = alloc.get(j.name, 0), new.get(j.name, 0)
            if now and j.name in started and now != old:
                busy_until[j.name] = t + replan_cost
                replans += 1
            if now:
                started.add(j.name)
        alloc.clear()
        alloc.update({k: v for k, v in new.items() if v})
        # the next event: an arrival or a completion
        nxt = [j.arrival for j in jobs if j.arrival > t]
        for name, n in alloc.items():
            begin = max(t, busy_until.get(name, t))
            nxt.append(begin + remaining[name] / curves[name].throughput(n))
        if not nxt:
            break
        t_next = min(nxt)
        for name, n in alloc.items():
            begin = min(max(t, busy_until.get(name, t)), t_next)
            if begin > t:
                segments.append(Segment(name, t, begin, n, True))
            if t_next > begin:
                segments.append(Segment(name, begin, t_next, n, False))
                remaining[name] -= curves[name].throughput(n) * (t_next - begin)
        t = t_next
        for j in jobs:
            if j.name in alloc and remaining[j.name] <= _DONE * j.tokens:
                done[j.name] = t
                del alloc[j.name]
        if len(done) == len(jobs):
            break
    else:  # pragma: no cover - a guard against a policy that never lets a job run
        raise RuntimeError("the simulation did not finish; a job never got GPUs")
    return done, segments, replans


def simulate(jobs, curves: dict, n_gpus, scheduler="guided", *, replan_cost=REPLAN_COST,
             objective="completion") -> Schedule:
    """Run ``jobs`` on ``n_gpus`` GPUs under ``scheduler``; return the :class:`Schedule`.

    ``curves`` maps each job's name to its :class:`ScalingCurve` (:func:`scaling_curve`).
    Events are arrivals and completions; between two events allocations are constant and each
    running job progresses at its curve's tokens/s (none while it pays ``replan_cost``).
    ``objective`` steers the guided scheduler: "completion" (default) weighs each job's marginal
    FLOP/s by one over its remaining FLOPs (the rate its remaining time shrinks: short jobs first,
    as shortest-remaining-time-first does, but only where their curves still rise) and judges a
    re-plan by the sum of completion times; "throughput" maximises the cluster's model FLOP/s
    and judges a re-plan by the last completion.

    >>> c = ScalingCurve([8, 16], [1e5, 1.6e5], 6e9, 1e15)
    >>> jobs = [Job("a", "llama3-8b", 1e9), Job("b", "llama3-8b", 1e9, arrival=1000.0)]
    >>> s = simulate(jobs, {"a": c, "b": c}, 16, "fcfs")
    >>> round(s.completion["a"], 1), round(s.completion["b"], 1)
    (6250.0, 12500.0)
    """
    jobs, n_gpus, replan_cost = _check_inputs(jobs, curves, n_gpus, scheduler, replan_cost)
    check_choice("objective", objective, OBJECTIVES)
    jobs = sorted(jobs, key=lambda j: (j.arrival, jobs.index(j)))
    state = ({j.name: j.tokens for j in jobs}, {}, {}, set())
    done, segments, replans = _play(jobs, curves, n_gpus, _POLICIES[scheduler], replan_cost,
                                    objective, t=jobs[0].arrival, state=state)
    useful = sum(j.tokens * curves[j.name].flops_per_token for j in jobs)
    return Schedule(scheduler, n_gpus, tuple(_merge(segments)), done,
                    {j.name: j.arrival for j in jobs}, useful, replans)


def _merge(segments):
    """Join consecutive segments of a job with the same GPUs and state (events of others)."""
    out: list = []
    last: dict = {}
    for s in segments:
        prev = last.get(s.job)
        if prev is not None and prev.end == s.start and prev.gpus == s.gpus \
                and prev.restarting == s.restarting:
            merged = Segment(s.job, prev.start, s.end, s.gpus, s.restarting)
            out[out.index(prev)] = merged
            last[s.job] = merged
        else:
            out.append(s)
            last[s.job] = s
    return out


def compare(jobs, curves, n_gpus, *, replan_cost=REPLAN_COST, objective="completion") -> dict:
    """{scheduler: Schedule} for every scheduler on the same jobs and curves."""
    return {s: simulate(jobs, curves, n_gpus, s, replan_cost=replan_cost, objective=objective)
            for s in SCHEDULERS}


def _check_curve(curve):
    if not isinstance(curve, ScalingCurve):
        raise ValueError(f"curve={_brief(curve)} must be a scheduling.ScalingCurve")
    return curve


def marginal_throughput(curve: ScalingCurve, n, m) -> float:
    """Added model FLOP/s per added GPU when a job grows from ``n`` to ``m`` GPUs.

    >>> marginal_throughput(ScalingCurve([8, 16], [1e5, 1.6e5], 6e9, 1e15), 8, 16)
    45000000000000.0
    """
    _check_curve(curve)
    n, m = check_int("n", n), check_int("m", m)
    if m <= n:
        raise ValueError(f"m={m} must be larger than n={n}")
    return (curve.throughput(m) - curve.throughput(n)) * curve.flops_per_token / (m - n)


def replan_pays(curve: ScalingCurve, remaining_tokens, n, m, replan_cost=REPLAN_COST) -> bool:
    """Whether moving a job from ``n`` to ``m`` GPUs saves more time than the re-plan costs.

    >>> c = ScalingCurve([8, 16], [1e5, 1.6e5], 6e9, 1e15)
    >>> replan_pays(c, 1e9, 8, 16), replan_pays(c, 1e7, 8, 16)
    (True, False)
    """
    _check_curve(curve)
    n, m = check_int("n", n), check_int("m", m)
    remaining_tokens = check_positive("remaining_tokens", remaining_tokens)
    old, new = curve.throughput(n), curve.throughput(m)
    if old == 0 or new == 0:
        raise ValueError(f"no feasible plan at n={n} or m={m} GPUs")
    return bool(remaining_tokens * (1 / old - 1 / new) > check_positive(
        "replan_cost", replan_cost, allow_zero=True))


def example_workload() -> list[Job]:
    """The chapter's mix: five runs of 8B to 70B parameters arriving over four days.

    Token budgets are chosen so the whole mix needs roughly a week of a 1,024-GPU A100 cluster;
    sequences of 4,096 tokens, global batches of 512 (8B, 13B) or 1,024 (70B) sequences.

    >>> [(j.name, j.arrival / 86400) for j in example_workload()]
    [('8b-a', 0.0), ('70b', 0.5), ('13b', 1.0), ('8b-b', 2.0), ('8b-c', 4.0)]
    """
    day = 86400.0
    return [
        Job("8b-a", "llama3-8b", 300e9, global_batch=512, arrival=0.0),
        Job("70b", "llama3-70b", 100e9, global_batch=1024, arrival=0.5 * day),
        Job("13b", "llama2-13b", 250e9, global_batch=512, arrival=1.0 * day),
        Job("8b-b", "llama3-8b", 200e9, global_batch=512, arrival=2.0 * day),
        Job("8b-c", "llama3-8b", 100e9, global_batch=512, arrival=4.0 * day),
    ]
