"""Answer key for Chapter 13 (Pipeline parallelism) exercises."""

from __future__ import annotations

import math

from ... import models
from ...parallelism import ParallelPlan, pipeline, pipeline_bubble_fraction
from ..grading.tables import with_messages

# Ex 13.5's schedules and Ex 13.7's model
SCHEDULES = ["gpipe", "1f1b", "interleaved"]
LLAMA3_405B = "llama3-405b"


def _kind(v):
    return "interleaved" if v > 1 else "1f1b"


def bubble(p):
    """Ex 13.1: idle share of the step, (p-1)/(v·m + p-1)."""
    return float(pipeline_bubble_fraction(p.p, p.m, p.v, _kind(p.v)))


def fewest_microbatches(p):
    """Ex 13.2: the fewest m with utilisation v·m/(v·m + p-1) >= u."""
    return pipeline.min_microbatches(p.p, p.u, v=p.v)


def one_f_one_b(p, m, stage):
    """Ex 13.3: stage ``stage``'s 1F1B order as text, e.g. "F0 F1 B0 F2 B1 B2"."""
    return " ".join(f"{op}{i}" for op, i, _ in pipeline.order(p, m, stage, kind="1f1b"))


def peak_held(order):
    """Ex 13.4: the most micro-batches held at once by a stage running ``order``."""
    held = peak = 0
    for op in order.split():
        held += 1 if op[0] == "F" else -1
        peak = max(peak, held)
    return peak


def in_flight(p):
    """Ex 13.5: micro-batches whose activations stage 0 holds at its peak."""
    v = 2 if p.schedule == "interleaved" else 1
    ev = pipeline.schedule(p.p, p.m, v=v, kind=p.schedule)
    return float(pipeline.peak_in_flight(ev)[0])


def p2p_bytes(p):
    """Ex 13.6: bytes a middle stage sends in one step (activations forward, gradients
    backward), bf16, no sequence parallelism."""
    plan = ParallelPlan(pp=8, micro_batch=p.b, virtual_stages=p.v,
                        schedule=_kind(p.v))
    return sum(c.nbytes * c.count for c in pipeline.comms(p.model, plan, p.b * p.m, p.T))


def first_stage_params(p):
    """Ex 13.7: parameters on the first stage of Llama 3 405B with one layer fewer on the
    first and last stages."""
    split = pipeline.layer_split(126, p.p, fewer_on_ends=1)
    return float(pipeline.stage_costs(LLAMA3_405B, split)["params"][0])


def gpipe_step_time(p):
    """Ex 13.8: GPipe's step time with a point-to-point latency per stage boundary."""
    return pipeline.step_time(p.p, p.m, kind="gpipe", t_fwd=p.t_f, t_bwd=2 * p.t_f,
                              t_p2p=p.t_c)


def does_1f1b_shrink_the_bubble():
    """Ex 13.9: does 1F1B have a smaller bubble than GPipe for the same p and m?"""
    return "no"


# ---- wrong methods (tests/test_wrong_methods.py: each must FAIL at the cell's tolerance) ---------

def _megatron_m(p):
    return max(1, math.ceil((p.p - 1) / ((1 - p.u) * p.v) - 1e-9))


def _gpipe_order(p, m, stage):
    return " ".join([f"F{i}" for i in range(m)] + [f"B{i}" for i in range(m)])


def _warmup_p_minus_s(p, m, stage):
    warm = min(p - stage, m)
    out = [f"F{i}" for i in range(warm)]
    for j in range(m - warm):
        out += [f"F{warm + j}", f"B{j}"]
    return " ".join(out + [f"B{j}" for j in range(m - warm, m)])


def _interleaved_like_1f1b(p):
    return float(min(p.p, p.m)) if p.schedule == "interleaved" else in_flight(p)


def _stage_layers_only(p):
    c = models.get(LLAMA3_405B)
    return first_stage_params(p) - c.V * c.D


WRONG_METHODS = {
    "13.1": {"Megatron's (p-1)/(v·m) as a share of the step":
             lambda p: (p.p - 1) / (p.v * p.m),
             "virtual stages left out": lambda p: (p.p - 1) / (p.m + p.p - 1)},
    "13.2": {"Megatron's convention (p-1)/(v·m) <= 1 - u": _megatron_m,
             "rounded down": lambda p: math.floor(p.u * (p.p - 1) / ((1 - p.u) * p.v))},
    "13.3": {"GPipe's order": _gpipe_order, "p - s warm-up forwards": _warmup_p_minus_s},
    "13.4": {"every forward counted": lambda order: order.count("F")},
    "13.5": {"every schedule holds all m (GPipe's)": lambda p: float(p.m),
             "interleaved holds min(p, m), as 1F1B does": _interleaved_like_1f1b},
    "13.6": {"one direction only": lambda p: p2p_bytes(p) / 2,
             "virtual stages left out": lambda p: p2p_bytes(p) / p.v,
             "fp32 activations": lambda p: 2 * p2p_bytes(p)},
    "13.7": {"embedding left out": _stage_layers_only,
             "the even split's first stage": lambda p: float(pipeline.stage_costs(
                 LLAMA3_405B, pipeline.layer_split(126, p.p))["params"][0])},
    "13.8": {"latency left out": lambda p: (p.m + p.p - 1) * 3 * p.t_f,
             "latency per micro-batch": lambda p: (p.m + p.p - 1) * (3 * p.t_f + 2 * p.t_c)},
}

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '13.1': ('Draw the schedule: how long does a step take, and how much of it is a device idle?',
             'count the chunk-times of the step from the micro-batches, the virtual stages and '
             'the ramp-up and drain'),
    '13.2': ('The busy share of a step grows with the micro-batches.',
             'write the busy share as a function of m, require it to reach u, solve and round up'),
    '13.3': ('A stage first fills the pipeline, then alternates, then drains.',
             'warm-up forwards (fewer for later stages), then forward-backward pairs, then the '
             'remaining backwards'),
    '13.4': ('Walk through the order and count what is held.',
             "a forward adds a micro-batch's activations, a backward frees them; keep the "
             'running maximum'),
    '13.5': ('How many micro-batches does each schedule keep in flight?',
             'GPipe runs every forward first; 1F1B caps the forwards ahead at the stage count; '
             'interleaving adds a little'),
    '13.6': ('What crosses a stage boundary, and how often?',
             'one activation tensor per micro-batch and virtual stage, forward, and its '
             'gradient backward'),
    '13.7': ('The first stage also holds the embedding.',
             "the first stage's layers times the parameters per layer, plus the embedding"),
    '13.8': ("Where on the critical path does each send's latency appear?",
             'the forward and the backward wave each cross the stage boundaries once on the '
             'critical path'),
    '13.9': ("Compare the two schedules' ramp-up and drain.",
             '1F1B reorders the same work: look at what it changes (the idle time, or the memory?)'),
}


# ---- More listed mistakes, each with what the student reads (issue 21).

WRONG_METHODS["13.4"]["every forward counted"] = (
    WRONG_METHODS["13.4"]["every forward counted"],
    "a backward frees the activations of its micro-batch: count forwards minus backwards as "
    "you go and keep the largest")
WRONG_METHODS["13.9"] = {
    "yes, 1F1B shrinks it": (
        lambda: "yes",
        "1F1B reorders the same forwards and backwards: the ramp-up and drain, and so the "
        "bubble, stay the same; what it shrinks is the activation memory"),
}


with_messages(WRONG_METHODS, {
    "13.1": {"Megatron's (p-1)/(v·m) as a share of the step":
             "Megatron's (p-1)/(v·m) is relative to the compute time, not the step",
             "virtual stages left out": "with v virtual stages the ramp-up is in chunk-times"},
    "13.2": {"Megatron's convention (p-1)/(v·m) <= 1 - u": "the busy share is of the whole step",
             "rounded down": "too few micro-batches miss the target: round up"},
    "13.3": {"GPipe's order": "1F1B alternates forwards and backwards after its warm-up",
             "p - s warm-up forwards": "a stage warms up with p - s - 1 forwards"},
    "13.5": {"every schedule holds all m (GPipe's)": "1F1B caps the micro-batches in flight",
             "interleaved holds min(p, m), as 1F1B does": "interleaving holds a little more"},
    "13.6": {"one direction only": "activations go forward and their gradients come back",
             "virtual stages left out": "each virtual stage adds its own boundary crossings",
             "fp32 activations": "the activations are bf16, 2 bytes each"},
    "13.7": {"embedding left out": "the first stage also holds the V·D embedding",
             "the even split's first stage": "Llama 3 gives the first stage fewer layers"},
    "13.8": {"latency left out": "each boundary crossing on the critical path pays the latency",
             "latency per micro-batch": "only the first wave's crossings are on the critical path"},
})
