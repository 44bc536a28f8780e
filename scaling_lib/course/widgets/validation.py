"""Figures for the chapter "Validating the planner": predicted against measured step times.

``plot_predicted_vs_measured`` draws one vTrain file (training rows and held-out rows apart, with
a band of ±10%); ``plot_error_by`` the signed error grouped by one column (tp, pp, micro-batch);
``plot_published`` our estimate against published figures. Each takes a matplotlib Axes.
"""

from __future__ import annotations

import numpy as np

from ... import validation


def plot_predicted_vs_measured(ax, report, *, band=0.10, title=None):
    """Log-log scatter of predicted against measured iteration time (ms) for one Report."""
    meas = report.rows["measured"] * 1e3
    pred = report.predicted * 1e3
    train = validation.split(report.rows, "train")
    ax.scatter(meas[train], pred[train], s=9, alpha=0.5, label="calibration rows (even)")
    ax.scatter(meas[~train], pred[~train], s=9, alpha=0.5, marker="x",
               label="held-out rows (odd)")
    lo, hi = min(meas.min(), pred.min()) * 0.8, max(meas.max(), pred.max()) * 1.25
    x = np.geomspace(lo, hi, 50)
    ax.plot(x, x, "k-", lw=1, label="exact")
    ax.fill_between(x, x * (1 - band), x * (1 + band), color="0.8", alpha=0.5,
                    label=f"±{band:.0%}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured iteration time (ms)")
    ax.set_ylabel("predicted iteration time (ms)")
    ax.set_title(title or f"{report.which}: held-out MAPE {report.mape_test:.1%}")
    ax.legend(fontsize=8, loc="upper left")
    return ax


def plot_error_by(ax, report, column, *, label=None):
    """Box plot of the signed error (predicted / measured - 1) grouped by ``column``."""
    err = report.predicted / report.rows["measured"] - 1
    values = report.rows[column]
    keys = np.unique(values)
    ax.boxplot([err[values == k] * 100 for k in keys], showfliers=True)
    ax.set_xticks(range(1, len(keys) + 1), [str(int(k)) for k in keys])
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlabel(label or column)
    ax.set_ylabel("error (%)")
    return ax


def plot_published(ax, records):
    """Bars of the error of each published comparison (estimated / published - 1)."""
    names = [r["name"] + (f" ({r['mode']})" if "mode" in r else "") for r in records]
    err = np.array([r["error"] for r in records]) * 100
    y = np.arange(len(records))
    ax.barh(y, err, color=["C0" if r["quantity"] == "step_time" else "C1" for r in records])
    ax.set_yticks(y, names, fontsize=8)
    ax.invert_yaxis()
    ax.axvline(0, color="k", lw=0.8)
    ax.set_xlabel("estimate vs published (%): blue step time, orange MFU")
    return ax
