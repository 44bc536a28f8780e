"""Context parallelism in one real training step on simulated CPU devices.

For each variant (all-gather K/V, ring attention, Ulysses), alone, with gradient accumulation,
with sequence parallelism, and on a 2x2x2 (dp, cp, tp) mesh: (1) the loss, the gradients and
the updated parameters equal the single-device step in float32 (normwise relative difference
below 1e-5 per array); (2) the bytes per (collective kind, group size) that XLA compiled equal
``parallelism.collectives`` for the same cfg, plan, B, T and dtype.

XLA:CPU rewrites: none needed a correction here (measured on jax 0.10.2). The all-reduce
combiner merges the gradient AllReduces, and on the 2x2x2 mesh the tp and cp groups both have
two members, so their all-reduces share one (kind, group size) key: totals are unchanged, and
``test_cp_collectives_run_over_the_cp_groups`` checks the replica groups themselves. The ring's
cp - 1 collective-permutes per layer stay separate (no CSE: each sends a different block), and
so do the transposes ``jax.grad`` derives for the backward pass (reduce-scatter for the
all-gather, reverse permutes for the ring, all-to-alls for Ulysses); the tuple-form all-to-all
is read as one array (``simulate.full_array_bytes``).
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

CFG = TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64, name="tiny")  # GQA: 2 q per kv
CFG_MHA = CFG.with_changes(K=4)  # Ulysses at cp = 4 (or tp 2 x cp 2) needs 4 kv heads
B, T = 8, 16
RTOL = 1e-5

PLANS = {  # name: (cfg, plan)
    "allgather-cp2": (CFG, ParallelPlan(cp=2, micro_batch=8)),
    "ring-cp2": (CFG, ParallelPlan(cp=2, micro_batch=8, cp_variant="ring")),
    "ulysses-cp2": (CFG, ParallelPlan(cp=2, micro_batch=8, cp_variant="ulysses")),
    "allgather-dp2-cp4": (CFG, ParallelPlan(dp=2, cp=4, micro_batch=4)),
    "ring-dp2-cp4-accumulate": (CFG, ParallelPlan(dp=2, cp=4, micro_batch=2, cp_variant="ring")),
    "ulysses-dp2-cp4": (CFG_MHA, ParallelPlan(dp=2, cp=4, micro_batch=4, cp_variant="ulysses")),
    # K = 2 kv heads on cp = 4 ranks: each replicated twice before the AllToAll
    "ulysses-cp4-kv-replicated": (CFG, ParallelPlan(dp=2, cp=4, micro_batch=4,
                                                    cp_variant="ulysses")),
    "allgather-2x2x2": (CFG, ParallelPlan(dp=2, cp=2, tp=2, micro_batch=4)),
    "ring-2x2x2-sp": (CFG, ParallelPlan(dp=2, cp=2, tp=2, micro_batch=2, cp_variant="ring",
                                        sequence_parallel=True)),
    "ulysses-2x2x2": (CFG_MHA, ParallelPlan(dp=2, cp=2, tp=2, micro_batch=4,
                                            cp_variant="ulysses")),
}


@pytest.fixture(scope="module")
def references():
    return {cfg: sim.train_step(cfg, ParallelPlan(), B=B, T=T) for cfg in (CFG, CFG_MHA)}


def rel_err(got, want) -> float:
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


@pytest.mark.parametrize("name", list(PLANS))
def test_cp_step_equals_one_device_and_collectives_match_prediction(name, references):
    cfg, plan = PLANS[name]
    ref = references[cfg]
    r = sim.train_step(cfg, plan, B=B, T=T)
    for k in r.params:
        np.testing.assert_array_equal(r.params[k], ref.params[k])
    err = {"loss": abs(r.loss - ref.loss) / abs(ref.loss),
           "grads": max(rel_err(r.grads[k], ref.grads[k]) for k in ref.grads),
           "params": max(rel_err(r.updated_params[k], ref.updated_params[k])
                         for k in ref.updated_params)}
    assert max(err.values()) < RTOL, err
    predicted = totals(sim.expected_collectives(cfg, plan, B, T, dtype="f32"))
    assert sim.emitted_totals(r.collectives) == predicted
    cp_kind = {"allgather": "all-gather", "ring": "collective-permute",
               "ulysses": "all-to-all"}[plan.cp_variant]
    assert (cp_kind, plan.cp) in predicted


def test_cp_collectives_run_over_the_cp_groups():
    """Mesh (dp, cp, tp) with tp innermost: device = 4·dp + 2·cp + tp, so the cp groups are
    {0, 2}, {1, 3}, {4, 6}, {5, 7}; the gradient AllReduce spans dp·cp = {0, 2, 4, 6}, ..."""
    r = sim.train_step(*PLANS["allgather-2x2x2"], B=B, T=T)
    groups = {c.kind: set(c.replica_groups) for c in r.collectives
              if c.kind in ("all-gather", "reduce-scatter")}
    cp_groups = {(0, 2), (1, 3), (4, 6), (5, 7)}
    assert groups == {"all-gather": cp_groups, "reduce-scatter": cp_groups}
    assert any(set(c.replica_groups) == {(0, 2, 4, 6), (1, 3, 5, 7)}
               for c in r.collectives if c.kind == "all-reduce")


def test_ring_program_permutes_cp_minus_one_times_per_layer():
    from scaling_lib.simulate import step

    cp = 4
    jaxpr = str(step.traced(CFG, ParallelPlan(cp=cp, micro_batch=8, cp_variant="ring"), B, T))
    # the traced step holds the forward permutes and their transposes (the backward's)
    assert jaxpr.count("ppermute[") == 2 * (cp - 1) * CFG.L


def test_cp_with_zero_is_refused_naming_it():
    with pytest.raises(ValueError, match="cp=2 with zero=3"):
        sim.train_step(CFG, ParallelPlan(dp=2, cp=2, zero=3), B=B, T=T)
    with pytest.raises(ValueError, match="ulysses: N=4 query heads"):
        sim.train_step(CFG, ParallelPlan(cp=8, micro_batch=8, cp_variant="ulysses"), B=B, T=T)


def test_ring_backward_sends_kv_again_in_the_model_not_in_the_program():
    """Ring attention's backward: the model (Transformer Engine) sends the K/V block and the
    dK/dV block at each of the cp - 1 steps, twice the forward's bytes; the compiled program
    keeps the forward's blocks (autodiff) and sends dK/dV only, the forward's bytes."""
    cfg, plan = PLANS["ring-cp2"]
    r = sim.train_step(cfg, plan, B=B, T=T)
    model = collectives(cfg, plan, B, T, dtype="f32")
    fwd = sum(c.nbytes * c.count for c in model if c.axis == "cp" and c.phase == "forward")
    bwd = sum(c.nbytes * c.count for c in model if c.axis == "cp" and c.phase == "backward")
    assert bwd == 2 * fwd
    emitted = sim.emitted_totals(r.collectives)[("collective-permute", plan.cp)]
    assert emitted == 2 * fwd  # forward + dK/dV
    assert sim.differences(cfg, plan) == ("ring-kv-kept",)


def test_ulysses_replicates_kv_heads_beyond_k():
    """cp = 4 > K = 2: the model's AllToAll carries max(K, cp) = 4 kv heads' bytes, as the
    compiled program does (and twice the K and V bytes of K = 2 heads)."""
    from scaling_lib.parallelism import context

    cfg, plan = PLANS["ulysses-cp4-kv-replicated"]
    assert context.ulysses_kv_heads(cfg, plan.cp) == 4.0
    model = collectives(cfg, plan, B, T, dtype="f32")
    a, b = 4.0, plan.micro_batch
    qkv = a * b * T * (cfg.N + 2 * 4) * cfg.H
    assert {c.nbytes for c in model if c.kind == "all-to-all"} == {qkv, a * b * T * cfg.N * cfg.H}
