"""Part I mechanisms: a roofline and its ridge, compute and memory time overlapped or not, and a
TPU TensorCore with its vector registers.

Every number drawn comes from the library: the chip's peak and HBM bandwidth
(:mod:`scaling_lib.hardware`), intensities and times from :mod:`scaling_lib.roofline`, the
TensorCore's MXUs and VPU shape from ``hardware.get(name).internals``.

See: the chapters "Rooflines" and "TPUs".
"""

from __future__ import annotations

import matplotlib.patches as mpatches
import numpy as np

from ... import hardware
from ... import roofline as rl
from ...units import fmt_bytes, fmt_bytes_per_s, fmt_flops_per_s, fmt_seconds
from ._style import (LINE, PALETTE, TEXT, arrow, box, canvas, label, legend, new_axes, set_alt,
                     shard_colour)

#: The operations :func:`roofline_ridge` marks by default: (label, intensity as a function of dtype).
_DEFAULT_OPS = (
    ("residual add (x + y)", lambda dtype: rl.elementwise_intensity(2, 1, dtype)),
    ("matmul, 64 tokens", lambda dtype: float(rl.matmul_intensity(64, 8192, 8192, dtype))),
    ("matmul, 4096 tokens", lambda dtype: float(rl.matmul_intensity(4096, 8192, 8192, dtype))),
)


def _num(x) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def _pct(f) -> str:
    return f"{f:.0%}" if f >= 0.1 else f"{100 * f:.2g}%"


def roofline_ridge(name="h100", dtype="bf16", *, ops=None, ax=None):
    """One chip's roofline as a mechanism: the memory slope I * W, the compute roof C, the ridge
    I* = C / W where they meet, and a few operations placed by their intensity (the default: an
    elementwise add and two [B, 8192] x [8192, 8192] matmuls). ``ops`` is [(label, intensity)].
    Returns ax."""
    acc = hardware.get(name)
    C, W = acc.peak_flops_per_s(dtype), acc.hbm_bytes_per_s
    ridge = acc.critical_intensity(dtype)
    ops = [(s, f(dtype)) for s, f in _DEFAULT_OPS] if ops is None else \
        [(str(s), float(i)) for s, i in ops]
    ax = new_axes(ax, (7.5, 4.4))
    lo, hi = min([0.3] + [i / 3 for _, i in ops]), max([ridge * 30] + [i * 3 for _, i in ops])
    x = np.geomspace(lo, hi, 300)
    y = rl.attainable_flops_per_s(x, acc, dtype)
    ax.axvspan(lo, ridge, color=PALETTE["comm"], alpha=0.08, lw=0)
    ax.axvspan(ridge, hi, color=PALETTE["compute"], alpha=0.08, lw=0)
    ax.loglog(x, y, color=TEXT, lw=2)
    ax.loglog(x[x > ridge], x[x > ridge] * W, ls=":", color=LINE, lw=0.8)
    ax.axhline(C, ls=":", color=LINE, lw=0.8)
    ax.plot([ridge], [C], "o", color=TEXT, ms=7, zorder=4)
    ax.annotate(f"ridge I* = C / W = {ridge:.0f} FLOPs/byte", (ridge, C), xytext=(12, -22),
                textcoords="offset points", fontsize=8, color=TEXT,
                arrowprops={"arrowstyle": "-", "color": LINE})
    xs = lo * 3
    ax.annotate(f"slope: W = {fmt_bytes_per_s(W)}\nFLOP/s = I x W", (xs * 10, xs * 10 * W),
                xytext=(lo * 1.3, C / 5), fontsize=8, color=PALETTE["comm"], va="top",
                arrowprops={"arrowstyle": "-", "color": PALETTE["comm"], "lw": 0.6})
    ax.text(ridge * 1.5, C * 1.25, f"roof: C = {fmt_flops_per_s(C)}", fontsize=8,
            color=PALETTE["compute"])
    for k, (s, i) in enumerate(ops):
        got = float(rl.attainable_flops_per_s(i, acc, dtype))
        bound = "memory-bound" if i < ridge else "compute-bound"
        ax.plot([i], [got], "s", color=shard_colour(k + 1), ms=7, zorder=5,
                label=f"{s}: I = {_num(i)}, {bound}, {_pct(got / C)} of C")
        ax.vlines(i, y.min(), got, color=shard_colour(k + 1), ls="--", lw=0.8)
    ax.set_xlim(lo, hi)
    ax.set_ylim(y.min(), C * 3)
    ax.set_xlabel("arithmetic intensity I (FLOPs per byte of HBM traffic)")
    ax.set_ylabel(f"attainable {dtype} FLOP/s")
    ax.set_title(f"{acc.name}: memory-bound left of the ridge, compute-bound right of it",
                 fontsize=10, color=TEXT)
    leg = ax.legend(fontsize=7, loc="lower right", frameon=False)
    for t in leg.get_texts():
        t.set_color(TEXT)
    marks = "; ".join(f"{s} at {i:,.1f} FLOPs per byte, {'below' if i < ridge else 'above'} the "
                      "ridge" for s, i in ops)
    set_alt(ax, f"The {dtype} roofline of the {acc.name} on log axes: attainable FLOP/s rises "
            f"along the memory slope I x {fmt_bytes_per_s(W)} until the ridge at "
            f"{ridge:.0f} FLOPs per byte, then stays flat at the peak {fmt_flops_per_s(C)}. "
            f"Marked: {marks}.")
    return ax


def overlap_bounds(name="h100", shape=(4096, 4096, 4096), dtype="bf16", *, ax=None):
    """A matmul's compute time and HBM time on one chip, run one after the other (the upper
    bound, their sum) and overlapped (the lower bound, their maximum), from
    :func:`scaling_lib.roofline.time_bounds`. ``shape`` is (B, D, F). Returns ax."""
    acc = hardware.get(name)
    B, D, F = shape
    tm = float(rl.t_math(rl.matmul_flops(B, D, F), acc.peak_flops_per_s(dtype)))
    tc = float(rl.t_comms(rl.matmul_bytes(B, D, F, dtype), acc.hbm_bytes_per_s))
    lower, upper = (float(t) for t in rl.time_bounds(tm, tc))
    ax = new_axes(ax, (7.5, 2.8))
    canvas(ax, (-0.32 * upper, upper * 1.08), (-0.9, 3.3),
           f"[{B}, {D}] x [{D}, {F}] {dtype} matmul on an {acc.name}", equal=False)
    rows = (("no overlap:\nupper bound", 2.0, [(0.0, tc, "memory"), (tc, tm, "compute")]),
            ("perfect overlap:\nlower bound", 0.2, [(0.0, tm, "compute")]))
    colours = {"compute": PALETTE["compute"], "memory": PALETTE["comm"]}
    for title, y, bars in rows:
        label(ax, -0.17 * upper, y + 0.45, title, fontsize=8)
        for x0, w, kind in bars:
            box(ax, x0, y + (0.5 if len(bars) == 1 else 0.0), w, 0.42 if len(bars) == 1 else 0.9,
                f"{kind} {fmt_seconds(w)}", fill=colours[kind], fontsize=7)
        if len(bars) == 1:
            box(ax, 0.0, y, tc, 0.42, f"memory {fmt_seconds(tc)}", fill=colours["memory"],
                fontsize=7)
    arrow(ax, (0, 3.05), (upper, 3.05), colour=TEXT, both=True, lw=0.8,
          label=f"sum {fmt_seconds(upper)}")
    arrow(ax, (0, -0.35), (lower, -0.35), colour=TEXT, both=True, lw=0.8,
          label=f"max {fmt_seconds(lower)}")
    legend(ax, [("compute: FLOPs / C", colours["compute"]),
                ("memory: bytes / W", colours["memory"])], loc="lower right")
    set_alt(ax, f"Two timelines of a [{B}, {D}] x [{D}, {F}] {dtype} matmul on an {acc.name}: "
            f"run one after the other, memory traffic ({fmt_seconds(tc)}) then compute "
            f"({fmt_seconds(tm)}) take {fmt_seconds(upper)}; overlapped, the memory traffic "
            f"runs during the compute and the matmul takes {fmt_seconds(lower)}, the larger of "
            "the two.")
    return ax


def vpu_layout(name="tpu-v5e", *, ax=None):
    """A TPU TensorCore: HBM -> VMEM -> vector registers -> MXUs and VPU, with one vector register
    (sublanes x lanes of 32-bit words) drawn cell by cell and an elementwise add done by the VPU
    on a whole register at once. Returns ax."""
    from ...hardware.internals import TPUInternals

    acc = hardware.get(name)
    t = acc.internals
    if not isinstance(t, TPUInternals):
        known = [n for n in hardware.names() if isinstance(hardware.get(n).internals,
                                                            TPUInternals)]
        raise ValueError(f"{acc.name} has no TPUInternals on record; choose one of {known}")
    S, L = t.vpu_sublanes, t.vpu_lanes
    ax = new_axes(ax, (10, 4.6))
    canvas(ax, (-0.3, 20.3), (-0.9, 9.0), f"one {acc.name} TensorCore ({t.tensorcores} per chip)",
           equal=False)
    vmem = fmt_bytes(t.vmem_bytes, binary=True) if np.isfinite(t.vmem_bytes) else "size unpublished"
    box(ax, 0, 0.2, 2.6, 7.6, f"HBM\n{fmt_bytes(acc.hbm_bytes)}\n{fmt_bytes_per_s(acc.hbm_bytes_per_s)}",
        fill=PALETTE["other"], fontsize=8)
    box(ax, 3.6, 0.2, 2.6, 7.6, f"VMEM\n{vmem}", fill=PALETTE["accent"], fontsize=8)
    arrow(ax, (2.6, 4.0), (3.6, 4.0), both=True, colour=TEXT)
    box(ax, 7.2, 0.2, 3.0, 7.6, "", fill="white")
    label(ax, 8.7, 7.4, "vector registers", fontsize=8)
    for r in range(6):
        box(ax, 7.5, 6.4 - r * 1.0, 2.4, 0.7, f"VREG {r}", fill=shard_colour(r), fontsize=7)
    arrow(ax, (6.2, 4.0), (7.2, 4.0), both=True, colour=TEXT)
    box(ax, 11.2, 4.6, 3.6, 3.2, f"{t.mxus_per_core} MXUs\n{t.mxu_size} x {t.mxu_size}\n"
        "systolic arrays\n(matmuls)", fill=PALETTE["compute"], fontsize=8)
    box(ax, 11.2, 0.2, 3.6, 3.6, f"VPU\n{S} x {L} lanes\n(elementwise,\nreductions)",
        fill=PALETTE["forward"], fontsize=8)
    arrow(ax, (10.2, 6.2), (11.2, 6.2), both=True, colour=TEXT)
    arrow(ax, (10.2, 2.0), (11.2, 2.0), both=True, colour=TEXT)
    # one VREG, cell by cell: S sublanes (rows) x L lanes (columns), 32-bit each
    x0, y0, w, h = 15.4, 2.4, 4.7, 4.2
    ax.add_patch(mpatches.Rectangle(
        (x0, y0), w, h, facecolor=shard_colour(0), edgecolor=LINE, lw=0.8, alpha=0.35))
    for r in range(1, S):
        ax.plot([x0, x0 + w], [y0 + h * r / S] * 2, color=LINE, lw=0.3)
    for c in range(1, L):
        ax.plot([x0 + w * c / L] * 2, [y0, y0 + h], color=LINE, lw=0.15)
    label(ax, x0 + w / 2, y0 + h + 0.35, f"one VREG, enlarged: {S} sublanes x {L} lanes", fontsize=8)
    label(ax, x0 + w / 2, y0 - 0.35, f"{S * L:,} 32-bit words = {fmt_bytes(S * L * 4, binary=True)}",
          fontsize=7)
    label(ax, x0 + w / 2, 0.9, f"VREG 2 = VREG 0 + VREG 1:\none VPU instruction, {S * L:,} adds",
          fontsize=7)
    set_alt(ax, f"One {acc.name} TensorCore drawn as a pipeline: HBM ({fmt_bytes(acc.hbm_bytes)} at "
            f"{fmt_bytes_per_s(acc.hbm_bytes_per_s)}) to VMEM ({vmem}) to vector registers, "
            f"which feed {t.mxus_per_core} MXUs of {t.mxu_size} x {t.mxu_size} for matmuls and the "
            f"VPU for elementwise work; one vector register is enlarged as a grid of {S} sublanes "
            f"by {L} lanes, {S * L} 32-bit words that one VPU instruction processes together.")
    return ax


__all__ = ["roofline_ridge", "overlap_bounds", "vpu_layout"]
