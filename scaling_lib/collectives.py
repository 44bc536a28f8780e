"""Collectives: what AllGather, ReduceScatter, AllReduce and AllToAll cost on a network.

Notation (Chapter "Networks and collectives"): an array of V = ``nbytes`` bytes is sharded over
n devices, e.g. A[I_X, J] holds V/n bytes per device. Every cost here is an alpha-beta model,

    T = s * alpha + b * V / W,

with s the number of sequential steps (each pays the per-hop latency alpha = ``latency``) and
b * V the bytes that cross the busiest link, at W = ``bytes_per_s``. What W means depends on the
topology (one-way, per device, as everywhere in the library):

- ``ring``, ``bidirectional_ring``, ``torus_2d``, ``torus_3d``: W is the one-way bandwidth of ONE
  link (45e9 on a TPU v5e ICI link). A bidirectional ring uses two links per device, a 2D torus
  with wraparound four, so they move data 2x and 4x faster than a one-way ring.
- ``switch`` (NVSwitch-like, full bisection): W is the device's whole one-way injection bandwidth
  into the switch (450e9 for an H100 over NVLink 4).

The four collectives on a one-way ring of n devices (the book's derivation):

    AllGather:     A[I_X, J] -> A[I, J]       s = n - 1,    b = (n - 1) / n
    ReduceScatter: A[I, J]{U_X} -> A[I_X, J]  s = n - 1,    b = (n - 1) / n
    AllReduce:     A[I, J]{U_X} -> A[I, J]    = ReduceScatter + AllGather
    AllToAll:      A[I_X, J] -> A[I, J_X]     s = n - 1,    b = (n - 1) / (2 n)

AllGather and ReduceScatter are each other's transpose (the backward pass of one is the other),
and they move the same bytes over the same links in opposite directions, so they cost the same.

What the models leave out: congestion from other traffic, protocol overheads, NCCL's choice of
tree vs ring algorithms, in-network reduction (NVLink SHARP), and any overlap with compute.

See: Chapter "Networks and collectives".
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from . import hardware
from .breakdown import Breakdown
from .units import check_positive, scalar_or_array as _out

TOPOLOGIES = ("ring", "bidirectional_ring", "torus_2d", "torus_3d", "switch")

# Device counts above this are rejected: far beyond any machine, and where float steps stop
# being whole numbers (2**53).
_MAX_DEVICES = 2**40

# Collective names as XLA's HLO spells them; the library's functions use underscores.
KINDS = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute")
_KIND_ALIASES = {
    "all_gather": "all-gather", "allgather": "all-gather", "ag": "all-gather",
    "reduce_scatter": "reduce-scatter", "reducescatter": "reduce-scatter", "rs": "reduce-scatter",
    "psum_scatter": "reduce-scatter",
    "all_reduce": "all-reduce", "allreduce": "all-reduce", "ar": "all-reduce", "psum": "all-reduce",
    "all_to_all": "all-to-all", "alltoall": "all-to-all", "a2a": "all-to-all",
    "collective_permute": "collective-permute", "ppermute": "collective-permute",
    "send_recv": "collective-permute", "send-recv": "collective-permute",
}

# ---- network facts (one-way bytes/s unless said otherwise) -------------------------------------
# PCIe: lanes x transfer rate x 128b/130b encoding / 8 bits (PCI-SIG base specs 3.0-5.0).
_PCIE_GT_PER_S = {3: 8e9, 4: 16e9, 5: 32e9}


def pcie_bytes_per_s(gen=5, lanes=16):
    """One-way bandwidth of a PCIe link: lanes * rate * (128/130) / 8 bytes/s.

    ``gen`` is 3, 4 or 5 (8, 16, 32 GT/s per lane, all with 128b/130b encoding).

    >>> round(pcie_bytes_per_s(4, 16) / 1e9, 1), round(pcie_bytes_per_s(5, 16) / 1e9, 1)
    (31.5, 63.0)

    See: Chapter "Networks and collectives", "NVLink vs PCIe".
    """
    if isinstance(gen, bool) or not isinstance(gen, (int, np.integer)) or gen not in _PCIE_GT_PER_S:
        raise ValueError(f"gen={gen!r} is not a known PCIe generation; valid choices: 3, 4, 5")
    lanes = _positive("lanes", lanes)
    return _out(lanes * _PCIE_GT_PER_S[gen] * (128 / 130) / 8)


def canonical_kind(kind: str) -> str:
    """The HLO spelling of a collective's name ("all_gather" -> "all-gather").

    >>> canonical_kind("psum"), canonical_kind("all_to_all")
    ('all-reduce', 'all-to-all')
    """
    key = str(kind).strip().lower()
    key = _KIND_ALIASES.get(key, key)
    if key not in KINDS:
        raise ValueError(f"unknown collective {kind!r}; valid choices: {', '.join(KINDS)} "
                         f"(or {', '.join(sorted(_KIND_ALIASES))})")
    return key


def _positive(name, value, *, allow_zero=False):
    """``units.check_positive`` that also turns bools, complex numbers and ints too large for a
    float into a ValueError naming the rule."""
    rule = f"{name} must be a finite real number {'>= 0' if allow_zero else '> 0'}"
    if (isinstance(value, (bool, np.bool_, str, bytes)) or np.iscomplexobj(value)
            or np.asarray(value).dtype == bool):
        raise ValueError(f"{name}={value!r} is not allowed: {rule}")
    try:
        return check_positive(name, value, allow_zero=allow_zero)
    except OverflowError:
        raise ValueError(f"{name}={value!r} is too large: {rule}") from None


def _check_n(n, name="n"):
    """A device count (or array of them) as floats; ValueError unless whole numbers >= 1."""
    rule = f"{name}={n!r} devices must be a whole number in [1, 2**40]"
    if isinstance(n, (str, bytes)) or np.iscomplexobj(n):
        raise ValueError(rule)
    try:
        arr = np.asarray(n)
        as_float = np.asarray(arr, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(rule) from None
    if (arr.dtype == bool or arr.dtype == object or not np.all(np.isfinite(as_float))
            or np.any(as_float < 1) or np.any(as_float % 1 != 0)
            or np.any(as_float > _MAX_DEVICES)):
        raise ValueError(rule)
    return as_float


def _as_cluster(cluster):
    """A Cluster from a Cluster or a preset name; ValueError naming the valid names otherwise."""
    return hardware.get_cluster(cluster)


def _axes(n, topology, shape, wraparound):
    """Axis sizes and wraparound flags of a torus (the shape's product must equal n)."""
    ndim = 2 if topology == "torus_2d" else 3
    if shape is None:
        if np.ndim(n) != 0:
            raise ValueError(f"topology={topology!r} with an array of n needs an explicit shape=")
        shape = hardware.torus_shape(int(n), ndim)
    rule = f"shape={shape!r} must have {ndim} axes, whole numbers >= 1, for topology={topology!r}"
    try:
        shape = tuple(shape)
    except TypeError:
        raise ValueError(rule) from None
    if len(shape) != ndim or any(np.ndim(k) != 0 for k in shape):
        raise ValueError(rule)
    shape = tuple(int(_check_n(k, "shape")) for k in shape)
    if np.any(np.asarray(n) != math.prod(shape)):
        raise ValueError(f"shape={shape} holds {math.prod(shape)} devices but n={n!r}")
    rule = f"wraparound={wraparound!r}: give one bool or one per axis ({ndim} bools)"
    if isinstance(wraparound, (bool, np.bool_)):
        wrap = (wraparound,) * ndim
    else:
        try:
            wrap = tuple(wraparound)
        except TypeError:
            raise ValueError(rule) from None
    if len(wrap) != ndim or not all(isinstance(w, (bool, np.bool_)) for w in wrap):
        raise ValueError(rule)
    return shape, tuple(bool(w) for w in wrap)


def _axis_a2a_load(k, wrap):
    """Busiest-link share of a 1D all-to-all on k devices (a ring with wrap, else a line)."""
    if wrap:
        return math.floor(k * k / 4) / (2 * k * k)
    return math.floor(k / 2) * math.ceil(k / 2) / (k * k)


def cost_terms(collective, n, *, topology="ring", shape=None, wraparound=True):
    """(steps s, busiest-link bytes per array byte b) of a collective: T = s alpha + b V / W.

    Per topology, for AllGather (ReduceScatter is the same; AllReduce doubles both terms):

    - ring: s = n - 1, b = (n - 1) / n.
    - bidirectional_ring: s = floor(n / 2), b = (n - 1) / (2 n) (half the data goes each way).
    - torus_2d / torus_3d with axis sizes n_a: s = sum_a h_a with h_a = floor(n_a / 2) on an
      axis with wraparound and n_a - 1 without; b = (n - 1) / n / sum_a l_a with l_a = 2 links
      per wrapped axis and 1 per unwrapped one (an unwrapped axis is a line: its end devices
      have one link). Exact for equal axes; for unequal ones it assumes the array is split so
      all axes stay busy (the "gather along every axis at once" trick).
    - switch: s = n - 1 (ring schedule, as NCCL uses), b = (n - 1) / n.

    AllToAll (each device sends V / n^2 to every other): ring b = (n - 1) / (2 n);
    bidirectional ring b = floor(n^2 / 4) / (2 n^2) (about 1/8); torus: the worst axis,
    b = max_a (n_a / n) * load(n_a); switch b = (n - 1) / n^2.

    >>> cost_terms("all_gather", 8)
    (7.0, 0.875)
    >>> cost_terms("all_to_all", 16, topology="torus_2d", shape=(4, 4))
    (4.0, 0.03125)

    See: Chapter "Networks and collectives", "Costs on rings, tori and switches".
    """
    kind = canonical_kind(collective)
    if kind == "collective-permute":
        raise ValueError("a collective-permute is a send/recv: use send_recv_time")
    n = _check_n(n)
    if topology not in TOPOLOGIES:
        raise ValueError(f"topology={topology!r}; valid choices: {', '.join(TOPOLOGIES)} "
                         "(and hierarchical_time for a Cluster)")
    if kind == "all-reduce":
        s, b = cost_terms("all-gather", n, topology=topology, shape=shape, wraparound=wraparound)
        return _out(2 * np.asarray(s)), _out(2 * np.asarray(b))
    a2a = kind == "all-to-all"
    if topology == "ring":
        s, b = n - 1, (n - 1) / (2 * n) if a2a else (n - 1) / n
    elif topology == "bidirectional_ring":
        s = np.floor(n / 2)
        b = np.floor(n * n / 4) / (2 * n * n) if a2a else (n - 1) / (2 * n)
    elif topology == "switch":
        s, b = n - 1, (n - 1) / n**2 if a2a else (n - 1) / n
    else:
        if np.ndim(n) and shape is None:  # one torus shape per distinct n
            pairs = [cost_terms(kind, k, topology=topology, wraparound=wraparound) for k in n.flat]
            return (np.reshape([p[0] for p in pairs], n.shape),
                    np.reshape([p[1] for p in pairs], n.shape))
        dims, wrap = _axes(n, topology, shape, wraparound)
        axes = [(k, w) for k, w in zip(dims, wrap) if k > 1]
        s = float(sum(k // 2 if w else k - 1 for k, w in axes))
        total = math.prod(dims)
        if a2a:
            b = max((k / total * _axis_a2a_load(k, w) for k, w in axes), default=0.0)
        else:
            links = sum(2 if w else 1 for k, w in axes)
            b = (total - 1) / total / links if links else 0.0
    return _out(s), _out(b)


def collective_time(collective, nbytes, n, bytes_per_s, *, topology="ring", latency=0.0,
                    shape=None, wraparound=True):
    """Time of one collective on ``n`` devices: T = s * latency + b * nbytes / bytes_per_s.

    ``nbytes`` is the full (unsharded) array in bytes; ``bytes_per_s`` one-way, per link for rings
    and tori, per device for a switch; ``latency`` the per-hop (per-step) latency in seconds.
    (s, b) come from :func:`cost_terms`. Broadcasts over arrays.

    >>> collective_time("all_gather", 1e9, 8, 1e9)
    0.875

    See: Chapter "Networks and collectives".
    """
    V = _positive("nbytes", nbytes, allow_zero=True)
    W = _positive("bytes_per_s", bytes_per_s)
    a = _positive("latency", latency, allow_zero=True)
    s, b = cost_terms(collective, n, topology=topology, shape=shape, wraparound=wraparound)
    return _out(np.asarray(s) * a + np.asarray(b) * V / W)


def all_gather_time(nbytes, n, bytes_per_s, *, topology="ring", latency=0.0, **torus):
    """AllGather A[I_X, J] -> A[I, J]: every device ends with the whole ``nbytes`` array.

    One-way ring: T = (n - 1) * (latency + nbytes / (n W)). Other topologies: :func:`cost_terms`.
    Tori take ``shape=`` (axis sizes) and ``wraparound=`` (bool or one per axis).

    >>> all_gather_time(1e9, 4, 1e9)  # each device receives 3/4 of the array
    0.75
    >>> all_gather_time(1e9, 4, 1e9, topology="bidirectional_ring")
    0.375

    See: Chapter "Networks and collectives", "AllGather".
    """
    return collective_time("all-gather", nbytes, n, bytes_per_s, topology=topology,
                           latency=latency, **torus)


def reduce_scatter_time(nbytes, n, bytes_per_s, *, topology="ring", latency=0.0, **torus):
    """ReduceScatter A[I, J]{U_X} -> A[I_X, J]: sum n partial arrays, keep one shard each.

    The transpose of AllGather, with the same cost: T = (n - 1) * (latency + nbytes / (n W))
    on a one-way ring.

    >>> reduce_scatter_time(1e9, 4, 1e9) == all_gather_time(1e9, 4, 1e9)
    True

    See: Chapter "Networks and collectives", "ReduceScatter".
    """
    return collective_time("reduce-scatter", nbytes, n, bytes_per_s, topology=topology,
                           latency=latency, **torus)


def all_reduce_time(nbytes, n, bytes_per_s, *, topology="ring", latency=0.0, **torus):
    """AllReduce A[I, J]{U_X} -> A[I, J] = ReduceScatter then AllGather: twice their cost.

    One-way ring: T = 2 (n - 1) * (latency + nbytes / (n W)).

    >>> all_reduce_time(1e9, 4, 1e9)
    1.5

    See: Chapter "Networks and collectives", "AllReduce".
    """
    return collective_time("all-reduce", nbytes, n, bytes_per_s, topology=topology,
                           latency=latency, **torus)


def all_to_all_time(nbytes, n, bytes_per_s, *, topology="ring", latency=0.0, **torus):
    """AllToAll A[I_X, J] -> A[I, J_X]: every device sends nbytes / n^2 to every other.

    One-way ring: T = (n - 1) * latency + (n - 1) / (2 n) * nbytes / W (chunks travel d hops);
    a bidirectional ring is about 1/4 of an AllGather, a switch (n - 1) / n^2 * nbytes / W.

    >>> all_to_all_time(1e9, 4, 1e9)
    0.375
    >>> all_to_all_time(1e9, 4, 1e9, topology="switch")
    0.1875

    See: Chapter "Networks and collectives", "AllToAll".
    """
    return collective_time("all-to-all", nbytes, n, bytes_per_s, topology=topology,
                           latency=latency, **torus)


def send_recv_time(nbytes, bytes_per_s, latency=0.0):
    """Point-to-point send of ``nbytes`` over one link: T = latency + nbytes / W.

    >>> send_recv_time(1e6, 1e9, latency=1e-6)
    0.001001

    See: Chapter "Networks and collectives", "Send/recv".
    """
    V = _positive("nbytes", nbytes, allow_zero=True)
    W = _positive("bytes_per_s", bytes_per_s)
    return _out(_positive("latency", latency, allow_zero=True) + V / W)


def latency_bound_bytes(collective, n, bytes_per_s, latency, *, topology="ring", shape=None,
                        wraparound=True):
    """Array size V* below which a collective is latency-bound: s * latency = b * V* / W.

    V* = s * latency * W / b. Below V* the latency term dominates; at V* the collective takes
    twice its bandwidth-only time. NaN when n = 1 (nothing to send).

    >>> latency_bound_bytes("all_gather", 16, 45e9, 1e-6, topology="bidirectional_ring")
    768000.0

    See: Chapter "Networks and collectives", "The latency-bound regime".
    """
    W = _positive("bytes_per_s", bytes_per_s)
    a = _positive("latency", latency, allow_zero=True)
    s, b = cost_terms(collective, n, topology=topology, shape=shape, wraparound=wraparound)
    b = np.asarray(b, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return _out(np.where(b > 0, np.asarray(s) * a * W / np.where(b > 0, b, 1.0), np.nan))


class CollectiveBytes(NamedTuple):
    """Per-device bytes of one collective: buffers (as XLA reports them) and traffic."""

    operand_bytes: float  # the input buffer on each device
    result_bytes: float  # the output buffer on each device
    sent_bytes: float  # bytes each device must send (forwarding by other hops not counted)
    received_bytes: float  # bytes each device must receive


def collective_bytes(collective, nbytes, n) -> CollectiveBytes:
    """Per-device operand, result, sent and received bytes of a collective over ``n`` devices.

    ``nbytes`` is the full array V (for a collective-permute: the array whose V / n shards are
    shifted between devices):

        all-gather          V / n -> V          sends and receives (n - 1) V / n
        reduce-scatter      V -> V / n          sends and receives (n - 1) V / n
        all-reduce          V -> V              sends and receives 2 (n - 1) V / n
        all-to-all          V / n -> V / n      sends and receives (n - 1) V / n^2
        collective-permute  V / n -> V / n      sends and receives V / n

    >>> collective_bytes("all_gather", 800, 8)
    CollectiveBytes(operand_bytes=100.0, result_bytes=800.0, sent_bytes=700.0, received_bytes=700.0)

    See: Chapter "Networks and collectives", "What XLA emits".
    """
    kind = canonical_kind(collective)
    V = np.asarray(_positive("nbytes", nbytes, allow_zero=True), dtype=float)
    n = _check_n(n)
    shard = V / n
    if kind == "all-gather":
        out = (shard, V, (n - 1) * shard, (n - 1) * shard)
    elif kind == "reduce-scatter":
        out = (V, shard, (n - 1) * shard, (n - 1) * shard)
    elif kind == "all-reduce":
        out = (V, V, 2 * (n - 1) * shard, 2 * (n - 1) * shard)
    elif kind == "all-to-all":
        out = (shard, shard, (n - 1) * shard / n, (n - 1) * shard / n)
    else:
        out = (shard, shard, shard, shard)
    return CollectiveBytes(*(_out(np.broadcast_to(x, np.broadcast(V, n).shape)) for x in out))


# ---- clusters: intra-node, inter-node, inter-pod --------------------------------------------------

LEVELS = ("intra-node", "inter-node", "inter-pod")


def intra_node_link_bytes_per_s(cluster) -> float:
    """The ``bytes_per_s`` argument for a cluster's intra-node topology.

    switch and ring: the device's whole one-way bandwidth (a ring driven over all links);
    bidirectional_ring: half of it per direction; tori: one link's bandwidth.

    >>> intra_node_link_bytes_per_s(hardware.cluster("tpu-v5e", 256))
    45000000000.0
    """
    cluster = _as_cluster(cluster)
    link = cluster.intra_node
    if cluster.topology in ("switch", "ring"):
        return link.bytes_per_s
    if cluster.topology == "bidirectional_ring":
        return link.bytes_per_s / 2
    return link.per_link_bytes_per_s


def cluster_levels(cluster, n_devices=None) -> tuple:
    """Group sizes (inner first) of ``n_devices`` of a cluster: (devices per node, nodes), or
    (devices per node, nodes per pod, pods) when they span several pods. ``n_devices`` must fill
    whole nodes (and pods).

    >>> cluster_levels(hardware.cluster("h100", 64)), cluster_levels(hardware.cluster("h100", 4))
    ((8, 8), (4, 1))
    """
    cluster = _as_cluster(cluster)
    n = cluster.n_devices if n_devices is None else n_devices
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or not 1 <= n <= cluster.n_devices:
        raise ValueError(f"n_devices={n!r} must be a whole number in [1, {cluster.n_devices}]")
    n = int(n)
    m = min(n, cluster.devices_per_node)
    pod = cluster.devices_per_pod
    if n % m or (pod and n > pod and n % pod):
        unit = pod if (pod and n > pod) else m
        raise ValueError(f"n_devices={n} is not a whole number of nodes of {m}"
                         + (f" and pods of {pod}" if unit == pod else "")
                         + f"; choose a multiple of {unit}")
    if pod and n > pod:
        return (m, pod // m, n // pod)
    return (m, n // m)


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
    pipelines the phases; compare with :func:`multirail_ring_time`, the flat alternative.

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


class RingTerms(NamedTuple):
    """The parts of a flat multi-rail ring collective (seconds); see :func:`multirail_ring_time`."""

    latency_time: float  # s * alpha, at the slowest hop the ring crosses
    intra_time: float  # b V / W_gpu: what each device pushes over NVLink
    inter_time: float  # b V / (r W_nic): what each node pushes out through its r NICs

    @property
    def total(self) -> float:
        """latency + max(intra, inter): NVLink and NIC traffic flow at the same time."""
        return _out(np.asarray(self.latency_time)
                    + np.maximum(np.asarray(self.intra_time), np.asarray(self.inter_time)))


_RING_KINDS = ("all-gather", "reduce-scatter", "all-reduce")


def multirail_ring_terms(collective, nbytes, cluster, n_devices=None, *, rails=None) -> RingTerms:
    """Latency, NVLink and NIC parts of a flat ring collective run as one ring per NIC (rail).

    How NCCL runs a ring over k nodes of m GPUs: it builds r rings (one per NIC, r = m on a DGX
    H100) that each visit the m GPUs of a node one after another over NVLink, leave the node
    through their own NIC and enter the next node. Every ring carries 1/r of the array, and every
    link of a ring carries the same share, so with (s, b) of a one-way ring over n = m k devices
    (:func:`cost_terms`: AllGather b = (n - 1)/n, AllReduce 2 (n - 1)/n):

        intra = b V / W_gpu          (each GPU's NVLink carries its part of all r rings)
        inter = b V / (r W_nic)      (a node's r NICs each carry one ring's crossing)
        T     = s alpha + max(intra, inter)

    The two parts overlap (every step moves data over NVLink and the NICs at once), so the ring
    runs at its slowest link: the max, not the sum. ``intra`` is 0 with one device per node and
    ``inter`` is 0 inside one node. W_gpu is the node's one-way per-device bandwidth
    (``cluster.intra_node.bytes_per_s``, a switch); W_nic is ``cluster.inter_node.bytes_per_s``
    per NIC; r * W_nic is the node's egress. alpha is the slowest hop the ring crosses (the
    network's when k > 1). ``rails`` defaults to m (one NIC per GPU); ``rails=1`` is one ring
    through one NIC per node, the slow flat ring a naive comparison uses.

    Leaves out: the spine between pods (a flat ring crosses it through a few NICs per pod, far
    below its oversubscribed capacity, so W_nic is used there too), NCCL's tree and NVLink SHARP
    algorithms, and protocol overheads.

    >>> t = multirail_ring_terms("all_reduce", 16e9, hardware.cluster("h100", 1024))
    >>> round(t.intra_time * 1e3, 1), round(t.inter_time * 1e3, 1), round(t.total * 1e3, 1)
    (71.0, 79.9, 90.2)

    See: Chapter "Networks and collectives", "Hierarchical collectives".
    """
    kind = canonical_kind(collective)
    if kind not in _RING_KINDS:
        raise ValueError(f"collective={collective!r}: a ring runs {', '.join(_RING_KINDS)}; "
                         "for an all-to-all use hierarchical_time")
    cluster = _as_cluster(cluster)
    if cluster.topology != "switch":
        raise ValueError(f"cluster {cluster.name!r} has a {cluster.topology} inside its nodes; the "
                         "multi-rail ring models switched nodes (NVSwitch) with one NIC per GPU: "
                         "use hierarchical_time for TPU slices")
    V = np.asarray(_positive("nbytes", nbytes, allow_zero=True), dtype=float)
    groups = cluster_levels(cluster, n_devices)
    m, n = groups[0], math.prod(groups)
    k = n // m
    if rails is None:
        rails = m
    if isinstance(rails, bool) or not isinstance(rails, (int, np.integer)) or not 1 <= rails <= m:
        raise ValueError(f"rails={rails!r} must be a whole number of NICs per node in [1, {m}] "
                         f"(one per GPU at most)")
    s, b = cost_terms(kind, n, topology="ring")
    if k > 1:
        alpha = max(cluster.intra_node.latency if m > 1 else 0.0, cluster.inter_node.latency,
                    cluster.inter_pod.latency if len(groups) == 3 else 0.0)
    else:
        alpha = cluster.intra_node.latency
    intra = b * V / cluster.intra_node.bytes_per_s if m > 1 else 0.0 * V
    inter = b * V / (int(rails) * cluster.inter_node.bytes_per_s) if k > 1 else 0.0 * V
    return RingTerms(_out(s * alpha + 0.0 * V), _out(intra), _out(inter))


def multirail_ring_time(collective, nbytes, cluster, n_devices=None, *, rails=None) -> float:
    """Time of a flat ring collective over a GPU cluster, one ring per NIC:

        T = s alpha + b V max(1 / W_gpu, 1 / (r W_nic)).

    For an AllReduce of V bytes on k nodes of m GPUs with one NIC each (r = m), about
    max(2V / W_gpu, 2V / W_node_egress): NVLink and NIC traffic overlap. The parts and the
    assumptions are in :func:`multirail_ring_terms`; ``cluster`` is a Cluster or a preset name.

    >>> round(multirail_ring_time("all_reduce", 16e9, "dgx-h100") * 1e3, 1)
    62.3

    See: Chapter "Networks and collectives", "Hierarchical collectives".
    """
    return multirail_ring_terms(collective, nbytes, cluster, n_devices, rails=rails).total


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


def flat_cluster(accelerator, n, topology, *, shape=None) -> hardware.Cluster:
    """All ``n`` devices in one scale-up domain wired as ``topology``, from the chip's own links.

    For comparing topologies on equal footing: a switch or ring gets the chip's whole one-way link
    bandwidth, a bidirectional ring half of it per direction, a torus one link
    (``link_bytes_per_s / n_links``) per neighbour. A TPU torus of its own dimension keeps its
    real wraparound (``hardware.wraparound``); any other torus is taken to wrap on every axis.

    >>> c = flat_cluster("tpu-v5e", 128, "torus_2d")
    >>> c.torus_shape, c.wraparound, c.n_nodes, intra_node_link_bytes_per_s(c)
    ((8, 16), (False, True), 1, 45000000000.0)
    """
    if topology not in TOPOLOGIES:
        raise ValueError(f"topology={topology!r}; valid choices: {', '.join(TOPOLOGIES)}")
    if np.ndim(n) != 0:
        raise ValueError(f"n={n!r}: flat_cluster builds one cluster; give one device count")
    n = int(_check_n(n))
    kw = {"torus_shape": (), "wraparound": ()}
    if topology.startswith("torus"):
        ndim = 2 if topology == "torus_2d" else 3
        dims = (hardware.torus_shape(n, ndim) if shape is None
                else _axes(n, topology, shape, True)[0])
        try:
            wrap = hardware.wraparound(accelerator, dims)
        except ValueError:  # not a TPU, or a torus this TPU does not build
            wrap = (True,) * len(dims)
        kw = {"torus_shape": dims, "wraparound": wrap}
    return hardware.cluster(accelerator, n, devices_per_node=n, topology=topology, **kw)
