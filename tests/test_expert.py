"""parallelism.expert: capacity, routing, AllToAll volume, memory, constraints, limits."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaling_lib import models, transformer
from scaling_lib.models import TransformerConfig
from scaling_lib.parallelism import ParallelPlan, collectives, constraints, expert, totals

TINY = TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64, E=4, k=2, F_expert=32)


def test_published_total_and_active_parameters():
    """DeepSeek-V3 Technical Report (arXiv 2412.19437), abstract: 671B total, 37B activated per
    token (the 671B counts the main model without the 14B multi-token-prediction module);
    Mixtral of Experts (Jiang et al. 2024, arXiv 2401.04088) section 2: 47B total, 13B active."""
    ds = models.get("deepseek-v3")
    assert round(transformer.n_params(ds) / 1e9) == 671
    # 37.55B with both vocabulary tables; the report's 37B rounds down
    assert int(transformer.n_params(ds, active=True) / 1e9) == 37
    mx = models.get("mixtral-8x7b")
    assert round(transformer.n_params(mx) / 1e9) == 47
    assert round(transformer.n_params(mx, active=True) / 1e9) == 13


@given(n=st.integers(1, 10_000), E=st.integers(2, 64), cf=st.floats(0.1, 8.0))
@settings(max_examples=200, deadline=None)
def test_capacity_bounds(n, E, cf):
    k = min(2, E)
    C = expert.capacity(n, E, k, cf)
    assert 1 <= C <= n
    assert C >= min(cf * k * n / E - 1e-6, n)
    assert expert.capacity(n, E, k, None) == n


def test_capacity_factor_validated():
    with pytest.raises(ValueError, match="capacity_factor"):
        TINY.with_changes(capacity_factor=0.0)
    with pytest.raises(ValueError, match="MoE models only"):
        TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64, capacity_factor=1.25)
    with pytest.raises(ValueError, match="k=3 active experts cannot exceed E=2"):
        expert.capacity(16, 2, 3, 1.0)


def test_keep_mask_keeps_at_most_capacity_and_first_choices_first():
    rng = np.random.default_rng(1)
    E, k, n = 8, 2, 200
    experts, gates = expert.route(rng.standard_normal((n, E)), k)
    np.testing.assert_allclose(gates.sum(1), 1.0)
    assert (gates[:, 0] >= gates[:, 1]).all()
    for C in (5, 20, 50, n):
        keep = expert.keep_mask(experts, E, C)
        kept = np.bincount(experts[keep], minlength=E)
        loads = expert.expert_loads(experts, E)
        np.testing.assert_array_equal(kept, np.minimum(loads, C))
        assert (~keep).sum() == expert.dropped_tokens(loads, C)
    # a second choice is never kept while a first choice to the same expert is dropped
    keep = expert.keep_mask(experts, E, 10)
    for e in range(E):
        if (~keep[:, 0] & (experts[:, 0] == e)).any():
            assert not (keep[:, 1] & (experts[:, 1] == e)).any()


def test_imbalance():
    assert expert.imbalance([5, 5, 5, 5]) == 1.0
    assert expert.imbalance([8, 0, 0, 0]) == 4.0
    with pytest.raises(ValueError, match="at least one token"):
        expert.imbalance([0, 0])


def test_all_to_all_bytes_dropless_and_capped():
    a, n, ep = 2, 64, 4
    assert expert.all_to_all_bytes(TINY, n, ep) == ep * a * TINY.k * n * TINY.D
    capped = TINY.with_changes(capacity_factor=1.25)
    C = expert.capacity(16, 4, 2, 1.25)  # 10 slots per expert and 16-token group
    assert expert.all_to_all_bytes(capped, n, ep, group_tokens=16) == ep * a * 4 * 4 * C * 32
    # capacity factor E/k: static buffers of n slots per expert, E/k times the dropless volume
    full = TINY.with_changes(capacity_factor=TINY.E / TINY.k)
    assert expert.all_to_all_bytes(full, n, ep) == TINY.E / TINY.k * \
        expert.all_to_all_bytes(TINY, n, ep)


def test_comms_per_step():
    plan = ParallelPlan(dp=4, ep=2, tp=2, micro_batch=1)  # m = 2 micro-batches of b = 1
    got = expert.comms(TINY, plan, 8, 16, dtype="f32")
    a2a = [c for c in got if c.kind == "all-to-all"]
    assert {(c.axis, c.group_size, c.phase) for c in a2a} == {("ep", 2, "forward"),
                                                             ("ep", 2, "backward")}
    assert sum(c.count for c in a2a) == 4 * TINY.n_moe_layers * 2
    assert {c.nbytes for c in a2a} == {2 * 4 * TINY.k * 16 * TINY.D}
    router = [c for c in got if c.kind == "all-reduce"]
    assert [(c.axis, c.nbytes, c.count) for c in router] == [("tp", 4 * 32 * 4, 2 * 2)]
    assert expert.comms(TINY, ParallelPlan(dp=2), 8, 16) == []  # ep = 1, tp = 1
    dense = TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64)
    assert expert.comms(dense, ParallelPlan(tp=2, micro_batch=8), 8, 16) == []


def test_collectives_includes_expert_and_expert_gradients_reduce_over_dp_over_ep():
    plan = ParallelPlan(dp=8, ep=4)
    tot = totals(collectives(TINY, plan, 8, 16, dtype="f32"))
    assert ("all-to-all", 4) in tot
    assert ("all-reduce", 2) in tot and ("all-reduce", 8) in tot  # experts: dp/ep = 2 ranks


def test_memory_experts_shard_over_ep():
    full = expert.memory("mixtral-8x7b", ParallelPlan(dp=8), 8, 4096)
    split = expert.memory("mixtral-8x7b", ParallelPlan(dp=8, ep=8), 8, 4096)
    for k in full:
        assert split[k] == pytest.approx(full[k] / 8)
    assert full["expert parameters"] == 2 * transformer.param_count("mixtral-8x7b")["experts"]
    zero = expert.memory("mixtral-8x7b", ParallelPlan(dp=16, ep=8, zero=1), 16, 4096)
    assert zero["expert optimizer"] == pytest.approx(split["expert optimizer"] / 2)


def test_constraints():
    assert expert.constraints(TINY, ParallelPlan(dp=4, ep=4), 8, 16) == []
    dense = TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64)
    assert "dense" in constraints(dense, ParallelPlan(dp=2, ep=2), 8, 16)[0]
    six = TINY.with_changes(E=6)
    assert constraints(six, ParallelPlan(dp=4, ep=4), 8, 16) == [
        "ep=4 does not divide E=6 experts; choose ep in [1, 2, 3, 6]"]
    with pytest.raises(ValueError, match="ep=4 does not divide"):
        collectives(six, ParallelPlan(dp=4, ep=4), 8, 16)
    with pytest.raises(ValueError, match="ep=3 must divide dp"):
        ParallelPlan(dp=4, ep=3)


def test_compute_bound_limits():
    # H100: 989 TFLOP/s dense bf16 over 3.35 TB/s (the hardware table) ≈ 295 tokens per expert
    assert expert.critical_tokens_per_expert("h100") == pytest.approx(295, abs=1)
    ds = models.get("deepseek-v3")
    assert expert.min_tokens_for_compute_bound(ds, "h100") == pytest.approx(
        ds.E / ds.k * expert.critical_tokens_per_expert("h100"))
    assert expert.tokens_per_expert(ds, 256) == 8.0
    t1, c1 = expert.layer_times(ds, 4096, 8, "h100", 50e9)
    t2, c2 = expert.layer_times(ds, 8192, 8, "h100", 50e9, imbalance=1.5)
    assert t2 == pytest.approx(3 * t1) and c2 == pytest.approx(2 * c1)
    with pytest.raises(ValueError, match="imbalance"):
        expert.layer_times(ds, 4096, 8, "h100", 50e9, imbalance=0.5)
    with pytest.raises(ValueError, match="dense"):
        expert.tokens_per_expert("llama3-8b", 1024)


def test_figure_drop_curves():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scaling_lib.course.widgets import expert as fig_mod

    for skew in fig_mod.SKEWS:
        d = fig_mod.drop_curve(1024, 16, 2, skew)
        assert d[0] > 0 and np.all(np.diff(d) <= 1e-12) and np.all((d >= 0) & (d <= 1))
    # dropping stops exactly where the capacity factor reaches the imbalance
    loads = expert.expert_loads(expert.toy_router(1024, 16, 2, skew=1.0), 16)
    cf = expert.imbalance(loads)
    assert expert.dropped_tokens(loads, expert.capacity(1024, 16, 2, cf)) == 0
    assert expert.dropped_tokens(loads, expert.capacity(1024, 16, 2, 0.97 * cf)) > 0
    f, (a, b) = plt.subplots(1, 2)
    fig_mod.plot_routing(a, b, n=512)
    assert len(a.patches) == 2 * 16 and len(b.lines) == len(fig_mod.SKEWS) + 1
    plt.close(f)


def test_active_expert_params_split_routed_and_shared():
    for name in ("mixtral-8x7b", "deepseek-v3"):
        c = models.get(name)
        b = expert.active_expert_params(c)
        assert b["routed"] == transformer.active_param_count(c)["experts"]
        assert b["shared"] == c.n_moe_layers * c.n_shared_experts * 3 * c.D * c.F_e


def test_moe_layers_counted_on_the_first_stage_only():
    """pp = 2: the first stage holds half the layers, so half the AllToAlls (was: every MoE
    layer on every stage, 2x); with dense first layers it holds fewer MoE layers."""
    from scaling_lib.parallelism import expert as ex
    from scaling_lib.parallelism import ParallelPlan as PP

    cfg = models.get("mixtral-8x7b")
    one = ex.comms(cfg, PP(dp=8, ep=8), 64, 4096)
    two = ex.comms(cfg, PP(dp=8, ep=8, pp=2), 64, 4096)
    assert [c.count for c in two] == [c.count // 2 for c in one]
    ds = models.get("deepseek-v3")
    assert ex.stage_moe_layers(ds, 1) == ds.L - ds.n_dense_layers
    assert ex.stage_moe_layers(ds, 2) == -(-ds.L // 2) - ds.n_dense_layers
    assert ex.stage_moe_layers(ds.with_changes(n_dense_layers=40), 2) == 0


def test_dropless_dispatch_ragged_vs_padded():
    from scaling_lib.parallelism import expert as ex

    cfg = models.get("mixtral-8x7b")
    ragged = ex.all_to_all_bytes(cfg, 4096, 8)
    assert ex.all_to_all_bytes(cfg, 4096, 8, dispatch="padded") == cfg.E / cfg.k * ragged
    capped = cfg.with_changes(capacity_factor=1.25)
    assert ex.all_to_all_bytes(capped, 4096, 8) == \
        ex.all_to_all_bytes(capped, 4096, 8, dispatch="padded")
    with pytest.raises(ValueError, match="dispatch='sparse'; valid choices: ragged, padded"):
        ex.all_to_all_bytes(cfg, 4096, 8, dispatch="sparse")
