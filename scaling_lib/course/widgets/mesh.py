"""The 4D mesh explorer for the chapter "N-dimensional parallelism".

``plot_mesh`` draws one plan's device numbering (the first nodes of the cluster, one row per
node, each device labelled with its tp, cp, pp and dp coordinates and coloured by its pipeline
stage); ``plot_traffic`` the bytes one GPU sends per step on each link class, stacked by axis;
``explorer`` wraps both, with the memory per GPU, in ipywidgets controls. Everything is
computed by :mod:`scaling_lib.parallelism.mesh`; matplotlib and ipywidgets are imported only
when called.
"""

from __future__ import annotations

import numpy as np

from ...parallelism import mesh as M
from ...parallelism.plan import ParallelPlan

AXIS_COLORS = {"tp": "tab:blue", "cp": "tab:orange", "pp": "tab:green", "dp": "tab:red",
               "ep": "tab:purple"}


def node_grid(cluster, plan: ParallelPlan, n_nodes=4, order=M.ORDER) -> np.ndarray:
    """[n_nodes, devices per node, 4]: the (tp, cp, pp, dp) coordinates of the first devices.

    >>> from scaling_lib import hardware
    >>> g = node_grid(hardware.cluster("h100", 32), ParallelPlan(tp=4, pp=2, dp=4), 2)
    >>> g[1, 0].tolist()  # device 8: tp 0, pp 0, dp 1
    [0, 0, 0, 1]
    """
    from ... import hardware

    c = hardware.get_cluster(cluster)
    n = min(int(n_nodes) * c.devices_per_node, plan.world_size)
    rows = -(-n // c.devices_per_node)
    out = np.full((rows, c.devices_per_node, 4), -1, dtype=int)
    for r in range(n):
        co = M.coordinates(r, plan, order)
        out[r // c.devices_per_node, r % c.devices_per_node] = [co[a] for a in M.AXES]
    return out


def plot_mesh(ax, cluster, plan: ParallelPlan, *, n_nodes=4, order=M.ORDER, title=None):
    """The first ``n_nodes`` nodes: one row per node, one box per GPU, coloured by pipeline
    stage and labelled t/c/p/d with its coordinates."""
    import matplotlib.pyplot as plt

    g = node_grid(cluster, plan, n_nodes, order)
    cmap = plt.get_cmap("tab20")
    for i in range(g.shape[0]):
        for j in range(g.shape[1]):
            t, c, p, d = g[i, j]
            if t < 0:
                continue
            ax.add_patch(plt.Rectangle((j, -i), 0.92, 0.85, color=cmap(p % 20), alpha=0.6))
            ax.text(j + 0.46, -i + 0.42, f"t{t} c{c}\np{p} d{d}", ha="center", va="center",
                    fontsize=6)
    ax.set_xlim(-0.1, g.shape[1])
    ax.set_ylim(-g.shape[0] + 0.9, 0.95)
    ax.set_yticks([-i + 0.42 for i in range(g.shape[0])],
                  [f"node {i}" for i in range(g.shape[0])])
    ax.set_xticks([])
    for s in ax.spines.values():
        s.set_visible(False)
    ax.set_title(title or f"order {' → '.join(order)} (inner → outer), colour = pipeline stage",
                 fontsize=9)


def plot_traffic(ax, report: M.MeshReport, *, unit=1e9):
    """Bytes one GPU sends per step on each link class, stacked by axis (GB by default)."""
    classes = M.LINK_CLASSES
    bottom = np.zeros(len(classes))
    for a in ("tp", "cp", "pp", "ep", "dp"):
        vals = np.array([report.traffic[c].get(a, 0.0) for c in classes]) / unit
        if vals.any():
            ax.bar(classes, vals, bottom=bottom, color=AXIS_COLORS[a], label=a)
            bottom += vals
    ax.set_yscale("symlog", linthresh=0.1)
    ax.set_ylim(0, max(1.0, float(bottom.max())) * 4)  # room above the tallest bar
    ax.set_ylabel("GB sent per GPU per step")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)  # beside the bars


def summary(report: M.MeshReport) -> str:
    """One line per axis (its link class) and the memory per GPU, for the explorer."""
    lines = []
    for a, p in report.placement.items():
        if p.degree > 1:
            lines.append(f"{a}={p.degree}: stride {p.stride}, groups on {p.link}")
    tot = {c: sum(v.values()) for c, v in report.traffic.items()}
    lines.append("sent per GPU per step: " + ", ".join(
        f"{c} {tot[c] / 1e9:.3g} GB ({report.line_rate_time[c]:.3g} s at line rate)"
        for c in M.LINK_CLASSES))
    parts = ", ".join(f"{k} {v / 1e9:.1f}" for k, v in report.memory.items() if v >= 0.05e9)
    lines.append(f"memory per GPU: {report.memory.total / 1e9:.1f} GB "
                 f"({'fits' if report.fits else 'does not fit'}; GB: {parts})")
    return "\n".join(lines)


SCHEDULE_CHOICES = (("1F1B", ("1f1b", 1)), ("interleaved, v = 2", ("interleaved", 2)),
                    ("interleaved, v = 4", ("interleaved", 4)), ("GPipe", ("gpipe", 1)))


def explorer(model="llama3-405b", cluster="llama3-24k", tp=8, cp=1, pp=16, dp=64,
             global_batch=2048, T=8192, schedule=("interleaved", 4), recompute="full", zero=1):
    """Choose the degrees, the mesh order, the batch and sequence, the pipeline schedule, the
    recomputation and the ZeRO stage; see the numbering of the first nodes, which links each
    axis uses, the traffic on each and the memory per GPU (it opens on a Llama 3 405B layout
    that fits: interleaved 1F1B with full recomputation)."""
    import ipywidgets as w
    import matplotlib.pyplot as plt

    deg = {a: w.Dropdown(options=[1, 2, 4, 8, 16, 32, 64, 128, 256], value=v, description=a)
           for a, v in (("tp", tp), ("cp", cp), ("pp", pp), ("dp", dp))}
    order_w = w.Dropdown(options=[("tp, cp, pp, dp (Llama 3)", "tp,cp,pp,dp"),
                                  ("tp, cp, dp, pp (Megatron)", "tp,cp,dp,pp"),
                                  ("dp, pp, cp, tp (reversed)", "dp,pp,cp,tp")],
                         value="tp,cp,pp,dp", description="order")
    b_w = w.IntText(value=global_batch, description="batch (seq)")
    t_w = w.IntText(value=T, description="T")
    sched_w = w.Dropdown(options=list(SCHEDULE_CHOICES), value=tuple(schedule),
                         description="schedule")
    rec_w = w.Dropdown(options=["none", "selective", "full"], value=recompute,
                       description="recompute")
    zero_w = w.Dropdown(options=[0, 1, 2, 3], value=zero, description="ZeRO")
    out = w.Output()

    def redraw(*_):
        with out:
            out.clear_output(wait=True)
            try:
                kind, v = sched_w.value
                plan = ParallelPlan(sequence_parallel=deg["tp"].value > 1, zero=zero_w.value,
                                    schedule=kind, virtual_stages=v, recompute=rec_w.value,
                                    **{a: d.value for a, d in deg.items()})
                order = tuple(order_w.value.split(","))
                rep = M.mesh_report(model, cluster, plan, b_w.value, t_w.value, order=order)
                fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.2),
                                             gridspec_kw={"width_ratios": [2.2, 1]})
                plot_mesh(a1, cluster, plan, order=order)
                plot_traffic(a2, rep)
                plt.tight_layout()
                plt.show()
                print(summary(rep))
            except ValueError as exc:
                print(f"not a valid setting: {exc}")

    for ctl in (*deg.values(), order_w, b_w, t_w, sched_w, rec_w, zero_w):
        ctl.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HBox(list(deg.values())), w.HBox([order_w, b_w, t_w]),
                   w.HBox([sched_w, rec_w, zero_w]), out])


__all__ = ["explorer", "node_grid", "plot_mesh", "plot_traffic", "summary"]
