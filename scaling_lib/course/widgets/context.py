"""Figures for the chapter "Context parallelism": who computes which part of the causal mask,
and how each variant's communication compares with its attention as the sequence grows.

Plotting functions take a matplotlib ``Axes`` and draw from :mod:`scaling_lib.parallelism.
context`; no formula lives here.
"""

from __future__ import annotations

import numpy as np

from ...parallelism import context as cx


def mask_owner(T, cp, *, balanced=True) -> np.ndarray:
    """[T, T] array: the rank that computes each (query, key) pair of the causal mask, NaN above
    the diagonal (pairs no rank computes).

    >>> mask_owner(4, 2).tolist()[3]
    [0.0, 0.0, 0.0, 0.0]
    """
    T, cp = int(T), int(cp)
    owner_of_query = np.empty(T)
    if balanced:
        for rank, pos in enumerate(cx.token_order(T, cp).reshape(cp, -1)):
            owner_of_query[pos] = rank
    else:
        owner_of_query[:] = np.arange(T) // (T // cp)
    out = np.repeat(owner_of_query[:, None], T, axis=1)
    out[np.triu_indices(T, 1)] = np.nan
    return out


def plot_mask(ax, T=64, cp=4, *, balanced=True):
    """The causal mask coloured by the rank that computes each row."""
    ax.imshow(mask_owner(T, cp, balanced=balanced), cmap="tab10", vmin=0, vmax=9,
              interpolation="nearest")
    ax.set_xlabel("key position")
    ax.set_ylabel("query position")
    ax.set_title("load-balanced chunks" if balanced else "contiguous shards")
    ax.set_xticks([])
    ax.set_yticks([])


def plot_work(ax, T=64, cp=4):
    """Causal (query, key) pairs per rank, contiguous shards against load-balanced chunks."""
    x = np.arange(cp)
    for shift, balanced, label in ((-0.2, False, "contiguous shards"),
                                   (0.2, True, "load-balanced chunks")):
        w = cx.causal_pairs(T, cp, balanced=balanced)
        ax.bar(x + shift, w / w.mean(), width=0.4, label=label)
    ax.axhline(1.0, color="k", lw=0.8, ls=":")
    ax.set_xticks(x)
    ax.set_xlabel("cp rank")
    ax.set_ylabel("work / average")
    ax.set_ylim(0, None)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(0.0, -0.2), frameon=False)  # below the bars


def can_run(model, variant, cp, tp=1) -> bool:
    """Whether ``variant`` can split this model over ``cp`` ranks: Ulysses needs the query heads
    per tensor rank to split over cp (key/value heads are replicated when fewer than cp), the
    others always can (the rule of :func:`scaling_lib.parallelism.context.best_variant`)."""
    n, k = cx.heads_per_rank(model, tp)
    return variant != "ulysses" or not (n % cp or (k % cp and cp % k))


def plot_comm_to_attention(ax, model, cp, systems, T=(8192, 16384, 32768, 65536, 131072,
                                                        262144), tp=8, *, what="comm"):
    """Each variant's communication per layer over its attention compute, against T.

    ``what="comm"``: the whole communication time of every variant (log scale);
    ``what="exposed"``: the part compute does not hide (linear scale: the ring's hidden sends
    are 0 there, drawn as 0). ``systems``: (label, accelerator, one-way bytes/s per device)
    tuples. A variant that cannot split the heads (Ulysses with cp not dividing the query
    heads) is named in the legend as left out. Returns the variants drawn.
    """
    if what not in ("comm", "exposed"):
        raise ValueError(f"what={what!r} is not a quantity this plot draws; choose 'comm' or "
                         "'exposed'")
    T = np.asarray(T, dtype=float)
    styles = {"allgather": "-", "ring": "--", "ulysses": ":"}
    colours = {"NVLink": "#0072B2", "NIC": "#D55E00"}
    drawn = [v for v in cx.VARIANTS if can_run(model, v, cp, tp)]
    for i, (label, acc, W) in enumerate(systems):
        colour = colours.get(label, f"C{i}")
        for v in drawn:
            t = cx.layer_times(model, v, cp, T, acc, W, tp=tp)
            ax.plot(T, getattr(t, what) / t.attention, styles[v], marker="o", ms=3,
                    color=colour, label=f"{v}, {label}")
    for v in cx.VARIANTS:
        if v not in drawn:
            ax.plot([], [], " ", label=f"{v}: cannot split the heads")
    ax.set_xscale("log", base=2)
    if what == "comm":
        ax.set_yscale("log")
    else:
        ax.set_ylim(bottom=0)
    ax.axhline(1.0, color="k", lw=0.8, ls=":")
    ax.set_xlabel("sequence length T")
    ax.set_ylabel(("communication" if what == "comm" else "exposed communication")
                  + " / attention")
    ax.legend(fontsize=7, loc="upper right")
    return drawn
