"""The chapter's workload with the planner's own scaling curves (one search per job and size).

Slower than tests/test_scheduling.py (the curves are real planner searches, cached per process),
so the properties that need no planner are checked there.
"""

import pytest

from scaling_lib import scheduling as sch

N = 1024


@pytest.fixture(scope="module")
def workload():
    jobs = sch.example_workload()
    return jobs, {j.name: sch.scaling_curve(j, "a100-80gb", n_gpus=N) for j in jobs}


def test_curves_come_from_the_planner_and_bend(workload):
    jobs, curves = workload
    for j in jobs:
        c = curves[j.name]
        assert c.sizes.tolist() == [8, 16, 32, 64, 128, 256, 512, 1024]
        ok = c.tokens_per_s > 0
        assert ok[-1] and all(p is not None for p, fits in zip(c.plans, ok) if fits)
        assert all(p.plan.world_size == n for p, n in zip(c.plans, c.sizes) if p is not None)
        mfu = c.mfu()[ok]
        assert 0 < mfu.max() < 1
        assert mfu[-1] <= mfu.max()  # no better at the full cluster than at its best size
    assert curves["70b"].min_size() > 8  # 70B's training state does not fit on one node


@pytest.mark.parametrize("replan_min", [0, 10, 60, 720])
def test_guided_average_completion_beats_fcfs_and_proportional_on_the_chapter_workload(
        workload, replan_min):
    jobs, curves = workload
    out = sch.compare(jobs, curves, N, replan_cost=replan_min * 60)
    g = out["guided"].average_completion
    assert g <= out["fcfs"].average_completion * (1 + 1e-9)
    assert g <= out["proportional"].average_completion * (1 + 1e-9)


def test_a_lone_job_gets_the_planners_best_allocation(workload):
    jobs, curves = workload
    job = jobs[1]
    alone = sch.Job(job.name, job.model, job.tokens, global_batch=job.global_batch)
    s = sch.simulate([alone], {job.name: curves[job.name]}, N, "guided")
    assert {x.gpus for x in s.segments} == {curves[job.name].best_size(N)}
