"""The roofline plot and its explorer (Chapter 1).

``plot_roofline`` draws min(C, I·W) for several accelerators on log axes and, optionally, where a
matmul [B, D] x [D, F] lands; ``explorer()`` wraps it in ipywidgets controls (accelerator, dtype,
shape). matplotlib and ipywidgets are imported only when these are called.
"""

from __future__ import annotations

import numpy as np

from ... import hardware
from ...roofline import attainable_flops_per_s, matmul_flops, matmul_intensity, matmul_time
from ...units import fmt_flops_per_s, fmt_seconds

DEFAULT_ACCELERATORS = ("a100-80gb", "h100", "b200", "tpu-v5e", "tpu-v5p")


def plot_roofline(ax, accelerators=DEFAULT_ACCELERATORS, dtype="bf16", *, matmul=None,
                  intensity_range=(1.0, 1e4), highlight=None):
    """Draw the roofline of each accelerator on ``ax``; mark a matmul ``(B, D, F)`` if given.

    The matmul is placed on the ``highlight`` accelerator's roof (default: the first one).
    Accelerators without a peak for ``dtype`` are skipped. Returns the list of names drawn.
    """
    intensity = np.geomspace(*intensity_range, 400)
    drawn = []
    for name in accelerators:
        acc = hardware.get(name)
        if not acc.supports(dtype):
            continue
        roof = attainable_flops_per_s(intensity, acc, dtype)
        lw = 2.5 if name == (highlight or accelerators[0]) else 1.2
        (line,) = ax.loglog(intensity, roof, lw=lw, label=f"{acc.name}")
        ridge = acc.critical_intensity(dtype)
        ax.plot([ridge], [acc.peak_flops_per_s(dtype)], "o", color=line.get_color(), ms=4)
        drawn.append(acc.name)
    if not drawn:
        raise ValueError(f"none of {list(accelerators)} has a peak for dtype={dtype!r}")
    if matmul is not None:
        acc = hardware.get(highlight or drawn[0])
        B, D, F = matmul
        i = matmul_intensity(B, D, F, dtype)
        achieved = attainable_flops_per_s(i, acc, dtype)
        bound = "compute" if i >= acc.critical_intensity(dtype) else "memory"
        ax.plot([i], [achieved], "k*", ms=14, zorder=5,
                label=f"[{B},{D}]x[{D},{F}] on {acc.name}: {bound}-bound")
    ax.set_xlabel("arithmetic intensity (FLOPs / byte of HBM traffic)")
    ax.set_ylabel(f"attainable {dtype} FLOP/s")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return drawn


def explorer(accelerators=DEFAULT_ACCELERATORS):
    """Pick accelerator, dtype and matmul shape; see where the op lands on the roofline."""
    import ipywidgets as w
    import matplotlib.pyplot as plt

    acc_w = w.Dropdown(options=list(hardware.names()), value=accelerators[1], description="chip")
    dtype_w = w.Dropdown(options=["bf16", "fp8", "int8", "fp32"], value="bf16",
                         description="dtype")
    sliders = {k: w.IntText(value=v, description=k, layout=w.Layout(width="170px"))
               for k, v in
               (("B", 256), ("D", 8192), ("F", 28672))}
    out = w.Output()

    def redraw(*_):
        with out:
            out.clear_output(wait=True)
            acc = hardware.get(acc_w.value)
            dtype = dtype_w.value
            if not acc.supports(dtype):
                print(f"{acc.name} has no {dtype} peak; choose one of {', '.join(acc.dtypes)}")
                return
            B, D, F = (max(1, s.value) for s in sliders.values())
            names = tuple(dict.fromkeys((acc.name, *accelerators)))
            fig, ax = plt.subplots(figsize=(7, 4.5))
            plot_roofline(ax, names, dtype, matmul=(B, D, F), highlight=acc.name)
            t = matmul_time(B, D, F, acc, dtype)
            ax.set_title(f"roofline time {fmt_seconds(t)}, "
                         f"{fmt_flops_per_s(matmul_flops(B, D, F) / t)} attained")
            plt.show()

    for ctl in (acc_w, dtype_w, *sliders.values()):
        ctl.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HBox([acc_w, dtype_w]), w.HBox(list(sliders.values())), out])
