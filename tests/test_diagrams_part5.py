"""Part V's diagrams (scaling_lib.course.diagrams.part5): each renders from library objects,
follows them, and carries alt text."""

import matplotlib
import numpy as np
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from scaling_lib import validation  # noqa: E402
from scaling_lib import scheduling as sch  # noqa: E402
from scaling_lib.course import diagrams as D  # noqa: E402
from scaling_lib.parallelism import rules  # noqa: E402


def texts(obj):
    axes = obj if isinstance(obj, list) else [obj]
    return " ".join(t.get_text() for a in axes for t in a.texts) + " ".join(
        a.get_title() for a in axes)


@pytest.fixture(autouse=True)
def close():
    yield
    plt.close("all")


def curve():
    sizes = np.array([8, 16, 32, 64])
    return sch.ScalingCurve(sizes, [1e5, 1.9e5, 3.4e5, 5.6e5], 6e10, 312e12)


def test_layer_chunks_follows_the_pp_virtual_rule():
    ok = D.layer_chunks(96, 8, 4)
    assert "3 layers per chunk" in ok.get_title() and "0–2" in texts(ok)
    bad = D.layer_chunks(96, 8, 8)  # 12 layers per stage, 8 chunks: Megatron-LM refuses
    assert "pp_virtual" in bad.get_title()
    assert "pp_virtual" in rules.broken("gpt3-175b", __import__(
        "scaling_lib").parallelism.ParallelPlan(pp=8, virtual_stages=8, schedule="interleaved",
                                                dp=8), 64, 2048)
    meta = D.layer_chunks(126, 16, 1, "light_ends")  # Llama 3 405B: 7 + 14 x 8 + 7
    assert "0–6" in texts(meta) and "119–125" in texts(meta)
    assert D.alt_text(meta)


def test_planning_procedure_carries_the_runs_numbers():
    ax = D.planning_procedure(2.8e12, 80e9, 1536, 1024, 22429)
    t = texts(ax)
    assert "≥ 35 GPUs" in t and "1.5 per GPU" in t and "22,429" in t
    assert "2.8 TB" in D.alt_text(ax)


def test_search_funnel_counts_match_the_result():
    from scaling_lib import hardware, planner

    res = planner.search("llama3-8b", hardware.cluster("h100", 16), 32, 2048)
    ax = D.search_funnel(res)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels[0] == "all plans" and labels[-1] == "runs"
    assert f"{len(res):,}" in texts(ax) and f"{res.n_plans:,}" in texts(ax)


def test_holdout_split_holds_out_whole_models():
    rows = validation.load("multi")
    axes = D.holdout_split(rows)
    assert len(axes) == 2 and "whole models" in axes[1].get_title()
    test = validation.split(rows, "test", "model")
    assert len(np.unique(rows["D"][test])) == 1  # the held-out model is never in the fit
    assert not np.isin(rows["D"][test], rows["D"][~test]).any()
    assert D.alt_text(axes)


def test_calibrate_flow_names_the_constants():
    ax = D.calibrate_flow(("gemm_efficiency", "kernel_time"))
    assert "gemm_efficiency, kernel_time" in texts(ax)


def test_checkpoint_timeline_loses_the_work_since_the_last_checkpoint():
    ax = D.checkpoint_timeline(1200.0, 60.0, 900.0, 3000.0)
    assert "8 minutes after" in D.alt_text(ax)  # two blocks of 1,260 s end at 2,520 s


def test_marginal_gain_is_the_schedulers_marginal_throughput():
    c = curve()
    ax = D.marginal_gain(c, 16, 32)
    gain = sch.marginal_throughput(c, 16, 32)
    assert f"{gain / 1e12:.0f} TFLOP/s" in ax.get_title()


def test_share_or_srpt_shortest_first_finishes_sooner_on_average():
    axes = D.share_or_srpt(curve(), 1e10, 64)  # same total work: shortest first, sooner average
    shared, srpt = (float(a.get_title().split("completion ")[1].split(" h")[0]) for a in axes)
    assert srpt < shared
