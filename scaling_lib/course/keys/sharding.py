"""Answer key for Chapter 9 (Sharded arrays and how to multiply them) exercises.

The implement-it references run on the simulated devices: the notebook asks for 8 CPU devices
(``simulate.use_cpu_devices(8)``) before it imports this module's JAX-using functions.
"""

from __future__ import annotations

import numpy as np

from ... import collectives as C
from ... import hardware, simulate
from ... import roofline as rl
from ... import sharding as S
from ..grading.tables import with_messages

# Layouts of A[I, J] . B[J, K] for exercise 9.1, in the book's notation.
LAYOUTS = {
    "A[I_X, J] · B[J, K]": (("X", None), (None, None)),
    "A[I_X, J] · B[J, K_Y]": (("X", None), (None, "Y")),
    "A[I, J_X] · B[J, K]": ((None, "X"), (None, None)),
    "A[I_X, J] · B[J_X, K]": (("X", None), ("X", None)),
    "A[I, J_X] · B[J_X, K]": ((None, "X"), ("X", None)),
    "A[I_Y, J_X] · B[J_X, K]": (("Y", "X"), ("X", None)),
    "A[I_X, J] · B[J, K_X]": (("X", None), (None, "X")),
}


def _system(name):
    """(peak bf16 FLOP/s, the bytes_per_s argument, topology) of 9.4 / 9.5's systems."""
    if name == "h100-node":
        node = hardware.cluster("h100", 8)
        return node.accelerator.peak_flops_per_s(), node.intra_node.bytes_per_s, "switch"
    if name == "tpu-v5e-ring":
        pod = hardware.get_cluster("tpu-v5e-pod")
        return (pod.accelerator.peak_flops_per_s(), pod.intra_node.per_link_bytes_per_s,
                "bidirectional_ring")
    raise ValueError(f"system={name!r}; valid choices: h100-node, tpu-v5e-ring")


#: Ex 9.1's answer where two programs are right: J sharded on one operand over an axis the other
#: operand does not use. Gather the sharded operand (case 2), or slice the replicated one along J
#: locally (free) and all-reduce the partial sums (case 3): cheaper when C is smaller than half
#: the gathered operand (an AllReduce moves twice an AllGather's bytes).
EITHER = "all-gather or all-reduce"


def _alternative_reduce(a_spec, b_spec):
    """J sharded on exactly one operand, over an axis the other operand does not use."""
    ja, jb = a_spec[1], b_spec[0]
    if bool(ja) == bool(jb):
        return False
    axis, other = (ja, b_spec) if ja else (jb, a_spec)
    return axis not in other


def which_collective(p):
    """Ex 9.1: the collective a layout needs ("none" for case 1); :data:`EITHER` where gathering
    the J-sharded operand and slicing the other then all-reducing are both right."""
    a_spec, b_spec = LAYOUTS[p.layout]
    if _alternative_reduce(a_spec, b_spec):
        return EITHER
    m = S.sharded_matmul(8, 8, 8, a_spec, b_spec, {"X": 2, "Y": 2})
    return m.kind or "none"


SYNONYMS = {"9.1": {EITHER: ("all-gather", "all-reduce", "allgather", "allreduce",
                             "all gather", "all reduce", "all-gather or all-reduce",
                             "all-reduce or all-gather")}}


def fsdp_gather_received(p):
    """Ex 9.2: bytes each device receives gathering a bf16 W[D_X, F] over n devices."""
    m = S.sharded_matmul(p.n, p.D, p.F, ("X", None), ("X", None), {"X": p.n})
    return C.collective_bytes(m.kind, m.nbytes, m.group_size).received_bytes


def node_all_reduce_time(p):
    """Ex 9.3: seconds to all-reduce the partial C[B, F] of x[B, D_X] . W[D_X, F] on a DGX H100."""
    m = S.sharded_matmul(p.B, 8 * 1024, p.F, (None, "X"), ("X", None), {"X": 8})
    return S.cluster_comm_time(m, hardware.cluster("h100", 8))


def reduce_threshold(p):
    """Ex 9.4: the contracting size J above which case 3 hides its AllReduce."""
    flops, bw, topology = _system(p.system)
    return S.reduce_critical_dim(p.n, flops, bw, topology=topology)


def gather_threshold(p):
    """Ex 9.5: rows per device above which case 2 hides the AllGather of the weight."""
    flops, bw, topology = _system(p.system)
    return S.gather_critical_rows(p.n, flops, bw, topology=topology)


def _fsdp_times(p):
    node = hardware.cluster("h100", 8)
    m = S.sharded_matmul(8 * p.rows, p.D, p.F, ("X", None), ("X", None), {"X": 8})
    return S.math_time(m, node.accelerator.peak_flops_per_s()), S.cluster_comm_time(m, node)


def overlap_speedup(p):
    """Ex 9.6: how many times faster case 2 runs with its AllGather overlapped than after it."""
    lower, upper = rl.time_bounds(*_fsdp_times(p))
    return upper / lower


def collective_matmul(p):
    """Ex 9.7: a collective matmul's time from T_math, T_comm (seconds) and n."""
    return S.collective_matmul_time(p.t_math, p.t_comm, p.n)


def cpu_all_reduce_bytes(p):
    """Ex 9.8: operand bytes XLA:CPU reports for case 3's all-reduce of a bf16 C[I, K]."""
    moved = simulate.cpu_collective_dtype("bf16")
    V = p.I * p.K * simulate.HLO_TYPE_BYTES[moved]
    return C.collective_bytes("all-reduce", V, 8).operand_bytes


def case4_gather_bytes(p):
    """Ex 9.9: V of the multiplicand gathered in A[I_X, J] . B[J, K_X] (bf16)."""
    return S.sharded_matmul(p.I, p.J, p.K, ("X", None), (None, "X"), {"X": 8}).nbytes


def all_to_all_sent(p):
    """Ex 9.12: bytes each device sends to reshard a bf16 x[T_X, D] into x[T, D_X] over n."""
    return C.collective_bytes("all-to-all", 2.0 * p.T * p.D, p.n).sent_bytes


# ---- wrong methods (tests/test_wrong_methods.py: each must FAIL at the cell's tolerance) ---------

def _wrong_reduce_scatter(p):
    """Case 3 answered as a reduce-scatter: right only when C may stay sharded, which 9.1's
    question (C replicated or as the layout leaves it) rules out."""
    got = which_collective(p)
    return "reduce-scatter" if got in ("all-reduce", EITHER) else got


WRONG_METHODS = {
    "9.1": {"a reduce-scatter for the partial sums": _wrong_reduce_scatter},
    "9.2": {"the whole array V": lambda p: p.D * p.F * 2,
            "fp32 weights": lambda p: 2 * fsdp_gather_received(p)},
    "9.3": {"an AllGather's cost": lambda p: node_all_reduce_time(p) / 2,
            "the bytes of one shard": lambda p: node_all_reduce_time(p) / 8},
    "9.4": {"the per-device matmul not divided by n": lambda p: reduce_threshold(p) / p.n,
            "both directions' bandwidth": lambda p: reduce_threshold(p) / 2},
    "9.5": {"matmul FLOPs without the 2": lambda p: 2 * gather_threshold(p),
            "without the (n - 1) / n": lambda p: gather_threshold(p) * p.n / (p.n - 1)},
    "9.6": {"the ratio the wrong way round": lambda p: 1 / overlap_speedup(p),
            "the sum over T_math": lambda p: sum(_fsdp_times(p)) / _fsdp_times(p)[0]},
    "9.7": {"the ideal max(T_math, T_comm)": lambda p: max(p.t_math, p.t_comm),
            "no overlap": lambda p: p.t_math + p.t_comm},
    "9.8": {"bf16 bytes": lambda p: cpu_all_reduce_bytes(p) / 2,
            "one shard of C": lambda p: cpu_all_reduce_bytes(p) / 8},
    "9.12": {"an AllGather's bytes": lambda p: C.collective_bytes(
                 "all-gather", 2.0 * p.T * p.D, p.n).sent_bytes,
             "the whole shard sent": lambda p: 2.0 * p.T * p.D / p.n},
    "9.9": {"the larger multiplicand": lambda p: max(p.I, p.K) * p.J * 2,
            "only B's shard": lambda p: p.J * p.K * 2 / 8},
}

# ---- implement-it references (run on the 8 simulated devices) ------------------------------------


def matmul_reference(A, B):
    """Ex 9.10 / 9.11 reference: the unsharded product, in numpy."""
    return np.asarray(A, np.float32) @ np.asarray(B, np.float32)


def _mesh():
    return simulate.make_mesh((8,), ("X",))


def explain_jax_error(exc, axis, blocks):
    """A student-facing ValueError for the raw JAX errors a per-device function commonly raises
    (9.10, 9.11, 10.11, 10.12), or None to let the checker report the error itself.

    ``axis`` is the mesh axis the exercise names; ``blocks`` says what each device holds (a
    phrase such as "a is [I, J/8] and b is [J/8, K]").

    >>> e = TypeError("dot_general requires contracting dimensions to have the same shape, "
    ...               "got (16,) and (2,).")
    >>> "[I, J/8]" in str(explain_jax_error(e, "X", "a is [I, J/8] and b is [J/8, K]"))
    True
    """
    import re

    text = " ".join(str(exc).split())
    if isinstance(exc, (AssertionError, NameError)) and (not text or "axis" in text):
        return ValueError(f"a collective names a mesh axis that does not exist: the mesh has one "
                          f"axis, {axis!r} (names are case-sensitive)")
    if "unbound axis name" in text or "axis name" in text and "not found" in text:
        return ValueError(f"a collective names a mesh axis that does not exist: the mesh has one "
                          f"axis, {axis!r} (names are case-sensitive)")
    m = re.search(r"contracting dimensions to have the same shape, got \((\d+),?\) and \((\d+),?\)",
                  text)
    if m:
        return ValueError(f"a matmul multiplies blocks whose contracting sizes differ "
                          f"({m.group(1)} and {m.group(2)}): inside the function each device holds only its "
                          f"block ({blocks}), so a sharded dimension is 1/8 of its full size "
                          f"until it is gathered")
    import traceback

    frames = traceback.extract_tb(exc.__traceback__)
    inside_jax = bool(frames) and frames[-1].filename == __file__  # JAX hides its own frames
    if isinstance(exc, IndexError) and inside_jax:
        return ValueError(f"an index out of range inside a collective, most often a lax.ppermute "
                          f"pair naming a device outside the axis {axis!r}: every (source, "
                          f"destination) must be in 0..n-1, wrapping round with % n (for example "
                          f"(i, (i - 1) % n))")
    if "incompatible shapes" in text.lower() or "shapes must be equal" in text.lower():
        return ValueError(f"two arrays of different shapes are combined: each device holds only "
                          f"its block ({blocks}); check which dimensions are still split")
    return None


def _run_explained(f, args, axis, blocks):
    """``f(*args)`` with :func:`explain_jax_error`'s translation of a raw JAX error."""
    try:
        return f(*args)
    except Exception as exc:  # a student's function: name the slip where it is a known one
        said = explain_jax_error(exc, axis, blocks)
        if said is None:
            raise
        raise said from None


def on_devices(local, layout):
    """Wrap a student's per-device ``local(a, b)`` as ``run(A, B) -> C`` on 8 simulated devices.

    ``layout`` "case 3": A[I, J_X] . B[J_X, K] -> C[I, K]; "collective": A[I_X, J] . B[J_X, K]
    -> C[I_X, K] with no AllGather allowed. Raises ValueError (which the checker reports as a
    FAIL line) when the compiled collectives are not the ones the exercise asks for.
    """
    import jax
    from jax.sharding import PartitionSpec as P

    specs = {"case 3": (((None, "X"), ("X", None)), (None, None)),
             "collective": ((("X", None), ("X", None)), ("X", None))}
    if layout not in specs:
        raise ValueError(f"layout={layout!r}; valid choices: {', '.join(specs)}")
    (sa, sb), sc = specs[layout]

    def run(A, B):
        mesh = _mesh()
        f = jax.jit(jax.shard_map(local, mesh=mesh, in_specs=(P(*sa), P(*sb)), out_specs=P(*sc)))
        a, b = simulate.shard(A, mesh, sa), simulate.shard(B, mesh, sb)
        blocks = ("a is [I, J/8] and b is [J/8, K]" if layout == "case 3" else
                  "a is [I/8, J] and b is [J/8, K]")
        out = np.asarray(_run_explained(f, (a, b), "X", blocks))
        found = simulate.collectives_in(f, a, b)
        I, J = A.shape
        K = B.shape[1]
        m = S.sharded_matmul(I, J, K, sa, sb, {"X": 8}, dtype="fp32")
        kinds = sorted(c.kind for c in found for _ in range(c.count))
        if layout == "case 3":
            want = C.collective_bytes(m.kind, m.nbytes, 8)
            ok = [(c.kind, c.operand_bytes) for c in found] == [(m.kind, want.operand_bytes)]
            if not ok:
                raise ValueError(f"compiled collectives {kinds or 'none'}; expected one all-reduce "
                                 f"of the partial C ({want.operand_bytes:.0f} bytes per device)")
        else:
            sent = sum(c.operand_bytes * c.count for c in found)
            want = C.collective_bytes("all-gather", m.nbytes, 8).received_bytes
            if set(kinds) != {"collective-permute"} or sent != want:
                raise ValueError(f"compiled collectives {kinds or 'none'} moving {sent:.0f} "
                                 f"bytes; expected only collective-permutes (ppermute) moving "
                                 f"{want:.0f} bytes, what the AllGather would")
        return out

    return run

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '9.1': ('Does the contracting dimension (or an output dimension used twice) live on a mesh '
            'axis?',
            'only a sharded contracting dimension needs a collective after the multiply; two '
            'output dimensions on one axis need one before'),
    '9.2': ('What must arrive at each device, and what does it already hold?',
            'the gathered weight is V = D·F·a bytes; each device holds V/n of it'),
    '9.3': ('Case 3 leaves partial sums: which collective adds them, and on which network?',
            "an AllReduce (a ReduceScatter plus an AllGather) of the output's bytes over the "
            "node's NVLink"),
    '9.4': ('Compare the math time with the AllReduce time, each in terms of the sizes.',
            'write T_math and T_comm per device; two sizes cancel and leave a condition on the '
            'contracting size'),
    '9.5': ("Compare the matmul's time with the time to gather the weight.",
            'D and F cancel: the condition is on the rows r, the chip and the link'),
    '9.6': ('Overlap replaces a sum by a max.',
            'compare the time without overlap (the sum) with the time with it (the larger)'),
    '9.7': ('A collective matmul overlaps each transfer with a partial matmul.',
            'the first partial matmul has nothing to hide; each later step takes the longer of '
            'its transfer and its matmul'),
    '9.8': ('What does each device all-reduce, and in which dtype on CPU?',
            'each device all-reduces its whole partial output; XLA:CPU moves bf16 collectives '
            'as f32'),
    '9.9': ('Either input can be gathered: which is smaller?',
            'gathering one gives one output sharding, gathering the other another; both are '
            'correct, so gather the smaller'),
    '9.12': ('After the exchange each device holds one column block of every row block.',
             'cut your shard into n blocks; count the ones that must go to another device'),
    '9.10': ('Each device holds a slice of the contracting dimension.',
             'multiply the local blocks, then add the partial results over the mesh axis'),
    '9.11': ('Each step multiplies the block you hold while the next one arrives.',
             'at each step compute with your block, then pass it to a neighbour with ppermute; '
             'after 7 steps you have seen all 8'),
}


# ---- More listed mistakes, each with what the student reads (issue 21).

def _case3_pmean(a, b):
    from jax import lax

    return lax.pmean(a @ b, "X")


def _case3_no_sum(a, b):
    return a @ b


def _collective_gather(a, b):
    from jax import lax

    return a @ lax.all_gather(b, "X", axis=0, tiled=True)


def _collective_own_block_only(a, b):
    from jax import lax

    rows = b.shape[0]
    d = lax.axis_index("X")
    return lax.dynamic_slice_in_dim(a, d * rows, rows, axis=1) @ b


WRONG_METHODS["9.1"]["an AllGather for any sharded dimension"] = (
    lambda p: "all-gather" if any(LAYOUTS[p.layout][0] + LAYOUTS[p.layout][1]) else "none",
    "a sharded output dimension needs no collective: only a sharded contracting dimension "
    "(a partial sum) or a dimension sharded twice on one axis does")
WRONG_METHODS["9.10"] = {
    "partial sums returned (no psum)": (
        lambda A, B: on_devices(_case3_no_sum, "case 3")(A, B),
        "each device's product is a partial sum over its slice of J: add them over 'X' "
        "(lax.psum) before returning"),
    "pmean instead of psum": (
        lambda A, B: on_devices(_case3_pmean, "case 3")(A, B),
        "that averages the partial sums: C is their sum, so use lax.psum"),
}
WRONG_METHODS["9.11"] = {
    "an AllGather of B": (
        lambda A, B: on_devices(_collective_gather, "collective")(A, B),
        "that gathers B in one collective: the exercise asks you to pass its blocks around "
        "with ppermute while multiplying, so that no AllGather is compiled"),
    "own block only (no ppermute)": (
        lambda A, B: on_devices(_collective_own_block_only, "collective")(A, B),
        "each device multiplies only the block of B it holds: pass the blocks round the ring "
        "(ppermute) and add all 8 products"),
}

with_messages(WRONG_METHODS, {
    "9.1": {"a reduce-scatter for the partial sums":
            "a ReduceScatter leaves C sharded over the axis; the question asks for C with only "
            "the shardings its layout implies (replicated over the contracting axis): an "
            "AllReduce"},
    "9.2": {"the whole array V": "each device already holds V/n: it receives the rest",
            "fp32 weights": "the weights are bf16, 2 bytes each"},
    "9.3": {"an AllGather's cost": "an AllReduce is a ReduceScatter plus an AllGather",
            "the bytes of one shard": "the AllReduce moves the whole partial output C"},
    "9.4": {"the per-device matmul not divided by n": "each device does 1/n of the math",
            "both directions' bandwidth": "use the one-way bandwidth"},
    "9.5": {"matmul FLOPs without the 2": "a multiply-add is 2 FLOPs",
            "without the (n - 1) / n": "each device already holds 1/n of the weight"},
    "9.6": {"the ratio the wrong way round": "the speed-up is the time without over the time with",
            "the sum over T_math": "overlap hides the shorter of the two: divide by the larger"},
    "9.7": {"the ideal max(T_math, T_comm)": "the first partial matmul has nothing to overlap",
            "no overlap": "a collective matmul overlaps each transfer with a partial matmul"},
    "9.8": {"bf16 bytes": "XLA:CPU moves bf16 collectives as f32",
            "one shard of C": "each device all-reduces its whole partial C"},
    "9.12": {"an AllGather's bytes": "that is what an AllGather sends: an AllToAll replicates "
                                     "nothing, so each device sends only the blocks it gives away",
             "the whole shard sent": "each device keeps one of its n blocks (the one that stays "
                                     "on it): it sends n - 1 of them"},
    "9.9": {"the larger multiplicand": "gather the smaller one: both orders give a right answer",
            "only B's shard": "count the bytes each device receives to gather the whole input"},
})
