"""Figures and the serving explorer for Chapter 21 (serving at scale).

``plot_breakdown`` draws a decode step's parts (weights, KV cache, FLOPs, communication) against
the batch, with the step time and the current batch marked; ``plot_pareto`` draws time per output
token against tokens/s per device for several device counts, the Pareto front over all of them,
and the current point. ``explorer`` puts both under controls for model, chip, device count,
precision, batch, prompt and output lengths and price. Every number comes from
:mod:`scaling_lib.serving`; matplotlib and ipywidgets are imported only when the explorer is called.
"""

from __future__ import annotations

import numpy as np

from ... import hardware, serving

BATCHES = 2 ** np.arange(13)  # 1 .. 4096
DEVICE_COUNTS = (1, 2, 4, 8, 16)
PRECISIONS = {"bf16": ("bf16", "bf16"), "fp8 weights + fp8 KV": ("fp8", "fp8"),
              "int8 weights + int8 KV": ("int8", "int8"),
              "int4 weights + bf16 KV": ("int4", "bf16"),
              "int4 weights + int8 KV": ("int4", "int8")}


def _layout(model, accelerator, n_devices, batch, prompt_len, gen_len, dtype, kv_dtype, layout):
    """(tp, pp, replicas) for the explorer's layout choice: "auto" is the estimate's own pick at
    ``batch`` (tp inside the scale-up domain, pp across nodes, replicas), "tp" is tensor
    parallelism over every device (all-reduces cross the network beyond one node)."""
    if layout == "tp":
        return n_devices, 1, 1
    if layout != "auto":
        raise ValueError(f"layout={layout!r}: choose 'auto' or 'tp'")
    e = serving.estimate(model, accelerator, n_devices, batch=batch, prompt_len=prompt_len,
                         gen_len=gen_len, dtype=dtype, kv_dtype=kv_dtype)
    return int(e.tp), int(e.pp), int(e.replicas)


def plot_breakdown(ax, model="llama3-70b", accelerator="h100", n_devices=8, *, batch=64,
                   prompt_len=1024, gen_len=256, dtype="bf16", kv_dtype=None, batches=BATCHES,
                   layout="auto"):
    """Decode step parts (ms) against the batch on log axes; returns the breakdown at ``batch``.

    One layout for every batch: the estimate's pick at ``batch`` ("auto": tp inside a node, pp
    across nodes) or tensor parallelism over all devices ("tp"). Batches whose weights, cache
    and activations do not fit in HBM are drawn faded (the legend says so).
    """
    B = np.asarray(batches)
    S = prompt_len + gen_len // 2
    tp, pp, reps = _layout(model, accelerator, n_devices, batch, prompt_len, gen_len, dtype,
                           kv_dtype, layout)
    Br = np.maximum(B // reps, 1)
    parts = serving.decode_time_breakdown(model, accelerator, tp * pp, batch=Br, context=S,
                                          dtype=dtype, kv_dtype=kv_dtype, tp=tp, pp=pp)
    e = serving.estimate(model, accelerator, n_devices, batch=B, prompt_len=prompt_len,
                         gen_len=gen_len, dtype=dtype, kv_dtype=kv_dtype, tp=tp, pp=pp,
                         replicas=reps)
    fits = np.asarray(e.fits)
    styles = {"weights": "-", "kv cache": "-", "flops": ":", "communication": "--",
              "launch": "-."}
    for name, t in parts.items():
        t = np.broadcast_to(np.asarray(t, dtype=float), B.shape) * 1e3
        if np.all(t == 0):
            continue
        (line,) = ax.loglog(B[fits], t[fits], styles[name], label=name)
        if not fits.all():
            ax.loglog(B[~fits], t[~fits], styles[name], color=line.get_color(), alpha=0.3)
    tpot = np.asarray(e.tpot) * 1e3
    ax.loglog(B[fits], tpot[fits], "k-", lw=2, alpha=0.8, label="time per output token")
    if not fits.all():
        ax.loglog(B[~fits], tpot[~fits], "k-", lw=2, alpha=0.2,
                  label="faded: does not fit in HBM")
    ax.axvline(batch, color="grey", lw=1)
    here = serving.decode_time_breakdown(model, accelerator, tp * pp,
                                         batch=max(batch // reps, 1), context=S, dtype=dtype,
                                         kv_dtype=kv_dtype, tp=tp, pp=pp)
    t_here = float(serving.estimate(model, accelerator, n_devices, batch=batch,
                                    prompt_len=prompt_len, gen_len=gen_len, dtype=dtype,
                                    kv_dtype=kv_dtype, tp=tp, pp=pp, replicas=reps).tpot)
    ax.plot([batch], [t_here * 1e3], "k*", ms=12, label=f"batch {batch}")
    ax.set_xlabel("batch: sequences decoded together (B)")
    ax.set_ylabel("ms per decode step")
    kv = kv_dtype or dtype
    ax.set_title(f"{model} on {n_devices} x {hardware.get(accelerator).name} (tp={tp} pp={pp} "
                 f"replicas={reps}), {dtype} weights, {kv} KV, context {S:,}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return here


def pareto_points(model="llama3-70b", accelerator="h100", device_counts=DEVICE_COUNTS, *,
                  prompt_len=1024, gen_len=256, dtype="bf16", kv_dtype=None, batches=BATCHES):
    """Every (devices, batch) that fits: rows of n, B, TPOT (s), tokens/s per device, on_front.

    The front is :func:`scaling_lib.serving.pareto_mask` of TPOT against tokens/s per device
    over all rows: the cheapest per token at each latency. Device counts that cannot hold the
    weights, or whose links the library lacks, are skipped.
    """
    rows = []
    for n in device_counts:
        try:
            e = serving.estimate(model, accelerator, n, batch=np.asarray(batches),
                                 prompt_len=prompt_len, gen_len=gen_len, dtype=dtype,
                                 kv_dtype=kv_dtype)
        except ValueError:
            continue
        for B, t, r, ok in zip(batches, np.asarray(e.tpot), np.asarray(e.tokens_per_s_per_device),
                               np.asarray(e.fits)):
            if ok:
                rows.append({"n_devices": int(n), "batch": int(B), "tpot": float(t),
                             "tokens_per_s_per_device": float(r)})
    if rows:
        front = serving.pareto_mask([r["tpot"] for r in rows],
                                    [r["tokens_per_s_per_device"] for r in rows])
        for r, f in zip(rows, front):
            r["on_front"] = bool(f)
    return rows


def plot_pareto(ax, model="llama3-70b", accelerator="h100", device_counts=DEVICE_COUNTS, *,
                n_devices=8, batch=64, prompt_len=1024, gen_len=256, dtype="bf16", kv_dtype=None):
    """TPOT (ms) against tokens/s per device, one colour per device count, the front as a line,
    the current (n_devices, batch) as a star. Returns the rows of :func:`pareto_points`."""
    counts = tuple(sorted(set(device_counts) | {n_devices}))
    rows = pareto_points(model, accelerator, counts, prompt_len=prompt_len, gen_len=gen_len,
                         dtype=dtype, kv_dtype=kv_dtype)
    for n in counts:
        pts = [r for r in rows if r["n_devices"] == n]
        if pts:
            ax.semilogx([r["tpot"] * 1e3 for r in pts],
                        [r["tokens_per_s_per_device"] for r in pts], "o-", ms=4, lw=0.8,
                        alpha=0.7, label=f"{n} device{'s' if n > 1 else ''}")
    front = sorted((r for r in rows if r["on_front"]), key=lambda r: r["tpot"])
    if front:
        ax.semilogx([r["tpot"] * 1e3 for r in front],
                    [r["tokens_per_s_per_device"] for r in front], "k-", lw=2, alpha=0.5,
                    label="Pareto front")
    e = serving.estimate(model, accelerator, n_devices, batch=batch, prompt_len=prompt_len,
                         gen_len=gen_len, dtype=dtype, kv_dtype=kv_dtype)
    ax.plot([float(e.tpot) * 1e3], [float(e.tokens_per_s_per_device)], "k*", ms=14,
            label=f"{n_devices} devices, batch {batch}" + ("" if e.fits else " (does not fit)"))
    ax.set_xlabel("time per output token (ms), lower is better")
    ax.set_ylabel("output tokens/s per device, higher is cheaper")
    ax.set_title(f"{model} on {hardware.get(accelerator).name}: batches 1 to "
                 f"{BATCHES[-1]:,} that fit", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return rows


def summary(model, accelerator, n_devices, *, batch, prompt_len, gen_len, dtype="bf16",
            kv_dtype=None, price=None, layout="auto") -> str:
    """One paragraph of the estimate's figures (what the explorer prints under its plots).

    A setup that does not fit gets no price: it cannot run, so it has no cost per token.
    """
    from ...units import fmt_bytes, fmt_seconds

    tp, pp, reps = _layout(model, accelerator, n_devices, batch, prompt_len, gen_len, dtype,
                           kv_dtype, layout)
    e = serving.estimate(model, accelerator, n_devices, batch=batch, prompt_len=prompt_len,
                         gen_len=gen_len, dtype=dtype, kv_dtype=kv_dtype,
                         price_per_device_hour=price, tp=tp, pp=pp, replicas=reps)
    hbm = hardware.get(accelerator).hbm_bytes
    cost = ("" if e.cost_per_million_tokens is None or not e.fits
            else f"; ${float(e.cost_per_million_tokens):,.2f} per million output tokens")
    return (f"Layout {e.layout}. TTFT {fmt_seconds(float(e.ttft))} ({e.prefill_bound}-bound), TPOT "
            f"{fmt_seconds(float(e.tpot))} ({e.decode_bound}-bound); "
            f"{float(e.tokens_per_s):,.0f} output tokens/s "
            f"({float(e.tokens_per_s_per_device):,.1f} per device){cost}. Memory per device "
            f"{fmt_bytes(float(e.memory.total))} of {fmt_bytes(hbm)}"
            + ("" if e.fits else ": DOES NOT FIT (no price: it cannot run)") + ".")


def explorer(model="llama3-70b", accelerator="h100", n_devices=8, batch=64, prompt_len=1024,
             gen_len=256):
    """Serving explorer: model, chip, devices, precision, batch, prompt and output lengths, and
    price per device-hour → latency breakdown, Pareto front with the current point, summary."""
    import ipywidgets as w
    import matplotlib.pyplot as plt

    from ... import models

    model_w = w.Dropdown(options=list(models.names()), value=model, description="model")
    acc_w = w.Dropdown(options=[n for n in hardware.names() if hardware.get(n).supports("bf16")],
                       value=accelerator, description="chip")
    n_w = w.Dropdown(options=[1, 2, 4, 8, 16, 32, 64], value=n_devices, description="devices")
    lay_w = w.Dropdown(options=[("tp in a node, pp across nodes", "auto"),
                                ("tensor parallel over all", "tp")], value="auto",
                       description="layout")
    prec_w = w.Dropdown(options=list(PRECISIONS), value="bf16", description="precision")
    b_w = w.Dropdown(options=[int(b) for b in BATCHES], value=batch, description="batch")
    p_w = w.IntText(value=prompt_len, description="prompt len")
    g_w = w.IntText(value=gen_len, description="output len")
    price_w = w.FloatText(value=2.0, description="$/device-h")
    out = w.Output()

    def redraw(*_):
        with out:
            out.clear_output(wait=True)
            dtype, kv = PRECISIONS[prec_w.value]
            kw = dict(prompt_len=p_w.value, gen_len=g_w.value, dtype=dtype, kv_dtype=kv)
            try:
                text = summary(model_w.value, acc_w.value, n_w.value, batch=b_w.value,
                               price=price_w.value if price_w.value > 0 else None,
                               layout=lay_w.value, **kw)
                fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4))
                plot_breakdown(a1, model_w.value, acc_w.value, n_w.value, batch=b_w.value,
                               layout=lay_w.value, **kw)
                plot_pareto(a2, model_w.value, acc_w.value, n_devices=n_w.value,
                            batch=b_w.value, **kw)
            except ValueError as exc:  # the library names the rule and the valid choices
                print(exc)
                return
            plt.show()
            print(text)

    for ctl in (model_w, acc_w, n_w, lay_w, prec_w, b_w, p_w, g_w, price_w):
        ctl.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HBox([model_w, acc_w, n_w]), w.HBox([lay_w]), w.HBox([prec_w, b_w, price_w]),
                   w.HBox([p_w, g_w]), out])
