"""Timelines of a step: DDP's gradient buckets, FSDP's prefetch, and pipeline schedules.

:func:`ddp_buckets` and :func:`fsdp_prefetch` draw the events of
:func:`scaling_lib.parallelism.timeline.ddp_timeline` and ``fsdp_timeline`` as lanes (compute,
network); :func:`pipeline_schedule` draws :func:`scaling_lib.parallelism.pipeline.schedule` (one
lane per stage, boxes labelled by micro-batch, idle time grey) with its bubble from
:func:`~scaling_lib.parallelism.pipeline.bubble_fraction`.

See: the chapters "Data parallelism, ZeRO/FSDP and HSDP" and "Pipeline parallelism".
"""

from __future__ import annotations

from ...parallelism import pipeline, timeline
from ...units import fmt_bytes, fmt_percent, fmt_seconds
from ._style import PALETTE, TEXT, legend, new_axes, set_alt

_LANE_COLOURS = {"compute": PALETTE["compute"], "network": PALETTE["comm"],
                 "all-gather": PALETTE["accent"], "reduce-scatter": PALETTE["comm"]}


def _lanes(ax, events, lanes, title):
    """Draw (lane, label, start, end) events on one row per lane; time in ms on the x axis."""
    end = max(e[3] for e in events)
    ms = 1e3
    for k, lane in enumerate(lanes):
        ax.broken_barh([(0, end * ms)], (k - 0.4, 0.8), facecolor=PALETTE["free"], lw=0)
    for lane, text, start, stop in events:
        k = lanes.index(lane)
        w = (stop - start) * ms
        ax.broken_barh([(start * ms, w)], (k - 0.4, 0.8), facecolor=_LANE_COLOURS[lane],
                       edgecolor="white", lw=0.6)
        short = text.replace("backward ", "B ").replace("forward ", "F ")
        if w > end * ms * 0.045:
            ax.text(start * ms + w / 2, k, short.split(" ", 1)[-1], ha="center", va="center",
                    fontsize=6, color="white")
    ax.set_yticks(range(len(lanes)), lanes, color=TEXT, fontsize=8)
    ax.set_ylim(len(lanes) - 0.5, -0.5)
    ax.set_xlim(0, end * ms * 1.01)
    ax.set_xlabel("time (ms)", color=TEXT)
    ax.tick_params(colors=TEXT, labelsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_title(title, color=TEXT, fontsize=10)
    return end


def ddp_buckets(cfg="llama3-8b", cluster=None, dp=8, tokens_per_device=8192, T=4096, *,
                bucket_bytes=25e6, ax=None, **options):
    """DDP's backward pass: layers back to front, each full bucket all-reduced while the next
    layers compute (:func:`scaling_lib.parallelism.timeline.ddp_timeline`). Returns ax."""
    from ... import hardware

    cluster = hardware.cluster("h100", dp) if cluster is None else cluster
    ev = timeline.ddp_timeline(cfg, cluster, dp, tokens_per_device, T,
                               bucket_bytes=bucket_bytes, **options)
    sizes = [b for _, _, b in timeline.ddp_bucket_bytes(cfg, bucket_bytes=bucket_bytes,
                                                          dtype=options.get("dtype", "bf16"))]
    ax = new_axes(ax, (9, 2.2))
    n_buckets = sum(e[0] == "network" for e in ev)
    end = _lanes(ax, ev, ["compute", "network"],
                 f"DDP backward, {dp} ranks: {n_buckets} buckets of whole layers, "
                 f"{fmt_bytes(min(sizes))} to {fmt_bytes(max(sizes))} (cap {fmt_bytes(bucket_bytes)})")
    exposed = end - max(e[3] for e in ev if e[0] == "compute")
    set_alt(ax, f"Timeline of DDP's backward pass on {dp} ranks: the compute lane runs the layers "
            f"back to front, and the network lane all-reduces each of {n_buckets} gradient "
            f"buckets ({fmt_bytes(min(sizes))} to {fmt_bytes(max(sizes))}; the first holds the "
            f"output layer, ready first, the last the input embedding) as soon as its last layer "
            f"is done, hidden behind the next layers' compute except the last "
            f"{fmt_seconds(exposed)} after the backward pass ends.")
    return ax


def fsdp_prefetch(cfg="llama3-8b", cluster=None, dp=8, tokens_per_device=8192, T=4096, *,
                  n_layers=4, ax=None, **options):
    """FSDP's step for the first ``n_layers`` layers: the next layer's weights gathered while this
    one computes, gradients reduce-scattered behind the backward pass
    (:func:`scaling_lib.parallelism.timeline.fsdp_timeline`). Returns ax."""
    from ... import hardware

    cluster = hardware.cluster("h100", dp) if cluster is None else cluster
    ev = timeline.fsdp_timeline(cfg, cluster, dp, tokens_per_device, T, n_layers=n_layers,
                                **options)
    ax = new_axes(ax, (9, 2.6))
    end = _lanes(ax, ev, ["all-gather", "compute", "reduce-scatter"],
                 f"FSDP prefetch, {n_layers} layers, {dp} ranks")
    busy = sum(e[3] - e[2] for e in ev if e[0] == "compute")
    set_alt(ax, f"Timeline of an FSDP step over {n_layers} layers on {dp} ranks in three lanes: "
            f"all-gathers fetch each layer's weights one layer ahead, the compute lane runs "
            f"forward then backward, and reduce-scatters of each layer's gradients follow its "
            f"backward; compute is busy {fmt_percent(busy / end)} of the "
            f"{fmt_seconds(end)} shown.")
    return ax


def pipeline_schedule(pp=4, m=8, *, v=1, kind="1f1b", t_fwd=1.0, t_bwd=2.0, ax=None):
    """A pipeline schedule from :func:`scaling_lib.parallelism.pipeline.schedule`: one lane per
    device, forward boxes blue and backward orange, each labelled by its micro-batch (and chunk
    when v > 1). Returns ax."""
    ev = pipeline.schedule(pp, m, v=v, kind=kind, t_fwd=t_fwd, t_bwd=t_bwd)
    end = pipeline.makespan(ev)
    bubble = pipeline.bubble_fraction(ev)
    ax = new_axes(ax, (9, 0.7 + 0.45 * pp))
    for s in range(pp):
        ax.broken_barh([(0, end)], (s - 0.4, 0.8), facecolor=PALETTE["idle"], lw=0)
    for e in ev:
        fwd = e["op"] == "F"
        w = float(e["end"] - e["start"])
        fill = PALETTE["forward"] if fwd else PALETTE["backward"]
        ax.broken_barh([(float(e["start"]), w)], (int(e["stage"]) - 0.4, 0.8), facecolor=fill,
                       edgecolor="white", lw=0.6, alpha=1.0 if e["chunk"] == 0 else 0.7)
        text = str(int(e["micro"]) + 1) + ("" if v == 1 else "abcdefgh"[int(e["chunk"]) % 8])
        if w >= end / 70:
            ax.text(float(e["start"]) + w / 2, int(e["stage"]), text, ha="center",
                    va="center", fontsize=6, color="white" if fwd else TEXT)
    ax.set_yticks(range(pp), [f"device {s}" for s in range(pp)], color=TEXT, fontsize=8)
    ax.set_ylim(pp - 0.5, -0.5)
    ax.set_xlim(0, end)
    ax.set_xlabel("time (forward slots)" if t_fwd == 1.0 else "time", color=TEXT)
    ax.tick_params(colors=TEXT, labelsize=8)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    name = {"1f1b": "1F1B", "gpipe": "GPipe"}.get(kind, kind) + (f", v={v}" if v > 1 else "")
    ax.set_title(f"{name}: p={pp} devices, m={m} micro-batches, idle {fmt_percent(bubble)}",
                 color=TEXT, fontsize=10)
    legend(ax, [("forward", PALETTE["forward"]), ("backward", PALETTE["backward"]),
                ("idle (bubble)", PALETTE["idle"])], loc="upper left",
           bbox_to_anchor=(1.0, 1.0))
    set_alt(ax, f"Pipeline schedule {name} on {pp} devices with {m} micro-batches: one lane per "
            f"device, forward passes in blue and backward passes in orange labelled by "
            f"micro-batch, grey idle time at the start and end of the step; the devices are "
            f"idle {fmt_percent(bubble)} of the step.")
    return ax


__all__ = ["ddp_buckets", "fsdp_prefetch", "pipeline_schedule"]
