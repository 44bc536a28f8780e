"""The alpha-beta cost of one collective on a ring, a torus or a switch.

:func:`cost_terms` gives (s, b) of T = s * alpha + b * V / W per topology; :func:`collective_time`
evaluates it, and :func:`all_gather_time`, :func:`reduce_scatter_time`, :func:`all_reduce_time`,
:func:`all_to_all_time` and :func:`send_recv_time` name the cases. :func:`latency_bound_bytes`
is the size where the two terms are equal. W is one-way: per link for rings and tori, per
device for a switch (see the package docstring).

See: Chapter "Networks and collectives", "Costs on rings, tori and switches".
"""

from __future__ import annotations

import math

import numpy as np

from ..units import scalar_or_array as _out
from .names import TOPOLOGIES, canonical_kind
from .validation import _axes, _check_n, _positive

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
    if not topology.startswith("torus"):
        s, b = _flat_terms(kind, n, topology)
    else:
        if np.ndim(n) and shape is None:  # one torus shape per distinct n
            pairs = [cost_terms(kind, k, topology=topology, wraparound=wraparound) for k in n.flat]
            return (np.reshape([p[0] for p in pairs], n.shape),
                    np.reshape([p[1] for p in pairs], n.shape))
        dims, wrap = _axes(n, topology, shape, wraparound)
        s, b = torus_terms(kind, [(k, w, 1) for k, w in zip(dims, wrap)])
    return _out(s), _out(b)


def _flat_terms(kind, n, topology):
    """(s, b) on a ring, bidirectional ring or switch, for checked inputs (n floats >= 1; kind
    in HLO spelling, not a permute); what :func:`cost_terms` and the group model evaluate."""
    if kind == "all-reduce":
        s, b = _flat_terms("all-gather", n, topology)
        return 2 * s, 2 * b
    a2a = kind == "all-to-all"
    if topology == "ring":
        return n - 1, (n - 1) / (2 * n) if a2a else (n - 1) / n
    if topology == "bidirectional_ring":
        return (np.floor(n / 2),
                np.floor(n * n / 4) / (2 * n * n) if a2a else (n - 1) / (2 * n))
    return n - 1, (n - 1) / n**2 if a2a else (n - 1) / n


def torus_terms(collective, axes):
    """(s, b) of a collective over a (sub-)torus given as axes (size k_a, wraps w_a, spacing d_a).

    The torus rules of :func:`cost_terms` with each axis's members d_a links apart (a group
    strided over a bigger torus): a step to the next member crosses d_a hops, and the d_a
    interleaved groups on that axis share its links, so

        s = sum_a d_a h_a,   h_a = floor(k_a / 2) with wraparound, k_a - 1 without;
        AllGather b = (n - 1) / n / sum_a (l_a / d_a),   l_a = 2 wrapped, 1 unwrapped;
        AllToAll  b = max_a d_a (k_a / n) load(k_a);   AllReduce doubles s and b.

    W in T = s alpha + b V / W is one link's one-way bandwidth. With every d_a = 1 this is
    :func:`cost_terms` on the torus of the k_a (exact for equal axes, see there).

    >>> torus_terms("all_gather", [(4, True, 1), (4, True, 1)])
    (4.0, 0.234375)
    >>> torus_terms("all_gather", [(4, False, 2)])  # 4 chips, every other one of a line of 8
    (6.0, 1.5)

    See: Chapter "Networks and collectives", "Costs on rings, tori and switches".
    """
    kind = canonical_kind(collective)
    if kind == "collective-permute":
        raise ValueError("a collective-permute is a send/recv: use send_recv_time")
    if kind == "all-reduce":
        s, b = torus_terms("all-gather", axes)
        return 2 * s, 2 * b
    rule = (f"axes={axes!r} must be a list of (members k >= 1, wraps: bool, spacing d >= 1) "
            "per torus axis")
    try:
        axes = [(k, w, d) for k, w, d in axes]
    except (TypeError, ValueError):
        raise ValueError(rule) from None
    for k, w, d in axes:
        if (not isinstance(w, (bool, np.bool_)) or isinstance(k, bool) or isinstance(d, bool)
                or not isinstance(k, (int, np.integer)) or not isinstance(d, (int, np.integer))
                or k < 1 or d < 1):
            raise ValueError(rule)
    axes = [(int(k), bool(w), int(d)) for k, w, d in axes if k > 1]
    s = float(sum(d * (k // 2 if w else k - 1) for k, w, d in axes))
    total = math.prod(k for k, _, _ in axes)
    if kind == "all-to-all":
        b = max((d * k / total * _axis_a2a_load(k, w) for k, w, d in axes), default=0.0)
    else:
        links = sum((2 if w else 1) / d for k, w, d in axes)
        b = (total - 1) / total / links if links else 0.0
    return s, float(b)


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


def all_gather_time(nbytes, n, bytes_per_s, *, topology="ring", latency=0.0, shape=None,
                    wraparound=True):
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
                           latency=latency, shape=shape,
                           wraparound=wraparound)


def reduce_scatter_time(nbytes, n, bytes_per_s, *, topology="ring", latency=0.0, shape=None,
                        wraparound=True):
    """ReduceScatter A[I, J]{U_X} -> A[I_X, J]: sum n partial arrays, keep one shard each.

    The transpose of AllGather, with the same cost: T = (n - 1) * (latency + nbytes / (n W))
    on a one-way ring.

    >>> reduce_scatter_time(1e9, 4, 1e9) == all_gather_time(1e9, 4, 1e9)
    True

    See: Chapter "Networks and collectives", "ReduceScatter".
    """
    return collective_time("reduce-scatter", nbytes, n, bytes_per_s, topology=topology,
                           latency=latency, shape=shape,
                           wraparound=wraparound)


def all_reduce_time(nbytes, n, bytes_per_s, *, topology="ring", latency=0.0, shape=None,
                    wraparound=True):
    """AllReduce A[I, J]{U_X} -> A[I, J] = ReduceScatter then AllGather: twice their cost.

    One-way ring: T = 2 (n - 1) * (latency + nbytes / (n W)).

    >>> all_reduce_time(1e9, 4, 1e9)
    1.5

    See: Chapter "Networks and collectives", "AllReduce".
    """
    return collective_time("all-reduce", nbytes, n, bytes_per_s, topology=topology,
                           latency=latency, shape=shape,
                           wraparound=wraparound)


def all_to_all_time(nbytes, n, bytes_per_s, *, topology="ring", latency=0.0, shape=None,
                    wraparound=True):
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
                           latency=latency, shape=shape,
                           wraparound=wraparound)


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
