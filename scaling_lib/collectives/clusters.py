"""Clusters as the collective models see them: levels, link bandwidths, flat test clusters.

A cluster has up to three :data:`LEVELS` (intra-node, inter-node, inter-pod).
:func:`cluster_levels` gives the group sizes of a job at each level,
:func:`intra_node_link_bytes_per_s` the ``bytes_per_s`` that the node's topology takes, and
:func:`flat_cluster` builds one scale-up domain of a given topology for comparing topologies.

See: Chapter "Networks and collectives", "Hierarchical collectives".
"""

from __future__ import annotations

import numpy as np

from .. import hardware
from .names import TOPOLOGIES
from .validation import _as_cluster, _axes, _check_n

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
