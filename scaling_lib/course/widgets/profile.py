"""Drawing a profile with matplotlib (Chapter "Profiling JAX programs").

``plot_timeline`` draws the events of :func:`scaling_lib.profile.profile` as one lane per device
(like the TensorBoard/XProf trace viewer, but static, so it shows in the book); ``plot_op_times``
draws the per-operation table as horizontal bars, with each op's roofline time beside it when
given. Both take a matplotlib ``Axes`` and return it.
"""

from __future__ import annotations

from ...units import fmt_seconds


def _colours(names):
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("tab10")
    return {n: cmap(i % 10) for i, n in enumerate(names)}


def plot_timeline(ax, events, *, label=None, max_ops=8, title=None):
    """One lane per device, one bar per executed operation (time in milliseconds).

    ``label`` maps an op name to the text in the legend (default: the op name); the ``max_ops``
    slowest operations get their own colour, the rest are grey.
    """
    events = list(events)
    if not events:
        raise ValueError("no events to draw: the profile is empty")
    totals = {}
    for e in events:
        totals[e.op] = totals.get(e.op, 0.0) + e.duration
    top = sorted(totals, key=lambda k: -totals[k])[:max_ops]
    colour = _colours(top)
    devices = sorted({e.device for e in events}, key=lambda d: (len(str(d)), str(d)))
    lane = {d: i for i, d in enumerate(devices)}
    seen = set()
    for e in events:
        c = colour.get(e.op, (0.7, 0.7, 0.7, 1.0))
        name = (label or {}).get(e.op, e.op) if e.op in colour else "other"
        ax.barh(lane[e.device], e.duration * 1e3, left=e.start * 1e3, height=0.8, color=c,
                label=None if name in seen else name, edgecolor="none")
        seen.add(name)
    ax.set_yticks(range(len(devices)), [f"device {d}" for d in devices])
    ax.invert_yaxis()
    ax.set_xlabel("time since the first traced op (ms)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize="small", frameon=False)
    ax.set_title(title or "profiler trace: one lane per device")
    return ax


def plot_op_times(ax, rows, *, max_ops=10, title=None):
    """Horizontal bars of each op's measured time per call (``time`` of
    :func:`~scaling_lib.profile.op_table`), with its roofline time (``roofline`` of
    :func:`~scaling_lib.profile.op_roofline`) as a thin black bar where present."""
    rows = list(rows)[:max_ops]
    if not rows:
        raise ValueError("no rows to draw")
    y = range(len(rows))
    ax.barh(list(y), [r["time"] * 1e3 for r in rows], color="tab:blue", label="measured")
    if any("roofline" in r for r in rows):
        ax.barh(list(y), [r.get("roofline", 0.0) * 1e3 for r in rows], height=0.3,
                color="black", label="roofline")
    for i, r in enumerate(rows):
        ax.text(r["time"] * 1e3, i, f" {fmt_seconds(r['time'])}", va="center", fontsize="small")
    ax.set_yticks(list(y), [r["op"] for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("time per call (ms)")
    ax.legend(loc="lower right", frameon=False)
    ax.set_title(title or "where the time goes")
    return ax
