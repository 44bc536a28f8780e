"""The diagram toolkit (scaling_lib.course.diagrams): every diagram renders, shows the labels it
must, follows the library object it draws, and carries alt text."""

import re
import subprocess
import sys
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from scaling_lib import collectives, hardware, memory, sharding  # noqa: E402
from scaling_lib.course import diagrams as D  # noqa: E402
from scaling_lib.course.diagrams._style import fmt  # noqa: E402
from scaling_lib.parallelism import context, expert, pipeline, timeline  # noqa: E402
from scaling_lib.units import fmt_percent  # noqa: E402

CALLS = {
    "sharded_matmul": lambda: D.sharded_matmul((None, "X"), ("X", None)),
    "matmul_cases": lambda: D.matmul_cases(),
    "ring_all_gather": lambda: D.ring_all_gather(4, 1e9),
    "tree_all_reduce": lambda: D.tree_all_reduce(8),
    "one_shot_all_reduce": lambda: D.one_shot_all_reduce(8),
    "hierarchical": lambda: D.hierarchical("all-reduce", 1e9, (4, 2)),
    "zero_stages": lambda: D.zero_stages(7.5e9, 4),
    "ddp_buckets": lambda: D.ddp_buckets(),
    "fsdp_prefetch": lambda: D.fsdp_prefetch(),
    "pipeline_schedule": lambda: D.pipeline_schedule(4, 8),
    "tensor_parallel_mlp": lambda: D.tensor_parallel_mlp(tp=4),
    "context_chunks": lambda: D.context_chunks(4),
    "ring_attention": lambda: D.ring_attention(4),
    "expert_dispatch": lambda: D.expert_dispatch(16, 8, 2, 4),
    "gpu_sm": lambda: D.gpu_sm("h100"),
    "systolic_array": lambda: D.systolic_array("tpu-v5e"),
    "memory_hierarchy": lambda: D.memory_hierarchy("h100"),
    "nvswitch_node": lambda: D.nvswitch_node("h100"),
    "fat_tree": lambda: D.fat_tree("h100", 4),
    "torus": lambda: D.torus(shape=(4, 4), wraparound=(True, True)),
    "paged_kv_cache": lambda: D.paged_kv_cache((37, 12, 70), 16),
}


def _axes(drawn):
    return list(drawn) if isinstance(drawn, (list, tuple)) else [drawn]


def texts(drawn) -> str:
    """Every string drawn: text, titles, tick labels, legends, the figure's title."""
    out = []
    for ax in _axes(drawn):
        out += [t.get_text() for t in ax.texts]
        out += [ax.get_title(), ax.get_xlabel()]
        out += [t.get_text() for t in ax.get_yticklabels()]
        if ax.get_legend():
            out += [t.get_text() for t in ax.get_legend().get_texts()]
    fig = _axes(drawn)[0].figure
    if fig._suptitle is not None:
        out.append(fig._suptitle.get_text())
    return "\n".join(out)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _part_names():
    """Diagrams the book's parts added (modules ``part*``): each part's own test file draws them."""
    return {n for n, mod in D._WHERE.items() if mod.startswith("part")}


def test_every_function_in_the_table_is_tested_here():
    assert set(CALLS) == set(D.__all__) - {"alt_text"} - _part_names()


def test_every_part_diagram_is_drawn_by_its_parts_test_file():
    tests = Path(__file__).parent
    for name in sorted(_part_names()):
        own = tests / f"test_diagrams_{D._WHERE[name]}.py"
        assert own.exists(), f"{name} lives in diagrams/{D._WHERE[name]}.py but {own.name} is missing"
        assert f"{name}(" in own.read_text(), f"{own.name} never draws {name}"


@pytest.mark.parametrize("name", sorted(CALLS))
def test_renders_with_alt_text(name):
    drawn = CALLS[name]()
    fig = _axes(drawn)[0].figure
    fig.canvas.draw()  # Agg: raises if anything cannot be drawn
    alt = D.alt_text(fig)
    assert alt == fig.alt_text and len(alt.split()) >= 8, alt  # the book's rule for alt text
    assert fig.get_facecolor()[:3] == (1.0, 1.0, 1.0) and fig.get_facecolor()[3] == 1.0
    assert texts(drawn).strip()


def test_draws_on_a_given_axes():
    fig, ax = plt.subplots()
    assert D.ring_all_gather(4, ax=ax) is ax
    assert fig.alt_text == ax.alt_text == D.alt_text(ax)


def test_import_scaling_lib_course_stays_light():
    code = ("import sys, scaling_lib, scaling_lib.course; from scaling_lib.course import diagrams; "
            "print('matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_sharded_matmul_shows_the_libraries_case_collective_and_bytes():
    from scaling_lib.course.diagrams.mesh import CASE_EXAMPLES

    for case, (a, b) in CASE_EXAMPLES.items():
        m = sharding.sharded_matmul(4096, 4096, 4096, a, b, {"X": 2, "Y": 2})
        shown = texts(D.sharded_matmul(a, b))
        assert f"case {m.case}" in shown and m.case == case
        if m.kind:
            assert m.kind in shown and fmt(m.nbytes) in shown
        else:
            assert "no communication" in shown
    small = texts(D.sharded_matmul((None, "X"), ("X", None), {"X": 4, "Y": 2}, I=1024))
    big = texts(D.sharded_matmul((None, "X"), ("X", None), {"X": 4, "Y": 2}, I=8192))
    assert small != big and "4 devices" in small


@pytest.mark.parametrize("n", [4, 8])
def test_ring_all_gather_has_one_row_per_step(n):
    shown = texts(D.ring_all_gather(n, 8e9))
    s = int(collectives.cost_terms("all-gather", n, topology="ring")[0])
    assert s == n - 1 and f"{s} steps" in shown
    assert [f"step {t}" in shown for t in range(1, n + 1)] == [True] * s + [False]
    assert fmt(collectives.collective_bytes("all-gather", 8e9, n).sent_bytes / s) in shown


def test_ring_all_gather_ends_with_every_shard_everywhere():
    from scaling_lib.course.diagrams.collectives import _ring_holds

    for n in (2, 5, 8):
        assert _ring_holds(n, n - 1).all() and not _ring_holds(n, n - 2).all()
        assert _ring_holds(n, 0).sum() == n


def test_tree_steps_grow_with_the_number_of_devices():
    from scaling_lib.course.diagrams.collectives import tree_rounds

    assert "3 steps up, 3 down" in texts(D.tree_all_reduce(8))
    assert "4 steps up, 4 down" in texts(D.tree_all_reduce(16))
    for n in range(2, 17):  # the rounds' spans 1, 2, 4, ... reach every device, and no fewer do
        r = tree_rounds(n)
        assert 2**r >= n > 2 ** (r - 1)
        if hasattr(collectives, "algorithm_terms"):  # the library's tree counts the same steps
            assert collectives.algorithm_terms("all-reduce", n, "tree")[0] == 2 * r


def test_one_shot_states_the_library_steps_where_it_models_them():
    shown = texts(D.one_shot_all_reduce(8))
    assert "1 data step" in shown and "each device reads the full buffer of the 7 others" in shown
    if hasattr(collectives, "algorithm_terms"):
        s, _ = collectives.algorithm_terms("all-reduce", 8, "one_shot")
        assert f"s = {s:g}" in shown


def test_hierarchical_draws_the_schedules_phases():
    for kind in ("all-reduce", "all-gather"):
        phases = collectives.hierarchical_schedule(kind, 1e9, (4, 2))
        shown = texts(D.hierarchical(kind, 1e9, (4, 2)))
        assert shown.count("phase ") == len(phases)
        for level, k, V, g in phases:
            assert f"({level}): {k} of {fmt(V)} over {g} devices" in shown
    c = hardware.cluster("h100", 16)
    assert "on 2 nodes of 8" in texts(D.hierarchical("all-gather", 1e9, c))
    with pytest.raises(ValueError, match="two levels"):
        D.hierarchical("all-reduce", 1e9, (2, 2, 2))


@pytest.mark.parametrize("dp", [2, 8])
def test_zero_stage_sizes_follow_dp(dp):
    shown = texts(D.zero_stages(7.5e9, dp))
    for z in range(4):
        assert f"stage {z}\n{fmt(memory.model_state_bytes(7.5e9, dp, z).total)} per rank" in shown
    assert re.findall(r"^rank (\d+)$", shown, flags=re.M) == [str(r) for r in range(dp)]


def test_pipeline_schedule_follows_the_event_generator():
    for m in (4, 16):
        ev = pipeline.schedule(4, m)
        ax = D.pipeline_schedule(4, m)
        assert fmt_percent(pipeline.bubble_fraction(ev)) in ax.get_title()
        assert len(ax.collections) == 4 + len(ev)  # an idle band per device, a box per operation
    assert "v=2" in D.pipeline_schedule(4, 8, v=2, kind="interleaved").get_title()
    gpipe = pipeline.bubble_fraction(pipeline.schedule(4, 4, kind="gpipe"))
    assert gpipe == pytest.approx(3 / 7)  # (p - 1)/(m + p - 1), the book's example
    assert fmt_percent(gpipe) in D.pipeline_schedule(4, 4, kind="gpipe").get_title()


def test_ddp_bucket_count_follows_the_bucket_size():
    counts = []
    for size in (25e6, 1e9):
        ev = timeline.ddp_timeline("llama3-8b", hardware.cluster("h100", 8), 8, 8192, 4096,
                                   bucket_bytes=size)
        counts.append(sum(e[0] == "network" for e in ev))
        assert f"{counts[-1]} buckets" in texts(D.ddp_buckets(bucket_bytes=size))
    assert counts[0] > counts[1]
    assert "all-gather" in texts(D.fsdp_prefetch()) and "reduce-scatter" in texts(D.fsdp_prefetch())


def test_tensor_parallel_split_names_f_and_g_and_the_sp_collectives():
    plain = texts(D.tensor_parallel_mlp("llama3-8b", 4))
    sp = texts(D.tensor_parallel_mlp("llama3-8b", 4, sequence_parallel=True))
    assert "f: identity" in plain and "g: all-reduce" in plain and "reduce-scatter" not in plain
    assert "f: all-gather" in sp and "g: reduce-scatter" in sp
    assert "[4096, 3584]" in plain and "[4096, 7168]" in texts(D.tensor_parallel_mlp(tp=2))
    assert plain.count("W2[F/4, :]") == 4
    with pytest.raises(ValueError, match="does not divide F"):
        D.tensor_parallel_mlp("llama3-8b", 5)


def test_context_chunks_show_each_ranks_work():
    shown = texts(D.context_chunks(4, 8192))
    for balanced in (True, False):
        for r, w in enumerate(context.causal_pairs(8192, 4, balanced=balanced)):
            assert f"rank {r}: {w:,}" in shown
    ring = texts(D.ring_attention(4))
    assert "3 K/V sends" in ring and "KV3" in ring and "step 3" in ring and "step 4" not in ring


def test_expert_dispatch_shows_loads_and_capacity():
    C = expert.capacity(16, 8, 2, 1.25)
    loads = expert.expert_loads(expert.toy_router(16, 8, 2, seed=0), 8)
    shown = texts(D.expert_dispatch(16, 8, 2, 4))
    assert f"capacity C={C}" in shown
    for e, load in enumerate(loads):
        assert f"expert {e}: {load}/{C}" in shown
    assert f"capacity C={expert.capacity(16, 8, 2, 2.0)}" in texts(
        D.expert_dispatch(16, 8, 2, 4, capacity_factor=2.0))


def test_chip_diagrams_follow_the_chip():
    for name in ("h100", "a100-80gb"):
        g = hardware.get(name).internals
        assert f"{g.n_sm} SMs" in texts(D.gpu_sm(name))
    assert "MXUs of 128x128" in texts(D.systolic_array("tpu-v5e"))
    assert "MXUs of 256x256" in texts(D.systolic_array("tpu-v6e"))
    shown = texts(D.memory_hierarchy("h100"))
    assert all(lvl in shown for lvl in ("registers", "L1/SMEM", "L2", "HBM"))
    assert "VMEM" in texts(D.memory_hierarchy("tpu-v5e"))


def test_topologies_follow_the_cluster():
    assert "at most 4 hops" in texts(D.torus(shape=(4, 4), wraparound=(True, True)))
    assert "at most 6 hops" in texts(D.torus(shape=(4, 4), wraparound=(False, False)))
    v5p = hardware.tpu_slice("tpu-v5p", (4, 4, 4))
    assert f"at most {hardware.ici_max_hops((4, 4, 4))} hops" in texts(D.torus(v5p))
    c = hardware.cluster("h100", 8)
    node = texts(D.nvswitch_node(c))
    assert f"{c.devices_per_node} GPUs" in node and "450 GB/s" in node
    tree = texts(D.fat_tree("h100", 4))
    assert all(f"leaf {r}" in tree for r in range(8)) and "node 3" in tree


def test_paged_kv_cache_block_table():
    from scaling_lib.course.diagrams.kvcache import allocation

    table = allocation((37, 12, 70), 16)
    assert [len(t) for t in table] == [3, 1, 5]
    assert sorted(i for t in table for i in t) == list(range(9))
    shown = texts(D.paged_kv_cache((37, 12, 70), 16))
    assert "[" + ", ".join(map(str, table[2])) + "]" in shown and "9 of 13 blocks" in shown
    with pytest.raises(ValueError, match="cannot hold"):
        D.paged_kv_cache((37, 12, 70), 16, n_blocks=5)


def test_unknown_diagram_names_the_valid_ones():
    with pytest.raises(AttributeError, match="ring_all_gather"):
        D.no_such_diagram  # noqa: B018


def test_every_part_of_the_book_uses_the_toolkit():
    """At least one chapter in each part of the book draws a diagram (issue 21's "done when")."""
    import json
    from pathlib import Path

    parts = [(1, 4), (5, 8), (9, 12), (13, 16), (17, 20), (21, 22)]
    chapters = Path(__file__).resolve().parents[1] / "chapters"
    users = set()
    for path in chapters.glob("*.ipynb"):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        source = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
        if any("diagrams." in s and "plt.show()" in s for s in source):
            users.add(int(path.name[:2]))
    missing = [p for p in parts if not any(p[0] <= n <= p[1] for n in users)]
    assert not missing, f"parts of the book (chapters) with no diagram: {missing}"
