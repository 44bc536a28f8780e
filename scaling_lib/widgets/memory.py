"""The training-memory calculator (Chapter 6).

``plot_training_memory`` draws one stacked bar per plan (parameters, gradients, optimizer state,
activations, logits on one device, from :func:`scaling_lib.memory.training_memory`) against the
accelerator's HBM line; ``explorer()`` wraps it in ipywidgets controls. matplotlib and ipywidgets
are imported only when these are called; every number comes from the tested library.
"""

from __future__ import annotations

from .. import hardware, models
from ..memory import RECIPES, check_fit, training_memory
from ..parallelism import ParallelPlan

PART_COLORS = {"parameters": "#4c72b0", "gradients": "#55a868", "optimizer": "#c44e52",
               "activations": "#8172b2", "logits": "#ccb974", "overhead": "#937860"}


def plot_training_memory(ax, cfg, plans, B=None, T=4096, accelerator="h100", *,
                         recipe: str = "mixed", flash_attention: bool = True):
    """Stacked per-device memory for each ``(label, ParallelPlan)`` in ``plans``, in GB.

    ``B`` is the global batch in sequences (default: each plan's dp · micro_batch). Bars that do
    not fit are hatched; the dashed line is the accelerator's HBM. Returns the list of
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
        ax.text(i, bottom, f"{bottom:.0f} GB", ha="center", va="bottom", fontsize=8)
        results.append((label, mem, fits, why))
    ax.axhline(acc.hbm_bytes / 1e9, color="black", ls="--", lw=1)
    ax.text(len(plans) - 0.5, acc.hbm_bytes / 1e9, f" {acc.name} HBM", va="bottom", ha="right",
            fontsize=8)
    ax.set_xticks(range(len(plans)), [label for label, _ in plans], fontsize=8)
    ax.set_ylabel("GB per device")
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(True, axis="y", alpha=0.3)
    return results


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
