"""Figures for the chapter "Expert parallelism and mixtures of experts".

Plotting only: the routing, capacity and drop counts come from
:mod:`scaling_lib.parallelism.expert`.
"""

from __future__ import annotations

import numpy as np

from ...parallelism import expert

SKEWS = (0.0, 0.5, 1.0)
CAPACITY_FACTORS = np.round(np.arange(0.5, 3.01, 0.05), 2)


def drop_curve(n, E, k, skew, capacity_factors=CAPACITY_FACTORS, seed=0):
    """Share of the k·n assignments dropped at each capacity factor, for the toy router."""
    loads = expert.expert_loads(expert.toy_router(n, E, k, skew=skew, seed=seed), E)
    return np.array([expert.dropped_tokens(loads, expert.capacity(n, E, k, float(cf)))
                     for cf in capacity_factors]) / (k * n)


def plot_routing(ax_loads, ax_drops, *, n=4096, E=16, k=2, capacity_factor=1.25, seed=0):
    """Left: tokens per expert of a balanced and a skewed toy router, with the capacity line.
    Right: share of assignments dropped against the capacity factor, per router skew."""
    C = expert.capacity(n, E, k, capacity_factor)
    width = 0.4
    for i, skew in enumerate((SKEWS[0], SKEWS[-1])):
        loads = expert.expert_loads(expert.toy_router(n, E, k, skew=skew, seed=seed), E)
        ax_loads.bar(np.arange(E) + (i - 0.5) * width, loads, width,
                     label=f"skew {skew:g}: imbalance {expert.imbalance(loads):.2f}")
    ax_loads.axhline(C, color="black", ls="--", lw=1,
                     label=f"capacity S = {C} slots (factor φ = {capacity_factor:g})")
    ax_loads.axhline(k * n / E, color="gray", ls=":", lw=1, label=f"balanced k·n/E = {k * n // E}")
    ax_loads.set(xlabel="expert", ylabel="tokens routed", xticks=range(0, E, 2),
                 title=f"{n:,} tokens, top-{k} of {E} experts")
    ax_loads.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0.0, -0.15), frameon=False)  # below
    for skew in SKEWS:
        ax_drops.plot(CAPACITY_FACTORS, 100 * drop_curve(n, E, k, skew, seed=seed),
                      label=f"router skew {skew:g}")
    ax_drops.axvline(capacity_factor, color="black", ls="--", lw=1)
    ax_drops.set(xlabel="capacity factor φ", ylabel="assignments dropped (%)",
                 title="S = ceil(φ·k·n/E) slots per expert", ylim=(0, None))
    ax_drops.legend(fontsize=8)
