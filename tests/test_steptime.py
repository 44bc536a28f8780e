"""The step-time model (parallelism.steptime) and its layer-by-layer schedules (timeline).

Invariants: a plan of one device has no communication and its step is its compute; DP's
critical batch inside a node is (n-1)/n · C/W (bf16, peak, 4Ψ backward FLOPs per token: closed
form, up to the model's attention FLOPs and embedding); collectives that fit under compute are
hidden and those that do not are exposed, and the exposed parts add up to the step's exposed
time; the timelines keep their dependencies (a layer never computes before its weights arrive,
a gradient is never reduced before it exists).
"""

import math

import pytest

from scaling_lib import hardware
from scaling_lib.parallelism import Comm, ParallelPlan, steptime, timeline

H100_8, H100_64 = hardware.cluster("h100", 8), hardware.cluster("h100", 64)


def test_one_device_has_no_communication():
    st = steptime.step_time("llama3-8b", hardware.cluster("h100", 1), ParallelPlan(), 4, 4096)
    assert st.comms == [] and st.exposed_time == 0.0
    # the rest of the step is the optimizer (a view of estimate since issue 19)
    assert st.step_time == pytest.approx(st.compute_time + st.overhead)


def test_compute_splits_over_devices_and_backward_is_twice_forward():
    one = steptime.compute_times("llama3-8b", ParallelPlan(), 64, 4096, "h100")
    eight = steptime.compute_times("llama3-8b", ParallelPlan(dp=8), 64, 4096, "h100")
    assert eight["forward"] == pytest.approx(one["forward"] / 8)
    assert one["backward"] == pytest.approx(2 * one["forward"])
    full = steptime.compute_times("llama3-8b", ParallelPlan(recompute="full"), 64, 4096, "h100")
    assert full["backward"] > one["backward"]


def _c_over_w(cluster, link):
    """C/W at the rates the calibration says matmuls and NCCL reach."""
    from scaling_lib.parallelism.calibration import DEFAULT_CALIBRATION as cal

    acc = cluster.accelerator
    return (cal.gemm_efficiency * acc.peak_flops_per_s("bf16")
            / (cal.nvlink_efficiency * link.bytes_per_s))


def test_dp_critical_batch_inside_a_node_is_c_over_w():
    """Since issue 19 the critical batch is the estimate's: (n-1)/n · C/W at the calibrated
    rates, up to the kernels' waves and bytes, the attention FLOPs and the NCCL algorithm."""
    closed = 7 / 8 * _c_over_w(H100_8, H100_8.intra_node)
    b = steptime.critical_tokens_per_device("llama3-8b", H100_8, ParallelPlan(dp=8), 4096)
    assert 0.4 * closed < b < 1.5 * closed  # NVLS (H100) moves half a ring's bytes


def test_critical_batch_separates_hidden_from_exposed():
    plan = ParallelPlan(dp=64)
    b = steptime.critical_tokens_per_device("llama3-8b", H100_64, plan, 4096)
    above = steptime.step_time("llama3-8b", H100_64, plan.with_changes(micro_batch=1), 64,
                               math.ceil(1.1 * b))
    below = steptime.step_time("llama3-8b", H100_64, plan.with_changes(micro_batch=1), 64,
                               math.floor(0.5 * b))
    assert not above.comm_bound and below.comm_bound
    assert sum(c.exposed for c in below.comms) > 10 * sum(c.exposed for c in above.comms)


def test_one_gpu_per_node_puts_the_whole_gradient_on_the_nic():
    """DP groups strided by tp = 8 have one member per node: C/W of the NIC, not of NVLink."""
    b_nic = steptime.critical_tokens_per_device("llama3-8b", H100_64, ParallelPlan(dp=8, tp=8),
                                                4096)
    b_nvl = steptime.critical_tokens_per_device("llama3-8b", H100_8, ParallelPlan(dp=8), 4096)
    ratio = H100_64.intra_node.bytes_per_s / H100_64.inter_node.bytes_per_s
    assert b_nic > 0.5 * ratio * b_nvl


def test_group_cluster_members_per_node():
    ar = Comm("all-reduce", "dp", 8, 1.0)
    assert steptime.group_cluster(H100_64, ParallelPlan(dp=64), Comm("all-gather", "dp", 64, 1.0)
                                  ).devices_per_node == 8
    assert steptime.group_cluster(H100_64, ParallelPlan(dp=8, tp=8), ar).devices_per_node == 1
    # HSDP's AllReduce across 8 shard groups of 8: one member per node
    hsdp = ParallelPlan(dp=64, zero=3, shard_group=8)
    assert steptime.group_cluster(H100_64, hsdp, ar).devices_per_node == 1


def test_hsdp_moves_less_over_the_nics_than_fsdp():
    """HSDP (shard_group=8: shards inside a node, an all-reduce of 1/8 across nodes) spends
    less time on the data-parallel collectives than FSDP over all 64 ranks (issue 19:
    estimate honours shard_group)."""
    def dp_time(plan):
        st = steptime.step_time("llama3-8b", H100_64, plan, 64, 4096)
        return sum(c.time for c in st.comms if c.comm.axis == "dp")

    assert dp_time(ParallelPlan(dp=64, zero=3)) > 1.2 * dp_time(
        ParallelPlan(dp=64, zero=3, shard_group=8))


def test_optimizer_phase_is_never_hidden():
    st = steptime.step_time("llama3-8b", H100_8, ParallelPlan(dp=8, zero=1, micro_batch=8),
                            64, 4096)
    opt = [c for c in st.comms if c.comm.phase == "optimizer"]
    assert opt and not any(c.hidden for c in opt)
    assert st.exposed_time >= sum(c.time for c in opt)


def test_plan_larger_than_cluster_is_refused():
    with pytest.raises(ValueError, match="devices"):
        steptime.step_time("llama3-8b", H100_8, ParallelPlan(dp=16), 16, 4096)


def test_ddp_timeline_overlaps_all_but_the_last_bucket():
    ev = timeline.ddp_timeline("llama3-8b", H100_64, 64, 8192, 4096)
    comp = [e for e in ev if e[0] == "compute"]
    net = [e for e in ev if e[0] == "network"]
    assert len(comp) == 32 and len(net) >= 2
    for a, b in zip(net, net[1:]):
        assert b[2] >= a[3] - 1e-15  # one network, in order
    ends = {e[1].split()[-1]: e[3] for e in comp}
    for e in net:  # a bucket starts after its last layer's backward
        last = e[1].split("-")[-1]
        assert e[2] >= ends[last] - 1e-15
    assert net[-2][3] <= comp[-1][3] + 1e-12  # all buckets but the last hidden at 8K tokens


def test_fsdp_timeline_dependencies_and_steady_state_overlap():
    ev = timeline.fsdp_timeline("llama3-8b", H100_64, 64, 4096, 4096, n_layers=6)
    gathered = {e[1].split()[-1]: e[3] for e in ev if e[0] == "all-gather"
                and e[1].startswith("gather")}
    regathered = {e[1].split()[-1]: e[3] for e in ev if e[1].startswith("re-gather")}
    for s, label, t0, t1 in ev:
        if label.startswith("forward"):
            assert t0 >= gathered[label.split()[-1]] - 1e-15
        if label.startswith("backward"):
            assert t0 >= regathered[label.split()[-1]] - 1e-15
    bwd = {e[1].split()[-1]: e for e in ev if e[1].startswith("backward")}
    rs = {e[1].split()[-1]: e for e in ev if e[0] == "reduce-scatter"}
    for layer, e in rs.items():
        assert e[2] >= bwd[layer][3] - 1e-15
    # steady state: while L2's backward runs, L3's reduce-scatter and L1's re-gather run too
    b2 = bwd["L2"]

    def overlaps(e):
        return e[2] < b2[3] and e[3] > b2[2]

    assert overlaps(rs["L3"])
    assert overlaps(next(e for e in ev if e[1] == "re-gather L1"))


@pytest.mark.parametrize("plan", [ParallelPlan(dp=64, micro_batch=1),
                                  ParallelPlan(dp=64, zero=3, micro_batch=1),
                                  ParallelPlan(dp=8, tp=8, zero=3, micro_batch=1,
                                               sequence_parallel=True)])
@pytest.mark.parametrize("T", [256, 4096])
def test_exposed_parts_add_up(plan, T):
    st = steptime.step_time("llama3-8b", H100_64, plan, 64, T)
    assert sum(c.exposed for c in st.comms) == pytest.approx(st.exposed_time, abs=1e-15)
    assert sum(st.comm_by_axis(exposed=True).values()) == pytest.approx(st.exposed_time,
                                                                        abs=1e-15)
    assert all(0.0 <= c.exposed <= c.time + 1e-15 for c in st.comms)
    assert all(c.hidden == (c.exposed == 0.0) for c in st.comms if c.comm.overlappable)
    for c in st.comms:  # tensor-parallel activations are on the critical path
        if not c.comm.overlappable:
            assert c.exposed == pytest.approx(c.time)


def test_comm_time_is_the_hierarchical_time_of_the_group():
    from scaling_lib.collectives import hierarchical_time

    x = Comm("all-gather", "dp", 64, 3e8, count=4)
    t = steptime.comm_time(x, H100_64, ParallelPlan(dp=64))
    ref = hierarchical_time("all-gather", 3e8, H100_64)
    assert sum(t.values()) == pytest.approx(4 * float(ref.total))


def test_bad_inputs_name_the_rule():
    with pytest.raises(ValueError, match="Comm"):
        steptime.comm_time(("all-reduce", 8), H100_8, ParallelPlan(dp=8))
    with pytest.raises(ValueError, match="efficiency=1.5"):
        steptime.compute_times("llama3-8b", ParallelPlan(), 8, 1024, "h100", efficiency=1.5)
    with pytest.raises(ValueError, match="n_layers=40"):
        timeline.fsdp_timeline("llama3-8b", H100_8, 8, 4096, 4096, n_layers=40)
    with pytest.raises(ValueError, match="bucket_bytes"):
        timeline.ddp_timeline("llama3-8b", H100_8, 8, 4096, 4096, bucket_bytes=0)


def test_flash_attention_adds_backward_compute_only():
    plan = ParallelPlan(dp=8)
    a = steptime.compute_times("llama3-8b", plan, 8, 8192, "h100")
    b = steptime.compute_times("llama3-8b", plan, 8, 8192, "h100", flash_attention=True)
    assert a["forward"] == b["forward"] and b["backward"] > a["backward"]
