"""A paged KV cache: sequences' logical blocks, the block table, and the physical block pool.

:func:`paged_kv_cache` lets the sequences grow one token at a time, each taking the next free
physical block when it starts a new block (as a paged-attention server allocates), and draws the
logical blocks of each sequence (tokens filled), its block table, and the pool. Block counts and
the waste come from the serving engine model (``kv_blocks``, ``kv_waste``).

See: the chapter "Serving at scale" (paged attention).
"""

from __future__ import annotations

import numpy as np

from ._style import LINE, PALETTE, box, canvas, label, new_axes, set_alt, shard_colour


def _engine():
    """kv_blocks and kv_waste from the serving package (``serving.engine``), or from the
    ``serving_engine`` module they lived in before it."""
    try:
        from ...serving.engine import kv_blocks, kv_waste
    except ImportError:
        from ...serving_engine import kv_blocks, kv_waste
    return kv_blocks, kv_waste


def allocation(lengths, block_size):
    """Physical block ids of each sequence when all grow together one token per step, each new
    block taking the lowest free id: a list of lists."""
    kv_blocks, _ = _engine()
    need = np.atleast_1d(kv_blocks(list(lengths), block_size))
    table, nxt = [[] for _ in lengths], 0
    for t in range(int(max(need))):
        for s, n in enumerate(need):
            if t < n:
                table[s].append(nxt)
                nxt += 1
    return table


def paged_kv_cache(lengths=(37, 12, 70), block_size=16, n_blocks=None, *, ax=None):
    """Sequences of ``lengths`` tokens in a paged KV cache of ``n_blocks`` blocks of
    ``block_size`` tokens (default: the blocks needed plus 4 free). Returns ax."""
    kv_blocks, kv_waste = _engine()
    lengths = [int(x) for x in lengths]
    if not 1 <= len(lengths) <= 6 or max(lengths) > 16 * block_size:
        raise ValueError(f"lengths={lengths}: draw 1 to 6 sequences of at most 16 blocks "
                         f"({16 * block_size} tokens at block_size={block_size})")
    table = allocation(lengths, block_size)
    used = sum(len(t) for t in table)
    n_blocks = used + 4 if n_blocks is None else int(n_blocks)
    if n_blocks < used:
        raise ValueError(f"n_blocks={n_blocks} cannot hold the {used} blocks these sequences need")
    waste = float(kv_waste(lengths, block_size=block_size))
    rows = len(lengths)
    widest = max(len(t) for t in table)
    cols = 8
    pool_rows = -(-n_blocks // cols)
    ax = new_axes(ax, (10, 1.4 + 0.55 * max(rows, pool_rows)))
    canvas(ax, (-2.2, widest * 0.9 + 10.5), (-max(rows, pool_rows) * 0.8 - 0.6, 0.9),
           f"paged KV cache: blocks of {block_size} tokens, {used} of {n_blocks} blocks used",
           equal=False)
    label(ax, widest * 0.45, 0.5, "logical blocks (filled: tokens)", fontsize=7)
    x_tab = widest * 0.9 + 0.6
    label(ax, x_tab + 1.2, 0.5, "block table", fontsize=7)
    x_pool = x_tab + 3.0
    label(ax, x_pool + cols * 0.45, 0.5, "physical blocks in HBM", fontsize=7)
    for s, (n_tok, ids) in enumerate(zip(lengths, table)):
        y = -s * 0.8 - 0.6
        label(ax, -0.2, y + 0.25, f"seq {s}: {n_tok} tok", fontsize=7, ha="right")
        for j, pid in enumerate(ids):
            full = min(block_size, n_tok - j * block_size) / block_size
            box(ax, j * 0.9, y, 0.8, 0.5, "", fill="white", edge=LINE, lw=0.6)
            box(ax, j * 0.9, y, 0.8 * full, 0.5, "", fill=shard_colour(s), edge=LINE, lw=0.6)
        label(ax, x_tab, y + 0.25, "[" + ", ".join(map(str, ids)) + "]", fontsize=7, ha="left")
    owner = {pid: s for s, ids in enumerate(table) for pid in ids}
    for pid in range(n_blocks):
        r, c = divmod(pid, cols)
        s = owner.get(pid)
        box(ax, x_pool + c * 0.9, -r * 0.8 - 0.6, 0.8, 0.5, str(pid),
            fill=PALETTE["free"] if s is None else shard_colour(s), fontsize=6)
    label(ax, x_pool + cols * 0.45, -max(rows, pool_rows) * 0.8 - 0.35,
          f"grey: free; unused slots in the last blocks: {waste:.0%} of the reserved tokens",
          fontsize=7)
    set_alt(ax, f"A paged KV cache holding {rows} sequences of {', '.join(map(str, lengths))} "
            f"tokens in blocks of {block_size}: on the left each sequence's logical blocks, the "
            f"last one partly filled; in the middle its block table, the physical block ids; on "
            f"the right the pool of {n_blocks} physical blocks, {used} used and scattered between "
            f"sequences as they grew, the rest free; {waste:.0%} of the reserved slots are "
            f"empty.")
    return ax


__all__ = ["allocation", "paged_kv_cache"]
