"""Answer key for Chapter 5 (Counting FLOPs and parameters) exercises."""

from __future__ import annotations

from ... import models, transformer
from ...units import DAY
from ..grading.tables import with_messages


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
    from ... import hardware
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


# ---- Methods the checker must reject (see tests/test_wrong_methods.py) -------------------------
# Each function takes the same drawn parameters ``p`` as the key of its exercise; for the
# "implement" exercises (5.11, 5.12) it takes the reference function's arguments instead.

def _peak(accelerator, dtype="bf16"):
    from ... import hardware
    return hardware.get(accelerator).peak_flops_per_s(dtype)


def _config_with(p, **changes):
    return models.from_hf_config({**config_json(p), **changes})


def _train_days(p, flops_per_s):
    return transformer.six_n_flops(transformer.n_params(p.model), p.n_tokens) / flops_per_s / DAY


WRONG_METHODS = {
    "5.1": {
        "multiplies only (no factor 2)": lambda p: attention_output_flops(p) / 2,
    },
    "5.2": {
        "output layer counted even when tied": lambda p: (
            params_from_config(p) + (p.V * p.D if p.tied else 0)),
        "no output layer even when untied": lambda p: (
            params_from_config(p) - (0 if p.tied else p.V * p.D)),
        "norms left out": lambda p: params_from_config(p) - (2 * p.L + 1) * p.D,
        "multi-head attention (K = N)": lambda p: transformer.param_count(
            _config_with(p, num_key_value_heads=p.D // 128)).total,
    },
    "5.3": {
        "two matrices per gated MLP": lambda p: mlp_share(p) * (
            2 / 3 if models.get(p.model).glu else 1),
        "share of the non-embedding parameters": lambda p: (
            transformer.param_count(p.model)["mlp"] / (
                transformer.param_count(p.model).total
                - transformer.param_count(p.model)["embedding"]
                - transformer.param_count(p.model)["unembedding"]
                - transformer.param_count(p.model).get("position_embedding", 0))),
    },
    "5.4": {
        "forward only (2N)": lambda p: six_n_flops(p) / 3,
        "with recomputation (8N)": lambda p: six_n_flops(p) * 4 / 3,
    },
    "5.5": {
        "the sparsity peak (2x dense)": lambda p: days_to_train(p) / 2,
        "MFU left out (100% of peak)": lambda p: days_to_train(p) * p.mfu,
    },
    "5.6": {
        "attention over the causal half only": lambda p: (
            transformer.breakdown_flops_per_token(p.model, p.T, causal=True)["attention (QKᵀ, AV)"]
            / transformer.flops_per_token(p.model, p.T, causal=True)),
    },
    "5.7": {
        "multi-head formula T = 2D (grouped-query attention ignored)": lambda p: (
            2.0 * models.get(p.model).N * models.get(p.model).H),
    },
    "5.8": {
        "all E experts (total parameters)": lambda p: transformer.n_params(moe_config(p)),
        "router left out": lambda p: moe_active_params(p) - p.L * 4096 * p.E,
        "tied embeddings (one V x D)": lambda p: moe_active_params(p) - 32000 * 4096,
    },
    "5.9": {
        "the sparsity peak (2x dense)": lambda p: tokens_per_s(p) * 2,
        "per GPU instead of the whole job": lambda p: tokens_per_s(p) / p.n_gpus,
        "forward FLOPs per token only": lambda p: p.n_gpus * _peak(p.accelerator) * p.mfu / (
            transformer.flops_per_token(p.model, p.T, training=False)),
    },
    "5.10": {
        "one matmul (the backward 2x forgotten)": lambda p: backward_matmul_flops(p) / 2,
        "forward and backward together": lambda p: backward_matmul_flops(p) * 3 / 2,
    },
    "5.11": {
        "norms left out": lambda D, F, N, K, H: llama_layer_params(D, F, N, K, H) - 2 * D,
        "multi-head attention (K = N)": lambda D, F, N, K, H: llama_layer_params(D, F, N, N, H),
    },
    "5.12": {
        "input embedding counted as a matmul": lambda L, D, F, N, K, H, V, T: (
            forward_flops_per_token(L, D, F, N, K, H, V, T) + 2 * D * V),
        "attention left out": lambda L, D, F, N, K, H, V, T: (
            forward_flops_per_token(L, D, F, N, K, H, V, T) - 4 * L * T * N * H),
        "attention over the causal half only": lambda L, D, F, N, K, H, V, T: (
            forward_flops_per_token(L, D, F, N, K, H, V, T) - 2 * L * T * N * H),
    },
}

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '5.1': ('Each output element is a sum of products: how many outputs, how many terms each?',
            'count a multiply and an add for every combination of all the distinct indices'),
    '5.2': ("Go through one layer's matrices and vectors, then what appears once.",
            'per layer: four attention projections (grouped-query K and V), three MLP matrices, '
            'two norms; once: embedding, output layer unless tied, final norm'),
    '5.3': ("How many matrices does this model's MLP have?",
            "count each layer's MLP weights (gated or plain) and divide by all parameters, "
            'embeddings included'),
    '5.4': ('Which passes does training run for each token, and what does each cost per parameter?',
            'the forward pass costs 2 FLOPs per parameter per token and the backward twice that'),
    '5.5': ('Training time is work over the rate the whole cluster actually delivers.',
            'total FLOPs over (chips × dense peak × MFU) gives seconds; convert to days'),
    '5.6': ("Attention's QKᵀ and AV grow with T; the weights' matmuls do not.",
            "count attention's training FLOPs per token from its einsums over all T keys, and "
            'compare with the total per token'),
    '5.7': ('Write both costs per token and layer, and see which grows with T.',
            "attention's two einsums cost ∝ T·N·H; the four projections ∝ D·(N + K)·H; set them "
            'equal'),
    '5.8': ('Which parameters does one token actually use?',
            "a dense model's parameters with k experts' MLPs per layer instead of one, plus the "
            'router'),
    '5.9': ('MFU relates tokens per second to the FLOPs each token needs.',
            "write MFU as (tokens/s × FLOPs per token) over the cluster's peak and solve for "
            'tokens/s'),
    '5.10': ('The backward pass of y = xW needs two gradients.',
             'dx and dW are each a matmul the size of the forward one'),
    '5.11': ('Count the matrices: attention with grouped-query K and V, then the MLP, then the '
             'norms.',
             'Q and O are D × N·H, K and V are D × K·H; a SwiGLU MLP has three D × F matrices; '
             'each RMSNorm has D weights'),
    '5.12': ("Two parts: the weights' matmuls and attention over T keys.",
             '2 FLOPs per matmul weight (output layer included, embedding lookup free) plus the '
             'two attention einsums per layer'),
}


# ---- More listed mistakes, each with what the student reads (issue 21).

WRONG_METHODS["5.1"]["the key index s counted once (T, not T²)"] = (
    lambda p: attention_output_flops(p) / p.T,
    "the sum runs over s, the T key positions, for each of the T query positions t: both "
    "indices count")
WRONG_METHODS["5.6"]["attention's forward only"] = (
    lambda p: (transformer.breakdown_flops_per_token(p.model, p.T)["attention (QKᵀ, AV)"] / 3
               / (transformer.flops_per_token(p.model, p.T)
                  - 2 / 3 * transformer.breakdown_flops_per_token(p.model, p.T)[
                      "attention (QKᵀ, AV)"])),
    "that counts attention's forward pass only: in training its einsums also run backward, "
    "twice again, just as the weights' matmuls do")
WRONG_METHODS["5.7"]["the projections without the multiply-add's 2"] = (
    lambda p: crossover_projections(p) / 2,
    "a matmul weight costs 2 FLOPs (a multiply and an add) per token, just as attention's "
    "einsums do: count both sides the same way")

_SPARSE = ("the datasheet's \"with sparsity\" peak is twice the dense one: training runs at the "
           "dense peak")
with_messages(WRONG_METHODS, {
    "5.1": {"multiplies only (no factor 2)": "each term is a multiply and an add: 2 FLOPs"},
    "5.2": {"output layer counted even when tied":
            "with tie_word_embeddings the output layer reuses the embedding: count V·D once",
            "no output layer even when untied":
            "an untied model has its own V·D output layer besides the embedding",
            "norms left out": "each RMSNorm has D weights: two per layer and a final one",
            "multi-head attention (K = N)":
            "K and V have only num_key_value_heads heads (grouped-query attention)"},
    "5.3": {"two matrices per gated MLP": "a gated (SwiGLU) MLP has three D × F matrices",
            "share of the non-embedding parameters":
            "the question asks for the share of all parameters, embeddings included"},
    "5.4": {"forward only (2N)":
            "that is the forward pass only: the backward pass does twice its work",
            "with recomputation (8N)":
            "the 6N rule counts the model's FLOPs, without recomputing the forward"},
    "5.5": {"the sparsity peak (2x dense)": _SPARSE,
            "MFU left out (100% of peak)": "the chips deliver only the MFU's share of their peak"},
    "5.6": {"attention over the causal half only":
            "the question counts the full square of scores, without the causal discount"},
    "5.7": {"multi-head formula T = 2D (grouped-query attention ignored)":
            "with grouped-query attention the K and V projections are K/N the size of Q's"},
    "5.8": {"all E experts (total parameters)":
            "a token uses only its k routed experts per layer",
            "router left out": "the router's D × E weights run for every token",
            "tied embeddings (one V x D)": "the model is untied: embedding and output layer each "
            "have V·D weights"},
    "5.9": {"the sparsity peak (2x dense)": _SPARSE,
            "per GPU instead of the whole job": "the question asks for the whole job's tokens/s",
            "forward FLOPs per token only":
            "training does forward and backward: count the training FLOPs per token"},
    "5.10": {"one matmul (the backward 2x forgotten)":
             "the backward computes two matmuls: the gradient of x and the gradient of W",
             "forward and backward together": "the question asks for the backward pass alone"},
    "5.11": {"norms left out": "each layer has two RMSNorms of D weights",
             "multi-head attention (K = N)": "K and V have K heads of H, not N (grouped-query)"},
    "5.12": {"input embedding counted as a matmul":
             "the input embedding is a lookup, not a matmul: it costs no FLOPs",
             "attention left out": "add attention's QKᵀ and AV over the T keys",
             "attention over the causal half only":
             "the question counts attention over all T keys, without the causal discount"},
})
