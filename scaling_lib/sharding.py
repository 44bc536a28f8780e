"""Sharded matmuls: which collective a sharding of A[I, J] . B[J, K] needs, and what it costs.

Notation (Chapter "Sharded arrays and how to multiply them"): a sharding is written per
dimension, A[I_X, J] for an A whose dimension I is split over mesh axis X; C[I, K]{U_X} is an
array every device of X holds a partial sum of (unreduced over X). In code a sharding is a
``PartitionSpec``-like tuple, one entry per dimension: None (replicated) or a mesh axis name.

The four cases of C[I, K] = A[I, J] . B[J, K] (J is the contracting dimension):

    1. J unsharded on both sides, and I and K not on the same axis:
       A[I_X, J] . B[J, K_Y] -> C[I_X, K_Y]                       no communication
    2. J sharded on one multiplicand only: AllGather that multiplicand over J first,
       A[I_X, J] . B[J_X, K] -> (AllGather B) -> C[I_X, K]
    3. J sharded on the same axis on both sides: the local matmuls give partial sums,
       A[I, J_X] . B[J_X, K] -> C[I, K]{U_X} -> AllReduce -> C[I, K]
                                             (or ReduceScatter -> C[I_X, K], half the cost)
    4. I and K sharded on the same axis (no device could hold its block of C[I_X, K_X]):
       A[I_X, J] . B[J, K_X] -> AllGather one of them (the smaller) -> C[I_X, K] or C[I, K_X]

What the model leaves out: the shortcuts a compiler may take when a multiplicand is replicated
(slicing it locally instead of gathering the other), and layouts with the contracting dimension
sharded over two different axes (rejected with a ValueError naming them).

See: Chapter "Sharded arrays and how to multiply them".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from . import collectives
from .units import (_brief, check_choice, check_count, check_int, check_positive, dtype_bytes,
                    scalar_or_array as _out)

CASES = {1: "no communication", 2: "AllGather the multiplicand sharded on J",
         3: "partial sums, then AllReduce (or ReduceScatter)", 4: "AllGather one multiplicand"}
REDUCTIONS = ("all-reduce", "reduce-scatter")


class ShardedMatmul(NamedTuple):
    """The plan for one sharded matmul C[I, K] = A[I, J] . B[J, K].

    ``kind`` is the collective in HLO spelling (None for case 1); ``operand`` says which array
    it moves ("A" or "B" gathered, "C" reduced); ``nbytes`` is V, the full array the collective
    works on within one group (as in :mod:`scaling_lib.collectives`); ``out_spec`` is C's
    sharding afterwards; ``flops_per_device`` is each device's share of 2 I J K.
    """

    case: int
    kind: str | None
    operand: str | None
    axis: str | None
    group_size: int
    nbytes: float
    out_spec: tuple
    flops_per_device: float


def _check_matmul(m):
    """``m`` unchanged if it is a ShardedMatmul (the result of :func:`sharded_matmul`)."""
    if not isinstance(m, ShardedMatmul):
        raise ValueError(f"m={_brief(m)} must be a ShardedMatmul: the result of "
                         "sharded_matmul(I, J, K, a_spec, b_spec, mesh_shape)")
    return m


def _check_mesh(mesh_shape):
    """``mesh_shape`` as a dict {axis name: size}; ValueError unless names are strings and
    sizes whole numbers >= 1."""
    if not isinstance(mesh_shape, Mapping):
        raise ValueError(f"mesh_shape={_brief(mesh_shape)} must map mesh axis names to sizes, "
                         "e.g. {'X': 8}")
    for axis, size in mesh_shape.items():
        if not isinstance(axis, str):
            raise ValueError(f"mesh_shape={_brief(mesh_shape)}: axis names are strings, got "
                             f"{axis!r}")
        check_int(f"mesh_shape[{axis!r}]", size)
    return mesh_shape


def _entry(spec, i, what):
    rule = (f"{what}={_brief(spec)} must have one entry per dimension (2 of them), each None "
            "or a mesh axis name")
    if isinstance(spec, (str, bytes, Mapping, np.ndarray)):
        raise ValueError(rule)
    try:
        spec = tuple(spec)
    except TypeError:
        raise ValueError(rule) from None
    if len(spec) != 2:
        raise ValueError(f"{what}={spec!r} must have one entry per dimension (2 of them), "
                         "each None or a mesh axis name")
    v = spec[i]
    if v is not None and not isinstance(v, str):
        raise ValueError(f"{what}={spec!r}: entries are None or one mesh axis name, got {v!r}")
    return v


def _size(axis, mesh_shape):
    if axis is None:
        return 1
    if axis not in mesh_shape:
        raise ValueError(f"mesh axis {axis!r} is not in mesh_shape={dict(mesh_shape)}; "
                         f"valid axes: {', '.join(mesh_shape)}")
    return int(mesh_shape[axis])


def matmul_case(a_spec, b_spec) -> int:
    """Which of the four cases A[a_spec] . B[b_spec] is (1-4, see the module docstring).

    >>> matmul_case(("X", None), (None, "Y")), matmul_case(("X", None), ("X", None))
    (1, 2)
    >>> matmul_case((None, "X"), ("X", None)), matmul_case(("X", None), (None, "X"))
    (3, 4)
    """
    aI, aJ = _entry(a_spec, 0, "a_spec"), _entry(a_spec, 1, "a_spec")
    bJ, bK = _entry(b_spec, 0, "b_spec"), _entry(b_spec, 1, "b_spec")
    for name, (x, y) in (("a_spec", (aI, aJ)), ("b_spec", (bJ, bK))):
        if x is not None and x == y:
            raise ValueError(f"{name}={(x, y)}: one mesh axis cannot shard both dimensions of "
                             "an array")
    if aJ is not None and bJ is not None:
        if aJ != bJ:
            raise ValueError(f"J is sharded over {aJ!r} in A and {bJ!r} in B; this model covers "
                             "J sharded over one axis on both sides (case 3) or on one side "
                             "(case 2): reshard one of them first")
        return 3
    if aJ is not None or bJ is not None:
        return 2
    if aI is not None and aI == bK:
        return 4
    return 1


def sharded_matmul(I, J, K, a_spec, b_spec, mesh_shape, *, dtype="bf16",
                   reduce="all-reduce") -> ShardedMatmul:
    """The collective (and its V) that C[I, K] = A[I, J] . B[J, K] needs under these shardings.

    Case 2 gathers the multiplicand sharded on J (V = its bytes within one group); case 3
    reduces the partial C (V = the bytes of C each device holds, with ``reduce`` "all-reduce"
    or "reduce-scatter", which leaves C sharded on its first free dimension); case 4 gathers
    the smaller multiplicand (B on a tie). Dimensions sharded over other axes stay sharded,
    so V counts only what one group shares. ``mesh_shape`` maps axis names to sizes.

    >>> m = sharded_matmul(64, 32, 16, ("X", None), ("X", None), {"X": 8}, dtype="fp32")
    >>> m.case, m.kind, m.operand, m.nbytes, m.out_spec
    (2, 'all-gather', 'B', 2048.0, ('X', None))
    >>> sharded_matmul(64, 32, 16, (None, "X"), ("X", None), {"X": 8}, dtype="fp32").nbytes
    4096.0
    """
    for name, v in (("I", I), ("J", J), ("K", K)):
        check_count(name, v)
    check_choice("reduce", reduce, REDUCTIONS)
    mesh_shape = _check_mesh(mesh_shape)
    case = matmul_case(a_spec, b_spec)
    (aI, aJ), (bJ, bK) = tuple(a_spec), tuple(b_spec)
    sI, sJ, sK = _size(aI, mesh_shape), _size(aJ or bJ, mesh_shape), _size(bK, mesh_shape)
    for dim, n, ax in (("I", I, aI), ("J", J, aJ or bJ), ("K", K, bK)):
        if ax is not None and n % _size(ax, mesh_shape):
            raise ValueError(f"{dim}={n} is not divisible by the size {_size(ax, mesh_shape)} "
                             f"of mesh axis {ax!r}")
    a = dtype_bytes(dtype)
    flops = 2.0 * I * J * K
    if case == 1:
        return ShardedMatmul(1, None, None, None, 1, 0.0, (aI, bK), flops / (sI * sK))
    if case == 2:
        if aJ is not None:   # gather A[I, J_X] -> A[I, J] (I may stay sharded over another axis)
            return ShardedMatmul(2, "all-gather", "A", aJ, sJ, I / sI * J * a, (aI, bK),
                                 flops / (sI * sK))
        return ShardedMatmul(2, "all-gather", "B", bJ, sJ, J * K / sK * a, (aI, bK),
                             flops / (sI * sK))
    if case == 3:
        V = I / sI * K / sK * a
        out = (aI, bK)
        if reduce == "reduce-scatter":
            if aI is not None and bK is not None:
                raise ValueError(f"C is already sharded on both dimensions {(aI, bK)}; "
                                 "a reduce-scatter has no free dimension: use all-reduce")
            out = (aJ, bK) if aI is None else (aI, aJ)
        return ShardedMatmul(3, reduce, "C", aJ, sJ, V, out, flops / (sI * sJ * sK))
    # case 4: I and K on the same axis; gather the smaller multiplicand
    a_bytes, b_bytes = I * J * a, J * K * a
    if a_bytes < b_bytes:
        return ShardedMatmul(4, "all-gather", "A", aI, sI, a_bytes, (None, bK), flops / sK)
    return ShardedMatmul(4, "all-gather", "B", bK, sK, b_bytes, (aI, None), flops / sI)


def comm_time(m: ShardedMatmul, bytes_per_s, *, topology="ring", latency=0.0, shape=None,
              wraparound=True):
    """Seconds of the collective of ``m`` (0 for case 1), with :func:`collectives.collective_time`.

    >>> m = sharded_matmul(8192, 8192, 8192, (None, "X"), ("X", None), {"X": 8})
    >>> round(comm_time(m, 450e9, topology="switch") * 1e6, 1)   # AllReduce of 128 MiB, H100 node
    522.0
    """
    _check_matmul(m)
    if m.kind is None or m.group_size == 1:
        return 0.0
    return collectives.collective_time(m.kind, m.nbytes, m.group_size, bytes_per_s,
                                       topology=topology, latency=latency, shape=shape,
                                       wraparound=wraparound)


def cluster_comm_time(m: ShardedMatmul, cluster) -> float:
    """Seconds of the collective of ``m`` on the first ``m.group_size`` devices of a cluster."""
    _check_matmul(m)
    if m.kind is None or m.group_size == 1:
        return 0.0
    return float(collectives.hierarchical_time(m.kind, m.nbytes, cluster, m.group_size).total)


def permute_ring_time(m: ShardedMatmul, cluster) -> float:
    """Seconds of a collective matmul's transfers: n - 1 steps of a one-direction
    ``lax.ppermute`` ring, each sending one block of V/n to the neighbour.

    T = (n - 1) · t_permute(V/n), with t_permute from :func:`scaling_lib.collectives.group_time`
    (kind "collective-permute": the bytes each device sends, over the hops to its neighbour).
    On a switch this equals the AllGather's time; on a TPU torus the AllGather runs a
    bidirectional ring (both directions of each link), the one-direction ring only one, so it
    takes about twice as long (a 2x4 v5e slice has no wraparound either, so its ring's closing
    step crosses several hops). Only an all-gather case (2 or 4) has such a ring.

    >>> from scaling_lib import hardware
    >>> m = sharded_matmul(8192, 8192, 28672, ("X", None), ("X", None), {"X": 8})
    >>> tpu = hardware.tpu_slice("tpu-v5e", (2, 4))
    >>> round(permute_ring_time(m, tpu) / cluster_comm_time(m, tpu), 2)
    2.0
    """
    _check_matmul(m)
    if m.kind != "all-gather":
        raise ValueError(f"m.kind={m.kind!r}: a collective matmul's ring replaces an all-gather "
                         "(cases 2 and 4); valid: a ShardedMatmul whose kind is 'all-gather'")
    n = m.group_size
    if n == 1:
        return 0.0
    return float((n - 1) * collectives.group_time("collective-permute", m.nbytes / n, n, 1,
                                                  cluster))


def math_time(m: ShardedMatmul, flops_per_s):
    """Seconds of each device's local matmul at ``flops_per_s``: flops_per_device / C."""
    _check_matmul(m)
    return _out(m.flops_per_device / check_positive("flops_per_s", flops_per_s))


def gather_critical_rows(n, flops_per_s, bytes_per_s, *, dtype="bf16", topology="ring"):
    """Rows per device above which x[r, D] . W[D, F] hides the AllGather of W[D_X, F].

    Case 2 as in FSDP: each device multiplies its r rows by the whole gathered weight
    (2 r D F FLOPs) while the weight's D F a bytes are gathered (b D F a / W, b from
    :func:`collectives.cost_terms`). Equal when r* = b a C / (2 W), independent of D and F.
    Latency is left out.

    >>> round(gather_critical_rows(8, 989.4e12, 450e9, topology="switch"))   # H100 node, bf16
    1924
    """
    _, b = collectives.cost_terms("all-gather", n, topology=topology)
    C = check_positive("flops_per_s", flops_per_s)
    W = check_positive("bytes_per_s", bytes_per_s)
    return _out(np.asarray(b) * dtype_bytes(dtype) * C / (2.0 * W))


def reduce_critical_dim(n, flops_per_s, bytes_per_s, *, dtype="bf16", topology="ring",
                        reduce="all-reduce"):
    """Contracting size J above which A[I, J_X] . B[J_X, K] hides its reduction of C[I, K].

    Case 3: each device does 2 I J K / n FLOPs, then the partial C (I K a bytes) is reduced in
    b I K a / W seconds. Equal when J* = n b a C / (2 W), independent of I and K; on a one-way
    ring AllReduce has b = 2 (n - 1) / n, so J* = (n - 1) a C / W
    (:func:`roofline.network_critical_dim`). Latency is left out.

    >>> round(reduce_critical_dim(8, 989.4e12, 450e9, topology="switch"))   # H100 node, bf16
    30781
    """
    check_choice("reduce", reduce, REDUCTIONS)
    _, b = collectives.cost_terms(reduce, n, topology=topology)
    C = check_positive("flops_per_s", flops_per_s)
    W = check_positive("bytes_per_s", bytes_per_s)
    return _out(np.asarray(n) * np.asarray(b) * dtype_bytes(dtype) * C / (2.0 * W))


def overlapped_time(t_math, t_comm):
    """Time of a matmul whose collective runs while it computes: max(T_math, T_comm).

    The ideal of a collective matmul; without overlap it is T_math + T_comm
    (:func:`roofline.time_bounds` gives both).
    """
    t_math = check_positive("t_math", t_math, allow_zero=True)
    t_comm = check_positive("t_comm", t_comm, allow_zero=True)
    return _out(np.maximum(t_math, t_comm))


def collective_matmul_time(t_math, t_comm, n):
    """A collective matmul's time: the AllGather split into n - 1 ring steps overlapped with n
    partial matmuls.

    Step 0 multiplies the local chunk (T_math / n) while it is sent on; each of the n - 1 later
    steps waits for the larger of its chunk's transfer (T_comm / (n - 1)) and the previous
    partial matmul: T = T_math / n + (n - 1) max(T_math / n, T_comm / (n - 1)).
    Compute-bound it equals T_math; communication-bound, T_comm + T_math / n. Always between
    max(T_math, T_comm) and T_math + T_comm.

    >>> collective_matmul_time(8.0, 7.0, 8), collective_matmul_time(8.0, 14.0, 8)
    (8.0, 15.0)
    """
    t_math = check_positive("t_math", t_math, allow_zero=True)
    t_comm = check_positive("t_comm", t_comm, allow_zero=True)
    n = check_positive("n", n)
    if np.any(np.asarray(n) < 2):
        raise ValueError(f"n={n} must be >= 2 devices for a collective matmul")
    t_m = np.asarray(t_math) / n
    return _out(t_m + (n - 1) * np.maximum(t_m, np.asarray(t_comm) / (n - 1)))


def predicted_collectives(m: ShardedMatmul) -> list[tuple]:
    """The collectives the compiled program should hold: [(kind, group_size, V)] (empty for 1)."""
    _check_matmul(m)
    if m.kind is None or m.group_size == 1:
        return []
    return [(m.kind, m.group_size, m.nbytes)]


def describe(m: ShardedMatmul, a_spec, b_spec) -> str:
    """One line in the book's notation, e.g. "A[I, J_X] . B[J_X, K] -> C[I, K]{U_X} -> ..."."""
    from .simulate import notation
    _check_matmul(m)
    matmul_case(a_spec, b_spec)  # checks both specs
    a = notation(a_spec, "IJ", "A")
    b = notation(b_spec, "JK", "B")
    c = notation(m.out_spec, "IK", "C")
    if m.case == 1:
        return f"{a} · {b} → {c}: no communication"
    if m.case == 3:
        part = notation((a_spec[0], b_spec[1]), "IK", "C") + "{U_" + m.axis + "}"
        return f"{a} · {b} → {part} → {m.kind} over {m.axis} → {c}"
    return f"{a} · {b}: {m.kind} {m.operand} over {m.axis} → {c}"


__all__ = ["CASES", "REDUCTIONS", "ShardedMatmul", "matmul_case", "sharded_matmul", "comm_time",
           "cluster_comm_time", "math_time", "gather_critical_rows", "reduce_critical_dim",
           "overlapped_time", "collective_matmul_time", "predicted_collectives", "describe"]
