"""Answer key for Chapter 4 (Networks and collectives) exercises."""

from __future__ import annotations

from .. import collectives as C
from .. import hardware, simulate
from ..units import dtype_bytes


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


def pooled_memory_slowdown(p):
    """Ex 4.8: how many times slower a neighbour's HBM streams over NVLink than one's own HBM."""
    acc = hardware.get(p.accelerator)
    return acc.hbm_bytes_per_s / acc.link_bytes_per_s


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
