"""Network topologies: an NVSwitch node, a rail-optimised fat tree, a torus with wraparound.

Each draws a :class:`scaling_lib.hardware.Cluster` (or a name the library turns into one): the
devices per node, the link names and one-way bandwidths per device, and for tori the shape, the
axes that wrap around and the most hops between two chips
(:func:`scaling_lib.hardware.ici_max_hops`).

See: the chapters "Networks and collectives" and "TPUs".
"""

from __future__ import annotations

from ... import hardware
from ...units import check_int, fmt_bytes_per_s
from ._style import LINE, PALETTE, arrow, box, canvas, label, new_axes, set_alt, shard_colour


def _cluster(c, n):
    return hardware.cluster(c, n) if isinstance(c, str) else c


def nvswitch_node(cluster="h100", *, ax=None):
    """One node: its GPUs all wired to the NVSwitch fabric (every pair one hop), and one NIC per
    GPU out to the network. Returns ax."""
    c = _cluster(cluster, 8)
    m = c.devices_per_node
    if c.topology != "switch" or m > 16:
        raise ValueError(f"{c.name} is a {c.topology} of {m} devices per node; nvswitch_node "
                         "draws switched nodes of at most 16 GPUs (e.g. 'h100')")
    intra, inter = c.intra_node, c.inter_node
    ax = new_axes(ax, (1.5 + 1.0 * m, 3.6))
    canvas(ax, (-0.4, m * 1.2 + 0.2), (-0.6, 4.4), f"one {c.accelerator.name} node: {m} GPUs "
           f"on {intra.name}", equal=False)
    box(ax, 0, 2.0, m * 1.2 - 0.2, 0.6, f"{intra.name} switch fabric (any GPU to any GPU, "
        f"one hop)", fill=PALETTE["accent"], fontsize=8)
    for g in range(m):
        x = g * 1.2
        box(ax, x, 3.3, 1.0, 0.7, f"GPU {g}", fill=PALETTE["compute"], fontsize=7)
        arrow(ax, (x + 0.5, 3.3), (x + 0.5, 2.6), both=True, lw=1.2)
        box(ax, x + 0.15, 0.9, 0.7, 0.5, "NIC", fill="white", fontsize=6)
        arrow(ax, (x + 0.5, 3.3), (x + 0.5, 1.4), lw=0.6, colour=LINE, rad=0.35)
        arrow(ax, (x + 0.5, 0.9), (x + 0.5, 0.1), lw=0.8, colour=PALETTE["comm"])
    label(ax, m * 0.6, 2.95, f"{intra.n_links} links per GPU, {fmt_bytes_per_s(intra.bytes_per_s)}"
          " one way", fontsize=7)
    label(ax, m * 0.6, -0.3, f"to the {inter.name} network: {fmt_bytes_per_s(inter.bytes_per_s)}"
          " one way per GPU", fontsize=7)
    set_alt(ax, f"One {c.accelerator.name} node: {m} GPUs each joined by {intra.n_links} "
            f"{intra.name} links ({fmt_bytes_per_s(intra.bytes_per_s)} one way per GPU) to a "
            f"switch fabric that connects every pair in one hop, and one NIC per GPU to the "
            f"{inter.name} network at {fmt_bytes_per_s(inter.bytes_per_s)} one way.")
    return ax


def fat_tree(cluster="h100", n_nodes=4, *, n_spines=2, ax=None):
    """A rail-optimised fat tree: GPU j of every node on leaf switch (rail) j, every leaf joined to
    every spine. Returns ax."""
    n_nodes = int(check_int("n_nodes", n_nodes, minimum=2, maximum=8))
    c = _cluster(cluster, 8 * n_nodes)
    m = c.devices_per_node
    if m > 8:
        raise ValueError(f"{c.name} has {m} devices per node; fat_tree draws nodes of <= 8")
    node_w = m * 0.5 + 0.3
    width = n_nodes * (node_w + 0.4)
    ax = new_axes(ax, (min(2 + 1.6 * n_nodes, 13), 4.4))
    canvas(ax, (-0.3, width), (-0.9, 5.2), f"rail-optimised fat tree: {n_nodes} nodes of {m} "
           f"GPUs, {m} rails", equal=False)
    leaf_w = width / m
    for r in range(m):
        box(ax, r * leaf_w + 0.05, 2.4, leaf_w - 0.1, 0.5, f"leaf {r}", fill=shard_colour(r),
            fontsize=6)
    sp_w = width / n_spines
    for s in range(n_spines):
        box(ax, s * sp_w + sp_w * 0.2, 4.2, sp_w * 0.6, 0.5, f"spine {s}", fill=PALETTE["other"],
            fontsize=7)
        for r in range(m):
            arrow(ax, (r * leaf_w + leaf_w / 2, 2.9), (s * sp_w + sp_w / 2, 4.2), lw=0.5,
                  colour=LINE, both=True)
    for n in range(n_nodes):
        x = n * (node_w + 0.4)
        box(ax, x, 0.0, node_w, 0.9, "", fill="white", rounded=True)
        label(ax, x + node_w / 2, -0.3, f"node {n}", fontsize=7)
        for g in range(m):
            gx = x + 0.15 + g * 0.5
            box(ax, gx, 0.2, 0.4, 0.5, str(g), fill=shard_colour(g), fontsize=6)
            arrow(ax, (gx + 0.2, 0.7), (g * leaf_w + leaf_w / 2, 2.4), lw=0.5,
                  colour=shard_colour(g))
    label(ax, width / 2, 3.55, f"{c.inter_node.name}, {fmt_bytes_per_s(c.inter_node.bytes_per_s)} "
          "one way per GPU", fontsize=7)
    set_alt(ax, f"A rail-optimised fat tree for {n_nodes} nodes of {m} {c.accelerator.name} "
            f"GPUs: GPU j of every node connects to leaf switch j (its rail), so same-rank GPUs "
            f"of different nodes are one switch apart, and every leaf connects to each of "
            f"{n_spines} spine switches; links are {c.inter_node.name} at "
            f"{fmt_bytes_per_s(c.inter_node.bytes_per_s)} one way per GPU.")
    return ax


def torus(cluster=None, shape=(4, 4), wraparound=(True, True), *, ax=None):
    """A 2D torus (or the first two axes of a 3D one): neighbour links, and wraparound links
    closing each axis that wraps. ``cluster`` (a TPU slice) overrides shape and wraparound.
    Returns ax."""
    link = None
    if cluster is not None:
        shape, wraparound, link = cluster.torus_shape, cluster.wraparound, cluster.intra_node
    shape, wraparound = tuple(int(a) for a in shape), tuple(bool(w) for w in wraparound)
    if len(shape) not in (2, 3) or len(wraparound) != len(shape) or max(shape[:2]) > 16:
        raise ValueError(f"shape={shape}, wraparound={wraparound}: give 2 or 3 axes (at most 16 "
                         "chips along each drawn axis) and one bool per axis")
    hops = hardware.ici_max_hops(shape, wraparound)
    nx, ny = shape[:2]
    ax = new_axes(ax, (5, 5))
    extra = f" (x {shape[2]} along Z, not drawn)" if len(shape) == 3 else ""
    canvas(ax, (-1.0, ny + 0.2), (-1.3, nx + 0.4), f"torus {'x'.join(map(str, shape))}{extra}, "
           f"at most {hops} hops")
    for i in range(nx):
        for j in range(ny):
            if j + 1 < ny:
                arrow(ax, (j + 0.3, nx - i - 0.7), (j + 0.7, nx - i - 0.7), both=True, lw=0.9,
                      colour=LINE)
            if i + 1 < nx:
                arrow(ax, (j, nx - i - 1.0), (j, nx - i - 1.4), both=True, lw=0.9, colour=LINE)
            box(ax, j - 0.3, nx - i - 1.0, 0.6, 0.6, f"{i},{j}" if max(nx, ny) <= 8 else "",
                fill=PALETTE["compute"], fontsize=6)
    for axis, (n, w) in enumerate(zip((nx, ny), wraparound[:2])):
        if not w or n < 3:
            continue
        for k in range(ny if axis == 0 else nx):
            # a loop through the gap beside column k (axis 0) or below row k (axis 1)
            if axis == 0:
                top, bottom = nx - 0.4, 0.0
                xs = [k, k, k + 0.5, k + 0.5, k, k]
                ys = [top, top + 0.2, top + 0.2, bottom - 0.2, bottom - 0.2, bottom]
            else:
                y = nx - k - 0.7
                xs = [-0.3, -0.5, -0.5, ny - 0.5, ny - 0.5, ny - 0.7]
                ys = [y, y, y - 0.5, y - 0.5, y, y]
            ax.plot(xs, ys, ls="--", lw=0.8, color=PALETTE["comm"], zorder=0.8)
    wraps = [f"axis {k} ({n})" for k, (n, w) in enumerate(zip(shape, wraparound)) if w]
    speed = f"; links {link.name} {fmt_bytes_per_s(link.bytes_per_s / link.n_links)} one way " \
            "each" if link else ""
    label(ax, (ny - 1) / 2, -0.9, "dashed: wraparound links" if wraps else "no wraparound: a mesh",
          fontsize=7)
    set_alt(ax, f"A {'x'.join(map(str, shape))} torus of chips drawn as a grid of its first two "
            f"axes with links between neighbours; "
            + (f"dashed wraparound links close {', '.join(wraps)} into rings"
               if wraps else "no axis wraps around, so it is a mesh")
            + f", so any two chips are at most {hops} hops apart{speed}.")
    return ax


__all__ = ["nvswitch_node", "fat_tree", "torus"]
