"""Expert parallelism: tokens dispatched to their top-k experts on other ranks, then combined.

:func:`expert_dispatch` routes a few tokens with :func:`scaling_lib.parallelism.expert.toy_router`,
keeps what fits in each expert's capacity (:func:`~scaling_lib.parallelism.expert.capacity`,
:func:`~scaling_lib.parallelism.expert.keep_mask`) and draws the dispatch all-to-all (tokens on
the left, experts grouped by rank in the middle) and the combine all-to-all (back to the tokens'
ranks on the right). Dropped assignments are dashed.

See: the chapter "Expert parallelism".
"""

from __future__ import annotations

import numpy as np

from ...parallelism import expert
from ...units import check_int
from ._style import LINE, PALETTE, arrow, box, canvas, label, new_axes, set_alt, shard_colour


def expert_dispatch(n_tokens=16, E=8, k=2, ep=4, *, capacity_factor=1.25, skew=0.0, seed=0,
                    ax=None):
    """Dispatch and combine of ``n_tokens`` tokens (spread evenly over ``ep`` ranks) to ``E``
    experts (E/ep per rank), top-``k`` routing. Returns ax."""
    n = int(check_int("n_tokens", n_tokens, minimum=1, maximum=64))
    E = int(check_int("E", E, minimum=2, maximum=32))
    ep = int(check_int("ep", ep, minimum=1, maximum=8))
    if E % ep or n % ep:
        raise ValueError(f"ep={ep} must divide E={E} experts and n_tokens={n}; choose ep among "
                         f"{[d for d in range(1, 9) if E % d == 0 and n % d == 0]}")
    experts = expert.toy_router(n, E, k, skew=skew, seed=seed)
    C = expert.capacity(n, E, k, capacity_factor)
    keep = expert.keep_mask(experts, E, C)
    loads = expert.expert_loads(experts, E)
    tok_rank = np.arange(n) // (n // ep)
    exp_rank = np.arange(E) // (E // ep)
    ty = lambda i: -i * 0.5  # noqa: E731  (token i's height)
    ey = lambda e: -(e + 0.5) * (n * 0.5 / E)  # noqa: E731
    ax = new_axes(ax, (9, 1.2 + 0.22 * n))
    canvas(ax, (-1.5, 11.5), (-n * 0.5 - 0.3, 1.0),
           f"expert parallelism: {n} tokens, E={E} experts, top-{k}, ep={ep}, capacity C={C}",
           equal=False)
    for i in range(n):
        for side in (0.0, 9.0):
            box(ax, side, ty(i) - 0.4, 1.0, 0.36, f"t{i}", fill=shard_colour(tok_rank[i]),
                fontsize=6)
        for j in range(k):
            e = experts[i, j]
            ok = bool(keep[i, j])
            colour = shard_colour(tok_rank[i]) if ok else PALETTE["other"]
            style = dict(colour=colour, lw=0.7, ls="-" if ok else ":")
            arrow(ax, (1.0, ty(i) - 0.22), (4.0, ey(e)), **style)
            if ok:
                arrow(ax, (6.0, ey(e)), (9.0, ty(i) - 0.22), **style)
    for e in range(E):
        y = ey(e)
        box(ax, 4.0, y - 0.22, 2.0, 0.44, f"expert {e}: {loads[e]}/{C}",
            fill="white" if loads[e] <= C else "#F4CCCC", fontsize=6, edge=LINE)
    for r in range(ep):
        top, bottom = ey(r * E // ep) + 0.3, ey((r + 1) * E // ep - 1) - 0.3
        box(ax, 3.8, bottom, 2.4, top - bottom, "", fill=shard_colour(r), alpha=0.15)
        label(ax, 5.0, top - 0.05, f"rank {r}", fontsize=6, va="bottom")
    label(ax, 0.5, 0.45, "tokens (rank colour)", fontsize=7)
    label(ax, 2.5, 0.45, "dispatch all-to-all", fontsize=7, colour=PALETTE["comm"])
    label(ax, 7.5, 0.45, "combine all-to-all", fontsize=7, colour=PALETTE["comm"])
    label(ax, 9.5, 0.45, "outputs", fontsize=7)
    cross = int(sum(keep[i, j] and exp_rank[experts[i, j]] != tok_rank[i]
                    for i in range(n) for j in range(k)))
    dropped = int((~keep).sum())
    set_alt(ax, f"Expert parallelism with {n} tokens on {ep} ranks routed to {k} of {E} experts "
            f"each: lines go from each token to its chosen experts, grouped by rank, and back to "
            f"the token after the experts run. {cross} of the {int(keep.sum())} kept assignments "
            f"cross ranks in the dispatch all-to-all; {dropped} exceed the capacity of {C} "
            f"tokens per expert and are dropped (dotted).")
    return ax


__all__ = ["expert_dispatch"]
