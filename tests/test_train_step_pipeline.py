"""A real pipelined training step on simulated CPU devices: GPipe and 1F1B, alone and with data
and tensor parallelism on a 2x2x2 mesh (pp=2, tp=2, dp=2), and interleaved 1F1B on that mesh.

For each plan: (1) the loss, the gradients and the updated parameters equal the single-device
step in float32 (normwise relative difference below 1e-5 per array); (2) the bytes per
(collective kind, group size) that XLA compiled equal ``parallelism.collectives``.

Accounted for explicitly (see ``simulate.pipeline.as_spmd_compiles``, which names each term):
the SPMD program runs the same code on every stage, in ticks. With pp = 2 alone the compiled
program equals the per-stage model with no correction (asserted below). Otherwise:
- dp: every stage holds (and all-reduces the gradient of) the final norm and the output layer,
  which a real pipeline keeps on its last stage; the model reports the first stage;
- tp: the stage runs in bubble ticks too (GPipe) or is rebuilt in the backward op (1F1B), and
  the output layer and loss run on every stage, so the tp all-reduces are counted per tick;
- pp with p > 2: a ppermute per tick in which any stage sends, not per micro-batch.
The XLA:CPU all-reduce combiner merges all-reduces into tuples; totals are unchanged.
"""

import tempfile

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from scaling_lib import simulate as sim  # noqa: E402
from scaling_lib.models import TransformerConfig  # noqa: E402
from scaling_lib.parallelism import ParallelPlan, collectives, totals  # noqa: E402
from scaling_lib.simulate import pipeline as sim_pipeline  # noqa: E402

sim.use_cpu_devices(8)
jax.config.update("jax_compilation_cache_dir", tempfile.mkdtemp(prefix="scaling_lib_jax_"))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)

CFG = TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64, name="tiny")
B, T = 8, 16
RTOL = 1e-5

PLANS = {
    "pp2-gpipe": ParallelPlan(pp=2, schedule="gpipe", micro_batch=2),
    "pp2-1f1b": ParallelPlan(pp=2, micro_batch=4),
    "dp2-pp2-tp2-gpipe": ParallelPlan(dp=2, pp=2, tp=2, schedule="gpipe", micro_batch=2),
    "dp2-pp2-tp2-1f1b": ParallelPlan(dp=2, pp=2, tp=2, micro_batch=2),
}


@pytest.fixture(scope="module")
def reference():
    return sim.train_step(CFG, ParallelPlan(), B=B, T=T)


def rel_err(got, want) -> float:
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


INTERLEAVED = ParallelPlan(dp=2, pp=2, tp=2, schedule="interleaved", virtual_stages=2,
                           micro_batch=2)  # on a 4-layer model: 2 chunks of 1 layer per device


@pytest.fixture(scope="module")
def reference4():
    return sim.train_step(CFG.with_changes(L=4), ParallelPlan(), B=B, T=T)


@pytest.mark.parametrize("name", list(PLANS) + ["dp2-pp2-tp2-interleaved"])
def test_pipelined_step_equals_one_device_and_collectives_match(name, request):
    plan, cfg = PLANS.get(name, INTERLEAVED), CFG
    if name not in PLANS:
        cfg = CFG.with_changes(L=4)
    reference = request.getfixturevalue("reference4" if cfg.L == 4 else "reference")
    r = sim.train_step(cfg, plan, B=B, T=T)
    assert set(r.grads) == set(reference.grads) == set(r.updated_params)
    for k in r.params:
        np.testing.assert_array_equal(r.params[k], reference.params[k])
    assert abs(r.loss - reference.loss) / abs(reference.loss) < RTOL
    for k in reference.grads:
        assert rel_err(r.grads[k], reference.grads[k]) < RTOL, k
        assert rel_err(r.updated_params[k], reference.updated_params[k]) < RTOL, k
    model = collectives(cfg, plan, B, T, dtype="f32")
    emitted = sim.emitted_totals(r.collectives)
    assert emitted == totals(sim_pipeline.as_spmd_compiles(model, cfg, plan, B, T))
    assert emitted == totals(sim.expected_collectives(cfg, plan, B, T, dtype="f32"))
    if plan.virtual_stages == 1:  # the point-to-point traffic is the model's, uncorrected
        assert emitted[("collective-permute", 2)] == totals(model)[("collective-permute", 2)]
    if plan.dp == plan.tp == 1:  # pp alone: no correction at all
        assert emitted == totals(model)


def test_four_stages_send_per_tick():
    """pp = 4 (a 4-layer model): the GPipe program sends in m + p - 2 ticks each way; still
    equal to the single-device step."""
    cfg = CFG.with_changes(L=4)
    plan = ParallelPlan(pp=4, schedule="gpipe", micro_batch=4)
    ref = sim.train_step(cfg, ParallelPlan(), B=B, T=T)
    r = sim.train_step(cfg, plan, B=B, T=T)
    assert abs(r.loss - ref.loss) / ref.loss < RTOL
    assert max(rel_err(r.grads[k], ref.grads[k]) for k in ref.grads) < RTOL
    m = plan.n_microbatches(B)
    assert sim_pipeline.send_ticks(4, m, "gpipe") == (m + 2, m + 2)
    emitted = sim.emitted_totals(r.collectives)
    assert emitted == totals(sim_pipeline.as_spmd_compiles(collectives(cfg, plan, B, T,
                                                                       dtype="f32"),
                                                           cfg, plan, B, T))


def test_1f1b_send_ticks_with_two_stages_are_one_per_micro_batch():
    for m in (1, 2, 4, 8):
        assert sim_pipeline.send_ticks(2, m, "1f1b") == (m, m)


def test_interleaved_placement_and_tables():
    assert sim_pipeline.placement(8, 2, 2) == [0, 1, 4, 5, 2, 3, 6, 7]
    assert sim_pipeline.placement(4, 2) == [0, 1, 2, 3]
    tab = sim_pipeline._tables(2, 2, "interleaved", 2)
    # every operation once, every send received by the next virtual stage's device
    assert (tab.op == 1).sum() == (tab.op == 2).sum() == 2 * 2 * 2
    assert tab.recv_f.sum() == tab.recv_b.sum() == 2 * (2 * 2 - 1)


@pytest.mark.parametrize("plan,named", [
    (ParallelPlan(pp=2, schedule="interleaved", virtual_stages=2, micro_batch=4),
     "L=2 layers not divisible by pp·virtual_stages = 4"),
    (ParallelPlan(pp=2, dp=2, zero=1, micro_batch=2), "zero=1 with pp > 1"),
    (ParallelPlan(pp=2, tp=2, sequence_parallel=True, micro_batch=4), "sequence_parallel")])
def test_unsupported_pipeline_plans_raise(plan, named):
    with pytest.raises(ValueError, match=named):
        sim.train_step(CFG, plan, B=B, T=T)
