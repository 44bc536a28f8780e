"""The cluster scheduler: invariants of the simulation on synthetic scaling curves.

The curves here are shaped like the planner's (throughput that saturates as GPUs are added, and
nothing below the size where the model fits) but written as formulas, so every property is
checked quickly and independently of the planner; the chapter's workload with the planner's
curves is checked in ``test_scheduling_planner``.
"""

import numpy as np
import pytest

from scaling_lib import scheduling as sch

N = 1024
PEAK = 312e12


def curve(per_gpu, half, min_size, fpt=6e9):
    """tokens/s = per_gpu · n / (1 + n / half), zero below min_size."""
    sizes = sch.allocation_sizes(N)
    thr = per_gpu * sizes / (1 + sizes / half)
    thr[sizes < min_size] = 0.0
    return sch.ScalingCurve(sizes, thr, fpt, PEAK)


def workload():
    jobs = [sch.Job("7b-a", "llama3-8b", 2e11, arrival=0.0),
            sch.Job("70b", "llama3-70b", 1e11, arrival=3600.0),
            sch.Job("7b-b", "llama3-8b", 1.5e11, arrival=7200.0),
            sch.Job("13b", "llama2-13b", 1e11, arrival=5 * 3600.0)]
    curves = {"7b-a": curve(3000, 256, 8, 5e10), "70b": curve(300, 1024, 64, 4.5e11),
              "7b-b": curve(3000, 256, 8, 5e10), "13b": curve(1600, 512, 16, 8e10)}
    return jobs, curves


def in_use(schedule, t):
    return sum(s.gpus for s in schedule.segments if s.start <= t < s.end)


@pytest.mark.parametrize("scheduler", sch.SCHEDULERS)
def test_never_more_gpus_than_the_cluster(scheduler):
    jobs, curves = workload()
    s = sch.simulate(jobs, curves, N, scheduler)
    times = sorted({x.start for x in s.segments})
    assert max(in_use(s, t) for t in times) <= N
    assert all(x.end > x.start and x.gpus in curves[x.job].sizes for x in s.segments)


@pytest.mark.parametrize("scheduler", sch.SCHEDULERS)
def test_work_is_conserved(scheduler):
    jobs, curves = workload()
    s = sch.simulate(jobs, curves, N, scheduler, replan_cost=900.0)
    for j in jobs:
        done = sum(curves[j.name].throughput(x.gpus) * (x.end - x.start)
                   for x in s.segments if x.job == j.name and not x.restarting)
        assert done == pytest.approx(j.tokens, rel=1e-9)
        first = min(x.start for x in s.segments if x.job == j.name)
        assert first >= j.arrival
        assert s.completion[j.name] == pytest.approx(
            max(x.end for x in s.segments if x.job == j.name))


@pytest.mark.parametrize("scheduler", ["fcfs", "guided"])
def test_a_job_alone_gets_its_best_allocation(scheduler):
    c = curve(3000, 256, 8)
    c = sch.ScalingCurve(c.sizes, np.where(c.sizes > 256, c.tokens_per_s[5] * 0.9,
                                           c.tokens_per_s), c.flops_per_token, PEAK)
    job = sch.Job("solo", "llama3-8b", 1e11)
    s = sch.simulate([job], {"solo": c}, N, scheduler)
    assert {x.gpus for x in s.segments} == {c.best_size(N)} == {256}
    assert s.completion["solo"] == pytest.approx(1e11 / c.throughput(256))


def test_the_proportional_rule_gives_a_lone_job_everything_even_past_its_best():
    c = curve(3000, 256, 8)
    c = sch.ScalingCurve(c.sizes, np.where(c.sizes > 256, c.tokens_per_s[5] * 0.9,
                                           c.tokens_per_s), c.flops_per_token, PEAK)
    s = sch.simulate([sch.Job("solo", "llama3-8b", 1e11)], {"solo": c}, N, "proportional")
    assert {x.gpus for x in s.segments} == {N}


def test_srpt_gives_the_cluster_to_the_job_with_the_least_work_left():
    c = curve(3000, 256, 8)
    big = sch.Job("big", "llama3-8b", 1e11)
    small = sch.Job("small", "llama3-8b", 1e9, arrival=10.0)
    s = sch.simulate([big, small], {"big": c, "small": c}, N, "srpt", replan_cost=60.0)
    first_small = min((x for x in s.segments if x.job == "small"), key=lambda x: x.start)
    assert first_small.start == pytest.approx(10.0) and first_small.gpus == N
    # the big job is preempted while the small one runs, then restarts (one re-plan)
    assert not any(x.job == "big" and x.start < s.completion["small"] and x.end > 10.0
                   for x in s.segments)
    assert s.replans == 1
    assert s.completion["small"] == pytest.approx(10.0 + 1e9 / c.throughput(N))


def test_guided_finishes_the_average_job_no_later_than_fcfs_or_proportional():
    jobs, curves = workload()
    out = sch.compare(jobs, curves, N)
    g = out["guided"]
    for name in ("fcfs", "proportional"):
        assert g.average_completion <= out[name].average_completion


def test_utilization_counts_model_flops_over_the_makespan():
    jobs, curves = workload()
    s = sch.simulate(jobs, curves, N, "guided")
    flops = sum(j.tokens * curves[j.name].flops_per_token for j in jobs)
    assert s.utilization(PEAK) == pytest.approx(flops / (N * PEAK * s.makespan))
    assert 0 < s.utilization(PEAK) < 1
    assert s.gpu_seconds() <= N * s.makespan


def test_fcfs_blocks_at_the_head_of_the_line():
    c = curve(3000, 256, 8)
    big = sch.Job("big", "llama3-8b", 1e11, request=1024)
    small = sch.Job("small", "llama3-8b", 1e9, arrival=10.0, request=8)
    s = sch.simulate([big, small], {"big": c, "small": c}, N, "fcfs")
    assert min(x.start for x in s.segments if x.job == "small") == pytest.approx(
        s.completion["big"])


def test_replanning_costs_time_and_the_guided_scheduler_weighs_it():
    jobs, curves = workload()
    free = sch.simulate(jobs, curves, N, "guided", replan_cost=0.0)
    dear = sch.simulate(jobs, curves, N, "guided", replan_cost=3600.0)
    assert not any(x.restarting for x in free.segments)
    assert dear.average_completion >= free.average_completion
    prop = sch.simulate(jobs, curves, N, "proportional", replan_cost=3600.0)
    prop_free = sch.simulate(jobs, curves, N, "proportional", replan_cost=0.0)
    restarts = [x for x in prop.segments if x.restarting]
    assert restarts and sum(x.end - x.start for x in restarts) >= 3600.0
    assert prop.average_completion > prop_free.average_completion


def test_marginal_throughput_and_replan_pays():
    c = sch.ScalingCurve([8, 16, 32], [1e5, 1.6e5, 1.8e5], 6e9, PEAK)
    assert sch.marginal_throughput(c, 8, 16) == pytest.approx(0.6e5 * 6e9 / 8)
    assert sch.marginal_throughput(c, 16, 32) < sch.marginal_throughput(c, 8, 16)
    # 1e9 tokens: 10,000 s on 8 GPUs against 6,250 s on 16: 3,750 s saved
    assert sch.replan_pays(c, 1e9, 8, 16, 3700.0)
    assert not sch.replan_pays(c, 1e9, 8, 16, 3800.0)


def test_scaling_curve_lookups():
    c = sch.ScalingCurve([8, 16, 32, 64], [0.0, 2.0, 3.0, 2.5], 1.0, 1.0)
    assert c.min_size() == 16 and c.best_size() == 32 and c.best_size(16) == 16
    assert c.throughput(8) == 0.0 and c.throughput(63) == 3.0 and c.throughput(64) == 3.0
    assert c.mfu().tolist() == pytest.approx([0.0, 2 / 16, 3 / 32, 2.5 / 64])


@pytest.mark.parametrize("kwargs, match", [
    (dict(scheduler="sjf"), "scheduler='sjf'"),
    (dict(n_gpus=0), "n_gpus"),
    (dict(replan_cost=-1), "replan_cost"),
])
def test_bad_input_is_named(kwargs, match):
    jobs, curves = workload()
    args = dict(jobs=jobs, curves=curves, n_gpus=N, scheduler="guided")
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        sch.simulate(args.pop("jobs"), args.pop("curves"), args.pop("n_gpus"),
                     args.pop("scheduler"), **args)


def test_bad_jobs_and_curves_are_named():
    jobs, curves = workload()
    with pytest.raises(ValueError, match="one ScalingCurve per job"):
        sch.simulate(jobs, {"7b-a": curves["7b-a"]}, N)
    with pytest.raises(ValueError, match="unique"):
        sch.simulate([jobs[0], jobs[0]], curves, N)
    with pytest.raises(ValueError, match="no feasible plan on at most 32"):
        sch.simulate(jobs, curves, 32)
    bad = sch.Job("7b-a", "llama3-8b", 1e9, request=24)
    with pytest.raises(ValueError, match="request=24 is not a feasible allocation"):
        sch.simulate([bad], {"7b-a": curves["7b-a"]}, N, "fcfs")
    with pytest.raises(ValueError, match="model="):
        sch.Job("x", 3, 1e9)
    with pytest.raises(ValueError, match="increasing"):
        sch.ScalingCurve([16, 8], [1.0, 2.0], 1.0, 1.0)
