"""parallelism.estimate: the scalar and vectorised paths agree, the parts add up, physics holds."""

import numpy as np
import pytest

from scaling_lib import hardware, memory, models, transformer
from scaling_lib.parallelism import ParallelPlan, StepEstimate, estimate, estimate_arrays
from scaling_lib.parallelism.estimate import OUTPUTS, Calibration, plan_arrays
from scaling_lib.parallelism.kernels import _gemm_time

GPT = models.gpt(24, 2048, 16, V=51200, T_max=2048, name="gpt-1.3b")
PLANS = [
    ParallelPlan(dp=8),
    ParallelPlan(dp=2, tp=4, micro_batch=2, recompute="full"),
    ParallelPlan(dp=2, tp=2, pp=4, micro_batch=1, recompute="selective",
                 sequence_parallel=True),
    ParallelPlan(dp=1, tp=2, pp=4, virtual_stages=2, schedule="interleaved"),
    ParallelPlan(dp=4, tp=2, pp=2, zero=1, schedule="gpipe"),
    ParallelPlan(dp=8, tp=1, zero=3, micro_batch=2),
    ParallelPlan(dp=2, tp=2, cp=4, recompute="full"),
]


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: f"dp{p.dp}tp{p.tp}pp{p.pp}cp{p.cp}")
def test_scalar_and_vectorised_paths_agree(plan):
    cluster = hardware.cluster("h100", 64)
    e = estimate(GPT, cluster, plan, 64, 2048)
    assert isinstance(e, StepEstimate)
    many = estimate_arrays(GPT, cluster, plan_arrays(PLANS), 64, 2048)
    i = PLANS.index(plan)
    for k in OUTPUTS:
        want = getattr(e, k) if k != "memory_bytes" else e.memory.total
        assert np.isclose(float(many[k][i]), float(want), rtol=1e-9), k


def test_parts_add_up_and_fractions():
    cluster = hardware.cluster("a100-80gb", 16)
    for plan in PLANS:
        e = estimate(GPT, cluster, plan, 64, 2048)
        total = e.compute_time + e.exposed_comm_time + e.bubble_time + e.optimizer_time
        assert np.isclose(total, e.step_time)
        assert 0 < e.mfu <= e.hfu < 1
        assert np.isclose(e.tokens_per_s, 64 * 2048 / e.step_time)
        assert all(c.exposed <= c.time + 1e-15 for c in e.comms)


def test_full_recomputation_costs_a_third_more_compute_and_hfu_counts_it():
    c = hardware.cluster("h100", 8)
    none = estimate(GPT, c, ParallelPlan(dp=8, micro_batch=4), 64, 2048)
    full = estimate(GPT, c, ParallelPlan(dp=8, micro_batch=4, recompute="full"), 64, 2048)
    assert 1.2 < full.compute_time / none.compute_time < 1.34
    assert np.isclose(full.hfu / full.mfu, float(
        transformer.train_flops(GPT, 64, 2048, recompute="full") /
        transformer.train_flops(GPT, 64, 2048)))
    assert full.memory["activations"] < none.memory["activations"]


def test_bubble_follows_the_schedule():
    c = hardware.cluster("h100", 8)
    e = estimate(GPT, c, ParallelPlan(pp=4, dp=2), 16, 2048)  # m = 8 micro-batches
    frac = e.bubble_time / (e.bubble_time + e.compute_time)
    assert 0.15 < frac < 3 / 11 + 0.01  # (p-1)/(m+p-1) = 3/11 of the layers (not the head)
    v2 = estimate(GPT, c, ParallelPlan(pp=4, dp=2, virtual_stages=2, schedule="interleaved"),
                  16, 2048)
    assert v2.bubble_time < e.bubble_time * 0.6


def test_gemm_efficiency_grows_with_size():
    acc = hardware.get("a100-80gb")
    cal = Calibration(kernel_time=0.0)
    effs = []
    for n in (64, 256, 1024, 8192):
        t = float(_gemm_time(8192, n, n, 1, acc, 2, cal))
        effs.append(2 * 8192 * n * n / t / acc.peak_flops_per_s("bf16"))
    assert effs == sorted(effs) and effs[-1] > 0.75 * cal.gemm_efficiency


def test_tp_across_nodes_is_slow():
    c = hardware.cluster("h100", 16)
    inside = estimate(GPT, c, ParallelPlan(dp=2, tp=8), 32, 2048)
    across = estimate(GPT, c, ParallelPlan(dp=1, tp=16), 32, 2048)
    assert across.exposed_comm_time > 2 * inside.exposed_comm_time


@pytest.mark.parametrize("plan", [
    ParallelPlan(dp=4, tp=2, pp=1, micro_batch=2, recompute="selective"),
    ParallelPlan(dp=2, tp=2, pp=2, zero=1),
    ParallelPlan(dp=8, zero=3, shard_group=2),
    ParallelPlan(dp=2, pp=4, zero=3, reshard_after_forward=False, pp_layout="light_ends")])
def test_memory_is_the_memory_module(plan):
    """One memory model (issue 19): estimate's memory is memory.training_memory, part by part."""
    e = estimate(GPT, hardware.cluster("h100", 8), plan, 64, 2048)
    ref = memory.training_memory(GPT, plan, 64, 2048)
    got, want = dict(e.memory.items()), dict(ref.items())
    for part in set(got) | set(want):  # the scalar Breakdown leaves out parts that are zero
        assert got.get(part, 0.0) == pytest.approx(want.get(part, 0.0), rel=1e-12), part
    assert e.memory["parameters"] > 0 and e.memory["activations"] > 0
    assert e.fits == (e.memory.total <= hardware.get("h100").hbm_bytes)


def test_bad_plans_raise_readable_errors():
    c = hardware.cluster("h100", 8)
    with pytest.raises(ValueError, match="devices"):
        estimate(GPT, c, ParallelPlan(dp=16), 64, 2048)
    with pytest.raises(ValueError, match="multiple of dp"):
        estimate(GPT, c, ParallelPlan(dp=8, micro_batch=3), 64, 2048)
    with pytest.raises(ValueError, match="plans is missing"):
        estimate_arrays(GPT, c, {"dp": np.array([1])}, 8, 2048)
    with pytest.raises(ValueError, match="fraction"):
        Calibration(gemm_efficiency=1.5)


def test_vectorised_path_is_fast():
    import time

    n = 20000
    rng = np.random.default_rng(0)
    plans = plan_arrays([ParallelPlan()])
    plans = {k: np.repeat(v, n) for k, v in plans.items()}
    plans["tp"] = 2 ** rng.integers(0, 4, n)
    plans["pp"] = 2 ** rng.integers(0, 4, n)
    plans["micro_batch"] = 2 ** rng.integers(0, 3, n)
    t = time.perf_counter()
    r = estimate_arrays("llama3-70b", hardware.cluster("h100", 1024), plans, 1024, 4096)
    assert time.perf_counter() - t < 2.0
    assert r["step_time"].shape == (n,) and np.all(r["step_time"] > 0)


def test_estimate_times_collectives_with_the_collectives_module():
    """The estimator keeps no copy of the collective cost model: links.group_time is
    collectives.group_time with the calibration (issue 19: one home per quantity)."""
    from scaling_lib.collectives import group_time
    from scaling_lib.parallelism import links
    from scaling_lib.parallelism.calibration import DEFAULT_CALIBRATION as cal

    c = hardware.cluster("h100", 64)
    for kind in ("all-gather", "reduce-scatter", "all-reduce", "all-to-all"):
        for n in (2, 8, 64):
            want = group_time(kind, 1e8, n, 1, c, calibration=cal)
            assert np.isclose(links.group_time(kind, 1e8, n, 1, c, cal), want)


@pytest.mark.parametrize("pp,m,v,kind", [(4, 8, 1, "1f1b"), (4, 8, 1, "gpipe"), (8, 16, 2, "interleaved"),
                                         (2, 4, 1, "1f1b")])
def test_busy_plus_bubble_is_the_schedule_generators_makespan(pp, m, v, kind):
    """With uniform stages, the closed form the estimator uses (busy / (1 - bubble)) equals the
    makespan of parallelism.pipeline's simulated schedule."""
    from scaling_lib.parallelism import pipeline, pipeline_bubble_fraction

    t_fwd, t_bwd = 1.0, 2.0
    busy = m * (t_fwd + t_bwd)
    frac = pipeline_bubble_fraction(pp, m, v, kind)
    assert np.isclose(busy / (1 - frac), pipeline.step_time(pp, m, v=v, kind=kind,
                                                            t_fwd=t_fwd, t_bwd=t_bwd))
