"""Flat ring collectives over a GPU cluster, one ring per NIC (rail), as NCCL runs them.

The alternative to :mod:`.hierarchical`: :func:`multirail_ring_terms` splits a ring's time into
latency, NVLink and NIC parts (:class:`RingTerms`), :func:`multirail_ring_time` adds them up.

See: Chapter "Networks and collectives", "Hierarchical collectives".
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import hardware
from ..units import scalar_or_array as _out
from .clusters import cluster_levels
from .costs import cost_terms
from .names import canonical_kind
from .validation import _as_cluster, _positive

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
