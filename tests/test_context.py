"""parallelism.context: the context-parallel cost model (numpy only; the JAX step that checks
it against compiled programs is tests/test_train_step_context.py)."""

import math

import numpy as np
import pytest

from scaling_lib import hardware, memory, models
from scaling_lib.parallelism import ParallelPlan, collectives, context as cx, totals
from scaling_lib.models import TransformerConfig

CFG = TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64, name="tiny")


@pytest.mark.parametrize("cp", [1, 2, 4, 16])
def test_chunks_are_a_balanced_permutation(cp):
    T = 64 * cp
    order = cx.token_order(T, cp)
    assert sorted(order.tolist()) == list(range(T))
    c = T // (2 * cp)
    for i, (lo, hi) in enumerate(cx.chunk_assignment(cp)):
        assert lo + hi == 2 * cp - 1
        mine = order.reshape(cp, -1)[i]
        want = list(range(lo * c, (lo + 1) * c)) + list(range(hi * c, (hi + 1) * c))
        assert mine.tolist() == want
    pairs = cx.causal_pairs(T, cp)
    assert pairs.sum() == T * (T + 1) // 2 == cx.causal_pairs(T, cp, balanced=False).sum()
    assert np.all(pairs == pairs[0]) and cx.imbalance(T, cp) == 1.0


def test_contiguous_shards_leave_the_last_rank_most_of_the_work():
    # rank cp-1 of contiguous shards: (2cp - 1)/cp of the average, up to the diagonal's share
    for cp in (2, 4, 16):
        assert math.isclose(cx.imbalance(2**16, cp, balanced=False), (2 * cp - 1) / cp,
                            rel_tol=1e-3)


def test_comms_of_each_variant_by_hand():
    c = models.get("llama3-70b")
    B, T, a = 2, 131072, 2
    base = ParallelPlan(dp=2, tp=8, cp=16)  # one sequence per micro-batch, one micro-batch each
    k, n, H, L = 1, 8, c.H, c.L
    ag = cx.comms(c, base, B, T)
    kv = 2 * a * 1 * T * k * H
    assert [(x.kind, x.nbytes, x.count, x.axis) for x in ag] == [
        ("all-gather", kv, L, "cp"), ("reduce-scatter", kv, L, "cp")]
    ring = cx.comms(c, base.with_changes(cp_variant="ring"), B, T)
    assert {x.kind for x in ring} == {"collective-permute"}
    # forward: the K/V block, cp - 1 = 15 times per layer; backward: K/V again and dK/dV
    assert sum(x.nbytes * x.count for x in ring if x.phase == "forward") == 15 * L * kv / 16
    assert sum(x.nbytes * x.count for x in ring if x.phase == "backward") == 2 * 15 * L * kv / 16
    kept = cx.comms(c, base.with_changes(cp_variant="ring"), B, T, ring_keeps_kv=True)
    assert sum(x.nbytes * x.count for x in kept) == 2 * 15 * L * kv / 16
    uly = cx.comms(c, base.with_changes(cp_variant="ulysses", tp=1, cp=8), B, T)
    assert sum(x.nbytes * x.count for x in uly) == 2 * L * a * T * (2 * 64 + 2 * 8) * H


def test_bytes_sent_per_layer_all_gather_equals_ring_and_gqa_favours_them():
    c = models.get("llama3-70b")
    for cp in (2, 4, 8):
        ag, ring, uly = (cx.layer_bytes(c, v, cp, 8192) for v in cx.VARIANTS)
        assert math.isclose(ag, ring)
        # Ulysses / all-gather = (n + k) / (k·cp): 9 / cp for Llama 3 70B (64 q, 8 kv heads)
        assert math.isclose(uly / ag, (64 + 8) / (8 * cp))


def test_collectives_include_cp_and_the_gradient_spans_dp_times_cp():
    plan = ParallelPlan(dp=2, cp=4, micro_batch=4)
    got = collectives(CFG, plan, 8, 16, dtype="f32")
    ar = [x for x in got if x.kind == "all-reduce"]
    assert [(x.axis, x.group_size) for x in ar] == [("dp", 8)]
    assert ("all-gather", 4) in totals(got)
    z = collectives(CFG, plan.with_changes(zero=3), 8, 16, dtype="f32")
    assert {(x.kind, x.group_size) for x in z if x.axis == "dp"} == {
        ("all-gather", 8), ("reduce-scatter", 8)}


def test_constraints_name_the_rule():
    assert "2·cp = 8" in cx.constraints(CFG, ParallelPlan(cp=4), 8, 12)[0]
    assert cx.constraints(CFG, ParallelPlan(cp=2, cp_variant="ulysses"), 8, 16) == []
    # K = 2 < cp = 4: replicated, allowed; N = 4 < cp = 8: the limit
    assert cx.constraints(CFG, ParallelPlan(cp=4, cp_variant="ulysses"), 8, 16) == []
    msg = cx.constraints(CFG, ParallelPlan(cp=8, cp_variant="ulysses"), 8, 16)
    assert len(msg) == 1 and "N=4 query heads" in msg[0]
    with pytest.raises(ValueError, match="2·cp = 8"):
        collectives(CFG, ParallelPlan(cp=4), 8, 12)
    with pytest.raises(ValueError, match="cp_variant='zigzag'; valid choices: allgather, ring, "
                                         "ulysses"):
        ParallelPlan(cp=2, cp_variant="zigzag")


def test_layer_times_ring_hides_long_sequences_and_not_short_ones():
    args = ("llama3-70b", "ring", 16)
    long_ = cx.layer_times(*args, 131072, "h100", 50e9, tp=8)
    short = cx.layer_times(*args, 4096, "h100", 50e9, tp=8)
    assert long_.exposed == 0 and long_.comm > 0
    assert 0 < short.exposed < short.comm
    ag = cx.layer_times("llama3-70b", "allgather", 16, 131072, "h100", 50e9, tp=8)
    assert ag.exposed == ag.comm and ag.attention == long_.attention
    # attention grows as T², K/V traffic as T: the exposed share falls with T
    r = [cx.layer_times("llama3-70b", "allgather", 16, T, "h100", 50e9, tp=8) for T in
         (16384, 131072)]
    assert r[1].comm / r[1].attention < r[0].comm / r[0].attention / 7


def test_best_variant_skips_ulysses_when_heads_do_not_split():
    # tp=8 leaves one kv head per rank: Ulysses cannot split it over cp=2
    assert cx.best_variant("llama3-70b", 2, 8192, "h100", 450e9, tp=8) != "ulysses"
    assert cx.best_variant("llama3-70b", 8, 2048, "h100", 50e9) in cx.VARIANTS


def test_cp_for_context_is_the_smallest_that_fits():
    base = ParallelPlan(tp=8, pp=16, recompute="full")
    hbm = hardware.get("h100").hbm_bytes
    for T in (131072, 2**20):
        cp = cx.cp_for_context("llama3-405b", T, "h100", base)
        fits = memory.training_memory("llama3-405b", base.with_changes(cp=cp), 1, T).total
        assert fits <= hbm
        if cp > 1:
            half = base.with_changes(cp=cp // 2)
            assert memory.training_memory("llama3-405b", half, 1, T).total > hbm
    with pytest.raises(ValueError, match="do not fit"):
        cx.cp_for_context("llama3-405b", 2**20, 1e9, base, max_cp=4)


def test_memory_has_the_variants_attention_buffers():
    plan = ParallelPlan(cp=4)
    bufs = {v: cx.memory(CFG, plan.with_changes(cp_variant=v), 1, 64)["attention buffers"]
            for v in cx.VARIANTS}
    assert bufs["allgather"] == 2 * 2 * 64 * 2 * 8          # K and V of the whole sequence
    assert bufs["ring"] == bufs["allgather"] / 2             # two blocks of T/4
    # q and out of n = 4 heads, k and v of max(K, cp) = 4 heads (K = 2 replicated twice)
    assert bufs["ulysses"] == 2 * 64 * (2 * 4 + 2 * 4) * 8 / 4


def test_step_time_splits_compute_over_cp_and_times_every_variant():
    from scaling_lib.parallelism import steptime

    cluster = hardware.cluster("h100", 64)
    one = steptime.compute_times("llama3-8b", ParallelPlan(dp=2, tp=8), 2, 32768, "h100")
    four = steptime.compute_times("llama3-8b", ParallelPlan(dp=2, tp=8, cp=4), 2, 32768, "h100")
    assert math.isclose(one["forward"], 4 * four["forward"])
    # the step's cp time is context.comms timed by collectives.group_time (one model), on the
    # links the cp groups cross: stride tp = 8 leaves the node, tp = 1 stays on NVLink
    from scaling_lib import collectives as C
    from scaling_lib.parallelism.calibration import DEFAULT_CALIBRATION

    cfg = models.get("llama3-8b")
    for v in cx.VARIANTS:
        for plan, B, T, level in ((ParallelPlan(dp=2, tp=8, cp=4, cp_variant=v), 2, 32768,
                                   "inter-node"),
                                  (ParallelPlan(dp=16, cp=4, cp_variant=v), 16, 8192,
                                   "intra-node")):
            st = steptime.step_time(cfg, cluster, plan, B, T)
            (cp,) = [c for c in st.comms if c.comm.axis == "cp"]
            assert list(cp.levels) == [level]
            want = sum(C.group_time(x.kind, x.nbytes, x.group_size, plan.tp, cluster,
                                    calibration=DEFAULT_CALIBRATION) * x.count
                       for x in cx.comms(cfg, plan, B, T))
            assert math.isclose(cp.time, want, rel_tol=1e-9), (v, plan)


def test_cp_for_context_counts_the_micro_batches_in_flight():
    """With pipeline stages, 1F1B keeps min(pp, m) micro-batches in flight on the first stage:
    a step of 16 sequences needs more cp than one of dp = 1 sequence."""
    base = ParallelPlan(tp=8, pp=16, recompute="full")
    one = cx.cp_for_context("llama3-405b", 131072, "h100", base)
    many = cx.cp_for_context("llama3-405b", 131072, "h100", base, global_batch=16)
    assert many > one
    with pytest.raises(ValueError, match="global_batch=3 must be one multiple of dp=2"):
        cx.cp_for_context("llama3-405b", 131072, "h100", base.with_changes(dp=2), global_batch=3)
