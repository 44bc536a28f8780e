"""Answer key for Chapter 4 (Networks and collectives) exercises."""

from __future__ import annotations

import numpy as np

from ... import collectives as C
from ... import hardware, simulate
from ...units import dtype_bytes
from ..grading.tables import with_messages


def ring_all_gather(p):
    """Ex 4.1: seconds for an AllGather of p.V bytes on a one-way ring of p.n devices."""
    return C.all_gather_time(p.V, p.n, p.W, latency=p.latency)


def _weight_gather(p, shape):
    V = p.D * p.F * dtype_bytes("bf16")
    return C.hierarchical_time("all-gather", V, hardware.tpu_slice("tpu-v5e", shape)).total


def weight_gather_v5e_4x4(p):
    """Ex 4.2: seconds to AllGather a bf16 W[D, F] sharded over a TPU v5e 4x4 slice."""
    return _weight_gather(p, (4, 4))


def weight_gather_v5e_8x16(p):
    """Ex 4.3: the same on an 8x16 slice (wraparound on the axis of 16 only)."""
    return _weight_gather(p, (8, 16))


def latency_bound_ring(p):
    """Ex 4.4: bytes below which p.collective on a 16-chip ICI ring (one full axis) is
    latency-bound."""
    link = hardware.get_cluster(f"{p.accelerator}-pod").intra_node
    return C.latency_bound_bytes(p.collective, 16, link.per_link_bytes_per_s, link.latency,
                                 topology="bidirectional_ring")


def all_gather_over_all_to_all(p):
    """Ex 4.5: bandwidth-time ratio AllGather / AllToAll on a bidirectional ring of p.n."""
    return (C.cost_terms("all-gather", p.n, topology="bidirectional_ring")[1]
            / C.cost_terms("all-to-all", p.n, topology="bidirectional_ring")[1])


def inter_node_all_reduce(p):
    """Ex 4.6: seconds of the inter-node phase of a hierarchical AllReduce of bf16 gradients."""
    V = p.n_params * dtype_bytes("bf16")
    return C.hierarchical_time("all-reduce", V, hardware.cluster("h100", 8 * p.nodes))["inter-node"]


def cpu_reduce_scatter_result_bytes(p):
    """Ex 4.7: result bytes per device XLA:CPU reports for a bf16 psum_scatter over 8 devices."""
    moved = simulate.cpu_collective_dtype("bf16")
    V = p.R * p.C * simulate.HLO_TYPE_BYTES[moved]
    return C.collective_bytes("reduce-scatter", V, 8).result_bytes


def _dgx(p):
    return hardware.cluster(p.accelerator, 8)


def fastest_small_all_reduce(p, algorithm=None):
    """Ex 4.8: seconds of the fastest all-reduce of p.V bytes on the 8 GPUs of one p.accelerator
    node, as collectives.group_time picks it (ring, one-shot, two-shot, NVLink SHARP where the
    switch adds); ``algorithm`` forces one (for the listed mistakes)."""
    algorithms = None if algorithm is None else (algorithm,)
    return float(C.group_time("all-reduce", p.V, 8, 1, _dgx(p), algorithms=algorithms))


def ring_all_gather_time(nbytes, n, bytes_per_s, latency):
    """Ex 4.9 reference: one-way ring AllGather."""
    return C.all_gather_time(nbytes, n, bytes_per_s, latency=latency)


def torus_all_gather_time(nbytes, shape, link_bytes_per_s, latency, wraparound):
    """Ex 4.10 reference: AllGather on a 2D or 3D torus, per-link bandwidth."""
    topology = "torus_2d" if len(shape) == 2 else "torus_3d"
    n = 1
    for k in shape:
        n *= k
    return C.all_gather_time(nbytes, n, link_bytes_per_s, topology=topology, latency=latency,
                             shape=shape, wraparound=wraparound)


def hierarchical_all_reduce_time(nbytes, m, k, w_intra, w_inter, latency_intra, latency_inter):
    """Ex 4.11 reference: RS inside nodes, AR across nodes, AG inside nodes (switches)."""
    plan = C.hierarchical_schedule("all-reduce", nbytes, (m, k))
    total = 0.0
    for level, kind, V, g in plan:
        w, a = (w_intra, latency_intra) if level == "intra-node" else (w_inter, latency_inter)
        total += C.collective_time(kind, V, g, w, topology="switch", latency=a)
    return total


def flat_multirail_all_reduce(p):
    """Ex 4.12: bandwidth time (no latency) of a flat ring AllReduce of bf16 gradients over
    p.nodes DGX H100 servers, one ring per NIC: b V max(1/W_gpu, 1/(8 W_nic))."""
    V = p.n_params * dtype_bytes("bf16")
    t = C.multirail_ring_terms("all-reduce", V, hardware.cluster("h100", 8 * p.nodes))
    return max(t.intra_time, t.inter_time)


# ---- common wrong methods (tests/test_wrong_methods.py checks each FAILS for every seed) --------

def _ring_b(n):
    """AllReduce busiest-link share of a one-way ring of n devices: 2 (n - 1) / n."""
    return C.cost_terms("all-reduce", n, topology="ring")[1]


def _h100(nodes):
    return hardware.cluster("h100", 8 * nodes)


def _grad_bytes(p):
    return p.n_params * dtype_bytes("bf16")


WRONG_METHODS = {
    "4.1": {
        "AllReduce cost (an AllReduce is twice an AllGather)":
            lambda p: C.all_reduce_time(p.V, p.n, p.W, latency=p.latency),
        "bidirectional ring (the question's ring is one-way)":
            lambda p: C.all_gather_time(p.V, p.n, p.W, latency=p.latency,
                                        topology="bidirectional_ring"),
    },
    "4.2": {
        "wraparound on both axes (a 4x4 slice has none)":
            lambda p: C.all_gather_time(p.D * p.F * 2, 16, 45e9, latency=1e-6, topology="torus_2d",
                                        shape=(4, 4), wraparound=True),
        "one link for the whole slice":
            lambda p: C.all_gather_time(p.D * p.F * 2, 16, 45e9, latency=1e-6),
    },
    "4.3": {
        "wraparound on both axes (the axis of 8 has none)":
            lambda p: C.all_gather_time(p.D * p.F * 2, 128, 45e9, latency=1e-6,
                                        topology="torus_2d", shape=(8, 16), wraparound=True),
        "no wraparound at all":
            lambda p: C.all_gather_time(p.D * p.F * 2, 128, 45e9, latency=1e-6,
                                        topology="torus_2d", shape=(8, 16), wraparound=False),
    },
    "4.4": {
        "one-way ring (n - 1 steps, the full (n-1)/n share)":
            lambda p: C.latency_bound_bytes(
                p.collective, 16,
                hardware.get_cluster(f"{p.accelerator}-pod").intra_node.per_link_bytes_per_s,
                1e-6, topology="ring"),
        "all ICI links of the chip as W":
            lambda p: C.latency_bound_bytes(p.collective, 16, hardware.get(p.accelerator).link_bytes_per_s,
                                            1e-6, topology="bidirectional_ring"),
    },
    "4.5": {
        "one-way ring (ratio 2)":
            lambda p: (C.cost_terms("all-gather", p.n, topology="ring")[1]
                       / C.cost_terms("all-to-all", p.n, topology="ring")[1]),
        "switch AllToAll share (n - 1)/n^2 on a ring":
            lambda p: (C.cost_terms("all-gather", p.n, topology="bidirectional_ring")[1]
                       / C.cost_terms("all-to-all", p.n, topology="switch")[1]),
    },
    "4.6": {
        "all the gradients through each NIC (no ReduceScatter in the server first)":
            lambda p: C.all_reduce_time(_grad_bytes(p), p.nodes, 50e9, topology="switch",
                                        latency=5e-6),
        "one flat ring over all 8k GPUs through one NIC per server":
            lambda p: C.multirail_ring_time("all-reduce", _grad_bytes(p), _h100(p.nodes), rails=1),
        "an AllGather's cost for the AllReduce":
            lambda p: C.all_gather_time(_grad_bytes(p) / 8, p.nodes, 50e9, topology="switch",
                                        latency=5e-6),
    },
    "4.7": {
        "bf16 kept at 2 bytes (XLA:CPU widens it to f32)":
            lambda p: p.R * p.C * 2 / 8,
        "operand bytes (the whole array) instead of the result":
            lambda p: p.R * p.C * 4,
    },
    "4.8": {
        "the ring (2(n-1) steps) for a small message":
            lambda p: fastest_small_all_reduce(p, "ring"),
        "latency only (the bytes forgotten)":
            lambda p: min(C.algorithm_terms("all-reduce", 8, a)[0] for a in ("one_shot", "nvls"))
            * _dgx(p).intra_node.latency,
    },
    "4.12": {
        "one ring through one NIC per server (the whole 2V through one NIC)":
            lambda p: _ring_b(8 * p.nodes) * _grad_bytes(p) / 50e9,
        "NVLink and NIC times added instead of overlapped":
            lambda p: _ring_b(8 * p.nodes) * _grad_bytes(p) * (1 / 450e9 + 1 / (8 * 50e9)),
        "NVLink only (forgetting the NICs)":
            lambda p: _ring_b(8 * p.nodes) * _grad_bytes(p) / 450e9,
        "the hierarchical schedule with its phases in sequence":
            lambda p: (C.hierarchical_time("all-reduce", _grad_bytes(p), _h100(p.nodes)).total
                       - C.hierarchical_time("all-reduce", 0.0, _h100(p.nodes)).total),
    },
}

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '4.1': ('How many steps does a ring AllGather take, and what moves in each?',
            'in each of the n - 1 steps every device forwards one block of V/n bytes and pays '
            'the latency once'),
    '4.2': ('How many links bring data into a device on each axis?',
            'an axis without wraparound is a line (one link in), a wrapped axis a bidirectional '
            'ring (two); time is the bytes each device receives over those links'),
    '4.3': ('Now one axis wraps and one does not: treat them separately.',
            'the wrapped axis of 16 is a bidirectional ring; the axis of 8 is a line; add the '
            'two phases'),
    '4.4': ('Latency-bound means the per-step latency costs more than the bytes.',
            'write the AllGather time as steps · latency + bytes/bandwidth on a bidirectional '
            'ring and find the V where the two terms are equal'),
    '4.5': ('In an AllToAll every device sends a different piece to every other: which link is '
            'busiest?',
            'count the bytes crossing the middle link of the ring, for pieces of V/n² '
            'travelling each distance'),
    '4.6': ('Only the node-to-node part crosses the network: how big is it?',
            "after the in-node phase each GPU's NIC all-reduces 1/8 of the array across the "
            'servers on a ring'),
    '4.7': ('What is left on each device after a reduce-scatter, and in which dtype does '
            'XLA:CPU move it?',
            'each device keeps 1/n of the array; on CPU a bf16 collective runs in f32'),
    '4.8': ('For each algorithm, which term is larger at this size, the steps or the bytes?',
            'compute s alpha + b V / W for every algorithm printed (NVLink SHARP only where the '
            'switch adds) and keep the smallest'),
    '4.9': ('Each step forwards one block and pays one latency.',
            'multiply the number of steps by the time of one step: latency plus a block over '
            'the bandwidth'),
    '4.10': ('Do the axes one after the other; a wrapped axis sends both ways.',
             'for each axis count its hops and the links that bring data in, then add the phases'),
    '4.11': ('Two levels: inside the node on NVLink, then across nodes on the network.',
             "an AllReduce in the node over m GPUs, then one across the k nodes on each GPU's "
             '1/m share, each as a ring'),
    '4.12': ('NCCL runs one ring per NIC: which link finishes last?',
             'compute the NVLink time and the NIC time of a ring AllReduce, each with its share '
             'of V; the slower decides'),
}


# ---- More listed mistakes, each with what the student reads (issue 21).

WRONG_METHODS["4.9"] = {
    "latency left out": (
        lambda nbytes, n, bytes_per_s, latency: (n - 1) * nbytes / (n * bytes_per_s)
        + 0 * latency,
        "each of the n - 1 steps also pays the link's latency"),
    "the whole array every step": (
        lambda nbytes, n, bytes_per_s, latency: (n - 1) * (latency + nbytes / bytes_per_s),
        "in each step a device forwards one block, V/n bytes, not the whole array"),
}
WRONG_METHODS["4.10"] = {
    "every axis a line (wraparound ignored)": (
        lambda nbytes, shape, link_bytes_per_s, latency, wraparound: torus_all_gather_time(
            nbytes, shape, link_bytes_per_s, latency, (False,) * len(shape)),
        "a wrapped axis is a bidirectional ring: half the hops, and two links bring data in"),
    "no (n - 1)/n factor": (
        lambda nbytes, shape, link_bytes_per_s, latency, wraparound: (
            torus_all_gather_time(nbytes, shape, link_bytes_per_s, latency, wraparound)
            - sum(k // 2 if w else k - 1 for k, w in zip(shape, wraparound) if k > 1) * latency)
        * np.prod(shape) / max(np.prod(shape) - 1, 1)
        + sum(k // 2 if w else k - 1 for k, w in zip(shape, wraparound) if k > 1) * latency,
        "each device already holds its own 1/n of the array: it receives (n - 1)/n of it"),
}
WRONG_METHODS["4.11"] = {
    "the network phase on the whole array": (
        lambda nbytes, m, k, w_intra, w_inter, latency_intra, latency_inter: (
            hierarchical_all_reduce_time(nbytes, m, 1, w_intra, w_inter, latency_intra,
                                         latency_inter)
            + hierarchical_all_reduce_time(nbytes, 1, k, w_intra, w_inter, latency_intra,
                                           latency_inter)),
        "after the in-node phase each GPU holds 1/m of the array: only that share crosses the "
        "network"),
    "a flat ring at the network's speed": (
        lambda nbytes, m, k, w_intra, w_inter, latency_intra, latency_inter: (
            hierarchical_all_reduce_time(nbytes, 1, m * k, w_intra, w_inter, latency_intra,
                                         latency_inter)),
        "that is one flat ring over all GPUs at the network's bandwidth: the hierarchical "
        "AllReduce keeps most of the traffic on the fast links inside the node"),
}

with_messages(WRONG_METHODS, {
    "4.1": {"AllReduce cost (an AllReduce is twice an AllGather)":
            "that is an AllReduce's time: an AllGather is one pass around the ring",
            "bidirectional ring (the question's ring is one-way)": "the question's ring is one-way"},
    "4.2": {"wraparound on both axes (a 4x4 slice has none)": "a 4x4 v5e slice has no wraparound",
            "one link for the whole slice": "each axis brings data in over its own links"},
    "4.3": {"wraparound on both axes (the axis of 8 has none)": "the axis of 8 is a line",
            "no wraparound at all": "the full axis of 16 wraps around: a bidirectional ring"},
    "4.4": {"one-way ring (n - 1 steps, the full (n-1)/n share)":
            "the ring is bidirectional: n/2 steps, half the share each way",
            "all ICI links of the chip as W": "a ring on one axis uses that axis' links only"},
    "4.5": {"one-way ring (ratio 2)": "the ring is bidirectional",
            "switch AllToAll share (n - 1)/n^2 on a ring":
            "on a ring the pieces travel several hops: the middle link is the busiest"},
    "4.6": {"all the gradients through each NIC (no ReduceScatter in the server first)":
            "the in-server ReduceScatter leaves each GPU 1/8 of the array for its NIC",
            "one flat ring over all 8k GPUs through one NIC per server":
            "each GPU has its own NIC: eight rings run side by side",
            "an AllGather's cost for the AllReduce": "an AllReduce is two passes: ReduceScatter "
            "and AllGather"},
    "4.7": {"bf16 kept at 2 bytes (XLA:CPU widens it to f32)": "XLA:CPU moves bf16 as f32",
            "operand bytes (the whole array) instead of the result":
            "a reduce-scatter's result is 1/n of the array"},
    "4.8": {"the ring (2(n-1) steps) for a small message":
            "that is the ring: for a small message its 2(n - 1) steps dominate; libraries pick "
            "an algorithm with fewer steps",
            "latency only (the bytes forgotten)":
            "the bytes term b V / W still counts: add it to the steps' latency"},
    "4.12": {"one ring through one NIC per server (the whole 2V through one NIC)":
             "NCCL runs one ring per NIC: each carries 1/8 of the array",
             "NVLink and NIC times added instead of overlapped":
             "the rings' NVLink and NIC traffic overlap: the slower decides",
             "NVLink only (forgetting the NICs)": "the rings cross the NICs between servers",
             "the hierarchical schedule with its phases in sequence":
             "the question asks for a flat ring, as NCCL runs it"},
})
