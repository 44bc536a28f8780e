"""Tensor and sequence parallelism inside a layer: column- and row-split weights, f and g.

:func:`tensor_parallel_mlp` draws Megatron's MLP over tp ranks: the input reaches every rank
through f (identity forward, all-reduce backward), each rank multiplies by its column slice of
W1 and its row slice of W2, and g (all-reduce forward, identity backward) sums the partial
outputs. With sequence parallelism the input and output are split over the tokens, f becomes an
all-gather and g a reduce-scatter. The shapes come from the model config, the collectives (kind
and bytes) from :func:`scaling_lib.parallelism.tensor.comms`.

See: the chapter "Tensor and sequence parallelism".
"""

from __future__ import annotations

from ... import models
from ...parallelism import ParallelPlan, tensor
from ...units import check_int
from ._style import PALETTE, arrow, box, canvas, fmt, label, new_axes, set_alt, shard_colour


def _forward_kinds(cfg, tp, sp, b, T):
    """(f's forward collective or None, g's forward collective, its V) from tensor.comms."""
    comms = [c for c in tensor.comms(cfg, ParallelPlan(tp=tp, sequence_parallel=sp), b, T)
             if c.phase == "forward" and c.axis == "tp"]
    act = max(c.nbytes for c in comms)  # the block's activations, a·b·T·D
    kinds = [c.kind for c in comms if c.nbytes == act]
    f = "all-gather" if "all-gather" in kinds else None
    g = "reduce-scatter" if "reduce-scatter" in kinds else "all-reduce"
    return f, g, act


def tensor_parallel_mlp(cfg="llama3-8b", tp=4, *, sequence_parallel=False, b=1, T=4096, ax=None):
    """The MLP of ``cfg`` split over ``tp`` ranks (column-split W1, row-split W2, f and g);
    ``b`` sequences of ``T`` tokens per micro-batch size the collectives. Returns ax."""
    cfg = models.get(cfg)
    tp = int(check_int("tp", tp, minimum=2, maximum=8))
    if cfg.F % tp:
        raise ValueError(f"tp={tp} does not divide F={cfg.F}; choose tp among "
                         f"{[t for t in range(2, 9) if cfg.F % t == 0]}")
    sp = bool(sequence_parallel)
    f_kind, g_kind, V = _forward_kinds(cfg, tp, sp, b, T)
    regather = sp and any(c.kind == "all-gather" and c.phase == "backward" and c.overlappable
                          for c in tensor.comms(cfg, ParallelPlan(tp=tp, sequence_parallel=True),
                                                b, T))
    D, F, BT = cfg.D, cfg.F, b * T
    row_h = 1.0
    ax = new_axes(ax, (10, 1.4 + 0.75 * tp))
    canvas(ax, (-0.3, 15.2), (-tp * row_h - 0.9, 1.2),
           f"{cfg.name or 'model'} MLP over tp={tp}" + (" with sequence parallelism" if sp else ""),
           equal=False)
    mid = -tp * row_h / 2 + 0.1
    x_in = f"X[BT_tp, D]\n[{BT // tp}, {D}]\nper rank" if sp else f"X[BT, D]\n[{BT}, {D}]"
    box(ax, 0, mid - 0.6, 1.6, 1.2, x_in, fill=PALETTE["activations"], fontsize=7)
    f_text = (f"f: {f_kind}\n(bwd: reduce-scatter)\n+ X re-gathered" if sp and regather else
              f"f: {f_kind}\n(bwd: reduce-scatter)" if sp else "f: identity\n(bwd: all-reduce)")
    box(ax, 1.9, mid - 0.5, 1.75, 1.0, f_text, fill="white", fontsize=7, rounded=True)
    arrow(ax, (1.6, mid), (1.9, mid))
    g_text = f"g: {g_kind}\n(bwd: all-gather)" if sp else f"g: {g_kind}\n(bwd: identity)"
    box(ax, 11.35, mid - 0.5, 1.75, 1.0, g_text, fill="white", fontsize=7, rounded=True)
    x_out = f"Z[BT_tp, D]\n[{BT // tp}, {D}]\nper rank" if sp else f"Z[BT, D]\n[{BT}, {D}]"
    box(ax, 13.4, mid - 0.6, 1.6, 1.2, x_out, fill=PALETTE["activations"], fontsize=7)
    arrow(ax, (13.0, mid), (13.4, mid))
    for r in range(tp):
        y = -r * row_h - 0.45
        c = shard_colour(r)
        arrow(ax, (3.6, mid), (4.0, y + 0.35), lw=0.8)
        box(ax, 4.0, y, 1.7, 0.7, f"W1[:, F/{tp}]\n[{D}, {F // tp}]", fill=c, fontsize=6)
        box(ax, 6.0, y, 1.5, 0.7, f"Y{r} [{BT}, {F // tp}]", fill=PALETTE["free"], fontsize=6)
        box(ax, 7.8, y, 1.7, 0.7, f"W2[F/{tp}, :]\n[{F // tp}, {D}]", fill=c, fontsize=6)
        box(ax, 9.8, y, 1.3, 0.7, f"Z{r} partial", fill=PALETTE["free"], fontsize=6, ls="--")
        for x0, x1 in ((5.7, 6.0), (7.5, 7.8), (9.5, 9.8)):
            arrow(ax, (x0, y + 0.35), (x1, y + 0.35), lw=0.8, colour=PALETTE["other"])
        arrow(ax, (11.1, y + 0.35), (11.4, mid), lw=0.8)
        label(ax, 4.0, y + 0.8, f"rank {r}", fontsize=6, ha="left")
    label(ax, 4.85, 0.75, "column-split" + (" (W1 and the gate W3)" if cfg.glu else ""),
          fontsize=7)
    label(ax, 8.65, 0.75, "row-split", fontsize=7)
    label(ax, 7.5, -tp * row_h - 0.6, f"forward: {f_kind + ' + ' if f_kind else ''}{g_kind} "
          f"of V = {fmt(V)} per block (tensor.comms)"
          + ("; backward adds an all-gather of X for dW1" if regather else ""), fontsize=8)
    colls = ("an all-gather before it (f) and a reduce-scatter after it (g), and in the backward "
             "pass the all-gather of its input again for the weight gradient" if regather else
             f"an all-gather before it (f) and a reduce-scatter after it (g)" if sp else
             "nothing before it forward (f is the identity) and an all-reduce after it (g)")
    set_alt(ax, f"The MLP of {cfg.name or 'the model'} split over {tp} tensor-parallel ranks, "
            f"one row per rank: each multiplies the input by its column slice of W1 "
            f"({D} by {F // tp}) and its row slice of W2 ({F // tp} by {D}), giving a partial "
            f"output; the block needs {colls}, of {fmt(V)} each.")
    return ax


__all__ = ["tensor_parallel_mlp"]
