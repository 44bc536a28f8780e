"""Sharded matmuls: the four cases, their collectives and costs, and the compiled programs.

Formula goldens and invariants first (no JAX); then, on 8 simulated CPU devices, each case as a
real program (automatic sharding with jax.jit, and manual with jax.shard_map) whose numbers equal
numpy and whose compiled collectives equal ``sharding.sharded_matmul``'s prediction.

XLA:CPU rewrites are named, never hidden by a looser comparison: in automatic mode a reduction
to a sharded C (case 3 with a ReduceScatter) compiles on CPU to an all-reduce of the whole
partial C followed by a local slice (XLA's GPU pipeline has a reduce-scatter-creator pass; the
CPU one does not), so that test expects the all-reduce.
"""

import math
import tempfile

import numpy as np
import pytest

from scaling_lib import collectives as C
from scaling_lib import hardware as hw
from scaling_lib import roofline as rl
from scaling_lib import sharding as S

MESH = {"X": 8, "Y": 2}


# ---- cases ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("a_spec, b_spec, case", [
    ((None, None), (None, None), 1), (("X", None), (None, None), 1), (("X", None), (None, "Y"), 1),
    ((None, None), (None, "X"), 1),
    ((None, "X"), (None, None), 2), (("X", None), ("X", None), 2), (("Y", None), ("X", "Y"), 2),
    ((None, "X"), ("X", None), 3), (("Y", "X"), ("X", None), 3),
    (("X", None), (None, "X"), 4),
])
def test_matmul_case(a_spec, b_spec, case):
    assert S.matmul_case(a_spec, b_spec) == case


@pytest.mark.parametrize("a_spec, b_spec, match", [
    (("X", "X"), (None, None), "both dimensions"),
    ((None, "X"), ("Y", None), "reshard"),
    (("X",), (None, None), "one entry per dimension"),
])
def test_matmul_case_rejects(a_spec, b_spec, match):
    with pytest.raises(ValueError, match=match):
        S.matmul_case(a_spec, b_spec)


def test_sharded_matmul_errors_name_the_rule():
    with pytest.raises(ValueError, match="not divisible"):
        S.sharded_matmul(60, 32, 16, ("X", None), (None, None), MESH)
    with pytest.raises(ValueError, match="not in mesh_shape"):
        S.sharded_matmul(64, 32, 16, ("Z", None), (None, None), MESH)
    with pytest.raises(ValueError, match="valid choices"):
        S.sharded_matmul(64, 32, 16, (None, "X"), ("X", None), MESH, reduce="psum")
    with pytest.raises(ValueError, match="no free dimension"):
        S.sharded_matmul(64, 32, 16, ("Y", "X"), ("X", "Y"), {"X": 2, "Y": 2},
                         reduce="reduce-scatter")


def test_case_bytes_goldens():
    # hand-computed, bf16 (2 bytes): V is the array the collective works on within one group
    m2 = S.sharded_matmul(1024, 4096, 8192, ("X", None), ("X", None), MESH)
    assert (m2.kind, m2.operand, m2.nbytes, m2.out_spec) == ("all-gather", "B", 4096 * 8192 * 2,
                                                            ("X", None))
    m2a = S.sharded_matmul(1024, 4096, 8192, (None, "X"), (None, "Y"), MESH)
    assert (m2a.operand, m2a.nbytes, m2a.out_spec) == ("A", 1024 * 4096 * 2, (None, "Y"))
    m3 = S.sharded_matmul(1024, 4096, 8192, ("Y", "X"), ("X", None), MESH)
    assert (m3.kind, m3.nbytes, m3.group_size) == ("all-reduce", 512 * 8192 * 2, 8)
    m3rs = S.sharded_matmul(1024, 4096, 8192, (None, "X"), ("X", None), MESH,
                            reduce="reduce-scatter")
    assert (m3rs.kind, m3rs.out_spec) == ("reduce-scatter", ("X", None))
    m4 = S.sharded_matmul(1024, 4096, 8192, ("X", None), (None, "X"), MESH)
    assert (m4.operand, m4.nbytes, m4.out_spec) == ("A", 1024 * 4096 * 2, (None, "X"))
    m1 = S.sharded_matmul(1024, 4096, 8192, ("X", None), (None, "Y"), MESH)
    assert (m1.kind, m1.nbytes, S.comm_time(m1, 1e9)) == (None, 0.0, 0.0)


@pytest.mark.parametrize("a_spec, b_spec", [
    (("X", None), (None, "Y")), (("X", None), ("X", None)), ((None, "X"), ("X", None)),
    (("Y", "X"), ("X", None)), (("X", None), (None, "X")), ((None, "X"), (None, "Y")),
])
def test_flops_split_over_the_work(a_spec, b_spec):
    """Invariant: the devices share 2 I J K; every case does no more than all of it per device."""
    I, J, K = 256, 512, 128
    m = S.sharded_matmul(I, J, K, a_spec, b_spec, MESH)
    axes = {a for a in (*m.out_spec, m.axis if m.case == 3 else None) if a}
    assert m.flops_per_device * math.prod(MESH[a] for a in axes) == 2 * I * J * K


def test_reduce_scatter_costs_half_an_all_reduce():
    kw = dict(I=4096, J=8192, K=8192, a_spec=(None, "X"), b_spec=("X", None), mesh_shape=MESH)
    ar = S.comm_time(S.sharded_matmul(**kw), 450e9, topology="switch")
    rs = S.comm_time(S.sharded_matmul(**kw, reduce="reduce-scatter"), 450e9, topology="switch")
    assert rs == pytest.approx(ar / 2, rel=1e-12)


def test_comm_time_uses_collectives():
    m = S.sharded_matmul(4096, 8192, 8192, ("X", None), ("X", None), MESH)
    assert S.comm_time(m, 45e9, topology="bidirectional_ring", latency=1e-6) == \
        C.all_gather_time(m.nbytes, 8, 45e9, topology="bidirectional_ring", latency=1e-6)
    node = hw.cluster("h100", 8)
    assert S.cluster_comm_time(m, node) == pytest.approx(
        C.all_gather_time(m.nbytes, 8, node.intra_node.bytes_per_s, topology="switch",
                          latency=node.intra_node.latency), rel=1e-12)


def test_reduce_critical_dim_matches_roofline_on_a_ring():
    """Golden: on a one-way ring J* = (n - 1) a C / W, roofline.network_critical_dim."""
    v5e = hw.get("tpu-v5e")
    for n in (2, 4, 8, 16):
        assert S.reduce_critical_dim(n, v5e.peak_flops_per_s(), 45e9) == pytest.approx(
            rl.network_critical_dim("tpu-v5e", n, link_bytes_per_s=45e9), rel=1e-12)


@pytest.mark.parametrize("threshold, make", [
    ("gather", lambda r: S.sharded_matmul(r * 8, 4096, 8192, ("X", None), ("X", None), MESH)),
    ("reduce", lambda J: S.sharded_matmul(2048, J, 4096, (None, "X"), ("X", None), MESH)),
])
def test_thresholds_balance_math_and_comms(threshold, make):
    """At the critical size, T_math == T_comm (bandwidth terms) for the planned collective."""
    h100 = hw.get("h100")
    Cf, W = h100.peak_flops_per_s(), 450e9
    if threshold == "gather":
        x = S.gather_critical_rows(8, Cf, W, topology="switch")
    else:
        x = S.reduce_critical_dim(8, Cf, W, topology="switch")
    size = 1024   # T_math grows in proportion to the size, T_comm does not depend on it
    m = make(size)
    assert S.math_time(m, Cf) / S.comm_time(m, W, topology="switch") == pytest.approx(size / x,
                                                                                     rel=1e-9)
    assert 1000 < x < 40000


def test_collective_matmul_between_bounds():
    rng = np.random.default_rng(0)
    tm, tc = rng.uniform(0.1, 10, 200), rng.uniform(0.1, 10, 200)
    for n in (2, 4, 8, 64):
        t = S.collective_matmul_time(tm, tc, n)
        lo, hi = rl.time_bounds(tm, tc)
        assert np.all(t >= lo - 1e-12) and np.all(t <= hi + 1e-12)
    assert S.collective_matmul_time(8.0, 1.0, 8) == 8.0              # compute-bound: T_math
    assert S.collective_matmul_time(1.0, 8.0, 8) == pytest.approx(8.0 + 1 / 8)
    assert S.overlapped_time(3.0, 5.0) == 5.0
    with pytest.raises(ValueError, match=">= 2"):
        S.collective_matmul_time(1.0, 1.0, 1)


def test_describe_in_book_notation():
    m = S.sharded_matmul(64, 32, 16, (None, "X"), ("X", None), {"X": 8})
    assert S.describe(m, (None, "X"), ("X", None)) == \
        "A[I, J_X] · B[J_X, K] → C[I, K]{U_X} → all-reduce over X → C[I, K]"


# ---- on 8 simulated devices ----------------------------------------------------------------------

@pytest.fixture(scope="module")
def jx():
    jax = pytest.importorskip("jax")
    from scaling_lib import simulate as sim
    sim.use_cpu_devices(8)
    jax.config.update("jax_compilation_cache_dir", tempfile.mkdtemp(prefix="scaling_lib_jax_"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    return jax, sim


I_, J_, K_ = 64, 32, 16
FOUR = {  # name: (A spec, B spec, C spec, reduce)
    "case 1": (("X", None), (None, None), ("X", None), "all-reduce"),
    "case 2": (("X", None), ("X", None), ("X", None), "all-reduce"),
    "case 3": ((None, "X"), ("X", None), (None, None), "all-reduce"),
    "case 4": (("X", None), (None, "X"), ("X", None), "all-reduce"),
}


def _emitted(cs):
    return sorted((c.kind, c.group_size, c.operand_bytes, c.result_bytes, c.count) for c in cs)


def _predicted(m, elem_bytes=4):
    if m.kind is None:
        return []
    V = m.nbytes / 4 * elem_bytes     # the library's V is fp32 here; XLA:CPU dtype may differ
    b = C.collective_bytes(m.kind, V, m.group_size)
    return [(m.kind, m.group_size, b.operand_bytes, b.result_bytes, 1)]


def _operands():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((I_, J_)).astype(np.float32),
            rng.standard_normal((J_, K_)).astype(np.float32))


@pytest.mark.parametrize("name", list(FOUR))
def test_automatic_sharding_compiles_the_predicted_collective(jx, name):
    jax, sim = jx
    from jax.sharding import NamedSharding, PartitionSpec as P
    sa, sb, sc, _ = FOUR[name]
    mesh = sim.make_mesh((8,), ("X",))
    A, B = _operands()
    a, b = sim.shard(A, mesh, sa), sim.shard(B, mesh, sb)
    f = jax.jit(lambda a, b: a @ b, out_shardings=NamedSharding(mesh, P(*sc)))
    np.testing.assert_allclose(np.asarray(f(a, b)), A @ B, rtol=1e-5, atol=1e-5)
    m = S.sharded_matmul(I_, J_, K_, sa, sb, {"X": 8}, dtype="fp32")
    assert m.case == int(name[-1])
    assert _emitted(sim.collectives_in(f, a, b)) == _predicted(m)


def test_automatic_reduce_scatter_is_an_all_reduce_on_cpu(jx):
    """Named XLA:CPU rewrite: C[I_X, K] from partial sums compiles to all-reduce + slice."""
    jax, sim = jx
    from jax.sharding import NamedSharding, PartitionSpec as P
    mesh = sim.make_mesh((8,), ("X",))
    A, B = _operands()
    a, b = sim.shard(A, mesh, (None, "X")), sim.shard(B, mesh, ("X", None))
    f = jax.jit(lambda a, b: a @ b, out_shardings=NamedSharding(mesh, P("X", None)))
    np.testing.assert_allclose(np.asarray(f(a, b)), A @ B, rtol=1e-5, atol=1e-5)
    rs = S.sharded_matmul(I_, J_, K_, (None, "X"), ("X", None), {"X": 8}, dtype="fp32",
                          reduce="reduce-scatter")
    ar = S.sharded_matmul(I_, J_, K_, (None, "X"), ("X", None), {"X": 8}, dtype="fp32")
    assert rs.out_spec == ("X", None) and rs.nbytes == ar.nbytes
    assert _emitted(sim.collectives_in(f, a, b)) == _predicted(ar)


def _manual(case, lax):
    """Per-device programs of the four cases (jax.shard_map bodies) and their out specs."""
    if case == 1:
        return (lambda a, b: a @ b), ("X", None)
    if case == 2:
        return (lambda a, b: a @ lax.all_gather(b, "X", tiled=True)), ("X", None)
    if case == 3:
        return (lambda a, b: lax.psum(a @ b, "X")), (None, None)
    if case == "3rs":
        return (lambda a, b: lax.psum_scatter(a @ b, "X", tiled=True)), ("X", None)
    return (lambda a, b: a @ lax.all_gather(b, "X", tiled=True, axis=1)), ("X", None)


@pytest.mark.parametrize("case", [1, 2, 3, "3rs", 4])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_manual_shard_map_compiles_the_predicted_collective(jx, case, dtype):
    jax, sim = jx
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import PartitionSpec as P
    key = 3 if case == "3rs" else case
    sa, sb, _, _ = FOUR[f"case {key}"]
    body, sc = _manual(case, lax)
    mesh = sim.make_mesh((8,), ("X",))
    A, B = _operands()
    A, B = A.astype(dtype), B.astype(dtype)
    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P(*sa), P(*sb)), out_specs=P(*sc)))
    a, b = sim.shard(A, mesh, sa), sim.shard(B, mesh, sb)
    want = A.astype(np.float32) @ B.astype(np.float32)
    tol = 1e-5 if dtype == "float32" else 5e-2
    np.testing.assert_allclose(np.asarray(f(a, b), np.float32), want, rtol=tol, atol=tol * 8)
    m = S.sharded_matmul(I_, J_, K_, sa, sb, {"X": 8}, dtype="fp32",
                         reduce="reduce-scatter" if case == "3rs" else "all-reduce")
    # XLA:CPU widens bf16 collectives to f32 (simulate.CPU_PROMOTED): 4 bytes an element either way
    moved = sim.HLO_TYPE_BYTES[sim.cpu_collective_dtype(sim.hlo_type(jnp.dtype(dtype)))]
    emitted = sim.collectives_in(f, a, b)
    assert _emitted(emitted) == _predicted(m, moved)
    if dtype == "bfloat16" and emitted:
        assert {c.dtype for c in emitted} == {"f32"}


def test_collective_matmul_equals_the_plain_result(jx):
    """Case 2 as n partial matmuls interleaved with n - 1 ppermutes: same numbers, same bytes."""
    jax, sim = jx
    import jax.numpy as jnp
    from jax import lax
    from jax.sharding import PartitionSpec as P
    n = 8
    mesh = sim.make_mesh((n,), ("X",))
    A, B = _operands()
    perm = [(i, (i - 1) % n) for i in range(n)]

    def body(a, b):                     # a: [I/n, J], b: [J/n, K]
        d = lax.axis_index("X")
        rows = b.shape[0]
        acc = jnp.zeros((a.shape[0], b.shape[1]), a.dtype)
        for s in range(n):
            chunk = lax.dynamic_slice_in_dim(a, ((d + s) % n) * rows, rows, axis=1)
            acc = acc + chunk @ b
            if s < n - 1:
                b = lax.ppermute(b, "X", perm)
        return acc

    f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=(P("X", None), P("X", None)),
                              out_specs=P("X", None)))
    a, b = sim.shard(A, mesh, ("X", None)), sim.shard(B, mesh, ("X", None))
    np.testing.assert_allclose(np.asarray(f(a, b)), A @ B, rtol=1e-5, atol=1e-5)
    cs = sim.collectives_in(f, a, b)
    m = S.sharded_matmul(I_, J_, K_, ("X", None), ("X", None), {"X": n}, dtype="fp32")
    assert {c.kind for c in cs} == {"collective-permute"}
    assert sum(c.count for c in cs) == n - 1
    # the ppermutes move what the AllGather would receive: (n - 1) / n of V per device
    assert sum(c.operand_bytes * c.count for c in cs) == \
        C.collective_bytes("all-gather", m.nbytes, n).received_bytes


def test_explicit_sharding_needs_an_out_sharding_where_ambiguous(jx):
    """Explicit mode (sharding in types), where the installed JAX has it: case 4 is refused
    without out_sharding, and with it compiles to the predicted AllGather of B."""
    jax, sim = jx
    import jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P
    if not (hasattr(jax.sharding, "AxisType") and hasattr(jax.sharding.AxisType, "Explicit")
            and hasattr(jax, "set_mesh")):
        pytest.skip(f"jax {jax.__version__} has no explicit sharding")
    mesh = jax.make_mesh((8,), ("X",), axis_types=(jax.sharding.AxisType.Explicit,),
                         devices=jax.devices("cpu")[:8])
    A, B = _operands()
    with jax.set_mesh(mesh):
        a = jax.device_put(A, NamedSharding(mesh, P("X", None)))
        b = jax.device_put(B, NamedSharding(mesh, P(None, "X")))
        with pytest.raises(Exception, match="shard"):
            jnp.matmul(a, b)
        f = jax.jit(lambda a, b: jnp.matmul(a, b, out_sharding=P("X", None)))
        np.testing.assert_allclose(np.asarray(f(a, b)), A @ B, rtol=1e-5, atol=1e-5)
        m = S.sharded_matmul(I_, J_, K_, ("X", None), (None, "X"), {"X": 8}, dtype="fp32")
        assert _emitted(sim.collectives_in(f, a, b)) == _predicted(m)


def test_collective_matmul_ring_is_one_direction():
    """The ppermute ring of a collective matmul sends one way: as fast as the AllGather on a
    switch, half its bandwidth on a TPU torus (issue 25)."""
    from scaling_lib import hardware

    m = S.sharded_matmul(8192, 8192, 28672, ("X", None), ("X", None), {"X": 8})
    node, tpu = hardware.cluster("h100", 8), hardware.tpu_slice("tpu-v5e", (2, 4))
    assert S.permute_ring_time(m, node) == pytest.approx(S.cluster_comm_time(m, node), rel=1e-6)
    assert S.permute_ring_time(m, tpu) == pytest.approx(2 * S.cluster_comm_time(m, tpu), rel=0.01)
    with pytest.raises(ValueError, match="all-gather"):
        S.permute_ring_time(S.sharded_matmul(64, 64, 64, (None, "X"), ("X", None), {"X": 8}), node)
