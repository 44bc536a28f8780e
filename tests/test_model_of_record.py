"""One model of record (issue 19): each pair of functions that used to disagree agrees.

- step time: ``steptime.step_time`` is ``estimate``'s step time, on many shapes;
- valid plans: the planner's reasons, ``rules.check_arrays``, ``rules.broken`` and ``estimate``
  (raises on shape rules, lists framework rules) say the same of every plan of a space;
- pipeline send bytes: ``pipeline.comms`` and the estimate both use ``pipeline.send_bytes``;
- device order: the estimator's strides are ``mesh.strides`` (``mesh.ORDER``);
- collectives: the estimator times them with ``collectives.group_time``;
- plan fields: ``shard_group``, ``cp_variant``, ``pp_layout`` and ``reshard_after_forward``
  change the estimate.
"""

from __future__ import annotations

import numpy as np
import pytest

from scaling_lib import hardware, planner
from scaling_lib.parallelism import ParallelPlan, estimate, mesh, pipeline, rules, steptime
from scaling_lib.parallelism.estimate import plan_arrays

H100_64 = hardware.cluster("h100", 64)

SHAPES = [  # (model, plan, global batch, T)
    ("llama3-8b", ParallelPlan(dp=8), 64, 4096),
    ("llama3-8b", ParallelPlan(dp=16, tp=4, zero=1), 64, 4096),
    ("llama3-8b", ParallelPlan(dp=4, tp=2, pp=4, micro_batch=2), 64, 2048),
    ("llama3-8b", ParallelPlan(dp=8, tp=8, zero=3, shard_group=4), 32, 4096),
    ("llama3-70b", ParallelPlan(dp=2, tp=8, pp=4, virtual_stages=2, schedule="interleaved",
                                recompute="full", sequence_parallel=True), 16, 4096),
    ("llama3-70b", ParallelPlan(dp=4, tp=8, pp=2, cp=1, zero=3, reshard_after_forward=False),
     32, 4096),
    ("gpt3-175b", ParallelPlan(dp=1, tp=8, pp=8), 16, 2048),
    ("llama3-8b", ParallelPlan(dp=4, tp=4, cp=4, cp_variant="ring"), 16, 8192),
]


@pytest.mark.parametrize("cfg,plan,B,T", SHAPES)
def test_steptime_is_the_estimate(cfg, plan, B, T):
    st = steptime.step_time(cfg, H100_64, plan, B, T)
    e = estimate(cfg, H100_64, plan, B, T)
    assert st.step_time == pytest.approx(e.step_time, rel=1e-12)
    assert st.compute_time == pytest.approx(e.compute_time, rel=1e-12)
    assert float(st.memory.total) == float(e.memory.total) and st.fits == e.fits


def test_gpt3_tp8_runs_in_both_views():
    """It ran in estimate and raised in steptime before issue 19 (the vocabulary is padded)."""
    plan = ParallelPlan(dp=8, tp=8)
    assert rules.broken("gpt3-175b", plan, 64, 2048) == []
    assert steptime.step_time("gpt3-175b", H100_64, plan, 64, 2048).step_time == \
        pytest.approx(estimate("gpt3-175b", H100_64, plan, 64, 2048).step_time, rel=1e-12)


@pytest.mark.parametrize("cfg,n,B,T", [("llama3-8b", 16, 64, 4096), ("gpt3-175b", 64, 64, 2048)])
def test_planner_rules_and_estimate_agree_on_every_plan(cfg, n, B, T):
    cluster = hardware.cluster("h100", n)
    space = planner.plan_space(cfg, cluster, B, T)
    assert np.array_equal(space["reasons"], rules.check_arrays(cfg, space, B, T))
    rng = np.random.default_rng(0)
    for i in rng.choice(len(space["dp"]), 60, replace=False):
        plan = planner._plan_at(space, int(i))
        names = rules.names(int(space["reasons"][i]))
        assert names == rules.broken(cfg, plan, B, T)
        shape = [x for x in names if rules.BY_NAME[x].kind == "shape"]
        if shape:
            with pytest.raises(ValueError, match=shape[0]):
                estimate(cfg, cluster, plan, B, T)
        else:
            e = estimate(cfg, cluster, plan, B, T)
            assert list(e.rules_broken) == names


def test_megatron_refuses_what_the_planner_drops():
    """Chunks must split the layers: GPT-3's 96 layers on 8 stages of 8 chunks do not."""
    bad = ParallelPlan(dp=8, pp=8, virtual_stages=8, schedule="interleaved")
    assert rules.broken("gpt3-175b", bad, 64, 2048) == ["pp_virtual"]  # 12 layers, 8 chunks
    assert rules.broken("gpt3-175b", bad.with_changes(virtual_stages=6), 64, 2048) == []
    meta = ParallelPlan(dp=1, tp=8, pp=16, pp_layout="light_ends")  # 7 + 14 x 8 + 7 layers
    assert rules.broken("llama3-405b", meta, 16, 8192) == []
    assert "pp_split" in rules.broken("llama3-405b", meta.with_changes(pp_layout="even"), 16,
                                      8192)
    assert [int(x) for x in rules.stage_layers(126, 16, 1, "light_ends")] == [7, 8, 7]


@pytest.mark.parametrize("tp,sp", [(1, False), (8, False), (8, True), (4, False)])
def test_pipeline_send_bytes_have_one_home(tp, sp):
    plan = ParallelPlan(dp=2, tp=tp, pp=4, sequence_parallel=sp)
    got = pipeline.comms("llama3-8b", plan, 16, 4096, scatter_gather=True)
    send = pipeline.send_bytes(4096, 1, 4096, 1, tp, sequence_parallel=sp)
    assert got[0].nbytes == send == 2 * 4096 * 4096 / tp  # Megatron: 1/tp, gathered after
    full = pipeline.comms("llama3-8b", plan, 16, 4096)[0].nbytes  # what XLA compiles
    assert full == (send if sp else send * tp)


@pytest.mark.parametrize("plan", [ParallelPlan(tp=8, cp=2, pp=4, dp=2),
                                  ParallelPlan(tp=2, pp=8, dp=4), ParallelPlan(dp=64)])
def test_estimator_strides_are_the_mesh_order(plan):
    cols = plan_arrays([plan])
    got = {a: int(s[0]) for a, s in mesh._axis_strides(cols).items()}
    assert got == mesh.strides(plan) and mesh.ORDER == ("tp", "cp", "pp", "dp")


def test_device_order_moves_the_estimate():
    """dp outside pp (mesh.ORDER) against Megatron-LM's dp inside pp: a different step."""
    plan = ParallelPlan(tp=4, pp=2, dp=8)
    a = estimate("llama3-8b", H100_64, plan, 64, 4096)
    b = estimate("llama3-8b", H100_64, plan, 64, 4096, order=("tp", "cp", "dp", "pp"))
    assert a.step_time != b.step_time


def test_every_plan_field_changes_the_estimate():
    base = ParallelPlan(dp=16, tp=4, zero=3)
    e = estimate("llama3-8b", H100_64, base, 64, 4096)
    hsdp = estimate("llama3-8b", H100_64, base.with_changes(shard_group=2), 64, 4096)
    assert hsdp.memory["parameters"] > e.memory["parameters"]  # sharded over 2, not 16
    kept = estimate("llama3-8b", H100_64, base.with_changes(reshard_after_forward=False), 64,
                    4096)
    assert kept.memory.total > e.memory.total  # the stage's gathered weights stay
    cp = ParallelPlan(dp=4, tp=4, cp=4)
    t = {v: estimate("llama3-8b", H100_64, cp.with_changes(cp_variant=v), 16, 8192).step_time
         for v in ("allgather", "ring", "ulysses")}
    assert len(set(t.values())) == 3
    pipe = ParallelPlan(dp=2, tp=8, pp=4)
    even = estimate("llama3-8b", H100_64, pipe, 64, 4096)  # 32 layers: 8 per stage
    light = estimate("llama3-8b", H100_64, pipe.with_changes(pp_layout="light_ends"), 64, 4096)
    assert even.step_time != light.step_time


def test_collectives_have_one_cost_model():
    from scaling_lib.collectives import group_time
    from scaling_lib.parallelism import links
    from scaling_lib.parallelism.calibration import DEFAULT_CALIBRATION as cal

    v5p = hardware.cluster("tpu-v5p", 64)
    for cl in (H100_64, v5p):
        assert links.group_time("all-reduce", 2e9, 64, 1, cl, cal) == \
            group_time("all-reduce", 2e9, 64, 1, cl, calibration=cal)


@pytest.mark.parametrize("name, plan, B, T", SHAPES)
def test_estimate_memory_is_training_memory_part_by_part(name, plan, B, T):
    """One memory model: estimate(...).memory and memory.training_memory are the same Breakdown
    (same parts, same bytes), and fits compares it with what the driver reports."""
    from scaling_lib import memory

    cluster = hardware.cluster("h100", plan.world_size)
    e = estimate(name, cluster, plan, B, T)
    m = memory.training_memory(name, plan, B, T)
    assert list(e.memory) == list(m)
    assert [float(v) for v in e.memory.values()] == pytest.approx([float(v) for v in m.values()])
    assert e.fits == (float(m.total) <= cluster.accelerator.memory_capacity_bytes)
