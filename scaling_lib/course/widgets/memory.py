"""The training-memory calculator (Chapter 6).

``plot_training_memory`` draws one stacked bar per plan (parameters, gradients, optimizer state,
activations, logits and the buffers and reserve around them on one device, from
:func:`scaling_lib.memory.training_memory`) against the
accelerator's HBM line; ``explorer()`` wraps it in ipywidgets controls. matplotlib and ipywidgets
are imported only when these are called; every number comes from the tested library.
"""

from __future__ import annotations

from ... import hardware, models
from ...memory import RECIPES, check_fit, training_memory
from ...parallelism import ParallelPlan
from ...units import fmt_bytes

PART_COLORS = {"parameters": "#4c72b0", "gradients": "#55a868", "optimizer": "#c44e52",
               "activations": "#8172b2", "logits": "#ccb974", "overhead": "#937860",
               "gather buffers": "#64b5cd", "gradient buckets": "#8c8c8c",
               "allocator reserve": "#dddddd",
               # training_memory's parts beyond the tensors (the timeline's names above)
               "gathered parameters": "#64b5cd", "gradient accumulator": "#8fd18f",
               "communication buffers": "#8c8c8c", "runtime reserve": "#b0b0b0",
               "allocator fragmentation": "#dddddd"}


def plot_training_memory(ax, cfg, plans, B=None, T=4096, accelerator="h100", *,
                         recipe: str = "mixed", flash_attention: bool = True, ymax=None):
    """Stacked per-device memory for each ``(label, ParallelPlan)`` in ``plans``, in GB.

    A linear axis, so each part's height is its share. ``B`` is the global batch in sequences
    (default: each plan's dp · micro_batch). Bars that do not fit are hatched; the dashed line
    is the accelerator's HBM. ``ymax`` (GB) cuts the axis: taller bars are drawn to the edge
    with their total written inside, marked with an arrow. Returns the list of
    (label, Breakdown, fits, reason).
    """
    acc = hardware.get(accelerator)
    cfg = models.get(cfg)
    results = []
    for i, (label, plan) in enumerate(plans):
        mem = training_memory(cfg, plan, B if B is not None else plan.dp * plan.micro_batch, T,
                              recipe=recipe, flash_attention=flash_attention)
        fits, why = check_fit(mem, acc)
        bottom = 0.0
        for part, value in mem.items():
            gb = float(value) / 1e9
            ax.bar(i, gb, bottom=bottom, color=PART_COLORS.get(part, "grey"),
                   label=part if i == 0 else None, hatch=None if fits else "//",
                   edgecolor="white" if fits else "black", linewidth=0.5)
            bottom += gb
        total = fmt_bytes(bottom * 1e9)
        if ymax is not None and bottom > ymax:
            ax.text(i, ymax * 0.985, f"{total} ↑", ha="center", va="top", fontsize=8,
                    bbox={"facecolor": "white", "edgecolor": "none", "pad": 1.5})
        else:
            ax.text(i, bottom, total, ha="center", va="bottom", fontsize=8)
        results.append((label, mem, fits, why))
    hbm = acc.hbm_bytes / 1e9
    ax.axhline(hbm, color="black", ls="--", lw=1)
    ax.text(1.01, hbm, f"{acc.name} HBM\n({fmt_bytes(acc.hbm_bytes)})", va="center",
            ha="left", fontsize=8, transform=ax.get_yaxis_transform())  # outside: no overlap
    if ymax is not None:
        ax.set_ylim(0, ymax)
    ax.set_xlim(-0.5, len(plans) - 0.5)
    ax.set_xticks(range(len(plans)), [label for label, _ in plans], fontsize=8)
    ax.set_ylabel("GB per device")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(True, axis="y", alpha=0.3)
    return results


def plot_memory_timeline(ax, cfg, plan, T=4096, accelerator="h100", **kw):
    """Stacked memory of one device over one training step, from
    :func:`scaling_lib.memory.memory_timeline` (keywords passed on), with the HBM line.
    Returns (phases, Breakdown)."""
    from ...memory import memory_timeline

    phases, m = memory_timeline(cfg, plan, T, **kw)
    x = range(len(phases))
    parts = [k for k in m if float(max(m[k])) > 0]
    ax.stackplot(x, *[m[k] / 1e9 for k in parts], labels=parts, step="mid",
                 colors=[PART_COLORS.get(k, "grey") for k in parts])
    acc = hardware.get(accelerator)
    ax.axhline(acc.hbm_bytes / 1e9, color="black", ls="--", lw=1)
    ax.text(0.5, acc.hbm_bytes / 1e9, f"{acc.name} HBM", va="bottom", ha="left", fontsize=8)
    L = (len(phases) - 3) // 2
    ticks = {"start": 0, "forward": (L + 1) / 2, "loss": L + 1, "backward": L + 1 + (L + 1) / 2,
             "optimizer": len(phases) - 1}
    ax.set_xticks(list(ticks.values()), list(ticks), fontsize=8)
    for edge in (0.5, L + 0.5, L + 1.5, 2 * L + 1.5):
        ax.axvline(edge, color="grey", lw=0.5, ls=":")
    ax.set_xlim(-0.5, len(phases) - 0.5)
    ax.set_ylabel("GB on one device")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(True, axis="y", alpha=0.3)
    return phases, m


def explorer(model="llama3-70b", accelerator="h100"):
    """Choose a model (preset or custom), recipe, ZeRO stage, degrees, micro-batch, T,
    recomputation and accelerator; see the memory of one device against HBM and why it fails."""
    import ipywidgets as w
    import matplotlib.pyplot as plt

    style = {"description_width": "initial"}
    model_w = w.Dropdown(options=[*models.names(), "custom"], value=model, description="model")
    custom = {s: w.BoundedIntText(value=v, min=1, max=10**6, description=s,
                                  layout={"width": "120px"})
              for s, v in (("L", 32), ("D", 4096), ("F", 14336), ("N", 32), ("K", 8), ("H", 128),
                           ("V", 128256))}
    acc_w = w.Dropdown(options=list(hardware.names()), value=accelerator, description="chip")
    recipe_w = w.Dropdown(options=list(RECIPES), value="mixed", description="recipe")
    zero_w = w.Dropdown(options=[0, 1, 2, 3], value=0, description="ZeRO stage", style=style)
    deg = {s: w.Dropdown(options=[1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024], value=v,
                         description=s, layout={"width": "150px"})
           for s, v in (("dp", 8), ("tp", 1), ("pp", 1))}
    mb_w = w.Dropdown(options=[1, 2, 4, 8, 16], value=1, description="micro-batch", style=style)
    t_w = w.Dropdown(options=[1024, 2048, 4096, 8192, 16384, 32768, 131072], value=4096,
                     description="T")
    rec_w = w.Dropdown(options=["none", "selective", "full"], value="none",
                       description="recompute")
    sp_w = w.Checkbox(value=False, description="sequence parallel")
    flash_w = w.Checkbox(value=True, description="FlashAttention")
    out = w.Output()

    def redraw(*_):
        with out:
            out.clear_output(wait=True)
            try:
                if model_w.value == "custom":
                    cfg = models.TransformerConfig(**{s: c.value for s, c in custom.items()},
                                                   name="custom")
                else:
                    cfg = models.get(model_w.value)
                plan = ParallelPlan(dp=deg["dp"].value, tp=deg["tp"].value, pp=deg["pp"].value,
                                    zero=zero_w.value, micro_batch=mb_w.value,
                                    recompute=rec_w.value, sequence_parallel=sp_w.value)
                B = plan.dp * plan.micro_batch * max(plan.pp, 1)
                fig, ax = plt.subplots(figsize=(5, 4.5))
                [(_, mem, fits, why)] = plot_training_memory(
                    ax, cfg, [(cfg.name or "model", plan)], B, t_w.value, acc_w.value,
                    recipe=recipe_w.value, flash_attention=flash_w.value)
                ax.set_title(f"{plan.world_size} devices, global batch {B} sequences", fontsize=9)
                plt.show()
                print(("fits: " if fits else "does not fit: ") + why)
            except ValueError as exc:  # an impossible combination: say why, keep the controls
                print(f"not a valid setting: {exc}")

    controls = [model_w, acc_w, recipe_w, zero_w, *deg.values(), mb_w, t_w, rec_w, sp_w,
                flash_w, *custom.values()]
    for ctl in controls:
        ctl.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HBox([model_w, acc_w, recipe_w, zero_w]), w.HBox(list(deg.values())),
                   w.HBox([mb_w, t_w, rec_w]), w.HBox([sp_w, flash_w]),
                   w.HBox(list(custom.values())), out])
