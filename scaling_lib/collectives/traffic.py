"""Per-device buffers and traffic of one collective, as XLA reports them.

See: Chapter "Networks and collectives", "What XLA emits".
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..units import scalar_or_array as _out
from .names import canonical_kind
from .validation import _check_n, _positive

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
