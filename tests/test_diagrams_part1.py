"""The Part I diagrams (scaling_lib.course.diagrams.part1): they render, follow the library's
numbers, and carry alt text."""

import matplotlib
import pytest

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from scaling_lib import hardware as hw  # noqa: E402
from scaling_lib import roofline as rl  # noqa: E402
from scaling_lib.course import diagrams  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _texts(ax):
    return " ".join(t.get_text() for t in ax.texts) + " " + " ".join(
        t.get_text() for t in (ax.get_legend().get_texts() if ax.get_legend() else []))


@pytest.mark.parametrize("name", ["h100", "b200", "tpu-v5e"])
def test_roofline_ridge_marks_the_library_ridge(name):
    ax = diagrams.roofline_ridge(name)
    ridge = hw.get(name).critical_intensity()
    assert f"{ridge:.0f} FLOPs/byte" in _texts(ax)
    assert f"{ridge:.0f} FLOPs per byte" in diagrams.alt_text(ax.figure)
    # the elementwise add is memory-bound, the 4096-token matmul compute-bound, on every chip
    legend = _texts(ax)
    assert "residual add (x + y): I = 0.167, memory-bound" in legend
    assert "4096 tokens" in legend and "compute-bound" in legend


def test_roofline_ridge_places_given_operations():
    ax = diagrams.roofline_ridge("h100", ops=[("op", 10.0)])
    assert "op: I = 10, memory-bound" in _texts(ax)


def test_overlap_bounds_follows_time_bounds():
    ax = diagrams.overlap_bounds("h100", (4096, 4096, 4096))
    a = hw.get("h100")
    tm = rl.t_math(rl.matmul_flops(4096, 4096, 4096), a.peak_flops_per_s())
    tc = rl.t_comms(rl.matmul_bytes(4096, 4096, 4096), a.hbm_bytes_per_s)
    lo, hi = rl.time_bounds(tm, tc)
    from scaling_lib.units import fmt_seconds
    text = _texts(ax)
    assert f"sum {fmt_seconds(hi)}" in text and f"max {fmt_seconds(lo)}" in text
    assert "upper bound" in text and diagrams.alt_text(ax.figure)


@pytest.mark.parametrize("name", ["tpu-v5e", "tpu-v6e", "tpu-v5p"])
def test_vpu_layout_follows_internals(name):
    t = hw.get(name).internals
    ax = diagrams.vpu_layout(name)
    text = _texts(ax)
    assert f"{t.mxus_per_core} MXUs" in text and f"{t.mxu_size} x {t.mxu_size}" in text
    assert f"{t.vpu_sublanes} sublanes x {t.vpu_lanes} lanes" in text
    assert "sublanes" in diagrams.alt_text(ax.figure)


def test_vpu_layout_refuses_a_gpu():
    with pytest.raises(ValueError, match="no TPUInternals"):
        diagrams.vpu_layout("h100")
