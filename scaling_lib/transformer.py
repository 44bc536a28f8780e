"""Transformer accounting: parameters, FLOPs, KV cache, MFU and HFU.

Notation (Chapter 5): L layers, width D, MLP width F, N query heads and K key/value heads of
dimension H, vocabulary V, batch B, sequence T. Per layer and token, the weight matmuls cost
2 FLOPs per weight (one multiply, one add): attention projections 2·2D(N+K)H, a gated MLP 2·3DF,
and the unembedding 2DV once per token. Attention itself (QKᵀ and the weighted sum of values)
adds 4·T·N·H FLOPs per token and layer. The backward pass costs twice the forward, so training
costs 3 times the forward pass. Norms, softmax, activations and the optimizer step are left out
(a fraction of a percent at these sizes).

See: Chapter 5, "Counting FLOPs and parameters"; Chapter 7, "MFU and HFU".
"""

from __future__ import annotations

import math

import numpy as np

from . import hardware, models
from .breakdown import Breakdown
from .units import (_brief, check_choice, check_count, check_fraction, check_positive,
                    dtype_bytes, scalar_or_array as _out)

RECOMPUTE = ("none", "selective", "full")


def _cfg(cfg) -> models.TransformerConfig:
    return models.get(cfg)


def einsum_flops(spec: str, *shapes) -> float:
    """FLOPs of a two-operand contraction written as an einsum: 2 · (product of every index size).

    Each output element sums one product per value of the contracted indices: one multiply and
    one add per combination of all indices, free and contracted. [B, D] x [D, F] is
    ``einsum_flops("bd,df->bf", (B, D), (D, F))`` = 2BDF. A product with nothing contracted
    (an outer or elementwise product) does one multiply per output element and is counted as such.

    >>> einsum_flops("bd,df->bf", (4, 8), (8, 16))
    1024.0
    >>> q = k = (1, 2048, 32, 128)  # [B, T, N, H]: the attention scores QKᵀ
    >>> einsum_flops("btnh,bsnh->bnts", q, k) == 2 * 2048**2 * 32 * 128
    True
    """
    if not isinstance(spec, str) or "->" not in spec:
        raise ValueError(f"spec={_brief(spec)} must be explicit, like 'bd,df->bf'")
    for shape in shapes:
        if isinstance(shape, (str, bytes)) or not isinstance(shape, (tuple, list)):
            raise ValueError(f"shape {_brief(shape)} must be a tuple of sizes, e.g. (4, 8)")
        for n in shape:
            check_count("size", n)
    inputs, output = spec.replace(" ", "").split("->")
    operands = inputs.split(",")
    if len(operands) != len(shapes):
        raise ValueError(f"spec={spec!r} names {len(operands)} operands but {len(shapes)} shapes "
                         "were given")
    sizes: dict[str, int] = {}
    for names, shape in zip(operands, shapes):
        if len(names) != len(shape):
            raise ValueError(f"operand {names!r} has {len(names)} indices but shape {shape}")
        for idx, n in zip(names, shape):
            if sizes.setdefault(idx, n) != n:
                raise ValueError(f"index {idx!r} has size {sizes[idx]} and {n}; sizes must agree")
    missing = set(output) - set(sizes)
    if missing:
        raise ValueError(f"output indices {sorted(missing)} appear in no operand")
    total = float(math.prod(sizes.values()))
    contracted = set(sizes) - set(output)
    return 2.0 * total if contracted else total


def _norm_params(cfg, width: int) -> int:
    """Parameters of one norm over ``width`` features (weight, plus bias for a biased LayerNorm)."""
    return width * (2 if (cfg.norm == "layernorm" and cfg.bias) else 1)


def _attention_weights(cfg) -> int:
    """Weight-matrix entries of one layer's attention: 2D(N+K)H, or MLA's factorised projections."""
    D, N = cfg.D, cfg.N
    m = cfg.mla
    if m is None:
        return 2 * D * (N + cfg.K) * cfg.H
    if m.q_lora_rank:  # D -> latent -> heads
        q = D * m.q_lora_rank + m.q_lora_rank * N * m.qk_head_dim
    else:
        q = D * N * m.qk_head_dim
    kv = D * (m.kv_lora_rank + m.qk_rope_head_dim)  # the cached latent and shared RoPE key
    kv += m.kv_lora_rank * N * (m.qk_nope_head_dim + m.v_head_dim)
    return q + kv + N * m.v_head_dim * D


def _attention_biases(cfg) -> int:
    if not cfg.bias:
        return 0
    if cfg.mla is None:
        return (cfg.N + 2 * cfg.K) * cfg.H + cfg.D
    m = cfg.mla
    return m.q_lora_rank + cfg.N * m.qk_head_dim + m.kv_lora_rank + m.qk_rope_head_dim + \
        cfg.N * (m.qk_nope_head_dim + m.v_head_dim) + cfg.D


def _mlp_weights(cfg, width: int) -> int:
    """One MLP (or expert) of hidden ``width``: 3·D·width gated, 2·D·width plain."""
    return (3 if cfg.glu else 2) * cfg.D * width


def _mlp_biases(cfg, width: int) -> int:
    return ((2 if cfg.glu else 1) * width + cfg.D) if cfg.bias else 0


def _layer_norms(cfg) -> int:
    """Norms inside one layer: two of width D, plus MLA's norms on its latents."""
    n = 2 * _norm_params(cfg, cfg.D)
    if cfg.mla is not None:
        n += _norm_params(cfg, cfg.mla.kv_lora_rank) + (
            _norm_params(cfg, cfg.mla.q_lora_rank) if cfg.mla.q_lora_rank else 0)
    return n


def param_count(cfg) -> Breakdown:
    """Exact parameter count of ``cfg`` by part (integers); ``.total`` is the model size.

    Parts: ``embedding`` (V·D), ``position_embedding`` (learned positions only), ``attention``
    (L · 2D(N+K)H, plus biases), ``mlp`` (dense MLPs, L · 3DF when gated, and shared experts),
    ``experts`` and ``router`` (MoE only: E·3·D·F_e and D·E per MoE layer), ``norms``
    (2 per layer and a final one) and ``unembedding`` (V·D, 0 when tied).

    >>> param_count("llama3-8b").total
    8030261248
    >>> param_count("llama3-405b")["attention"]
    71873593344
    """
    c = _cfg(cfg)
    L, D = c.L, c.D
    n_dense = L - c.n_moe_layers
    parts = {"embedding": c.V * D}
    if c.learned_positions:
        parts["position_embedding"] = c.learned_positions * D
    parts["attention"] = L * (_attention_weights(c) + _attention_biases(c))
    mlp = n_dense * (_mlp_weights(c, c.F) + _mlp_biases(c, c.F))
    mlp += c.n_moe_layers * c.n_shared_experts * (_mlp_weights(c, c.F_e) + _mlp_biases(c, c.F_e))
    parts["mlp"] = mlp
    if c.is_moe:
        parts["experts"] = c.n_moe_layers * c.E * (_mlp_weights(c, c.F_e) + _mlp_biases(c, c.F_e))
        parts["router"] = c.n_moe_layers * D * c.E
    parts["norms"] = L * _layer_norms(c) + _norm_params(c, D)
    parts["unembedding"] = 0 if c.tied_embeddings else c.V * D
    return Breakdown(parts, unit="params")


def active_param_count(cfg) -> Breakdown:
    """Parameters used per token: as :func:`param_count` but with k of the E routed experts.

    >>> round(active_param_count("mixtral-8x7b").total / 1e9, 1)
    12.9
    """
    c = _cfg(cfg)
    parts = dict(param_count(c))
    if c.is_moe:
        parts["experts"] = c.n_moe_layers * c.k * (_mlp_weights(c, c.F_e) + _mlp_biases(c, c.F_e))
    return Breakdown(parts, unit="params")


def n_params(cfg, *, active: bool = False) -> int:
    """Total (or, with ``active``, per-token) parameter count as one integer.

    >>> n_params("llama3-70b")
    70553706496
    """
    return (active_param_count(cfg) if active else param_count(cfg)).total


def _matmul_weights_per_token(cfg) -> tuple[int, int]:
    """(weights in the L layers' matmuls, weights in the unembedding matmul) touched per token.

    Excludes biases and norms (element-wise work) and the embedding lookup (no FLOPs); a tied
    model still multiplies by its V x D matrix at the output.
    """
    c = cfg
    n_dense = c.L - c.n_moe_layers
    layers = c.L * _attention_weights(c) + n_dense * _mlp_weights(c, c.F)
    layers += c.n_moe_layers * ((c.k + c.n_shared_experts) * _mlp_weights(c, c.F_e) + c.D * c.E)
    return layers, c.V * c.D


def _attention_core_flops_per_token(cfg, T, causal: bool):
    """Forward FLOPs of QKᵀ and the weighted sum of V, per token and layer: 2·T·N·(H_qk + H_v).

    4·T·N·H for standard attention; half with ``causal`` (the masked half skipped).
    """
    if cfg.mla is None:
        h_qk = h_v = cfg.H
    else:
        h_qk, h_v = cfg.mla.qk_head_dim, cfg.mla.v_head_dim
    return 2.0 * T * cfg.N * (h_qk + h_v) * (0.5 if causal else 1.0)


def _scores_flops_per_token(cfg, T, causal: bool):
    """Forward FLOPs of the scores QKᵀ alone, per token and layer: 2·T·N·H_qk (half if causal)."""
    h_qk = cfg.H if cfg.mla is None else cfg.mla.qk_head_dim
    return 2.0 * T * cfg.N * h_qk * (0.5 if causal else 1.0)


def forward_flops(cfg, B, T, *, include_attention: bool = True, causal: bool = False):
    """FLOPs of one forward pass over B sequences of T tokens.

    F_fwd = B·T·(2·W + 2DV + L·4TNH), where W is the weights of the layers' matmuls
    touched per token (2D(N+K)H + 3DF per dense layer; k routed and the shared experts plus the
    router per MoE layer) and 4TNH is attention's QKᵀ and AV (halved with ``causal``: the
    convention here, as in PaLM and Megatron-LM, counts the full square).

    Args: cfg (TransformerConfig or preset name), B (sequences), T (tokens per sequence).
    Broadcasts over numpy arrays of B and T.

    >>> f = forward_flops("llama3-8b", 1, 8192, include_attention=False)
    >>> round(f / 8192 / 1e9, 2)  # 2 · (n_params - V·D) = 2 · 7.5e9 per token
    15.01
    """
    c = _cfg(cfg)
    B = check_count("B", B, sweep=True)
    T = check_count("T", T, sweep=True)
    layers, head = _matmul_weights_per_token(c)
    per_token = 2.0 * (layers + head)
    if include_attention:
        per_token = per_token + c.L * _attention_core_flops_per_token(c, T, causal)
    return _out(B * T * per_token)


def train_flops(cfg, B, T, *, include_attention: bool = True, causal: bool = False,
                recompute: str = "none", flash_attention: bool = False):
    """FLOPs of one training step (forward + backward) over B sequences of T tokens.

    F_train = 3·F_fwd: the backward pass computes gradients with respect to both activations
    and weights, two matmuls for each forward one. With ``recompute`` the hardware does more
    than the model needs: "full" re-runs every layer's forward (not the unembedding), so
    F = 4·F_fwd,layers + 3·F_fwd,unembedding; "selective" re-runs only attention's QKᵀ and AV
    (Korthikanti et al. 2022). The default, "none", is the model FLOPs that MFU counts.

    ``flash_attention`` adds what a FlashAttention backward recomputes instead of reading back:
    the scores S = QKᵀ, one more forward QKᵀ matmul per layer, 2·T·N·H_qk FLOPs per token
    (halved with ``causal``; the softmax it also recomputes is elementwise and not counted). Its
    backward does 5 attention matmuls where a stored-scores backward does 4 (Dao 2023,
    FlashAttention-2, section 3.1.2: 2.5x the forward's 2). This is hardware work, added to any
    ``recompute`` (a recomputed forward runs the kernel's forward again; its backward still
    recomputes QKᵀ), and never part of the model FLOPs.

    >>> train_flops("llama3-8b", 1, 4096) / forward_flops("llama3-8b", 1, 4096)
    3.0
    >>> extra = train_flops("llama3-8b", 1, 4096, flash_attention=True) - train_flops("llama3-8b", 1, 4096)
    >>> extra == 32 * 2 * 4096 * 4096 * 32 * 128  # L · 2·T²·N·H: one QKᵀ per layer
    True
    """
    check_choice("recompute", recompute, RECOMPUTE)
    c = _cfg(cfg)
    total = 3.0 * np.asarray(forward_flops(c, B, T, include_attention=include_attention,
                                           causal=causal))
    if recompute != "none":
        B = check_count("B", B, sweep=True)
        T = check_count("T", T, sweep=True)
        attn = c.L * _attention_core_flops_per_token(c, T, causal) if include_attention else 0.0
        if recompute == "full":
            layers, _ = _matmul_weights_per_token(c)
            total = total + B * T * (2.0 * layers + attn)
        else:
            total = total + B * T * attn
    if flash_attention and include_attention:
        total = total + B * T * c.L * _scores_flops_per_token(c, T, causal)
    return _out(total)


def flops_per_token(cfg, T, training: bool = True, include_attention: bool = True, *,
                    causal: bool = False, recompute: str = "none",
                    flash_attention: bool = False):
    """FLOPs per token at sequence length T: about 6·n_params (training) or 2·n_params
    (forward), plus the attention term 12·L·T·N·H (training) or 4·L·T·N·H (forward).

    ``recompute`` and ``flash_attention`` (training only) add hardware FLOPs as in
    :func:`train_flops`; the defaults give the model FLOPs.

    >>> r = flops_per_token("llama3-405b", 8192) / (6 * n_params("llama3-405b"))
    >>> round(r, 3)
    1.078
    """
    if training:
        f = train_flops(cfg, 1, T, include_attention=include_attention, causal=causal,
                        recompute=recompute, flash_attention=flash_attention)
    else:
        f = forward_flops(cfg, 1, T, include_attention=include_attention, causal=causal)
    return _out(np.asarray(f) / check_count("T", T, sweep=True))


def six_n_flops(n_params, n_tokens):
    """The rule of thumb for training compute: 6 · n_params · n_tokens FLOPs.

    Leaves out attention's 12·L·T·N·H per token and counts the embedding table as if it were a
    matmul. Llama 3 405B on 15.6T tokens:

    >>> f"{six_n_flops(405_853_388_800, 15.6e12):.2e}"
    '3.80e+25'
    """
    return _out(6.0 * check_positive("n_params", n_params) * check_positive("n_tokens", n_tokens))


def palm_flops_per_token(cfg, T, *, causal: bool = False):
    """PaLM's model FLOPs per token (Chowdhery et al. 2022, appendix B): 6·n_params + 12·L·N·H·T.

    Exact (up to the norms' few thousand parameters) for a model with tied embeddings, like
    PaLM, where the one V x D matrix is the output layer's matmul (n_params counts the active
    parameters of an MoE model). For an untied model the
    6·n_params term also counts the input embedding, a lookup with no FLOPs, and exceeds
    :func:`flops_per_token` by 6·V·D per token. ``causal`` halves the attention term.

    >>> round(palm_flops_per_token("palm-540b", 2048) / flops_per_token("palm-540b", 2048), 5)
    1.00001
    >>> round(palm_flops_per_token("llama3-8b", 8192) / flops_per_token("llama3-8b", 8192), 3)
    1.054
    """
    c = _cfg(cfg)
    T = check_positive("T", T)
    attn = 12.0 * c.L * c.N * c.H * T * (0.5 if causal else 1.0)
    return _out(6.0 * n_params(c, active=True) + attn)


def mixed_precision_peak(cfg, T, accelerator, *, matmul_dtype="fp8", other_dtype="bf16",
                         causal: bool = False):
    """Peak FLOP/s of a training step whose layer matmuls run in ``matmul_dtype`` and the rest
    in ``other_dtype``: the FLOP-weighted harmonic mean of the two peaks.

    C_mix = F / (F_low / C_low + F_high / C_high), where F_low are the FLOPs per token of the
    attention projections, the MLPs and the experts, and F_high the rest: attention's QKᵀ and AV,
    the router and the unembedding, which DeepSeek-V3 keeps in BF16 (DeepSeek-AI 2024, section
    3.3.1: "the embedding module, the output head, MoE gating modules, normalization operators,
    and attention operators"). It is the time every FLOP would take at its own dtype's dense
    peak, so an MFU against it is a fraction in [0, 1] for the run as configured.

    >>> round(mixed_precision_peak("llama3-8b", 4096, "h100") / 1e12)  # TFLOP/s, bf16: 989
    1668
    """
    acc = hardware.get(accelerator)
    b = breakdown_flops_per_token(cfg, T, causal=causal)
    low_parts = ("attention projections", "mlp", "experts")
    low = sum(v for k, v in b.items() if k in low_parts)
    high = b.total - low
    return _out(b.total / (low / acc.peak_flops_per_s(matmul_dtype)
                           + high / acc.peak_flops_per_s(other_dtype)))


def attention_crossover_T(cfg, against: str = "dense", *, causal: bool = False):
    """Sequence length at which attention's QKᵀ/AV FLOPs equal those of another part.

    ``against``: "projections" (Q, K, V, O: 4D(N+K)H per token and layer), "mlp" (the MLP or
    active experts) or "dense" (both). Solves L·4·T·N·H = 2·W_part for T. With N·H = D, K = N
    and a gated MLP with F = 4D: T = 2D against the projections and T = 8D against all the
    dense matmuls of a layer.

    >>> c = models.TransformerConfig(L=1, D=1024, F=4096, N=8, K=8, H=128, V=1000)
    >>> attention_crossover_T(c, "projections"), attention_crossover_T(c, "dense")
    (2048.0, 8192.0)
    """
    check_choice("against", against, ("projections", "mlp", "dense"))
    c = _cfg(cfg)
    layers, _ = _matmul_weights_per_token(c)
    proj = c.L * _attention_weights(c)
    w = {"projections": proj, "mlp": layers - proj, "dense": layers}[against]
    per_T = c.L * _attention_core_flops_per_token(c, 1.0, causal)
    return 2.0 * w / per_T


def attention_hbm_bytes(cfg, B, T, *, flash: bool = True, block=None, dtype="bf16"):
    """HBM bytes of one layer's attention core (QKᵀ, softmax, AV), forward, B sequences of T.

    Standard attention (``flash=False``) materialises the N·T² scores twice: S = QKᵀ is written,
    read by the softmax, which writes P, read again by AV. With a bytes per element:

        a · B · (T·(N + 2K)·H  +  4·N·T²  +  T·N·H)

    (Q, K, V read; S and P written and read back; O written).

    FlashAttention (``flash=True``, Dao et al. 2022) keeps a block of ``block`` queries on chip and
    streams every key and value past it; the scores never reach HBM. Each of the N query heads
    reads its key/value head once per query block, ⌈T/block⌉ passes:

        a · B · (2·T·N·H  +  ⌈T/block⌉ · 2·T·N·H)         (Q read and O written once)

    ``block=None`` means K and V are read from HBM once (a cache serves the repeated passes: the
    lower bound, ⌈T/block⌉ = 1 with the key/value heads counted once, 2·T·K·H); a block of 128
    with no cache help is the upper bound. Leaves out the softmax statistics (T·N fp32), masks
    and dropout. The FLOPs are the same either way (:func:`forward_flops`).

    >>> std = attention_hbm_bytes("llama3-8b", 1, 8192, flash=False)
    >>> round(std / 1e9, 1)  # 4·N·T² dominates: 17.2 GB of 17.3
    17.3
    >>> round(attention_hbm_bytes("llama3-8b", 1, 8192) / 1e6)  # Q, O, and K, V once
    168
    """
    c = _cfg(cfg)
    B = check_count("B", B, sweep=True)
    T = check_count("T", T, sweep=True)
    a = dtype_bytes(dtype)
    if c.mla is not None:
        raise ValueError(f"attention_hbm_bytes: cfg {c.name!r} uses multi-head latent attention; "
                         "the formula covers MHA/GQA (mla=None) only")
    N, K, H = c.N, c.K, c.H
    if not flash:
        return _out(a * B * (T * (N + 2 * K) * H + 4.0 * N * T * T + T * N * H))
    if block is None:
        return _out(a * B * (2.0 * T * N * H + 2.0 * T * K * H))
    block = check_count("block", block)
    passes = np.ceil(T / block)
    return _out(a * B * (2.0 * T * N * H + passes * 2.0 * T * N * H))


def kv_cache_bytes(cfg, B, S, dtype="bf16"):
    """Bytes of the KV cache for B sequences holding S tokens each.

    2 · L · K · H bytes-per-element per token (a key and a value per kv head and layer); with
    MLA the cache holds the latent and the shared RoPE key: L · (kv_lora_rank + rope dim).
    Llama 3 8B in bf16: 2·32·8·128·2 = 131,072 bytes (128 KiB) per token. With a
    ``sliding_window`` W (Mistral 7B) each layer keeps only the last W tokens: min(S, W) of them.
    With cross-layer KV sharing (``kv_share`` = s layers per cache: Brandon et al., "Reducing
    Transformer Key-Value Cache Size with Cross-Layer Attention", 2024) ⌈L/s⌉ layers hold one.
    fp8/int8 caches: pass ``dtype``.

    >>> kv_cache_bytes(models.get("llama3-8b").with_changes(kv_share=2), 1, 1)  # CLA2: half
    65536.0

    >>> kv_cache_bytes("llama3-8b", 1, 1)
    131072.0
    >>> mistral = models.get("llama3-8b").with_changes(V=32000, sliding_window=4096)
    >>> kv_cache_bytes(mistral, 1, 32768) / kv_cache_bytes(mistral.with_changes(
    ...     sliding_window=None), 1, 32768)
    0.125
    >>> kv_cache_bytes("llama3-70b", 1, 8192) / 2**30  # GiB for one 8K context
    2.5
    """
    c = _cfg(cfg)
    B = check_positive("B", B)  # may be fractional: decode figures mark a fractional edge
    S = check_count("S", S, minimum=0, sweep=True)
    if c.sliding_window is not None:
        S = np.minimum(S, c.sliding_window)
    layers = -(-c.L // c.kv_share)  # ⌈L / share⌉ caches with cross-layer sharing
    if c.mla is None:
        per_token = 2 * layers * c.K * c.H
    else:
        per_token = layers * (c.mla.kv_lora_rank + c.mla.qk_rope_head_dim)
    return _out(B * S * per_token * dtype_bytes(dtype))


def _utilization(flops_per_tok, tokens_per_s, n_devices, accelerator, dtype, what="MFU",
                 allow_above_peak=False):
    acc = hardware.get(accelerator)
    tps = check_positive("tokens_per_s", tokens_per_s)
    n = check_count("n_devices", n_devices)
    u = flops_per_tok * tps / (n * acc.peak_flops_per_s(dtype))
    # Above 1 the devices would beat their own peak: the inputs are wrong (tokens/s of the
    # whole job vs per device, a percentage, the wrong chip or dtype). Rounding is tolerated.
    if not allow_above_peak and np.any(np.asarray(u) > 1 + 1e-9):
        raise ValueError(f"{what}={float(np.max(u)):.4g} > 1: tokens_per_s="
                         f"{_brief(tokens_per_s)} on n_devices={_brief(n_devices)} x {acc.name} "
                         f"would beat the {dtype} peak; check tokens_per_s (the whole job's), "
                         "n_devices, accelerator and dtype")
    return u


def mfu(cfg, tokens_per_s, n_devices, accelerator, T, dtype="bf16", *, causal: bool = False,
        allow_above_peak: bool = False):
    """Model FLOPs utilisation: the FLOPs the model needs per second over the peak.

    MFU = flops_per_token(T) · tokens_per_s / (n_devices · C), with the model FLOPs of
    :func:`train_flops` (attention included, no recomputation), as defined in PaLM
    (Chowdhery et al. 2022, appendix B). A fraction in [0, 1] for any achievable throughput:
    inputs that give more than 1 (faster than peak) raise ValueError, unless
    ``allow_above_peak`` (for plotting sweeps that cross the peak).

    Args: tokens_per_s (training throughput of the whole job), n_devices, accelerator (name or
    Accelerator), T (sequence length), dtype (which peak C to use).

    >>> round(mfu("palm-540b", 238.3e3, 6144, "tpu-v4", 2048), 3)  # PaLM Table 3: 46.2%
    0.462
    """
    f = flops_per_token(cfg, T, training=True, include_attention=True, causal=causal)
    return _out(_utilization(f, tokens_per_s, n_devices, accelerator, dtype, "MFU",
                             allow_above_peak))


def hfu(cfg, tokens_per_s, n_devices, accelerator, T, dtype="bf16", *,
        recompute: str = "full", causal: bool = False, flash_attention: bool = True,
        allow_above_peak: bool = False):
    """Hardware FLOPs utilisation: like :func:`mfu`, but counting recomputed FLOPs too.

    With full recomputation each layer's forward runs twice, so HFU ≈ 4/3 · MFU;
    with selective recomputation only attention's QKᵀ and AV are repeated.
    ``flash_attention`` (default True: every current training stack uses a fused attention
    kernel that does not store the T x T scores) also counts the QKᵀ its backward recomputes,
    one more 2·T·N·H per token and layer (see :func:`train_flops`); pass False for a kernel
    that stores the scores, or to compare with figures counted before FlashAttention
    (Megatron-LM 2021, MT-NLG 2022). Above 1 raises ValueError unless ``allow_above_peak``,
    as in :func:`mfu`.

    >>> m = mfu("llama3-8b", 1e6, 128, "h100", 8192)
    >>> round(hfu("llama3-8b", 1e6, 128, "h100", 8192, flash_attention=False) / m, 3)
    1.315
    >>> round(hfu("llama3-8b", 1e6, 128, "h100", 8192) / m, 3)
    1.352
    """
    f = flops_per_token(cfg, T, training=True, include_attention=True, causal=causal,
                        recompute=recompute, flash_attention=flash_attention)
    return _out(_utilization(f, tokens_per_s, n_devices, accelerator, dtype, "HFU",
                             allow_above_peak))


def train_time(flops, n_devices, accelerator, mfu, dtype="bf16"):
    """Seconds to do ``flops`` on ``n_devices`` chips running at a fraction ``mfu`` of peak:
    t = F / (n · C · MFU).

    >>> from scaling_lib.units import DAY
    >>> round(train_time(3.8e25, 16384, "h100", 0.40) / DAY, 1)
    67.8
    """
    acc = hardware.get(accelerator)
    flops = check_positive("flops", flops, allow_zero=True)
    n_devices = check_count("n_devices", n_devices)
    u = check_fraction("mfu", mfu)
    return _out(flops / (n_devices * acc.peak_flops_per_s(dtype) * u))


def breakdown_flops_per_token(cfg, T, *, training: bool = True,
                              causal: bool = False) -> Breakdown:
    """FLOPs per token by part: attention projections, attention (QKᵀ, AV), MLP (or experts
    and router), unembedding. Sums to :func:`flops_per_token`.

    >>> b = breakdown_flops_per_token("llama3-8b", 8192)
    >>> math.isclose(b.total, flops_per_token("llama3-8b", 8192))
    True
    """
    c = _cfg(cfg)
    T = check_count("T", T, sweep=True)
    mult = 6.0 if training else 2.0
    n_dense = c.L - c.n_moe_layers
    parts = {"attention projections": mult * c.L * _attention_weights(c),
             "attention (QKᵀ, AV)":
                 mult / 2 * c.L * _attention_core_flops_per_token(c, T, causal),
             "mlp": mult * (n_dense * _mlp_weights(c, c.F)
                            + c.n_moe_layers * c.n_shared_experts * _mlp_weights(c, c.F_e))}
    if c.is_moe:
        parts["experts"] = mult * c.n_moe_layers * c.k * _mlp_weights(c, c.F_e)
        parts["router"] = mult * c.n_moe_layers * c.D * c.E
    parts["unembedding"] = mult * c.V * c.D
    return Breakdown(parts, unit="FLOPs")
