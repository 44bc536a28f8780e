"""Answer key for Chapter 5 (Counting FLOPs and parameters) exercises."""

from __future__ import annotations

from .. import models, transformer
from ..units import DAY


def attention_output_flops(p):
    """Ex 5.1: FLOPs of einsum 'bnts,bsnh->btnh' (probabilities times values), S = T."""
    return transformer.einsum_flops("bnts,bsnh->btnh", (p.B, p.N, p.T, p.T), (p.B, p.T, p.N, p.H))


def config_json(p) -> dict:
    """Ex 5.2: the Llama-style config.json the exercise shows (built from the drawn numbers)."""
    return {"model_type": "llama", "hidden_size": p.D, "intermediate_size": p.F,
            "num_hidden_layers": p.L, "num_attention_heads": p.D // 128,
            "num_key_value_heads": p.K, "vocab_size": p.V,
            "tie_word_embeddings": p.tied}


def params_from_config(p):
    """Ex 5.2: exact parameter count of that config."""
    return transformer.param_count(models.from_hf_config(config_json(p))).total


def mlp_share(p):
    """Ex 5.3: fraction of p.model's parameters in its MLPs."""
    b = transformer.param_count(p.model)
    return b["mlp"] / b.total


def six_n_flops(p):
    """Ex 5.4: 6 · n_params · n_tokens for p.model."""
    return transformer.six_n_flops(transformer.n_params(p.model), p.n_tokens)


def days_to_train(p):
    """Ex 5.5: days to do 6·n_params·n_tokens FLOPs on p.n_gpus p.accelerator at p.mfu."""
    flops = transformer.six_n_flops(transformer.n_params(p.model), p.n_tokens)
    return transformer.train_time(flops, p.n_gpus, p.accelerator, p.mfu) / DAY


def attention_share(p):
    """Ex 5.6: share of training FLOPs per token in QKᵀ and AV at sequence length p.T."""
    b = transformer.breakdown_flops_per_token(p.model, p.T)
    return b["attention (QKᵀ, AV)"] / b.total


def crossover_projections(p):
    """Ex 5.7: sequence length where attention's QKᵀ/AV FLOPs equal the Q, K, V, O projections."""
    return transformer.attention_crossover_T(p.model, "projections")


def moe_config(p) -> models.TransformerConfig:
    """Ex 5.8: the mixture-of-experts model of the exercise."""
    return models.TransformerConfig(L=p.L, D=4096, F=14336, N=32, K=8, H=128, V=32000,
                                    E=p.E, k=p.k, F_expert=p.F_e)


def moe_active_params(p):
    """Ex 5.8: parameters active per token."""
    return transformer.n_params(moe_config(p), active=True)


def tokens_per_s(p):
    """Ex 5.9: training throughput of p.n_gpus GPUs at p.mfu (model FLOPs, attention included)."""
    from .. import hardware
    peak = hardware.get(p.accelerator).peak_flops_per_s("bf16")
    return p.n_gpus * peak * p.mfu / transformer.flops_per_token(p.model, p.T)


def backward_matmul_flops(p):
    """Ex 5.10: FLOPs of the backward pass of [B, D] x [D, F] (gradients of input and weight)."""
    return 2 * transformer.einsum_flops("bd,df->bf", (p.B, p.D), (p.D, p.F))


def llama_layer_params(D, F, N, K, H):
    """Ex 5.11 reference: parameters of one Llama-style layer (attention, gated MLP, 2 RMSNorms)."""
    b = transformer.param_count(models.TransformerConfig(L=1, D=D, F=F, N=N, K=K, H=H, V=1))
    return b["attention"] + b["mlp"] + b["norms"] - D  # minus the final norm


def forward_flops_per_token(L, D, F, N, K, H, V, T):
    """Ex 5.12 reference: forward FLOPs per token of a Llama-style model at sequence length T."""
    cfg = models.TransformerConfig(L=L, D=D, F=F, N=N, K=K, H=H, V=V)
    return transformer.flops_per_token(cfg, T, training=False)
