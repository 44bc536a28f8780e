"""The collective-cost explorer (Chapter "Networks and collectives").

``plot_collective_costs`` draws time against array size on log axes for several systems at once,
one curve per system, with the size where each leaves the latency-bound regime marked;
``explorer()`` wraps it in ipywidgets controls (collective, topology, devices, array size).
All numbers come from ``scaling_lib.collectives``; matplotlib and ipywidgets are imported only
when these are called.
"""

from __future__ import annotations

import numpy as np

from ... import collectives as C
from ... import hardware
from ...units import fmt_bytes, fmt_seconds

DEFAULT_SYSTEMS = ("h100", "a100-80gb", "tpu-v5e", "tpu-v5p")
COLLECTIVES = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all")
TOPOLOGY_CHOICES = C.TOPOLOGIES + ("hierarchical",)


def system_cluster(accelerator, n, topology):
    """The cluster a curve is drawn for: the accelerator's default cluster of ``n`` devices
    (``topology="hierarchical"``: nodes plus network), or all ``n`` wired as ``topology``."""
    if topology == "hierarchical":
        return hardware.cluster(accelerator, int(n))
    return C.flat_cluster(accelerator, n, topology)


def collective_curve(collective, accelerator, n, topology, sizes):
    """(times for each size in ``sizes``, latency-bound size V*) on one system."""
    c = system_cluster(accelerator, n, topology)
    t = np.asarray(C.hierarchical_time(collective, np.asarray(sizes, float), c).total)
    return t, C.cluster_latency_bound_bytes(collective, c)


def plot_collective_costs(ax, collective="all-reduce", topology="hierarchical", n=64,
                          systems=DEFAULT_SYSTEMS, *, nbytes=None, size_range=(1e3, 1e11)):
    """Draw T(V) for each system on ``ax``; dots mark V*, where latency and bandwidth terms are
    equal (left of it the collective is latency-bound). ``nbytes`` adds a vertical marker.

    Systems whose cluster cannot hold ``n`` devices that way are skipped. Returns
    {system: (V*, time at nbytes or None)} for the curves drawn.
    """
    sizes = np.geomspace(*size_range, 300)
    drawn = {}
    for name in systems:
        try:
            t, v_star = collective_curve(collective, name, n, topology, sizes)
        except ValueError:
            continue
        (line,) = ax.loglog(sizes, t, lw=1.8, label=hardware.get(name).name)
        if np.isfinite(v_star) and size_range[0] <= v_star <= size_range[1]:
            t_star = collective_curve(collective, name, n, topology, [v_star])[0][0]
            ax.plot([v_star], [t_star], "o", color=line.get_color(), ms=6)
        at = None
        if nbytes is not None:
            at = float(collective_curve(collective, name, n, topology, [nbytes])[0][0])
        drawn[hardware.get(name).name] = (v_star, at)
    if not drawn:
        raise ValueError(f"no system in {list(systems)} can run {n} devices as {topology!r}")
    if nbytes is not None:
        ax.axvline(nbytes, color="k", lw=0.8, ls=":")
    ax.text(0.02, 0.95, "latency-bound\n(left of each dot)", transform=ax.transAxes,
            fontsize=8, va="top")
    ax.text(0.98, 0.05, "bandwidth-bound\n(right of each dot)", transform=ax.transAxes,
            fontsize=8, ha="right")
    ax.set_xlabel("array size V (bytes)")
    ax.set_ylabel("time (s)")
    ax.set_title(f"{collective} on {n} devices, {topology}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center")
    return drawn


FLAT_VS_HIERARCHICAL = (
    ("one ring through one NIC per node (not how NCCL runs)", "one-nic"),
    ("flat ring, one per NIC (multi-rail)", "multirail"),
    ("hierarchical, phases in sequence", "hierarchical"),
    ("hierarchical, phases pipelined", "pipelined"),
)


def flat_vs_hierarchical_times(collective, nbytes, accelerator="h100", n_devices=(16, 16384)):
    """{schedule: times} over the powers of two in ``n_devices`` (whole nodes), and those counts.

    The four schedules of :data:`FLAT_VS_HIERARCHICAL`, from ``collectives.multirail_ring_time``
    (rails=1 and the default one per GPU), ``hierarchical_time`` and
    ``hierarchical_pipelined_time`` on ``hardware.cluster(accelerator, n)``.
    """
    lo, hi = n_devices
    node = hardware.cluster(accelerator, int(hi)).devices_per_node
    ns = [2**e for e in range(int(np.log2(lo)), int(np.log2(hi)) + 1) if 2**e >= 2 * node]
    fns = {
        "one-nic": lambda c: C.multirail_ring_time(collective, nbytes, c, rails=1),
        "multirail": lambda c: C.multirail_ring_time(collective, nbytes, c),
        "hierarchical": lambda c: C.hierarchical_time(collective, nbytes, c).total,
        "pipelined": lambda c: C.hierarchical_pipelined_time(collective, nbytes, c),
    }
    clusters = [hardware.cluster(accelerator, n) for n in ns]
    return {key: np.array([fns[key](c) for c in clusters]) for _, key in FLAT_VS_HIERARCHICAL}, ns


def plot_flat_vs_hierarchical(ax, collective="all-reduce", nbytes=16e9, accelerator="h100",
                              n_devices=(16, 16384)):
    """Time of one collective against the number of GPUs for the four schedules (log axes).

    Returns what :func:`flat_vs_hierarchical_times` computed, so a caller can quote it.
    """
    times, ns = flat_vs_hierarchical_times(collective, nbytes, accelerator, n_devices)
    styles = {"one-nic": dict(ls="--", color="0.5"), "multirail": dict(color="C0"),
              "hierarchical": dict(color="C1"), "pipelined": dict(color="C1", ls=":")}
    for label, key in FLAT_VS_HIERARCHICAL:
        ax.loglog(ns, times[key], marker="o", ms=3, lw=1.6, label=label, **styles[key])
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns[::2], [f"{n:,}" for n in ns[::2]])
    ax.set_xlabel(f"{hardware.get(accelerator).name} GPUs (nodes of "
                  f"{hardware.cluster(accelerator, ns[-1]).devices_per_node}, one NIC per GPU)")
    ax.set_ylabel("time (s)")
    ax.set_title(f"{collective} of {fmt_bytes(nbytes)}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    return times, ns


def explorer(systems=DEFAULT_SYSTEMS):
    """Pick collective, topology, devices and array size; compare systems on log axes."""
    import ipywidgets as w
    import matplotlib.pyplot as plt

    kind_w = w.Dropdown(options=list(COLLECTIVES), value="all-reduce", description="collective")
    topo_w = w.Dropdown(options=list(TOPOLOGY_CHOICES), value="hierarchical",
                        description="topology")
    n_w = w.Dropdown(options=[8, 16, 32, 64, 128, 256, 1024, 4096], value=64,
                     description="devices")
    size_w = w.FloatLogSlider(value=1e8, base=10, min=3, max=11, step=0.25,
                              description="V (bytes)")
    out = w.Output()

    def redraw(*_):
        with out:
            out.clear_output(wait=True)
            fig, ax = plt.subplots(figsize=(7.5, 4.5))
            try:
                drawn = plot_collective_costs(ax, kind_w.value, topo_w.value, n_w.value, systems,
                                              nbytes=size_w.value)
            except ValueError as exc:
                plt.close(fig)
                print(exc)
                return
            plt.show()
            for name, (v_star, t) in drawn.items():
                print(f"{name:>10}: {fmt_seconds(t)} for {fmt_bytes(size_w.value)}; "
                      f"latency-bound below {fmt_bytes(v_star)}")

    for ctl in (kind_w, topo_w, n_w, size_w):
        ctl.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HBox([kind_w, topo_w]), w.HBox([n_w, size_w]), out])
