"""The steps of collectives: a ring all-gather step by step, a tree, a one-shot, a hierarchy.

:func:`ring_all_gather` draws one row per step of a one-way ring all-gather, with the number of
steps and the bytes each device sends from :mod:`scaling_lib.collectives`; :func:`tree_all_reduce`
a binary-tree reduce then broadcast; :func:`one_shot_all_reduce` every device reading every
other's buffer at once (NVLink's one-shot); :func:`hierarchical` the phases of
:func:`scaling_lib.collectives.hierarchical_schedule` on nodes of devices.

See: the chapter "Networks and collectives".
"""

from __future__ import annotations

import numpy as np

from ... import collectives as C
from ...units import check_int
from ._style import PALETTE, arrow, box, canvas, fmt, label, new_axes, set_alt, shard_colour


def _ring_holds(n, t):
    """[n, n] booleans: after t steps of a one-way ring all-gather, does device d hold shard s?

    Step t moves, from each device d to d + 1, the shard d received in step t - 1 (its own at
    t = 1), so after t steps device d holds shards d, d - 1, ..., d - t (mod n)."""
    d = np.arange(n)[:, None]
    s = np.arange(n)[None, :]
    return (d - s) % n <= t


def ring_all_gather(n=4, nbytes=None, *, ax=None):
    """A one-way ring all-gather over ``n`` devices, one row per step; returns ax.

    The steps are :func:`scaling_lib.collectives.cost_terms`' s = n - 1; with ``nbytes`` (V, the
    full array) each row says what each device sends, from
    :func:`scaling_lib.collectives.collective_bytes`.
    """
    n = int(check_int("n", n, minimum=2, maximum=16))
    steps = int(C.cost_terms("all-gather", n, topology="ring")[0])
    per_step = None
    if nbytes is not None:
        per_step = C.collective_bytes("all-gather", nbytes, n).sent_bytes / steps
    slot, gap = 0.32, 0.9
    width = n * slot
    ax = new_axes(ax, (min(2.5 + 1.25 * n, 13), 1.2 + 0.6 * (steps + 1)))
    total_w = n * (width + gap)
    canvas(ax, (-2.6, total_w), (-(steps + 1) * 1.0 - 0.2, 0.6),
           f"ring all-gather over {n} devices: {steps} steps", equal=False)
    for t in range(steps + 1):
        y = -t * 1.0
        holds = _ring_holds(n, t)
        for d in range(n):
            x = d * (width + gap)
            for s in range(n):
                box(ax, x + s * slot, y - 0.5, slot, 0.5, "",
                    fill=shard_colour(s) if holds[d, s] else PALETTE["free"], edge="#BBBBBB")
            if t == 0:
                label(ax, x + width / 2, 0.3, f"device {d}", fontsize=7)
        what = "start: device d holds shard d" if t == 0 else f"step {t}"
        if t and per_step is not None:
            what += f"\nsends {fmt(per_step)}"
        label(ax, -0.2, y - 0.25, what, fontsize=7, ha="right")
        if t:  # the sends of step t, drawn between the previous row and this one
            for d in range(n - 1):
                x = d * (width + gap) + width
                arrow(ax, (x + 0.05, y + 0.25), (x + gap - 0.05, y + 0.25),
                      label=str((d - t + 1) % n), fontsize=6)
            arrow(ax, ((n - 1) * (width + gap) + width, y + 0.15), (0, y + 0.15), rad=-0.03,
                  lw=0.8, ls="--")
    label(ax, total_w / 2, -(steps + 1) * 1.0 + 0.15,
          "arrows: the shard each device forwards to the next; dashed: the link back to device 0",
          fontsize=7)
    sent = "" if per_step is None else f" Each step every device sends {fmt(per_step)}."
    set_alt(ax, f"A one-way ring all-gather over {n} devices drawn as {steps + 1} rows: the start, "
            f"where device d holds only shard d, then one row per step, {steps} steps in all; in "
            f"each step every device forwards to the next the shard it received last, until every "
            f"device holds all {n} shards.{sent}")
    return ax


def _tree(n):
    """Parent of each device in a binary tree rooted at device 0 (heap order), and its depth."""
    parent = [None] + [(i - 1) // 2 for i in range(1, n)]
    depth = [0] * n
    for i in range(1, n):
        depth[i] = depth[parent[i]] + 1
    return parent, depth


def tree_all_reduce(n=8, *, ax=None):
    """A binary-tree all-reduce: partial sums flow up to device 0 level by level, the result flows
    back down; one step per tree level each way. Returns ax."""
    n = int(check_int("n", n, minimum=2, maximum=32))
    parent, depth = _tree(n)
    levels = max(depth)
    ax = new_axes(ax, (9, 3.6))
    canvas(ax, (-0.5, 17.5), (-levels - 1.2, 1.0),
           f"tree all-reduce over {n} devices: {levels} steps up, {levels} down")
    for half, (x0, word) in enumerate(((0.0, "reduce"), (9.0, "broadcast"))):
        pos = {}
        for lv in range(levels + 1):
            row = [i for i in range(n) if depth[i] == lv]
            for k, i in enumerate(row):
                pos[i] = (x0 + (k + 0.5) * 8.0 / 2**lv, -lv)
        for i in range(1, n):
            step = levels - depth[i] + 1 if half == 0 else depth[i]
            a, b = (pos[i], pos[parent[i]]) if half == 0 else (pos[parent[i]], pos[i])
            arrow(ax, a, b, label=str(step), fontsize=7,
                  colour=PALETTE["comm"] if half == 0 else PALETTE["accent"])
        for i, (x, y) in pos.items():
            box(ax, x - 0.3, y - 0.2, 0.6, 0.4, str(i), fill=shard_colour(i), fontsize=7)
        label(ax, x0 + 4.0, -levels - 0.8, f"{word} (numbers on the arrows: the step)",
              fontsize=8)
    set_alt(ax, f"A binary-tree all-reduce over {n} devices, twice: on the left the partial sums "
            f"flow up from the leaves to device 0, one tree level per step ({levels} steps); on "
            f"the right the result flows back down in {levels} more steps.")
    return ax


def one_shot_all_reduce(n=8, *, ax=None):
    """A one-shot all-reduce: in one step every device reads the whole buffer of every other and
    sums locally (NVSwitch makes all pairs one hop). Returns ax."""
    n = int(check_int("n", n, minimum=2, maximum=16))
    ax = new_axes(ax, (4.2, 4.2))
    canvas(ax, (-1.6, 1.6), (-1.7, 1.5), f"one-shot all-reduce over {n} devices: 1 step")
    angle = np.pi / 2 - 2 * np.pi * np.arange(n) / n
    xy = np.c_[np.cos(angle), np.sin(angle)]
    for i in range(n):
        for j in range(i + 1, n):
            arrow(ax, tuple(xy[i]), tuple(xy[j]), both=True, lw=0.6, colour=PALETTE["comm"])
    for i in range(n):
        box(ax, xy[i, 0] - 0.17, xy[i, 1] - 0.12, 0.34, 0.24, str(i), fill=shard_colour(i),
            fontsize=7)
    label(ax, 0, -1.5, f"each device reads the full buffer of the {n - 1} others at once",
          fontsize=7)
    set_alt(ax, f"A one-shot all-reduce over {n} devices placed on a circle with a two-way arrow "
            f"between every pair: in a single step each device reads the whole buffer of the "
            f"{n - 1} others and adds them up itself, fewer steps than a ring but more bytes.")
    return ax


def hierarchical(kind="all-reduce", nbytes=1e9, groups=(4, 2), *, ax=None):
    """The phases of a two-level collective on ``groups`` = (m devices per node, k nodes): one
    row per phase of :func:`scaling_lib.collectives.hierarchical_schedule`, intra-node rings
    inside each node, inter-node rings between the devices of the same local rank (rails).
    ``groups`` may also be a Cluster (its :func:`~scaling_lib.collectives.cluster_levels`).
    Returns ax."""
    if not isinstance(groups, (tuple, list)):
        groups = C.cluster_levels(groups)
    phases = C.hierarchical_schedule(kind, nbytes, groups)
    if len(groups) != 2:
        raise ValueError(f"groups={tuple(groups)}: this diagram draws two levels (devices per "
                         "node, nodes); give (m, k)")
    m, k = (int(g) for g in groups)
    if m * k > 32:
        raise ValueError(f"groups={tuple(groups)}: at most 32 devices fit in the drawing")
    dev_w, node_gap = 0.7, 0.8
    node_w = m * dev_w + 0.2
    rows = max(len(phases), 1)
    ax = new_axes(ax, (min(1.5 + 1.1 * m * k, 13), 1.0 + 1.4 * rows))
    width = k * node_w + (k - 1) * node_gap
    canvas(ax, (-0.3, width + 0.3), (-rows * 1.8 + 0.2, 0.9),
           f"hierarchical {C.canonical_kind(kind)} on {k} nodes of {m}: {len(phases)} phases")
    for r, (level, pkind, V, g) in enumerate(phases):
        y = -r * 1.8
        for node in range(k):
            x = node * (node_w + node_gap)
            box(ax, x, y - 0.55, node_w, 0.8, "", fill="white", rounded=True)
            for d in range(m):
                box(ax, x + 0.1 + d * dev_w + 0.08, y - 0.4, dev_w - 0.16, 0.5, str(node * m + d),
                    fill=shard_colour(d), fontsize=6)
            if level == "intra-node":
                for d in range(m - 1):
                    arrow(ax, (x + 0.1 + (d + 0.5) * dev_w, y + 0.1),
                          (x + 0.1 + (d + 1.5) * dev_w, y + 0.1), both=True, rad=-0.5, lw=0.9)
        if level != "intra-node":
            for node in range(k - 1):
                for d in range(m):
                    a = node * (node_w + node_gap) + 0.1 + (d + 0.5) * dev_w
                    arrow(ax, (a, y - 0.4), (a + node_w + node_gap, y - 0.4), both=True,
                          rad=0.25, lw=0.8, colour=PALETTE["accent"])
        label(ax, width / 2, y + 0.55, f"phase {r + 1} ({level}): {pkind} of {fmt(V)} over "
              f"{g} devices", fontsize=8)
    names = "; ".join(f"{p[0]} {p[1]} of {fmt(p[2])} over {p[3]} devices" for p in phases)
    set_alt(ax, f"A hierarchical {C.canonical_kind(kind)} of {fmt(nbytes)} on {k} nodes of {m} "
            f"devices, one row per phase: {names}. Intra-node phases run rings inside each node; "
            f"inter-node phases join the devices of the same local rank across nodes.")
    return ax


__all__ = ["ring_all_gather", "tree_all_reduce", "one_shot_all_reduce", "hierarchical"]
