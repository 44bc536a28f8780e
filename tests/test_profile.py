"""Tests for scaling_lib.profile (and the Chapter 12 answer key against compiled programs).

On CPU, with 8 simulated devices asked for before JAX starts (as tests/test_simulate.py does).
"""

import gzip
import json
import math

import numpy as np
import pytest

from scaling_lib import hardware, profile as prof
from scaling_lib.course.grading import draw
from scaling_lib.course.keys import profiling as key
from scaling_lib.roofline import matmul_bytes, matmul_flops

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from scaling_lib import simulate as sim  # noqa: E402

DEVICES = sim.use_cpu_devices(8)  # as in test_simulate: the whole suite runs with 8 CPU devices


@pytest.fixture(scope="module")
def eight():
    return sim.make_mesh((8,), ("X",))


def _mlp(x, w1, w2):
    with jax.named_scope("up"):
        h = jax.nn.relu(x @ w1)
    with jax.named_scope("down"):
        return h @ w2


def _args(B=128, D=128, F=256):
    k = jax.random.split(jax.random.key(0), 3)
    return (jax.random.normal(k[0], (B, D)), jax.random.normal(k[1], (D, F)),
            jax.random.normal(k[2], (F, D)))


def test_hlo_ops_flops_match_cost_analysis():
    args = _args()
    compiled = prof.compile_fn(_mlp, *args)
    ops = prof.hlo_ops(compiled.as_text())
    cost = prof.cost_analysis(compiled)
    assert sum(o.flops for o in ops.values()) == pytest.approx(cost.flops, rel=1e-6)
    # The two matmuls dominate: 2 x 2BDF, plus one FLOP per element of the ReLU.
    assert cost.flops == pytest.approx(2 * matmul_flops(128, 128, 256) + 128 * 256, rel=1e-3)
    assert any("up" in o.scope for o in ops.values())
    assert any("down" in o.scope for o in ops.values())


def test_hlo_ops_needs_an_entry():
    with pytest.raises(ValueError, match="ENTRY"):
        prof.hlo_ops("HloModule m")


def test_profile_table_names_match_hlo_and_times_are_consistent():
    args = _args(256, 256, 512)
    p = prof.profile(_mlp, *args, n_calls=3)
    assert p.events, "the trace has no HLO op events"
    ops = p.ops()
    names = {e.op for e in p.events}
    assert names <= set(ops), names - set(ops)
    assert all(e.duration > 0 for e in p.events)
    assert all(e.module == p.module for e in p.events)
    rows = p.table()
    assert math.isclose(sum(r["share"] for r in rows), 1.0, rel_tol=1e-9)
    assert sum(r["count"] for r in rows) == len(p.events)
    # Ops run inside the timed calls: their time per call is below the wall time per call
    # (plus a little profiler overhead) and not vanishingly small next to it.
    assert 0 < p.device_time() <= 1.5 * p.wall_time
    assert p.device_time() > 0.01 * p.wall_time


def test_read_trace_parses_the_file_jax_writes(tmp_path):
    f = jax.jit(lambda a: jnp.tanh(a) * 2.0)
    x = jnp.ones((64, 64))
    f(x).block_until_ready()
    with jax.profiler.trace(str(tmp_path)):
        f(x).block_until_ready()
    files = list(tmp_path.rglob("*.trace.json.gz"))
    assert files
    with gzip.open(files[0], "rt") as fh:
        assert "traceEvents" in json.load(fh)
    events = prof.read_trace(str(tmp_path))
    assert events and all(e.duration > 0 for e in events)


def test_read_trace_without_a_trace_says_what_to_do(tmp_path):
    with pytest.raises(ValueError, match="jax.profiler.trace"):
        prof.read_trace(str(tmp_path))


def test_parse_trace_prefers_device_xla_ops_line():
    meta = [{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/host:CPU"}},
            {"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "/device:GPU:0"}},
            {"ph": "M", "pid": 2, "tid": 7, "name": "thread_name", "args": {"name": "XLA Ops"}},
            {"ph": "M", "pid": 2, "tid": 8, "name": "thread_name", "args": {"name": "Stream #1"}}]
    ops = [{"ph": "X", "pid": 2, "tid": 7, "ts": 5, "dur": 3, "name": "fusion.1",
            "args": {"hlo_op": "fusion.1", "hlo_module": "jit_f"}},
           {"ph": "X", "pid": 2, "tid": 8, "ts": 5, "dur": 2, "name": "kernel",
            "args": {"hlo_op": "fusion.1", "hlo_module": "jit_f"}},
           {"ph": "X", "pid": 1, "tid": 3, "ts": 1, "dur": 9, "name": "host",
            "args": {"hlo_op": "fusion.1", "hlo_module": "jit_f"}}]
    events = prof.parse_trace_events(meta + ops)
    assert len(events) == 1
    assert events[0].device == "/device:GPU:0" and events[0].duration == pytest.approx(3e-6)


def test_op_table_aggregates_and_slowest_is_by_total():
    ev = [prof.OpEvent("long", "m", "0", 0.0, 1.0)] + [
        prof.OpEvent("many", "m", "0", 1.0 + i, 0.3) for i in range(5)]
    rows = prof.op_table(ev)
    assert rows[0]["op"] == "many" and rows[0]["count"] == 5
    assert prof.slowest_op(ev) == "many"
    with pytest.raises(ValueError, match="n_calls"):
        prof.op_table(ev, n_calls=0)


def test_roofline_time_and_bound():
    h100 = hardware.get("h100")
    F, N = matmul_flops(4096, 4096, 4096), matmul_bytes(4096, 4096, 4096)
    assert prof.roofline_time(F, N, "h100") == pytest.approx(F / h100.peak_flops_per_s("bf16"))
    assert prof.bound(F, N, "h100") == "compute"
    assert prof.bound(matmul_flops(8, 4096, 4096), matmul_bytes(8, 4096, 4096), "h100") == "memory"


def test_op_roofline_skips_free_ops_and_adds_efficiency():
    ops = {"dot.1": prof.HloOp("dot.1", "dot", "f32[8,8]", "", 1e9, 1e6),
           "copy": prof.HloOp("copy", "copy", "", "", 0.0, 0.0)}
    rows = [{"op": "dot.1", "time": 1e-3, "mean": 5e-4}, {"op": "copy", "time": 1e-4, "mean": 1e-4}]
    out = prof.op_roofline(rows, ops, "h100")
    assert [r["op"] for r in out] == ["dot.1"]
    assert out[0]["efficiency"] == pytest.approx(prof.roofline_time(1e9, 1e6, "h100") / 1e-3)


def test_scan_is_counted_once_by_cost_analysis():
    p = draw(0, "12.4", L=[8], B=(64, 64), D=(128, 128))

    def layers(x, ws):
        return jax.lax.scan(lambda h, w: (jnp.tanh(h @ w), None), x, ws)[0]

    c = prof.compile_fn(layers, jnp.ones((p.B, p.D)), jnp.ones((p.L, p.D, p.D)))
    assert prof.cost_analysis(c).flops == pytest.approx(key.scan_cost_flops(p), rel=0.02)


def test_einsum_key_matches_cost_analysis():
    p = draw(3, "12.3", B=(1, 4), T=(16, 64), D=(16, 64), F=(16, 64))
    c = prof.compile_fn(lambda a, b: jnp.einsum("btd,df->btf", a, b),
                        jax.ShapeDtypeStruct((p.B, p.T, p.D), jnp.float32),
                        jax.ShapeDtypeStruct((p.D, p.F), jnp.float32))
    assert prof.cost_analysis(c).flops == pytest.approx(key.einsum_cost_flops(p), rel=0.01)


def test_sharded_keys_match_compiled_programs(eight):
    from jax.sharding import NamedSharding, PartitionSpec as P

    p = draw(1, "12.5", B=[512], D=[256], F=[128], n=[8])
    x = sim.shard(jnp.ones((p.B, p.D)), eight, ("X", None))
    c = prof.compile_fn(lambda a, b: a @ b, x, jnp.ones((p.D, p.F)))
    assert prof.cost_analysis(c).flops == pytest.approx(key.sharded_cost_flops(p), rel=0.02)

    q = draw(1, "12.9", B=[32], D=[64], F=[256], n=[8], dtype=["bf16"])
    w = jax.ShapeDtypeStruct((q.D, q.F), jnp.bfloat16, sharding=NamedSharding(eight, P(None, "X")))
    xx = jax.ShapeDtypeStruct((q.B, q.D), jnp.bfloat16, sharding=NamedSharding(eight, P()))
    m = prof.memory_analysis(prof.compile_fn(lambda a, b: b @ a, w, xx))
    assert m.argument_bytes == pytest.approx(key.sharded_argument_bytes(q), rel=0.01)
    assert m.peak_bytes >= m.argument_bytes


def test_extra_all_gather_is_seen_and_the_fix_has_none(eight):
    from jax.sharding import NamedSharding, PartitionSpec as P

    def slow(x, w1, w2):
        h = jax.lax.with_sharding_constraint(jnp.tanh(x @ w1), NamedSharding(eight, P()))
        return h @ w2

    def fixed(x, w1, w2):
        return jnp.tanh(x @ w1) @ w2

    got_slow = key.mlp_collectives(slow, 64)
    assert got_slow[0] > 0 and got_slow[2] == 1.0
    np.testing.assert_array_equal(key.mlp_collectives(fixed, 64), key.fixed_mlp_collectives(None, 64))
    wrong = key.mlp_collectives(lambda x, w1, w2: jnp.tanh(x @ w1), 64)
    assert wrong[2] == 0.0


def test_key_wrong_methods_differ_from_the_key():
    for name, methods in key.WRONG_METHODS.items():
        assert methods, name


def test_importing_profile_does_not_import_jax_in_a_fresh_interpreter():
    import subprocess
    import sys

    code = "import sys, scaling_lib.profile, scaling_lib.course.keys.profiling; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_widgets_draw_a_timeline_and_op_times():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scaling_lib.course.widgets import profile as plots

    ev = [prof.OpEvent(f"op{i % 3}", "m", str(i % 2), i * 1e-3, 5e-4) for i in range(12)]
    fig, (a, b) = plt.subplots(1, 2)
    plots.plot_timeline(a, ev, max_ops=2)
    assert len(a.patches) == len(ev)
    rows = [{**r, "roofline": r["time"] / 2} for r in prof.op_table(ev)]
    plots.plot_op_times(b, rows)
    assert len(b.patches) == 2 * len(rows)
    with pytest.raises(ValueError, match="empty"):
        plots.plot_timeline(a, [])
    plt.close(fig)


def test_async_collectives_split_flight_into_overlap_and_wait():
    """A -start/-done pair: compute between them is overlap, the -done's duration the wait."""
    from scaling_lib.profile import OpEvent, async_collectives

    ev = [OpEvent("all-gather-start", "m", "0", 0.0, 1.0), OpEvent("fusion.1", "m", "0", 1.0, 3.0),
          OpEvent("fusion.2", "m", "1", 1.0, 9.0),  # another device: not counted
          OpEvent("all-gather-done", "m", "0", 4.0, 2.0),
          OpEvent("reduce-scatter-start.2", "m", "0", 6.0, 0.5),
          OpEvent("reduce-scatter-done.2", "m", "0", 6.5, 0.0)]
    rows = async_collectives(ev)
    assert [r["kind"] for r in rows] == ["all-gather", "reduce-scatter"]
    ag, rs = rows
    assert (ag["in_flight"], ag["overlapped"], ag["waited"]) == (6.0, 3.0, 2.0)
    assert rs["overlapped"] == 0.0 and rs["waited"] == 0.0
    with pytest.raises(ValueError, match="OpEvent"):
        async_collectives([("all-gather-start", 0.0)])
