"""Figures and the explorer for Chapter 8 (inference basics).

``plot_kv_cache`` draws KV cache bytes per sequence against context length next to the HBM of one
accelerator; ``plot_decode_time`` draws a decode step's roofline time against the batch size.
matplotlib and ipywidgets are imported only when the explorer is called.
"""

from __future__ import annotations

import numpy as np

from ... import hardware, inference, transformer
from ...units import GIGA as GB, fmt_bytes

LLAMA3 = ("llama3-8b", "llama3-70b", "llama3-405b")


def plot_kv_cache(ax, models=LLAMA3, *, accelerator="h100", contexts=None, B=1):
    """KV cache (bf16) of B sequences against context length for each model, with the HBM of
    one ``accelerator`` as a horizontal line (log-log)."""
    S = np.geomspace(1024, 2**20, 60) if contexts is None else np.asarray(contexts, dtype=float)
    for m in models:
        ax.loglog(S, transformer.kv_cache_bytes(m, B, S) / GB, label=m)
    acc = hardware.get(accelerator)
    ax.axhline(acc.hbm_bytes / GB, color="k", lw=1, ls="--")
    ax.text(S[0], acc.hbm_bytes / GB * 1.15, f"HBM of one {acc.name}: {fmt_bytes(acc.hbm_bytes)}",
            fontsize=8)
    ax.set_xlabel("tokens in the context (S)")
    ax.set_ylabel(f"KV cache of {B} sequence{'s' if B > 1 else ''} (GB)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)


def plot_decode_time(ax, model="llama3-70b", accelerator="h100", n_devices=8,
                     contexts=(128, 8192, 131072), batches=None, *, tp=1):
    """Roofline time of one decode step against the batch size, one line per context length,
    with the pure compute time (dotted) and the weights-only memory floor (dashed).

    Each line is solid while the B sequences' KV caches fit in the HBM the weights leave free
    (:func:`scaling_lib.inference.max_cached_tokens`), faded beyond, with an x where the cache
    stops fitting. ``tp`` adds the tensor-parallel all-reduces of each step
    (:func:`scaling_lib.inference.tp_decode_comm_time`). Returns {S: largest B that fits}.
    """
    B = np.unique(np.geomspace(1, 4096, 40).round()) if batches is None else np.asarray(batches)
    B = B.astype(float)
    acc = hardware.get(accelerator)
    room = inference.max_cached_tokens(model, acc, n_devices)
    fit_at = {}
    for S in contexts:
        t = np.asarray(inference.decode_step_time(model, B, S, acc, n_devices, tp=tp)) * 1e3
        b_max = float(room) / S
        fit_at[S] = b_max
        ok = B <= b_max
        (line,) = ax.loglog(B[ok], t[ok], label=f"S = {S:,} tokens")
        if not ok.all():
            ax.loglog(B[~ok], t[~ok], color=line.get_color(), alpha=0.35, lw=1)
            if b_max >= 1:
                t_edge = float(inference.decode_step_time(model, b_max, S, acc, n_devices,
                                                          tp=tp)) * 1e3
                ax.plot([b_max], [t_edge], "x", color=line.get_color(), ms=8, mew=2)
    floor = inference.weight_bytes_read(model) / (n_devices * acc.hbm_bytes_per_s)
    ax.axhline(floor * 1e3, color="k", ls="--", lw=1, label="reading every weight once")
    flops = inference.decode_flops(model, B, contexts[0]).total
    ax.loglog(B, flops / (n_devices * acc.peak_flops_per_s()) * 1e3, "k:",
              label=f"compute only (S = {contexts[0]:,})")
    ax.plot([], [], "x", color="grey", ms=8, mew=2,
            label="KV cache stops fitting (faded: does not fit)")
    comm = f", {tp}-way TP all-reduces" if tp > 1 else ""
    ax.set_xlabel("batch: sequences decoded together (B)")
    ax.set_ylabel("ms per decode step")
    ax.set_title(f"{model} on {n_devices} x {acc.name}, bf16, roofline lower bound{comm}",
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return fit_at


def explorer(model="llama3-70b", accelerator="h100", n_devices=8):
    """Decode step time against batch: pick model, chip, devices and context length, and
    whether to add the tensor-parallel all-reduces (tp = the number of devices)."""
    import ipywidgets as w
    import matplotlib.pyplot as plt

    from ... import models

    model_w = w.Dropdown(options=list(models.names()), value=model, description="model")
    acc_w = w.Dropdown(options=[n for n in hardware.names() if hardware.get(n).supports("bf16")],
                       value=accelerator, description="chip")
    n_w = w.IntSlider(value=n_devices, min=1, max=64, description="devices")
    s_w = w.IntText(value=8192, description="context S")
    tp_w = w.Checkbox(value=False, description="tensor-parallel all-reduces")
    out = w.Output()

    def redraw(*_):
        with out:
            out.clear_output(wait=True)
            if s_w.value < 1:
                print("the context must hold at least one token")
                return
            fig, ax = plt.subplots(figsize=(7, 4))
            plot_decode_time(ax, model_w.value, acc_w.value, n_w.value, contexts=(s_w.value,),
                             tp=n_w.value if tp_w.value else 1)
            plt.show()
            fits = inference.max_cached_tokens(model_w.value, acc_w.value, n_w.value)
            print(f"KV cache room next to the weights: {fits:,.0f} tokens "
                  f"= {fits / s_w.value:,.1f} sequences of {s_w.value:,} tokens")

    for ctl in (model_w, acc_w, n_w, s_w, tp_w):
        ctl.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HBox([model_w, acc_w]), w.HBox([n_w, s_w, tp_w]), out])
