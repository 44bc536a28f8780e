"""Hierarchical collectives: the fast network inside a node first, then the slower outer ones.

:func:`hierarchical_schedule` lists the phases (level, kind, bytes, participants),
:func:`hierarchical_time` sums their alpha-beta times by level, :func:`hierarchical_pipelined_time`
overlaps them, and :func:`cluster_latency_bound_bytes` is the size below which latency dominates.

See: Chapter "Networks and collectives", "Hierarchical collectives".
"""

from __future__ import annotations

import math

import numpy as np

from .. import hardware
from ..breakdown import Breakdown
from ..units import scalar_or_array as _out
from .clusters import LEVELS, cluster_levels, intra_node_link_bytes_per_s
from .costs import collective_time
from .names import canonical_kind
from .validation import _as_cluster, _check_n, _positive

def hierarchical_schedule(collective, nbytes, groups) -> tuple:
    """The phases of a multi-level collective: (level, kind, full array bytes, participants).

    ``groups`` are the group sizes from the inside out, e.g. (m, k) for k nodes of m devices
    (n = m k), or (m, k, p) with p pods. With V = ``nbytes``, for two levels:

        AllGather     = inter AG of V / m over k nodes, then intra AG of V over m
        ReduceScatter = intra RS of V over m, then inter RS of V / m over k
        AllReduce     = intra RS of V, inter AR of V / m, intra AG of V
        AllToAll      = intra A2A of V / k over m, then inter A2A of V / m over k

    Each device joins an outer phase with only its share of the inner ones, so the slow network
    carries V / m per device: m times less than a flat ring over the network would.

    >>> hierarchical_schedule("all_reduce", 800.0, (4, 2))
    (('intra-node', 'reduce-scatter', 800.0, 4), ('inter-node', 'all-reduce', 200.0, 2), \
('intra-node', 'all-gather', 800.0, 4))

    See: Chapter "Networks and collectives", "Hierarchical collectives".
    """
    kind = canonical_kind(collective)
    V = np.asarray(_positive("nbytes", nbytes, allow_zero=True), dtype=float)
    rule = f"groups={groups!r} must be 1 to {len(LEVELS)} whole numbers >= 1, inner first"
    try:
        sizes = tuple(groups)
    except TypeError:
        raise ValueError(rule) from None
    if not 1 <= len(sizes) <= len(LEVELS):
        raise ValueError(rule)
    if any(np.ndim(g) != 0 for g in sizes):
        raise ValueError(rule)
    groups = tuple(int(_check_n(g, "groups")) for g in sizes)
    inner = np.cumprod((1,) + groups[:-1])  # devices inside one group of each level
    n = math.prod(groups)
    # groups of one device cost nothing and are left out
    if kind == "all-to-all":
        return tuple((LEVELS[i], kind, _out(V * g / n), g) for i, g in enumerate(groups) if g > 1)
    phase = [(LEVELS[i], V / inner[i], g) for i, g in enumerate(groups) if g > 1]
    if not phase:
        return ()
    if kind == "all-gather":
        return tuple((lv, kind, _out(v), g) for lv, v, g in reversed(phase))
    if kind == "reduce-scatter":
        return tuple((lv, kind, _out(v), g) for lv, v, g in phase)
    if kind == "all-reduce":
        down = [(lv, "reduce-scatter", _out(v), g) for lv, v, g in phase[:-1]]
        top = [(phase[-1][0], "all-reduce", _out(phase[-1][1]), phase[-1][2])]
        up = [(lv, "all-gather", _out(v), g) for lv, v, g in reversed(phase[:-1])]
        return tuple(down + top + up)
    raise ValueError("a collective-permute is a send/recv: use send_recv_time")


def _phase_time(level, kind, nbytes, g, cluster):
    if level == "intra-node":
        kw = {}
        if cluster.topology.startswith("torus"):
            shape = cluster.torus_shape or None
            if shape is not None and math.prod(shape) != g:
                raise ValueError(f"{g} devices per node do not fill torus_shape={shape}; use a "
                                 "cluster whose node is the torus you mean")
            kw = dict(shape=shape, wraparound=cluster.wraparound or True)
        return collective_time(kind, nbytes, g, intra_node_link_bytes_per_s(cluster),
                               topology=cluster.topology, latency=cluster.intra_node.latency, **kw)
    link = cluster.inter_node if level == "inter-node" else cluster.inter_pod
    return collective_time(kind, nbytes, g, link.bytes_per_s, topology="switch",
                           latency=link.latency)


def hierarchical_time(collective, nbytes, cluster, n_devices=None) -> Breakdown:
    """A collective over a cluster: the fast intra-node network, then the slower outer ones.

    Sums the phases of :func:`hierarchical_schedule` over the groups of :func:`cluster_levels`:
    intra-node phases on the node's topology (``cluster.topology``; TPU tori with their real
    ``cluster.wraparound``), inter-node phases on a full-bisection switch at
    ``cluster.inter_node.bytes_per_s`` per device, inter-pod phases at
    ``cluster.inter_pod.bytes_per_s``. Returns a Breakdown (seconds) by level. ``cluster`` is a
    ``hardware.Cluster`` or a preset name (``hardware.get_cluster``: "dgx-h100", "tpu-v5e-4x8", ...).

    Every phase is a separate step here: the sum is an upper bound when a real implementation
    pipelines the phases; compare with :func:`multirail_ring_time`, the flat alternative. It is
    :func:`scaling_lib.collectives.group_time` of all ``n_devices`` (stride 1) with the ring
    only; ``group_time`` also picks the algorithm a library runs for the size (tests check).

    >>> t = hierarchical_time("all_gather", 1e9, hardware.cluster("h100", 16))
    >>> round(t["intra-node"] * 1e3, 3), round(t["inter-node"] * 1e3, 3)
    (1.958, 1.255)

    See: Chapter "Networks and collectives", "Hierarchical collectives".
    """
    cluster = _as_cluster(cluster)
    groups = cluster_levels(cluster, n_devices)
    parts = {lv: 0.0 for lv in LEVELS[:len(groups)]}
    for level, kind, V, g in hierarchical_schedule(collective, nbytes, groups):
        parts[level] = _out(np.asarray(parts[level]) + _phase_time(level, kind, V, g, cluster))
    return Breakdown(parts, unit="s")


def hierarchical_pipelined_time(collective, nbytes, cluster, n_devices=None) -> float:
    """The hierarchy with its phases overlapped: every phase's latency, but only the slowest
    phase's bandwidth term,

        T = sum_phases s alpha + max_levels (b V / W summed over that level's phases),

    what cutting the array into chunks and running the phases as a pipeline approaches (the
    phases of :func:`hierarchical_time` are otherwise in sequence). Bounds: the slowest level
    alone below, :func:`hierarchical_time` above.

    >>> round(hierarchical_pipelined_time("all_reduce", 16e9, hardware.cluster("h100", 1024)) * 1e3, 1)
    80.7

    See: Chapter "Networks and collectives", "Hierarchical collectives".
    """
    cluster = _as_cluster(cluster)
    full = hierarchical_time(collective, nbytes, cluster, n_devices)
    zero = hierarchical_time(collective, 0.0, cluster, n_devices)
    bandwidth = [np.asarray(full[lv]) - np.asarray(zero[lv]) for lv in full]
    return _out(np.asarray(zero.total) + np.max(np.stack(bandwidth), axis=0))


def cluster_latency_bound_bytes(collective, cluster, n_devices=None) -> float:
    """Array size below which a collective over a cluster is latency-bound.

    The hierarchical time is T(V) = T(0) + V * slope (every phase is alpha-beta), so the latency
    and bandwidth parts are equal at V* = T(0) / slope.

    >>> round(cluster_latency_bound_bytes("all_reduce", hardware.cluster("h100", 8)) / 1e6, 2)
    7.2

    See: Chapter "Networks and collectives", "The latency-bound regime".
    """
    cluster = _as_cluster(cluster)
    t0 = hierarchical_time(collective, 0.0, cluster, n_devices).total
    slope = hierarchical_time(collective, 1.0, cluster, n_devices).total - t0
    return float(t0 / slope) if slope > 0 else math.nan
