"""Inside a chip: a GPU's SMs and tensor cores, a TPU's systolic array, the memory hierarchy.

:func:`gpu_sm` draws the chip's grid of SMs and one SM enlarged (tensor cores, FP32 cores,
registers, L1/SMEM), :func:`systolic_array` an MXU step by step (weights stay, inputs flow right,
partial sums flow down), :func:`memory_hierarchy` the levels from registers to HBM with their
capacities and bandwidths. Every number is from :mod:`scaling_lib.hardware` (``internals``).

See: the chapters "GPUs" and "TPUs".
"""

from __future__ import annotations

import math

from ... import hardware
from ...units import check_int, fmt_bytes, fmt_bytes_per_s, fmt_flops_per_s
from ._style import (LINE, PALETTE, TEXT, arrow, box, canvas, label, new_axes, new_grid,
                     set_alt, shard_colour)


def _internals(name, cls):
    acc = hardware.get(name)
    if not isinstance(acc.internals, cls):
        known = [n for n in hardware.names() if isinstance(hardware.get(n).internals, cls)]
        raise ValueError(f"{acc.name} has no {cls.__name__} on record; choose one of {known}")
    return acc, acc.internals


def gpu_sm(name="h100", *, ax=None):
    """The SMs of a GPU as a grid (enabled ones filled) and one SM enlarged. Returns ax."""
    from ...hardware.internals import GPUInternals

    acc, g = _internals(name, GPUInternals)
    ax = new_axes(ax, (9, 4.2))
    peak = (f"{fmt_flops_per_s(g.tensor_flops_per_s)} dense 16-bit" if g.tensor_flops_per_s else
            f"{fmt_flops_per_s(g.fp32_flops_per_s)} FP32")
    canvas(ax, (-0.2, 18.2), (-0.6, 8.6), f"{acc.name}: {g.n_sm} SMs ({g.architecture}), {peak}")
    cols = math.ceil(math.sqrt(g.n_sm_full * 1.3))
    cell = min(8.0 / cols, 8.0 / math.ceil(g.n_sm_full / cols))
    for i in range(g.n_sm_full):
        r, c = divmod(i, cols)
        on = i < g.n_sm
        box(ax, c * cell, 8.0 - (r + 1) * cell, cell * 0.85, cell * 0.85, "",
            fill=PALETTE["compute"] if on else PALETTE["idle"], edge="white", lw=0.3)
    label(ax, 4.0, -0.35, f"{g.n_sm} of {g.n_sm_full} SMs enabled (grey: disabled)", fontsize=7)
    arrow(ax, (0.85 * cell, 8.0 - 0.5 * cell), (9.6, 7.5), colour=LINE, lw=0.8, rad=-0.2)
    box(ax, 9.6, 0.0, 8.4, 8.0, "", fill="white", rounded=True)
    label(ax, 13.8, 7.6, "one SM", fontsize=9)
    per = g.tensor_flops_per_clock_per_sm / max(g.tensor_cores_per_sm, 1)
    for t in range(g.tensor_cores_per_sm):
        box(ax, 10.0 + t * 2.0, 5.4, 1.8, 1.6, f"tensor\ncore\n{per:g} FLOP\n/clock",
            fill=PALETTE["compute"], fontsize=6)
    box(ax, 10.0, 3.9, 7.6, 1.2, f"{g.fp32_cores_per_sm} FP32 cores "
        f"({g.fp32_flops_per_clock_per_sm:g} FLOP/clock)", fill=PALETTE["accent"], fontsize=7)
    regs, l1 = g.level("registers"), g.level("L1/SMEM")
    box(ax, 10.0, 2.2, 7.6, 1.4, f"registers {fmt_bytes(regs.capacity_bytes, binary=True)}",
        fill=PALETTE["optimizer"], fontsize=7)
    box(ax, 10.0, 0.4, 7.6, 1.5, f"L1 / shared memory {fmt_bytes(l1.capacity_bytes, binary=True)}",
        fill=PALETTE["grads"], fontsize=7)
    if not g.tensor_cores_per_sm:
        label(ax, 13.8, 6.2, f"no tensor cores ({g.architecture})", fontsize=8)
    tensor = (f"{g.tensor_cores_per_sm} tensor cores doing {g.tensor_flops_per_clock_per_sm:g} "
              "16-bit FLOPs per clock together" if g.tensor_cores_per_sm else "no tensor cores")
    set_alt(ax, f"The {acc.name} GPU drawn as a grid of {g.n_sm_full} streaming multiprocessors, "
            f"{g.n_sm} enabled, and one SM enlarged: {tensor}, "
            f"{g.fp32_cores_per_sm} FP32 cores, {fmt_bytes(regs.capacity_bytes, binary=True)} of "
            f"registers and {fmt_bytes(l1.capacity_bytes, binary=True)} of L1 and shared memory.")
    return ax


def _systolic_step(ax, size, t, n_rows, mxu):
    canvas(ax, (-1.6, size + 0.4), (-1.4, size + 0.6), f"clock {t}")
    for k in range(size):
        for j in range(size):
            r = t - k - j  # the input row cell (k, j) works on at clock t
            busy = 0 <= r < n_rows
            box(ax, j, size - 1 - k, 0.9, 0.9, f"x{r}·w{k}{j}" if busy else f"w{k}{j}",
                fill=shard_colour(r) if busy else PALETTE["free"], fontsize=5)
        r_in = t - k  # the input entering row k from the left
        if 0 <= r_in < n_rows:
            label(ax, -0.5, size - 0.55 - k, f"x{r_in}[{k}]→", fontsize=5, ha="right")
    for j in range(size):
        r_out = t - (size - 1) - j
        if 0 <= r_out < n_rows:
            label(ax, j + 0.45, -0.5, f"y{r_out}[{j}]↓", fontsize=5)


def systolic_array(name="tpu-v5e", size=4, clocks=(0, 1, 3, 5), n_rows=4):
    """An MXU of ``name`` drawn as a ``size`` x ``size`` weight-stationary systolic array, one
    panel per clock in ``clocks``: input rows x_r enter from the left one clock apart per row
    of cells, partial sums flow down, output y_r leaves the bottom. Returns the list of Axes."""
    from ...hardware.internals import TPUInternals

    acc, tpu = _internals(name, TPUInternals)
    size = int(check_int("size", size, minimum=2, maximum=8))
    n_rows = int(check_int("n_rows", n_rows, minimum=1, maximum=8))
    axes = new_grid(1, len(clocks), (2.4 * len(clocks), 3.0))
    for ax, t in zip(axes, clocks):
        _systolic_step(ax, size, int(t), n_rows, tpu.mxu_size)
    fig = axes[0].figure
    fig.suptitle(f"{acc.name}: {tpu.n_mxus} MXUs of {tpu.mxu_size}x{tpu.mxu_size} cells "
                 f"({tpu.flops_per_clock:,.0f} FLOP/clock), one drawn as {size}x{size}",
                 color=TEXT, fontsize=10)
    set_alt(axes[0], f"A {acc.name} MXU, a {tpu.mxu_size} by {tpu.mxu_size} systolic array, "
            f"drawn as {size} by {size} cells at clocks {', '.join(str(c) for c in clocks)}: "
            f"each cell holds one weight; rows of the input enter from the left one clock apart, "
            f"each cell multiplies and adds to the partial sum flowing down, and output rows "
            f"leave the bottom; while rows keep coming, every cell is busy from clock "
            f"{2 * (size - 1)} on.")
    for ax in axes[1:]:
        set_alt(ax, "")
    return axes


def memory_hierarchy(name="h100", *, ax=None):
    """The memory levels of ``name`` as a pyramid, fastest on top: capacity (all copies) and
    bandwidth (whole chip) of each. Returns ax."""
    acc = hardware.get(name)
    inside = acc.internals
    if hasattr(inside, "memory"):
        levels = [(m.name, m.capacity_bytes, m.copies, m.bytes_per_s) for m in inside.memory]
    elif hasattr(inside, "vmem_bytes"):
        levels = [("VMEM", inside.vmem_bytes, inside.tensorcores, inside.vmem_bytes_per_s),
                  ("HBM", acc.hbm_bytes, 1, acc.hbm_bytes_per_s)]
    else:
        raise ValueError(f"{acc.name} has no memory hierarchy on record; choose a GPU or TPU "
                         "with internals, e.g. h100 or tpu-v5e")
    n = len(levels)
    ax = new_axes(ax, (7, 0.8 + 0.8 * n))
    canvas(ax, (-5.2, 5.2), (-0.2, n + 0.5), f"{acc.name}: memory hierarchy", equal=False)
    rows = []
    for i, (lvl, cap, copies, bw) in enumerate(levels):
        half = 1.2 + 3.6 * i / max(n - 1, 1)
        y = n - 1 - i
        size = "size not published" if math.isnan(cap) else fmt_bytes(cap, binary=lvl != "HBM")
        size += f" x {copies}" if copies > 1 and not math.isnan(cap) else ""
        speed = "bandwidth not published" if math.isnan(bw) else fmt_bytes_per_s(bw)
        box(ax, -half, y + 0.08, 2 * half, 0.84, f"{lvl}: {size}\n{speed}",
            fill=shard_colour(i), fontsize=7)
        rows.append(f"{lvl} {size} at {speed}")
    label(ax, -5.1, n - 0.5, "faster,\nsmaller", fontsize=7, ha="left")
    label(ax, -5.1, 0.5, "slower,\nlarger", fontsize=7, ha="left")
    set_alt(ax, f"The memory hierarchy of the {acc.name} as a pyramid, fastest and smallest on "
            f"top: " + "; ".join(rows) + ".")
    return ax


__all__ = ["gpu_sm", "systolic_array", "memory_hierarchy"]
