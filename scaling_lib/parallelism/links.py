"""Collective time on arrays of plans, for the estimator: the hook to ``scaling_lib.collectives``.

The estimator times every collective with :func:`scaling_lib.collectives.group_time` (the one
cost model of every collective on every topology, its algorithm chosen by message size and
group as NCCL does), passing the calibration's link efficiencies and latencies. Kept as one
small function so that the estimator's choice of algorithms is stated in one place.

See: the chapter "Collectives".
"""

from __future__ import annotations

from ..collectives import group_time as _group_time

# Which algorithms a training step's collectives may use, as NCCL picks them by size and group:
# ring and tree across nodes, NVLS inside an NVSwitch node of H100s and later. Not the one-shot
# and two-shot all-reduces: NCCL runs them only as its symmetric-memory kernels (NCCL 2.27,
# 2025), which the training stacks the calibration was fitted on (Megatron-LM on NCCL 2.1x,
# vTrain's A100 measurements) did not have; serving keeps them (collectives' default).
ALGORITHMS = ("ring", "tree", "nvls")


def group_time(kind, V, g, stride, cluster, cal):
    """Seconds of one collective ``kind`` of the full array V (bytes; for a collective-permute
    the bytes each device sends) over groups of g devices ``stride`` device numbers apart on
    ``cluster``, at the calibration's link efficiencies and latencies. Broadcasts over V, g
    and stride."""
    return _group_time(kind, V, g, stride, cluster, calibration=cal, algorithms=ALGORITHMS)
