"""Figures and explorers for the GPU and TPU chapters (Chapters 2 and 3).

Every figure function draws on a matplotlib ``ax`` it is given and takes its numbers from
``scaling_lib.hardware``; the explorers wrap them in ipywidgets controls. matplotlib and
ipywidgets are imported only when an explorer is called.
"""

from __future__ import annotations

import numpy as np

from ... import hardware
from ...units import fmt_bytes, fmt_bytes_per_s


def growth_since_first(names=hardware.GPU_TIMELINE):
    """Years and growth factors (peak in the training dtype, HBM bandwidth, HBM capacity) of each
    chip relative to the first one: a dict of numpy arrays plus the chips' names and dtypes."""
    accs = [hardware.get(n) for n in names]
    dtypes = [hardware.training_dtype(a) for a in accs]
    peak = np.array([a.peak_flops_per_s(d) for a, d in zip(accs, dtypes)])
    bw = np.array([a.hbm_bytes_per_s for a in accs])
    cap = np.array([a.hbm_bytes for a in accs])
    return {"names": [a.name for a in accs], "dtypes": dtypes,
            "years": np.array([a.year for a in accs]),
            "peak": peak / peak[0], "bandwidth": bw / bw[0], "capacity": cap / cap[0]}


def plot_timeline(ax, names=hardware.GPU_TIMELINE):
    """Growth of peak FLOP/s, memory bandwidth and memory capacity since the first chip (log y)."""
    g = growth_since_first(names)
    for key, label, style in (("peak", "peak FLOP/s (training dtype)", "o-"),
                              ("bandwidth", "memory bandwidth", "s-"),
                              ("capacity", "memory capacity", "^-")):
        ax.semilogy(g["years"], g[key], style, label=label)
    for x, y, n, d in zip(g["years"], g["peak"], g["names"], g["dtypes"]):
        ax.annotate(f"{n} ({d})", (x, y), textcoords="offset points", xytext=(-10, 8), fontsize=8)
    ax.set_xlabel("year")
    ax.set_ylabel(f"x the {g['names'][0]}")
    ax.set_ylim(0.7, 3 * max(g["peak"].max(), g["bandwidth"].max(), g["capacity"].max()))
    ax.set_xlim(g["years"].min() - 1, g["years"].max() + 1)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return g


def plot_memory_hierarchy(ax, name="h100"):
    """Each memory level of a GPU as a point: total capacity (x) against bandwidth (y), log-log."""
    acc = hardware.get(name)
    if acc.internals is None or not hasattr(acc.internals, "memory"):
        known = [n for n in hardware.names() if hasattr(hardware.get(n).internals, "memory")]
        raise ValueError(f"{acc.name} has no memory hierarchy on record; choose one of {known}")
    levels = [m for m in acc.internals.memory if np.isfinite(m.bytes_per_s)]
    x = [m.total_bytes for m in levels]
    y = [m.bytes_per_s for m in levels]
    ax.loglog(x, y, "o-")
    for m in levels:
        per = f"{fmt_bytes(m.capacity_bytes, binary=True)} x {m.copies}" if m.copies > 1 else \
            fmt_bytes(m.capacity_bytes, binary=m.name != "HBM")
        ax.annotate(f"{m.name}\n{per}\n{fmt_bytes_per_s(m.bytes_per_s)}",
                    (m.total_bytes, m.bytes_per_s), textcoords="offset points", xytext=(6, 0),
                    fontsize=8)
    ax.set_xlabel("capacity, whole chip (bytes)")
    ax.set_ylabel("bandwidth, whole chip (bytes/s)")
    ax.set_xlim(min(x) / 3, max(x) * 30)
    ax.set_ylim(min(y) / 2, max(y) * 4)
    ax.grid(True, which="both", alpha=0.3)
    ax.set_title(f"{acc.name}: memory hierarchy")
    return levels


def plot_occupancy(ax, block_sizes=(128, 256, 512), smem_bytes_per_block=0, limits="Hopper"):
    """Occupancy against registers per thread, one line per block size (``hardware.internals``).

    A line stops where one block no longer fits on an SM (the launch would fail). Returns
    {block size: array of occupancy fractions, NaN where no block fits} over registers 16..255.
    """
    from ...hardware.internals import SM_LIMITS, occupancy

    lim = SM_LIMITS[limits] if isinstance(limits, str) else limits
    regs = np.arange(16, lim.max_registers_per_thread + 1)
    out = {}
    for t in block_sizes:
        occ = np.array([occupancy(int(r), smem_bytes_per_block, t, lim).fraction for r in regs])
        occ[occ == 0] = np.nan  # no block fits: the kernel cannot launch
        ax.step(regs, occ, where="post", label=f"{t} threads per block")
        out[t] = occ
    ax.set_xlabel("registers per thread")
    ax.set_ylabel("occupancy (resident warps / max)")
    ax.set_ylim(0, 1.05)
    ax.set_xlim(regs[0], regs[-1])
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"{lim.name}: warps an SM can keep, no shared memory" if not smem_bytes_per_block
                 else f"{lim.name}: {fmt_bytes(smem_bytes_per_block, binary=True)} SMEM per block")
    return out


def plot_torus(ax, shape, wrap=None, *, title=None):
    """Draw a 2D slice of chips as a grid with its ICI links (axis 0 vertical, axis 1 horizontal).

    A wraparound link is drawn as two red stubs leaving the row's (or column's) two end chips: the
    two stubs are one link, joining the ends into a ring. Returns the most hops between two chips.
    """
    shape = tuple(shape)
    if len(shape) != 2:
        raise ValueError(f"plot_torus draws 2D slices; got shape={shape}")
    wrap = (False, False) if wrap is None else tuple(wrap)
    rows, cols = shape
    for i in range(rows):
        for j in range(cols):
            if j + 1 < cols:
                ax.plot([j, j + 1], [i, i], color="0.5", lw=1)
            if i + 1 < rows:
                ax.plot([j, j], [i, i + 1], color="0.5", lw=1)
    stub = 0.45
    if wrap[1] and cols > 2:
        for i in range(rows):
            ax.plot([-stub, 0], [i, i], color="C3", lw=1.5)
            ax.plot([cols - 1, cols - 1 + stub], [i, i], color="C3", lw=1.5)
    if wrap[0] and rows > 2:
        for j in range(cols):
            ax.plot([j, j], [-stub, 0], color="C3", lw=1.5)
            ax.plot([j, j], [rows - 1, rows - 1 + stub], color="C3", lw=1.5)
    gy, gx = np.meshgrid(np.arange(rows), np.arange(cols), indexing="ij")
    ax.plot(gx.ravel(), gy.ravel(), "s", color="C0", ms=6)
    hops = hardware.ici_max_hops(shape, wrap)
    ax.set_title(title or f"{rows}x{cols}, wraparound {wrap}: at most {hops} hops", fontsize=9)
    ax.set_xlim(-1, max(cols, 2))
    ax.set_ylim(-1, max(rows, 2))
    ax.set_aspect("equal")
    ax.axis("off")
    return hops


def gpu_explorer(names=None):
    """Pick a GPU; see its memory hierarchy and how many FLOPs per byte each level needs."""
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from IPython.display import Markdown, display

    from ..nbtools import table

    names = names or [n for n in hardware.names() if hasattr(hardware.get(n).internals, "memory")]
    chip = w.Dropdown(options=names, value="h100" if "h100" in names else names[0], description="GPU")
    out = w.Output()

    def draw(*_):
        out.clear_output(wait=True)
        with out:
            acc = hardware.get(chip.value)
            fig, ax = plt.subplots(figsize=(7, 4))
            plot_memory_hierarchy(ax, acc.name)
            plt.show()
            peak = acc.peak_flops_per_s(hardware.training_dtype(acc))
            display(Markdown(table([
                {"level": m.name, "bandwidth": fmt_bytes_per_s(m.bytes_per_s),
                 "FLOPs per byte to stay compute-bound": round(peak / m.bytes_per_s, 1)}
                for m in acc.internals.memory if np.isfinite(m.bytes_per_s)])))

    chip.observe(draw, "value")
    draw()
    return w.VBox([chip, out])


def torus_explorer(accelerator="tpu-v5e"):
    """Pick a 2D slice shape; see its links, which axes wrap around, and the worst-case hops."""
    import ipywidgets as w
    import matplotlib.pyplot as plt

    sizes = [1, 2, 4, 8, 16]
    x = w.SelectionSlider(options=sizes, value=4, description="X")
    y = w.SelectionSlider(options=sizes, value=16, description="Y")
    out = w.Output()

    def draw(*_):
        out.clear_output(wait=True)
        with out:
            shape = (x.value, y.value)
            wrap = hardware.wraparound(accelerator, shape)
            fig, ax = plt.subplots(figsize=(6, 6))
            plot_torus(ax, shape, wrap, title=f"{accelerator} {shape[0]}x{shape[1]}: "
                       f"wraparound {wrap}, at most {hardware.ici_max_hops(shape, wrap)} hops")
            plt.show()

    x.observe(draw, "value")
    y.observe(draw, "value")
    draw()
    return w.VBox([w.HBox([x, y]), out])
