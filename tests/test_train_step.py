"""One real training step on 8 simulated CPU devices, for every strategy the library models.

For each plan: (1) the loss, the gradients and the updated parameters equal the single-device
step (``ParallelPlan()``) in float32, normwise relative difference below 1e-5 per array;
(2) the bytes per (collective kind, group size) that XLA compiled equal
``parallelism.collectives`` for the same cfg, plan, B, T and dtype.

The differences between the model and the compiled program are named in one place,
``simulate.expected_collectives`` (``simulate.expected``), which each comparison calls:
- fsdp-regather-cse (zero=3): the program asks for each weight's all-gather in every
  micro-batch's forward pass and again in its backward pass (the layers are rematerialised
  without their gathered weights); XLA's CSE merges the backward re-gather into the forward
  gather of the same micro-batch (a host has no memory pressure), and
  ``test_fsdp_program_asks_for_the_regather`` shows that the traced program asks for it.
  (Loop-invariant code motion would also hoist the forward gathers out of the micro-batch
  loop; the step pins them inside with an optimization barrier, as a real FSDP gathers once
  per micro-batch.)
- sp-regather-kept (sequence parallelism): Megatron-LM gathers each column-parallel linear's
  input again in the backward pass; autodiff keeps it (``test_sp_regather_is_the_model_minus
  _the_compiled``).
- cpu-widening: XLA:CPU runs bf16 collectives in f32 (``simulate.CPU_PROMOTED``), so a bf16
  step moves the bytes of the f32 prediction (``test_bf16_collectives_widened_to_f32``).
- all-reduce combiner: the cpu-all-reduce-combiner merges all-reduces over the same groups into
  tuple all-reduces; totals per (kind, group size) are unchanged, which is why the comparison
  is on totals.

Like tests/test_simulate.py, it asks for 8 CPU devices before JAX starts (same count, so the
two modules can share a process).
"""

import tempfile

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from scaling_lib import simulate as sim  # noqa: E402
from scaling_lib.models import TransformerConfig  # noqa: E402
from scaling_lib.parallelism import ParallelPlan, collectives, totals  # noqa: E402

sim.use_cpu_devices(8)
jax.config.update("jax_compilation_cache_dir", tempfile.mkdtemp(prefix="scaling_lib_jax_"))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)

CFG = TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64, name="tiny")
B, T = 8, 16
RTOL = 1e-5

PLANS = {
    "dp8": ParallelPlan(dp=8),
    "dp2-accumulate": ParallelPlan(dp=2, micro_batch=2),
    "zero1-dp2-accumulate": ParallelPlan(dp=2, zero=1, micro_batch=2),
    "zero2-dp2-accumulate": ParallelPlan(dp=2, zero=2, micro_batch=2),
    "zero3-dp8": ParallelPlan(dp=8, zero=3),
    "hsdp-4x2": ParallelPlan(dp=8, zero=3, shard_group=4),
    "zero2-hsdp-2x2-accumulate": ParallelPlan(dp=4, zero=2, shard_group=2, micro_batch=1),
    "tp2": ParallelPlan(tp=2, micro_batch=8),
    "tp2-sp": ParallelPlan(tp=2, sequence_parallel=True, micro_batch=4),
    "dp4-tp2": ParallelPlan(dp=4, tp=2, micro_batch=2),
    "fsdp2-tp2": ParallelPlan(dp=2, tp=2, zero=3, micro_batch=4),
    "fsdp4-tp2-sp-accumulate": ParallelPlan(dp=4, tp=2, zero=3, micro_batch=1,
                                            sequence_parallel=True),
}


@pytest.fixture(scope="module")
def reference():
    return sim.train_step(CFG, ParallelPlan(), B=B, T=T)


def rel_err(got, want) -> float:
    """Normwise relative difference: max |got - want| / max |want|."""
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def equivalence_error(r, ref) -> dict:
    return {"loss": abs(r.loss - ref.loss) / abs(ref.loss),
            "grads": max(rel_err(r.grads[k], ref.grads[k]) for k in ref.grads),
            "params": max(rel_err(r.updated_params[k], ref.updated_params[k])
                          for k in ref.updated_params)}


@pytest.mark.parametrize("name", list(PLANS))
def test_step_equals_one_device_and_collectives_match_prediction(name, reference):
    plan = PLANS[name]
    r = sim.train_step(CFG, plan, B=B, T=T)
    assert set(r.grads) == set(reference.grads) == set(r.params) == set(r.updated_params)
    for k in r.params:  # the same starting point, gathered back from the devices
        np.testing.assert_array_equal(r.params[k], reference.params[k])
    err = equivalence_error(r, reference)
    assert max(err.values()) < RTOL, err
    predicted = totals(sim.expected_collectives(CFG, plan, B, T, dtype="f32"))
    assert sim.emitted_totals(r.collectives) == predicted


def test_reference_step_has_no_collectives(reference):
    assert reference.collectives == []
    assert np.isfinite(reference.loss) and reference.loss > 0
    assert collectives(CFG, ParallelPlan(), B, T) == []


def test_zero2_reduces_every_micro_batch_zero1_once():
    """With gradient accumulation, stage 2 reduce-scatters each micro-batch (it keeps only its
    shard), stage 1 once: m times the reduce-scatter bytes, in the compiled program too."""
    got = {z: sim.emitted_totals(sim.train_step(CFG, PLANS[f"zero{z}-dp2-accumulate"],
                                                B=B, T=T).collectives)
           for z in (1, 2)}
    m = ParallelPlan(dp=2, micro_batch=2).n_microbatches(B)
    assert got[2][("reduce-scatter", 2)] == m * got[1][("reduce-scatter", 2)]
    assert got[2][("all-gather", 2)] == got[1][("all-gather", 2)]


def test_adam_step_matches_too(reference):
    """Adam's first step from a fresh state, sharded by ZeRO-1: p - lr·g/(|g| + eps), with
    the reference's gradients."""
    from scaling_lib.simulate.step import EPS, LR

    r = sim.train_step(CFG, ParallelPlan(dp=4, zero=1, micro_batch=1), B=B, T=T,
                       optimizer="adam")
    err = equivalence_error(r, reference)
    assert err["loss"] < RTOL and err["grads"] < RTOL, err
    for k, g in reference.grads.items():
        want = reference.params[k] - LR * g / (np.abs(g) + EPS)
        assert rel_err(r.updated_params[k], want) < RTOL, k


def test_fsdp_program_asks_for_the_regather():
    """The rewrite accounted for above: the traced program has the backward re-gathers that
    the compiled one merges away: one all_gather per weight forward, one per weight but the
    embedding table backward (its gradient needs no weights), as fsdp.comms counts them."""
    from scaling_lib.simulate import step

    jaxpr = step.traced(CFG, ParallelPlan(dp=8, zero=3, micro_batch=1), B, T)
    n_weights = len(step._model.layout(CFG))
    assert str(jaxpr).count("all_gather[") == 2 * n_weights - 1


def test_bf16_collectives_widened_to_f32():
    plan = ParallelPlan(dp=2, tp=2, micro_batch=4)
    r = sim.train_step(CFG, plan, B=B, T=T, dtype="bf16")
    assert {c.dtype for c in r.collectives} == {"f32"}  # XLA:CPU widened every bf16 one
    emitted = sim.emitted_totals(r.collectives)
    assert emitted == totals(collectives(CFG, plan, B, T, dtype="f32"))
    assert emitted != totals(collectives(CFG, plan, B, T, dtype="bf16"))
    assert emitted == totals(sim.expected_collectives(CFG, plan, B, T, dtype="bf16"))
    assert sim.differences(CFG, plan, dtype="bf16") == ("cpu-widening",)


def test_sp_regather_is_the_model_minus_the_compiled():
    """Megatron-LM's backward re-gather (one all-gather of a·b·T·D per column-parallel linear,
    2L + 1 per micro-batch) is in the model and, by name, out of the compiled program: the
    difference of the two is exactly those all-gathers."""
    plan = PLANS["tp2-sp"]
    r = sim.train_step(CFG, plan, B=B, T=T)
    model = totals(collectives(CFG, plan, B, T, dtype="f32"))
    emitted = sim.emitted_totals(r.collectives)
    m, b = plan.n_microbatches(B), plan.micro_batch
    regather = (2 * CFG.L + 1) * m * 4.0 * b * T * CFG.D
    assert model[("all-gather", 2)] - emitted[("all-gather", 2)] == regather
    assert {k: v for k, v in model.items() if k != ("all-gather", 2)} == \
        {k: v for k, v in emitted.items() if k != ("all-gather", 2)}
    no_regather = totals(collectives(CFG, plan, B, T, dtype="f32", sp_regather=False))
    assert no_regather == emitted


@pytest.mark.parametrize("plan,named", [
    (ParallelPlan(pp=2, dp=2, zero=1), "zero=1 with pp > 1"),
    (ParallelPlan(dp=2, cp=2, zero=1), "cp=2 with zero=1"),
    (ParallelPlan(pp=2, cp=2), "cp=2 with pp > 1"),
    (ParallelPlan(dp=2, recompute="full"), "recompute='full'"),
    (ParallelPlan(tp=4, micro_batch=8), "K=2 kv heads"),
    (ParallelPlan(dp=16), "world_size=16"), (ParallelPlan(dp=3), "dp·micro_batch = 3")])
def test_unsupported_plans_raise_naming_them(plan, named):
    with pytest.raises(ValueError, match=named.replace("(", r"\(").replace(")", r"\)")):
        sim.train_step(CFG, plan, B=B, T=T)


def test_unsupported_models_raise_naming_them():
    with pytest.raises(ValueError, match="tied_embeddings"):
        sim.train_step(CFG.with_changes(tied_embeddings=True), ParallelPlan(), B=B, T=T)
    with pytest.raises(ValueError, match="cfg.E=4"):
        sim.train_step(CFG.with_changes(E=4, k=2), ParallelPlan(dp=2, zero=1), B=B, T=T)
    with pytest.raises(ValueError, match="optimizer='lion'"):
        sim.train_step(CFG, ParallelPlan(), B=B, T=T, optimizer="lion")
    with pytest.raises(ValueError, match="dtype='f16'"):
        sim.train_step(CFG, ParallelPlan(), B=B, T=T, dtype="f16")


def test_tp4_with_sequence_parallelism_and_dp2():
    """The largest tp the tiny model allows: K = 4 kv heads over 4 ranks, times dp = 2."""
    cfg = CFG.with_changes(K=4)
    plan = ParallelPlan(dp=2, tp=4, sequence_parallel=True, micro_batch=4)
    ref = sim.train_step(cfg, ParallelPlan(micro_batch=B), B=B, T=T)
    r = sim.train_step(cfg, plan, B=B, T=T)
    err = equivalence_error(r, ref)
    assert max(err.values()) < RTOL, err
    assert sim.emitted_totals(r.collectives) == \
        totals(sim.expected_collectives(cfg, plan, B, T, dtype="f32"))
