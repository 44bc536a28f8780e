"""The strategy explorer (Chapter 10, "Data parallelism, ZeRO/FSDP and HSDP").

Plotting functions take a matplotlib Axes and draw from :mod:`scaling_lib.parallelism.steptime`
(compute, each collective's time and whether compute hides it), :mod:`scaling_lib.memory` (the
memory stack per device) and :mod:`scaling_lib.parallelism` (the collectives); ``explorer()``
wraps them in ipywidgets controls. matplotlib and ipywidgets are imported only when these are
called.
"""

from __future__ import annotations

from ... import hardware, models
from ...parallelism import ParallelPlan, steptime
from .memory import PART_COLORS

STREAM_COLORS = {"compute": "#4c72b0", "network": "#c44e52", "all-gather": "#dd8452",
                 "reduce-scatter": "#55a868"}
KIND_COLORS = {"all-reduce": "#c44e52", "all-gather": "#dd8452", "reduce-scatter": "#55a868",
               "all-to-all": "#8172b2", "collective-permute": "#937860"}

# The strategies of the step-time plot: (label, plan for n devices and B sequences), n a power
# of two >= 8, one micro-batch per step (no gradient accumulation: FSDP would re-gather per
# micro-batch).
DEFAULT_STRATEGIES = (
    ("DP", lambda n, B: ParallelPlan(dp=n, micro_batch=B // n)),
    ("ZeRO-1", lambda n, B: ParallelPlan(dp=n, zero=1, micro_batch=B // n)),
    ("FSDP (ZeRO-3)", lambda n, B: ParallelPlan(dp=n, zero=3, micro_batch=B // n)),
    ("HSDP (shard 8)", lambda n, B: ParallelPlan(dp=n, zero=3, shard_group=8,
                                                 micro_batch=B // n)),
)
MODEL_STATES = ("parameters", "gradients", "optimizer")


def states_fit(result, accelerator) -> bool:
    """Whether a StepTime's model states (weights, gradients, optimizer) fit in HBM."""
    states = sum(float(result.memory[k]) for k in MODEL_STATES)
    return states <= hardware.get(accelerator).hbm_bytes


def plot_timeline(ax, events, *, title=""):
    """Gantt chart of (stream, label, start, end) events (from ``parallelism.timeline``), in ms.

    Returns the streams in the order drawn (top to bottom).
    """
    streams = list(dict.fromkeys(e[0] for e in events))
    for i, s in enumerate(streams):
        for stream, label, t0, t1 in events:
            if stream == s:
                ax.barh(i, (t1 - t0) * 1e3, left=t0 * 1e3, color=STREAM_COLORS.get(s, "grey"),
                        edgecolor="white", linewidth=0.5)
    ax.set_yticks(range(len(streams)), streams, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time (ms)")
    ax.grid(True, axis="x", alpha=0.3)
    if title:
        ax.set_title(title, fontsize=9)
    return streams


def plot_memory(ax, result, accelerator):
    """One stacked bar of the per-device memory of a ``parallelism.steptime.StepTime``, against
    HBM (GB)."""
    acc = hardware.get(accelerator)
    bottom = 0.0
    for part, value in result.memory.items():
        gb = float(value) / 1e9
        ax.bar(0, gb, bottom=bottom, color=PART_COLORS.get(part, "grey"), label=part,
               hatch=None if result.fits else "//", edgecolor="white" if result.fits else "black",
               linewidth=0.5)
        bottom += gb
    ax.axhline(acc.hbm_bytes / 1e9, color="black", ls="--", lw=1)
    ax.text(0.45, acc.hbm_bytes / 1e9, f"{acc.name} HBM", fontsize=8, va="bottom", ha="right")
    ax.set_xticks([])
    ax.set_xlim(-0.6, 0.6)
    ax.set_ylabel("GB per device")
    ax.set_title(f"memory: {bottom:.0f} GB" + ("" if result.fits else " (does not fit)"),
                 fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    return bottom


def plot_step(ax, result):
    """Compute per phase against each collective's time (ms), hidden ones light, exposed dark."""
    rows = [(f"{ph} compute", t * 1e3, "#4c72b0", 1.0) for ph, t in result.compute.items()]
    for ct in result.comms:
        c = ct.comm
        rows.append((f"{c.phase}: {c.kind} ({c.axis}, {c.group_size})", ct.time * 1e3,
                     KIND_COLORS.get(c.kind, "grey"), 0.35 if ct.hidden else 1.0))
    for i, (label, ms, color, alpha) in enumerate(rows):
        ax.barh(i, ms, color=color, alpha=alpha)
    ax.set_yticks(range(len(rows)), [r[0] for r in rows], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ms per step (pale: hidden under compute)")
    ax.set_title(f"step {result.step_time * 1e3:.0f} ms, exposed communication "
                 f"{result.exposed_time * 1e3:.0f} ms", fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)
    return rows


def step_time_curves(cfg, accelerator, tokens, T, n_devices, strategies=DEFAULT_STRATEGIES, *,
                     efficiency=None):
    """{label: [(n, StepTime or None)]}: each strategy's step for a global batch of ``tokens``
    tokens (sequences of T) on n devices of ``accelerator`` (None where the plan cannot run)."""
    out = {}
    for label, make in strategies:
        rows = []
        for n in n_devices:
            try:
                plan = make(n, tokens // T)
                st = steptime.step_time(cfg, hardware.cluster(accelerator, n), plan,
                                        tokens // T, T, efficiency=efficiency)
            except ValueError:
                st = None
            rows.append((n, st))
        out[label] = rows
    return out


def first_comm_bound(rows):
    """The smallest device count at which a strategy's step exposes communication (or None)."""
    return next((n for n, st in rows if st is not None and st.comm_bound), None)


def plot_step_time_vs_devices(ax, cfg="llama3-8b", accelerator="h100", tokens=2**21, T=2048,
                              n_devices=(8, 16, 32, 64, 128, 256, 512, 1024),
                              strategies=DEFAULT_STRATEGIES, *, efficiency=None):
    """Step time against devices for each strategy (log-log), with the compute-only line.

    A filled circle marks where a strategy becomes communication-bound (its first exposed
    communication); hollow markers are plans whose model states (weights, gradients, Adam
    state) do not fit in HBM (activations depend on recomputation and are left out here).
    Returns the curves of :func:`step_time_curves`.
    """
    curves = step_time_curves(cfg, accelerator, tokens, T, n_devices, strategies,
                              efficiency=efficiency)
    ideal = None
    for i, (label, rows) in enumerate(curves.items()):
        pts = [(n, st) for n, st in rows if st is not None]
        if not pts:
            continue
        (line,) = ax.plot([n for n, _ in pts], [st.step_time for _, st in pts], "-",
                          label=label, lw=1.5, zorder=3 - 0.1 * i)
        for n, st in pts:
            ax.plot(n, st.step_time, "o", ms=4, color=line.get_color(),
                    mfc=line.get_color() if states_fit(st, accelerator) else "white")
        n_bound = first_comm_bound(rows)
        if n_bound is not None:
            st = dict(rows)[n_bound]
            ax.plot(n_bound, st.step_time, "o", ms=10, mfc="none", mec=line.get_color(), mew=2)
        ideal = ideal or [(n, st.compute_time) for n, st in pts]
    if ideal:
        ax.plot([n for n, _ in ideal], [t for _, t in ideal], "k:", lw=1, label="compute only")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(f"{hardware.get(accelerator).name} devices")
    ax.set_ylabel("step time (s)")
    ax.set_title(f"{models.get(cfg).name}, {tokens / 2**20:.0f}M tokens per step; big ring: "
                 "first communication-bound point; hollow: model states do not fit", fontsize=8)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    return curves


def explorer(model="llama3-8b", accelerator="h100"):
    """Choose model, chip, devices, global batch, T, DP/ZeRO/TP degrees, shard group and
    sequence parallelism; see memory per device, compute, each collective and what is hidden."""
    import ipywidgets as w
    import matplotlib.pyplot as plt

    style = {"description_width": "initial"}
    model_w = w.Dropdown(options=list(models.names()), value=model, description="model")
    acc_w = w.Dropdown(options=["h100", "a100-80gb", "b200", "tpu-v5p", "tpu-v5e"],
                       value=accelerator, description="chip")
    pow2 = [2 ** k for k in range(0, 13)]
    dp_w = w.Dropdown(options=pow2, value=64, description="dp")
    tp_w = w.Dropdown(options=[1, 2, 4, 8], value=1, description="tp")
    zero_w = w.Dropdown(options=[0, 1, 2, 3], value=3, description="ZeRO stage", style=style)
    shard_w = w.Dropdown(options=["all of dp", *pow2[1:]], value="all of dp",
                         description="shard group", style=style)
    sp_w = w.Checkbox(value=False, description="sequence parallel")
    rec_w = w.Dropdown(options=["none", "selective", "full"], value="none",
                       description="recompute")
    batch_w = w.Dropdown(options=[2 ** k for k in range(17, 25)], value=2 ** 19,
                         description="tokens/step", style=style)
    t_w = w.Dropdown(options=[1024, 2048, 4096, 8192], value=4096, description="T")
    eff_w = w.FloatSlider(value=0.5, min=0.2, max=1.0, step=0.05, description="MFU η")
    out = w.Output()

    def redraw(*_):
        with out:
            out.clear_output(wait=True)
            try:
                dp, tp = dp_w.value, tp_w.value
                plan = ParallelPlan(dp=dp, tp=tp, zero=zero_w.value, recompute=rec_w.value,
                                    sequence_parallel=sp_w.value and tp > 1,
                                    shard_group=None if shard_w.value == "all of dp"
                                    else shard_w.value)
                B = batch_w.value // t_w.value
                plan = plan.with_changes(micro_batch=max(B // dp, 1))
                cluster = hardware.cluster(acc_w.value, plan.world_size)
                st = steptime.step_time(model_w.value, cluster, plan, B, t_w.value,
                                        efficiency=eff_w.value)
                fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8),
                                             gridspec_kw={"width_ratios": [1, 3]})
                plot_memory(a1, st, acc_w.value)
                plot_step(a2, st)
                fig.tight_layout()
                plt.show()
                b_crit = steptime.critical_tokens_per_device(model_w.value, cluster, plan,
                                                             t_w.value, efficiency=eff_w.value)
                mine = batch_w.value / plan.world_size
                print(f"{plan.world_size} devices; {mine:,.0f} tokens per device; "
                      f"communication hidden above about {b_crit:,.0f} tokens per device"
                      + (" (tensor-parallel collectives are never hidden)" if tp > 1 else ""))
            except ValueError as exc:  # an impossible combination: say why, keep the controls
                print(f"not a valid setting: {exc}")

    controls = [model_w, acc_w, dp_w, tp_w, zero_w, shard_w, sp_w, rec_w, batch_w, t_w, eff_w]
    for ctl in controls:
        ctl.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HBox([model_w, acc_w, batch_w, t_w]), w.HBox([dp_w, tp_w, zero_w, shard_w]),
                   w.HBox([sp_w, rec_w, eff_w]), out])
