"""Figures for the chapter "Sharing a cluster".

``plot_curves`` draws each job's scaling curve (tokens/s of the planner's best plan against
GPUs, with perfect linear scaling for comparison); ``plot_gantt`` draws a schedule's allocations
over time (one band per job, its height the GPUs it holds, hatched while it pays the re-plan
cost); ``explorer`` re-runs the three schedulers as the re-plan cost changes. All numbers come from
:mod:`scaling_lib.scheduling`.
"""

from __future__ import annotations

import numpy as np

from ... import scheduling
from ...units import DAY, HOUR


def plot_curves(ax, curves: dict):
    """Tokens/s against GPUs for each job (solid) and linear scaling from its smallest size."""
    for i, (name, c) in enumerate(curves.items()):
        ok = c.tokens_per_s > 0
        line, = ax.plot(c.sizes[ok], c.tokens_per_s[ok], marker="o", label=name)
        n0, t0 = c.sizes[ok][0], c.tokens_per_s[ok][0]
        ax.plot(c.sizes[ok], t0 * c.sizes[ok] / n0, ls=":", color=line.get_color(), lw=1)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("GPUs allocated")
    ax.set_ylabel("tokens/s of the best plan")
    ax.set_title("Scaling curves (dotted: linear from the smallest feasible size)")
    ax.legend(fontsize=8)
    return ax


def plot_gantt(ax, schedule: scheduling.Schedule, *, unit=DAY):
    """Stacked GPU allocations over time: each job a colour, restarts hatched."""
    names = list(schedule.arrival)
    colors = {n: f"C{i}" for i, n in enumerate(names)}
    times = sorted({s.start for s in schedule.segments} | {s.end for s in schedule.segments})
    for t0, t1 in zip(times, times[1:]):
        base = 0
        for n in names:
            for s in schedule.segments:
                if s.job == n and s.start <= t0 and s.end >= t1:
                    ax.bar(t0 / unit, s.gpus, width=(t1 - t0) / unit, bottom=base, align="edge",
                           color=colors[n], hatch="//" if s.restarting else None,
                           edgecolor="white" if s.restarting else colors[n], lw=0)
                    base += s.gpus
    for n in names:
        ax.bar(0, 0, color=colors[n], label=n)
    ax.axhline(schedule.n_gpus, color="grey", lw=1, ls="--")
    ax.set_xlabel("days" if unit == DAY else "hours" if unit == HOUR else "seconds")
    ax.set_ylabel("GPUs")
    ax.set_ylim(0, schedule.n_gpus * 1.05)
    ax.set_title(f"{schedule.scheduler}: average completion "
                 f"{schedule.average_completion / DAY:.2f} d, makespan {schedule.makespan / DAY:.2f} d")
    ax.legend(fontsize=7, loc="upper right")
    return ax


def explorer(jobs, curves, n_gpus):  # pragma: no cover - interactive
    """Sliders: the re-plan cost (minutes) → the three schedules side by side."""
    import ipywidgets as w
    import matplotlib.pyplot as plt

    cost = w.FloatLogSlider(value=10, base=10, min=0, max=3, description="re-plan (min)")
    out = w.Output()

    def draw(*_):
        with out:
            out.clear_output(wait=True)
            fig, axes = plt.subplots(1, 3, figsize=(15, 3.6), sharey=True)
            for ax, s in zip(axes, scheduling.compare(jobs, curves, n_gpus,
                                                      replan_cost=cost.value * 60).values()):
                plot_gantt(ax, s)
            plt.tight_layout()
            plt.show()

    cost.observe(draw, "value")
    draw()
    return w.VBox([cost, out])
