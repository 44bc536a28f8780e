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
config (GQA, gated MLP, MoE, MLA, no dropout, FlashAttention), and reduces to those formulas.

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
                         flash_attention: bool = False, cp=1, dtype="bf16") -> Breakdown:
    """Activation bytes of one layer on one device, by term (averaged over layers for MoE
    models whose first layers are dense). Args as :func:`activation_bytes`.

    >>> b = activation_breakdown("gpt3-175b", 1, 2048)
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
                     flash_attention: bool = False, cp=1, dtype="bf16"):
    """Activation bytes one layer keeps for the backward pass, per device.

    Korthikanti et al. 2022 (section 4), generalised: per token, the norm inputs, the inputs
    of the QKV and MLP matmuls and dropout masks (10·h bytes for GPT; sharded over t only with
    ``sequence_parallel``), Q, K, V, the attention output and the MLP hidden activations
    (24·h/t), and the attention scores (5·a·s/t with dropout: softmax output, mask, dropout
    output). ``recompute="selective"`` drops the scores, ``"full"`` keeps only the layer input
    (2·s·b·h, or /t with sequence parallelism). ``flash_attention`` never stores the scores
    (only a 4-byte log-sum-exp per head and row). ``cp`` splits the T tokens over
    context-parallel ranks (scores still span all T keys). Broadcasts over B, T and tp.

    Args: cfg, B (micro-batch, sequences), T (tokens), tp (tensor-parallel degree),
    dtype (activation format; masks take 1 byte).

    >>> c = models.gpt(96, 12288, 96)   # GPT-3 175B shape, s = 2048, b = 1
    >>> activation_bytes(c, 1, 2048) == 2048 * 12288 * (34 + 5 * 96 * 2048 / 12288)
    True
    >>> sel = activation_bytes(c, 1, 2048, "selective", tp=8, sequence_parallel=True)
    >>> sel == 2048 * 12288 * 34 / 8
    True
    """
    return activation_breakdown(cfg, B, T, recompute, tp, sequence_parallel,
                                flash_attention=flash_attention, cp=cp, dtype=dtype).total


def checkpointed_activation_bytes(cfg, B, T, every, *, tp=1, sequence_parallel=False,
                                  flash_attention: bool = False, dtype="bf16"):
    """Peak activation bytes with a checkpoint (a layer input) kept every ``every`` layers.

    M(c) = ⌈L/c⌉ · m_ckpt + c · m_layer: the stored checkpoints plus one segment of c layers
    whose activations are rebuilt, from its checkpoint, while it is back-propagated. The
    recompute is one extra forward pass whatever c is; memory is smallest near
    c = √(L · m_ckpt / m_layer). c = 1 is full recomputation's layout (plus one layer's
    working set), c = L stores everything once. Broadcasts over ``every``.

    >>> m = checkpointed_activation_bytes("llama3-8b", 1, 4096, np.array([1, 4, 32]))
    >>> [round(float(x) / 1e9, 1) for x in m]  # GB: a layer's input is small, so c = 1 wins
    [2.7, 6.8, 52.6]
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
                    recipe: str = "mixed", optimizer: str = "adam", flash_attention: bool = False,
                    dtype="bf16", overhead_bytes=0.0) -> Breakdown:
    """Memory of one device (the first pipeline stage) while training, by part.

    ``parameters``, ``gradients``, ``optimizer``: the stage's share of the model (layers
    ⌈L/p⌉, attention and MLPs split t ways, experts e·t ways, embeddings vocabulary-parallel),
    at the recipe's bytes per parameter, sharded over the ZeRO group by stage (see
    :func:`model_state_bytes`). ``activations``: :func:`activation_bytes` for the plan's
    micro-batch, recomputation, tp and sequence parallelism, times the layers on the stage,
    times :func:`in_flight_microbatches`; with full recomputation, plus one layer's full
    activations (the layer being back-propagated is rebuilt from its checkpoint). ``logits``: the fp32 logits the loss keeps
    (4·b·T·V/t bytes, Korthikanti et al. 2022), on this device only when pp = 1.
    ``overhead``: any fixed allowance you pass (CUDA context, buffers), shown when > 0.
    Left out: gathered-parameter and communication buffers, fragmentation.

    Args: cfg, plan (ParallelPlan; default one device), B (global batch in sequences; default
    dp · micro_batch), T (sequence length). Broadcasts over T.

    >>> mem = training_memory("llama3-8b", ParallelPlan(), 1, 4096)
    >>> round(mem["parameters"] / 1e9, 1), round(mem.total / 1e9)
    (16.1, 183)
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
    logits = 4.0 * plan.micro_batch * T / plan.cp * c.V / plan.tp if plan.pp == 1 else 0.0 * T
    parts = {"parameters": sharded(p_b, 3), "gradients": sharded(g_b, 2),
             "optimizer": sharded(o_b, 1), "activations": _out(acts), "logits": _out(logits)}
    overhead = check_positive("overhead_bytes", overhead_bytes, allow_zero=True)
    if np.any(overhead > 0):
        parts["overhead"] = overhead
    return Breakdown(parts, unit="bytes")


def check_fit(memory: Breakdown, accelerator, *, reserve_bytes=0.0) -> tuple[bool, str]:
    """Whether a per-device memory Breakdown fits in the accelerator's HBM, and why not.

    >>> ok, why = check_fit(training_memory("llama3-8b", ParallelPlan(), 1, 4096), "h100")
    >>> ok, why.split(";")[0]
    (False, '183 GB needed > 80 GB of HBM on h100')
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
