"""Answer key for Chapter 20 (Sharing a cluster) exercises.

Scaling curves here are small tables written out in the exercise (the planner's own curves take
seconds to compute; the chapter shows those), so every key runs in microseconds.
"""

from __future__ import annotations

import numpy as np

from ... import hardware, scheduling, transformer
from ...units import DAY, HOUR
from ..grading.tables import with_messages

MODELS = ["llama3-8b", "llama2-13b", "llama3-70b"]
T = 4096


def _curve(p):
    """A two-point curve: tokens/s at n and at 2n (doubling at efficiency e)."""
    fpt = transformer.flops_per_token(p.model, T)
    return scheduling.ScalingCurve([p.n, 2 * p.n], [p.tokens_per_s, 2 * p.e * p.tokens_per_s],
                                   fpt, hardware.get("a100-80gb").peak_flops_per_s())


def marginal_flops_per_gpu(p):
    """Ex 20.1: model FLOP/s added per added GPU when the job doubles from n to 2n GPUs."""
    return scheduling.marginal_throughput(_curve(p), p.n, 2 * p.n)


def break_even_tokens(p):
    """Ex 20.2: remaining tokens above which moving from n to 2n GPUs pays a re-plan of
    ``p.cost_min`` minutes."""
    old, new = p.tokens_per_s, 2 * p.e * p.tokens_per_s
    return p.cost_min * 60 / (1 / old - 1 / new)


def fcfs_makespan(p):
    """Ex 20.3: makespan (hours) of two FCFS jobs with fixed requests on a 1,024-GPU cluster."""
    a, b = p.request_a, p.request_b
    start_b = p.arrival_b_h if a + b <= 1024 else max(p.arrival_b_h, p.hours_a)
    return max(p.hours_a, start_b + p.hours_b)


def cluster_utilization(p):
    """Ex 20.4: model FLOPs of the jobs over what N A100s could do at peak in ``days``."""
    flops = sum(tok * transformer.flops_per_token(m, T) for m, tok in zip(MODELS, p.tokens))
    return flops / (p.gpus * hardware.get("a100-80gb").peak_flops_per_s() * p.days * DAY)


def sjf_saving(p):
    """Ex 20.5: hours of average completion saved by running the shortest job first (three
    jobs arriving together, each using the whole cluster, listed in arrival order)."""
    def avg(order):
        return float(np.mean(np.cumsum(order)))
    return avg(list(p.hours)) - avg(sorted(p.hours))


def replanned_completion(p):
    """Ex 20.8: completion (hours) of a job that runs ``t1_h`` hours on n GPUs, then pays the
    re-plan and finishes on 2n GPUs."""
    old, new = p.tokens_per_s, 2 * p.e * p.tokens_per_s
    left = p.tokens - old * p.t1_h * HOUR
    return (p.t1_h * HOUR + p.cost_min * 60 + left / new) / HOUR


# ---- implement-it references ------------------------------------------------------------------

def grant_values(curves, alloc, free):
    """Ex 20.6 reference: each job's best added model FLOP/s per added GPU (0 if none)."""
    return [v for v, _ in scheduling.grant_values(curves, alloc, free).values()]


def grant_cases():
    """Ex 20.6 cases: (curves, alloc, free)."""
    a = scheduling.ScalingCurve([8, 16, 32, 64], [1e5, 1.7e5, 2.6e5, 3.0e5], 5e10, 312e12)
    b = scheduling.ScalingCurve([8, 16, 32, 64], [0.0, 2e4, 3.8e4, 7e4], 4.5e11, 312e12)
    c = scheduling.ScalingCurve([8, 16, 32, 64], [1e5, 1.2e5, 1.3e5, 1.3e5], 5e10, 312e12)
    return [({"a": a, "b": b}, {"a": 8, "b": 16}, 48),
            ({"a": a, "b": b}, {"a": 8, "b": 16}, 8),
            ({"a": a, "c": c}, {"a": 32, "c": 32}, 32),
            ({"c": c}, {"c": 32}, 32),
            ({"a": a, "b": b, "c": c}, {"a": 16, "b": 16, "c": 8}, 40)]


def fcfs_completions(durations_h, arrivals_h, requests, n_gpus):
    """Ex 20.7 reference: completion times (hours) under FCFS with fixed requests; each job
    runs ``durations_h`` hours once it starts."""
    jobs, curves = [], {}
    for i, (d, a, r) in enumerate(zip(durations_h, arrivals_h, requests)):
        name = f"job{i}"
        jobs.append(scheduling.Job(name, "llama3-8b", d, arrival=a * HOUR, request=r))
        curves[name] = scheduling.ScalingCurve([r], [1 / HOUR], 1.0, 1.0)
    s = scheduling.simulate(jobs, curves, n_gpus, "fcfs", replan_cost=0.0)
    return [s.completion[f"job{i}"] / HOUR for i in range(len(jobs))]


FCFS_CASES = [
    ([10.0, 5.0], [0.0, 1.0], [512, 512], 1024),
    ([10.0, 5.0], [0.0, 1.0], [1024, 8], 1024),
    ([4.0, 6.0, 1.0], [0.0, 0.0, 2.0], [256, 512, 512], 1024),
    ([3.0, 3.0, 3.0], [0.0, 1.0, 2.0], [512, 768, 64], 1024),
]


# ---- wrong methods (tests/test_wrong_methods.py) ------------------------------------------------

def _marginal_over_all_gpus(p):
    c = _curve(p)
    return (c.tokens_per_s[1] - c.tokens_per_s[0]) * c.flops_per_token / (2 * p.n)


def _marginal_average(p):
    c = _curve(p)
    return c.tokens_per_s[1] * c.flops_per_token / (2 * p.n)


def _break_even_rate_gap(p):
    old, new = p.tokens_per_s, 2 * p.e * p.tokens_per_s
    return p.cost_min * 60 * (new - old)


def _break_even_new_rate(p):
    return p.cost_min * 60 * 2 * p.e * p.tokens_per_s


def _makespan_sum(p):
    return p.hours_a + p.hours_b


def _makespan_ignore_wait(p):
    return max(p.hours_a, p.arrival_b_h + p.hours_b)


def _util_params_only(p):
    flops = sum(6 * transformer.n_params(m) * tok for m, tok in zip(MODELS, p.tokens))
    return flops / (p.gpus * hardware.get("a100-80gb").peak_flops_per_s() * p.days * DAY)


def _sjf_makespan(p):
    return 0.0


def _sjf_total(p):
    return 3 * sjf_saving(p)


def _replan_no_cost(p):
    old, new = p.tokens_per_s, 2 * p.e * p.tokens_per_s
    left = p.tokens - old * p.t1_h * HOUR
    return (p.t1_h * HOUR + left / new) / HOUR


def _replan_linear(p):
    old = p.tokens_per_s
    left = p.tokens - old * p.t1_h * HOUR
    return (p.t1_h * HOUR + p.cost_min * 60 + left / (2 * old)) / HOUR


WRONG_METHODS = {
    "20.1": {"divided by all 2n GPUs, not the n added": _marginal_over_all_gpus,
             "average FLOP/s per GPU at 2n instead of the marginal": _marginal_average},
    "20.2": {"cost times the rate gap": _break_even_rate_gap,
             "cost times the new rate": _break_even_new_rate},
    "20.3": {"the durations added, as if the jobs never overlap": _makespan_sum,
             "job b starts on arrival even when the GPUs are taken": _makespan_ignore_wait},
    "20.4": {"6·N FLOPs per token (attention left out)": _util_params_only},
    "20.5": {"the makespan difference (none: same work)": _sjf_makespan,
             "total instead of average completion": _sjf_total},
    "20.8": {"re-plan cost left out": _replan_no_cost,
             "linear scaling assumed on 2n GPUs": _replan_linear},
}

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '20.1': ('What do the extra GPUs add?',
             'the gain in throughput times FLOPs per token, divided by the GPUs added'),
    '20.2': ('Growing pays when the time it saves exceeds the re-plan cost.',
             'compare the remaining time at the old and the new rate; set the saving equal to '
             'the cost'),
    '20.3': ('Does the second job fit beside the first?',
             'it starts on arrival only if both fit; otherwise when the first finishes'),
    '20.4': ('Utilisation: work done over work possible.',
             "sum the jobs' FLOPs (attention included) over GPUs × peak × seconds"),
    '20.5': ('Shortest first, then completion times add up.',
             'sort by duration; each completion time is the running sum'),
    '20.6': ('For each larger size that fits, what does each added GPU buy?',
             'the gain in tokens/s times FLOPs per token over the added GPUs; keep the largest, '
             '0 if none'),
    '20.7': ('Walk the queue in order.',
             'each job starts at its arrival or later, and waits for finishes until its GPUs '
             'are free'),
    '20.8': ('Two phases with a restart between them.',
             'tokens done in phase one, the restart time, then the rest at the new throughput'),
}


# ---- More listed mistakes, each with what the student reads (issue 21).

def _grant_total_gain(curves, alloc, free):
    """20.6 wrong method: the whole gain in FLOP/s, not per added GPU."""
    out = []
    for name, n in alloc.items():
        c = curves[name]
        best = 0.0
        for size in c.sizes:
            size = int(size)
            if size > n and size - n <= free:
                best = max(best, (c.throughput(size) - c.throughput(n)) * c.flops_per_token)
        out.append(best)
    return out


def _grant_over_new_size(curves, alloc, free):
    """20.6 wrong method: the gain divided by the new size instead of the GPUs added."""
    out = []
    for name, n in alloc.items():
        c = curves[name]
        best = 0.0
        for size in c.sizes:
            size = int(size)
            if size > n and size - n <= free:
                best = max(best, (c.throughput(size) - c.throughput(n)) * c.flops_per_token
                           / size)
        out.append(best)
    return out


def _fcfs_one_at_a_time(durations_h, arrivals_h, requests, n_gpus):
    """20.7 wrong method: each job waits for the previous one to finish, even when both fit."""
    out, t = [], 0.0
    for d, a in zip(durations_h, arrivals_h):
        t = max(t, a) + d
        out.append(t)
    return out


WRONG_METHODS["20.4"]["a percentage"] = (
    lambda p: 100 * cluster_utilization(p),
    "the utilisation is a fraction in [0, 1], not a percentage")
WRONG_METHODS["20.6"] = {
    "the whole gain, not per added GPU": (
        _grant_total_gain,
        "divide the gain in FLOP/s by the number of GPUs the grant adds"),
    "per GPU of the new size": (
        _grant_over_new_size,
        "the value of a grant is per GPU added: divide by the GPUs the grant adds, not by the "
        "job's new size"),
}
WRONG_METHODS["20.7"] = {
    "one job at a time": (
        _fcfs_one_at_a_time,
        "jobs share the cluster: a job starts as soon as enough GPUs are free, even while "
        "earlier jobs run"),
    "no waiting for free GPUs": (
        lambda durations_h, arrivals_h, requests, n_gpus: [
            a + d for d, a in zip(durations_h, arrivals_h)],
        "a job starts only when enough GPUs are free: wait for the running jobs to finish"),
}

with_messages(WRONG_METHODS, {
    "20.1": {"divided by all 2n GPUs, not the n added": "divide by the GPUs added",
             "average FLOP/s per GPU at 2n instead of the marginal":
             "the marginal value is the gain over the GPUs added"},
    "20.2": {"cost times the rate gap": "compare the remaining times at the two rates",
             "cost times the new rate": "compare the remaining times at the two rates"},
    "20.3": {"the durations added, as if the jobs never overlap":
             "both jobs may run at once when their GPUs fit",
             "job b starts on arrival even when the GPUs are taken":
             "b waits for a when the two do not fit together"},
    "20.4": {"6·N FLOPs per token (attention left out)": "count attention's FLOPs too"},
    "20.5": {"the makespan difference (none: same work)":
             "the question asks for the average completion time",
             "total instead of average completion": "average the completion times"},
    "20.8": {"re-plan cost left out": "the re-plan pauses the job",
             "linear scaling assumed on 2n GPUs": "use the throughput the question gives at 2n"},
})
