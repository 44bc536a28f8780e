"""Aggregating trace events per operation: where the time went.

:func:`op_table` sums the :class:`~scaling_lib.profile.trace.OpEvent` s of each operation (per
call, per device, share of the total), slowest first; :func:`slowest_op` names the top one.

See: Chapter "Profiling JAX programs".
"""

from __future__ import annotations

from .trace import OpEvent  # noqa: F401  (the doctest builds events with it)

def op_table(events, n_calls: int = 1, ops: dict | None = None) -> list[dict]:
    """Events aggregated per operation, slowest first.

    Each row: ``op``, ``opcode`` and ``scope`` (from ``ops``, the :func:`hlo_ops` of the program,
    when given), ``count`` (executions, all devices), ``time`` (seconds per call on one device:
    total / (n_calls x devices)), ``mean`` (seconds per execution) and ``share`` of the total.

    >>> ev = [OpEvent("a", "m", "0", 0.0, 1.0), OpEvent("b", "m", "0", 1.0, 3.0)]
    >>> [(r["op"], r["time"], r["share"]) for r in op_table(ev)]
    [('b', 3.0, 0.75), ('a', 1.0, 0.25)]
    """
    if isinstance(n_calls, bool) or not isinstance(n_calls, int) or n_calls < 1:
        raise ValueError(f"n_calls={n_calls!r} must be a whole number >= 1")
    events = list(events)
    n_dev = max(1, len({e.device for e in events}))
    agg: dict[str, list] = {}
    for e in events:
        a = agg.setdefault(e.op, [0, 0.0])
        a[0] += 1
        a[1] += e.duration
    total = sum(t for _, t in agg.values()) or 1.0
    rows = []
    for op, (count, t) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        info = (ops or {}).get(op)
        rows.append({"op": op, "opcode": info.opcode if info else "",
                     "scope": info.scope if info else "", "count": count,
                     "time": t / (n_calls * n_dev), "mean": t / count, "share": t / total})
    return rows


def slowest_op(events) -> str:
    """The operation with the largest total time (not the longest single execution)."""
    rows = op_table(events)
    if not rows:
        raise ValueError("no events: profile something first")
    return rows[0]["op"]
