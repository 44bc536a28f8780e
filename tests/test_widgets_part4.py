"""Part IV's figure helpers: the CP communication plot (widgets.context) and the mesh explorer
(widgets.mesh) follow the library."""

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from scaling_lib.course.widgets import context as cw  # noqa: E402
from scaling_lib.course.widgets import mesh as mw  # noqa: E402
from scaling_lib.parallelism import context as cx  # noqa: E402


def test_ulysses_limit_is_the_query_heads():
    assert cw.can_run("llama3-405b", "ulysses", 16, tp=8)      # n = 16, k = 1 replicated
    assert not cw.can_run("llama3-70b", "ulysses", 16, tp=8)   # n = 8 < 16
    assert cx.best_variant("llama3-70b", 16, 131072, "h100", 50e9, tp=8) != "ulysses"


@pytest.mark.parametrize("what", ["comm", "exposed"])
def test_comm_plot_draws_every_variant_that_can_run(what):
    fig, ax = plt.subplots()
    drawn = cw.plot_comm_to_attention(ax, "llama3-405b", 16, [("NIC", "h100", 50e9)], tp=8,
                                      what=what)
    assert drawn == list(cx.VARIANTS)
    ring = [ln for ln in ax.lines if ln.get_label().startswith("ring")][0]
    t = cx.layer_times("llama3-405b", "ring", 16, ring.get_xdata(), "h100", 50e9, tp=8)
    assert ring.get_ydata() == pytest.approx(getattr(t, what) / t.attention)
    assert ax.get_yscale() == ("log" if what == "comm" else "linear")
    plt.close(fig)


def test_comm_plot_refuses_an_unknown_quantity():
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match="comm"):
        cw.plot_comm_to_attention(ax, "llama3-405b", 16, [], what="bytes")
    plt.close(fig)


def test_mesh_explorer_opens_on_a_layout_that_fits():
    pytest.importorskip("ipywidgets")
    from scaling_lib.parallelism import ParallelPlan
    from scaling_lib.parallelism import mesh as M
    box = mw.explorer()
    sched_w, rec_w, zero_w = box.children[2].children
    assert (sched_w.value, rec_w.value, zero_w.value) == (("interleaved", 4), "full", 1)
    plan = ParallelPlan(tp=8, pp=16, dp=64, sequence_parallel=True, zero=1,
                        schedule="interleaved", virtual_stages=4, recompute="full")
    fits = M.mesh_report("llama3-405b", "llama3-24k", plan, 2048, 8192)
    assert fits.fits and "(fits" in mw.summary(fits)
    heavy = M.mesh_report("llama3-405b", "llama3-24k", plan.with_changes(recompute="none"), 2048, 8192)
    assert not heavy.fits and "does not fit" in mw.summary(heavy)
    rec_w.value = "none"   # redraws without error
    plt.close("all")
