"""Memory of one device while training a parallel plan: the library's one model of it.

:func:`training_memory_arrays` takes many plans at once (numpy columns, as the planner and
``estimate_arrays`` hold them) and returns the bytes per device by part; the scalar
:func:`training_memory` is it for one :class:`ParallelPlan`. Per device, the busier of the
first pipeline stage (embedding, most micro-batches in flight) and the last (output layer, the
fp32 logits):

- ``parameters``, ``gradients``, ``optimizer``: the stage's share of the model at the recipe's
  bytes per parameter, sharded over the ZeRO group by stage (``states.model_state_bytes``).
- ``gathered parameters`` (ZeRO-3/FSDP): the weights the all-gathers materialise in the compute
  dtype, either two units in flight (the one computing, the one prefetched) when the plan
  re-shards after the forward pass, or the whole stage kept from its first gather to the end of
  the step (``reshard_after_forward=False``).
- ``gradient accumulator`` (ZeRO-2/3 over several micro-batches): an unsharded gradient of the
  stage that accumulates locally until the last micro-batch reduce-scatters it (FSDP's
  ``no_sync``, PyTorch's pipeline stages), instead of a reduce-scatter after every micro-batch
  into the sharded gradient.
- ``activations``: ``activations.activation_bytes`` per layer for the micro-batch, times the
  stage's layers, times the micro-batches in flight (:func:`in_flight_microbatches`); with full
  recomputation plus one layer rebuilt in full.
- ``logits``: two copies of the logits at the loss (fp32 unless ``loss_dtype``), on the last
  stage, for one micro-batch.
- ``communication buffers``: ZeRO-2 reduce buckets, ZeRO-3 reduce-scatter inputs, the hidden
  states a pipeline stage sends on, context-parallel K/V blocks, the sequence-parallel all-gather
  output, the expert all-to-all's send and receive buffers.
- ``runtime reserve``: CUDA context and NCCL's buffers per communicator, outside the allocator.
- ``allocator fragmentation``: a share of the allocated bytes the caching allocator cannot reuse.

Every constant below is sourced; the options say which framework behaviour each choice is.
Left out: the optimizer step's temporaries (fused Adam updates in place), activation and
optimizer offload (``states.offloaded_state_bytes``), expert load imbalance (the MoE terms
assume dropless, balanced routing), and per-tensor allocator rounding.

See: Chapter 6, "Memory for training"; Chapter 13 for the pipeline schedules.
"""

from __future__ import annotations

import numpy as np

from .. import hardware, models
from ..breakdown import Breakdown
from ..plan import RECOMPUTE, ParallelPlan
from ..units import _brief, check_choice, check_count, check_positive, dtype_bytes, fmt_bytes
from .activations import _activation_terms, _check_flag, _recompute_kind, logits_bytes
from .layout import _check_plan, _columns, _in_flight, plan_columns, stage_params
from .states import _recipe

# ---- sourced constants -------------------------------------------------------------------------
# CUDA context of one process (module images, kernel arguments, the driver's own heaps):
# "~700+ MB depending on the CUDA version and device" (PyTorch forum, ptrblck, "High gpu memory
# overhead", discuss.pytorch.org/t/81330), 723 MiB for one tensor (discuss.pytorch.org/t/73021).
CUDA_CONTEXT_BYTES = 0.75e9
# cuBLAS(Lt) workspace PyTorch keeps per handle and stream: 4096 KiB x 8 on Hopper
# (CUBLAS_WORKSPACE_CONFIG default ":4096:8", PyTorch docs "Reproducibility").
CUBLAS_WORKSPACE_BYTES = 8 * 4096 * 1024
# NCCL's channel buffers of one communicator over NVLink: 544 MB for a 2-rank group, 688 MB for
# larger ones (4 A100 + NVLink, NVIDIA/nccl#964); linear in the channel count, and beyond two nodes
# independent of the group size (NVIDIA/nccl#986, a maintainer's answer).
NCCL_BYTES_PER_COMMUNICATOR = 0.688e9
NCCL_BYTES_PER_PAIR_COMMUNICATOR = 0.544e9
# An all-to-all connects every peer: on 8 H100s NCCL's memory rose from 1.06 to 4.34 GB after the
# first all_to_all_single (32 channels per pair, 10 MiB + 2 MiB buffers each; NVIDIA/nccl#1685),
# (4.34 - 1.06) / 7 peers. Peers on other nodes use NCCL_NCHANNELS_PER_NET_PEER = 2 channels
# (NCCL environment docs), 2/32 of that.
NCCL_ALL_TO_ALL_BYTES_PER_PEER = (4.34e9 - 1.06e9) / 7
NET_PEER_CHANNEL_SHARE = 2 / 32
# Megatron-Core's gradient bucket: max(40M, 1M x dp) parameters (DistributedDataParallelConfig
# bucket_size); with ZeRO-2 two buckets are in flight, one reducing while the next fills.
GRAD_BUCKET_PARAMS = 40e6
# Copies of the logits alive at the loss, in the loss's dtype (fp32 under autocast or Megatron's
# vocabulary-parallel cross-entropy): the log-softmax (or softmax, computed in place,
# Korthikanti et al. 2022 section 4.3) kept for the backward pass, plus the cast input in the
# forward pass or the gradient of the logits in the backward pass: two at the peak.
LOSS_COPIES = 2
LOSS_FP32_COPIES = LOSS_COPIES  # the name an earlier version used
# Units FSDP/ZeRO-3 holds gathered when it re-shards after the forward pass: the one computing
# and the one prefetched (PyTorch FSDP's forward/backward prefetch of one unit ahead,
# docs "FSDP Notes: FSDP Prefetch Nuances").
ZERO3_UNITS_IN_FLIGHT = 2
# The caching allocator's blocks it cannot reuse, as a share of the allocated bytes. It depends
# on the allocation pattern, not the hardware: GMLake (Guo et al., ASPLOS 2024) measured the stock
# PyTorch allocator 15% (up to 33%) more fragmented than a stitching allocator over eight LLMs
# whose memory-saving techniques (recomputation, ZeRO-3, offload, LoRA) make allocations
# irregular; pre-training with fixed shapes replays the same allocations every step and reuses
# the same blocks, and its allocation is rounded to 512 B inside 2 MiB / 20 MiB segments
# (CUDACachingAllocator.cpp: kMinBlockSize, kSmallBuffer, kLargeBuffer). The default is that
# static case, 0 (MosaicML's MPT sweeps, whose micro-batches were pushed to the largest that
# ran, fit at 0 and not at 5%: tests/test_memory_published.py); pass 0.15 for irregular
# workloads.
ALLOCATOR_FRAGMENTATION = 0.0
# GPUs per node of an HGX/DGX H100 or A100 (the all-to-all peers reached over NVLink).
DEVICES_PER_NODE = 8

PARTS = ("parameters", "gathered parameters", "gradients", "gradient accumulator", "optimizer",
         "activations", "logits", "communication buffers", "runtime reserve",
         "allocator fragmentation")
GRAD_ACCUMULATION = ("auto", "sharded", "unsharded")


# Parts a Breakdown always shows, even at zero; the others appear only when they hold bytes
# (estimate(...).memory follows the same rule, so both give the same Breakdown).
ALWAYS_SHOWN = ("parameters", "gradients", "optimizer", "activations", "logits")

def _activation_per_token(c, P, T, flash, a, moe, recompute_as=None, selective="attention",
                          fp8_inputs=False):
    """Bytes per token of one layer on each plan's device (dense or MoE layer)."""
    out = np.zeros(len(P["tp"]))
    tp = P["tp"].astype(float)
    for sp in (False, True):
        for r in RECOMPUTE:
            sel = (P["sequence_parallel"] == sp) & (P["recompute_idx"] == RECOMPUTE.index(r))
            if np.any(sel):
                kind = recompute_as or _recompute_kind(r, selective)
                terms = _activation_terms(c, moe, T, tp[sel], sp, kind, flash, a, fp8_inputs)
                out[sel] = sum(np.broadcast_to(v, (int(sel.sum()),)) for v in terms.values())
    return out


def _communication_buffers(c, P, tokens, S, held, unit, o):
    """Bytes of the collectives' own buffers on one device, per plan."""
    tp, pp, cp = (P[k].astype(float) for k in ("tp", "pp", "cp"))
    zero, g_red, a = P["zero"], o["g_red"], o["a"]
    act_mb = tokens * c.D * a  # one micro-batch's hidden states on this device
    # ZeRO-2: two reduce buckets in flight (one reducing while the next fills); ZeRO-3: the
    # unsharded gradients of the units being reduce-scattered
    bucket = np.minimum(np.maximum(GRAD_BUCKET_PARAMS, 1e6 * S), held)
    dp_buf = np.where(zero == 2, 2 * bucket * g_red,
                      np.where(zero >= 3, ZERO3_UNITS_IN_FLIGHT * unit * g_red, 0.0))
    dp_buf = np.where(S > 1, dp_buf, 0.0)
    # the hidden states a stage sends on (the received ones are its first layer's input, already
    # among the activations): one micro-batch's, sharded over tp only with sequence parallelism
    pp_buf = np.where(pp > 1, act_mb / np.where(P["sequence_parallel"], tp, 1.0), 0.0)
    # context parallelism: the gathered K and V of one layer (all-gather), or the block in hand
    # and the one arriving (ring); Ulysses's all-to-alls only reshape what is stored
    kv_mb = 2 * tokens * c.K * c.H * a / np.minimum(tp, c.K)
    variant = P["cp_variant_idx"]  # CP_VARIANTS: allgather, ring, ulysses
    cp_buf = np.where(cp > 1, np.where(variant == 0, kv_mb * cp,
                                       np.where(variant == 1, 2 * kv_mb, 0.0)), 0.0)
    # sequence parallelism: the all-gathered input of the column-parallel linear in use
    sp_buf = np.where(P["sequence_parallel"] & (tp > 1), act_mb, 0.0)
    # expert parallelism: the dispatch all-to-all's send and receive buffers, k copies of the
    # device's tokens each way (its 1/tp share with sequence parallelism)
    ep_buf = np.where(P["ep"] > 1, 2 * c.k * act_mb / np.where(P["sequence_parallel"], tp, 1.0),
                      0.0) if c.is_moe else 0.0
    return dp_buf + pp_buf + cp_buf + sp_buf + ep_buf


def _runtime_reserve(P, S, o):
    """The process's fixed costs outside the allocator: CUDA context, cuBLAS workspace and the
    NCCL communicators of the plan's groups, per plan."""
    tp, pp, cp, ep = (P[k].astype(float) for k in ("tp", "pp", "cp", "ep"))
    pair, comm = NCCL_BYTES_PER_PAIR_COMMUNICATOR, NCCL_BYTES_PER_COMMUNICATOR
    nccl = (np.where(S > 1, np.where(S == 2, pair, comm), 0.0)
            + np.where(P["dp"] * P["cp"] > S, comm, 0.0)  # HSDP's replica all-reduce
            + np.where(tp > 1, np.where(tp == 2, pair, comm), 0.0)
            + np.where(pp > 1, pair, 0.0)
            + np.where(cp > 1, np.where(cp == 2, pair, comm), 0.0))
    near = np.minimum(ep, o["devices_per_node"]) - 1  # all-to-all peers over NVLink
    nccl = nccl + np.where(ep > 1, NCCL_ALL_TO_ALL_BYTES_PER_PEER * (
        near + (ep - 1 - near) * NET_PEER_CHANNEL_SHARE), 0.0)
    return CUDA_CONTEXT_BYTES + CUBLAS_WORKSPACE_BYTES + nccl


def _stage_memory(c, P, m, T, stage, o) -> dict:
    """Parts of one stage's device (``o``: the options, resolved)."""
    tp, pp, cp, ep = (P[k].astype(float) for k in ("tp", "pp", "cp", "ep"))
    zero, b = P["zero"], P["micro_batch"].astype(float)
    # the stage's layers from the plan's pp_layout (the rules table's split; an uneven "even"
    # split, which frameworks refuse, is taken at its busiest stage, rounded up)
    from ..parallelism.rules import stage_layers

    first, _, last = stage_layers(c.L, P["pp"], P["virtual_stages"], P["pp_layout"])
    layers = np.ceil(np.asarray(first if stage == "first" else last, float) - 1e-9)
    s = stage_params(c, tp, pp, ep, stage=stage, stage_layers=layers)
    S = np.where(P["shard_group"] > 0, P["shard_group"], P["dp"] * P["cp"]).astype(float)
    S_e = np.maximum(S / ep, 1.0)
    held = s["dense"] + s["experts"]

    def sharded(bytes_per, z):
        return bytes_per * (np.where(zero >= z, s["dense"] / S, s["dense"])
                            + np.where(zero >= z, s["experts"] / S_e, s["experts"]))

    p_b, g_b, o_b, g_red = o["p_b"], o["g_b"], o["o_b"], o["g_red"]
    # ZeRO-3: the plan's reshard_after_forward (FSDP's option) frees each unit after its forward,
    # two units in flight; without it the stage's gathered weights stay for the step
    # (torchtitan with pipeline stages; the Llama 3 paper, section 3.3.2)
    keep = ~P["reshard_after_forward"] if o["reshard"] is None else np.full(len(tp),
                                                                            not o["reshard"])
    a = o["a"]  # gathered weights are in the compute dtype (FSDP's param_dtype)
    gathered = np.where((zero >= 3) & (S > 1), np.where(keep, a * held,
                                            ZERO3_UNITS_IN_FLIGHT * a * s["unit"]), 0.0)
    # ZeRO-2/3 over m > 1 micro-batches: an unsharded local accumulator ("auto": with pp > 1,
    # PyTorch's pipeline stages skip the gradient sync until the last micro-batch) or a
    # reduce-scatter after each micro-batch into the sharded gradient
    unsharded = np.where(o["grad_accumulation"] == "unsharded", True,
                         np.where(o["grad_accumulation"] == "sharded", False, pp > 1))
    accumulator = np.where((zero >= 2) & (S > 1) & (m > 1) & unsharded, g_red * held, 0.0)

    n, n_moe = s["layers"], s["moe_layers"]
    tokens = b * T / cp
    dense_tok, moe_tok, full_dense, full_moe = o["per_token"]
    stored = ((n - n_moe) * dense_tok + n_moe * moe_tok) * tokens \
        * _in_flight(P, m, stage, o["microbatch_group"])
    working = np.maximum(np.where(n - n_moe > 0, full_dense, 0.0),
                         np.where(n_moe > 0, full_moe, 0.0)) * tokens
    acts = stored + np.where(P["recompute_idx"] == RECOMPUTE.index("full"), working, 0.0)
    holds_loss = (stage == "last") | (pp == 1)
    logits = np.where(holds_loss, logits_bytes(c, b, T / cp, 1, copies=LOSS_COPIES) / tp, 0.0) \
        * o["loss_bytes"] / 4

    comm_buffers = _communication_buffers(c, P, tokens, S, held, s["unit"], o)
    reserve = _runtime_reserve(P, S, o) if o["reserve"] else 0.0 * tp

    # the gradients the optimizer reads: with ZeRO <= 1 the unsharded buffer that is reduced in
    # place (at the reduction width); with ZeRO >= 2 the shards, at the recipe's width
    grads = np.where(zero >= 2, sharded(g_b, 2), sharded(g_red, 2))
    parts = {"parameters": sharded(p_b, 3), "gathered parameters": gathered,
             "gradients": grads, "gradient accumulator": accumulator,
             "optimizer": sharded(o_b, 1), "activations": acts, "logits": logits,
             "communication buffers": comm_buffers}
    allocated = sum(parts.values())
    parts["runtime reserve"] = reserve + 0 * allocated
    parts["allocator fragmentation"] = o["fragmentation"] * allocated
    return parts


def training_memory_arrays(cfg, plans: dict, global_batch, T, *, dtype="bf16",
                           recipe: str = "mixed", optimizer: str = "adam",
                           flash_attention: bool = True, grad_reduce_dtype=None,
                           grad_accumulation: str = "auto", reshard_after_forward=None,
                           fragmentation=ALLOCATOR_FRAGMENTATION,
                           reserve: bool = True, devices_per_node=DEVICES_PER_NODE,
                           selective: str = "attention", loss_dtype="fp32",
                           fp8_linear_inputs: bool = False, microbatch_group=None) -> dict:
    """Bytes per device by part for n plans at once: ``{part: array of shape (n,)}``.

    ``plans``: columns ``dp, tp, pp, cp, ep, zero, micro_batch, virtual_stages`` (ints),
    ``schedule``, ``recompute`` (strings), ``sequence_parallel`` (bools), and optionally the
    other ParallelPlan fields (``layout.OPTIONAL``: ``shard_group``, 0 for all dp·cp ranks and
    HSDP when smaller; ``cp_variant``; ``pp_layout``, "light_ends" for Llama 3 405B's
    7 + 14·8 + 7 layers; ``reshard_after_forward``), which take the ParallelPlan default when
    missing; scalars broadcast. :func:`plan_columns` builds them from ParallelPlans.
    ``global_batch``: sequences per step, so m = global_batch / (dp · micro_batch) micro-batches.
    The parts are those of the module docstring, for the busier of the first and the last
    pipeline stage (by total). The plans are not checked against the model's shape (tp vs heads,
    pp vs layers): :mod:`scaling_lib.parallelism.rules` does that.

    Options (each a framework's behaviour, memory side):
    ``grad_reduce_dtype``: width of the accumulated and reduced gradients ("fp32": Megatron-LM's
    main_grad buffer, the Llama 3 paper's fp32 reduce-scatter, section 3.3.2; default: the
    recipe's). ``grad_accumulation``: with ZeRO-2/3 and m > 1, "sharded" reduce-scatters every
    micro-batch (DeepSpeed ZeRO-2, FSDP's default), "unsharded" keeps a full local accumulator
    until the last one (FSDP ``no_sync``); "auto": unsharded when pp > 1 (PyTorch pipelining).
    ``reshard_after_forward``: None takes each plan's field; True or False overrides it (ZeRO-3:
    True frees each unit after its forward and gathers it again for the backward and every
    micro-batch; False keeps the stage's weights from the first gather to the end of the step,
    as torchtitan does with pipeline stages). ``fragmentation``: the allocator's share;
    ``reserve``: count the CUDA context and NCCL buffers. ``selective``: which selective
    recomputation ("attention": Megatron-LM's; "matmuls": torchtitan's per-op policy; see
    :func:`~scaling_lib.memory.activations.activation_bytes`). ``loss_dtype``: the dtype the
    loss holds its logits in ("fp32" under autocast or Megatron; "bf16" when the model runs
    purely in bf16, as FSDP's PURE mixed precision). ``fp8_linear_inputs``: fp8 training with
    Transformer Engine keeps each linear layer's input in fp8 for its weight gradient (the norm
    outputs and the MLP's down-projection input at 1 byte, plus an fp8 copy of the attention
    output); ``dtype="fp8"`` instead stores every activation in 1 byte (a lower bound).
    ``microbatch_group``: micro-batches per group of the interleaved schedule (default pp; see
    :func:`~scaling_lib.memory.layout.in_flight_microbatches`).

    >>> r = training_memory_arrays("llama3-8b", plan_columns([ParallelPlan(dp=8, zero=1)]), 8,
    ...                            4096)
    >>> sorted(r) == sorted(PARTS)
    True
    """
    c = models.get(cfg)
    P = _columns(plans)
    T = float(check_count("T", T))
    B = np.asarray(check_count("global_batch", global_batch), float)
    _check_flag("flash_attention", flash_attention)
    _check_flag("reserve", reserve)
    check_choice("grad_accumulation", grad_accumulation, GRAD_ACCUMULATION)
    _recompute_kind("selective", selective)  # a known policy
    _check_flag("fp8_linear_inputs", fp8_linear_inputs)
    if microbatch_group is not None:
        check_count("microbatch_group", microbatch_group)
    if reshard_after_forward is not None:
        _check_flag("reshard_after_forward", reshard_after_forward)
    frag = float(check_positive("fragmentation", fragmentation, allow_zero=True))
    if frag >= 1:
        raise ValueError(f"fragmentation={fragmentation!r} is a share of the allocated bytes; "
                         "choose a value in [0, 1)")
    p_b, g_b, o_b = _recipe(recipe, optimizer)
    g_red = g_b if grad_reduce_dtype is None else dtype_bytes(grad_reduce_dtype)
    m = B / (P["dp"] * P["micro_batch"])
    opts = dict(p_b=p_b, g_b=g_b, o_b=o_b, g_red=g_red, a=dtype_bytes(dtype),
                loss_bytes=dtype_bytes(loss_dtype), microbatch_group=microbatch_group,
                flash=flash_attention, reshard=reshard_after_forward,
                grad_accumulation=grad_accumulation, fragmentation=frag, reserve=reserve,
                devices_per_node=check_count("devices_per_node", devices_per_node))
    # bytes per token of one layer: stored (dense, MoE) and rebuilt in full (dense, MoE)
    a, zero = opts["a"], np.zeros(len(m))
    opts["per_token"] = tuple(
        _activation_per_token(c, P, T, flash_attention, a, moe, r, selective,
                              fp8_linear_inputs)
        if (c.is_moe or not moe)
        else zero for r in (None, "none") for moe in (False, True))
    first = _stage_memory(c, P, m, T, "first", opts)
    last = _stage_memory(c, P, m, T, "last", opts)
    pick_last = sum(last.values()) > sum(first.values())
    return {k: np.where(pick_last, last[k], first[k]) for k in PARTS}


def training_memory(cfg, plan: ParallelPlan | None = None, B=None, T=2048, *,
                    recipe: str = "mixed", optimizer: str = "adam", flash_attention: bool = True,
                    dtype="bf16", overhead_bytes=0.0, grad_reduce_dtype=None,
                    grad_accumulation: str = "auto", reshard_after_forward=None,
                    fragmentation=ALLOCATOR_FRAGMENTATION,
                    reserve: bool = True, devices_per_node=DEVICES_PER_NODE,
                    selective: str = "attention", loss_dtype="fp32",
                    fp8_linear_inputs: bool = False, microbatch_group=None) -> Breakdown:
    """Memory of one device while training, by part: :func:`training_memory_arrays` for one plan.

    Parts (bytes): ``parameters``, ``gradients``, ``optimizer`` (the stage's share at the
    recipe's bytes per parameter, sharded over the ZeRO group by stage), ``activations``
    (per layer, times the stage's layers, times the micro-batches in flight), ``logits`` (fp32,
    last stage), and the terms people forget: ``gathered parameters`` and ``gradient
    accumulator`` (ZeRO-3 / ZeRO-2), ``communication buffers``, ``runtime reserve`` (CUDA
    context, NCCL) and ``allocator fragmentation``; a part that is zero for this plan is left
    out. ``overhead_bytes``: any allowance of your own, shown as ``overhead`` when > 0.
    ``reserve=False, fragmentation=0`` leaves the textbook's tensors only.
    Activations scale with the micro-batch, not the global batch B: gradient accumulation runs
    the B / (dp · micro_batch) micro-batches one after another (with ZeRO-2/3 it may cost an
    unsharded gradient accumulator: see ``grad_accumulation``).

    Args: cfg, plan (ParallelPlan; default one device), B (global batch in sequences; default
    dp · micro_batch), T (sequence length). Broadcasts over T. Options as
    :func:`training_memory_arrays`.

    >>> mem = training_memory("llama3-8b", ParallelPlan(), 1, 4096, reserve=False,
    ...                       fragmentation=0)
    >>> round(mem["parameters"] / 1e9, 1), round(mem.total / 1e9)
    (16.1, 151)
    """
    c = models.get(cfg)
    plan = ParallelPlan() if plan is None else plan
    _check_plan(plan)
    if B is None:
        B = plan.dp * plan.micro_batch
    plan.n_microbatches(B)  # B must be a multiple of dp · micro_batch
    overhead = check_positive("overhead_bytes", overhead_bytes, allow_zero=True)
    Ts = np.asarray(check_count("T", T, sweep=True))
    from ..parallelism import rules  # the one table of what a plan must obey

    for t in np.unique(Ts):
        rules.check(c, plan, B, int(t), kinds=("shape",))
    cols = plan_columns([plan])
    kw = dict(dtype=dtype, recipe=recipe, optimizer=optimizer, flash_attention=flash_attention,
              grad_reduce_dtype=grad_reduce_dtype, grad_accumulation=grad_accumulation,
              reshard_after_forward=reshard_after_forward,
              fragmentation=fragmentation, reserve=reserve, devices_per_node=devices_per_node,
              selective=selective, loss_dtype=loss_dtype,
              fp8_linear_inputs=fp8_linear_inputs, microbatch_group=microbatch_group)
    rows = [training_memory_arrays(c, cols, B, float(t), **kw) for t in Ts.ravel()]
    parts = {}
    for k in PARTS:
        v = np.array([float(r[k][0]) for r in rows]).reshape(Ts.shape)
        if np.any(v > 0) or k in ALWAYS_SHOWN:
            # a part that does not change with T (the model states) stays a number
            parts[k] = float(v.flat[0]) if v.ndim == 0 or np.all(v == v.flat[0]) else v
    if np.any(overhead > 0):
        parts["overhead"] = overhead
    return Breakdown(parts, unit="bytes")


def _first_stage_params(c, plan: ParallelPlan) -> tuple[float, float, int, int]:
    """(non-expert params, expert params) on one device of the first pipeline stage, before
    ZeRO; and that stage's (dense layers, MoE layers). :func:`stage_params` for one plan."""
    s = stage_params(c, plan.tp, plan.pp, plan.ep)
    n, n_moe = int(s["layers"]), int(s["moe_layers"])
    return float(s["dense"]), float(s["experts"]), n - n_moe, n_moe


def check_fit(memory: Breakdown, accelerator, *, reserve_bytes=0.0) -> tuple[bool, str]:
    """Whether a per-device memory Breakdown fits in the accelerator's HBM, and why not.

    The room is what the driver reports (``Accelerator.memory_capacity_bytes``: 81,559 MiB on an
    H100 "80 GB") less ``reserve_bytes``.

    >>> ok, why = check_fit(training_memory("llama3-8b", ParallelPlan(), 1, 4096), "h100")
    >>> ok, why.split(";")[0]
    (False, '152 GB needed > 85.5 GB of HBM on h100')
    """
    if not isinstance(memory, Breakdown):
        raise ValueError(f"memory={_brief(memory)} must be a Breakdown of bytes "
                         "(training_memory(...) returns one)")
    acc = hardware.get(accelerator)
    reserve = check_positive("reserve_bytes", reserve_bytes, allow_zero=True)
    total = float(np.max(memory.total))
    room = acc.memory_capacity_bytes - reserve  # what the driver reports, not the datasheet's GB
    if total <= room:
        return True, f"{fmt_bytes(total)} of {fmt_bytes(room)} used on {acc.name}"
    big = max(memory, key=lambda k: float(np.max(memory[k])))
    share = float(np.max(memory[big])) / total
    return False, (f"{fmt_bytes(total)} needed > {fmt_bytes(room)} of HBM on {acc.name}; "
                   f"largest part: {big} ({share:.0%}). " + _advice(big))


def _advice(part: str) -> str:
    return {
        "parameters": "Shard parameters: ZeRO-3/FSDP, or more tp/pp.",
        "gathered parameters": "Re-shard after the forward pass, or more tp/pp.",
        "gradients": "Shard gradients: ZeRO-2 or higher, or more tp/pp.",
        "gradient accumulator": "Reduce-scatter every micro-batch (sharded accumulation), or "
                                "fewer micro-batches.",
        "optimizer": "Shard the optimizer state: ZeRO-1 or higher, or more tp/pp.",
        "activations": "Recompute (selective or full), use sequence parallelism, a smaller "
                       "micro-batch, or more tp/cp.",
        "logits": "Use more tp (vocabulary-parallel loss) or a smaller micro-batch.",
        "overhead": "Reduce the fixed allowance.",
    }.get(part, "")
