"""Part IV's diagrams (scaling_lib.course.diagrams.part4): each renders, carries alt text,
follows the library object it draws, and refuses what it cannot draw with a ValueError."""

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from scaling_lib import models  # noqa: E402
from scaling_lib.course import diagrams as D  # noqa: E402
from scaling_lib.course.diagrams._style import fmt  # noqa: E402
from scaling_lib.parallelism import ParallelPlan, context, mesh, pipeline, routing  # noqa: E402

CALLS = {
    "pipeline_stages": lambda: D.pipeline_stages("llama3-70b", 4, 4096),
    "pipeline_dp_overlap": lambda: D.pipeline_dp_overlap(4, 6),
    "ulysses_all_to_all": lambda: D.ulysses_all_to_all("llama3-8b", 4),
    "router_balance": lambda: D.router_balance(512, 8, 2, steps=50),
    "mesh_axes": lambda: D.mesh_axes(2, 2, 2, 2),
    "split_backward": lambda: D.split_backward(4, 8),
}


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def test_every_part4_function_is_registered_and_tested():
    from scaling_lib.course.diagrams import _WHERE, part4
    assert set(CALLS) == set(part4.__all__) == {n for n, m in _WHERE.items() if m == "part4"}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_renders_with_alt_text(name):
    drawn = CALLS[name]()
    assert len(D.alt_text(drawn)) > 80


def test_pipeline_stages_label_the_librarys_send_bytes_and_split():
    c = models.get("llama3-70b")
    ax = D.pipeline_stages("llama3-70b", 4, 4096)
    text = " ".join(t.get_text() for t in ax.texts)
    assert fmt(pipeline.send_bytes(c.D, 1, 4096)) in text
    for n in pipeline.layer_split(c.L, 4):
        assert f"{n} layers" in text


def test_dp_overlap_draws_one_reduction_per_stage_after_its_last_backward():
    ax = D.pipeline_dp_overlap(3, 4, t_reduce=5.0)
    ev = pipeline.schedule(3, 4)
    reds = [c for c in ax.collections if len(c.get_paths()) == 1
            and abs(c.get_paths()[0].get_extents().width - 5.0) < 1e-9]
    assert len(reds) == 3
    starts = sorted(float(c.get_paths()[0].get_extents().x0) for c in reds)
    last_b = sorted(float(ev[(ev["stage"] == s) & (ev["op"] == "B")]["start"].max()) for s in range(3))
    assert np.allclose(starts, last_b)
    assert "after all compute has ended" in D.alt_text(ax)


def test_ulysses_replicates_kv_heads_as_the_library_does():
    ax = D.ulysses_all_to_all("llama3-405b", 8, tp=8)
    ku = context.ulysses_kv_heads("llama3-405b", 8, tp=8)
    assert f"replicated {ku:g}x" in " ".join(t.get_text() for t in ax.texts)
    with pytest.raises(ValueError, match="query heads"):
        D.ulysses_all_to_all("llama3-70b", 8, tp=16)   # n = 4 query heads per rank


def test_router_balance_reports_the_librarys_aux_loss():
    axes = D.router_balance(512, 8, 2, skew=1.0, steps=50)
    z = routing.toy_logits(512, 8, 2, skew=1.0)
    assert f"{routing.load_balance_loss(z, 2, alpha=1.0):.2f}" in axes[0].get_title()


def test_mesh_axes_colours_the_librarys_groups():
    axes = D.mesh_axes(2, 2, 2, 2)
    plan = ParallelPlan(tp=2, cp=2, pp=2, dp=2)
    for a, name in zip(axes, ("tp", "cp", "pp", "dp")):
        assert f"stride {mesh.strides(plan)[name]}" in a.get_title()
    with pytest.raises(ValueError, match="too many"):
        D.mesh_axes(8, 2, 4, 2)


def test_split_backward_titles_carry_the_librarys_step_times():
    axes = D.split_backward(4, 6)
    one = pipeline.schedule(4, 6, t_fwd=1.0, t_bwd=2.0)
    split = pipeline.split_backward_schedule(4, 6)
    assert f"step {pipeline.makespan(one):g}" in axes[0].get_title(loc="left")
    assert f"step {pipeline.makespan(split):g}" in axes[1].get_title(loc="left")
