"""Memory for training: model states (parameters, gradients, optimizer) and activations.

Model states follow the ZeRO paper's accounting (Rajbhandari et al. 2020, section 3.1): mixed
precision with Adam keeps bf16/fp16 parameters (2 bytes) and gradients (2 bytes) and an fp32
master copy, momentum and variance (K = 12 bytes), 16 bytes per parameter. ZeRO stages 1, 2, 3
shard the optimizer state, then the gradients, then the parameters over the N_d data-parallel
ranks. Activations follow Korthikanti et al. 2022 (section 4): per layer, with s tokens,
micro-batch b, width h, a heads and tensor parallelism t,

    no parallelism              s·b·h·(34 + 5·a·s/h)
    tensor parallel             s·b·h·(10 + 24/t + 5·a·s/(h·t))
    tensor + sequence parallel  s·b·h·(34/t + 5·a·s/(h·t))
    + selective recomputation   s·b·h·34/t
    full recomputation          2·s·b·h   (the layer's input only)

bytes for a GPT layer with 16-bit activations and dropout. Here each term is derived for any
config (GQA, gated MLP, MoE, MLA, no dropout, FlashAttention), and reduces to those formulas
with ``flash_attention=False``. FlashAttention is the default everywhere (modern practice: the
T x T scores are never stored). Around them: the fp32 logits (:func:`logits_bytes`), the cost of
selective recomputation (:func:`selective_recompute_overhead`), CPU offload
(:func:`offloaded_state_bytes`) and memory over the phases of one step (:func:`memory_timeline`).

See: Chapter 6, "Memory for training".
"""

from __future__ import annotations

import math

import numpy as np

from . import hardware, models
from .breakdown import Breakdown
from .parallelism.plan import ParallelPlan
from .transformer import (_attention_biases, _attention_weights, _layer_norms, _mlp_biases,
                          _mlp_weights, _norm_params)
from .units import (_brief, check_choice, check_count, check_positive, divisors, dtype_bytes,
                    fmt_bytes, scalar_or_array as _out)

# Bytes per parameter: (weights, gradients, fp32 master copy, each optimizer state).
RECIPES: dict[str, tuple[float, float, float, float]] = {
    # ZeRO's mixed precision (Rajbhandari et al. 2020, section 3.1): 2 + 2 + (4 + 4 + 4) = 16.
    "mixed": (2, 2, 4, 4),
    # Megatron-LM accumulates gradients in an fp32 "main_grad" buffer: 2 + 4 + 12 = 18.
    "mixed_fp32_grads": (2, 4, 4, 4),
    # Everything in fp32; the weights are their own master copy: 4 + 4 + 8 = 16.
    "fp32": (4, 4, 0, 4),
    # Pure bf16, no master copy, bf16 moments: 2 + 2 + 4 = 8 (the "8 bytes/param" shortcut).
    "bf16": (2, 2, 0, 2),
    # 8-bit Adam (Dettmers et al. 2022, block-wise quantised states; one fp32 scale per block of
    # 2048 values, 0.002 bytes, left out): mixed precision with 1-byte moments, 2 + 2 + 4 + 2 = 10.
    "mixed_8bit_adam": (2, 2, 4, 1),
    # fp8 training as in DeepSeek-V3 (section 3.3): matmuls read 1-byte fp8 copies of the weights;
    # fp32 master weights and fp32 gradients (for accumulation) stay, and Adam's moments are
    # kept in bf16: 1 + 4 + 4 + 2·2 = 13. fp8 shrinks the weights the matmuls read and the
    # activations they store, not the optimizer.
    "fp8": (1, 4, 4, 2),
}
# Optimizer states per parameter (each stored at the recipe's state width).
OPTIMIZERS: dict[str, int] = {"adam": 2, "adamw": 2, "lion": 1, "momentum": 1, "sgd": 0}


def _recipe(recipe: str, optimizer: str) -> tuple[float, float, float]:
    check_choice("recipe", recipe, RECIPES)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    p, g, master, state = RECIPES[recipe]
    return p, g, master + OPTIMIZERS[optimizer] * state


def bytes_per_param(recipe: str = "mixed", optimizer: str = "adam") -> Breakdown:
    """Bytes each parameter costs in model states, by part.

    >>> b = bytes_per_param()
    >>> dict(b), b.total
    ({'parameters': 2, 'gradients': 2, 'optimizer': 12}, 16)
    >>> bytes_per_param("bf16").total
    8
    """
    p, g, o = _recipe(recipe, optimizer)
    return Breakdown(parameters=p, gradients=g, optimizer=o, unit="bytes/param")


def _check_zero(zero):
    check_choice("zero", zero, (0, 1, 2, 3))


def model_state_bytes(n_params, dp=1, zero: int = 0, *, recipe: str = "mixed",
                      optimizer: str = "adam") -> Breakdown:
    """Per-device bytes of parameters, gradients and optimizer state under ZeRO.

    With Ψ parameters, N_d data-parallel ranks and (2, 2, K) bytes per parameter:
    stage 0: (2 + 2 + K)Ψ;  1: (2 + 2)Ψ + KΨ/N_d;  2: 2Ψ + (2 + K)Ψ/N_d;  3: (2 + 2 + K)Ψ/N_d.
    Broadcasts over ``n_params`` and ``dp``.

    >>> [round(model_state_bytes(7.5e9, 64, z).total / 1e9, 1) for z in range(4)]
    [120.0, 31.4, 16.6, 1.9]
    """
    _check_zero(zero)
    n = check_positive("n_params", n_params)
    nd = check_count("dp", dp)
    p, g, o = _recipe(recipe, optimizer)
    n = n * np.ones(np.broadcast(n, nd).shape)  # every part has the broadcast shape
    return Breakdown(parameters=_out(p * n / (nd if zero >= 3 else 1)),
                     gradients=_out(g * n / (nd if zero >= 2 else 1)),
                     optimizer=_out(o * n / (nd if zero >= 1 else 1)), unit="bytes")


def max_trainable_params(accelerator, dp=1, zero: int = 0, *, recipe: str = "mixed",
                         optimizer: str = "adam", reserve_bytes=0.0):
    """Largest Ψ whose model states fit in one device's HBM (activations not counted).

    Ψ_max = (HBM - reserve) / bytes per parameter after ZeRO sharding. Plain data parallelism
    with 16 bytes/param on an 80 GB GPU: 5e9 parameters, before a single activation is stored.
    ``accelerator`` is a name, an Accelerator or a number of bytes.

    >>> max_trainable_params("h100")
    5000000000.0
    """
    hbm = accelerator if isinstance(accelerator, (int, float, np.integer, np.floating,
                                                  np.ndarray)) \
        and not isinstance(accelerator, (bool, np.bool_)) else hardware.get(accelerator).hbm_bytes
    hbm = check_positive("hbm_bytes", hbm)
    reserve = check_positive("reserve_bytes", reserve_bytes, allow_zero=True)
    per_param = model_state_bytes(1.0, dp, zero, recipe=recipe, optimizer=optimizer).total
    return _out(np.maximum(hbm - reserve, 0.0) / per_param)


# ---- activations --------------------------------------------------------------------------------
def tp_choices(cfg) -> list[int]:
    """Tensor-parallel degrees ``cfg`` can be split over.

    tp must divide the N query heads and the MLP width F (and each expert's F_e), and either
    divide the K kv heads or be a multiple of K (then each kv head is replicated on tp/K ranks,
    as Megatron-LM does). The vocabulary is left out: frameworks pad it to a multiple of tp.

    >>> tp_choices("llama3-8b")
    [1, 2, 4, 8, 16, 32]
    >>> tp_choices(models.TransformerConfig(L=1, D=64, F=96, N=12, K=4, H=16, V=100))
    [1, 2, 4, 12]
    """
    c = models.get(cfg)
    return [t for t in divisors(c.N) if (c.K % t == 0 or t % c.K == 0)
            and c.F % t == 0 and c.F_e % t == 0]


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
                      a: float) -> dict:
    """Bytes per token of one layer, by term, on one tensor-parallel rank."""
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
        copies = c.k + c.n_shared_experts
        mlp = copies * ((n_mats * c.F_e if c.glu else 2 * c.F_e) + D) * a / t + 4.0 * c.E
    else:
        mlp = (n_mats if c.glu else 2) * a * c.F / t
    if flash:
        scores = 4.0 * N / t  # fp32 log-sum-exp per query row; the T x T scores never stored
    elif recompute == "selective":
        scores = 0.0 * T_kv  # recomputed in the backward pass
    else:
        # softmax output (the input of AV), plus dropout's mask and output when there is dropout
        scores = (a + mask * (1 + a)) * N * T_kv / t
    return {"norms, inputs and masks": replicated * rep, "q, k, v": qkv,
            "attention output": attn_out, "mlp hidden": mlp, "attention scores": scores}


def activation_breakdown(cfg, B, T, recompute: str = "none", tp=1, sequence_parallel=False, *,
                         flash_attention: bool = True, cp=1, dtype="bf16") -> Breakdown:
    """Activation bytes of one layer on one device, by term (averaged over layers for MoE
    models whose first layers are dense). Args as :func:`activation_bytes`.

    >>> b = activation_breakdown("gpt3-175b", 1, 2048, flash_attention=False)
    >>> b["attention scores"] / b.total  # 5as/h over 34 + 5as/h: selective recompute saves 70%
    0.7017543859649122
    """
    c = models.get(cfg)
    check_choice("recompute", recompute, ("none", "selective", "full"))
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
        terms = _activation_terms(c, moe, T, t, bool(sequence_parallel), recompute,
                                  flash_attention, a)
        for key, v in terms.items():
            parts[key] = parts.get(key, 0.0) + count / c.L * tokens * v
    return Breakdown({k: _out(v) for k, v in parts.items()}, unit="bytes")


def activation_bytes(cfg, B, T, recompute: str = "none", tp=1, sequence_parallel=False, *,
                     flash_attention: bool = True, cp=1, dtype="bf16"):
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
                                flash_attention=flash_attention, cp=cp, dtype=dtype).total


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


# ---- one device of a parallel plan --------------------------------------------------------------
def _check_plan(plan):
    if not isinstance(plan, ParallelPlan):
        raise ValueError(f"plan={_brief(plan)} must be a ParallelPlan")


def _check_flag(name, value):
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name}={_brief(value)} must be True or False")


def _first_stage_params(c, plan: ParallelPlan) -> tuple[float, float, int, int]:
    """(non-expert params, expert params) on one device of the first pipeline stage, before
    ZeRO; and that stage's (dense layers, MoE layers)."""
    n_stage = math.ceil(c.L / plan.pp)
    n_dense = min(c.L - c.n_moe_layers, n_stage)  # dense layers come first (DeepSeek)
    n_moe = n_stage - n_dense
    per_layer_tp = _attention_weights(c) + _attention_biases(c)
    dense = n_stage * per_layer_tp / plan.tp + n_stage * _layer_norms(c)
    dense += n_dense * (_mlp_weights(c, c.F) + _mlp_biases(c, c.F)) / plan.tp
    expert_one = _mlp_weights(c, c.F_e) + _mlp_biases(c, c.F_e)
    dense += n_moe * (c.n_shared_experts * expert_one / plan.tp + c.D * c.E)
    dense += (c.V * c.D + c.learned_positions * c.D) / plan.tp  # embedding (vocab-parallel)
    if plan.pp == 1:  # the last stage's parts live here too
        dense += (0 if c.tied_embeddings else c.V * c.D) / plan.tp + _norm_params(c, c.D)
    experts = n_moe * c.E * expert_one / (plan.ep * plan.tp)
    return dense, experts, n_dense, n_moe


def in_flight_microbatches(plan: ParallelPlan, n_microbatches):
    """Micro-batches whose activations the first pipeline stage holds at its peak.

    1: no pipeline (gradient accumulation runs micro-batches one after another);
    GPipe: all m; 1F1B: min(p, m); interleaved with v chunks: min(p, m)·(1 + (p-1)/(p·v))
    (Korthikanti et al. 2022, section 4.2.3).

    >>> in_flight_microbatches(ParallelPlan(pp=4), 16)
    4.0
    """
    _check_plan(plan)
    m = check_count("n_microbatches", n_microbatches)
    p, v = plan.pp, plan.virtual_stages
    if p == 1:
        return _out(np.ones_like(m))
    if plan.schedule == "gpipe":
        return _out(m)
    base = np.minimum(p, m)
    if v > 1:
        base = base * (1 + (p - 1) / (p * v))
    return _out(base)


def training_memory(cfg, plan: ParallelPlan | None = None, B=None, T=2048, *,
                    recipe: str = "mixed", optimizer: str = "adam", flash_attention: bool = True,
                    dtype="bf16", overhead_bytes=0.0) -> Breakdown:
    """Memory of one device (the first pipeline stage) while training, by part.

    ``parameters``, ``gradients``, ``optimizer``: the stage's share of the model (layers
    ⌈L/p⌉, attention and MLPs split t ways, experts e·t ways, embeddings vocabulary-parallel),
    at the recipe's bytes per parameter, sharded over the ZeRO group by stage (see
    :func:`model_state_bytes`). ``activations``: :func:`activation_bytes` for the plan's
    micro-batch, recomputation, tp and sequence parallelism, times the layers on the stage,
    times :func:`in_flight_microbatches`; with full recomputation, plus one layer's full
    activations (the layer being back-propagated is rebuilt from its checkpoint). Activations
    scale with the micro-batch, not the global batch B: gradient accumulation runs the
    B / (dp · micro_batch) micro-batches one after another. ``logits``: the fp32 logits the loss
    keeps (:func:`logits_bytes`, 4·b·T·V/t bytes, Korthikanti et al. 2022), on this device only
    when pp = 1. ``overhead``: any fixed allowance you pass (CUDA context, buffers), shown when
    > 0. ``flash_attention`` defaults to True (modern practice: the T x T scores are never
    stored). Left out: gathered-parameter and communication buffers, the loss's temporary
    copies, fragmentation (see :func:`memory_timeline`).

    Args: cfg, plan (ParallelPlan; default one device), B (global batch in sequences; default
    dp · micro_batch), T (sequence length). Broadcasts over T.

    >>> mem = training_memory("llama3-8b", ParallelPlan(), 1, 4096)
    >>> round(mem["parameters"] / 1e9, 1), round(mem.total / 1e9)
    (16.1, 149)
    """
    c = models.get(cfg)
    plan = ParallelPlan() if plan is None else plan
    _check_plan(plan)
    if B is None:
        B = plan.dp * plan.micro_batch
    n_micro = plan.n_microbatches(B)
    _check_tp(c, plan.tp, "does not divide")
    _check_flag("flash_attention", flash_attention)
    if plan.pp > c.L:
        raise ValueError(f"pp={plan.pp} stages exceed L={c.L} layers; choose pp <= {c.L}")
    if c.is_moe and c.E % plan.ep:
        ok = divisors(c.E)
        raise ValueError(f"ep={plan.ep} does not divide E={c.E} experts; choose ep in {ok}")
    if not c.is_moe and plan.ep != 1:
        raise ValueError(f"ep={plan.ep} needs a mixture-of-experts model; {c.name or 'cfg'} "
                         "is dense (E=1): use ep=1")
    T = check_count("T", T, sweep=True)
    p_b, g_b, o_b = _recipe(recipe, optimizer)
    dense, experts, n_dense, n_moe = _first_stage_params(c, plan)
    S = plan.zero_group
    S_e = max(S / plan.ep, 1.0)

    def sharded(bytes_per, stage):
        return bytes_per * (dense / (S if plan.zero >= stage else 1)
                            + experts / (S_e if plan.zero >= stage else 1))

    a = dtype_bytes(dtype)
    sp = plan.sequence_parallel
    per_layer = {False: 0.0, True: 0.0}
    for moe in (False, True):
        terms = _activation_terms(c, moe, T, float(plan.tp), sp, plan.recompute,
                                  flash_attention, a)
        per_layer[moe] = sum(terms.values()) * plan.micro_batch * T / plan.cp
    acts = (n_dense * per_layer[False] + n_moe * per_layer[True]) * \
        in_flight_microbatches(plan, n_micro)
    if plan.recompute == "full":  # the layer being back-propagated is rebuilt in full
        working = [sum(_activation_terms(c, moe, T, float(plan.tp), sp, "none", flash_attention,
                                         a).values()) for moe, n in ((False, n_dense),
                                                                     (True, n_moe)) if n]
        acts = acts + max(working) * plan.micro_batch * T / plan.cp
    logits = logits_bytes(c, plan.micro_batch, T / plan.cp, plan.tp) if plan.pp == 1 \
        else 0.0 * T
    parts = {"parameters": sharded(p_b, 3), "gradients": sharded(g_b, 2),
             "optimizer": sharded(o_b, 1), "activations": _out(acts), "logits": _out(logits)}
    overhead = check_positive("overhead_bytes", overhead_bytes, allow_zero=True)
    if np.any(overhead > 0):
        parts["overhead"] = overhead
    return Breakdown(parts, unit="bytes")


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
    from . import transformer

    c = models.get(cfg)
    T = check_positive("T", T)
    if convention == "forward":
        return _out(transformer.train_flops(c, 1, T, recompute="selective")
                    / transformer.train_flops(c, 1, T) - 1)
    if convention == "korthikanti":
        x = T / (6 * c.D)
        return _out(x / (1 + x + c.V / (12 * c.D * c.L)))
    raise ValueError(f"convention={convention!r}; valid choices: forward, korthikanti")


def offloaded_state_bytes(n_params, dp=1, *, recipe: str = "mixed",
                          optimizer: str = "adam") -> Breakdown:
    """Model states per rank with the optimizer offloaded to the CPU (ZeRO-Offload), by place.

    ZeRO-Offload (Ren et al. 2021, section 4) keeps only the 16-bit parameters on the device
    (p·Ψ bytes); the gradients (g·Ψ) and the fp32 master copy and optimizer states (o·Ψ) live
    in host memory, partitioned over the N_d data-parallel ranks as in ZeRO-2, and the CPU runs
    the optimizer step. Broadcasts over n_params and dp.

    >>> b = offloaded_state_bytes(7.5e9)
    >>> b["device"] / 1e9, b["host"] / 1e9
    (15.0, 105.0)

    See: Chapter 6, "Offloading and 8-bit optimizers".
    """
    n = check_positive("n_params", n_params)
    nd = check_positive("dp", dp)
    p, g, o = _recipe(recipe, optimizer)
    return Breakdown({"device": _out(p * n * np.ones(np.shape(nd))),
                      "host": _out((g + o) * n / nd)}, unit="bytes")


def offload_transfer_time(n_params, dp=1, *, pcie_bytes_per_s=None, recipe: str = "mixed",
                          optimizer: str = "adam"):
    """Seconds per step the offloaded optimizer spends on PCIe: max(g·Ψ, p·Ψ) / (N_d · W).

    Each step sends the rank's gradient shard down to the host (g·Ψ/N_d bytes) and the updated
    16-bit parameters back (p·Ψ/N_d); PCIe is full duplex, so the slower direction sets the
    time. ZeRO-Offload overlaps it with the backward pass. ``pcie_bytes_per_s``: one-way
    bandwidth (default PCIe 5.0 x16, :func:`scaling_lib.collectives.pcie_bytes_per_s`).

    >>> round(float(offload_transfer_time(7.5e9)), 3)  # 15 GB each way at 63 GB/s
    0.238

    See: Chapter 6, "Offloading and 8-bit optimizers".
    """
    from . import collectives

    n = check_positive("n_params", n_params)
    nd = check_count("dp", dp)  # a degree: whole (dp=1e308 gave inf/inf = NaN)
    w = collectives.pcie_bytes_per_s(5, 16) if pcie_bytes_per_s is None else \
        check_positive("pcie_bytes_per_s", pcie_bytes_per_s)
    p, g, _ = _recipe(recipe, optimizer)
    return _out(max(p, g) * n / (nd * w))


def _layer_params(c, plan: ParallelPlan) -> float:
    """Parameters of the largest single layer on one device (before ZeRO)."""
    attn = (_attention_weights(c) + _attention_biases(c)) / plan.tp + _layer_norms(c)
    expert_one = _mlp_weights(c, c.F_e) + _mlp_biases(c, c.F_e)
    mlps = []
    if c.L - c.n_moe_layers:
        mlps.append((_mlp_weights(c, c.F) + _mlp_biases(c, c.F)) / plan.tp)
    if c.n_moe_layers:
        mlps.append(c.n_shared_experts * expert_one / plan.tp + c.D * c.E
                    + c.E * expert_one / (plan.ep * plan.tp))
    return attn + max(mlps)


def memory_timeline(cfg, plan: ParallelPlan | None = None, T=2048, *, recipe: str = "mixed",
                    optimizer: str = "adam", flash_attention: bool = True, dtype="bf16",
                    loss_copies=2, bucket_bytes=25e6, fragmentation=0.0):
    """Memory of one device at each point of one training step (one micro-batch, pp = 1).

    Returns ``(phases, parts)``: labels ("start", "fwd 1".."fwd L", "loss", "bwd L".."bwd 1",
    "optimizer") and a Breakdown of arrays, one value per phase:

    - parameters and optimizer state: the device's shards, there all step (as
      :func:`training_memory`);
    - activations: the forward adds one layer's worth per layer; the backward frees each
      layer's after its gradient is computed (full recomputation stores the layer inputs and
      rebuilds one layer in the backward pass);
    - gradients: built layer by layer in the backward pass (ZeRO ≥ 2 keeps only the shard);
    - gather buffers (ZeRO-3/FSDP): two unsharded 16-bit layers, the one computing and the one
      being prefetched;
    - gradient buckets: in the backward pass with dp > 1, ``bucket_bytes`` in flight for an
      all-reduce (PyTorch DDP's default bucket_cap_mb = 25), or the unsharded gradient of the
      layer being reduce-scattered (ZeRO ≥ 2);
    - logits: ``loss_copies`` fp32 copies at the loss (see :func:`logits_bytes`);
    - allocator reserve: ``fragmentation`` times everything allocated, an allowance for the
      caching allocator's unused blocks (an assumption to choose, not a measured constant).

    Left out: the optimizer step's temporaries, the CUDA context, gradient accumulation over
    several micro-batches (the gradients then persist through the later forwards).

    >>> phases, m = memory_timeline("llama3-8b", ParallelPlan(dp=8, zero=3), 4096)
    >>> phases[int(np.argmax(m.total))]   # the peak: the loss, with every activation stored
    'loss'

    See: Chapter 6, "A memory timeline over one step".
    """
    c = models.get(cfg)
    plan = ParallelPlan() if plan is None else plan
    if not isinstance(plan, ParallelPlan):
        raise ValueError(f"plan must be a ParallelPlan, got {plan!r}")
    if plan.pp != 1:
        raise ValueError(f"pp={plan.pp}: the timeline models one stage holding every layer; "
                         "use pp=1 (training_memory covers pipeline schedules)")
    T = float(check_positive("T", T))
    frag = check_positive("fragmentation", fragmentation, allow_zero=True)
    if frag > 1:
        raise ValueError(f"fragmentation={fragmentation!r} is a fraction of the allocated bytes; "
                         "choose a value in [0, 1]")
    bucket = check_positive("bucket_bytes", bucket_bytes, allow_zero=True)
    m = training_memory(c, plan, plan.dp * plan.micro_batch, T, recipe=recipe, optimizer=optimizer,
                        flash_attention=flash_attention, dtype=dtype)
    p_b, g_b, _ = _recipe(recipe, optimizer)
    L = c.L
    tokens = plan.micro_batch * T / plan.cp
    a = dtype_bytes(dtype)
    sp = plan.sequence_parallel
    if plan.recompute == "full":
        stored = sum(_activation_terms(c, False, T, float(plan.tp), sp, "full", flash_attention,
                                       a).values()) * tokens
        working = float(m["activations"]) - L * stored
    else:
        stored, working = float(m["activations"]) / L, 0.0
    layer = _layer_params(c, plan)
    gather = 2 * p_b * layer if plan.zero >= 3 else 0.0
    grad_bucket = (g_b * layer if plan.zero >= 2 else bucket) if plan.dp > 1 else 0.0
    logits = float(logits_bytes(c, plan.micro_batch, T / plan.cp, plan.tp, copies=loss_copies))
    phases = ["start", *[f"fwd {i}" for i in range(1, L + 1)], "loss",
              *[f"bwd {i}" for i in range(L, 0, -1)], "optimizer"]
    n = len(phases)
    acts, grads, gath, buck, logit = (np.zeros(n) for _ in range(5))
    fwd = np.arange(1, L + 1)
    acts[1:L + 1] = fwd * stored
    gath[1:L + 1] = gather
    acts[L + 1] = L * stored
    logit[L + 1] = logits
    bwd = np.arange(L, 0, -1)  # layer being back-propagated; its activations are still there
    acts[L + 2:2 * L + 2] = bwd * stored + working
    grads[L + 2:2 * L + 2] = (L - bwd + 1) / L * float(m["gradients"])
    gath[L + 2:2 * L + 2] = gather
    buck[L + 2:2 * L + 2] = grad_bucket
    grads[-1] = float(m["gradients"])
    fixed = np.ones(n)
    parts = {"parameters": float(m["parameters"]) * fixed,
             "optimizer": float(m["optimizer"]) * fixed,
             "gradients": grads, "activations": acts, "gather buffers": gath,
             "gradient buckets": buck, "logits": logit}
    allocated = sum(parts.values())
    parts["allocator reserve"] = frag * allocated
    return phases, Breakdown(parts, unit="bytes")


def check_fit(memory: Breakdown, accelerator, *, reserve_bytes=0.0) -> tuple[bool, str]:
    """Whether a per-device memory Breakdown fits in the accelerator's HBM, and why not.

    >>> ok, why = check_fit(training_memory("llama3-8b", ParallelPlan(), 1, 4096), "h100")
    >>> ok, why.split(";")[0]
    (False, '149 GB needed > 80 GB of HBM on h100')
    """
    if not isinstance(memory, Breakdown):
        raise ValueError(f"memory={_brief(memory)} must be a Breakdown of bytes "
                         "(training_memory(...) returns one)")
    acc = hardware.get(accelerator)
    reserve = check_positive("reserve_bytes", reserve_bytes, allow_zero=True)
    total = float(np.max(memory.total))
    room = acc.hbm_bytes - reserve
    if total <= room:
        return True, f"{fmt_bytes(total)} of {fmt_bytes(room)} used on {acc.name}"
    big = max(memory, key=lambda k: float(np.max(memory[k])))
    share = float(np.max(memory[big])) / total
    return False, (f"{fmt_bytes(total)} needed > {fmt_bytes(room)} of HBM on {acc.name}; "
                   f"largest part: {big} ({share:.0%}). " + _advice(big))


def _advice(part: str) -> str:
    return {
        "parameters": "Shard parameters: ZeRO-3/FSDP, or more tp/pp.",
        "gradients": "Shard gradients: ZeRO-2 or higher, or more tp/pp.",
        "optimizer": "Shard the optimizer state: ZeRO-1 or higher, or more tp/pp.",
        "activations": "Recompute (selective or full), use sequence parallelism, a smaller "
                       "micro-batch, or more tp/cp.",
        "logits": "Use more tp (vocabulary-parallel loss) or a smaller micro-batch.",
        "overhead": "Reduce the fixed allowance.",
    }.get(part, "")
