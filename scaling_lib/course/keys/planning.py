"""Answer key for Chapter 17 (Planning a training run) exercises.

Parametric exercises are closed forms of :mod:`scaling_lib.planner`; the search exercises
(17.7, 17.8) draw nothing and run one search each.
"""

from __future__ import annotations

import math

from ... import hardware, planner
from ...parallelism import ParallelPlan
from ..grading.tables import with_messages

# Megatron-LM's end-to-end estimate counts 8 FLOPs per parameter and token (full recomputation;
# Narayanan et al. 2021, section 5.1).
MEGATRON_FLOPS = 8.0


def _peak(p):
    return hardware.get(p.gpu).peak_flops_per_s("bf16")


def extra_days(p):
    """Ex 17.1: days lost when the hardware utilisation falls from p.u_hi to p.u_lo, training
    p.n_params on p.n_tokens with p.n GPUs (Megatron's 8·N·D / (n·X))."""
    f = dict(flops_per_param_token=MEGATRON_FLOPS)
    lo = planner.days_to_train(p.n_params, p.n_tokens, p.n, _peak(p), p.u_lo, **f)
    hi = planner.days_to_train(p.n_params, p.n_tokens, p.n, _peak(p), p.u_hi, **f)
    return lo - hi


def extra_cost(p):
    """Ex 17.2: the dollars those extra days cost at p.price per GPU-hour."""
    return extra_days(p) * 24 * p.n * p.price


def optimal_params(p):
    """Ex 17.3: Chinchilla-optimal parameters for p.n x p.gpu for p.days at 100%."""
    return planner.compute_optimal(hardware.cluster(p.gpu, p.n), p.days)[0]


def optimal_tokens_at(p):
    """Ex 17.4: Chinchilla-optimal tokens at utilisation p.u."""
    return planner.compute_optimal(hardware.cluster(p.gpu, p.n), p.days, utilization=p.u)[1]


def days_of_full_model(p):
    """Ex 17.5: days the model sized for 100% takes at utilisation p.u."""
    n, d = planner.compute_optimal(hardware.cluster(p.gpu, p.n), p.days)
    return planner.days_to_train(n, d, p.n, _peak(p), p.u)


def training_days(step_time, n_tokens, global_batch, T):
    """Ex 17.6 (implement): days to train n_tokens at step_time seconds per step."""
    return planner.training_run(step_time, n_tokens, global_batch, T, 1).days


def chinchilla_params(flops):
    """Ex 17.7 (implement): compute-optimal parameters for a budget of ``flops``:
    N = sqrt(C / (6 · 20)) (Hoffmann et al. 2022)."""
    return math.sqrt(flops / (planner.TRAIN_FLOPS_PER_PARAM_TOKEN
                              * planner.CHINCHILLA_TOKENS_PER_PARAM))


SEARCH_CASE = dict(cfg="llama3-70b", gpu="h100", n=256, global_batch=256, T=4096)
HEURISTIC = ParallelPlan(dp=4, tp=8, pp=8, recompute="full")


def _search():
    c = SEARCH_CASE
    return planner.search(c["cfg"], hardware.cluster(c["gpu"], c["n"]), c["global_batch"],
                          c["T"])


def best_step_time():
    """Ex 17.8: step time of the fastest plan of Llama 3 70B on 256 H100s (256 x 4,096)."""
    return float(_search().table["step_time"][0])


def heuristic_slowdown():
    """Ex 17.9: the heuristic plan's step time over the best plan's."""
    from ...parallelism.estimate import estimate

    c = SEARCH_CASE
    h = estimate(c["cfg"], hardware.cluster(c["gpu"], c["n"]), HEURISTIC, c["global_batch"],
                 c["T"])
    return h.step_time / best_step_time()


def _days_6(p):
    f = dict(flops_per_param_token=6.0)
    return (planner.days_to_train(p.n_params, p.n_tokens, p.n, _peak(p), p.u_lo, **f)
            - planner.days_to_train(p.n_params, p.n_tokens, p.n, _peak(p), p.u_hi, **f))


WRONG_METHODS = {
    "17.1": {"6 FLOPs per parameter-token (no recomputation)": _days_6,
             "ratio of utilisations applied to days at the high one":
                 lambda p: planner.days_to_train(p.n_params, p.n_tokens, p.n, _peak(p), p.u_hi,
                                                 flops_per_param_token=8) * (p.u_hi - p.u_lo)},
    "17.2": {"one GPU's hours": lambda p: extra_days(p) * 24 * p.price,
             "days not turned into hours": lambda p: extra_days(p) * p.n * p.price},
    "17.3": {"D = N (no 20 tokens per parameter)":
                 lambda p: math.sqrt(hardware.cluster(p.gpu, p.n).peak_flops_per_s * p.days
                                     * 86400 / 6),
             "2 FLOPs per parameter-token (inference)":
                 lambda p: math.sqrt(hardware.cluster(p.gpu, p.n).peak_flops_per_s * p.days
                                     * 86400 / 40)},
    "17.4": {"tokens scaled by u, not sqrt(u)": lambda p: planner.compute_optimal(
                 hardware.cluster(p.gpu, p.n), p.days)[1] * p.u,
             "the 10x erratum (억 misread)": lambda p: optimal_tokens_at(p) / 10},
    "17.5": {"days times u": lambda p: p.days * p.u,
             "days over sqrt(u)": lambda p: p.days / math.sqrt(p.u)},
}

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '17.1': ('Training days depend on the utilisation: compute both.',
             "days at each utilisation from the FLOPs and the cluster's peak; subtract"),
    '17.2': ('Every GPU is paid for every extra hour.',
             'extra hours times GPUs times the price per GPU-hour'),
    '17.3': ('Chinchilla fixes the tokens per parameter: write C in N alone.',
             'substitute D = 20·N into C = 6·N·D and solve for N'),
    '17.4': ('At utilisation u the compute delivered shrinks: how do N and D follow?',
             'C scales by u; with D ∝ N, both scale by the same factor'),
    '17.5': ('The same FLOPs at a fraction u of the rate.',
             'compare the time at the peak with the time at u'),
    '17.6': ('Steps from tokens, time from steps.',
             'tokens over tokens per step gives steps; times the step time; convert to days'),
    '17.7': ('With D = 20·N, C is a function of N alone.',
             'substitute and solve for N'),
    '17.8': ('The search returns plans ranked.',
             'its first plan is the fastest'),
    '17.9': ("Compare the habit's plan with the best plan.",
             "the habit's step time over the best plan's"),
}


# ---- More listed mistakes, each with what the student reads (issue 21).

def _habit_step_time():
    from ...parallelism.estimate import estimate

    c = SEARCH_CASE
    return estimate(c["cfg"], hardware.cluster(c["gpu"], c["n"]), HEURISTIC, c["global_batch"],
                    c["T"]).step_time


WRONG_METHODS["17.6"] = {
    "hours, not days": (
        lambda step_time, n_tokens, global_batch, T: training_days(
            step_time, n_tokens, global_batch, T) * 24,
        "that is hours: a day is 86,400 seconds"),
    "sequence length left out": (
        lambda step_time, n_tokens, global_batch, T: training_days(
            step_time, n_tokens, global_batch, T) * T,
        "a step processes global_batch sequences of T tokens each: tokens per step is B·T"),
}
WRONG_METHODS["17.7"] = {
    "C = 6·N² (the 20 tokens per parameter forgotten)": (
        lambda flops: math.sqrt(flops / 6),
        "Chinchilla trains on about 20 tokens per parameter: substitute D = 20·N"),
    "C = 120·N (not squared)": (
        lambda flops: flops / 120,
        "C = 6·N·D with D = 20·N grows as N²: take a square root"),
}
WRONG_METHODS["17.8"] = {
    "the habit's step time": (
        _habit_step_time,
        "that is the habitual plan's step time: the search's first plan is the fastest"),
    "the slowest plan of the table": (
        lambda: float(_search().table["step_time"][-1]),
        "the search ranks its plans fastest first: take the first"),
}
WRONG_METHODS["17.9"] = {
    "best over habit (inverted)": (
        lambda: 1 / heuristic_slowdown(),
        "that is the best plan's time over the habit's: the slowdown is the habit's over the "
        "best, at least 1"),
    "the difference in seconds": (
        lambda: _habit_step_time() - best_step_time(),
        "the question asks for a ratio of step times, not their difference"),
}

with_messages(WRONG_METHODS, {
    "17.1": {"6 FLOPs per parameter-token (no recomputation)": "the question counts 8·N·D",
             "ratio of utilisations applied to days at the high one":
             "compute the days at each utilisation and subtract"},
    "17.2": {"one GPU's hours": "every GPU of the cluster is paid for",
             "days not turned into hours": "the price is per GPU-hour"},
    "17.3": {"D = N (no 20 tokens per parameter)": "Chinchilla's D is about 20·N",
             "2 FLOPs per parameter-token (inference)": "training costs 6 FLOPs per "
             "parameter-token"},
    "17.4": {"tokens scaled by u, not sqrt(u)": "C ∝ N² so N and D each scale by sqrt(u)",
             "the 10x erratum (억 misread)": "check the powers of ten"},
    "17.5": {"days times u": "at a fraction u of the rate the same FLOPs take 1/u as long",
             "days over sqrt(u)": "the FLOPs are fixed here: time scales by 1/u"},
})
