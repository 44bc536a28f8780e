"""Context parallelism: load-balanced chunks of the causal mask, and ring attention's rotation.

:func:`context_chunks` draws the causal mask of T tokens cut into 2·cp chunks, each query row
coloured by the rank that holds it (:func:`scaling_lib.parallelism.context.chunk_assignment`),
with each rank's share of the work (:func:`~scaling_lib.parallelism.context.causal_pairs`),
balanced and contiguous side by side. :func:`ring_attention` draws which key/value block each
rank holds at each step of ring attention, and the sends between steps.

See: the chapter "Context parallelism".
"""

from __future__ import annotations

import numpy as np

from ...parallelism import context
from ...units import check_int
from ._style import TEXT, arrow, box, canvas, label, new_axes, new_grid, set_alt, shard_colour


def _rank_of_chunk(cp, balanced):
    """The rank holding each of the 2·cp chunks."""
    owner = np.empty(2 * cp, dtype=int)
    if balanced:
        for r, (a, b) in enumerate(context.chunk_assignment(cp)):
            owner[a] = owner[b] = r
    else:
        owner[:] = np.arange(2 * cp) // 2
    return owner


def _mask(ax, cp, balanced, T):
    n = 2 * cp
    owner = _rank_of_chunk(cp, balanced)
    for q in range(n):
        for k in range(q + 1):
            box(ax, k, n - 1 - q, 1, 1, "", fill=shard_colour(owner[q]), edge="white",
                lw=0.8, alpha=0.55 if k == q else 1.0)
        label(ax, -0.2, n - 0.5 - q, f"r{owner[q]}", fontsize=6, ha="right")
    work = context.causal_pairs(T, cp, balanced=balanced)
    way = "balanced: rank i holds chunks i and 2cp-1-i" if balanced else "contiguous"
    canvas(ax, (-1.2, n + 0.2), (-0.3 - 0.45 * cp, n + 0.2), way)
    for r in range(cp):
        w = work[r] / work.max() * n
        box(ax, 0, -0.45 * (r + 1), w, 0.35, "", fill=shard_colour(r), edge="white")
        label(ax, w + 0.1, -0.45 * (r + 1) + 0.17, f"rank {r}: {work[r]:,}", fontsize=6,
              ha="left")
    return work


def context_chunks(cp=4, T=8192):
    """The causal mask in 2·cp chunks (query chunks down, key chunks across), coloured by the
    rank that computes each query chunk, load-balanced (left) and contiguous (right), with each
    rank's (query, key) pairs below. Returns the two Axes."""
    cp = int(check_int("cp", cp, minimum=2, maximum=8))
    axes = new_grid(1, 2, (9, 5.2))
    balanced = _mask(axes[0], cp, True, T)
    contiguous = _mask(axes[1], cp, False, T)
    axes[0].figure.suptitle(f"causal attention over T={T:,} tokens in {2 * cp} chunks on "
                            f"cp={cp} ranks", color=TEXT, fontsize=10)
    ratio = contiguous.max() / contiguous.mean()
    set_alt(axes[0], f"The causal attention mask cut into {2 * cp} query and key chunks, each "
            f"query chunk coloured by the rank of {cp} that computes it. Left, load-balanced: "
            f"rank i holds chunks i and {2 * cp - 1}-i, and every rank computes "
            f"{balanced[0]:,} query-key pairs. Right, contiguous chunks: the last rank computes "
            f"{ratio:.2f} times the average, and the step waits for it.")
    set_alt(axes[1], "")
    return axes


def ring_attention(cp=4, *, ax=None):
    """Ring attention on ``cp`` ranks: one row per step, each rank's query block and the
    key/value block it holds at that step; between steps every rank sends its K/V block to the
    next. Returns ax."""
    cp = int(check_int("cp", cp, minimum=2, maximum=8))
    ax = new_axes(ax, (1.5 + 1.5 * cp, 0.8 + 0.75 * cp))
    steps = cp
    canvas(ax, (-2.0, cp * 2.0), (-steps * 1.2, 0.8),
           f"ring attention on {cp} ranks: {cp - 1} K/V sends per layer", equal=False)
    for s in range(steps):
        y = -s * 1.2
        label(ax, -0.3, y - 0.35, f"step {s}", fontsize=7, ha="right")
        for r in range(cp):
            x = r * 2.0
            kv = (r - s) % cp
            box(ax, x, y - 0.6, 0.75, 0.5, f"Q{r}", fill=shard_colour(r), fontsize=7)
            box(ax, x + 0.85, y - 0.6, 0.75, 0.5, f"KV{kv}", fill=shard_colour(kv), fontsize=7,
                rounded=True)
            if s == 0:
                label(ax, x + 0.8, 0.4, f"rank {r}", fontsize=7)
            if s + 1 < steps:
                nxt = ((r + 1) % cp) * 2.0 + 1.2
                arrow(ax, (x + 1.2, y - 0.6), (nxt, y - 1.1), lw=0.7,
                      rad=0.0 if r + 1 < cp else 0.15, ls="-" if r + 1 < cp else "--")
    set_alt(ax, f"Ring attention on {cp} ranks, one row per step: every rank keeps its own query "
            f"block and computes attention against the key/value block it holds, then passes "
            f"that block to the next rank around the ring, so after {cp - 1} sends every query "
            f"block has met every key/value block.")
    return ax


__all__ = ["context_chunks", "ring_attention"]
