"""Tests for scaling_lib.models: presets, validation and config.json parsing."""

import dataclasses

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
    "tie_word_embeddings": False,
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
