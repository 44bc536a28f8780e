"""Figures for the chapter "Pipeline parallelism": Gantt charts of pipeline schedules.

``plot_schedule`` draws a timeline from :func:`scaling_lib.parallelism.pipeline.schedule` (one
row per stage, forward and backward boxes labelled by micro-batch, idle time shaded);
``plot_in_flight`` the micro-batches whose activations each stage holds over time;
``explorer`` wraps both in ipywidgets controls (stages, micro-batches, schedule, virtual stages).
matplotlib and ipywidgets are imported only when called.
"""

from __future__ import annotations

from ...parallelism import pipeline

F_COLOUR, B_COLOUR, IDLE_COLOUR = "#4c72b0", "#dd8452", "#d9d9d9"


def plot_schedule(ax, events, *, title=None, labels=True, xmax=None):
    """A Gantt chart of ``events`` (a timeline from ``pipeline.schedule``) on ``ax``, the time
    axis up to ``xmax`` (default: the end of the step; give the longest of several to compare).

    Returns the idle share of the step (:func:`pipeline.bubble_fraction`).
    """
    from matplotlib.patches import Patch

    p = int(events["stage"].max()) + 1
    v = int(events["chunk"].max()) + 1
    end = pipeline.makespan(events)
    for s in range(p):
        ax.broken_barh([(0, end)], (s - 0.4, 0.8), facecolor=IDLE_COLOUR, lw=0)
    for e in events:
        colour = F_COLOUR if e["op"] == "F" else B_COLOUR
        alpha = 1.0 - 0.35 * int(e["chunk"]) / max(v - 1, 1) if v > 1 else 1.0
        width = float(e["end"] - e["start"])
        ax.broken_barh([(float(e["start"]), width)], (int(e["stage"]) - 0.4, 0.8),
                       facecolor=colour, alpha=alpha, edgecolor="white", lw=0.8)
        if labels and width * 40 >= end / 2:  # only where the label fits
            ax.text(float(e["start"]) + width / 2, int(e["stage"]), str(int(e["micro"]) + 1),
                    ha="center", va="center", fontsize=7, color="white")
    bubble = pipeline.bubble_fraction(events)
    ax.set_ylim(p - 0.5, -0.5)
    ax.set_yticks(range(p), [f"stage {s}" for s in range(p)], fontsize=8)
    ax.set_xlim(0, end if xmax is None else xmax)
    ax.set_xlabel("time (units of one micro-batch's forward pass through one stage)")
    ax.set_title(title if title is not None else f"bubble {bubble:.0%} of the step", loc="left",
                 fontsize=10)
    ax.legend(handles=[Patch(color=F_COLOUR, label="forward"),
                       Patch(color=B_COLOUR, label="backward"),
                       Patch(facecolor=IDLE_COLOUR, label="idle (bubble)")],
              fontsize=7, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=3, frameon=False)
    return bubble


def plot_in_flight(ax, events, *, label=None):
    """Micro-batches whose activations stage 0 holds over time; returns the peak of each stage."""
    times, held = pipeline.in_flight(events)
    ax.step(times, held[0], where="post", label=label)
    ax.set_xlabel("time")
    ax.set_ylabel("micro-batches held by stage 0")
    return held.max(axis=1)


def explorer(pp=4, m=8, kind="1f1b", v=1):
    """Choose stages, micro-batches, schedule and virtual stages; see the Gantt chart, the bubble
    in both conventions and the activations in flight per stage."""
    import ipywidgets as w
    import matplotlib.pyplot as plt

    pp_w = w.IntSlider(value=pp, min=1, max=16, description="stages p")
    m_w = w.IntSlider(value=m, min=1, max=64, description="micro-batches m")
    kind_w = w.Dropdown(options=["gpipe", "1f1b", "interleaved"], value=kind,
                        description="schedule")
    v_w = w.IntSlider(value=v, min=1, max=4, description="virtual stages v")
    tb_w = w.FloatSlider(value=2.0, min=0.5, max=3.0, step=0.5, description="t_bwd / t_fwd")
    out = w.Output()

    def redraw(*_):
        with out:
            out.clear_output(wait=True)
            try:
                # only the interleaved schedule has virtual stages: the slider is greyed out
                # (and v = 1 used) for GPipe and 1F1B, never silently ignored
                v_w.disabled = kind_w.value != "interleaved"
                v = v_w.value if kind_w.value == "interleaved" else 1
                ev = pipeline.schedule(pp_w.value, m_w.value, v=v, kind=kind_w.value,
                                       t_bwd=tb_w.value)
                fig, ax = plt.subplots(figsize=(10, 0.35 * pp_w.value + 1.8))
                plot_schedule(ax, ev, labels=pp_w.value * m_w.value * v <= 256)
                plt.show()
                peak = pipeline.peak_in_flight(ev)
                print(f"bubble: {pipeline.bubble_fraction(ev):.1%} of the step, "
                      f"{pipeline.bubble_fraction(ev, relative_to='compute'):.1%} of the ideal "
                      f"compute time; peak micro-batches in flight per stage: "
                      f"{', '.join(f'{x:g}' for x in peak)}"
                      + ("" if kind_w.value == "interleaved" or v_w.value == 1 else
                         f" (v={v_w.value} applies to the interleaved schedule only)"))
            except ValueError as exc:
                print(f"not a valid setting: {exc}")

    for ctl in (pp_w, m_w, kind_w, v_w, tb_w):
        ctl.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HBox([pp_w, m_w]), w.HBox([kind_w, v_w, tb_w]), out])


__all__ = ["explorer", "plot_in_flight", "plot_schedule"]
