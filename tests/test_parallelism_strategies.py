"""Cost models of the parallelism strategies (data, fsdp, tensor): golden checks against the
book's formulas and the invariants between them. No JAX here; tests/test_train_step.py checks
the same functions against what XLA compiles."""

import pytest

from scaling_lib import collectives as C
from scaling_lib import memory, transformer
from scaling_lib.models import TransformerConfig
from scaling_lib.parallelism import (Comm, ParallelPlan, collectives, constraints, data, fsdp,
                                     tensor, totals)

CFG = TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64)
B, T = 8, 16


def sent(comms):
    """Bytes one device sends in these collectives (collectives.collective_bytes)."""
    return sum(C.collective_bytes(c.kind, c.nbytes, c.group_size).sent_bytes * c.count
               for c in comms)


def test_plan_of_all_ones_and_degree_one_strategies_communicate_nothing():
    assert collectives(CFG, ParallelPlan(), B, T) == []
    assert collectives(CFG, ParallelPlan(zero=3), B, T) == []
    assert collectives(CFG, ParallelPlan(sequence_parallel=True), B, T) == []


@pytest.mark.parametrize("model", ["llama3-8b", "gpt3-175b"])
def test_dp_all_reduce_is_two_bytes_per_parameter_in_bf16(model):
    (ar,) = collectives(model, ParallelPlan(dp=64, micro_batch=1), 64, 2048)
    assert (ar.kind, ar.axis, ar.group_size, ar.count) == ("all-reduce", "dp", 64, 1)
    assert ar.nbytes == 2 * transformer.n_params(model)
    # ring all-reduce sends 2 (N-1)/N of it: about 4 bytes per parameter
    assert sent([ar]) == pytest.approx(2 * 63 / 64 * 2 * transformer.n_params(model))


@pytest.mark.parametrize("zero", [1, 2])
def test_zero_1_2_move_what_dp_moves(zero):
    """ReduceScatter + AllGather = AllReduce: ZeRO-1/2 cost plain DP's traffic."""
    dp = collectives(CFG, ParallelPlan(dp=8), B, T)
    z = collectives(CFG, ParallelPlan(dp=8, zero=zero), B, T)
    assert sorted(c.kind for c in z) == ["all-gather", "reduce-scatter"]
    assert sent(z) == sent(dp)


def test_zero3_moves_one_and_a_half_times_dp_with_tied_embeddings():
    """Forward gather, backward re-gather, gradient reduce-scatter: 3 half-all-reduces (the
    untied embedding table needs no backward gather, so tie it for the exact 1.5)."""
    cfg = CFG.with_changes(tied_embeddings=True)
    plan = ParallelPlan(dp=8, micro_batch=1)
    ratio = sent(collectives(cfg, plan.with_changes(zero=3), B, T)) / sent(
        collectives(cfg, plan, B, T))
    assert ratio == pytest.approx(1.5)


def test_zero2_reduce_scatters_per_micro_batch_zero1_once():
    plan = ParallelPlan(dp=2, micro_batch=1)
    m = plan.n_microbatches(B)
    rs = {z: [c for c in collectives(CFG, plan.with_changes(zero=z), B, T)
              if c.kind == "reduce-scatter"][0] for z in (1, 2)}
    assert (rs[1].count, rs[2].count) == (1, m)


def test_hsdp_gathers_inside_the_group_and_all_reduces_the_shard_across():
    plan = ParallelPlan(dp=16, zero=3, shard_group=8, micro_batch=1)
    comms = collectives(CFG, plan, 16, T)
    got = {(c.kind, c.group_size, c.phase): c for c in comms}
    psi_bytes = 2 * transformer.n_params(CFG)
    assert got[("all-gather", 8, "forward")].nbytes == psi_bytes
    assert got[("all-gather", 8, "backward")].nbytes == psi_bytes - 2 * CFG.V * CFG.D
    assert got[("reduce-scatter", 8, "backward")].nbytes == psi_bytes
    assert got[("all-reduce", 2, "backward")].nbytes == psi_bytes / 8
    assert len(comms) == 4


def test_sequence_parallel_moves_what_tensor_parallel_moves():
    """SP turns each AllReduce of activations into ReduceScatter + AllGather of the same V:
    the same bytes on the wire, plus the small all-reduce of the norm weights' gradients, and
    (Megatron-LM's default) the backward re-gather of each column-parallel linear's input: one
    AllGather of V per column-parallel linear (half an AllReduce's bytes each)."""
    plan = ParallelPlan(tp=4, micro_batch=8)
    cfg = CFG.with_changes(N=4, K=4)
    tp = collectives(cfg, plan, B, T)
    sp_plan = plan.with_changes(sequence_parallel=True)
    sp = collectives(cfg, sp_plan, B, T, sp_regather=False)
    norms = [c for c in sp if c.kind == "all-reduce" and c.phase == "backward"]
    assert norms[0].nbytes == 2 * (2 * cfg.L + 1) * cfg.D
    assert sent(sp) - sent(norms) == pytest.approx(sent(tp))
    regather = collectives(cfg, sp_plan, B, T)
    extra = [c for c in regather if c not in sp]
    assert [(c.kind, c.phase, c.count) for c in extra] == [("all-gather", "backward",
                                                            2 * cfg.L + 1)]
    act = [c for c in tp if c.kind == "all-reduce" and c.phase == "backward"][0]
    assert sent(extra) == pytest.approx(sent([act]) / 2)


def test_tensor_parallel_golden_megatron_count():
    """Megatron: 2 all-reduces per layer forward and 2 backward, V = 2·b·T·D bytes in bf16."""
    plan = ParallelPlan(tp=2, micro_batch=8)
    fwd, bwd, loss = tensor.comms(CFG, plan, B, T)
    V = 2 * B * T * CFG.D
    assert (fwd.nbytes, fwd.count, fwd.phase) == (V, 2 * CFG.L + 1, "forward")  # + embedding
    assert (bwd.nbytes, bwd.count, bwd.phase) == (V, 2 * CFG.L + 1, "backward")  # + output
    assert (loss.nbytes, loss.count) == (4 * B * T, 3)


def test_comms_scale_with_dtype_bytes():
    plan = ParallelPlan(dp=4, tp=2, micro_batch=2)
    f32 = collectives(CFG, plan, B, T, dtype="f32")
    bf16 = collectives(CFG, plan, B, T, dtype="bf16")
    assert f32[-1] == bf16[-1]  # the vocabulary-parallel loss statistics are fp32 anyway
    assert [a.nbytes for a in f32[:-1]] == [2 * b.nbytes for b in bf16[:-1]]


def test_memory_reuses_the_zero_accounting():
    plan = ParallelPlan(dp=8, micro_batch=1)
    dp_mem = data.memory(CFG, plan, B, T)
    psi = transformer.n_params(CFG)
    assert dp_mem.total == memory.model_state_bytes(psi).total == 16 * psi
    for z in range(4):
        got = fsdp.memory(CFG, plan.with_changes(zero=z), B, T)
        assert dict(got) == pytest.approx(dict(memory.model_state_bytes(psi, 8, z)))
    tp_mem = tensor.memory(CFG, ParallelPlan(tp=2, micro_batch=8), B, T)
    assert set(tp_mem) == {"activations", "logits"}


def test_constraints_give_reasons_and_collectives_refuses():
    assert constraints(CFG, ParallelPlan(dp=2, tp=2, zero=3), B, T) == []
    # the tp rules live in parallelism.rules: the vocabulary never refuses a tp (Megatron-LM
    # pads it), the heads and the MLP width do
    reasons = constraints(CFG.with_changes(V=63, F=63), ParallelPlan(tp=2, dp=3), B, T)
    assert any(r.startswith("tp_ffn: MLP width F=63") for r in reasons)
    assert any("dp·micro_batch = 3" in r for r in reasons)
    assert not any("V=63" in r for r in reasons)
    assert "K=2 kv heads" in constraints(CFG.with_changes(N=6, K=2), ParallelPlan(tp=3), B, T)[0]
    with pytest.raises(ValueError, match="F=63"):
        collectives(CFG.with_changes(F=63), ParallelPlan(tp=2), B, T)
    with pytest.raises(ValueError, match="ep=2"):
        collectives(CFG, ParallelPlan(dp=2, ep=2), B, T)
    with pytest.raises(ValueError, match="shard_group=2 needs zero"):
        collectives(CFG, ParallelPlan(dp=4, shard_group=2), B, T)


def test_comm_records_validate_and_totals_add_up():
    with pytest.raises(ValueError, match="kind='allreduce'"):
        Comm("allreduce", "dp", 2, 1.0)
    with pytest.raises(ValueError, match="axis='data'"):
        Comm("all-reduce", "data", 2, 1.0)
    comms = [Comm("all-gather", "dp", 4, 10.0, 3), Comm("all-gather", "tp", 4, 5.0),
             Comm("all-reduce", "tp", 1, 7.0)]
    assert totals(comms) == {("all-gather", 4): 35.0}
