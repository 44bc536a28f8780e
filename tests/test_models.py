"""Tests for scaling_lib.models: presets, validation and config.json parsing."""

import dataclasses

import numpy as np
import pytest

from scaling_lib import models, transformer
from scaling_lib.models import MLA, TransformerConfig

LLAMA3_8B_JSON = {  # meta-llama/Meta-Llama-3-8B config.json (the fields that matter)
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "vocab_size": 128256, "tie_word_embeddings": False,
    "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "max_position_embeddings": 8192,
}
MIXTRAL_JSON = {  # mistralai/Mixtral-8x7B-v0.1 config.json
    "model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 32000,
    "tie_word_embeddings": False, "sliding_window": None, "max_position_embeddings": 32768,
}
MISTRAL_7B_V01_JSON = {  # mistralai/Mistral-7B-v0.1 config.json: every layer sees 4,096 tokens
    "model_type": "mistral", "hidden_size": 4096, "intermediate_size": 14336,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
    "vocab_size": 32000, "tie_word_embeddings": False, "sliding_window": 4096,
    "max_position_embeddings": 32768, "rope_theta": 10000.0,
}
QWEN15_MOE_A27B_JSON = {  # Qwen/Qwen1.5-MoE-A2.7B config.json
    "model_type": "qwen2_moe", "hidden_size": 2048, "intermediate_size": 5632,
    "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632,
    "num_experts": 60, "num_experts_per_tok": 4, "num_hidden_layers": 24,
    "num_attention_heads": 16, "num_key_value_heads": 16, "vocab_size": 151936,
    "tie_word_embeddings": False, "decoder_sparse_step": 1, "norm_topk_prob": False,
    "sliding_window": 32768, "use_sliding_window": False, "max_window_layers": 21,
    "max_position_embeddings": 8192,
}
QWEN2_57B_A14B_JSON = {  # Qwen/Qwen2-57B-A14B config.json
    "model_type": "qwen2_moe", "hidden_size": 3584, "intermediate_size": 18944,
    "moe_intermediate_size": 2560, "shared_expert_intermediate_size": 20480,
    "num_experts": 64, "num_experts_per_tok": 8, "num_hidden_layers": 28,
    "num_attention_heads": 28, "num_key_value_heads": 4, "vocab_size": 151936,
    "tie_word_embeddings": False, "decoder_sparse_step": 1, "sliding_window": 131072,
    "use_sliding_window": False, "max_window_layers": 28, "max_position_embeddings": 131072,
}
GEMMA_7B_JSON = {  # google/gemma-7b config.json: N·H = 16·256 = 4096 != D = 3072
    "model_type": "gemma", "hidden_size": 3072, "intermediate_size": 24576, "head_dim": 256,
    "num_attention_heads": 16, "num_key_value_heads": 16, "num_hidden_layers": 28,
    "vocab_size": 256000, "hidden_act": "gelu", "max_position_embeddings": 8192,
}
DEEPSEEK_V3_JSON = {  # deepseek-ai/DeepSeek-V3 config.json
    "model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432,
    "moe_intermediate_size": 2048, "num_hidden_layers": 61, "num_attention_heads": 128,
    "num_key_value_heads": 128, "n_shared_experts": 1, "n_routed_experts": 256,
    "num_experts_per_tok": 8, "first_k_dense_replace": 3, "moe_layer_freq": 1,
    "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "v_head_dim": 128, "vocab_size": 129280, "tie_word_embeddings": False,
    "num_nextn_predict_layers": 1,
}
GPT2_JSON = {  # openai-community/gpt2 config.json
    "model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024,
    "vocab_size": 50257, "resid_pdrop": 0.1,
}


def _shape(cfg):
    return cfg.with_changes(name="", source="")


@pytest.mark.parametrize("name", ["llama3-8b", "llama3-70b", "llama3-405b", "llama2-13b",
                                  "gpt3-175b", "deepseek-v3"])
def test_api_presets_exist_with_sources(name):
    cfg = models.get(name)
    assert isinstance(cfg, TransformerConfig)
    assert cfg.name == name and cfg.source


def test_get_unknown_lists_known_names():
    with pytest.raises(ValueError, match="llama3-8b"):
        models.get("llama-9000")


def test_get_aliases_and_passthrough():
    cfg = models.get("llama3-8b")
    assert models.get("Llama-3-8B") is cfg and models.get(cfg) is cfg


def test_config_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        models.get("llama3-8b").L = 3


@pytest.mark.parametrize("kw, msg", [
    (dict(K=5), r"K=5 kv heads must divide N=32.*\[1, 2, 4, 8, 16, 32\]"),
    (dict(L=0), "L=0 is not allowed: L must be a whole number >= 1"),
    (dict(D=4096.0), "D=4096.0 must be an integer"),
    (dict(D=True), "D=True must be an integer"),
    (dict(N="32"), "N='32' must be an integer"),
    (dict(V=2**63), "V=9223372036854775808 is too large"),
    (dict(sliding_window=0), "sliding_window=0 is not allowed"),
    (dict(glu=1), "glu=1 must be True or False"),
    (dict(E=4, k=5), "k=5 active experts cannot exceed E=4"),
    (dict(n_dense_layers=2), "apply to MoE models only"),
    (dict(norm="batchnorm"), "valid choices: rmsnorm, layernorm"),
])
def test_validation_errors_teach(kw, msg):
    base = dict(L=32, D=4096, F=14336, N=32, K=8, H=128, V=128256)
    base.update(kw)
    with pytest.raises(ValueError, match=msg):
        TransformerConfig(**base)


def test_mla_validation():
    with pytest.raises(ValueError, match="kv_lora_rank must be a whole number >= 1"):
        MLA(0, 0, 128, 64, 128)


def test_from_hf_llama3_8b_matches_preset():
    assert models.from_hf_config(LLAMA3_8B_JSON) == _shape(models.get("llama3-8b")).with_changes(
        name="llama")


def test_from_hf_mixtral_matches_preset():
    assert _shape(models.from_hf_config(MIXTRAL_JSON)) == _shape(models.get("mixtral-8x7b"))


def test_from_hf_deepseek_v3_matches_preset():
    got = models.from_hf_config(DEEPSEEK_V3_JSON)
    assert _shape(got) == _shape(models.get("deepseek-v3"))


def test_from_hf_gpt2_small_has_124m_params():
    # GPT-2 small: 124,439,808 parameters (openai-community/gpt2, tied embeddings, 1024 positions)
    cfg = models.from_hf_config(GPT2_JSON)
    assert transformer.param_count(cfg).total == 124_439_808


def test_from_hf_defaults_kv_heads_to_query_heads():
    cfg = dict(LLAMA3_8B_JSON)
    del cfg["num_key_value_heads"]
    assert models.from_hf_config(cfg).K == 32


def test_from_hf_missing_key_names_it():
    cfg = dict(LLAMA3_8B_JSON)
    del cfg["intermediate_size"]
    with pytest.raises(ValueError, match="intermediate_size.*F \\(MLP width\\)"):
        models.from_hf_config(cfg)


def test_from_hf_partial_bias_is_refused():
    cfg = dict(LLAMA3_8B_JSON, attention_bias=True)
    with pytest.raises(ValueError, match="attention_bias=True but mlp_bias=False"):
        models.from_hf_config(cfg)


def test_from_hf_needs_a_dict():
    with pytest.raises(ValueError, match="dict"):
        models.from_hf_config("config.json")


def test_gpt_helper_shape():
    cfg = models.gpt(96, 12288, 96)
    assert (cfg.F, cfg.H, cfg.K, cfg.glu, cfg.tied_embeddings) == (49152, 128, 96, False, True)
    with pytest.raises(ValueError, match="divide"):
        models.gpt(2, 100, 3)


# ---- config.json: realistic configs, written from the published config values -----------------
def test_from_hf_reads_head_dim_gemma_7b():
    # Gemma 7B: H = 256 from head_dim (D / N would give 192). Gemma Team 2024, "Gemma: Open
    # Models Based on Gemini Research and Technology", Table 2: 7,751,248,896 non-embedding
    # parameters (the embedding row there counts a padded 256,128-token table).
    cfg = models.from_hf_config(GEMMA_7B_JSON)
    assert (cfg.H, cfg.N, cfg.D, cfg.tied_embeddings) == (256, 16, 3072, True)
    parts = transformer.param_count(cfg)
    assert parts.total - parts["embedding"] == 7_751_248_896


def test_from_hf_without_head_dim_needs_whole_d_over_n():
    cfg = dict(LLAMA3_8B_JSON, num_attention_heads=30, num_key_value_heads=30)
    with pytest.raises(ValueError, match=r"no head_dim and N=30 heads do not divide D=4096"):
        models.from_hf_config(cfg)
    assert models.from_hf_config(dict(cfg, head_dim=128)).H == 128


def test_from_hf_mistral_sliding_window_caps_kv_cache():
    cfg = models.from_hf_config(MISTRAL_7B_V01_JSON)
    assert cfg.sliding_window == 4096
    # at a 32K context only the last 4K tokens are cached: 8x less than full attention
    full = cfg.with_changes(sliding_window=None)
    assert transformer.kv_cache_bytes(full, 1, 32768) == 8 * transformer.kv_cache_bytes(
        cfg, 1, 32768)
    # below the window nothing changes; arrays of S broadcast
    S = np.array([1024, 4096, 8192])
    assert list(transformer.kv_cache_bytes(cfg, 2, S) / transformer.kv_cache_bytes(
        cfg, 2, 1)) == [1024, 4096, 4096]
    # Mistral 7B v0.1: 7,241,732,096 parameters (7.24B on its model card)
    assert transformer.param_count(cfg).total == 7_241_732_096


def test_from_hf_window_off_or_partial_is_not_stored():
    # Qwen configs carry a window with use_sliding_window=false; Gemma 2 alternates layers
    assert models.from_hf_config(QWEN15_MOE_A27B_JSON).sliding_window is None
    gemma2 = dict(GEMMA_7B_JSON, model_type="gemma2", sliding_window=4096)
    assert models.from_hf_config(gemma2).sliding_window is None
    assert models.from_hf_config(dict(MISTRAL_7B_V01_JSON, max_window_layers=16)) \
        .sliding_window is None


def test_from_hf_mixtral_has_no_window():
    assert models.from_hf_config(MIXTRAL_JSON).sliding_window is None


@pytest.mark.parametrize("config, total, active", [
    # Qwen team, "Qwen1.5-MoE: Matching 7B Model Performance with 1/3 Activated Parameters"
    # (blog, March 2024): 14.3B parameters in total, 2.7B activated.
    (QWEN15_MOE_A27B_JSON, 14.3e9, 2.7e9),
    # Yang et al. 2024, "Qwen2 Technical Report" (arXiv 2407.10671), Table 1: 57.41B
    # parameters (56.32B non-embedding), 14B activated.
    (QWEN2_57B_A14B_JSON, 57.41e9, 14.0e9),
])
def test_from_hf_qwen2_moe_counts_the_shared_expert(config, total, active):
    cfg = models.from_hf_config(config)
    # one shared expert of width shared_expert_intermediate_size = that many narrow ones
    assert cfg.n_shared_experts == config["shared_expert_intermediate_size"] // config[
        "moe_intermediate_size"]
    assert transformer.n_params(cfg) == pytest.approx(total, rel=0.005)
    assert transformer.n_params(cfg, active=True) == pytest.approx(active, rel=0.02)
    without = cfg.with_changes(n_shared_experts=0)
    assert transformer.n_params(without) < 0.98 * total  # dropping it loses ~1-2%


def test_qwen2_57b_non_embedding_count():
    cfg = models.from_hf_config(QWEN2_57B_A14B_JSON)
    parts = transformer.param_count(cfg)
    non_embedding = parts.total - parts["embedding"] - parts["unembedding"]
    assert non_embedding == pytest.approx(56.32e9, rel=0.001)  # Qwen2 report, Table 1


def test_from_hf_shared_expert_must_be_whole_experts():
    with pytest.raises(ValueError, match="shared_expert_intermediate_size=5000 is not a multiple"):
        models.from_hf_config(dict(QWEN15_MOE_A27B_JSON, shared_expert_intermediate_size=5000))


@pytest.mark.parametrize("change, msg", [
    (dict(num_attention_heads=0), r"num_attention_heads=0 is not allowed"),
    (dict(num_key_value_heads=0), r"num_key_value_heads=0 is not allowed"),
    (dict(hidden_size="4096"), r"hidden_size='4096' must be a number"),
    (dict(hidden_size=4096.5), r"hidden_size=4096.5 is not allowed"),
    (dict(num_hidden_layers=[32]), r"num_hidden_layers=\[32\] must be one whole number"),
    (dict(vocab_size=True), r"vocab_size=True must be a number"),
    (dict(intermediate_size=10**400), r"intermediate_size=.*too large"),
    (dict(head_dim=0), r"head_dim=0 is not allowed"),
    (dict(tie_word_embeddings="no"), r"tie_word_embeddings='no' must be true or false"),
    (dict(num_key_value_heads=5), r"K=5 kv heads must divide N=32"),
    (dict(model_type=3), r"model_type=3 must be a string"),
])
def test_from_hf_bad_values_name_the_key(change, msg):
    with pytest.raises(ValueError, match=msg):
        models.from_hf_config(dict(LLAMA3_8B_JSON, **change))


def test_from_hf_kv_heads_null_means_multi_head():
    assert models.from_hf_config(dict(LLAMA3_8B_JSON, num_key_value_heads=None)).K == 32


def test_from_hf_moe_values_name_the_key():
    with pytest.raises(ValueError, match="num_experts_per_tok"):
        models.from_hf_config({k: v for k, v in MIXTRAL_JSON.items()
                               if k != "num_experts_per_tok"})
    with pytest.raises(ValueError, match="num_experts_per_tok=0 is not allowed"):
        models.from_hf_config(dict(MIXTRAL_JSON, num_experts_per_tok=0))
    with pytest.raises(ValueError, match="mlp_only_layers"):
        models.from_hf_config(dict(QWEN15_MOE_A27B_JSON, mlp_only_layers=[0]))


# ---- TransformerConfig validation ---------------------------------------------------------------
def test_config_accepts_numpy_integers_and_stores_ints():
    cfg = TransformerConfig(*(np.int64(v) for v in (32, 4096, 14336, 32, 8, 128, 128256)),
                            E=np.int32(1))
    assert cfg == _shape(models.get("llama3-8b"))
    assert all(type(getattr(cfg, f)) is int for f in ("L", "D", "F", "N", "K", "H", "V", "E"))


def test_config_divisor_error_for_huge_heads():
    # the valid choices are found in sqrt(N) steps (scanning every integer up to N took minutes)
    with pytest.raises(ValueError, match=r"K=7 kv heads must divide N=2147483648.*\[1, 2, 4"):
        TransformerConfig(L=1, D=64, F=64, N=2**31, K=7, H=1, V=10)
    with pytest.raises(ValueError, match="too large"):
        TransformerConfig(L=1, D=64, F=64, N=2**63, K=7, H=1, V=10)


def test_with_changes_unknown_field():
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['layers'\]"):
        models.get("llama3-8b").with_changes(layers=3)
