"""The strategy explorer (widgets.parallelism); the step-time model under it is tested in
test_steptime.py."""

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from scaling_lib import hardware  # noqa: E402
from scaling_lib.parallelism import ParallelPlan, steptime, timeline  # noqa: E402
from scaling_lib.course.widgets import parallelism as pw  # noqa: E402

H100_8, H100_64 = hardware.cluster("h100", 8), hardware.cluster("h100", 64)


def test_step_time_curves_and_first_comm_bound():
    curves = pw.step_time_curves("llama3-8b", "h100", 2**21, 1024, (8, 512, 1024, 2048))
    assert set(curves) == {label for label, _ in pw.DEFAULT_STRATEGIES}
    # the first device count whose step (the estimate's since issue 19) exposes communication
    for label, rows in curves.items():
        n0 = pw.first_comm_bound(rows)
        assert n0 is not None and rows[[n for n, _ in rows].index(n0)][1].comm_bound
        assert not any(st.comm_bound for n, st in rows if st is not None and n < n0)
    dp8 = dict(curves["DP"])[8]
    assert not pw.states_fit(dp8, "h100")  # 16 bytes x 8B parameters > 80 GB
    assert pw.states_fit(dict(curves["FSDP (ZeRO-3)"])[8], "h100")


def test_plots_draw_on_an_axes():
    fig, axs = plt.subplots(2, 2)
    st = steptime.step_time("llama3-70b", H100_64, ParallelPlan(dp=8, tp=8, zero=3,
                                                                 micro_batch=4), 32, 4096)
    assert pw.plot_memory(axs[0, 0], st, "h100") == pytest.approx(st.memory.total / 1e9)
    rows = pw.plot_step(axs[0, 1], st)
    assert len(rows) == len(st.compute) + len(st.comms)
    streams = pw.plot_timeline(axs[1, 0], timeline.fsdp_timeline("llama3-8b", H100_8, 8, 4096,
                                                                 4096, n_layers=3))
    assert streams == ["all-gather", "compute", "reduce-scatter"]
    curves = pw.plot_step_time_vs_devices(axs[1, 1], n_devices=(8, 16))
    assert all(len(rows) == 2 for rows in curves.values())
    plt.close(fig)


def test_explorer_builds():
    pytest.importorskip("ipywidgets")
    box = pw.explorer()
    assert box.children
    plt.close("all")
