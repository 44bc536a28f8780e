"""tp_cost: the compute-bound limit on tp and the FSDP x TP split search."""

import numpy as np
import pytest

from scaling_lib import collectives as C
from scaling_lib import hardware as hw
from scaling_lib import tp_cost as tc
from scaling_lib.parallelism import ParallelPlan


@pytest.mark.parametrize("model", ["llama3-8b", "llama3-70b", "llama3-405b"])
@pytest.mark.parametrize("W", [450e9, 50e9])
def test_limit_is_where_comm_equals_math(model, W):
    """Up to floor(tp_limit) the two AllReduces hide behind the matmuls, one more and they
    do not, whatever the token count (it cancels)."""
    t = int(tc.tp_limit(model, "h100", W))
    for tokens in (1024, 65536):
        t_math, t_comm = tc.layer_times(model, t, tokens, "h100", W)
        assert t == 1 or t_comm <= t_math
        t_math, t_comm = tc.layer_times(model, t + 1, tokens, "h100", W)
        assert t_comm > t_math


def test_torus_axis_is_a_bidirectional_ring_of_twice_the_link():
    link = hw.get_cluster("tpu-v5p-pod").intra_node.per_link_bytes_per_s
    _, ring = tc.layer_times("llama3-70b", 8, 4096, "tpu-v5p", link, topology="bidirectional_ring")
    _, flat = tc.layer_times("llama3-70b", 8, 4096, "tpu-v5p", 2 * link, topology="ring")
    assert ring == pytest.approx(flat)


def test_max_tp_degree_respects_kv_heads():
    assert tc.max_tp_degree("llama3-70b", "h100", 450e9) == 8
    assert tc.max_tp_degree("llama3-70b", "h100", 450e9, divisors_only=False) == 12
    assert tc.max_tp_degree("llama3-70b", "h100", 50e9) == 2


def test_kv_replication():
    assert [tc.kv_replication("llama3-405b", t) for t in (1, 8, 16, 128)] == [1, 1, 2, 16]
    with pytest.raises(ValueError, match="tp=12"):
        tc.kv_replication("llama3-8b", 12)


def test_split_time_single_device_has_no_communication():
    cl = hw.cluster("h100", 8)
    s = tc.split_time("llama3-8b", cl, ParallelPlan(recompute="full"), 1, 1024)
    assert s.tp_time == s.fsdp_time == 0 and s.step_time == s.compute_time > 0


def test_tp_inside_a_node_uses_nvlink_across_nodes_the_nic():
    cl = hw.cluster("h100", 64)
    plan8 = ParallelPlan(dp=8, tp=8, zero=3, micro_batch=1)
    plan16 = ParallelPlan(dp=4, tp=16, zero=3, micro_batch=2)
    s8 = tc.split_time("llama3-70b", cl, plan8, 8, 4096)
    s16 = tc.split_time("llama3-70b", cl, plan16, 8, 4096)
    assert s16.tp_time > 2 * s8.tp_time
    V = 2 * 4096 * 8192  # one micro-batch of one sequence, bf16
    n_ar = 2 * (2 * 80 + 1)
    expect = n_ar * C.collective_time("all_reduce", V, 8, 450e9, topology="switch",
                                         latency=2e-6)
    loss = 3 * C.collective_time("all_reduce", 4 * 4096, 8, 450e9, topology="switch",
                                   latency=2e-6)
    assert s8.tp_time == pytest.approx(expect + loss, rel=1e-9)


def test_split_table_sorted_and_best_fits():
    cl = hw.cluster("h100", 64)
    rows = tc.split_table("llama3-70b", cl, 64, 4096)
    fit = [r for r in rows if r.fits]
    assert [r.step_time for r in fit] == sorted(r.step_time for r in fit)
    best = tc.best_split("llama3-70b", cl, 64, 4096)
    assert best is fit[0] or best.plan == fit[0].plan
    assert {r.plan.tp for r in rows} == {1, 2, 4, 8, 16, 32, 64}
    assert all(r.plan.world_size == 64 for r in rows)
    assert np.isfinite([r.step_time for r in rows]).all()


def test_figures_draw():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scaling_lib.widgets import tensor as fig

    _, (a, b) = plt.subplots(1, 2)
    fig.plot_comm_to_math(a, "llama3-70b", [("NVLink", "h100", 450e9, "switch")])
    assert len(a.lines) == 2  # the curve and the T_comm = T_math line
    rows = tc.split_table("llama3-8b", hw.cluster("h100", 16), 16, 2048)
    fig.plot_splits(b, rows)
    assert len(b.patches) == 3 * len(rows)
    plt.close("all")
