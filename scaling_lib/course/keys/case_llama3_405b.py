"""Answer key for Chapter 19 (Case study: training Llama 3 405B) exercises."""

from __future__ import annotations

import math

from ... import planner, reliability
from ..grading.tables import with_messages

HOUR = 3600.0
DAY = 86400.0


def mtbf_hours(p):
    """Ex 19.1: the job's MTBF in hours from p.interruptions in p.days."""
    return reliability.mtbf(p.interruptions, p.days * DAY) / HOUR


def job_mtbf_hours(p):
    """Ex 19.2: MTBF of a job on p.n GPUs whose GPUs each fail every p.gpu_mtbf_kh thousand
    hours."""
    return reliability.job_mtbf(p.gpu_mtbf_kh * 1e3 * HOUR, p.n) / HOUR


def checkpoint_seconds(p):
    """Ex 19.3: seconds to write a mixed-precision Adam checkpoint of p.billions parameters
    at p.tb_per_s TB/s."""
    per = reliability.checkpoint_bytes("llama3-405b") / _n405()
    return reliability.checkpoint_time(p.billions * 1e9 * per, p.tb_per_s * 1e12)


def _n405():
    from ... import transformer

    return float(transformer.param_count("llama3-405b").total)


def interval_minutes(p):
    """Ex 19.4: Young's checkpoint interval (minutes) for a p.ckpt_s-second checkpoint and an
    MTBF of p.mtbf_h hours."""
    return reliability.young_daly_interval(p.ckpt_s, p.mtbf_h * HOUR) / 60


def goodput_at_best(p):
    """Ex 19.5: goodput at Young's interval with restart time p.restart_min minutes."""
    d, M = p.ckpt_s, p.mtbf_h * HOUR
    return reliability.goodput(reliability.young_daly_interval(d, M), d, M,
                               restart_time=p.restart_min * 60)


def young_daly(checkpoint_time, mtbf):
    """Ex 19.6 (implement): the interval sqrt(2·δ·M)."""
    return reliability.young_daly_interval(checkpoint_time, mtbf)


def goodput(interval, checkpoint_time, mtbf, restart_time):
    """Ex 19.7 (implement): 1 - δ/τ - (R + τ/2)/M, clipped at 0."""
    return reliability.goodput(interval, checkpoint_time, mtbf, restart_time=restart_time)


def run_days(p):
    """Ex 19.8: days to train p.tokens_t trillion tokens at p.step_s s per step of
    2,048 x 8,192 tokens with goodput p.goodput."""
    return planner.training_run(p.step_s, p.tokens_t * 1e12, 2048, 8192, 16384,
                                goodput=p.goodput).days


def run_gpu_hours(p):
    """Ex 19.9: GPU-hours of that run on p.n GPUs."""
    return planner.training_run(p.step_s, p.tokens_t * 1e12, 2048, 8192, p.n,
                                goodput=p.goodput).gpu_hours


WRONG_METHODS = {
    "19.1": {"days over interruptions (days, not hours)": lambda p: p.days / p.interruptions,
             "interruptions per hour": lambda p: p.interruptions / (p.days * 24)},
    "19.2": {"per-GPU MTBF (no division by n)": lambda p: p.gpu_mtbf_kh * 1e3,
             "divided by the nodes (n/8)": lambda p: p.gpu_mtbf_kh * 1e3 / (p.n / 8)},
    "19.3": {"bf16 weights only (2 bytes/param)":
                 lambda p: p.billions * 1e9 * 2 / (p.tb_per_s * 1e12),
             "16 bytes/param (gradients saved too)":
                 lambda p: p.billions * 1e9 * 16 / (p.tb_per_s * 1e12)},
    "19.4": {"sqrt(δ·M) (factor 2 missing)":
                 lambda p: math.sqrt(p.ckpt_s * p.mtbf_h * HOUR) / 60,
             "interval in seconds": lambda p: interval_minutes(p) * 60},
    "19.5": {"restart time ignored": lambda p: reliability.goodput(
                 reliability.young_daly_interval(p.ckpt_s, p.mtbf_h * HOUR), p.ckpt_s,
                 p.mtbf_h * HOUR)},
    "19.8": {"goodput ignored": lambda p: planner.training_run(
                 p.step_s, p.tokens_t * 1e12, 2048, 8192, 16384).days,
             "times goodput instead of over it": lambda p: planner.training_run(
                 p.step_s, p.tokens_t * 1e12, 2048, 8192, 16384).days * p.goodput},
    "19.9": {"GPU-days, not GPU-hours": lambda p: run_gpu_hours(p) / 24},
}

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '19.1': ('Mean time between failures: time over failures.',
             'the observed time over the number of interruptions, in hours'),
    '19.2': ('n parts, each failing independently.',
             'n independent parts fail n times as often'),
    '19.3': ('What must a checkpoint save to resume training?',
             'the master weights and both optimizer moments; gradients are not saved'),
    '19.4': ('Checkpointing costs time; failing loses work since the last checkpoint.',
             'write the waste per unit time as a function of the interval and minimise it'),
    '19.5': ('Three things waste time: saving, lost work and restarts.',
             'add the share of time each takes for this interval and failure rate; goodput is '
             'what is left'),
    '19.6': ('Minimise the waste of checkpointing plus the work lost per failure.',
             'differentiate the waste per unit time with respect to the interval and set it to '
             'zero'),
    '19.7': ('Add the wastes; a run cannot be less than nothing.',
             'goodput is one minus the wastes, and 0 when they exceed the time'),
    '19.8': ('Only a share of the wall-clock time is productive.',
             'the productive days over goodput'),
    '19.9': ('Failures are billed too.',
             'wall-clock hours times GPUs'),
}


# ---- More listed mistakes, each with what the student reads (issue 21).

WRONG_METHODS["19.5"]["the checkpoint cost left out"] = (
    lambda p: reliability.goodput(reliability.young_daly_interval(p.ckpt_s, p.mtbf_h * 3600),
                                  0.0, p.mtbf_h * 3600, restart_time=p.restart_min * 60),
    "writing a checkpoint every τ seconds costs δ/τ of the time as well")
WRONG_METHODS["19.6"] = {
    "sqrt(δ·M), the factor 2 forgotten": (
        lambda checkpoint_time, mtbf: math.sqrt(checkpoint_time * mtbf),
        "minimising δ/τ + τ/(2M) gives τ² = 2·δ·M: keep the 2"),
    "δ·M without the square root": (
        lambda checkpoint_time, mtbf: 2 * checkpoint_time * mtbf,
        "the optimum balances δ/τ against τ/(2M): τ is a square root"),
}
WRONG_METHODS["19.7"] = {
    "restart time ignored": (
        lambda interval, checkpoint_time, mtbf, restart_time: max(
            0.0, 1 - checkpoint_time / interval - interval / 2 / mtbf),
        "each failure also costs a restart: add R per failure, R/M of the time"),
    "not clipped at 0": (
        lambda interval, checkpoint_time, mtbf, restart_time: (
            1 - checkpoint_time / interval - (restart_time + interval / 2) / mtbf),
        "a run that loses more than it gains makes no progress: its goodput is 0, not negative"),
}
WRONG_METHODS["19.9"]["wall-clock hours (GPUs forgotten)"] = (
    lambda p: run_gpu_hours(p) / p.n,
    "that is the run's wall-clock hours: every one of the n GPUs is billed for them")

with_messages(WRONG_METHODS, {
    "19.1": {"days over interruptions (days, not hours)": "the answer is in hours",
             "interruptions per hour": "MTBF is time per failure, not failures per time"},
    "19.2": {"per-GPU MTBF (no division by n)": "n parts fail n times as often",
             "divided by the nodes (n/8)": "every GPU can fail: divide by n"},
    "19.3": {"bf16 weights only (2 bytes/param)": "save the fp32 master weights and both moments",
             "16 bytes/param (gradients saved too)": "gradients are not saved"},
    "19.4": {"sqrt(δ·M) (factor 2 missing)": "τ* = sqrt(2·δ·M)",
             "interval in seconds": "the answer is in minutes"},
    "19.5": {"restart time ignored": "each failure also costs a restart"},
    "19.8": {"goodput ignored": "only a share goodput of the wall-clock time is productive",
             "times goodput instead of over it": "divide the productive time by the goodput"},
    "19.9": {"GPU-days, not GPU-hours": "the answer is in GPU-hours"},
})
