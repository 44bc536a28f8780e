"""One collective of a group of devices on a real cluster: the cost model everything calls.

:func:`group_time` takes the group as the parallelism strategies see it: ``group_size`` devices,
``stride`` ranks apart in the cluster's device order (rank r sits in node r // devices_per_node;
on a TPU slice, axis 0 of ``torus_shape`` is the innermost). From them it finds where the group
lies, level by level (the hierarchy of :func:`scaling_lib.collectives.hierarchical_schedule`):

    m        members inside one node (an NVSwitch box, or a TPU slice on ICI),
    k_node   nodes of one pod it spans (scale-out network, one NIC per GPU: every GPU of the
             node runs its own share across nodes, i.e. one ring per rail),
    k_pod    pods (the links between pods, when the cluster has them),

and costs the phases: an all-reduce is a reduce-scatter at each level below the top one, an
all-reduce at the top level, and the all-gathers back; an all-gather or reduce-scatter one phase
per level, an all-to-all one per level on its share (V g_level / g). Each phase is alpha-beta:

- inside a switched node, the fastest algorithm a collective library would pick for that size
  (:mod:`.algorithms`: ring, one-shot, two-shot, NVLink SHARP) when the all-reduce stays in the
  node, the ring (s = m - 1, b = (m - 1)/m per all-gather) for the phases of a larger one;
- inside a TPU slice, the torus rules (:func:`torus_terms`) on the sub-torus the group occupies:
  its axes, their wraparound, and the spacing of its members (a strided group shares links with
  the groups interleaved with it, and each of its steps crosses more hops);
- across nodes and pods, a full-bisection network at the link's per-device bandwidth, with the
  ring or NCCL's tree (2 ceil(log2 k) steps) for the all-reduce, whichever is faster.

A collective-permute (a send to the next member) costs one step plus V / W on the slowest link
its neighbours are apart on. ``calibration`` (any object with ``nvlink_efficiency``,
``nvlink_latency``, ``network_efficiency`` and ``network_latency``, e.g. the estimator's
``Calibration``) scales the bandwidths inside (NVLink or ICI) and across nodes by the efficiencies
and replaces the per-step latencies; without it the cluster's nominal line rates and hop
latencies apply, and with ``algorithms=("ring",)`` the result is
:func:`scaling_lib.collectives.hierarchical_time` of the group.

See: Chapter "Networks and collectives", "Hierarchical collectives" and "Small messages".
"""

from __future__ import annotations

import functools

import numpy as np

from .. import hardware  # noqa: F401  (the doctests build clusters with it)
from ..units import scalar_or_array as _out
from .algorithms import algorithm_times, available
from .clusters import intra_node_link_bytes_per_s
from .costs import _flat_terms, torus_terms
from .names import canonical_kind
from .validation import _as_cluster, _check_n, _positive


def _torus_axes(shape, wrap, g, stride):
    """The axes (members k_a, wraps, spacing d_a) a group of g devices ``stride`` apart occupies
    on a torus whose axis 0 is innermost; None when the group does not follow the axes."""
    axes, st, rest = [], int(stride), int(g)
    for n_a, w in zip(shape, wrap):
        if rest == 1:
            break
        if st >= n_a:
            if st % n_a:
                return None
            st //= n_a
            continue
        if n_a % st:
            return None
        span = n_a // st
        c = min(rest, span)
        if rest % c:
            return None
        axes.append((c, bool(w) and c == span, st))
        rest //= c
        st = 1
    return axes if rest == 1 else None


def _links(cluster, calibration):
    """Per level: (bytes/s, seconds per step). Intra-node bytes/s is per link on a torus."""
    cal = calibration
    eff_in = 1.0 if cal is None else float(cal.nvlink_efficiency)
    eff_out = 1.0 if cal is None else float(cal.network_efficiency)
    w_in = intra_node_link_bytes_per_s(cluster) * eff_in
    a_in = cluster.intra_node.latency if cal is None else float(cal.nvlink_latency)
    w_out = cluster.inter_node.bytes_per_s * eff_out
    a_out = cluster.inter_node.latency if cal is None else float(cal.network_latency)
    pod = cluster.inter_pod
    w_pod = pod.bytes_per_s * eff_out if pod is not None else w_out
    a_pod = (pod.latency if cal is None else float(cal.network_latency)) if pod is not None \
        else a_out
    return {"intra-node": (w_in, a_in), "inter-node": (w_out, a_out), "inter-pod": (w_pod, a_pod)}


def _split(g, st, cluster):
    """Members per node m, nodes per pod k_node and pods k_pod of groups (g, stride)."""
    per_node = cluster.devices_per_node
    m = np.clip(np.floor(per_node / st), 1, None)
    m = np.minimum(m, g)
    m = np.where(g % m == 0, m, 1.0)
    pod = cluster.devices_per_pod
    if not pod or cluster.inter_pod is None:
        return m, g / m, np.ones_like(g)
    mp = np.minimum(np.clip(np.floor(pod / st), 1, None), g)
    mp = np.where((g % mp == 0) & (mp % m == 0), mp, m)
    return m, mp / m, g / mp


def _torus_sb(kind, m, st, cluster):
    """(s, b) of each (m, stride) on the cluster's slice, from :func:`torus_terms`."""
    shape = cluster.torus_shape or hardware.torus_shape(cluster.devices_per_node,
                                                         3 if cluster.topology == "torus_3d"
                                                         else 2)
    wrap = cluster.wraparound or (True,) * len(shape)
    m, st = np.broadcast_arrays(m, st)
    base = int(st.max()) + 1  # one integer key per (m, stride) pair (int64: m base < 2**63)
    key, inv = np.unique(m.ravel().astype(np.int64) * base + st.ravel().astype(np.int64),
                         return_inverse=True)
    terms = []
    for k in key.tolist():  # one (m, stride) pair each: a handful of distinct groups
        mm, ss = divmod(k, base)
        axes = _torus_axes(shape, wrap, mm, ss)
        if axes is None:  # not along the axes: a line of mm members, ss hops apart
            axes = [(mm, False, ss)]
        terms.append(torus_terms(kind, axes))
    s, b = (np.asarray(x, dtype=float)[inv].reshape(m.shape) for x in zip(*terms))
    return s, b


def _intra(kind, V, m, st, cluster, link, *, whole, algorithms):
    """Seconds of one phase among the m members of a node (0 where m = 1)."""
    w, a = link
    topo = cluster.topology
    if topo.startswith("torus"):
        s, b = _torus_sb(kind, m, st, cluster)
        t = s * a + b * V / w
    elif topo == "switch" and kind == "all-reduce" and whole:
        names = available(kind, cluster.accelerator.name, nodes=1, algorithms=algorithms)
        t = functools.reduce(np.minimum, algorithm_times(kind, V, m, w, a, names).values())
    else:
        s, b = _flat_terms(kind, m, topo)
        t = s * a + b * V / w
    return np.where(m > 1, t, 0.0)


def _outer(kind, V, k, link, accelerator, algorithms):
    """Seconds of one phase across k nodes or pods (full bisection; ring or tree)."""
    w, a = link
    if not np.any(k > 1):
        return np.zeros(np.broadcast(V, k).shape)
    names = available(kind, accelerator, nodes=2, algorithms=algorithms)
    times = algorithm_times(kind, V, k, w, a, names)
    t = functools.reduce(np.minimum, times.values())
    return np.where(k > 1, t, 0.0)


def _pick(cond, if_true, if_false):
    """np.where(cond, if_true(), if_false()), computing only the branches some element takes."""
    if np.all(cond):
        return np.broadcast_to(if_true(), cond.shape)
    if not np.any(cond):
        return np.broadcast_to(if_false(), cond.shape)
    return np.where(cond, if_true(), if_false())


def group_time(kind, nbytes, group_size, stride, cluster, *, calibration=None, algorithms=None):
    """Seconds of one collective of the full array V = ``nbytes`` over groups of ``group_size``
    devices ``stride`` ranks apart on ``cluster``. Broadcasts over nbytes, group_size, stride.

    ``kind``: all-gather, reduce-scatter, all-reduce, all-to-all (V the full array, as in
    :func:`all_gather_time`), or collective-permute (V = the bytes each device sends to its
    neighbour). The model is in the module docstring. ``algorithms`` narrows the algorithms
    (:data:`scaling_lib.collectives.algorithms.ALGORITHMS`; None: all that apply).
    Groups of one device cost 0.

    >>> c = hardware.cluster("h100", 16)
    >>> round(group_time("all-reduce", 16e3, 8, 1, c) * 1e6, 2)  # NVLink SHARP, 3 steps of 2 us
    6.05
    >>> round(group_time("all-reduce", 16e3, 8, 1, c, algorithms=("ring",)) * 1e6, 2)
    28.06
    >>> round(group_time("all-reduce", 1e9, 64, 1, hardware.cluster("tpu-v5p", 64)) * 1e3, 2)
    3.66

    See: Chapter "Networks and collectives", "Hierarchical collectives" and "Small messages".
    """
    kind = canonical_kind(kind)
    cluster = _as_cluster(cluster)
    V = np.asarray(_positive("nbytes", nbytes, allow_zero=True), dtype=float)
    g = _check_n(group_size, "group_size")
    st = _check_n(stride, "stride")
    V, g, st = np.broadcast_arrays(V, g, st)
    links = _links(cluster, calibration)
    acc = cluster.accelerator.name
    m, k_node, k_pod = _split(g, st, cluster)
    if kind == "collective-permute":
        per_pod = cluster.devices_per_pod if cluster.inter_pod is not None else 0
        level = np.where(st >= cluster.devices_per_node, 1, 0)
        if per_pod:
            level = np.where(st >= per_pod, 2, level)
        t = np.zeros(V.shape)
        for i, name in enumerate(("intra-node", "inter-node", "inter-pod")):
            w, a = links[name]
            d = np.ones(V.shape)
            if i == 0 and cluster.topology.startswith("torus"):  # hops to the neighbour
                d = _torus_sb("all-gather", np.full(V.shape, 2.0), st, cluster)[0]
            t = np.where(level == i, d * a + d * V / w, t)
        return _out(np.where(g > 1, t, 0.0))
    if kind == "all-to-all":
        t = (_intra(kind, V * m / g, m, st, cluster, links["intra-node"], whole=False,
                    algorithms=algorithms)
             + _outer(kind, V * k_node / g, k_node, links["inter-node"], acc, algorithms)
             + _outer(kind, V * k_pod / g, k_pod, links["inter-pod"], acc, algorithms))
        return _out(np.where(g > 1, t, 0.0))
    # all-gather, reduce-scatter and all-reduce: one phase per level on V / (members inside)
    whole_node = (k_node == 1) & (k_pod == 1)
    if kind == "all-reduce":
        # the top level all-reduces; the levels below reduce-scatter and all-gather (2 phases)
        half = "all-gather"
        t_in = _pick(whole_node,
                     lambda: _intra("all-reduce", V, m, st, cluster, links["intra-node"],
                                    whole=True, algorithms=algorithms),
                     lambda: 2 * _intra(half, V, m, st, cluster, links["intra-node"],
                                        whole=False, algorithms=algorithms))
        V2 = V / m
        t_node = _pick(k_pod == 1,
                       lambda: _outer("all-reduce", V2, k_node, links["inter-node"], acc,
                                      algorithms),
                       lambda: 2 * _outer(half, V2, k_node, links["inter-node"], acc,
                                          algorithms))
        t = t_in + t_node
        if np.any(k_pod > 1):
            t = t + _outer("all-reduce", V2 / k_node, k_pod, links["inter-pod"], acc,
                           algorithms)
    else:
        t = (_intra(kind, V, m, st, cluster, links["intra-node"], whole=False,
                    algorithms=algorithms)
             + _outer(kind, V / m, k_node, links["inter-node"], acc, algorithms)
             + _outer(kind, V / (m * k_node), k_pod, links["inter-pod"], acc, algorithms))
    return _out(np.where(g > 1, t, 0.0))
