"""Figures and the explorer for Chapter 7 (MFU and HFU).

``plot_published`` compares published runs' MFU (recomputed from their inputs) with the figures
their papers printed; ``plot_mfu_vs_step_time`` turns a measured step time into MFU and HFU;
``plot_upgrade`` shows why the same workload can reach a lower MFU on a faster chip.
matplotlib and ipywidgets are imported only when the explorer is called.
"""

from __future__ import annotations

import numpy as np

from ... import hardware, published, transformer
from ...roofline import no_overlap_utilization  # noqa: F401  (re-exported for the chapter)
from ...units import fmt_percent, fmt_seconds

DEFAULT_RUNS = ("palm-540b", "mt-nlg-530b-2240", "mt-nlg-530b-3360", "megatron-1.7b",
                "megatron-145.6b", "megatron-1t", "llama3-405b-8k-T8k", "llama3-405b-16k-T8k",
                "llama3-405b-16k-T128k")
GOOD, EXCELLENT = 0.30, 0.40  # rules of thumb used in Chapter 7


def published_rows(names=DEFAULT_RUNS):
    """For each run: (name, MFU recomputed by the library, the figure the paper printed, what
    that printed figure counts: "MFU" or "HFU")."""
    rows = []
    for name in names:
        r = published.get(name)
        if r.step_time is not None or r.tokens_per_s is not None:
            ours = published.mfu(r)
        else:
            ours = published.mfu_from_reported_flops(r)
        if r.mfu is not None:
            printed, kind = r.mfu, "MFU"
        elif r.hfu is not None:
            printed, kind = r.hfu, "HFU"
        else:
            peak = hardware.get(r.accelerator).peak_flops_per_s("bf16")
            printed, kind = r.flops_per_s_per_device / peak, "HFU"
        rows.append((name, ours, printed, kind))
    return rows


def plot_published(ax, names=DEFAULT_RUNS):
    """Horizontal bars: each run's MFU recomputed from its inputs, and the figure it printed."""
    rows = published_rows(names)
    y = np.arange(len(rows))
    ours = [r[1] for r in rows]
    printed = [r[2] for r in rows]
    ax.barh(y + 0.2, ours, height=0.4, label="MFU, recomputed from the paper's inputs")
    colors = ["tab:green" if r[3] == "MFU" else "tab:orange" for r in rows]
    ax.barh(y - 0.2, printed, height=0.4, color=colors, alpha=0.6,
            label="as printed (green: MFU, orange: counts recomputation)")
    for v in (GOOD, EXCELLENT):
        ax.axvline(v, color="gray", ls="--", lw=0.8)
        ax.text(v, -0.7, f"{v:.0%}", ha="center", fontsize=8, color="gray")
    ax.set_yticks(y, [r[0] for r in rows], fontsize=8)
    ax.set_ylim(len(rows) - 0.4, -1.0)  # first run on top, room for the labels
    ax.set_xlim(0, 1.0)
    ax.set_xlabel("fraction of the dense bf16/fp16 peak")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, axis="x", alpha=0.3)
    return rows


def plot_mfu_vs_step_time(ax, cfg, accelerator, n_devices, global_batch, T, step_times=None, *,
                          mark=None, recompute="full", flash_attention=True):
    """MFU and HFU (with ``recompute``, and FlashAttention's recomputed QKᵀ unless
    ``flash_attention`` is False) against the measured seconds per step, log x.

    ``mark``: a measured step time to highlight. Returns (mfu, hfu) at ``mark`` or None.
    """
    if step_times is None:
        t_ideal = transformer.train_flops(cfg, global_batch, T) / (
            n_devices * hardware.get(accelerator).peak_flops_per_s())
        step_times = np.geomspace(t_ideal, 20 * t_ideal, 200)
    step_times = np.asarray(step_times, dtype=float)
    tps = global_batch * T / step_times
    # the sweep starts at the ideal step time, where HFU (and MFU, by rounding) reach 1
    m = transformer.mfu(cfg, tps, n_devices, accelerator, T, allow_above_peak=True)
    h = transformer.hfu(cfg, tps, n_devices, accelerator, T, recompute=recompute,
                        flash_attention=flash_attention, allow_above_peak=True)
    ax.semilogx(step_times, m, label="MFU (model FLOPs)")
    ax.semilogx(step_times, h, "--", label=f"HFU (recompute={recompute})")
    ax.axhline(GOOD, color="gray", lw=0.8, ls=":")
    ax.axhline(EXCELLENT, color="gray", lw=0.8, ls=":")
    out = None
    if mark is not None:
        tps_mark = global_batch * T / mark
        out = (transformer.mfu(cfg, tps_mark, n_devices, accelerator, T, allow_above_peak=True),
               transformer.hfu(cfg, tps_mark, n_devices, accelerator, T, recompute=recompute,
                               flash_attention=flash_attention, allow_above_peak=True))
        warn = " (faster than peak: check the inputs)" if out[0] > 1 else ""
        ax.plot([mark, mark], out, "k*", ms=10, label=f"measured {fmt_seconds(mark)}: "
                f"MFU {fmt_percent(out[0])}, HFU {fmt_percent(out[1])}{warn}")
    from matplotlib.ticker import LogLocator, NullFormatter, ScalarFormatter

    ax.xaxis.set_major_locator(LogLocator(subs=(1, 2, 5)))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("seconds per optimizer step")
    ax.set_ylabel("fraction of peak")
    ax.set_ylim(0, 1.05)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return out


def plot_upgrade(ax, accelerators=("a100-40gb", "a100-80gb", "h100", "b200"), *, mark=None):
    """Utilisation of non-overlapped work against its intensity on several chips (log x).

    ``mark``: an intensity to highlight on every curve.
    """
    i = np.geomspace(10, 1e4, 300)
    for name in accelerators:
        acc = hardware.get(name)
        dtype = hardware.training_dtype(acc)
        u = no_overlap_utilization(i, acc, dtype)
        (line,) = ax.semilogx(i, u, label=f"{acc.name} ({dtype})")
        if mark is not None:
            ax.plot([mark], [no_overlap_utilization(mark, acc, dtype)], "o",
                    color=line.get_color())
    if mark is not None:
        ax.axvline(mark, color="gray", lw=0.8, ls=":")
    ax.set_xlabel("arithmetic intensity of the work (FLOPs / byte)")
    ax.set_ylabel("T_math / (T_math + T_comms)")
    ax.set_ylim(0, 1)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def explorer(model="llama3-70b", accelerator="h100", n_devices=1024, global_batch=512, T=8192):
    """MFU and HFU from a measured step time: pick model, chip, devices, batch and step time."""
    import ipywidgets as w
    import matplotlib.pyplot as plt

    from ... import models

    model_w = w.Dropdown(options=list(models.names()), value=model, description="model")
    acc_w = w.Dropdown(options=[n for n in hardware.names() if hardware.get(n).supports("bf16")],
                       value=accelerator, description="chip")
    n_w = w.IntText(value=n_devices, description="devices")
    b_w = w.IntText(value=global_batch, description="sequences")
    t_w = w.IntText(value=T, description="T")
    step_w = w.FloatLogSlider(value=10.0, base=10, min=-1, max=3, step=0.01,
                              description="step (s)")
    out = w.Output()

    def redraw(*_):
        with out:
            out.clear_output(wait=True)
            if min(n_w.value, b_w.value, t_w.value) < 1:
                print("devices, sequences and T must be positive integers")
                return
            fig, ax = plt.subplots(figsize=(7, 4))
            plot_mfu_vs_step_time(ax, model_w.value, acc_w.value, n_w.value, b_w.value,
                                  t_w.value, mark=step_w.value)
            plt.show()

    for ctl in (model_w, acc_w, n_w, b_w, t_w, step_w):
        ctl.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HBox([model_w, acc_w, n_w]), w.HBox([b_w, t_w, step_w]), out])
