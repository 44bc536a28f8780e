"""Expert parallelism in one real training step on simulated CPU devices.

For each plan of a tiny mixture-of-experts model (E = 4 experts, k = 2 active): (1) the loss,
the gradients and the updated parameters equal the single-device MoE step in float32 (normwise
relative difference below 1e-5 per array), dropless and with a capacity factor that drops
tokens; (2) the bytes per (collective kind, group size) that XLA compiled equal
``parallelism.collectives`` for the same cfg, plan, B, T and dtype.

The differences between the model and the compiled program are named in
``simulate.expected`` and applied by ``simulate.expected_collectives``:
- dropless-padded: XLA has no ragged AllToAll on CPU, so the dropless layer sends static
  buffers of C = T slots per expert and sequence (the most one expert can receive), where the
  model's default (``dispatch="ragged"``, Megatron-Core's dispatcher) counts the k·T tokens a
  ragged AllToAll moves: E/k = 2 times fewer at E = 4, k = 2
  (``test_dropless_padding_is_e_over_k``). With a capacity factor both use the same buffers.
- cpu-widening: XLA:CPU runs bf16 collectives, AllToAlls included, in f32
  (``test_bf16_all_to_alls_widened_to_f32``).
- all-reduce combiner: as in tests/test_train_step.py, all-reduces over the same groups are
  merged into tuple all-reduces; the comparison is on totals per (kind, group size).
"""

import tempfile

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from scaling_lib import simulate as sim  # noqa: E402
from scaling_lib.models import TransformerConfig  # noqa: E402
from scaling_lib.parallelism import ParallelPlan, collectives, expert, totals  # noqa: E402

sim.use_cpu_devices(8)
jax.config.update("jax_compilation_cache_dir", tempfile.mkdtemp(prefix="scaling_lib_jax_"))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)

MOE = TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64, E=4, k=2, F_expert=32,
                        name="tiny-moe")
CAPPED = MOE.with_changes(capacity_factor=1.0, name="tiny-moe-capped")
B, T = 8, 16
RTOL = 1e-5

PLANS = {
    "dp2-ep2": ParallelPlan(dp=2, ep=2, micro_batch=4),
    "dp4-ep2-accumulate": ParallelPlan(dp=4, ep=2, micro_batch=1),
    "dp4-ep4": ParallelPlan(dp=4, ep=4, micro_batch=2),
    "dp4-ep2-tp2 (2x2x2)": ParallelPlan(dp=4, ep=2, tp=2, micro_batch=2),
}


@pytest.fixture(scope="module")
def references():
    return {cfg.name: sim.train_step(cfg, ParallelPlan(), B=B, T=T) for cfg in (MOE, CAPPED)}


def rel_err(got, want) -> float:
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


def equivalence_error(r, ref) -> dict:
    return {"loss": abs(r.loss - ref.loss) / abs(ref.loss),
            "grads": max(rel_err(r.grads[k], ref.grads[k]) for k in ref.grads),
            "params": max(rel_err(r.updated_params[k], ref.updated_params[k])
                          for k in ref.updated_params)}


CASES = [(name, False) for name in PLANS] + [("dp2-ep2", True), ("dp4-ep2-tp2 (2x2x2)", True)]


@pytest.mark.parametrize("name,capped", CASES,
                         ids=[f"{n}-{'capacity-1.0' if c else 'dropless'}" for n, c in CASES])
def test_expert_parallel_step_equals_one_device(name, capped, references):
    cfg = CAPPED if capped else MOE
    plan = PLANS[name]
    ref = references[cfg.name]
    r = sim.train_step(cfg, plan, B=B, T=T)
    assert set(r.grads) == set(ref.grads) == set(r.updated_params)
    err = equivalence_error(r, ref)
    assert max(err.values()) < RTOL, err
    predicted = totals(sim.expected_collectives(cfg, plan, B, T, dtype="f32"))
    emitted = sim.emitted_totals(r.collectives)
    assert emitted == predicted
    if plan.ep > 1:  # the AllToAlls are really there: 4 per MoE layer and micro-batch
        a2a = [c for c in r.collectives if c.kind == "all-to-all"]
        assert sum(c.count for c in a2a) == 4 * cfg.n_moe_layers * plan.n_microbatches(B)
        assert {c.group_size for c in a2a} == {plan.ep}


def test_capacity_drops_tokens_and_changes_the_step(references):
    """Capacity 1.0 (C = ⌈1·2·16/4⌉ = 8 slots per expert and sequence) really drops tokens
    here, so the capped step differs from the dropless one."""
    assert expert.capacity(T, MOE.E, MOE.k, 1.0) == 8
    assert abs(references["tiny-moe"].loss - references["tiny-moe-capped"].loss) > 1e-6


def test_jax_routing_equals_the_cost_models_routing():
    """simulate.moe.route keeps exactly the (token, choice) pairs parallelism.expert.keep_mask
    keeps, with the same gates as parallelism.expert.route."""
    from scaling_lib.simulate import moe

    rng = np.random.default_rng(0)
    E, k, n, C = 8, 2, 32, 6
    logits = rng.standard_normal((n, E)).astype(np.float32)
    sent, weights = moe.route(jax, jax.numpy, jax.numpy.asarray(logits[None]), k, C)
    experts, gates = expert.route(logits, k)
    keep = expert.keep_mask(experts, E, C)
    assert (~keep).any()  # some assignments dropped at this capacity
    want_sent = np.zeros((n, E))
    want_w = np.zeros((n, E))
    for t in range(n):
        for j in range(k):
            if keep[t, j]:
                want_sent[t, experts[t, j]] = 1
                want_w[t, experts[t, j]] = gates[t, j]
    np.testing.assert_array_equal(np.asarray(sent[0]).sum(-1), want_sent)
    np.testing.assert_allclose(np.asarray(weights[0]).sum(-1), want_w, rtol=1e-6)
    assert np.asarray(sent[0]).sum(axis=(0, 2)).max() <= C  # no expert over capacity


def test_shared_and_dense_layers():
    """DeepSeek's layout in miniature: a dense first layer, then an MoE layer with one shared
    expert, on dp 2 x ep 2."""
    cfg = MOE.with_changes(n_shared_experts=1, n_dense_layers=1, name="tiny-deepseek")
    plan = ParallelPlan(dp=2, ep=2, micro_batch=4)
    ref = sim.train_step(cfg, ParallelPlan(), B=B, T=T)
    assert "layers.0.w_gate" in ref.grads and "layers.1.shared.w_gate" in ref.grads
    r = sim.train_step(cfg, plan, B=B, T=T)
    assert max(equivalence_error(r, ref).values()) < RTOL
    assert sim.emitted_totals(r.collectives) == \
        totals(sim.expected_collectives(cfg, plan, B, T, dtype="f32"))


@pytest.mark.parametrize("cfg,plan,named", [
    (MOE, ParallelPlan(dp=2, ep=2, zero=1), "zero=1"),
    (MOE, ParallelPlan(dp=2, tp=2, sequence_parallel=True, micro_batch=4), "sequence_parallel"),
    (MOE.with_changes(E=6, k=2), ParallelPlan(dp=4, ep=4, micro_batch=2), "ep=4 does not divide"),
    (TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64), ParallelPlan(dp=2, ep=2),
     "needs a mixture-of-experts model")])
def test_unsupported_expert_plans_raise_naming_them(cfg, plan, named):
    with pytest.raises(ValueError, match=named):
        sim.train_step(cfg, plan, B=B, T=T)


def test_bf16_all_to_alls_widened_to_f32():
    """As every XLA:CPU collective (simulate.CPU_PROMOTED), the bf16 AllToAlls run in f32: a bf16
    step moves the bytes of the f32 prediction."""
    plan = ParallelPlan(dp=2, ep=2, micro_batch=4)
    r = sim.train_step(CAPPED, plan, B=B, T=T, dtype="bf16")
    assert {(c.kind, c.dtype) for c in r.collectives} == {("all-to-all", "f32"),
                                                          ("all-reduce", "f32")}
    emitted = sim.emitted_totals(r.collectives)
    assert emitted == totals(collectives(CAPPED, plan, B, T, dtype="f32"))
    assert emitted != totals(collectives(CAPPED, plan, B, T, dtype="bf16"))


MORE_SHAPES = {  # MoE shapes beyond the four plans above: experts, top-k, capacity, groups
    "E8-k2-cap1.25-dp4-ep4": (MOE.with_changes(E=8, capacity_factor=1.25, name="e8k2"),
                              ParallelPlan(dp=4, ep=4, micro_batch=2)),
    "E8-k2-dropless-dp8-ep8": (MOE.with_changes(E=8, name="e8k2-dropless"),
                               ParallelPlan(dp=8, ep=8, micro_batch=1)),
    "E4-k1-dropless-dp2-ep2-tp2": (MOE.with_changes(k=1, name="e4k1"),
                                   ParallelPlan(dp=2, ep=2, tp=2, micro_batch=2)),
    "E4-k2-cap2-dp4-ep2-accumulate": (MOE.with_changes(capacity_factor=2.0, name="e4k2-cap2"),
                                      ParallelPlan(dp=4, ep=2, micro_batch=1)),
    "E4-k2-dropless-ep4-dense-first": (MOE.with_changes(L=3, n_dense_layers=1, name="dense1"),
                                       ParallelPlan(dp=4, ep=4, micro_batch=2)),
}


@pytest.mark.parametrize("name", list(MORE_SHAPES))
def test_more_moe_shapes_compile_what_the_model_says(name):
    cfg, plan = MORE_SHAPES[name]
    r = sim.train_step(cfg, plan, B=B, T=T)
    assert sim.emitted_totals(r.collectives) == \
        totals(sim.expected_collectives(cfg, plan, B, T, dtype="f32"))


def test_dropless_padding_is_e_over_k():
    """E = 4, k = 2, dropless: the compiled AllToAlls carry E/k = 2 times the model's ragged
    bytes (static buffers of T slots per expert); the model with dispatch="padded" is exact."""
    plan = PLANS["dp2-ep2"]
    r = sim.train_step(MOE, plan, B=B, T=T)
    emitted = sim.emitted_totals(r.collectives)[("all-to-all", plan.ep)]
    ragged = totals(collectives(MOE, plan, B, T, dtype="f32"))[("all-to-all", plan.ep)]
    padded = totals(collectives(MOE, plan, B, T, dtype="f32", dispatch="padded"))
    assert emitted == MOE.E / MOE.k * ragged == padded[("all-to-all", plan.ep)]
    assert sim.differences(MOE, plan) == ("dropless-padded",)
