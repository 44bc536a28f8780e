"""The steps of collectives: a ring all-gather step by step, a tree, a one-shot, a hierarchy.

:func:`ring_all_gather` draws one row per step of a one-way ring all-gather, with the number of
steps and the bytes each device sends from :mod:`scaling_lib.collectives`; :func:`tree_all_reduce`
a binomial-tree reduce then broadcast, step by step; :func:`one_shot_all_reduce` every device
reading every other's buffer at once (NVLink's one-shot); :func:`hierarchical` the phases of
:func:`scaling_lib.collectives.hierarchical_schedule` on nodes of devices.

See: the chapter "Networks and collectives".
"""

from __future__ import annotations

import numpy as np

from ... import collectives as C
from ...units import check_int
from ._style import (PALETTE, arrow, box, canvas, fmt, label, legend, new_axes, set_alt,
                     shard_colour)


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


def _library_terms(n, algorithm):
    """(s, b) of an all-reduce run by ``algorithm`` from :mod:`scaling_lib.collectives`, or None
    where the installed library has no per-algorithm terms."""
    terms = getattr(C, "algorithm_terms", None)
    return None if terms is None else tuple(float(x) for x in terms("all-reduce", n, algorithm))


def tree_rounds(n) -> int:
    """Rounds of a binomial-tree reduce over ``n`` devices: in round t every device whose index
    is an odd multiple of 2^(t-1) sends its partial sum to the device 2^(t-1) below it, so the
    rounds double the reduced span until it covers all n: the bit length of n - 1. Half the
    library's tree all-reduce steps where it models them (``algorithm_terms(..., "tree")``)."""
    drawn = (int(n) - 1).bit_length()
    lib = _library_terms(n, "tree")
    if lib is not None and lib[0] != 2 * drawn:
        raise ValueError(f"the library's tree all-reduce over n={n} takes {lib[0]:g} steps; "
                         f"this drawing has {2 * drawn}")
    return drawn


def tree_all_reduce(n=8, *, ax=None):
    """A binomial-tree all-reduce, one row per round: partial sums flow to device 0 in
    :func:`tree_rounds` rounds, then the result flows back out in as many. Returns ax."""
    n = int(check_int("n", n, minimum=2, maximum=16))
    rounds = tree_rounds(n)
    ax = new_axes(ax, (min(2.5 + 0.8 * n, 13), 1.0 + 0.5 * (2 * rounds + 1)))
    canvas(ax, (-2.4, n), (-(2 * rounds + 1) * 0.8 - 0.2, 0.6),
           f"tree all-reduce over {n} devices: {rounds} steps up, {rounds} down", equal=False)
    for row in range(2 * rounds + 1):
        y = -row * 0.8
        up = row <= rounds
        t = row if up else 2 * rounds + 1 - row  # the round, 1..rounds
        span = 2 ** (t - 1)
        for d in range(n):
            if row == 0:
                fill = shard_colour(d)
            elif up:  # after reduce round t, multiples of 2^t hold a partial sum
                fill = PALETTE["accent"] if d % (2 * span) == 0 else PALETTE["free"]
            else:  # after the broadcast of round t, multiples of 2^(t-1) hold the total
                fill = PALETTE["optimizer"] if d % span == 0 else PALETTE["free"]
            box(ax, d + 0.1, y - 0.5, 0.8, 0.4, str(d) if row == 0 else "", fill=fill,
                fontsize=7, edge="#BBBBBB")
        if row == 0:
            label(ax, -0.2, y - 0.3, "devices", fontsize=7, ha="right")
            continue
        word = f"reduce step {row}" if up else f"broadcast step {row}"
        label(ax, -0.2, y - 0.3, word, fontsize=7, ha="right")
        for d in range(span, n, 2 * span):
            a, b = (d + 0.5, y - 0.3), (d - span + 0.5, y - 0.3)
            arrow(ax, a if up else b, b if up else a, rad=-0.3 / span, lw=0.9,
                  colour=PALETTE["comm"] if up else PALETTE["accent"])
    legend(ax, [("holds a partial sum", PALETTE["accent"]), ("holds the total",
                                                             PALETTE["optimizer"])],
           loc="lower center", ncol=2, bbox_to_anchor=(0.5, -0.08))
    lib = _library_terms(n, "tree")
    note = "" if lib is None else \
        f" The library's tree all-reduce counts the same {lib[0]:g} steps."
    set_alt(ax, f"A binomial-tree all-reduce over {n} devices, one row per step: in the first "
            f"{rounds} steps each device whose index is an odd multiple of 1, 2, 4, ... sends its "
            f"partial sum to the device that far below it, until device 0 holds the total; in the "
            f"last {rounds} steps the result flows back out the same way.{note}")
    return ax


def one_shot_all_reduce(n=8, *, ax=None):
    """A one-shot all-reduce: in one data step every device reads the whole buffer of every
    other and sums locally (NVSwitch makes all pairs one hop). Where the library models it
    (``algorithm_terms(..., "one_shot")``) the title gives its steps s, synchronisations
    included, and its bytes b per array byte. Returns ax."""
    n = int(check_int("n", n, minimum=2, maximum=16))
    lib = _library_terms(n, "one_shot")
    steps = "1 data step" if lib is None else f"1 data step (s = {lib[0]:g} with the syncs)"
    ax = new_axes(ax, (4.2, 4.2))
    canvas(ax, (-1.6, 1.6), (-1.7, 1.5), f"one-shot all-reduce over {n} devices: {steps}")
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
    cost = "" if lib is None else (f" The library counts {lib[0]:g} steps, the data step and the "
                                   f"synchronisations around it, and {lib[1]:g} times the array's "
                                   f"bytes into each device.")
    set_alt(ax, f"A one-shot all-reduce over {n} devices placed on a circle with a two-way arrow "
            f"between every pair: in a single data step each device reads the whole buffer of the "
            f"{n - 1} others and adds them up itself.{cost}")
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


__all__ = ["ring_all_gather", "tree_rounds", "tree_all_reduce", "one_shot_all_reduce",
           "hierarchical"]
