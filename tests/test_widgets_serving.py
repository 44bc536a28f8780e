"""The serving explorer (widgets.serving): its figures draw the library's numbers."""

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from scaling_lib import serving  # noqa: E402
from scaling_lib.course.widgets import serving as sw  # noqa: E402


def test_breakdown_and_pareto_draw():
    fig, (a1, a2) = plt.subplots(1, 2)
    here = sw.plot_breakdown(a1, batch=64)
    e = serving.estimate("llama3-70b", "h100", 8, batch=64, prompt_len=1024, gen_len=256, tp=8)
    assert max(max(here["weights"] + here["kv cache"], here["flops"]) + here["communication"],
               here["launch"]) == pytest.approx(e.tpot)
    rows = sw.plot_pareto(a2)
    front = sorted((r for r in rows if r["on_front"]), key=lambda r: r["tpot"])
    assert len(front) >= 3 and {r["n_devices"] for r in rows} == {2, 4, 8, 16}
    rate = [r["tokens_per_s_per_device"] for r in front]
    assert np.all(np.diff(rate) > 0)  # slower tokens buy cheaper ones along the front
    plt.close(fig)


def test_pareto_skips_what_cannot_hold_the_weights():
    rows = sw.pareto_points("llama3-70b", "h100", (1, 2))
    assert {r["n_devices"] for r in rows} == {2}  # 141 GB of bf16 weights > one 80 GB GPU


def test_summary_names_the_figures():
    text = sw.summary("llama3-70b", "h100", 8, batch=64, prompt_len=1024, gen_len=256, price=2.0)
    assert "TTFT" in text and "TPOT" in text and "per million output tokens" in text


def test_explorer_builds():
    pytest.importorskip("ipywidgets")
    box = sw.explorer()
    assert len(box.children) == 5
    plt.close("all")


def test_no_price_for_a_setup_that_does_not_fit():
    text = sw.summary("llama3-405b", "h100", 8, batch=1, prompt_len=1024, gen_len=256, price=2.0)
    assert "DOES NOT FIT" in text and "per million" not in text


def test_auto_layout_puts_stages_across_nodes():
    text = sw.summary("llama3-405b", "h100", 16, batch=1, prompt_len=1024, gen_len=256)
    assert "tp=8 pp=2" in text
    assert "tp=16 pp=1" in sw.summary("llama3-405b", "h100", 16, batch=1, prompt_len=1024,
                                      gen_len=256, layout="tp")
    fig, ax = plt.subplots()
    here = sw.plot_breakdown(ax, "llama3-405b", "h100", 16, batch=4)
    e = serving.estimate("llama3-405b", "h100", 16, batch=4, prompt_len=1024, gen_len=256)
    assert (e.tp, e.pp) == (8, 2) and "tp=8 pp=2" in ax.get_title()
    assert here["communication"] > 0
    with pytest.raises(ValueError, match="layout"):
        sw.summary("llama3-70b", "h100", 8, batch=1, prompt_len=8, gen_len=8, layout="x")
    plt.close(fig)
