"""Collective time on arrays of plans, for the estimator: the hook to ``scaling_lib.collectives``.

``group_time(kind, V, g, stride, cluster, cal)``: seconds of one collective of the full array V
over groups of g devices whose neighbours are ``stride`` device numbers apart (from the mesh
order, :func:`scaling_lib.parallelism.mesh.axis_strides`). While
``scaling_lib.collectives.group_time`` (the one cost model of every collective, its algorithm
chosen by size and topology) is not there, this module's switch model stands in for it: a
reduce-scatter inside each node, the collective across the nodes on V/m, an all-gather back
(:func:`scaling_lib.collectives.hierarchical_schedule`), each step at the calibrated NVLink or
network rate and latency.

See: the chapter "Collectives".
"""

from __future__ import annotations

import numpy as np

from .. import collectives as _collectives

def _links(cluster, cal):
    """(intra-node bytes/s, latency, inter-node bytes/s, latency, devices per node)."""
    intra = cluster.intra_node
    w_in = intra.bytes_per_s if cluster.topology in ("switch", "ring") else intra.bytes_per_s / 2
    return (w_in * cal.nvlink_efficiency, cal.nvlink_latency,
            cluster.inter_node.bytes_per_s * cal.network_efficiency, cal.network_latency,
            cluster.devices_per_node)


def _switch_time(kind, V, n, W, latency):
    """Alpha-beta time of one collective on a switch, the terms of
    :func:`scaling_lib.collectives.cost_terms` (s steps, b bytes per array byte) inlined for
    speed on arrays: all-gather and reduce-scatter s = n - 1, b = (n - 1)/n; all-reduce twice
    both; all-to-all s = n - 1, b = (n - 1)/n². tests/test_estimate.py checks they agree."""
    n = np.asarray(n, dtype=float)
    s = n - 1
    b = (n - 1) / n
    if kind == "all-reduce":
        s, b = 2 * s, 2 * b
    elif kind == "all-to-all":
        b = b / n
    return s * latency + b * V / W


def _coll_time(kind, V, g, stride, links):
    """Seconds of one collective of the full array V over groups of g devices whose members are
    ``stride`` apart, m of them per node: a reduce-scatter inside each node, the collective
    across the k = g/m nodes on V/m, an all-gather back
    (:func:`scaling_lib.collectives.hierarchical_schedule`). Broadcasts."""
    w_in, l_in, w_out, l_out, per_node = links
    g = np.asarray(g, dtype=float)
    m = np.clip(np.floor(per_node / np.maximum(stride, 1)), 1, None)
    m = np.minimum(m, g)
    m = np.where(g % m == 0, m, 1.0)
    k = g / m
    V = np.asarray(V, dtype=float)
    if kind == "all-reduce":
        t_in = 2 * _switch_time("all-gather", V, m, w_in, l_in)
        t_out = _switch_time("all-reduce", V / m, k, w_out, l_out)
    elif kind in ("all-gather", "reduce-scatter"):
        t_in = _switch_time(kind, V, m, w_in, l_in)
        t_out = _switch_time(kind, V / m, k, w_out, l_out)
    elif kind == "all-to-all":
        t_in = _switch_time(kind, V / k, m, w_in, l_in)
        t_out = _switch_time(kind, V / m, k, w_out, l_out)
    else:  # collective-permute: V bytes to a neighbour, across nodes when stride fills a node
        cross = np.asarray(stride) >= per_node
        t_in = np.where(cross, 0.0, l_in + V / w_in)
        t_out = np.where(cross, l_out + V / w_out, 0.0)
    return np.where(g > 1, t_in + t_out, 0.0)




def group_time(kind, V, g, stride, cluster, cal):
    """Seconds of one collective ``kind`` of the full array V (bytes; for a collective-permute
    the bytes each device sends) over groups of g devices ``stride`` apart on ``cluster``, at
    the calibration's link efficiencies and latencies. Broadcasts over V, g and stride."""
    fn = getattr(_collectives, "group_time", None)
    if fn is not None:
        return fn(kind, V, g, stride, cluster, calibration=cal)
    return _coll_time(kind, V, g, stride, _links(cluster, cal))
