"""Run every collective for real on 8 simulated CPU devices and compare with the cost model.

For each collective (all_gather, psum, psum_scatter, all_to_all, ppermute) and each layout of
devices (a ring of 8; one axis and both axes of a 2x4 torus; one, two and three axes of a 2x2x2
torus) the tests check:

1. the numbers against numpy;
2. the collectives XLA emitted == what ``scaling_lib.collectives`` predicts: the kind, one
   collective per call, the replica groups of the mesh axes, and the per-device operand and
   result bytes of ``collective_bytes``.

XLA:CPU rewrites are accounted for explicitly, never by loosening a comparison:
- bf16 / fp8 collectives run in f32 / f16 on CPU (``simulate.CPU_PROMOTED``): the predicted bytes
  use the promoted element size, and the test asserts the promotion happened;
- all-to-all is emitted in tuple form with one operand per device of the group;
- all-reduces over the same groups are combined into one tuple all-reduce.

It asks for 8 CPU devices before JAX starts (as tests/test_train_step.py does: the same count,
so the two modules can share a process).
"""

import math
import tempfile

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from scaling_lib import collectives as C  # noqa: E402
from scaling_lib import simulate as sim  # noqa: E402

DEVICES = sim.use_cpu_devices(8)
jax.config.update("jax_compilation_cache_dir", tempfile.mkdtemp(prefix="scaling_lib_jax_"))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

MESHES = {"ring8": ((8,), ("X",)), "torus2x4": ((2, 4), ("X", "Y")),
          "torus2x2x2": ((2, 2, 2), ("X", "Y", "Z"))}
# (mesh, the axes a collective runs over): a 1D ring, each axis and both axes of a 2D torus, and
# one, two and three axes of a 3D torus.
LAYOUTS = [("ring8", ("X",)), ("torus2x4", ("Y",)), ("torus2x4", ("X",)),
           ("torus2x4", ("X", "Y")), ("torus2x2x2", ("Z",)), ("torus2x2x2", ("X", "Z")),
           ("torus2x2x2", ("X", "Y", "Z"))]
DTYPES = [jnp.float32, jnp.bfloat16, jnp.int8, jnp.float16]
KINDS = ["all-gather", "all-reduce", "reduce-scatter", "all-to-all", "collective-permute"]


def mesh_of(name):
    return sim.make_mesh(*MESHES[name])


def groups_of(mesh, axes):
    """Device ids of each group of a collective over ``axes`` of ``mesh``."""
    ids = np.vectorize(lambda d: d.id)(mesh.devices)
    names = list(mesh.axis_names)
    chosen = [names.index(a) for a in axes]
    rest = [i for i in range(len(names)) if i not in chosen]
    size = math.prod(ids.shape[i] for i in chosen)
    return tuple(sorted(tuple(int(v) for v in row)
                        for row in ids.transpose(rest + chosen).reshape(-1, size)))


def program(kind, mesh, axes):
    """(jitted function, in spec, how to compute the expected global result with numpy)."""
    n = math.prod(mesh.shape[a] for a in axes)
    ax = axes if len(axes) > 1 else axes[0]
    spec = P(ax, None)
    if kind == "all-gather":
        f = lambda a: lax.all_gather(a, ax, tiled=True, to="invarying")  # noqa: E731
        out, ref = P(None, None), lambda x: x
    elif kind == "all-reduce":
        f, out = (lambda a: lax.psum(a, ax)), P(None, None)
        ref = lambda x: x.reshape(n, -1, x.shape[1]).sum(0)  # noqa: E731
    elif kind == "reduce-scatter":
        f, out = (lambda a: lax.psum_scatter(a, ax, tiled=True)), P(ax, None)
        ref = lambda x: x.reshape(n, -1, x.shape[1]).sum(0)  # noqa: E731
    elif kind == "all-to-all":
        # A[I_X, J] -> A[I, J_X]: the global array is unchanged, only its sharding moves.
        f, out = (lambda a: lax.all_to_all(a, ax, 1, 0, tiled=True)), P(None, ax)
        ref = lambda x: x  # noqa: E731
    else:  # shift every shard one step around the ring of the group
        perm = [(i, (i + 1) % n) for i in range(n)]
        f, out = (lambda a: lax.ppermute(a, ax, perm)), P(ax, None)
        ref = lambda x: np.roll(x.reshape(n, -1, x.shape[1]), 1, axis=0).reshape(x.shape)  # noqa
    fn = jax.jit(jax.shard_map(f, mesh=mesh, in_specs=spec, out_specs=out))
    return fn, spec, ref


def full_array_elems(kind, x, n):
    """Elements of the array V the cost model is stated in (see collective_bytes)."""
    if kind in ("all-reduce", "reduce-scatter"):
        return x.size // n  # each device holds one (partial) copy of the whole array
    return x.size  # the sharded global array


def data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 4, size=shape).astype(np.dtype(dtype))  # small ints: sums are exact


CASES = [(kind, mesh, axes, dtype, rows)
         for i, (kind, (mesh, axes)) in enumerate(
             (k, lay) for k in KINDS for lay in LAYOUTS)
         for dtype, rows in [(DTYPES[i % len(DTYPES)], (64, 128)[i % 2])]]


@pytest.mark.parametrize("kind,mesh_name,axes,dtype,rows", CASES,
                         ids=[f"{c[0]}-{c[1]}-{''.join(c[2])}-{jnp.dtype(c[3]).name}"
                              for c in CASES])
def test_collective_numerics_and_emitted_match_prediction(kind, mesh_name, axes, dtype, rows):
    mesh = mesh_of(mesh_name)
    n = math.prod(mesh.shape[a] for a in axes)
    fn, spec, ref = program(kind, mesh, axes)
    x = data((rows, 8), dtype, seed=rows + n)
    got = np.asarray(fn(sim.shard(x, mesh, spec)))
    want = ref(x.astype(np.float64))
    np.testing.assert_array_equal(got.astype(np.float64), want)

    emitted = sim.collectives_in(fn, sim.shard(x, mesh, spec))
    assert len(emitted) == 1, emitted
    (c,) = emitted
    moved = sim.cpu_collective_dtype(sim.hlo_type(jnp.dtype(dtype)))
    assert c.dtype == moved  # XLA:CPU promotes bf16 (and fp8) collectives: accounted here
    V = full_array_elems(kind, x, n) * sim.HLO_TYPE_BYTES[moved]
    predicted = C.collective_bytes(kind, V, n)
    assert (c.kind, c.count, c.group_size) == (kind, 1, n)
    assert tuple(sorted(c.replica_groups)) == groups_of(mesh, axes)
    assert (c.operand_bytes, c.result_bytes) == (predicted.operand_bytes, predicted.result_bytes)
    # all-to-all comes in tuple form: one operand per device of the group, same total bytes
    assert c.n_operands == (n if kind == "all-to-all" else 1)


def test_bf16_promotion_doubles_cpu_bytes():
    """The rewrite the test above accounts for: bf16 psum moves f32 on XLA:CPU."""
    mesh = mesh_of("ring8")
    fn, spec, _ = program("all-reduce", mesh, ("X",))
    for dtype, moved in [(jnp.float32, "f32"), (jnp.bfloat16, "f32"), (jnp.float16, "f16"),
                         (jnp.float8_e4m3fn, "f16")]:
        x = jnp.ones((16, 8), dtype)
        (c,) = sim.collectives_in(fn, sim.shard(x, mesh, spec))
        assert c.dtype == moved
        assert c.operand_bytes == 2 * 8 * sim.HLO_TYPE_BYTES[moved]


def test_all_reduce_combiner_merges_psums_over_the_same_groups():
    """Two psums over one axis become one tuple all-reduce whose bytes are their sum;
    psums over different axes stay separate (different replica groups)."""
    mesh = mesh_of("torus2x4")

    def f(a, b):
        return lax.psum(a, "Y"), lax.psum(b, "Y"), lax.psum(a, "X")

    fn = jax.jit(jax.shard_map(f, mesh=mesh, in_specs=(P(), P()), out_specs=(P(), P(), P())))
    a, b = jnp.ones((4, 8), jnp.float32), jnp.ones((2, 3), jnp.float32)
    got = sorted(sim.collectives_in(fn, a, b), key=lambda c: c.group_size)
    assert [(c.kind, c.group_size, c.n_operands) for c in got] == [
        ("all-reduce", 2, 1), ("all-reduce", 4, 2)]
    combined = C.collective_bytes("all-reduce", a.nbytes, 4).operand_bytes + C.collective_bytes(
        "all-reduce", b.nbytes, 4).operand_bytes
    assert got[1].operand_bytes == got[1].result_bytes == combined
    assert got[0].operand_bytes == C.collective_bytes("all-reduce", a.nbytes, 2).operand_bytes
    r = fn(a, b)
    np.testing.assert_array_equal(np.asarray(r[0]), 4 * np.ones((4, 8)))
    np.testing.assert_array_equal(np.asarray(r[2]), 2 * np.ones((4, 8)))


def test_all_reduce_equals_reduce_scatter_then_all_gather():
    """AllReduce = ReduceScatter + AllGather, in numbers and in emitted bytes."""
    mesh = mesh_of("ring8")
    x = data((64, 4), np.float32, seed=3)
    both = jax.jit(jax.shard_map(
        lambda a: lax.all_gather(lax.psum_scatter(a, "X", tiled=True), "X", tiled=True,
                                 to="invarying"),
        mesh=mesh, in_specs=P("X", None), out_specs=P(None, None)))
    np.testing.assert_array_equal(np.asarray(both(x)), x.reshape(8, 8, 4).sum(0))
    got = sim.collectives_in(both, x)
    assert [c.kind for c in got] == ["reduce-scatter", "all-gather"]
    V = x.nbytes // 8
    rs, ag, ar = (C.collective_bytes(k, V, 8) for k in ("rs", "ag", "ar"))
    assert (got[0].operand_bytes, got[0].result_bytes) == (rs.operand_bytes, rs.result_bytes)
    assert (got[1].operand_bytes, got[1].result_bytes) == (ag.operand_bytes, ag.result_bytes)
    assert rs.sent_bytes + ag.sent_bytes == ar.sent_bytes


@pytest.mark.parametrize("kind", ["all-reduce", "all-gather", "reduce-scatter", "all-to-all"])
def test_hierarchical_schedule_matches_emitted_phases(kind):
    """A 2-level collective written with shard_map on a (node=2, local=4) mesh emits exactly the
    phases of hierarchical_schedule, with its group sizes and bytes."""
    mesh = sim.make_mesh((2, 4), ("node", "local"))
    k, m = 2, 4
    both = ("node", "local")
    x = data((64, 8), np.float32, seed=5)
    if kind == "all-reduce":
        def f(a):
            a = lax.psum_scatter(a, "local", tiled=True)
            a = lax.psum(a, "node")
            return lax.all_gather(a, "local", tiled=True, to="invarying")
        spec, out, want = P(both, None), P(None, None), x.reshape(8, 8, 8).sum(0)
        V = x.nbytes // 8
    elif kind == "all-gather":
        def f(a):
            a = lax.all_gather(a, "node", tiled=True, to="invarying")
            return lax.all_gather(a, "local", tiled=True, to="invarying")
        spec, out, want = P(("local", "node"), None), P(None, None), x
        V = x.nbytes
    elif kind == "reduce-scatter":
        def f(a):
            return lax.psum_scatter(lax.psum_scatter(a, "local", tiled=True), "node", tiled=True)
        spec, out, want = P(both, None), P(("local", "node"), None), x.reshape(8, 8, 8).sum(0)
        V = x.nbytes // 8
    else:
        def f(a):  # A[I_{node,local}, J] -> A[I, J_{local,node}] in two hops
            a = lax.all_to_all(a, "local", 1, 0, tiled=True)
            return lax.all_to_all(a, "node", 1, 0, tiled=True)
        spec, out, want = P(both, None), P(None, ("local", "node")), x
        V = x.nbytes
    fn = jax.jit(jax.shard_map(f, mesh=mesh, in_specs=spec, out_specs=out))
    np.testing.assert_array_equal(np.asarray(fn(sim.shard(x, mesh, spec))), want)
    got = sim.collectives_in(fn, sim.shard(x, mesh, spec))
    plan = C.hierarchical_schedule(kind, V, (m, k))
    assert [(c.kind, c.group_size) for c in got] == [(p[1], p[3]) for p in plan]
    for c, (_, phase_kind, nbytes, n) in zip(got, plan):
        want_bytes = C.collective_bytes(phase_kind, nbytes, n)
        assert (c.operand_bytes, c.result_bytes) == (want_bytes.operand_bytes,
                                                     want_bytes.result_bytes)


def test_loop_trip_counts_multiply_counts():
    mesh = mesh_of("ring8")
    perm = [(i, (i + 1) % 8) for i in range(8)]

    def f(a):
        def inner(_, c):
            return lax.ppermute(c, "X", perm)

        def outer(_, c):
            c = lax.pcast(c, "X", to="varying")  # the permuted carry varies over X
            return lax.psum(lax.fori_loop(0, 3, inner, c), "X") * 0.125

        return lax.fori_loop(0, 4, outer, a)

    fn = jax.jit(jax.shard_map(f, mesh=mesh, in_specs=P(), out_specs=P()))
    x = jnp.arange(6.0)
    got = {c.kind: c.count for c in sim.collectives_in(fn, x)}
    assert got == {"collective-permute": 12, "all-reduce": 4}
    np.testing.assert_allclose(np.asarray(fn(x)), np.arange(6.0))


def test_replica_groups_of_the_x_axis_of_a_2x4_mesh():
    """XLA writes these groups as a list (jax 0.10) or as an iota with a transpose; both
    spellings must give the mesh's groups."""
    mesh = mesh_of("torus2x4")
    fn, spec, _ = program("all-reduce", mesh, ("X",))
    text = sim.compiled_text(fn, jnp.ones((8, 8)))
    (c,) = sim.parse_hlo_collectives(text)
    assert tuple(sorted(c.replica_groups)) == ((0, 4), (1, 5), (2, 6), (3, 7))
    assert sim.parse_replica_groups("[4,2]<=[2,4]T(1,0)") == c.replica_groups
    assert sim.parse_replica_groups("mesh['X'=2,'Y'=4] {'X'}") == c.replica_groups


def test_use_cpu_devices_refuses_another_count_once_started():
    assert len(sim.use_cpu_devices(8)) == 8  # same count again is fine
    with pytest.raises(RuntimeError, match="restart"):
        sim.use_cpu_devices(4)


def test_make_mesh_needs_enough_devices():
    with pytest.raises(ValueError, match="use_cpu_devices\\(16\\)"):
        sim.make_mesh((4, 4), ("X", "Y"))
    with pytest.raises(ValueError, match="same length"):
        sim.make_mesh((2, 4), ("X",))


def test_show_sharding_speaks_the_books_notation():
    mesh = mesh_of("torus2x4")
    x = sim.shard(jnp.zeros((8, 4), jnp.float32), mesh, ("Y", "X"))
    text = sim.show_sharding(x)
    assert text.startswith("A[I_Y, J_X]: float32[8, 4], 128 bytes in all, 16 bytes per device")
    assert "device 5: A[2:4, 2:4]" in text


def test_parse_async_start_done_and_conditionals():
    hlo = """HloModule m, num_partitions=4
%b0 (p: f32[4]) -> f32[4] {
  %p = f32[4]{0} parameter(0)
  ROOT %ar = f32[4]{0} all-reduce(%p), replica_groups={}, to_apply=%add
}
ENTRY %main (x: f32[1]) -> f32[4] {
  %x = f32[1]{0} parameter(0)
  %ags = (f32[1]{0}, f32[4]{0}) all-gather-start(%x), replica_groups={{0,1,2,3}}, dimensions={0}
  %agd = f32[4]{0} all-gather-done(%ags)
  %i = s32[] constant(0)
  ROOT %c = f32[4]{0} conditional(%i, %agd), branch_computations={%b0}
}"""
    got = sim.parse_hlo_collectives(hlo)
    assert [(c.kind, c.operand_bytes, c.result_bytes, c.count, c.group_size) for c in got] == [
        ("all-reduce", 16.0, 16.0, 1, 4), ("all-gather", 4.0, 16.0, 1, 4)]


def test_hlo_parsing_rejects_unknown_types():
    with pytest.raises(ValueError, match="unknown HLO element type"):
        sim.hlo_shape_bytes("q7[3]")
    with pytest.raises(ValueError, match="no known HLO element type"):
        sim.hlo_type("object")
