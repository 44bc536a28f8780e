"""Figures for the chapter "Case study: serving Llama 3".

``plot_front`` draws every (devices, layout, batch) point of
:func:`scaling_lib.serving_parallel.front` as time per output token against tokens/s per device,
one colour per device count (points only: a device count has several layouts, and joining them
would zig-zag), with the Pareto front joined. Takes a matplotlib Axes; every number comes from the library.
"""

from __future__ import annotations

import numpy as np


def plot_front(ax, f, *, label="", budget=None):
    """Scatter of f["tpot"] (ms) against f["per_device"], coloured by f["n"]; front joined."""
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    for n in np.unique(f["n"]):
        sel = f["n"] == n
        ax.plot(f["tpot"][sel] * 1e3, f["per_device"][sel], marker="o", ms=3.5, ls="none",
                alpha=0.6, label=f"{n} devices (every layout)")
    on = f["pareto"]
    order = np.argsort(f["tpot"][on])
    ax.plot(f["tpot"][on][order] * 1e3, f["per_device"][on][order], color="black", lw=2,
            label="Pareto front")
    if budget is not None:
        ax.axvline(budget * 1e3, color="grey", ls="--", lw=1, label="latency budget")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    lo, hi = np.min(f["tpot"]) * 1e3, np.max(f["tpot"]) * 1e3
    ticks = [t for t in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000) if lo / 1.5 <= t <= hi * 1.5]
    if len(ticks) >= 2:
        ax.set_xticks(ticks)
    ax.set_xlabel("time per output token (ms)")
    ax.set_ylabel("output tokens/s per device")
    if label:
        ax.set_title(label)
    ax.legend(fontsize=7)
    return ax
