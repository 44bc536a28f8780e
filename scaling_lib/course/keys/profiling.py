"""Answer key for Chapter 12 (Profiling JAX programs) exercises."""

from __future__ import annotations

import numpy as np

from ... import profile, simulate
from ...roofline import matmul_bytes, matmul_flops, t_math
from ...transformer import einsum_flops
from ..grading.tables import with_messages

_N_DEVICES = 8
_HLO_BYTES = {"f32": 4, "bf16": 2}


# ---- 12.1 and 12.2: reading HLO -----------------------------------------------------------------


def collective_snippet(p) -> str:
    """Ex 12.1: a compiled HLO module with one collective of kind p.kind over groups of p.n."""
    R, C, n, t = p.R, p.C, p.n, p.dtype
    if p.kind == "all-gather":
        op_shape, res_shape, extra = f"{t}[{R // n},{C}]", f"{t}[{R},{C}]", ", dimensions={0}"
    elif p.kind == "reduce-scatter":
        op_shape, res_shape = f"{t}[{R},{C}]", f"{t}[{R // n},{C}]"
        extra = ", dimensions={0}, to_apply=%add"
    else:
        op_shape, res_shape, extra = f"{t}[{R},{C}]", f"{t}[{R},{C}]", ", to_apply=%add"
    groups = f"[{_N_DEVICES // n},{n}]<=[{_N_DEVICES}]"
    return (f"HloModule jit_step, num_partitions={_N_DEVICES}\n\n"
            f"%add (a: {t}[], b: {t}[]) -> {t}[] {{\n"
            f"  %a = {t}[] parameter(0)\n  %b = {t}[] parameter(1)\n"
            f"  ROOT %s = {t}[] add(%a, %b)\n}}\n\n"
            f"ENTRY %main (p0: {op_shape}) -> {res_shape} {{\n"
            f"  %p0 = {op_shape}{{1,0}} parameter(0)\n"
            f"  ROOT %{p.kind}.1 = {res_shape}{{1,0}} {p.kind}(%p0), channel_id=1, "
            f"replica_groups={groups}, use_global_device_ids=true{extra}\n}}")


def collective_result_bytes(p):
    """Ex 12.1: bytes of the collective's result buffer on each device."""
    (c,) = simulate.parse_hlo_collectives(collective_snippet(p))
    return c.result_bytes


def replica_groups_text(p) -> str:
    """Ex 12.2: an iota replica-groups attribute, transposed or not."""
    g = _N_DEVICES // p.n
    return (f"[{g},{p.n}]<=[{p.n},{g}]T(1,0)" if p.transposed else f"[{g},{p.n}]<=[{_N_DEVICES}]")


def device_set(answer):
    """Ex 12.2: a student's list of device ids as the text the checker compares, "{1, 5}" (order
    and repeats ignored, so [5, 1] is the same group); None stays None (not solved yet). Anything
    that is not a collection of whole numbers becomes a sentence saying so, which the checker
    reports as the answer it got."""
    if answer is None or answer is ...:
        return answer
    if isinstance(answer, (int, np.integer)):
        answer = [answer]
    try:
        values = [float(d) for d in np.ravel(np.asarray(answer, dtype=object))]
        if not values or any(v != int(v) for v in values):
            raise ValueError
        ids = sorted({int(v) for v in values})
    except (TypeError, ValueError):
        return f"not a list of ids: {answer!r}"
    return "{" + ", ".join(str(d) for d in ids) + "}"


def _group(text, device):
    return device_set(sorted(next(g for g in simulate.parse_replica_groups(text) if device in g)))


def group_of_device(p):
    """Ex 12.2: the devices in the same group as device p.device, as :func:`device_set` writes
    them ("{1, 5}")."""
    return _group(replica_groups_text(p), p.device)


# ---- 12.3 to 12.5 and 12.9: cost_analysis and memory_analysis ------------------------------------


def einsum_cost_flops(p):
    """Ex 12.3: cost_analysis FLOPs of einsum('btd,df->btf') on [B, T, D] x [D, F]."""
    return einsum_flops("btd,df->btf", (p.B, p.T, p.D), (p.D, p.F))


def scan_cost_flops(p):
    """Ex 12.4: cost_analysis FLOPs of lax.scan over L layers of h = tanh(h @ W): the body once."""
    return einsum_flops("bd,de->be", (p.B, p.D), (p.D, p.D))


def sharded_cost_flops(p):
    """Ex 12.5: cost_analysis FLOPs of x @ W with x [B, D] sharded over n devices on B."""
    return matmul_flops(p.B, p.D, p.F) / p.n


def sharded_argument_bytes(p):
    """Ex 12.9: memory_analysis argument bytes per device: W [D, F] sharded over n on F, x [B, D]
    replicated."""
    a = _HLO_BYTES[p.dtype]
    return a * (p.D * p.F / p.n + p.B * p.D)


# ---- 12.6 and 12.11: reading a profile ----------------------------------------------------------


def synthetic_events(p):
    """Ex 12.6: a made-up trace (``profile.OpEvent`` list): one op runs once but long, another
    many times briefly and adds up to more."""
    rng = np.random.default_rng(p.trace)
    events, t = [], 0.0
    long_op, many_op = "fusion.7", "all-gather.2"
    plan = [(long_op, p.long_ms * 1e-3)] + [(many_op, p.short_ms * 1e-3)] * p.repeats
    plan += [(f"fusion.{i}", float(rng.uniform(0.1, 0.5)) * 1e-3) for i in range(1, 5)]
    order = rng.permutation(len(plan))
    for i in order:
        op, d = plan[i]
        events.append(profile.OpEvent(op, "jit_step", "0", t, d))
        t += d
    return events


def slowest_in_profile(p):
    """Ex 12.6: the op with the largest total time."""
    return profile.slowest_op(synthetic_events(p))


def slowest_op(events):
    """Ex 12.11 reference: the op with the largest total time in a list of events."""
    return profile.slowest_op(events)


# ---- 12.7, 12.8 and 12.10: the roofline ---------------------------------------------------------


def matmul_bound(p):
    """Ex 12.7: "compute" or "memory" for a bf16 [B, D] x [D, D] matmul on p.accelerator."""
    return profile.bound(matmul_flops(p.B, p.D, p.D), matmul_bytes(p.B, p.D, p.D), p.accelerator)


def measured_time(p):
    """Ex 12.8: the 'measured' time the exercise states: the roofline time x p.slowdown."""
    t = profile.roofline_time(matmul_flops(p.B, p.D, p.D), matmul_bytes(p.B, p.D, p.D),
                              p.accelerator)
    return float(f"{t * p.slowdown:.3g}")


def roofline_efficiency(p):
    """Ex 12.8: roofline time / measured time."""
    t = profile.roofline_time(matmul_flops(p.B, p.D, p.D), matmul_bytes(p.B, p.D, p.D),
                              p.accelerator)
    return t / measured_time(p)


def op_roofline_time(flops, nbytes, accelerator):
    """Ex 12.10 reference: max(F / C, N / W) in bf16."""
    return profile.roofline_time(flops, nbytes, accelerator, "bf16")


# ---- 12.12: the extra all-gather ----------------------------------------------------------------


def mlp_collectives(fn, B, D=64, F=128):
    """Ex 12.12: [all-gather bytes, all-reduce bytes, outputs match] of ``fn(x, w1, w2)`` on 8 CPU
    devices with x [B, D] sharded on B ("X") and the weights replicated (per device, per call).

    Compares the output with the unsharded ``tanh(x @ w1) @ w2``; a function that computes
    something else scores 0 in the last entry.
    """
    import jax
    import jax.numpy as jnp

    mesh = simulate.make_mesh((_N_DEVICES,), ("X",))
    kx, k1, k2 = jax.random.split(jax.random.key(B), 3)
    x = simulate.shard(jax.random.normal(kx, (B, D)), mesh, ("X", None))
    w1 = simulate.shard(jax.random.normal(k1, (D, F)) / D**0.5, mesh, (None, None))
    w2 = simulate.shard(jax.random.normal(k2, (F, D)) / F**0.5, mesh, (None, None))
    found = simulate.collectives_in(fn, x, w1, w2)
    nbytes = {k: sum(c.result_bytes * c.count for c in found if c.kind == k)
              for k in ("all-gather", "all-reduce")}
    got = np.asarray(jax.jit(fn)(x, w1, w2))
    want = np.asarray(jnp.tanh(np.asarray(x) @ np.asarray(w1)) @ np.asarray(w2))
    match = float(got.shape == want.shape and np.allclose(got, want, rtol=1e-4, atol=1e-4))
    return np.array([nbytes["all-gather"], nbytes["all-reduce"], match])


def fixed_mlp_collectives(fn_unused, B, D=64, F=128):
    """Ex 12.12 reference: a data-parallel MLP needs no collective at all, and matches."""
    return np.array([0.0, 0.0, 1.0])


WRONG_METHODS = {
    "12.1": {"the operand's bytes": lambda p: simulate.parse_hlo_collectives(
        collective_snippet(p))[0].operand_bytes,
             "the whole array in f32": lambda p: p.R * p.C * 4.0},
    "12.2": {"untransposed iota read": lambda p: _group(
        f"[{_N_DEVICES // p.n},{p.n}]<=[{_N_DEVICES}]", p.device)},
    "12.3": {"forgot the factor 2": lambda p: einsum_cost_flops(p) / 2},
    "12.4": {"every iteration counted": lambda p: p.L * scan_cost_flops(p)},
    "12.5": {"the global FLOPs": lambda p: matmul_flops(p.B, p.D, p.F)},
    "12.6": {"the longest single execution": lambda p: max(
        synthetic_events(p), key=lambda e: e.duration).op},
    "12.7": {"the weights' bytes left out": lambda p: profile.bound(
        matmul_flops(p.B, p.D, p.D), 2 * (2 * p.B * p.D), p.accelerator)},
    "12.8": {"compute time only": lambda p: t_math(
        matmul_flops(p.B, p.D, p.D), _peak(p)) / measured_time(p)},
    "12.9": {"unsharded weights": lambda p: _HLO_BYTES[p.dtype] * (p.D * p.F + p.B * p.D),
             "bytes in f32 always": lambda p: 4 * (p.D * p.F / p.n + p.B * p.D)},
}


def _peak(p):
    from ... import hardware

    return hardware.get(p.accelerator).peak_flops_per_s("bf16")

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '12.1': ('The shape left of the opcode says the element type and the dimensions.',
             'multiply the dimensions by the bytes of the element type'),
    '12.2': ('The replica groups are written as an iota over a reshaped, transposed array.',
             'lay out 0..7 in the shape after <=, apply the transpose, then read the rows'),
    '12.3': ('How many multiply-adds does the einsum do?',
             'one multiply and one add for every combination of all its indices'),
    '12.4': ('Does cost_analysis know how many times the loop runs?',
             'it visits each instruction of the program once, the loop body included'),
    '12.5': ('After partitioning, whose program is compiled?',
             'the compiled module is what one device runs: divide accordingly'),
    '12.6': ('One op can appear many times in a trace.',
             "add up each op's durations before comparing"),
    '12.7': ("Compare the op's math time with its memory time.",
             'F/C against N/W, with N counting x, W and the output once each'),
    '12.8': ('The roofline time is not always the compute time.',
             'take the larger of F/C and N/W and compare the measured time with it'),
    '12.9': ('What does each device hold of w, and of x?',
             'its shard of w and a full copy of x'),
    '12.10': ('The slower of math and memory decides.',
              'the larger of FLOPs over the bf16 peak and bytes over HBM bandwidth'),
    '12.11': ('An op may run many times: total it first.',
              'sum the durations per op name, then take the largest'),
    '12.12': ('The sharding constraint disagrees with how h is produced.',
              'constrain h to the batch sharding (or drop the constraint) so XLA need not '
              'gather it'),
}


# ---- More listed mistakes, each with what the student reads (issue 21).

def _most_frequent(events):
    counts = {}
    for e in events:
        counts[e.op] = counts.get(e.op, 0) + 1
    return max(counts, key=counts.get)


def _mlp_sharded_features(x, w1, w2):
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = simulate.make_mesh((_N_DEVICES,), ("X",))
    h = jnp.tanh(x @ w1)
    h = jax.lax.with_sharding_constraint(h, NamedSharding(mesh, P(None, "X")))
    return h @ w2


def _mlp_replicated(x, w1, w2):
    import jax
    import jax.numpy as jnp
    from jax.sharding import NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = simulate.make_mesh((_N_DEVICES,), ("X",))
    h = jax.lax.with_sharding_constraint(jnp.tanh(x @ w1), NamedSharding(mesh, P()))
    return h @ w2


WRONG_METHODS["12.2"]["G groups read as n"] = (
    lambda p: _group(f"[{p.n},{_N_DEVICES // p.n}]<=[{_N_DEVICES}]", p.device),
    "[G,n] is G groups of n devices each: count the members of your group, then read the "
    "transposed layout's rows of n")
WRONG_METHODS["12.2"]["the group of device 0"] = (
    lambda p: _group(replica_groups_text(p), 0),
    "that is device 0's group: find the group that contains the device the question names")
WRONG_METHODS["12.3"]["one multiply-add per output element"] = (
    lambda p: 2 * p.B * p.T * p.F,
    "each output element sums D products: count a multiply and an add for every (b, t, d, f)")
WRONG_METHODS["12.4"]["the body counted L - 1 times"] = (
    lambda p: (p.L - 1) * scan_cost_flops(p),
    "cost_analysis visits the loop body once, whatever the trip count")
WRONG_METHODS["12.5"]["divided by n twice"] = (
    lambda p: sharded_cost_flops(p) / p.n,
    "each device multiplies its B/n rows by the whole W: divide the global FLOPs by n once")
WRONG_METHODS["12.6"]["the first op of the trace"] = (
    lambda p: synthetic_events(p)[0].op,
    "that is the first op in the trace: add up each op's durations and take the largest total")
WRONG_METHODS["12.7"]["fp32 bytes (4 per value)"] = (
    lambda p: profile.bound(matmul_flops(p.B, p.D, p.D), 2 * matmul_bytes(p.B, p.D, p.D),
                            p.accelerator),
    "the matmul is bf16: 2 bytes per value")
WRONG_METHODS["12.8"]["measured over roofline (inverted)"] = (
    lambda p: 1 / roofline_efficiency(p),
    "that is the measured time over the roofline time: the efficiency is roofline over measured, "
    "at most 1")
WRONG_METHODS["12.10"] = {
    "the sum of the two times": (
        lambda flops, nbytes, accelerator: profile.roofline_time(flops, 0, accelerator)
        + profile.roofline_time(0, nbytes, accelerator),
        "the roofline time is the larger of the math and memory times, not their sum"),
    "the math time only": (
        lambda flops, nbytes, accelerator: profile.roofline_time(flops, 0, accelerator),
        "a memory-bound op takes its memory time: take the larger of the two"),
}
WRONG_METHODS["12.11"] = {
    "the longest single event": (
        lambda events: max(events, key=lambda e: e.duration).op,
        "an op that runs many times can take more time in total: add each op's durations "
        "first"),
    "the most frequent op": (
        _most_frequent,
        "that op runs most often, but the slowest is the one whose durations add up to the most"),
}
WRONG_METHODS["12.12"] = {
    "features sharded instead of the batch": (
        lambda B: mlp_collectives(_mlp_sharded_features, B),
        "sharding h on its features makes the second matmul a partial sum: constrain it to the "
        "batch sharding P('X', None), as x is"),
    "the replicated constraint kept": (
        lambda B: mlp_collectives(_mlp_replicated, B),
        "a replicated h forces an all-gather of the batch: keep it sharded on the batch"),
}

with_messages(WRONG_METHODS, {
    "12.1": {"the operand's bytes": "read the result's shape, left of the opcode",
             "the whole array in f32": "read the element type and dimensions the HLO gives"},
    "12.2": {"untransposed iota read": "those are consecutive devices, the rows of 0..7 read "
             "without the transpose: lay the ids out as the shape after <=, apply T(1,0), then cut "
             "the result into the rows of [G,n]"},
    "12.3": {"forgot the factor 2": "cost_analysis counts a multiply and an add: 2 FLOPs"},
    "12.4": {"every iteration counted": "cost_analysis visits the loop body once"},
    "12.5": {"the global FLOPs": "the compiled module is what one device runs: 1/n of the work"},
    "12.6": {"the longest single execution": "add each op's durations before comparing"},
    "12.7": {"the weights' bytes left out": "the matmul reads its [D, D] weights too"},
    "12.8": {"compute time only": "the roofline time is the larger of F/C and N/W"},
    "12.9": {"unsharded weights": "each device holds its 1/n shard of w",
             "bytes in f32 always": "use the bytes of the drawn dtype"},
})
