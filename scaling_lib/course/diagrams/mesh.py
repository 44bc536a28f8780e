"""Sharded matmuls on a device mesh: who holds which block, and the collective between them.

:func:`sharded_matmul` draws C[I, K] = A[I, J] · B[J, K] for one pair of shardings: each array as
a matrix cut into the blocks the mesh axes split it into, each block coloured by the devices that
hold it, and the mesh itself with the collective's groups joined along their axis.
:func:`matmul_cases` draws the four cases of :mod:`scaling_lib.sharding` one under the other.
Every fact in the picture (the case, the collective, its group, V, C's sharding) comes from
:func:`scaling_lib.sharding.sharded_matmul`.

See: the chapter "Sharded arrays and how to multiply them".
"""

from __future__ import annotations

from ... import sharding as S
from ...simulate.devices import notation
from ._style import (LINE, PALETTE, arrow, box, canvas, fmt, label, new_axes, new_grid, set_alt,
                     shard_colour)

#: One example of each case on a mesh with axes X and Y: (a_spec, b_spec).
CASE_EXAMPLES = {1: (("X", None), (None, "Y")), 2: (("X", None), ("Y", None)),
                 3: ((None, "X"), ("X", None)), 4: (("X", None), (None, "X"))}
_M = 2.0  # side of a drawn matrix


def _matrix(ax, x0, y0, rows, cols, mesh_shape, title, *, partial=None):
    """A matrix whose rows are split over mesh axis ``rows`` and columns over ``cols``."""
    nr = mesh_shape[rows] if rows else 1
    nc = mesh_shape[cols] if cols else 1
    h, w = _M / nr, _M / nc
    for r in range(nr):
        for c in range(nc):
            who = [f"{rows}{r}"] * bool(rows) + [f"{cols}{c}"] * bool(cols)
            fill = shard_colour(r * nc + c) if who else PALETTE["idle"]
            name = ",".join(who) or ("partial sums on every device" if partial else "all")
            box(ax, x0 + c * w, y0 + _M - (r + 1) * h, w, h, name.replace(" on ", "\non "),
                fill=fill, fontsize=7 if nr * nc <= 8 else 5, edge="white", lw=1.5)
    if partial:
        from matplotlib.patches import Rectangle

        ax.add_patch(Rectangle((x0, y0), _M, _M, fill=False, hatch="///", edgecolor=LINE, lw=0,
                               zorder=1.5))
    label(ax, x0 + _M / 2, y0 + _M + 0.25, title, fontsize=8)


def _mesh(ax, x0, y0, mesh_shape, axis):
    """The mesh (first axis down, second across) with the collective's groups joined."""
    names = list(mesh_shape)
    nx = mesh_shape[names[0]]
    ny = mesh_shape[names[1]] if len(names) > 1 else 1
    step = min(0.9, _M / max(nx, ny))
    for i in range(nx):
        for j in range(ny):
            box(ax, x0 + j * step, y0 + _M - (i + 1) * step, step * 0.55, step * 0.55,
                f"{i},{j}" if step > 0.6 else "", fill=PALETTE["free"], fontsize=6)
    if axis is not None:
        along_rows = axis == names[0]  # a group varies the first index: a column of the mesh
        n_outer, n_inner = (ny, nx) if along_rows else (nx, ny)
        for o in range(n_outer):
            for k in range(n_inner - 1):
                i, j = (k, o) if along_rows else (o, k)
                cx, cy = x0 + j * step + step * 0.275, y0 + _M - i * step - step * 0.725
                if along_rows:  # from the bottom edge of (i, j) to the top edge of (i + 1, j)
                    a, b = (cx, cy - step * 0.275), (cx, cy - step * 0.725)
                else:
                    a, b = (cx + step * 0.275, cy), (cx + step * 0.725, cy)
                arrow(ax, a, b, both=True, lw=1.0)
    label(ax, x0 + ny * step / 2, y0 + _M + 0.25,
          "mesh " + " x ".join(f"{k}={v}" for k, v in mesh_shape.items()), fontsize=8)


def sharded_matmul(a_spec=("X", None), b_spec=(None, "Y"), mesh_shape=None, I=4096, J=4096,
                   K=4096, *, dtype="bf16", reduce="all-reduce", ax=None):
    """Draw A[a_spec] · B[b_spec] → C on ``mesh_shape`` (default {"X": 2, "Y": 2}); returns ax.

    >>> ax = sharded_matmul((None, "X"), ("X", None))
    >>> "all-reduce" in ax.alt_text
    True
    """
    mesh_shape = dict(mesh_shape or {"X": 2, "Y": 2})
    if not 1 <= len(mesh_shape) <= 2 or max(mesh_shape.values()) > 8:
        raise ValueError(f"mesh_shape={mesh_shape}: the drawing shows meshes of 1 or 2 axes of at "
                         "most 8 devices each, e.g. {'X': 2, 'Y': 2}")
    m = S.sharded_matmul(I, J, K, a_spec, b_spec, mesh_shape, dtype=dtype, reduce=reduce)
    ax = new_axes(ax, (9, 3.2))
    canvas(ax, (-0.2, 12.6), (-0.9, 2.7))
    a_spec, b_spec = tuple(a_spec), tuple(b_spec)
    _matrix(ax, 0, 0, a_spec[0], a_spec[1], mesh_shape, notation(a_spec, "IJ", "A"))
    label(ax, 2.4, 1.0, "·", fontsize=16)
    _matrix(ax, 2.8, 0, b_spec[0], b_spec[1], mesh_shape, notation(b_spec, "JK", "B"))
    label(ax, 5.25, 1.0, "→", fontsize=14)
    partial = m.case == 3
    c_spec = (a_spec[0], b_spec[1]) if partial else m.out_spec
    c_title = notation(c_spec, "IK", "C") + ("{U_" + m.axis + "}" if partial else "")
    _matrix(ax, 5.7, 0, c_spec[0], c_spec[1], mesh_shape, c_title, partial=partial)
    if m.kind:
        what = {"A": "A", "B": "B", "C": "the partial sums of C"}[m.operand]
        arrow(ax, (7.9, 1.0), (9.0, 1.0), label="")
        label(ax, 8.45, 1.35, m.kind, fontsize=7, colour=PALETTE["comm"])
        step = f"{m.kind} of {what} over {m.axis} ({m.group_size} devices, V = {fmt(m.nbytes)})"
        result = f" → {notation(m.out_spec, 'IK', 'C')}"
    else:
        step, result = "no communication", ""
    _mesh(ax, 9.3, 0, mesh_shape, m.axis)
    label(ax, 6.2, -0.55, f"case {m.case}: {step}{result}", fontsize=8)
    set_alt(ax, f"Sharded matmul {notation(a_spec, 'IJ', 'A')} times {notation(b_spec, 'JK', 'B')} "
            f"on a mesh of {' by '.join(str(v) for v in mesh_shape.values())} devices: each matrix "
            f"is cut into the blocks the mesh axes split it into, coloured by the devices holding "
            f"them. "
            f"Case {m.case}: {step}{result}.")
    return ax


def matmul_cases(mesh_shape=None, I=4096, J=4096, K=4096, *, dtype="bf16"):
    """The four sharded-matmul cases (:data:`CASE_EXAMPLES`) one under the other; returns the
    list of Axes (their figure's ``alt_text`` describes all four)."""
    mesh_shape = dict(mesh_shape or {"X": 2, "Y": 2})
    if set(mesh_shape) != {"X", "Y"}:
        raise ValueError(f"mesh_shape={mesh_shape} must have the axes X and Y of the examples "
                         f"{CASE_EXAMPLES}")
    axes = new_grid(4, 1, (9, 11))
    for ax, (case, (a, b)) in zip(axes, CASE_EXAMPLES.items()):
        sharded_matmul(a, b, mesh_shape, I, J, K, dtype=dtype, ax=ax)
    axes[0].figure.alt_text = ("The four cases of a sharded matmul, one per row. " +
                               " ".join(a.alt_text for a in axes))
    return axes


__all__ = ["CASE_EXAMPLES", "sharded_matmul", "matmul_cases"]
