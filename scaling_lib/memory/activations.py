"""Activations a layer keeps for the backward pass, and the fp32 logits of the loss.

Korthikanti et al. 2022 (section 4): per layer, with s tokens, micro-batch b, width h, a heads
and tensor parallelism t,

    no parallelism              s·b·h·(34 + 5·a·s/h)
    tensor parallel             s·b·h·(10 + 24/t + 5·a·s/(h·t))
    tensor + sequence parallel  s·b·h·(34/t + 5·a·s/(h·t))
    + selective recomputation   s·b·h·34/t
    full recomputation          2·s·b·h   (the layer's input only)

bytes for a GPT layer with 16-bit activations and dropout. Here each term is derived for any
config (GQA, gated MLP, MoE, MLA, no dropout, FlashAttention), and reduces to those formulas
with ``flash_attention=False``. FlashAttention is the default everywhere (modern practice: the
T x T scores are never stored).

See: Chapter 6, "Activations".
"""

from __future__ import annotations

import numpy as np

from .. import models
from ..breakdown import Breakdown
from ..units import (_brief, check_choice, check_count, check_positive, divisors, dtype_bytes,
                     scalar_or_array as _out)

def tp_choices(cfg) -> list[int]:
    """Tensor-parallel degrees ``cfg`` can be split over: the rules table's
    (:func:`scaling_lib.parallelism.rules.tp_choices`; kept here under its old name).

    tp must divide the N query heads and the MLP width F (and each expert's F_e), and either
    divide the K kv heads or be a multiple of K (then each kv head is replicated on tp/K ranks,
    as Megatron-LM does). The vocabulary is left out: frameworks pad it to a multiple of tp.

    >>> tp_choices("llama3-8b")
    [1, 2, 4, 8, 16, 32]
    >>> tp_choices(models.TransformerConfig(L=1, D=64, F=96, N=12, K=4, H=16, V=100))
    [1, 2, 4, 12]
    """
    from ..parallelism import rules

    return rules.tp_choices(cfg)


def _check_tp(cfg, tp, heads_phrase="must divide"):
    t = np.asarray(check_count("tp", tp))
    ok = tp_choices(cfg)
    bad = [int(x) for x in np.unique(t) if int(x) not in ok]
    if bad:
        x, c = bad[0], cfg
        why = (f"{heads_phrase} N={c.N} query heads" if c.N % x else
               f"does not divide K={c.K} kv heads (nor is it a multiple of K, which would "
               "replicate them)" if c.K % x and x % c.K else
               f"does not divide the MLP width F={c.F}" + (f" / F_e={c.F_e}" if c.is_moe else ""))
        raise ValueError(f"tp={x} {why}; choose tp in {ok}")
    return t.astype(float)


def _activation_terms(cfg, moe_layer: bool, T_kv, tp, sp: bool, recompute: str, flash: bool,
                      a: float, fp8_inputs: bool = False) -> dict:
    """Bytes per token of one layer, by term, on one tensor-parallel rank. ``fp8_inputs``:
    the linear layers keep their inputs in fp8 for the weight gradients (Transformer Engine's
    fp8 Linear / LayerNormLinear / LayerNormMLP save the cast input, 1 byte), dense layers."""
    c = cfg
    D, N = c.D, c.N
    t = tp
    rep = 1.0 / t if sp else 1.0  # sequence parallelism shards the replicated terms
    if recompute == "full":
        return {"layer input (checkpoint)": a * D * rep}
    mask = 1.0 if c.dropout else 0.0  # dropout masks: 1 byte per element
    replicated = 4 * a * D + 2 * mask * D  # 2 norm inputs, attention and MLP inputs, 2 masks
    if c.mla is None:
        qkv = a * (N * c.H / t + 2 * c.H * np.maximum(c.K / t, 1.0))
        attn_out = a * N * c.H / t
    else:
        m = c.mla
        replicated = replicated + a * (m.q_lora_rank + m.kv_lora_rank + m.qk_rope_head_dim)
        qkv = a * N * (2 * m.qk_head_dim + m.v_head_dim) / t
        attn_out = a * N * m.v_head_dim / t
    n_mats = 3 if c.glu else 2  # stored per hidden unit: gate, up, product (or input, output)
    if moe_layer:
        # routed token copies (k per token; with a capacity factor cf each expert's buffer is
        # sized for cf times its even share, padding included: cf·k copies), plus shared experts
        routed = c.k * (c.capacity_factor if c.capacity_factor is not None else 1.0)
        copies = routed + c.n_shared_experts
        mlp = copies * ((n_mats * c.F_e if c.glu else 2 * c.F_e) + D) * a / t + 4.0 * c.E
    else:
        mlp = (n_mats if c.glu else 2) * a * c.F / t
    if recompute == "selective-matmuls" and not moe_layer and c.mla is None:
        # PyTorch/torchtitan per-op selective checkpointing (torchtitan's "op" SAC policy,
        # activation_checkpoint.py): keep the outputs of attention and of every other matmul of
        # the layer, recompute the rest. A Llama layer's matmuls run wq, wk, wv, wo, w1, w3, w2:
        # the outputs of wq, wv, w1 and w2 (or fc1 without a gate) stay, with the layer input.
        kept_mlp = a * c.F / t + (a * D * rep if c.glu else 0.0)
        return {"norms, inputs and masks": a * D * rep,
                "q, k, v": a * (N * c.H / t + c.H * np.maximum(c.K / t, 1.0)),
                "attention output": a * N * c.H / t, "mlp hidden": kept_mlp,
                "attention scores": (4.0 * N / t if flash else 0.0 * T_kv)}
    if fp8_inputs and not moe_layer and c.mla is None:
        # the norm outputs (inputs of QKV and of the MLP) and the MLP's down-projection input
        # become 1 byte; the attention projection keeps an fp8 copy of its input beside the
        # bf16 output the attention kernel saves
        replicated = 2 * a * D + 2 * 1.0 * D + 2 * mask * D
        attn_out = attn_out + 1.0 * N * c.H / t
        mlp = ((2 * a if c.glu else a) + 1.0) * c.F / t
    if flash:
        scores = 4.0 * N / t  # fp32 log-sum-exp per query row; the T x T scores never stored
    elif recompute.startswith("selective"):
        scores = 0.0 * T_kv  # recomputed in the backward pass
    else:
        # softmax output (the input of AV), plus dropout's mask and output when there is dropout
        scores = (a + mask * (1 + a)) * N * T_kv / t
    return {"norms, inputs and masks": replicated * rep, "q, k, v": qkv,
            "attention output": attn_out, "mlp hidden": mlp, "attention scores": scores}


SELECTIVE = ("attention", "matmuls")


def _recompute_kind(recompute, selective):
    """The internal name of a recomputation: "selective" by ``selective`` policy."""
    check_choice("selective", selective, SELECTIVE)
    return "selective-matmuls" if recompute == "selective" and selective == "matmuls" \
        else recompute


def activation_breakdown(cfg, B, T, recompute: str = "none", tp=1, sequence_parallel=False, *,
                         flash_attention: bool = True, cp=1, dtype="bf16",
                         selective: str = "attention") -> Breakdown:
    """Activation bytes of one layer on one device, by term (averaged over layers for MoE
    models whose first layers are dense). Args as :func:`activation_bytes`.

    >>> b = activation_breakdown("gpt3-175b", 1, 2048, flash_attention=False)
    >>> b["attention scores"] / b.total  # 5as/h over 34 + 5as/h: selective recompute saves 70%
    0.7017543859649122
    """
    c = models.get(cfg)
    check_choice("recompute", recompute, ("none", "selective", "full"))
    kind = _recompute_kind(recompute, selective)
    B = check_count("B", B, sweep=True)
    T = check_count("T", T, sweep=True)
    cp = check_count("cp", cp)
    t = _check_tp(c, tp)
    _check_flag("sequence_parallel", sequence_parallel)
    _check_flag("flash_attention", flash_attention)
    a = dtype_bytes(dtype)
    tokens = B * T / cp
    layers = [(c.L - c.n_moe_layers, False), (c.n_moe_layers, True)]
    parts: dict = {}
    for count, moe in layers:
        if not count:
            continue
        terms = _activation_terms(c, moe, T, t, bool(sequence_parallel), kind,
                                  flash_attention, a)
        for key, v in terms.items():
            parts[key] = parts.get(key, 0.0) + count / c.L * tokens * v
    return Breakdown({k: _out(v) for k, v in parts.items()}, unit="bytes")


def activation_bytes(cfg, B, T, recompute: str = "none", tp=1, sequence_parallel=False, *,
                     flash_attention: bool = True, cp=1, dtype="bf16",
                     selective: str = "attention"):
    """Activation bytes one layer keeps for the backward pass, per device.

    Korthikanti et al. 2022 (section 4), generalised: per token, the norm inputs, the inputs
    of the QKV and MLP matmuls and dropout masks (10·h bytes for GPT; sharded over t only with
    ``sequence_parallel``), Q, K, V, the attention output and the MLP hidden activations
    (24·h/t), and the attention scores (5·a·s/t with dropout: softmax output, mask, dropout
    output). ``recompute="selective"`` drops the scores, ``"full"`` keeps only the layer input
    (2·s·b·h, or /t with sequence parallelism). ``flash_attention`` (the default, as in
    modern training stacks) never stores the scores (only a 4-byte log-sum-exp per head and
    row); pass ``flash_attention=False`` for Korthikanti's formulas, which store them. ``cp``
    splits the T tokens over context-parallel ranks, so every term is divided by cp (without
    FlashAttention the scores still span all T keys). Broadcasts over B, T and tp.

    ``selective``: which selective recomputation. "attention" (Korthikanti's, Megatron-LM's
    default ``--recompute-granularity selective``): the attention core is recomputed, which
    saves nothing more once FlashAttention already recomputes the scores. "matmuls"
    (torchtitan's per-op policy): keep the outputs of attention and of every other matmul
    (wq, wv, w1, w2 of a Llama layer) and the layer input, recompute the rest; MoE and MLA
    layers keep the "attention" accounting (an upper bound).

    Args: cfg, B (micro-batch, sequences), T (tokens), tp (tensor-parallel degree),
    dtype (activation format; masks take 1 byte).

    >>> c = models.gpt(96, 12288, 96)   # GPT-3 175B shape, s = 2048, b = 1
    >>> full = activation_bytes(c, 1, 2048, flash_attention=False)
    >>> full == 2048 * 12288 * (34 + 5 * 96 * 2048 / 12288)
    True
    >>> sel = activation_bytes(c, 1, 2048, "selective", tp=8, sequence_parallel=True,
    ...                        flash_attention=False)
    >>> sel == 2048 * 12288 * 34 / 8
    True
    """
    return activation_breakdown(cfg, B, T, recompute, tp, sequence_parallel,
                                flash_attention=flash_attention, cp=cp, dtype=dtype,
                                selective=selective).total


def checkpointed_activation_bytes(cfg, B, T, every, *, tp=1, sequence_parallel=False,
                                  flash_attention: bool = True, dtype="bf16"):
    """Peak activation bytes with a checkpoint (a layer input) kept every ``every`` layers.

    M(c) = ⌈L/c⌉ · m_ckpt + c · m_layer: the stored checkpoints plus one segment of c layers
    whose activations are rebuilt, from its checkpoint, while it is back-propagated. The
    recompute is one extra forward pass whatever c is; memory is smallest near
    c = √(L · m_ckpt / m_layer). c = 1 is full recomputation's layout (plus one layer's
    working set), c = L stores everything once. Broadcasts over ``every``.

    >>> m = checkpointed_activation_bytes("llama3-8b", 1, 4096, np.array([1, 4, 32]))
    >>> [round(float(x) / 1e9, 1) for x in m]  # GB: a layer's input is small, so c = 1 wins
    [1.6, 2.6, 18.3]
    """
    c = models.get(cfg)
    every = check_count("every", every)
    if np.any(every > c.L):
        raise ValueError(f"every={every!r} must be an integer number of layers in 1..L={c.L}")
    ck = activation_bytes(c, B, T, "full", tp, sequence_parallel, dtype=dtype)
    layer = activation_bytes(c, B, T, "none", tp, sequence_parallel,
                             flash_attention=flash_attention, dtype=dtype)
    return _out(np.ceil(c.L / every) * ck + every * layer)


def _check_flag(name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name}={_brief(value)} must be True or False")


def logits_bytes(cfg, B, T, tp=1, *, copies=1, chunks=1):
    """Bytes of the fp32 logits of B sequences of T tokens on one device: copies·4·B·T·V/(t·c).

    The output layer produces B·T·V logits; the loss keeps them in fp32 (4 bytes) for the
    backward pass, split over the t tensor-parallel ranks (vocabulary-parallel loss; Korthikanti
    et al. 2022, section 4.3). ``copies``: fp32 tensors of that size alive at once. 1 is the
    stored logits; a straightforward cross-entropy peaks at 2-3 (the bf16 matmul output cast to
    fp32, the softmax or log-softmax, then the gradient of the logits). ``chunks``: a chunked
    loss runs the output matmul and the loss on T/c tokens at a time (and recomputes them in
    the backward pass), so only one chunk's logits exist. Broadcasts over B and T.

    >>> round(logits_bytes("llama3-8b", 1, 8192) / 1e9, 2)  # 4 · 8192 · 128256 bytes
    4.2

    See: Chapter 6, "The logits".
    """
    c = models.get(cfg)
    B = check_positive("B", B)
    T = check_positive("T", T)
    t = check_positive("tp", tp)
    n = check_positive("copies", copies)
    k = check_positive("chunks", chunks)
    return _out(n * 4.0 * B * T * c.V / (t * k))


def selective_recompute_overhead(cfg, T, *, convention: str = "forward"):
    """Extra FLOPs of selective recomputation, as a fraction of a training step's FLOPs.

    ``"forward"`` (the library's count): the recomputation re-runs the forward of QKᵀ and of
    the scores times V, 4·T²·N·H FLOPs per layer and sequence, over
    :func:`scaling_lib.transformer.train_flops`. ``"korthikanti"``: the paper's appendix
    formula (Korthikanti et al. 2022, appendix A, for a GPT layer), which adds s/(6h) to the
    bracket 1 + s/(6h) + V/(12hl), i.e. counts the attention core's forward and backward
    (12·s²·h per layer) once more: three times the forward that is re-run. That gives the
    paper's "2.7% FLOPs overhead" for GPT-3 175B and 1.6% for MT-NLG 530B (section 4.2).

    >>> round(float(selective_recompute_overhead("gpt3-175b", 2048, convention="korthikanti")), 3)
    0.027
    >>> round(float(selective_recompute_overhead("gpt3-175b", 2048)), 3)
    0.009

    See: Chapter 6, "Activations".
    """
    from .. import transformer

    c = models.get(cfg)
    T = check_positive("T", T)
    if convention == "forward":
        return _out(transformer.train_flops(c, 1, T, recompute="selective")
                    / transformer.train_flops(c, 1, T) - 1)
    if convention == "korthikanti":
        x = T / (6 * c.D)
        return _out(x / (1 + x + c.V / (12 * c.D * c.L)))
    raise ValueError(f"convention={convention!r}; valid choices: forward, korthikanti")
