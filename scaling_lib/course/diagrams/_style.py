"""Shared drawing helpers of the diagram toolkit: palette, boxes, arrows, alt text.

The book shows every figure on a white background, in the dark theme too (book/_static/site.css
paints figures white and undoes the theme's dimming), so diagrams are drawn for a white page on an
opaque white figure: dark grey text, mid-tone fills that keep their contrast against white and
read the same when printed in grey. matplotlib is imported here, never by ``import scaling_lib``.
"""

from __future__ import annotations

import matplotlib.patches as mpatches

#: Okabe-Ito colours (colour-blind safe), one per role, readable on white.
PALETTE = {
    "params": "#0072B2", "grads": "#E69F00", "optimizer": "#009E73", "activations": "#CC79A7",
    "comm": "#D55E00", "compute": "#0072B2", "idle": "#D9D9D9", "forward": "#0072B2",
    "backward": "#E69F00", "free": "#EEEEEE", "accent": "#56B4E9", "other": "#999999",
}
#: One colour per device/rank/shard (cycled).
SHARD_COLOURS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442",
                 "#999999")
TEXT = "#222222"   # dark grey text: the figure is opaque white in both themes
LINE = "#555555"
BACKGROUND = "white"


def shard_colour(i) -> str:
    """The colour of shard (or rank) ``i``."""
    return SHARD_COLOURS[int(i) % len(SHARD_COLOURS)]


def text_colour(fill) -> str:
    """White text on dark fills, dark grey on light ones (relative luminance of ``fill``)."""
    from matplotlib.colors import to_rgb

    r, g, b = to_rgb(fill)
    return "white" if 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.5 else TEXT


def new_axes(ax=None, figsize=(7, 4)):
    """``ax`` itself, or the Axes of a new figure of ``figsize`` inches (pyplot, so it shows)."""
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=figsize)
    fig.patch.set_facecolor(BACKGROUND)
    return ax


def new_grid(nrows, ncols, figsize):
    """A new figure of nrows x ncols Axes (pyplot), as a flat list."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(nrows, ncols, figsize=figsize, squeeze=False)
    fig.patch.set_facecolor(BACKGROUND)
    return list(axes.flat)


def canvas(ax, xlim, ylim, title=None, *, equal=True):
    """A diagram's frame: no axes lines or ticks, equal aspect (unless not ``equal``), the given
    limits, a title."""
    ax.set_xlim(*xlim)
    ax.set_ylim(*ylim)
    ax.set_aspect("equal" if equal else "auto")
    ax.axis("off")
    ax.set_facecolor(BACKGROUND)
    if title:
        ax.set_title(title, color=TEXT, fontsize=10)
    return ax


def box(ax, x, y, w, h, label="", *, fill=None, edge=LINE, fontsize=8, lw=1.0, ls="-",
        alpha=1.0, rounded=False):
    """A rectangle with its lower left corner at (x, y) and ``label`` centred in it."""
    fill = PALETTE["free"] if fill is None else fill
    style = "round,pad=0,rounding_size=0.08" if rounded else "square,pad=0"
    ax.add_patch(mpatches.FancyBboxPatch((x, y), w, h, boxstyle=style, facecolor=fill,
                                         edgecolor=edge, lw=lw, ls=ls, alpha=alpha))
    if label:
        ax.text(x + w / 2, y + h / 2, label, ha="center", va="center", fontsize=fontsize,
                color=text_colour(fill) if alpha > 0.5 else TEXT, zorder=3,
                bbox={"facecolor": fill, "edgecolor": "none", "pad": 0.3, "alpha": alpha})


def arrow(ax, start, end, *, colour=PALETTE["comm"], label="", lw=1.4, rad=0.0, fontsize=7,
          both=False, ls="-"):
    """An arrow from ``start`` to ``end`` (curved by ``rad``), an optional label at its middle."""
    style = "<|-|>" if both else "-|>"
    ax.add_patch(mpatches.FancyArrowPatch(start, end, arrowstyle=style, mutation_scale=9,
                                          color=colour, lw=lw, ls=ls,
                                          connectionstyle=f"arc3,rad={rad}", shrinkA=2, shrinkB=2))
    if label:
        mx, my = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
        ax.text(mx, my, label, ha="center", va="center", fontsize=fontsize, color=TEXT,
                bbox={"facecolor": BACKGROUND, "edgecolor": "none", "pad": 0.5})


def label(ax, x, y, s, *, fontsize=8, ha="center", va="center", colour=TEXT, **kw):
    """Text in the diagram's text colour."""
    return ax.text(x, y, s, ha=ha, va=va, fontsize=fontsize, color=colour, **kw)


def legend(ax, items, *, loc="upper right", fontsize=7, **kw):
    """A legend of coloured squares: ``items`` is [(label, colour)]."""
    handles = [mpatches.Patch(facecolor=c, edgecolor=LINE, label=s) for s, c in items]
    leg = ax.legend(handles=handles, loc=loc, fontsize=fontsize, frameon=False, **kw)
    for t in leg.get_texts():
        t.set_color(TEXT)
    return leg


def set_alt(ax, text):
    """Record the diagram's alt text on ``ax`` (``ax.alt_text``) and on its figure
    (``fig.alt_text``: the texts of all its diagrams, joined). Returns ``ax``.

    A chapter copies it into the figure cell's metadata, ``"mystnb": {"image": {"alt": ...}}``,
    which is what the book shows (tests/test_notebooks.py checks every figure cell has one).
    """
    text = " ".join(str(text).split())
    ax.alt_text = text
    fig = ax.figure
    parts = [a.alt_text for a in fig.axes if getattr(a, "alt_text", "")]
    fig.alt_text = " ".join(parts)
    return ax


def alt_text(obj) -> str:
    """The alt text of a diagram: ``obj`` is its Axes, its figure, or a list of Axes."""
    if isinstance(obj, (list, tuple)):
        return " ".join(alt_text(a) for a in obj)
    return getattr(obj, "alt_text", "") or getattr(getattr(obj, "figure", None), "alt_text", "")


def fmt(nbytes) -> str:
    """Bytes in the library's human units."""
    from ...units import fmt_bytes

    return fmt_bytes(nbytes)
