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

What these formulas leave out: congestion from other traffic, protocol overheads and any overlap
with compute. The choice of algorithm by message size (one-shot, two-shot, NVLink SHARP, tree)
is in :mod:`.algorithms`, and :func:`group_time` puts it all together for a group on a cluster.

See: Chapter "Networks and collectives".

The package, one concept per module (every name is also importable from here):

- :mod:`.names`: :data:`KINDS`, :data:`TOPOLOGIES`, :func:`canonical_kind`;
- :mod:`.costs`: the ring/torus/switch formulas (:func:`cost_terms`, :func:`collective_time`,
  :func:`all_gather_time`, ..., :func:`latency_bound_bytes`);
- :mod:`.traffic`: per-device buffers and traffic (:func:`collective_bytes`);
- :mod:`.clusters`: cluster levels and links (:func:`cluster_levels`, :func:`flat_cluster`);
- :mod:`.hierarchical`: multi-level schedules and times (:func:`hierarchical_time`);
- :mod:`.multirail`: flat multi-rail rings (:func:`multirail_ring_time`);
- :mod:`.algorithms`: what a library picks for small and large messages on a switch (ring,
  one-shot, two-shot, NVLink SHARP, tree: :func:`algorithm_terms`, :func:`best_algorithm`);
- :mod:`.groups`: :func:`group_time`, one collective of a strided group on a real cluster, the
  vectorised model the estimator, the planner and serving call;
- :mod:`.pcie`: :func:`pcie_bytes_per_s`; :mod:`.validation`: input checks.
"""

from .. import hardware
from ..breakdown import Breakdown
from ..units import check_positive, scalar_or_array as _out
from .clusters import LEVELS, cluster_levels, flat_cluster, intra_node_link_bytes_per_s
from .costs import (
    _axis_a2a_load,
    all_gather_time,
    all_reduce_time,
    all_to_all_time,
    collective_time,
    cost_terms,
    latency_bound_bytes,
    reduce_scatter_time,
    send_recv_time,
)
from .hierarchical import (
    _phase_time,
    cluster_latency_bound_bytes,
    hierarchical_pipelined_time,
    hierarchical_schedule,
    hierarchical_time,
)
from .multirail import _RING_KINDS, RingTerms, multirail_ring_terms, multirail_ring_time
from .names import _KIND_ALIASES, KINDS, TOPOLOGIES, canonical_kind
from .pcie import _PCIE_GT_PER_S, pcie_bytes_per_s
from .traffic import CollectiveBytes, collective_bytes
from .validation import _MAX_DEVICES, _as_cluster, _axes, _check_n, _positive
from .algorithms import (ALGORITHMS, DIRECT_MAX_BYTES, NVLS_ACCELERATORS, algorithm_terms,
                         best_algorithm)
from .costs import torus_terms
from .groups import group_time
