"""Figures for the chapter "Tensor and sequence parallelism".

``plot_comm_to_math`` draws T_comm / T_math of one layer's forward pass against the tp degree
for several networks (:func:`scaling_lib.parallelism.tensor.layer_times`); ``plot_splits`` draws
the step time of each FSDP x TP split of a cluster as stacked bars
(:func:`scaling_lib.parallelism.split.split_table`, timed by the step-time model). Both take a
matplotlib Axes; all numbers come from ``scaling_lib.parallelism``.
"""

from __future__ import annotations

import numpy as np

from ...parallelism import tensor


def plot_comm_to_math(ax, model, systems, tp=(2, 4, 8, 16, 32, 64), tokens=8192):
    """T_comm / T_math against tp, one line per (label, accelerator, W, topology) system."""
    tp = np.asarray(tp)
    for label, acc, W, topology in systems:
        t_math, t_comm = tensor.layer_times(model, tp, tokens, acc, W, topology=topology)
        ax.plot(tp, np.asarray(t_comm) / np.asarray(t_math), marker="o", label=label)
    ax.axhline(1.0, color="grey", lw=1, ls="--")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(tp, [str(t) for t in tp])
    ax.set_xlabel("tensor-parallel degree tp")
    ax.set_ylabel("T_comm / T_math (one layer, forward)")
    ax.set_title(f"{model}: above the dashed line communication dominates")
    ax.legend(fontsize=8)
    return ax


def plot_splits(ax, rows):
    """Stacked bars per split (StepTime rows): compute, then the FSDP ("dp") and TP traffic that
    compute does not hide."""
    rows = sorted(rows, key=lambda s: s.plan.tp)
    x = np.arange(len(rows))
    comp = np.array([s.compute_time for s in rows])
    fsdp = np.array([s.comm_by_axis(exposed=True).get("dp", 0.0) for s in rows])
    tpt = np.array([s.comm_by_axis(exposed=True).get("tp", 0.0) for s in rows])
    ax.bar(x, comp, label="compute (FSDP hidden under it)")
    ax.bar(x, fsdp, bottom=comp, label="FSDP traffic not hidden")
    ax.bar(x, tpt, bottom=comp + fsdp, label="TP collectives not hidden (critical path)")
    for i, s in enumerate(rows):
        if not s.fits:
            ax.text(i, comp[i] + fsdp[i] + tpt[i], "does not fit", ha="center", va="bottom",
                    fontsize=8)
    ax.set_xticks(x, [f"tp={s.plan.tp}\nfsdp={s.plan.dp}" for s in rows], fontsize=8)
    ax.set_ylabel("step time (s)")
    ax.legend(fontsize=8)
    return ax
