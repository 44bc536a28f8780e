"""Overlapping a sharded matmul with its collective (Chapter "Sharded arrays and how to multiply
them").

``plot_overlap`` draws, for x[r, D] . W[D, F] with the weight gathered over n devices (case 2),
the time per device against the rows r each device multiplies: the matmul alone, the AllGather
alone, the two one after the other, a collective matmul, and the ideal max(T_math, T_comm).
``explorer()`` wraps it in ipywidgets controls. Every number comes from ``scaling_lib.sharding``;
matplotlib and ipywidgets are imported only when these are called.
"""

from __future__ import annotations

import numpy as np

from ... import hardware
from ... import sharding as S

SYSTEMS = {"h100": "DGX H100 (8 GPUs, NVSwitch)", "tpu-v5e": "TPU v5e 2x4 slice (ICI)"}


def system_cluster(system):
    """The 8-device cluster of a system name in :data:`SYSTEMS`."""
    if system == "h100":
        return hardware.cluster("h100", 8)
    if system == "tpu-v5e":
        return hardware.tpu_slice("tpu-v5e", (2, 4))
    raise ValueError(f"system={system!r}; valid choices: {', '.join(SYSTEMS)}")


def overlap_curves(system, D, F, rows):
    """(T_math, T_comm, serial, collective matmul, ideal) in seconds for each r in ``rows``."""
    c = system_cluster(system)
    n = c.n_devices
    flops = c.accelerator.peak_flops_per_s()
    out = []
    for r in np.asarray(rows, float):
        m = S.sharded_matmul(n * int(r), D, F, ("X", None), ("X", None), {"X": n})
        out.append((S.math_time(m, flops), S.cluster_comm_time(m, c)))
    tm, tc = (np.array(v) for v in zip(*out))
    return tm, tc, tm + tc, S.collective_matmul_time(tm, tc, n), S.overlapped_time(tm, tc)


def plot_overlap(ax, system="h100", D=8192, F=28672, *, rows_range=(64, 32768)):
    """Draw the five times of :func:`overlap_curves` on ``ax`` (log-log) and mark r*."""
    rows = np.unique(np.round(np.geomspace(*rows_range, 60)))
    tm, tc, serial, cm, ideal = overlap_curves(system, D, F, rows)
    c = system_cluster(system)
    ms = 1e3
    ax.plot(rows, serial * ms, color="tab:red", label="gather, then multiply")
    ax.plot(rows, cm * ms, color="tab:green", label="collective matmul")
    ax.plot(rows, ideal * ms, color="black", ls=":", label="ideal max(T_math, T_comm)")
    ax.plot(rows, tm * ms, color="tab:blue", ls="--", lw=1, label="matmul alone")
    ax.plot(rows, tc * ms, color="tab:orange", ls="--", lw=1, label="AllGather alone")
    cross = rows[np.argmin(np.abs(np.log(tm / tc)))]
    ax.axvline(cross, color="grey", lw=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rows per device r (tokens)")
    ax.set_ylabel("time per matmul (ms)")
    ax.set_title(f"x[r, D] · W[D_X, F], D={D:,}, F={F:,}, bf16, {SYSTEMS[system]}"
                 if system in SYSTEMS else system, fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    return c


def explorer():
    """Interactive :func:`plot_overlap`: pick the system and the weight's D and F."""
    import ipywidgets as w
    import matplotlib.pyplot as plt

    def show(system, D, F):
        fig, ax = plt.subplots(figsize=(7.5, 4.5))
        plot_overlap(ax, system, D, F)
        plt.show()

    return w.interact(show, system=w.Dropdown(options=list(SYSTEMS), value="h100"),
                      D=w.IntSlider(value=8192, min=1024, max=32768, step=1024),
                      F=w.IntSlider(value=28672, min=1024, max=65536, step=1024))
