"""Tests for scaling_lib.transformer: exact parameter counts, FLOPs, KV cache, MFU/HFU."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from scaling_lib import hardware as hw, models, transformer as tr
from scaling_lib.models import TransformerConfig
from scaling_lib.units import DAY


# ---- parameter counts: golden values -----------------------------------------------------------
@pytest.mark.parametrize("name, total", [
    # Llama 3 Herd of Models / Hugging Face model cards: exact parameter counts, V = 128,256 untied.
    ("llama3-8b", 8_030_261_248),
    ("llama3-70b", 70_553_706_496),
    ("llama3-405b", 405_853_388_800),
    # meta-llama/Llama-2-13b-hf: 13,015,864,320.
    ("llama2-13b", 13_015_864_320),
    # mistralai/Mixtral-8x7B-v0.1: 46,702,792,704.
    ("mixtral-8x7b", 46_702_792_704),
])
def test_exact_parameter_counts(name, total):
    count = tr.param_count(name)
    assert count.total == total
    assert all(isinstance(v, int) for v in count.values())


def test_llama3_8b_breakdown_by_hand():
    # L · (2D(N+K)H + 3DF + 2D) + 2VD + D with the published config.
    b = tr.param_count("llama3-8b")
    assert b["attention"] == 32 * 2 * 4096 * (32 + 8) * 128
    assert b["mlp"] == 32 * 3 * 4096 * 14336
    assert b["norms"] == 32 * 2 * 4096 + 4096
    assert b["embedding"] == b["unembedding"] == 128256 * 4096


# Narayanan et al. 2021 (Megatron-LM), Table 1: parameter count (billions) from (layers, hidden),
# with V = 51,200 and s = 2,048; the table rounds to 0.1B.
MEGATRON_TABLE1 = [(1.7, 24, 2304, 24), (3.6, 30, 3072, 32), (7.5, 36, 4096, 32),
                   (18.4, 40, 6144, 48), (39.1, 48, 8192, 64), (76.1, 60, 10240, 80),
                   (145.6, 80, 12288, 96), (310.1, 96, 16384, 128), (529.6, 105, 20480, 128),
                   (1008.0, 128, 25600, 160)]


@pytest.mark.parametrize("billions, L, D, N", MEGATRON_TABLE1)
def test_megatron_table1_parameter_column(billions, L, D, N):
    assert round(tr.param_count(models.gpt(L, D, N)).total / 1e9, 1) == billions


def test_gpt3_175b():
    # Brown et al. 2020, Table 2.1: "175.0B" (174.6B with the published shape).
    assert round(tr.n_params("gpt3-175b") / 1e9, 1) == 174.6


def test_palm_540b():
    # Chowdhery et al. 2022, Table 1: 540.35B parameters.
    assert abs(tr.n_params("palm-540b") / 540.35e9 - 1) < 2e-5


def test_deepseek_v3_total_and_active():
    # DeepSeek-V3 Technical Report, abstract: 671B total, 37B activated per token.
    assert round(tr.n_params("deepseek-v3") / 1e9) == 671
    assert 37e9 < tr.n_params("deepseek-v3", active=True) < 38e9


def test_mixtral_active_params():
    # Mixtral of Experts (Jiang et al. 2024): 47B total, 13B active.
    assert round(tr.n_params("mixtral-8x7b", active=True) / 1e9) == 13


# ---- parameter counts: properties ---------------------------------------------------------------
dims = st.integers(1, 64)


@st.composite
def configs(draw):
    K = draw(st.integers(1, 8))
    N = K * draw(st.integers(1, 4))
    E = draw(st.sampled_from([1, 1, 4, 8]))
    L = draw(st.integers(1, 12))
    moe = dict(E=E, k=draw(st.integers(1, E)), F_expert=draw(dims),
               n_shared_experts=draw(st.integers(0, 2)), n_dense_layers=draw(st.integers(0, L))
               ) if E > 1 else {}
    return TransformerConfig(L=L, D=draw(dims), F=draw(dims), N=N, K=K, H=draw(dims),
                             V=draw(st.integers(1, 1000)), glu=draw(st.booleans()),
                             tied_embeddings=draw(st.booleans()), bias=draw(st.booleans()),
                             norm=draw(st.sampled_from(["rmsnorm", "layernorm"])), **moe)


@settings(max_examples=80, deadline=None)
@given(configs())
def test_param_count_matches_independent_formula(c):
    # An independent, one-line count of the same architecture.
    n_mats = 3 if c.glu else 2
    norm = c.D * (2 if c.norm == "layernorm" and c.bias else 1)
    attn = 2 * c.D * (c.N + c.K) * c.H + ((c.N + 2 * c.K) * c.H + c.D if c.bias else 0)

    def mlp(f):
        return n_mats * c.D * f + (((n_mats - 1) * f + c.D) if c.bias else 0)
    n_moe = c.L - c.n_dense_layers if c.E > 1 else 0
    per_moe = (c.E + c.n_shared_experts) * mlp(c.F_e) + c.D * c.E
    expected = (c.L * (attn + 2 * norm) + (c.L - n_moe) * mlp(c.F) + n_moe * per_moe
                + c.V * c.D * (1 if c.tied_embeddings else 2) + norm)
    assert tr.param_count(c).total == expected
    active = tr.n_params(c, active=True)
    assert active <= expected
    assert (active == expected) == (c.E == 1 or c.k == c.E or n_moe == 0)


@settings(max_examples=50, deadline=None)
@given(configs(), st.integers(1, 4096))
def test_forward_flops_are_twice_matmul_weights_plus_attention(c, T):
    # Without attention: 2 FLOPs per weight touched per token; tied or not, the head multiplies.
    no_bias = tr.active_param_count(c.with_changes(bias=False))
    weights = no_bias.total - no_bias["norms"] - no_bias["embedding"] \
        + c.V * c.D * c.tied_embeddings
    f = tr.forward_flops(c, 1, T, include_attention=False)
    assert math.isclose(f, 2 * T * weights, rel_tol=1e-12)
    attn = tr.forward_flops(c, 1, T) - f
    assert math.isclose(attn, 4 * T * T * c.N * c.H * c.L, rel_tol=1e-12)


# ---- FLOPs --------------------------------------------------------------------------------------
def test_train_is_three_forwards_and_broadcasts():
    B = np.array([1, 2, 4])
    T = np.array([[1024], [8192]])
    f = tr.forward_flops("llama3-70b", B, T)
    assert f.shape == (2, 3)
    np.testing.assert_allclose(tr.train_flops("llama3-70b", B, T), 3 * f)
    np.testing.assert_allclose(f[:, 1], 2 * f[:, 0])


def test_causal_halves_only_attention():
    full = tr.forward_flops("llama3-8b", 1, 8192)
    causal = tr.forward_flops("llama3-8b", 1, 8192, causal=True)
    dense = tr.forward_flops("llama3-8b", 1, 8192, include_attention=False)
    assert math.isclose(full - dense, 2 * (causal - dense))


def test_llama3_405b_training_flops():
    # Llama 3 Herd of Models, section 3.2.1: 3.8e25 FLOPs for 405B on 15.6T tokens.
    assert f"{tr.six_n_flops(tr.n_params('llama3-405b'), 15.6e12):.1e}" == "3.8e+25"
    # the attention term at T = 8192 adds about 8%
    assert 1.07 < tr.flops_per_token("llama3-405b", 8192) / (6 * tr.n_params("llama3-405b")) < 1.09


def test_megatron_flops_formula_with_recomputation():
    # Narayanan et al. 2021, eq. (3): with full recomputation a step over B sequences costs
    # 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)) FLOPs.
    for _, L, D, N in MEGATRON_TABLE1:
        c = models.gpt(L, D, N)
        B, s, V = 512, 2048, 51200
        want = 96 * B * s * L * D**2 * (1 + s / (6 * D) + V / (16 * L * D))
        assert math.isclose(tr.train_flops(c, B, s, recompute="full"), want, rel_tol=1e-12)


@pytest.mark.parametrize("P, tokens, gpus, tflops, days", [
    # Narayanan et al. 2021, section 5.1: GPT-3 175B, 300B tokens, 1024 A100s at 140 TFLOP/s:
    # about 34 days; 1T model, 450B tokens, 3072 A100s at 163 TFLOP/s: about 84 days.
    (175e9, 300e9, 1024, 140e12, 34), (1008e9, 450e9, 3072, 163e12, 84)])
def test_megatron_end_to_end_training_time(P, tokens, gpus, tflops, days):
    # their estimate counts 8·T·P FLOPs (6 for training + 2 for recomputation)
    t = tr.train_time(8 * tokens * P, gpus, "a100-80gb", tflops / 312e12)
    assert round(t / DAY) == days


def test_attention_crossover_points():
    c = TransformerConfig(L=4, D=2048, F=8192, N=16, K=16, H=128, V=1000)
    assert tr.attention_crossover_T(c, "projections") == 2 * c.D
    assert tr.attention_crossover_T(c, "dense") == 8 * c.D
    assert tr.attention_crossover_T(c, "mlp") == 6 * c.D
    # at that length the breakdown shows the two parts equal
    b = tr.breakdown_flops_per_token(c, 8 * c.D)
    assert math.isclose(b["attention (QKᵀ, AV)"],
                        b["attention projections"] + b["mlp"])
    with pytest.raises(ValueError, match="valid choices"):
        tr.attention_crossover_T(c, "everything")


def test_flops_breakdown_sums_to_flops_per_token():
    for name in ("llama3-8b", "deepseek-v3", "gpt3-175b"):
        for training in (True, False):
            b = tr.breakdown_flops_per_token(name, 4096, training=training)
            assert math.isclose(b.total, tr.flops_per_token(name, 4096, training=training))


def test_moe_flops_use_active_experts():
    mix = models.get("mixtral-8x7b")
    dense8 = tr.forward_flops(mix, 1, 1, include_attention=False)
    assert dense8 < 2 * tr.n_params(mix)  # far below the total
    assert math.isclose(dense8, 2 * (tr.n_params(mix, active=True) - mix.V * mix.D
                                     - tr.param_count(mix)["norms"]))


# ---- KV cache -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name, per_token", [
    ("llama3-8b", 2 * 32 * 8 * 128 * 2),      # 128 KiB
    ("llama3-70b", 2 * 80 * 8 * 128 * 2),     # 320 KiB
    ("llama3-405b", 2 * 126 * 8 * 128 * 2),   # 504 KiB
    ("deepseek-v3", 61 * (512 + 64) * 2),     # MLA latent + RoPE key, about 70 KB
])
def test_kv_cache_per_token(name, per_token):
    assert tr.kv_cache_bytes(name, 1, 1) == per_token


def test_kv_cache_scales_with_batch_context_and_dtype():
    one = tr.kv_cache_bytes("llama3-70b", 1, 1)
    np.testing.assert_allclose(tr.kv_cache_bytes("llama3-70b", np.array([2, 4]), 128000),
                               np.array([2, 4]) * 128000 * one)
    assert tr.kv_cache_bytes("llama3-70b", 1, 1, dtype="fp8") == one / 2


# ---- MFU / HFU ----------------------------------------------------------------------------------
def test_palm_540b_mfu():
    # Chowdhery et al. 2022, Table 3 and appendix B: 238.3K tokens/s on 6144 TPU v4 chips,
    # T = 2048: 46.2% MFU.
    assert round(tr.mfu("palm-540b", 238.3e3, 6144, "tpu-v4", 2048), 3) == 0.462


def test_mfu_hfu_relations():
    args = ("gpt3-175b", np.array([1e5, 2e5]), 1024, "a100-80gb", 2048)
    m = tr.mfu(*args)
    np.testing.assert_allclose(m[1], 2 * m[0])
    h_full = tr.hfu(*args, flash_attention=False)
    h_sel = tr.hfu(*args, recompute="selective", flash_attention=False)
    assert np.all(m < h_sel) and np.all(h_sel < h_full)
    np.testing.assert_allclose(tr.hfu(*args, recompute="none", flash_attention=False), m)
    # full recomputation: 4 forwards of the layers, 3 of the unembedding
    assert 1.3 < h_full[0] / m[0] < 4 / 3


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_adds_one_qk_matmul_per_layer(recompute, causal):
    # FlashAttention's backward recomputes S = QKᵀ (Dao 2023, FlashAttention-2, section 3.1.2):
    # one more [T, H] x [H, T] matmul per head and layer, whatever else is recomputed.
    c = models.get("llama3-8b")
    B, T = 2, 4096
    base = tr.train_flops(c, B, T, recompute=recompute, causal=causal)
    flash = tr.train_flops(c, B, T, recompute=recompute, causal=causal, flash_attention=True)
    qk = tr.einsum_flops("btnh,bsnh->bnts", (B, T, c.N, c.H), (B, T, c.N, c.H))
    assert math.isclose(flash - base, c.L * qk * (0.5 if causal else 1.0))
    # attention's backward: 5 matmuls instead of 4, i.e. 2.5x its forward of 2 (FA2 paper)
    attn_fwd = c.L * B * T * 4 * T * c.N * c.H * (0.5 if causal else 1.0)
    assert math.isclose((flash - base) / attn_fwd, 0.5)


def test_flash_attention_is_hardware_not_model_flops():
    args = ("llama3-70b", 1e6, 1024, "h100", 8192)
    m = tr.mfu(*args)
    assert tr.hfu(*args, recompute="none") > m  # default counts the kernel's recomputed QKᵀ
    np.testing.assert_allclose(tr.hfu(*args, recompute="none", flash_attention=False), m)
    assert math.isclose(tr.flops_per_token("llama3-70b", 8192),
                        tr.flops_per_token("llama3-70b", 8192, flash_attention=False))
    # without attention there is nothing to recompute
    assert tr.train_flops("llama3-8b", 1, 1024, include_attention=False, flash_attention=True) \
        == tr.train_flops("llama3-8b", 1, 1024, include_attention=False)
    # MLA: the scores use the qk head dimension (nope + rope), 192 for DeepSeek-V3
    ds = models.get("deepseek-v3")
    extra = tr.flops_per_token(ds, 4096, flash_attention=True) - tr.flops_per_token(ds, 4096)
    assert math.isclose(extra, ds.L * 2 * 4096 * ds.N * ds.mla.qk_head_dim)


@pytest.mark.parametrize("name", ["llama3-8b", "llama3-70b", "llama3-405b"])
@pytest.mark.parametrize("T", [2048, 8192])
def test_palm_count_overcounts_untied_models_by_the_input_embedding(name, T):
    # Chowdhery et al. 2022, appendix B: 6N + 12·L·H·Q·T. N includes the input embedding,
    # which is a lookup: for untied Llama 3 the excess is 6·V·D per token (plus the norms).
    c = models.get(name)
    excess = tr.palm_flops_per_token(c, T) - tr.flops_per_token(c, T)
    norms = tr.param_count(c)["norms"]
    assert math.isclose(excess, 6 * (c.V * c.D + norms))
    if name == "llama3-8b":  # the figure Chapter 7 prints: +5.4% to +6.5% over 2K-8K
        assert 0.054 < excess / tr.flops_per_token(c, T) < 0.066


def test_palm_count_is_exact_for_tied_palm():
    c = models.get("palm-540b")
    assert c.tied_embeddings
    r = tr.palm_flops_per_token(c, 2048) / tr.flops_per_token(c, 2048)
    assert 1 < r < 1 + 1e-5  # the norms only
    assert math.isclose(tr.palm_flops_per_token(c, 2048, causal=True) - tr.palm_flops_per_token(c, 1),
                        12 * c.L * c.N * c.H * (1024 - 1))


def test_mixed_precision_peak_lies_between_the_two_peaks():
    h100 = hw.get("h100")
    for name, T in (("llama3-8b", 4096), ("llama3-405b", 8192), ("deepseek-v3", 4096)):
        mix = tr.mixed_precision_peak(name, T, h100)
        assert h100.peak_flops_per_s("bf16") < mix < h100.peak_flops_per_s("fp8")
        # all in one dtype gives that dtype's peak
        assert math.isclose(tr.mixed_precision_peak(name, T, h100, matmul_dtype="bf16"),
                            h100.peak_flops_per_s("bf16"))
    # harmonic weighting by hand for Llama 3 8B
    b = tr.breakdown_flops_per_token("llama3-8b", 4096)
    low = b["attention projections"] + b["mlp"]
    t = low / h100.peak_flops_per_s("fp8") + (b.total - low) / h100.peak_flops_per_s("bf16")
    assert math.isclose(tr.mixed_precision_peak("llama3-8b", 4096, h100), b.total / t)
    with pytest.raises(ValueError, match="fp8"):
        tr.mixed_precision_peak("llama3-8b", 4096, "a100-80gb")  # the A100 has no fp8


def test_mfu_matches_definition():
    f = tr.flops_per_token("llama3-405b", 8192)
    u = tr.mfu("llama3-405b", 1e6, 8192, "h100", 8192)
    assert math.isclose(u, f * 1e6 / (8192 * 989.4e12))


def test_train_time_and_errors():
    t = tr.train_time(3.8e25, 16384, "h100", 0.4)
    assert math.isclose(t, 3.8e25 / (16384 * 989.4e12 * 0.4))
    with pytest.raises(ValueError, match="mfu=1.5"):
        tr.train_time(1e20, 8, "h100", 1.5)
    with pytest.raises(ValueError, match="recompute='some'"):
        tr.train_flops("llama3-8b", 1, 1, recompute="some")
    with pytest.raises(ValueError, match="T=-1"):
        tr.forward_flops("llama3-8b", 1, -1)
    with pytest.raises(ValueError, match="unknown model"):
        tr.param_count("gpt-5")


# ---- einsums ------------------------------------------------------------------------------------
def test_einsum_flops():
    assert tr.einsum_flops("bd,df->bf", (3, 5), (5, 7)) == 2 * 3 * 5 * 7
    # batched attention scores and the weighted sum of values: 2·B·T·S·N·H each
    q = (2, 16, 4, 8)
    assert tr.einsum_flops("btnh,bsnh->bnts", q, q) == 2 * 2 * 16 * 16 * 4 * 8
    assert tr.einsum_flops("bnts,bsnh->btnh", (2, 4, 16, 16), q) == 2 * 2 * 16 * 16 * 4 * 8
    assert tr.einsum_flops("i,j->ij", (3,), (4,)) == 12  # nothing contracted: multiplies only


@pytest.mark.parametrize("args, msg", [
    (("bd,df", (1, 2), (2, 3)), "must be explicit"),
    (("bd,df->bf", (1, 2)), "2 operands but 1 shapes"),
    (("bd,df->bf", (1, 2), (3, 4)), "index 'd' has size 2 and 3"),
    (("bd,df->bx", (1, 2), (2, 3)), r"output indices \['x'\]"),
    (("bd,df->bf", (1, 2, 3), (2, 3)), "has 2 indices but shape"),
])
def test_einsum_flops_errors(args, msg):
    with pytest.raises(ValueError, match=msg):
        tr.einsum_flops(*args)


def test_attention_hbm_bytes_standard_is_quadratic_flash_is_not():
    from scaling_lib import transformer as _tr
    std = [_tr.attention_hbm_bytes("llama3-8b", 1, T, flash=False) for T in (4096, 8192)]
    fl = [_tr.attention_hbm_bytes("llama3-8b", 1, T) for T in (4096, 8192)]
    assert 3.9 < std[1] / std[0] < 4.0   # the 4·N·T² scores dominate
    assert fl[1] / fl[0] == 2.0          # FlashAttention with K, V read once: linear in T
    # no cache help: K and V re-read once per query block; one block = the lower bound with N heads
    c = _tr._cfg("llama3-8b")
    one = _tr.attention_hbm_bytes(c, 1, 4096, block=4096)
    assert one == 2 * (2 * 4096 * c.N * c.H + 2 * 4096 * c.N * c.H)
    with pytest.raises(ValueError, match="latent"):
        _tr.attention_hbm_bytes("deepseek-v3", 1, 4096)
