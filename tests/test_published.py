"""Every published MFU / FLOP/s figure in scaling_lib.published, recomputed from its inputs.

Tolerances are the rounding of the printed figures, stated next to each check.
"""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaling_lib import hardware as hw
from scaling_lib import published as pb
from scaling_lib import transformer as tx

A100 = hw.get("a100-80gb").peak_flops_per_s("bf16")
H100 = hw.get("h100").peak_flops_per_s("bf16")
MEGATRON = [n for n in pb.names() if n.startswith("megatron-")]
MTNLG = [n for n in pb.names() if n.startswith("mt-nlg-")]
LLAMA3 = [n for n in pb.names() if n.startswith("llama3-405b-")]


# ---- PaLM 540B: Chowdhery et al. 2022, section 4.1 / Table 3 / appendix B -----------------------
def test_palm_540b_mfu_table3_46_2_percent():
    # Printed to 0.1 percentage point: 46.2% with attention, 45.7% without.
    assert pb.mfu("palm-540b") == pytest.approx(0.462, abs=0.0005)
    assert pb.mfu("palm-540b", include_attention=False) == pytest.approx(0.457, abs=0.0005)


def test_palm_540b_hfu_57_8_lies_between_mfu_and_full_recomputation():
    # PaLM's rematerialization policy is not published, so 57.8% can only be bracketed.
    r = pb.get("palm-540b")
    full = tx.hfu(r.model, pb.tokens_per_s(r), r.n_devices, r.accelerator, r.T, recompute="full",
                   flash_attention=False)  # PaLM (2022, TPU) predates FlashAttention
    assert pb.mfu(r) < r.hfu < full
    assert full == pytest.approx(0.615, abs=0.001)


# ---- MT-NLG 530B: Smith et al. 2022, section 2.4; PaLM Table 3 ----------------------------------
@pytest.mark.parametrize("name", MTNLG)
def test_mtnlg_tflops_per_gpu_from_iteration_time_section_2_4(name):
    # 126 / 121 / 113 TFLOP/s from 60.1 / 50.2 / 44.4 s per iteration, counted as Megatron does
    # (full recomputation). Step time printed to 0.1 s, FLOP/s to 1 TFLOP/s: within 1%.
    r = pb.get(name)
    assert pb.flops_per_s_per_device(r, "full") == pytest.approx(r.flops_per_s_per_device,
                                                                 rel=0.01)


def test_mtnlg_mfu_as_palm_table3_computes_it():
    # 65.43K tokens/s; MFU 30.2% with attention, 29.7% without (0.1-point rounding).
    r = pb.get("mt-nlg-530b-2240")
    assert pb.tokens_per_s(r) == pytest.approx(65.43e3, abs=5)
    assert pb.mfu(r) == pytest.approx(r.mfu, abs=0.0005)
    assert pb.mfu(r, include_attention=False) == pytest.approx(r.mfu_no_attention, abs=0.0005)


@pytest.mark.parametrize("name", MTNLG)
def test_mtnlg_reported_flops_and_step_time_agree(name):
    # The throughput implied by the reported FLOP/s matches the step time's, within 1%.
    r = pb.get(name)
    assert pb.implied_tokens_per_s(r) == pytest.approx(pb.tokens_per_s(r), rel=0.01)
    assert pb.mfu_from_reported_flops(r) == pytest.approx(pb.mfu(r), rel=0.01)


# ---- Megatron-LM: Narayanan et al. 2021, Table 1 and section 5.1 --------------------------------
@pytest.mark.parametrize("name", MEGATRON)
def test_megatron_table1_parameter_counts_eq2(name):
    # Printed in billions to 0.1; eq. 2 omits the final LayerNorm (2·h parameters), which we count.
    r = pb.get(name)
    assert tx.n_params(r.model) == pytest.approx(r.n_params, abs=0.05e9)


@pytest.mark.parametrize("name", MEGATRON)
def test_megatron_table1_percent_of_peak(name):
    # % of the 312 TFLOP/s A100 peak, printed to 1 point; per-GPU FLOP/s printed to 1 TFLOP/s.
    r = pb.get(name)
    assert r.flops_per_s_per_device / A100 == pytest.approx(r.hfu, abs=0.005 + 0.5e12 / A100)


@pytest.mark.parametrize("name", MEGATRON)
def test_megatron_table1_aggregate_petaflops(name):
    # Aggregate = per GPU x GPUs; rounding of both printed columns bounds the difference.
    r = pb.get(name)
    total = pb.MEGATRON_AGGREGATE_FLOPS_PER_S[name]
    tol = 0.5e12 * r.n_devices + 0.05e15
    assert r.flops_per_s_per_device * r.n_devices == pytest.approx(total, abs=tol)


@pytest.mark.parametrize("name", MEGATRON)
def test_megatron_percent_of_peak_is_hfu_mfu_is_about_three_quarters(name):
    r = pb.get(name)
    ratio = pb.mfu_from_reported_flops(r) / (r.flops_per_s_per_device / A100)
    assert 0.75 <= ratio < 0.77  # the logit layer (not recomputed) lifts small models
    assert ratio == pytest.approx(pb.model_flops_fraction(r.model, r.T))


def test_megatron_1t_mfu_golden():
    # 163 TFLOP/s counted with recomputation = 52% "of peak"; in model FLOPs about 39%.
    assert pb.mfu_from_reported_flops("megatron-1t") == pytest.approx(0.392, abs=0.0005)


@pytest.mark.parametrize("est", pb.TIME_ESTIMATES, ids=lambda e: e.name)
def test_narayanan_section_5_1_training_time_estimates(est):
    # 34 days (GPT-3 175B, 300B tokens, 1024 GPUs at 140 TFLOP/s); 84 days (1T, 450B, 3072 at 163).
    assert round(pb.estimated_days(est)) == est.days


# ---- Llama 3 405B: The Llama 3 Herd of Models, Table 4 ------------------------------------------
@pytest.mark.parametrize("name", LLAMA3)
def test_llama3_table4_mfu_is_tflops_over_h100_peak(name):
    # TFLOPs/GPU printed to tens (±5 TFLOP/s = ±0.5 point) and MFU to 1 point: within 1 point.
    r = pb.get(name)
    assert r.flops_per_s_per_device / H100 == pytest.approx(r.mfu, abs=0.01)
    assert pb.mfu_from_reported_flops(r) == pytest.approx(r.flops_per_s_per_device / H100)


@pytest.mark.parametrize("name", LLAMA3)
def test_llama3_table4_16m_tokens_per_batch(name):
    r = pb.get(name)
    assert r.tokens_per_step == 16 * 2**20


@pytest.mark.parametrize("name", pb.names())
def test_parallel_degrees_multiply_to_the_device_count(name):
    r = pb.get(name)
    assert r.tp * r.pp * r.cp * r.dp == r.n_devices


def test_llama3_implied_step_time_and_attention_convention():
    # Not published; derived. Counting only the causal half of attention cuts the implied step
    # time by 4% at 8K tokens and by 29% at 128K.
    short, long_ = pb.get("llama3-405b-8k-T8k"), pb.get("llama3-405b-16k-T128k")
    assert pb.implied_step_time(short) == pytest.approx(12.5, abs=0.05)
    assert pb.implied_step_time(short, causal=True) / pb.implied_step_time(short) == \
        pytest.approx(0.961, abs=0.001)
    assert pb.implied_step_time(long_, causal=True) / pb.implied_step_time(long_) == \
        pytest.approx(0.714, abs=0.001)


def test_llama3_whole_run_compute_and_gpu_hours():
    # 3.8e25 FLOPs (paper) vs 6·N·D; whole-run utilisation below Table 4's 38-43%.
    six_n = tx.six_n_flops(tx.n_params("llama3-405b"), pb.LLAMA3_405B_TOKENS)
    assert six_n == pytest.approx(pb.LLAMA3_405B_TRAIN_FLOPS, rel=0.01)
    whole = pb.LLAMA3_405B_TRAIN_FLOPS / (pb.LLAMA3_405B_GPU_HOURS * 3600 * H100)
    assert 0.30 < whole < min(pb.get(n).mfu for n in LLAMA3)


# ---- invariants and errors ----------------------------------------------------------------------
@pytest.mark.parametrize("name", ["palm-540b"] + MTNLG)
def test_mfu_matches_transformer_mfu_and_attention_adds(name):
    r = pb.get(name)
    assert pb.mfu(r) == pytest.approx(tx.mfu(r.model, pb.tokens_per_s(r), r.n_devices,
                                             r.accelerator, r.T))
    assert pb.mfu(r, include_attention=False) < pb.mfu(r)
    assert pb.flops_per_s_per_device(r, "full") > pb.flops_per_s_per_device(r)


# MT-NLG ran at 30% MFU in 60.1 s per step, so a step under ~18 s would beat the peak (an error)
@settings(max_examples=50, deadline=None)
@given(step=st.floats(min_value=20.0, max_value=1e3), name=st.sampled_from(MTNLG))
def test_mfu_is_inversely_proportional_to_step_time(step, name):
    r = pb.get(name)
    r2 = dataclasses.replace(r, step_time=step)
    assert pb.mfu(r2) * step == pytest.approx(pb.mfu(r) * r.step_time)


@settings(max_examples=50, deadline=None)
@given(T=st.integers(min_value=16, max_value=2**17),
       model=st.sampled_from(["llama3-8b", "llama3-405b", "palm-540b", "gpt3-175b"]))
def test_model_flops_fraction_bounds(T, model):
    assert pb.model_flops_fraction(model, T, "none") == pytest.approx(1.0)
    assert 0.75 <= pb.model_flops_fraction(model, T, "full") < 1.0


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="known: palm-540b"):
        pb.get("gpt-5")
    with pytest.raises(ValueError, match="neither tokens/s nor a step time"):
        pb.tokens_per_s("megatron-1t")
    with pytest.raises(ValueError, match="no FLOP/s per device"):
        pb.implied_tokens_per_s("palm-540b")
    with pytest.raises(ValueError, match="flops_convention='selective'"):
        dataclasses.replace(pb.get("palm-540b"), flops_convention="selective")
    with pytest.raises(ValueError, match="unknown accelerator|known"):
        dataclasses.replace(pb.get("palm-540b"), accelerator="tpu-v9")


# ---- the chapter's figures (scaling_lib.course.widgets.mfu) -------------------------------------------
def test_mfu_figures_draw_library_numbers():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scaling_lib.course.widgets import mfu as fig

    rows = {r[0]: r[1:] for r in fig.published_rows()}
    assert rows["palm-540b"] == (pytest.approx(pb.mfu("palm-540b")), 0.462, "MFU")
    assert rows["megatron-1t"] == (pytest.approx(0.392, abs=0.0005), 0.52, "HFU")
    # No-overlap utilisation is 1 / (1 + I*/I): one half at the chip's own critical intensity.
    a100 = hw.get("a100-80gb")
    assert fig.no_overlap_utilization(a100.critical_intensity(), a100) == pytest.approx(0.5)
    assert fig.no_overlap_utilization(a100.critical_intensity(), "h100") < 0.5
    _, axes = plt.subplots(1, 3)
    assert len(fig.plot_published(axes[0])) == len(fig.DEFAULT_RUNS)
    m, h = fig.plot_mfu_vs_step_time(axes[1], "llama3-70b", "h100", 1024, 512, 8192, mark=6.0)
    assert m == pytest.approx(tx.mfu("llama3-70b", 512 * 8192 / 6.0, 1024, "h100", 8192))
    # HFU counts full recomputation and the QKᵀ FlashAttention's backward recomputes
    assert h / m == pytest.approx(
        tx.flops_per_token("llama3-70b", 8192, recompute="full", flash_attention=True)
        / tx.flops_per_token("llama3-70b", 8192))
    fig.plot_upgrade(axes[2], mark=150.0)
    plt.close("all")


def test_deepseek_v3_gpu_hours_are_consistent():
    # DeepSeek-AI 2024, section 1: 180K H800 GPU hours per trillion tokens = 3.7 days on 2,048
    # GPUs; 14.8T tokens in 2,664K GPU hours (Table 1). Both to the printed rounding.
    days = pb.DEEPSEEK_V3_GPU_HOURS_PER_TRILLION / pb.DEEPSEEK_V3_N_GPUS / 24
    assert round(days, 1) == 3.7
    total = pb.DEEPSEEK_V3_GPU_HOURS_PER_TRILLION * pb.DEEPSEEK_V3_TOKENS / 1e12
    assert abs(total / pb.DEEPSEEK_V3_PRETRAIN_GPU_HOURS - 1) < 0.005


def test_whole_run_mfu_depends_on_the_stated_peak():
    args = ("deepseek-v3", pb.DEEPSEEK_V3_T, 1e12, pb.DEEPSEEK_V3_GPU_HOURS_PER_TRILLION, "h100")
    bf16 = pb.whole_run_mfu(*args)
    fp8 = pb.whole_run_mfu(*args, dtype="fp8")
    assert fp8 == pytest.approx(bf16 / 2, rel=1e-4)  # H100: 1,978.9 vs 989.4 TFLOP/s
    f = tx.flops_per_token("deepseek-v3", pb.DEEPSEEK_V3_T) * 1e12
    assert bf16 == pytest.approx(f / (180e3 * 3600 * H100))
    assert pb.whole_run_mfu(*args, causal=True) < bf16
    mix = tx.mixed_precision_peak("deepseek-v3", pb.DEEPSEEK_V3_T, "h100")
    assert fp8 < bf16 * H100 / mix < bf16
