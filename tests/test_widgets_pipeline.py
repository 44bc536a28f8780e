"""The pipeline-schedule figures (widgets.pipeline); schedules are tested in test_pipeline.py."""

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from scaling_lib.parallelism import pipeline  # noqa: E402
from scaling_lib.course.widgets import pipeline as pw  # noqa: E402


def test_gantt_and_in_flight_draw_on_an_axes():
    fig, (a1, a2) = plt.subplots(2, 1)
    ev = pipeline.schedule(4, 8, kind="interleaved", v=2)
    assert pw.plot_schedule(a1, ev) == pytest.approx(pipeline.bubble_fraction(ev))
    assert len(a1.collections) == 4 + len(ev)  # one idle band per stage, one box per operation
    peak = pw.plot_in_flight(a2, pipeline.schedule(4, 8, kind="gpipe"))
    assert peak.tolist() == [8.0] * 4
    plt.close(fig)


def test_explorer_builds():
    pytest.importorskip("ipywidgets")
    box = pw.explorer(pp=2, m=2)
    assert box.children
    plt.close("all")


def test_explorer_greys_out_v_unless_interleaved():
    pytest.importorskip("ipywidgets")
    box = pw.explorer(pp=4, m=8, kind="1f1b", v=2)
    kind_w, v_w = box.children[1].children[:2]
    assert v_w.disabled
    kind_w.value = "interleaved"
    assert not v_w.disabled
    plt.close("all")
