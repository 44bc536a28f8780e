"""What each data-parallel rank keeps under ZeRO stages 0 to 3.

:func:`zero_stages` draws one row per stage and one column per rank: for each of parameters,
gradients and optimizer state, the outline is the whole model's copy and the filled part is what
the rank stores (all of it, or its 1/dp slice). Sizes are
:func:`scaling_lib.memory.model_state_bytes`.

See: the chapter "Data parallelism, ZeRO/FSDP and HSDP" and "Training memory".
"""

from __future__ import annotations

from ... import memory
from ...units import check_int
from ._style import LINE, PALETTE, box, canvas, fmt, label, legend, new_axes, set_alt

PARTS = ("parameters", "gradients", "optimizer")
_COLOURS = {"parameters": PALETTE["params"], "gradients": PALETTE["grads"],
            "optimizer": PALETTE["optimizer"]}


def zero_stages(n_params=7.5e9, dp=4, *, stages=(0, 1, 2, 3), recipe="mixed", optimizer="adam",
                ax=None):
    """Per rank and ZeRO stage, the model state kept (filled) out of a full copy (outlined).

    Bar lengths are proportional to bytes; each row is labelled with the bytes per device,
    :func:`scaling_lib.memory.model_state_bytes` ``(n_params, dp, zero)``. Returns ax.
    """
    dp = int(check_int("dp", dp, minimum=1, maximum=16))
    full = memory.model_state_bytes(n_params, 1, 0, recipe=recipe, optimizer=optimizer)
    scale = 3.0 / full.total  # a full copy of all three parts is 3 units long
    col_w, row_h = 3.6, 1.3
    ax = new_axes(ax, (min(3 + 2.2 * dp, 14), 1.2 + 0.95 * len(stages)))
    canvas(ax, (-2.4, dp * col_w), (-len(stages) * row_h - 0.2, 0.9),
           f"ZeRO: what each of {dp} data-parallel ranks keeps ({n_params / 1e9:.3g}B parameters, "
           f"{recipe}, {optimizer})", equal=False)
    rows = []
    for r, z in enumerate(stages):
        kept = memory.model_state_bytes(n_params, dp, z, recipe=recipe, optimizer=optimizer)
        y = -r * row_h
        label(ax, -0.2, y - 0.45, f"stage {z}\n{fmt(kept.total)} per rank", ha="right",
              fontsize=8)
        for rank in range(dp):
            x = rank * col_w
            for p, part in enumerate(PARTS):
                length = full[part] * scale
                yy = y - 0.25 - p * 0.3
                box(ax, x, yy, length, 0.22, fill="white", edge=LINE, lw=0.6, ls="--")
                share = kept[part] / full[part]
                start = x + (rank * share * length if share < 1 else 0.0)
                box(ax, start, yy, share * length, 0.22, fill=_COLOURS[part], edge=LINE, lw=0.6)
            if r == 0:
                label(ax, x + 1.5, 0.45, f"rank {rank}", fontsize=8)
        rows.append(f"stage {z} keeps {fmt(kept.total)} per rank")
    legend(ax, [(p, _COLOURS[p]) for p in PARTS], loc="lower center",
           bbox_to_anchor=(0.5, -0.08), ncol=3)
    set_alt(ax, f"ZeRO stages drawn for {dp} data-parallel ranks and {n_params / 1e9:.3g} "
            f"billion parameters: each rank's parameters, gradients and optimizer state as "
            f"bars, the outline a full copy and the filled part what the rank stores. Stage 1 "
            f"shards the optimizer state, stage 2 also the gradients, stage 3 also the parameters; "
            + "; ".join(rows) + ".")
    return ax


__all__ = ["PARTS", "zero_stages"]
