"""Tests of the alpha-beta collective cost model (numpy only; the JAX checks are in
test_simulate.py)."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from scaling_lib import collectives as C, hardware

TIMES = {"all-gather": C.all_gather_time, "reduce-scatter": C.reduce_scatter_time,
         "all-reduce": C.all_reduce_time, "all-to-all": C.all_to_all_time}
FLAT = ["ring", "bidirectional_ring", "switch"]


# ---- golden formulas from published sources ---------------------------------------------------

@pytest.mark.parametrize("p", [2, 3, 8, 64, 1000])
def test_ring_formulas_of_thakur_rabenseifner_gropp_2005(p):
    """Thakur, Rabenseifner & Gropp (2005), "Optimization of Collective Communication Operations
    in MPICH", IJHPCA 19(1), section 4: ring allgather and (bandwidth-optimal) reduce-scatter take
    (p-1) alpha + (p-1)/p n beta; reduce-scatter + allgather allreduce twice that."""
    n_bytes, alpha, beta = 3e8, 7e-6, 1 / 25e9
    ring = (p - 1) * alpha + (p - 1) / p * n_bytes * beta
    assert C.all_gather_time(n_bytes, p, 1 / beta, latency=alpha) == pytest.approx(ring)
    assert C.reduce_scatter_time(n_bytes, p, 1 / beta, latency=alpha) == pytest.approx(ring)
    assert C.all_reduce_time(n_bytes, p, 1 / beta, latency=alpha) == pytest.approx(2 * ring)


@pytest.mark.parametrize("p", [2, 4, 8, 72])
def test_all_reduce_meets_patarasuk_yuan_bandwidth_lower_bound(p):
    """Patarasuk & Yuan (2009), "Bandwidth optimal all-reduce algorithms for clusters of
    workstations", JPDC 69(2): any all-reduce moves at least 2 (p-1)/p * n bytes per process."""
    assert C.all_reduce_time(1e9, p, 1e9) == pytest.approx(2 * (p - 1) / p)
    assert C.collective_bytes("all-reduce", 1e9, p).sent_bytes == pytest.approx(2 * (p - 1) / p
                                                                              * 1e9)


@pytest.mark.parametrize("kind", list(TIMES))
@pytest.mark.parametrize("n", [2, 8, 256])
def test_nccl_bus_bandwidth_equals_link_bandwidth_on_a_switch(kind, n):
    """nccl-tests doc/PERFORMANCE.md: busbw = algbw * 2(n-1)/n (all-reduce), * (n-1)/n (all-gather,
    reduce-scatter, all-to-all), normalised so that it equals the hardware's per-GPU bandwidth
    for an optimal algorithm. algbw = size / time; size is the full array for all-gather and
    all-reduce, the input for reduce-scatter, and each rank's buffer (V / n) for all-to-all."""
    W, V = 450e9, 2**30
    t = TIMES[kind](V, n, W, topology="switch")
    size = V / n if kind == "all-to-all" else V
    factor = 2 * (n - 1) / n if kind == "all-reduce" else (n - 1) / n
    assert size / t * factor == pytest.approx(W)


def test_measured_8x_h100_all_reduce_is_below_the_model():
    """hardware.md (NVIDIA nccl-tests on a DGX H100): 8-GPU all-reduce bus bandwidth about
    370 GB/s at large messages. The model (450 GB/s one-way NVLink, no overheads) is an upper
    bound on bandwidth, within 25% of the measurement."""
    h100 = hardware.get("h100")
    V, n = 8 * 2**30, 8
    t_model = C.all_reduce_time(V, n, h100.link_bytes_per_s, topology="switch")
    t_measured = V / 370e9 * 2 * (n - 1) / n
    assert t_model < t_measured < 1.25 * t_model


# ---- invariants --------------------------------------------------------------------------------

sizes = st.floats(1.0, 1e12)
counts = st.integers(1, 600)


@settings(max_examples=60, deadline=None)
@given(V=sizes, n=counts, W=st.floats(1e6, 1e13), a=st.floats(0, 1e-4),
       topology=st.sampled_from(FLAT))
def test_all_reduce_is_reduce_scatter_plus_all_gather(V, n, W, a, topology):
    kw = dict(topology=topology, latency=a)
    rs, ag = C.reduce_scatter_time(V, n, W, **kw), C.all_gather_time(V, n, W, **kw)
    assert rs == ag  # each other's transpose: same bytes, same links, opposite direction
    assert C.all_reduce_time(V, n, W, **kw) == pytest.approx(rs + ag)


@settings(max_examples=60, deadline=None)
@given(V=sizes, n=st.integers(2, 600), topology=st.sampled_from(FLAT))
def test_more_links_is_never_slower(V, n, topology):
    for kind in TIMES:
        one_way = TIMES[kind](V, n, 1e9)
        both = TIMES[kind](V, n, 1e9, topology="bidirectional_ring")
        assert both <= one_way
    assert C.all_to_all_time(V, n, 1e9, topology="switch") <= C.all_to_all_time(V, n, 1e9)


@settings(max_examples=60, deadline=None)
@given(V=sizes, n=st.integers(2, 600), a=st.floats(1e-7, 1e-4))
def test_time_at_latency_bound_size_is_twice_bandwidth_time(V, n, a):
    for kind, topology in itertools.product(TIMES, FLAT):
        V_star = C.latency_bound_bytes(kind, n, 1e9, a, topology=topology)
        t = TIMES[kind](V_star, n, 1e9, topology=topology, latency=a)
        t_bw = TIMES[kind](V_star, n, 1e9, topology=topology)
        assert t == pytest.approx(2 * t_bw)


@settings(max_examples=50, deadline=None)
@given(n=counts, a=st.floats(1e-7, 1e-3))
def test_empty_message_costs_only_latency_steps(n, a):
    for kind, topology in itertools.product(TIMES, FLAT):
        s, _ = C.cost_terms(kind, n, topology=topology)
        assert TIMES[kind](0.0, n, 1e9, topology=topology, latency=a) == pytest.approx(s * a)


def test_one_device_costs_nothing():
    for kind, topology in itertools.product(TIMES, C.TOPOLOGIES):
        shape = {"torus_2d": (1, 1), "torus_3d": (1, 1, 1)}.get(topology)
        kw = {"shape": shape} if shape else {}
        assert TIMES[kind](1e9, 1, 1e9, topology=topology, latency=1e-6, **kw) == 0.0
    assert np.isnan(C.latency_bound_bytes("all_gather", 1, 1e9, 1e-6))


def test_broadcasts_over_sizes_and_device_counts():
    V = np.logspace(3, 9, 7)[:, None]
    n = np.array([2, 8, 64])[None, :]
    t = C.all_gather_time(V, n, 1e9, latency=1e-6)
    assert t.shape == (7, 3)
    assert t[3, 1] == C.all_gather_time(float(V[3, 0]), 8, 1e9, latency=1e-6)
    # tori with an array of device counts pick one near-square shape per count
    s, b = C.cost_terms("all_gather", np.array([16, 64]), topology="torus_2d")
    assert list(s) == [4.0, 8.0] and b[0] == pytest.approx(15 / 16 / 4)


def test_large_n_ring_all_gather_approaches_V_over_W():
    assert C.all_gather_time(1e9, 10**6, 1e9) == pytest.approx(1.0, rel=1e-5)


# ---- tori: an independent link-load count -------------------------------------------------------

def busiest_link_all_to_all(shape, wrap, one_way=False):
    """Max bytes on any directed link of an all-to-all of a 1-byte array with dimension-order
    routing (shortest way round a wrapped axis, ties split evenly), counted pair by pair."""
    n = math.prod(shape)
    load = {}
    chunk = 1 / n**2
    for src in itertools.product(*map(range, shape)):
        for dst in itertools.product(*map(range, shape)):
            pos = list(src)
            for ax, (k, w) in enumerate(zip(shape, wrap)):
                fwd = (dst[ax] - pos[ax]) % k
                if one_way:
                    routes = [(+1, fwd, 1.0)]
                elif not w:
                    d = dst[ax] - pos[ax]
                    routes = [(1 if d > 0 else -1, abs(d), 1.0)]
                elif 2 * fwd < k:
                    routes = [(+1, fwd, 1.0)]
                elif 2 * fwd > k:
                    routes = [(-1, k - fwd, 1.0)]
                else:
                    routes = [(+1, fwd, 0.5), (-1, fwd, 0.5)]
                for step, hops, share in routes:
                    p = list(pos)
                    for _ in range(hops):
                        key = (tuple(p), ax, step)
                        load[key] = load.get(key, 0.0) + chunk * share
                        p[ax] = (p[ax] + step) % k
                pos[ax] = dst[ax]
    return max(load.values(), default=0.0)


@pytest.mark.parametrize("shape,wrap", [
    ((8,), (True,)), ((7,), (True,)), ((6,), (False,)), ((4, 4), (True, True)),
    ((4, 8), (True, True)), ((4, 6), (False, True)), ((2, 3, 4), (True, True, True)),
    ((4, 4, 4), (True, True, False)),
])
def test_torus_all_to_all_matches_a_link_by_link_count(shape, wrap):
    topology = {1: "bidirectional_ring", 2: "torus_2d", 3: "torus_3d"}[len(shape)]
    n = math.prod(shape)
    if topology == "bidirectional_ring" and not wrap[0]:
        topology, shape, wrap = "torus_2d", (1,) + shape, (True,) + wrap
    kw = {} if topology == "bidirectional_ring" else dict(shape=shape, wraparound=wrap)
    _, b = C.cost_terms("all_to_all", n, topology=topology, **kw)
    assert b == pytest.approx(busiest_link_all_to_all(shape, wrap))


@pytest.mark.parametrize("n", [2, 5, 8])
def test_one_way_ring_all_to_all_matches_a_link_by_link_count(n):
    assert C.cost_terms("all_to_all", n)[1] == pytest.approx(
        busiest_link_all_to_all((n,), (True,), one_way=True))


@pytest.mark.parametrize("n", [3, 8, 16])
def test_torus_with_one_wrapped_axis_is_a_bidirectional_ring(n):
    for kind in TIMES:
        ring = TIMES[kind](1e9, n, 45e9, topology="bidirectional_ring", latency=1e-6)
        t2 = TIMES[kind](1e9, n, 45e9, topology="torus_2d", shape=(1, n), latency=1e-6)
        t3 = TIMES[kind](1e9, n, 45e9, topology="torus_3d", shape=(n, 1, 1), latency=1e-6)
        assert ring == pytest.approx(t2) == pytest.approx(t3)


def test_all_gather_uses_every_link_of_a_torus():
    """Each device must receive (n-1)/n V over its 2 d incoming links (the ingress bound), and the
    torus model reaches it; without wraparound an axis is a line and gets half the bandwidth."""
    V, W = 1e9, 45e9
    for shape in [(16, 16), (4, 8), (4, 4, 4)]:
        n, d = math.prod(shape), len(shape)
        topology = f"torus_{d}d"
        t = C.all_gather_time(V, n, W, topology=topology, shape=shape)
        assert t == pytest.approx((n - 1) / n * V / (2 * d * W))
        t_line = C.all_gather_time(V, n, W, topology=topology, shape=shape, wraparound=False)
        assert t_line == pytest.approx(2 * t)


def test_torus_latency_steps_are_the_sum_of_half_axes():
    assert C.cost_terms("all_gather", 128, topology="torus_2d", shape=(8, 16))[0] == 12.0
    assert C.cost_terms("all_gather", 128, topology="torus_2d", shape=(8, 16),
                        wraparound=(False, True))[0] == 7 + 8


def test_flat_cluster_keeps_real_tpu_wraparound():
    """hardware.wraparound: a v5e slice wraps only along full axes of 16; a 4x4 is a mesh."""
    c = C.flat_cluster("tpu-v5e", 16, "torus_2d")
    assert (c.torus_shape, c.wraparound) == ((4, 4), (False, False))
    t = C.hierarchical_time("all_gather", 1e9, c).total
    assert t == pytest.approx(C.all_gather_time(1e9, 16, 45e9, topology="torus_2d", shape=(4, 4),
                                                wraparound=False, latency=1e-6))
    # a GPU (or a TPU in a foreign dimension) wired as a torus is taken to wrap everywhere
    assert C.flat_cluster("h100", 64, "torus_3d").wraparound == (True, True, True)
    assert C.flat_cluster("tpu-v5e", 64, "torus_3d").wraparound == (True, True, True)
    with pytest.raises(ValueError, match="valid choices"):
        C.flat_cluster("h100", 8, "hypercube")


# ---- clusters ------------------------------------------------------------------------------------

def test_single_node_hierarchical_equals_flat_switch():
    c = hardware.cluster("h100", 8)
    for kind in TIMES:
        t = C.hierarchical_time(kind, 1e9, c)
        assert t["inter-node"] == 0.0
        assert t.total == pytest.approx(TIMES[kind](1e9, 8, c.intra_node.bytes_per_s,
                                                    topology="switch",
                                                    latency=c.intra_node.latency))


def test_one_device_per_node_is_a_flat_network():
    c = hardware.cluster("h100", 32, devices_per_node=1)
    for kind in TIMES:
        t = C.hierarchical_time(kind, 1e9, c)
        assert t["intra-node"] == 0.0
        assert t.total == pytest.approx(TIMES[kind](1e9, 32, 50e9, topology="switch",
                                                    latency=c.inter_node.latency))


def test_hierarchy_cuts_network_bytes_by_devices_per_node():
    """A flat ring over 1024 H100s would be limited by the 50 GB/s NICs; the hierarchical
    all-reduce sends only V / 8 per GPU over them."""
    c = hardware.cluster("h100", 1024)
    V = 1e10
    t = C.hierarchical_time("all_reduce", V, c)
    flat = C.all_reduce_time(V, 1024, c.inter_node.bytes_per_s, topology="switch")
    assert t["inter-node"] == pytest.approx(C.all_reduce_time(V / 8, 128, 50e9,
                                                              topology="switch",
                                                              latency=c.inter_node.latency))
    assert t.total < flat / 4


def test_hierarchical_parts_follow_the_schedule_and_the_tpu_torus():
    c = hardware.cluster("tpu-v5e", 256)  # one 16x16 pod, wraparound on both axes
    t = C.hierarchical_time("all_gather", 1e9, c)
    assert t["intra-node"] == pytest.approx(C.all_gather_time(
        1e9, 256, 45e9, topology="torus_2d", shape=(16, 16), latency=1e-6))
    small = hardware.cluster("tpu-v5e", 16)  # a 4x4 slice has no wraparound (hardware.md)
    t_small = C.hierarchical_time("all_gather", 1e9, small)
    assert t_small.total == pytest.approx(C.all_gather_time(
        1e9, 16, 45e9, topology="torus_2d", shape=(4, 4), wraparound=False, latency=1e-6))
    with pytest.raises(ValueError, match="whole number of nodes"):
        C.hierarchical_time("all_gather", 1e9, hardware.cluster("h100", 64), n_devices=12)


@pytest.mark.parametrize("kind", list(TIMES))
def test_hierarchical_schedule_bytes_add_up(kind):
    """Each device sends over the network exactly its share of the flat collective's traffic."""
    m, k, V = 8, 16, 1e9
    plan = C.hierarchical_schedule(kind, V, (m, k))
    net = sum(C.collective_bytes(p[1], p[2], p[3]).sent_bytes for p in plan
              if p[0] == "inter-node")
    flat = C.collective_bytes(kind, V, m * k).sent_bytes
    expected = {"all-to-all": flat * (k - 1) * m / (m * k - 1)}.get(kind, flat / m * (
        (k - 1) / k) / ((m * k - 1) / (m * k)))
    assert net == pytest.approx(expected)


# ---- per-device bytes ------------------------------------------------------------------------------

@settings(max_examples=50, deadline=None)
@given(V=st.floats(0, 1e12), n=counts)
def test_collective_bytes_are_consistent(V, n):
    ag, rs, ar = (C.collective_bytes(k, V, n) for k in ("all-gather", "reduce-scatter",
                                                         "all-reduce"))
    assert ag.received_bytes == pytest.approx(ag.result_bytes - ag.operand_bytes, rel=1e-9, abs=1e-6)
    assert rs.sent_bytes == pytest.approx(rs.operand_bytes - rs.result_bytes, rel=1e-9, abs=1e-6)
    assert ar.sent_bytes == pytest.approx(ag.sent_bytes + rs.sent_bytes)
    a2a = C.collective_bytes("all-to-all", V, n)
    assert a2a.sent_bytes == pytest.approx(a2a.operand_bytes * (n - 1) / n)
    # the switch model's bandwidth term is exactly the bytes each device must receive
    for kind, rec in [("all-gather", ag), ("all-reduce", ar), ("all-to-all", a2a)]:
        assert C.cost_terms(kind, n, topology="switch")[1] * V == pytest.approx(
            rec.received_bytes, rel=1e-9, abs=1e-3)


def test_collective_permute_moves_one_shard():
    assert C.collective_bytes("ppermute", 800, 8) == (100.0, 100.0, 100.0, 100.0)
    assert C.send_recv_time(100, 1e9) == 1e-7


# ---- facts and errors ----------------------------------------------------------------------------

def test_pcie_bandwidth_from_the_spec():
    """PCI-SIG: 16 GT/s (gen 4) and 32 GT/s (gen 5) per lane with 128b/130b encoding."""
    assert C.pcie_bytes_per_s(4, 16) == pytest.approx(31.5e9, rel=1e-3)
    assert C.pcie_bytes_per_s(5, 16) == pytest.approx(2 * C.pcie_bytes_per_s(4, 16))
    with pytest.raises(ValueError, match="valid choices: 3, 4, 5"):
        C.pcie_bytes_per_s(7)


def test_llama3_cluster_totals():
    """Llama 3 Herd of Models, section 3.3: 24,576 H100 in 8 pods of 3,072: about 1.97 PB
    (1.75 PiB) of HBM and 24 EFLOP/s of dense bf16."""
    c = hardware.get_cluster("llama3-24k")
    assert C.cluster_levels(c) == (8, 384, 8)
    assert c.hbm_bytes == pytest.approx(1.966e15, rel=1e-3)
    assert c.peak_flops_per_s == pytest.approx(24.3e18, rel=1e-2)


def test_three_level_all_reduce_on_the_llama3_cluster():
    """Across pods each GPU sends V / 3072 of the array over 1/7 of its NIC."""
    c = hardware.get_cluster("llama3-24k")
    V = 1e10
    plan = C.hierarchical_schedule("all_reduce", V, C.cluster_levels(c))
    assert [(lv, kind, g) for lv, kind, _, g in plan] == [
        ("intra-node", "reduce-scatter", 8), ("inter-node", "reduce-scatter", 384),
        ("inter-pod", "all-reduce", 8), ("inter-node", "all-gather", 384),
        ("intra-node", "all-gather", 8)]
    assert plan[2][2] == pytest.approx(V / 3072)
    t = C.hierarchical_time("all_reduce", V, c)
    assert t["inter-pod"] == pytest.approx(C.all_reduce_time(
        V / 3072, 8, c.inter_pod.bytes_per_s, topology="switch", latency=c.inter_pod.latency))
    assert set(t) == {"intra-node", "inter-node", "inter-pod"}
    # within one pod there is no inter-pod phase
    assert C.cluster_levels(c, 3072) == (8, 384)
    with pytest.raises(ValueError, match="pods of 3072"):
        C.cluster_levels(c, 4000)


def test_cluster_latency_bound_bytes_splits_time_in_half():
    for c in (hardware.cluster("h100", 1024), hardware.cluster("tpu-v5e", 256)):
        for kind in TIMES:
            V = C.cluster_latency_bound_bytes(kind, c)
            t, t0 = (C.hierarchical_time(kind, v, c).total for v in (V, 0.0))
            assert t == pytest.approx(2 * t0)


@pytest.mark.parametrize("call,match", [
    (lambda: C.all_gather_time(1e9, 8, 1e9, topology="mesh"), "valid choices: ring"),
    (lambda: C.all_gather_time(1e9, 0, 1e9), "n=0 devices"),
    (lambda: C.all_gather_time(1e9, 2.5, 1e9), "whole number"),
    (lambda: C.all_gather_time(-1, 8, 1e9), "nbytes"),
    (lambda: C.all_gather_time(1e9, 8, 0), "bytes_per_s"),
    (lambda: C.all_gather_time(1e9, 8, 1e9, topology="torus_2d", shape=(2, 2)), "holds 4"),
    (lambda: C.all_gather_time(1e9, 8, 1e9, topology="torus_3d", shape=(2, 4)), "3 axes"),
    (lambda: C.all_gather_time(1e9, 8, 1e9, topology="torus_2d", shape=(2, 4),
                               wraparound=(True,)), "one per axis"),
    (lambda: C.cost_terms("broadcast", 8), "unknown collective"),
    (lambda: C.cost_terms("ppermute", 8), "send_recv_time"),
    (lambda: C.hierarchical_time("ag", 1e9, hardware.cluster("h100", 16), n_devices=32),
     r"\[1, 16\]"),
])
def test_bad_input_names_the_rule(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_explorer_plot_draws_library_numbers():
    """The widget's static figure: one curve per system, V* dots from the library."""
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scaling_lib.course.widgets import collectives as wc

    fig, ax = plt.subplots()
    drawn = wc.plot_collective_costs(ax, "all-gather", "hierarchical", 64, ("h100", "tpu-v5e"),
                                     nbytes=1e8)
    plt.close(fig)
    c = hardware.cluster("h100", 64)
    v_star, t = drawn["h100"]
    assert v_star == C.cluster_latency_bound_bytes("all-gather", c)
    assert t == pytest.approx(C.hierarchical_time("all-gather", 1e8, c).total)
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="can run"):  # 12 GPUs do not fill nodes of 8
        wc.plot_collective_costs(ax, "all-gather", "hierarchical", 12, ("h100",))
    plt.close(fig)


# ---- the flat multi-rail ring (one ring per NIC), the fair alternative to the hierarchy ---------

RING_KINDS = ("all-gather", "reduce-scatter", "all-reduce")


@pytest.mark.parametrize("kind", RING_KINDS)
def test_multirail_ring_inside_one_node_is_the_hierarchy(kind):
    """n_nodes = 1: no NIC is crossed; the ring is the node's own ring, as the hierarchy has it."""
    for c in (hardware.get_cluster("dgx-h100"), hardware.cluster("a100-80gb", 8),
              hardware.cluster("h100", 4)):
        for V in (0.0, 1e6, 3e9):
            t = C.multirail_ring_terms(kind, V, c)
            assert t.inter_time == 0.0
            assert t.total == pytest.approx(C.hierarchical_time(kind, V, c).total, rel=1e-12)


@pytest.mark.parametrize("kind", RING_KINDS)
def test_multirail_ring_with_one_gpu_per_node_is_a_ring_over_the_nics(kind):
    """One GPU per node: no NVLink hop; a ring over k NICs, which is the hierarchy's only phase."""
    for k in (2, 16, 128):
        c = hardware.cluster("h100", k, devices_per_node=1)
        for V in (0.0, 1e6, 3e9):
            t = C.multirail_ring_terms(kind, V, c)
            assert t.intra_time == 0.0
            assert t.total == pytest.approx(C.hierarchical_time(kind, V, c).total, rel=1e-12)
            assert t.total == pytest.approx(C.collective_time(
                kind, V, k, c.inter_node.bytes_per_s, latency=c.inter_node.latency))


def test_multirail_ring_formula_and_rails():
    """T = s alpha + b V max(1/W_gpu, 1/(r W_nic)); r = 1 is the one-NIC ring of a naive flat
    comparison, r = 8 gives the node's whole egress."""
    c = hardware.cluster("h100", 1024)
    V, n = 16e9, 1024
    b = 2 * (n - 1) / n
    t8 = C.multirail_ring_terms("all-reduce", V, c)
    assert t8.intra_time == pytest.approx(b * V / 450e9)
    assert t8.inter_time == pytest.approx(b * V / (8 * 50e9))
    assert t8.latency_time == pytest.approx(2 * (n - 1) * c.inter_node.latency)
    assert t8.total == pytest.approx(t8.latency_time + max(t8.intra_time, t8.inter_time))
    t1 = C.multirail_ring_time("all-reduce", V, c, rails=1)
    assert t1 == pytest.approx(C.all_reduce_time(V, n, 50e9, topology="switch",
                                                 latency=c.inter_node.latency))
    assert t1 > 7 * t8.total  # the single-NIC ring pushes 8x the bytes through each NIC
    # more rails never slow it down
    times = [C.multirail_ring_time("all-reduce", V, c, rails=r) for r in range(1, 9)]
    assert all(a >= b_ for a, b_ in zip(times, times[1:]))


@pytest.mark.parametrize("accelerator", ["h100", "a100-80gb", "b200"])
@pytest.mark.parametrize("kind", RING_KINDS)
def test_multirail_ring_against_the_hierarchical_schedule(accelerator, kind):
    """Invariant on bandwidth terms (latency removed). Each link of the flat ring carries
    b(n) >= b(m), b(k) of the bytes the hierarchy's phases carry, so the ring is never faster than
    the hierarchy's slowest phase. It is never slower than all the phases in sequence once
    k V / W_gpu >= V / (m W_nic) (k nodes' worth of NVLink
    time covers the network time), which holds from a few nodes on."""
    for n in (16, 64, 1024):
        c = hardware.cluster(accelerator, n)
        m, k = C.cluster_levels(c)
        V = 8e9
        ring = C.multirail_ring_time(kind, V, c) - C.multirail_ring_time(kind, 0.0, c)
        h, h0 = C.hierarchical_time(kind, V, c), C.hierarchical_time(kind, 0.0, c)
        phases = [h[lv] - h0[lv] for lv in h]
        assert ring >= max(phases) * (1 - 1e-12)
        if k * m * c.inter_node.bytes_per_s >= c.intra_node.bytes_per_s:
            assert ring <= sum(phases) * (1 + 1e-12)


@pytest.mark.parametrize("call,match", [
    (lambda: C.multirail_ring_time("all-to-all", 1e9, "dgx-h100"), "hierarchical_time"),
    (lambda: C.multirail_ring_time("all-reduce", 1e9, "tpu-v5e-pod"), "TPU slices"),
    (lambda: C.multirail_ring_time("all-reduce", 1e9, "dgx-h100", rails=9), r"\[1, 8\]"),
    (lambda: C.multirail_ring_time("all-reduce", 1e9, "dgx-h100", rails=2.5), "rails"),
    (lambda: C.multirail_ring_time("all-reduce", 1e9, "no-such-cluster"), "known: dgx-h100"),
    (lambda: C.hierarchical_time("all-reduce", 1e9, "no-such-cluster"), "known: dgx-h100"),
    (lambda: C.hierarchical_time("all-reduce", 1e9, 8), "name or a Cluster"),
    (lambda: C.all_gather_time(1e9, True, 1e9), "whole number"),
    (lambda: C.all_gather_time(1e9, "8", 1e9), "whole number"),
    (lambda: C.all_gather_time(1e9, float("nan"), 1e9), "whole number"),
    (lambda: C.all_gather_time(1e9, 2**70, 1e9), "whole number in"),
    (lambda: C.all_gather_time(1e9, 2.0**50, 1e9), "whole number in"),
    (lambda: C.all_gather_time(10**400, 8, 1e9), "too large"),
    (lambda: C.all_gather_time(1e9 + 1j, 8, 1e9), "real number"),
    (lambda: C.all_gather_time(True, 8, 1e9), "nbytes"),
    (lambda: C.all_gather_time(1e9, 16, 1e9, topology="torus_2d", shape=16), "2 axes"),
    (lambda: C.all_gather_time(1e9, 16, 1e9, topology="torus_2d", shape=(4, 4),
                               wraparound=1), "one per axis"),
    (lambda: C.hierarchical_schedule("all-reduce", 1e9, (4, 0.5)), "whole number"),
    (lambda: C.hierarchical_schedule("all-reduce", 1e9, 8), "inner first"),
    (lambda: C.pcie_bytes_per_s([4]), "PCIe generation"),
    (lambda: C.flat_cluster("h100", [8, 16], "switch"), "one device count"),
])
def test_more_bad_input_raises_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_hierarchical_time_takes_a_cluster_name():
    assert (C.hierarchical_time("all-reduce", 1e9, "dgx-h100").total
            == C.hierarchical_time("all-reduce", 1e9, hardware.get_cluster("dgx-h100")).total)
    assert C.cluster_levels("tpu-v5e-4x8") == (32, 1)


@pytest.mark.parametrize("kind", ["all-gather", "all-reduce", "all-to-all"])
def test_hierarchical_pipelined_time_is_between_the_slowest_level_and_the_sum(kind):
    for c in (hardware.cluster("h100", 1024), hardware.get_cluster("llama3-24k"),
              hardware.get_cluster("dgx-h100"), hardware.cluster("tpu-v5e", 512)):
        V = 3e9
        h, h0 = C.hierarchical_time(kind, V, c), C.hierarchical_time(kind, 0.0, c)
        p = C.hierarchical_pipelined_time(kind, V, c)
        assert p <= h.total * (1 + 1e-12)
        assert p == pytest.approx(h0.total + max(h[lv] - h0[lv] for lv in h))
        assert C.hierarchical_pipelined_time(kind, 0.0, c) == pytest.approx(h0.total)
    # one level: nothing to overlap
    c = hardware.get_cluster("dgx-h100")
    assert C.hierarchical_pipelined_time(kind, 1e9, c) == pytest.approx(
        C.hierarchical_time(kind, 1e9, c).total)


def test_flat_vs_hierarchical_figure_draws_library_numbers():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scaling_lib.course.widgets import collectives as wc

    fig, ax = plt.subplots()
    times, ns = wc.plot_flat_vs_hierarchical(ax, "all-reduce", 1e9, "h100", (16, 256))
    plt.close(fig)
    assert ns == [16, 32, 64, 128, 256]
    c = hardware.cluster("h100", 64)
    assert times["multirail"][2] == C.multirail_ring_time("all-reduce", 1e9, c)
    assert times["one-nic"][2] == C.multirail_ring_time("all-reduce", 1e9, c, rails=1)
    assert times["hierarchical"][2] == C.hierarchical_time("all-reduce", 1e9, c).total
    assert times["pipelined"][2] == C.hierarchical_pipelined_time("all-reduce", 1e9, c)
