"""parallelism.mesh: the four-axis device numbering, link classes, traffic, and its widget."""

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from scaling_lib import hardware, published  # noqa: E402
from scaling_lib.collectives import collective_bytes  # noqa: E402
from scaling_lib.parallelism import Comm, ParallelPlan, collectives  # noqa: E402
from scaling_lib.parallelism import mesh as M  # noqa: E402
from scaling_lib.parallelism import steptime  # noqa: E402

LLAMA = [r for r in published.RUNS.values() if r.name.startswith("llama3-405b")]


def _plan(r, **kw):
    return ParallelPlan(tp=r.tp, cp=r.cp, pp=r.pp, dp=r.dp, sequence_parallel=True, **kw)


@pytest.mark.parametrize("order", [M.ORDER, ("dp", "pp", "cp", "tp"), ("cp", "tp", "dp", "pp")])
def test_every_device_once_and_groups_partition_the_mesh(order):
    plan = ParallelPlan(tp=2, cp=2, pp=2, dp=3)
    for a in M.AXES:
        g = M.groups(plan, a, order)
        assert sorted(g.ravel().tolist()) == list(range(plan.world_size))
        assert g.shape == (plan.world_size // getattr(plan, a), getattr(plan, a))
        # members differ only on axis a, and by its coordinate 0, 1, ...
        for row in g:
            co = [M.coordinates(r, plan, order) for r in row]
            assert [c[a] for c in co] == list(range(getattr(plan, a)))
            assert all(c[b] == co[0][b] for c in co for b in M.AXES if b != a)


def test_strides_extend_steptime_numbering():
    # steptime: tp consecutive, dp strided by tp; the mesh agrees when cp = pp = 1
    plan = ParallelPlan(tp=4, dp=8)
    comm = Comm("all-reduce", "dp", 8, 1.0)
    assert M.strides(plan)["dp"] == steptime._stride(plan, comm) == 4
    c = hardware.cluster("h100", 32)
    per_node = steptime.group_cluster(c, plan, comm).devices_per_node
    assert per_node == 2 and (M.comm_groups(plan, comm)[0] // 8 == [0, 0, 1, 1, 2, 2, 3, 3]).all()


def test_llama3_axes_from_fast_to_slow_links():
    for r in LLAMA:
        pl = M.placement("llama3-24k", _plan(r))
        assert pl["tp"].link == "intra-node"  # tp = 8 fills an 8-GPU node
        assert pl["dp"].link == "inter-pod"  # dp spans more than a 3,072-GPU pod
        assert pl["pp"].link in ("inter-node", "inter-pod")
        if r.cp > 1:
            assert pl["cp"].link == "inter-node" and pl["cp"].stride == 8
        for p in pl.values():
            if p.degree > 1:
                assert sum(p.shares.values()) == pytest.approx(1.0)


def test_reversed_order_puts_dp_on_nvlink_and_tp_across_nodes():
    plan = ParallelPlan(tp=8, pp=4, dp=8)
    c = hardware.cluster("h100", 256)
    pl = M.placement(c, plan, ("dp", "pp", "cp", "tp"))
    assert pl["dp"].link == "intra-node" and pl["tp"].link == "inter-node"


def test_traffic_sums_collective_bytes():
    r = LLAMA[0]
    plan = _plan(r, zero=1)
    tr = M.traffic(r.model, "llama3-24k", plan, r.global_batch, r.T)
    want = 0.0
    for c in collectives(r.model, plan, r.global_batch, r.T):
        s = c.nbytes if c.kind == "collective-permute" else \
            float(collective_bytes(c.kind, c.nbytes, c.group_size).sent_bytes)
        want += s * c.count
    assert sum(sum(v.values()) for v in tr.values()) == pytest.approx(want)
    assert set(tr["intra-node"]) == {"tp"} and set(tr["inter-pod"]) == {"dp"}


def test_hsdp_allreduce_runs_across_shard_groups():
    plan = ParallelPlan(tp=8, dp=16, zero=3, shard_group=4)
    ar = M.comm_groups(plan, Comm("all-reduce", "dp", 4, 1.0))
    assert ar[0].tolist() == [0, 32, 64, 96]  # stride S·tp
    ag = M.comm_groups(plan, Comm("all-gather", "dp", 4, 1.0))
    assert ag[0].tolist() == [0, 8, 16, 24]


def test_degree_helpers_and_errors():
    assert M.dp_degree(8192, tp=8, pp=16) == 64
    assert M.context_degree(1 << 20, 8192) == 128
    assert M.context_degree(8192, 8192) == 1
    with pytest.raises(ValueError, match="does not divide"):
        M.dp_degree(1000, tp=8, pp=16)
    with pytest.raises(ValueError, match="each of tp, cp, pp, dp once"):
        M.strides(ParallelPlan(), ("tp", "tp", "pp", "dp"))
    with pytest.raises(ValueError, match="cluster has 8"):
        M.placement("dgx-h100", ParallelPlan(dp=16))
    with pytest.raises(ValueError, match="valid choices"):
        M.link_class("dgx-h100", ParallelPlan(dp=2), "ep")


def test_mesh_report_and_widget_figures():
    from scaling_lib.course.widgets import mesh as W

    r = LLAMA[0]
    rep = M.mesh_report(r.model, "llama3-24k", _plan(r, zero=1), r.global_batch, r.T)
    assert rep.memory.total > 0 and rep.line_rate_time["intra-node"] > 0
    fig, (a1, a2) = plt.subplots(1, 2)
    W.plot_mesh(a1, "llama3-24k", rep.plan, n_nodes=2)
    assert len(a1.patches) == 16
    W.plot_traffic(a2, rep)
    assert "memory per GPU" in W.summary(rep)
    plt.close(fig)
    g = W.node_grid("llama3-24k", rep.plan, 2)
    assert np.array_equal(g[1, :, 2], np.ones(8))  # node 1 is pipeline stage 1


def test_explorer_builds():
    pytest.importorskip("ipywidgets")
    from scaling_lib.course.widgets import mesh as W

    box = W.explorer(pp=2, dp=2, global_batch=4, T=1024)
    assert box.children
    plt.close("all")
