"""The pipeline schedule generator and the pipeline strategy module.

Invariants of every simulated timeline: dependencies respected, one operation per stage at a
time, every (stage, micro-batch, chunk) run once forward and once backward; the bubble equals
:func:`pipeline_bubble_fraction` in both conventions; 1F1B holds at most p micro-batches in
flight where GPipe holds all m.
"""

import numpy as np
import pytest

from scaling_lib import memory, models
from scaling_lib.transformer import n_params
from scaling_lib.parallelism import (ParallelPlan, collectives, constraints, pipeline,
                                     pipeline_bubble_fraction, totals)

CFG = models.TransformerConfig(L=4, D=32, F=64, N=4, K=2, H=8, V=64, name="tiny4")

CASES = [(kind, p, m, v) for kind in ("gpipe", "1f1b") for p in (1, 2, 3, 4, 8)
         for m in (1, 2, 3, 4, 8, 16) for v in (1,)] + \
        [("interleaved", p, m, v) for p in (2, 4, 8) for m in (p, 2 * p, 4 * p)
         for v in (1, 2, 3, 4)]


def _check_invariants(ev, p, m, v, t_p2p=0.0):
    assert len(ev) == 2 * p * m * v
    keys = {(int(e["stage"]), int(e["micro"]), int(e["chunk"]), str(e["op"])) for e in ev}
    assert len(keys) == len(ev)  # each operation once
    end = {(str(e["op"]), int(e["micro"]), int(e["chunk"]) * p + int(e["stage"])):
           (float(e["start"]), float(e["end"]), int(e["stage"])) for e in ev}
    for (op, i, k), (start, _, s) in end.items():
        deps = []
        if op == "F" and k:
            deps.append(("F", i, k - 1))
        if op == "B":
            deps.append(("F", i, k))
            if k < p * v - 1:
                deps.append(("B", i, k + 1))
        for d in deps:
            gap = t_p2p if end[d][2] != s else 0.0
            assert start >= end[d][1] + gap - 1e-12, (op, i, k, d)
    for s in range(p):  # one operation at a time on each device
        e = np.sort(ev[ev["stage"] == s], order="start")
        assert np.all(e["start"][1:] >= e["end"][:-1] - 1e-12)


@pytest.mark.parametrize("kind,p,m,v", CASES)
def test_schedule_invariants_and_bubble(kind, p, m, v):
    ev = pipeline.schedule(p, m, v=v, kind=kind)
    _check_invariants(ev, p, m, v)
    sched = "1f1b" if kind == "gpipe" else kind
    for rel in ("step", "compute"):
        want = pipeline_bubble_fraction(p, m, v, sched, relative_to=rel)
        assert pipeline.bubble_fraction(ev, relative_to=rel) == pytest.approx(want, abs=1e-12)
    peak = pipeline.peak_in_flight(ev)
    if kind == "gpipe":
        assert np.all(peak == m)
    elif v == 1:
        assert np.all(peak <= p) and peak[0] == min(p, m)
        assert peak.tolist() == [min(p - s, m) for s in range(p)]
    if p > 1 and m >= 2 * p:  # the memory module's closed form, first stage
        plan = ParallelPlan(pp=p, virtual_stages=v, schedule=kind)
        assert peak[0] == pytest.approx(memory.in_flight_microbatches(plan, m))


def test_p2p_latency_and_unequal_times_keep_the_invariants():
    for kind, v in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2)):
        ev = pipeline.schedule(4, 8, v=v, kind=kind, t_fwd=1.0, t_bwd=2.5, t_p2p=0.3)
        _check_invariants(ev, 4, 8, v, t_p2p=0.3)
    # with t_p2p the step gets longer than the formula's
    assert pipeline.step_time(4, 8, t_p2p=0.1) > pipeline.step_time(4, 8)


def test_uneven_stage_times():
    """Per-stage times (uneven stages): the invariants hold, and the step lasts at least the
    busiest stage's work and at most the step of a pipeline whose stages all take the slowest
    time."""
    costs = pipeline.stage_costs("llama3-405b", pipeline.layer_split(126, 16))
    t = costs["flops"] / costs["flops"].mean()
    for kind, v in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2)):
        ev = pipeline.schedule(16, 32, v=v, kind=kind, t_fwd=t, t_bwd=2 * t)
        _check_invariants(ev, 16, 32, v)
        lo = 32 * 3 * t.max()  # the slowest stage's forwards and backwards
        hi = pipeline.step_time(16, 32, v=v, kind=kind, t_fwd=t.max(), t_bwd=2 * t.max())
        assert lo <= pipeline.makespan(ev) <= hi + 1e-9
    with pytest.raises(ValueError, match="one per stage"):
        pipeline.schedule(4, 4, t_fwd=[1.0, 2.0])


def test_one_microbatch_utilisation_is_one_over_p():
    ev = pipeline.schedule(8, 1)
    assert 1 - pipeline.bubble_fraction(ev) == pytest.approx(1 / 8)
    assert pipeline.step_time(8, 1, t_fwd=1, t_bwd=2) == 8 * 3


def test_ceiling_4x4():
    assert 1 - pipeline.bubble_fraction(pipeline.schedule(4, 4)) == pytest.approx(4 / 7)


def test_1f1b_order():
    o = pipeline.order(4, 8, 1)
    assert o[:2] == [("F", 0, 0), ("F", 1, 0)] and o[2:4] == [("F", 2, 0), ("B", 0, 0)]
    for s in range(4):
        o = pipeline.order(4, 8, s, kind="interleaved", v=2)
        assert sorted(o) == sorted([(op, i, c) for op in "FB" for i in range(8)
                                    for c in range(2)])


def test_min_microbatches():
    for p, u, v in ((8, 0.9, 1), (4, 0.8, 2), (16, 0.95, 1)):
        m = pipeline.min_microbatches(p, u, v=v)
        assert v * m / (v * m + p - 1) >= u - 1e-12 > v * (m - 1) / (v * (m - 1) + p - 1)


def test_layer_split_and_llama3_fix():
    assert pipeline.layer_split(126, 16, fewer_on_ends=1) == [7] + [8] * 14 + [7]
    assert pipeline.layer_split(10, 4) == [3, 3, 2, 2]
    costs = pipeline.stage_costs("llama3-405b", pipeline.layer_split(126, 16, fewer_on_ends=1))
    assert costs["params"].sum() == pytest.approx(n_params("llama3-405b"), rel=1e-9)
    with pytest.raises(ValueError, match="add up to"):
        pipeline.stage_costs("llama3-405b", [8] * 16)


def test_comms_constraints_and_collectives():
    plan = ParallelPlan(pp=2, micro_batch=2)
    got = pipeline.comms(CFG, plan, 8, 16, dtype="f32")
    assert [(c.kind, c.axis, c.nbytes, c.count) for c in got] == \
        [("collective-permute", "pp", 4 * 2 * 16 * 32, 4)] * 2
    assert totals(collectives(CFG, plan, 8, 16, dtype="f32")) == \
        {("collective-permute", 2): 2 * 4 * 4 * 2 * 16 * 32}
    inter = ParallelPlan(pp=2, virtual_stages=2, schedule="interleaved", micro_batch=2)
    assert pipeline.comms(CFG, inter, 8, 16)[0].count == 2 * 4
    assert any("multiple of pp" in r for r in
               constraints(CFG, inter.with_changes(micro_batch=8), 24, 16))
    assert pipeline.comms(CFG, ParallelPlan(), 8, 16) == []
    assert set(pipeline.memory(CFG, plan, 8, 16)) == {"parameters", "gradients", "optimizer",
                                                     "activations"}


@pytest.mark.parametrize("kw,match", [
    (dict(pp=0, m=4), "pp=0"), (dict(pp=4, m=6, kind="interleaved", v=2), "multiple of pp=4"),
    (dict(pp=4, m=6, kind="1f1b", v=2), "multiple of pp=4"),
    (dict(pp=100, m=100, v=2, kind="interleaved"), "too many to simulate"),
    (dict(pp=4, m=4, kind="gpipe", v=2), "GPipe has no virtual stages"),
    (dict(pp=4, m=4, kind="zb"), "kind='zb'"), (dict(pp=4, m=4, t_fwd=-1), "t_fwd")])
def test_bad_arguments_raise(kw, match):
    with pytest.raises(ValueError, match=match):
        pipeline.schedule(**kw)


def test_split_backward_keeps_1f1b_memory_and_shrinks_the_bubble():
    # Qi et al. 2023: splitting B and W lets W fill the bubble at 1F1B's memory
    for p, m in ((4, 8), (8, 16)):
        one = pipeline.schedule(p, m, t_fwd=1.0, t_bwd=2.0)
        split = pipeline.split_backward_schedule(p, m, t_fwd=1.0, t_input_grad=1.0, t_weight_grad=1.0)
        busy = lambda ev: float(np.sum(ev["end"] - ev["start"]))  # noqa: E731
        assert busy(split) == pytest.approx(busy(one))                 # the same work
        assert pipeline.makespan(split) < pipeline.makespan(one)
        # never below the paper's ZB-H1 bound (p-1)(t_F + t_B - t_W) of idle time per device
        assert pipeline.makespan(split) >= 3 * m + (p - 1) * 1.0 - 1e-9
        assert pipeline.peak_in_flight(split).tolist() == pipeline.peak_in_flight(one).tolist()
        w = split[split["op"] == "W"]
        b = {(int(e["stage"]), int(e["micro"])): float(e["end"]) for e in split[split["op"] == "B"]}
        assert all(float(e["start"]) >= b[int(e["stage"]), int(e["micro"])] for e in w)
