"""Step time, memory and utilisation of any parallel plan: ``estimate`` and ``estimate_arrays``.

The planner's cost model. One training step of ``global_batch`` sequences of T tokens on one
device of a (dp, tp, pp, cp, ep) plan is

    step = busy + bubble + exposed communication + optimizer

- busy: the m = global_batch / (dp · micro_batch) micro-batches of the slowest pipeline stage,
  each a forward, a backward (twice the forward's matmuls) and the recomputed forward
  ("full": every layer again, "selective": attention's QKᵀ, softmax and AV). Each kernel is
  timed on the accelerator as a *roofline sum*: a matmul [M, K] x [K, N] takes
  2MNK / (η_c · C) + a·(MK + KN + MN) / (η_m · W_HBM), so thin matmuls (small D/tp, short
  micro-batches) lose efficiency for the physical reason (they move as many bytes as they
  compute); element-wise kernels (norms, GeLU, dropout, softmax, the fp32 loss) take their
  bytes over η_m · W_HBM; no kernel is shorter than the host's dispatch time τ.
- bubble: ``pipeline_bubble_fraction`` of the schedule, (p - 1) / (v·m + p - 1) of the step.
- communication: tensor-parallel all-reduces (or SP's all-gather + reduce-scatter), pipeline
  sends and expert all-to-alls are on the critical path; data-parallel gradient reduction is
  hidden under the last micro-batch's backward except its last bucket (``overlap_grad_reduce``,
  as Megatron-Core, FSDP and DDP do; False: after the backward, as Megatron-DeepSpeed's pipeline
  engine); ZeRO-3 gathers and ring-attention (cp) exchanges hide under compute where they can.
  Every collective is timed on the links its group crosses (NVLink inside a node, the scale-out
  NICs across nodes) at a fraction of line rate (η_nvlink, η_net) plus a per-step latency.
- optimizer: Adam's update, memory-bound: ``ADAM_BYTES_PER_PARAM`` bytes over HBM for each
  parameter of the local shard, plus ZeRO's all-gather of the updated weights.

The few constants that are not datasheet numbers live in :class:`Calibration`, each a physical
quantity (a fraction of a peak, a time), fitted once on measured A100 runs
(:mod:`scaling_lib.validation`) and carried unchanged to other accelerators through their own
peaks and bandwidths.

Left out: overlap of tensor-parallel communication with compute (Megatron's TP comm overlap),
stragglers and network congestion between jobs, and load imbalance among experts.

See: the chapters "Planning a training run" and "Validating the planner".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import numpy as np

from .. import hardware, memory as _memory, models, transformer
from ..breakdown import Breakdown
from ..units import _brief, check_count, dtype_bytes
from .plan import RECOMPUTE, SCHEDULES, ParallelPlan, check_plan, pipeline_bubble_fraction

# Adam with mixed precision, bytes of HBM traffic per parameter of the local shard: read the
# fp32 gradient (4), read and write the fp32 master weight (8) and both moments (16), write the
# bf16 weight (2), and read the gradient once more for the global norm (4): 34.
ADAM_BYTES_PER_PARAM = 34.0
# The fp32 cross-entropy over the logits, HBM bytes per logit, as Megatron's vocabulary-parallel
# loss runs it (one op per step): forward cast to fp32 (2 + 4), max (4), subtract (4 + 4),
# exp (4 + 4), sum (4), divide into the saved softmax (4 + 4); backward scale the softmax by the
# incoming gradient (4 + 4), cast back to 16 bits (4 + 2): 52.
LOSS_BYTES_PER_LOGIT = 52.0
# Output tile of one SM in a tensor-core matmul (cuBLAS/CUTLASS's common 128 x 128 for 16-bit
# inputs on A100 and H100); the output splits into tiles, run in waves of one per SM.
GEMM_TILE = 128
# Backward of a memory-bound kernel over its forward, in bytes: a norm or GeLU reads the
# gradient and the saved input and writes a gradient (6 bytes per element against 4), a dropout
# reads the gradient and the mask (5 against 5), a residual add passes gradients on (about 0.7):
# about 1.25 on average for a transformer layer.
BACKWARD_STREAM_FACTOR = 1.25
# The dense gradient of the embedding lookup (PyTorch's default, as Megatron uses it), bytes per
# embedding parameter and micro-batch: zero-fill (2), scatter-add (2 + 2), accumulate into the
# fp32 gradient (4 + 4), read back (2): 16.
EMBEDDING_GRAD_BYTES_PER_PARAM = 16.0
# Kernels of the output layer, the loss and the embedding per micro-batch (forward, backward).
HEAD_KERNELS = 25
# Megatron-Core's default gradient bucket (40M parameters) in bf16 bytes; DDP's is 25 MB.
GRAD_BUCKET_BYTES = 80e6
# Fixed memory a training process holds besides tensors: CUDA context and cuBLAS workspaces
# (about 0.5-1 GB per device), NCCL's channel buffers (a few hundred MB per communicator):
# an allowance, as in the memory chapter's timeline.
FRAMEWORK_RESERVE_BYTES = 2e9
# The caching allocator rounds and fragments: a share of the allocated bytes it cannot reuse.
ALLOCATOR_FRAGMENTATION = 0.05
PLAN_FIELDS = ("dp", "tp", "pp", "cp", "ep", "zero", "micro_batch", "virtual_stages",
               "schedule", "recompute", "sequence_parallel")
OUTPUTS = ("step_time", "compute_time", "exposed_comm_time", "bubble_time", "optimizer_time",
           "memory_bytes", "fits", "mfu", "hfu", "tokens_per_s")


@dataclass(frozen=True)
class Calibration:
    """The estimator's few fitted constants, each a physical quantity that transfers.

    ``gemm_efficiency`` η_c: fraction of the dense peak a large matmul reaches (cuBLAS on big
    shapes). ``hbm_efficiency`` η_m: fraction of HBM bandwidth a streaming kernel reaches.
    ``gemm_k_half`` K½: the inner dimension at which a matmul's compute efficiency halves
    (each output tile's fixed prologue and epilogue against its K-loop); 0 turns it off (the
    vTrain fit drove it to 0: its shapes do not show the effect).
    ``kernel_time`` τ (s): host time to dispatch one kernel (PyTorch eager, the framework's
    Python, the launch): a layer takes at least its kernels' count times τ.
    ``nvlink_efficiency`` and ``network_efficiency``: fraction of the one-way line rate NCCL
    reaches on large messages inside and across nodes. ``nvlink_latency`` and
    ``network_latency`` (s): time of one step of a collective's schedule inside a node and
    across nodes (NCCL's protocol, the NIC and switches), replacing the clusters' nominal
    hop latencies.
    ``step_overhead`` (s): per-step host work outside the kernels (data loader, logging,
    the loss scaler's checks).
    """

    # Defaults: fitted by scaling_lib.validation.fit on the even rows of the vTrain A100
    # measurements (Megatron-DeepSpeed, fp16), within physical bounds, rounded; see the chapter
    # "Validating the planner". The NCCL efficiencies sit at the low end of their range (60%).
    gemm_efficiency: float = 0.815
    gemm_k_half: float = 0.0
    hbm_efficiency: float = 0.670
    kernel_time: float = 46.8e-6
    nvlink_efficiency: float = 0.60
    nvlink_latency: float = 24.7e-6
    network_efficiency: float = 0.60
    network_latency: float = 50e-6
    step_overhead: float = 0.9e-3

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if not isinstance(v, (int, float, np.floating)) or not math.isfinite(v) or v < 0:
                raise ValueError(f"{f.name}={_brief(v)} must be a finite number >= 0")
        for name in ("gemm_efficiency", "hbm_efficiency", "nvlink_efficiency",
                     "network_efficiency"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name}={getattr(self, name)!r} is a fraction of a peak; "
                                 "choose a value in (0, 1]")


DEFAULT_CALIBRATION = Calibration()


@dataclass(frozen=True)
class CommEstimate:
    """One kind of communication of a step: seconds in all and the part compute does not hide."""

    name: str
    axis: str
    kind: str
    group_size: int
    time: float
    exposed: float


@dataclass(frozen=True)
class StepEstimate:
    """The estimate of one plan's training step (seconds, bytes, fractions)."""

    plan: ParallelPlan
    step_time: float
    compute_time: float
    exposed_comm_time: float
    bubble_time: float
    optimizer_time: float
    memory: Breakdown
    fits: bool
    mfu: float
    hfu: float
    tokens_per_s: float
    comms: tuple = field(default=())

    @property
    def breakdown(self) -> dict:
        """Seconds of compute, exposed communication, bubble and optimizer (they sum to the step,
        with the per-step host overhead)."""
        return {"compute": self.compute_time, "exposed communication": self.exposed_comm_time,
                "bubble": self.bubble_time, "optimizer": self.optimizer_time}


# ---- kernels on one accelerator -----------------------------------------------------------------
def wave_efficiency(M, N, batch, n_units):
    """Share of a GPU's SMs a matmul keeps busy: its output splits into ceil(M/128)·ceil(N/128)
    tiles per batch entry (``GEMM_TILE``, the usual tensor-core tile), run in waves of n_units
    (one tile per SM at a time), so tiles / (waves · n_units). 1 when ``n_units`` is 0 (TPUs:
    one large matrix unit per core, no waves). Broadcasts.

    >>> float(wave_efficiency(1024, 384, 1, 108))  # 8 x 3 = 24 tiles on 108 SMs
    0.2222222222222222
    """
    if not n_units:
        return np.ones(np.broadcast(M, N, batch).shape)
    tiles = np.ceil(M / GEMM_TILE) * np.ceil(N / GEMM_TILE) * np.ceil(batch)
    return tiles / (np.ceil(tiles / n_units) * n_units)


def _n_units(acc) -> int:
    return int(getattr(acc.internals, "n_sm", 0) or 0)


def _gemm_time(M, K, N, batch, acc, a, cal):
    """GPU seconds of ``batch`` matmuls [M, K] x [K, N]: FLOPs at η_c·C times the share of SMs
    the tiles keep busy (:func:`wave_efficiency`) times K / (K + K½) (each tile's prologue and
    epilogue are a fixed cost its K-loop amortises: efficiency halves at K = K½), plus bytes at
    η_m·W (a roofline sum: thin matmuls pay for their bytes). Broadcasts."""
    flops = 2.0 * M * K * N * batch
    nbytes = a * (M * K + K * N + M * N) * batch
    wave = wave_efficiency(M, N, batch, _n_units(acc))
    depth = K / (K + cal.gemm_k_half)  # each output tile's fixed cost amortised over K
    return flops / (cal.gemm_efficiency * wave * depth * acc.peak_flops_per_s(_dt(a))) \
        + nbytes / (cal.hbm_efficiency * acc.hbm_bytes_per_s)


def matmul_time(M, K, N, accelerator, *, dtype="bf16", calibration=None):
    """Seconds of one matmul [M, K] x [K, N] on ``accelerator``, the estimator's roofline sum

        t = 2MNK / (η_c · w · d · C) + a·(MK + KN + MN) / (η_m · W_HBM)

    with η_c, η_m from ``calibration`` (default: the library's), w the share of SMs its tiles
    keep busy (:func:`wave_efficiency`), d = K / (K + K½), C the dense peak in ``dtype`` and a
    its bytes per element. Broadcasts over M, K, N.

    >>> t = matmul_time(8192, 8192, 8192, "h100")
    >>> round(float(2 * 8192**3 / t / 989.4e12), 2)  # share of the peak: η_c, waves, bytes
    0.7
    """
    acc = hardware.get(accelerator)
    cal = DEFAULT_CALIBRATION if calibration is None else calibration
    return _gemm_time(np.asarray(M, float), np.asarray(K, float), np.asarray(N, float), 1, acc,
                      dtype_bytes(dtype), cal)


def _stream_time(nbytes, acc, cal, n_kernels=1):
    """GPU seconds of memory-bound kernels moving ``nbytes`` in all."""
    return nbytes / (cal.hbm_efficiency * acc.hbm_bytes_per_s)


def _host_bound(gpu_time, n_kernels, cal):
    """A sequence of kernels takes the longer of the GPU's work and the host's dispatch of
    them, n_kernels · τ (the host runs ahead of the GPU asynchronously, so the two overlap)."""
    return np.maximum(gpu_time, n_kernels * cal.kernel_time)


def _dt(a):
    return {1: "fp8", 2: "bf16", 4: "fp32"}.get(int(a), "bf16")


def _layer_times(c, acc, a, cal, M, b, T_q, tp, sp, flash, causal):
    """Forward GPU seconds of one layer on one device for a micro-batch of M = b·T_q tokens,
    split into matmuls and memory-bound (streaming) kernels: a dict of arrays ``dense``,
    ``moe`` and ``core`` (attention's QKᵀ, softmax and AV alone), each a (matmul, stream) pair.
    """
    H, N, K, D = c.H, c.N, c.K, c.D
    Nl = N / tp
    Kl = np.maximum(K / tp, 1.0)
    attn_lin = _gemm_time(M, D, (Nl + 2 * Kl) * H, 1, acc, a, cal) \
        + _gemm_time(M, Nl * H, D, 1, acc, a, cal)
    # attention core: b·N/tp heads of QKᵀ [T, H]x[H, T] and AV [T, T]x[T, H]
    T_kv = T_q  # ring attention: each step sees T/cp keys; cp steps in all (counted by caller)
    frac = 0.5 if causal else 1.0
    core_g = 2 * _gemm_time(T_q, H, T_kv, b * Nl * frac, acc, a, cal)
    mask = 1.0 if c.dropout else 0.0
    core_s = 0.0 * M
    if not flash:  # scaled-masked softmax (read, write), dropout (read, write, 1-byte mask)
        core_s = _stream_time(b * Nl * T_q * T_kv * frac * (2 * a + mask * (2 * a + 1)), acc, cal)
    rep = np.where(sp, 1.0 / tp, 1.0)
    # two norms (read, write), two bias-dropout-residual adds (x, residual, out, mask)
    elem = _stream_time(M * D * rep * (2 * 2 * a + 2 * (3 * a + mask)), acc, cal)
    n_up = 2 if c.glu else 1
    mlp_g = _gemm_time(M, D, n_up * c.F / tp, 1, acc, a, cal) \
        + _gemm_time(M, c.F / tp, D, 1, acc, a, cal)
    mlp_s = _stream_time(M * c.F / tp * (n_up + 1) * a, acc, cal)  # activation function
    out = {"dense": (attn_lin + core_g + mlp_g, core_s + elem + mlp_s), "core": (core_g, core_s)}
    if not c.is_moe:
        out["moe"] = out["dense"]
        return out
    # routed experts: this device's E/ep experts get M·k tokens in all (balanced routing)
    Fe = c.F_e
    tok = M * c.k
    e_g = _gemm_time(tok, D, n_up * Fe / tp, 1, acc, a, cal) + \
        _gemm_time(tok, Fe / tp, D, 1, acc, a, cal) + _gemm_time(M, D, c.E, 1, acc, a, cal)
    e_s = _stream_time(tok * Fe / tp * (n_up + 1) * a, acc, cal)
    shared = c.n_shared_experts * Fe / c.F
    out["moe"] = (attn_lin + core_g + e_g + shared * mlp_g, core_s + elem + e_s + shared * mlp_s)
    return out


# ---- communication ------------------------------------------------------------------------------
def _links(cluster, cal):
    """(intra-node bytes/s, latency, inter-node bytes/s, latency, devices per node)."""
    intra = cluster.intra_node
    w_in = intra.bytes_per_s if cluster.topology in ("switch", "ring") else intra.bytes_per_s / 2
    return (w_in * cal.nvlink_efficiency, cal.nvlink_latency,
            cluster.inter_node.bytes_per_s * cal.network_efficiency, cal.network_latency,
            cluster.devices_per_node)


def _switch_time(kind, V, n, W, latency):
    """Alpha-beta time of one collective on a switch, the terms of
    :func:`scaling_lib.collectives.cost_terms` (s steps, b bytes per array byte) inlined for
    speed on arrays: all-gather and reduce-scatter s = n - 1, b = (n - 1)/n; all-reduce twice
    both; all-to-all s = n - 1, b = (n - 1)/n². tests/test_estimate.py checks they agree."""
    n = np.asarray(n, dtype=float)
    s = n - 1
    b = (n - 1) / n
    if kind == "all-reduce":
        s, b = 2 * s, 2 * b
    elif kind == "all-to-all":
        b = b / n
    return s * latency + b * V / W


def _coll_time(kind, V, g, stride, links):
    """Seconds of one collective of the full array V over groups of g devices whose members are
    ``stride`` apart, m of them per node: a reduce-scatter inside each node, the collective
    across the k = g/m nodes on V/m, an all-gather back
    (:func:`scaling_lib.collectives.hierarchical_schedule`). Broadcasts."""
    w_in, l_in, w_out, l_out, per_node = links
    g = np.asarray(g, dtype=float)
    m = np.clip(np.floor(per_node / np.maximum(stride, 1)), 1, None)
    m = np.minimum(m, g)
    m = np.where(g % m == 0, m, 1.0)
    k = g / m
    V = np.asarray(V, dtype=float)
    if kind == "all-reduce":
        t_in = 2 * _switch_time("all-gather", V, m, w_in, l_in)
        t_out = _switch_time("all-reduce", V / m, k, w_out, l_out)
    elif kind in ("all-gather", "reduce-scatter"):
        t_in = _switch_time(kind, V, m, w_in, l_in)
        t_out = _switch_time(kind, V / m, k, w_out, l_out)
    elif kind == "all-to-all":
        t_in = _switch_time(kind, V / k, m, w_in, l_in)
        t_out = _switch_time(kind, V / m, k, w_out, l_out)
    else:  # collective-permute: V bytes to a neighbour, across nodes when stride fills a node
        cross = np.asarray(stride) >= per_node
        t_in = np.where(cross, 0.0, l_in + V / w_in)
        t_out = np.where(cross, l_out + V / w_out, 0.0)
    return np.where(g > 1, t_in + t_out, 0.0)


# ---- the vectorised estimate --------------------------------------------------------------------
def _plans(plans: dict) -> dict:
    missing = [k for k in PLAN_FIELDS if k not in plans]
    if missing:
        raise ValueError(f"plans is missing {missing}; it needs arrays {', '.join(PLAN_FIELDS)}")
    out = {k: np.asarray(plans[k]) for k in PLAN_FIELDS}
    n = {v.shape for v in out.values()}
    if len(n) != 1 or len(next(iter(n))) != 1:
        raise ValueError(f"plans must hold equal-length 1-D arrays, got shapes {sorted(n)}")
    for k in PLAN_FIELDS[:8]:
        out[k] = out[k].astype(np.int64)
        if np.any(out[k] < (0 if k == "zero" else 1)):
            raise ValueError(f"plans[{k!r}] must hold positive integers")
    for k, valid in (("schedule", SCHEDULES), ("recompute", RECOMPUTE)):
        bad = sorted(set(out[k].tolist()) - set(valid))
        if bad:
            raise ValueError(f"plans[{k!r}] holds {bad}; valid choices: {', '.join(valid)}")
    out["sequence_parallel"] = out["sequence_parallel"].astype(bool)
    return out


def estimate_arrays(cfg, cluster, plans: dict, global_batch, T, *, dtype="bf16",
                    calibration=None, flash_attention=True, causal=True,
                    overlap_grad_reduce=True, recipe="mixed", detail=False) -> dict:
    """Step time, memory and utilisation of n plans at once (numpy arrays of shape (n,)).

    ``plans`` holds equal-length arrays ``dp, tp, pp, cp, ep, zero, micro_batch,
    virtual_stages`` (ints), ``schedule`` and ``recompute`` (strings) and
    ``sequence_parallel`` (bools). Returns arrays ``step_time, compute_time,
    exposed_comm_time, bubble_time, optimizer_time`` (s), ``memory_bytes`` (the busiest
    device), ``fits``, ``mfu``, ``hfu`` (fractions) and ``tokens_per_s``. The plans are not
    checked for validity (divisibility, world size): the planner filters them.
    ``flash_attention``: fused attention (no T x T scores in HBM); ``causal``: the kernel skips
    the masked half. ``detail`` adds the per-collective times and the memory parts.

    >>> p = {k: np.array([v]) for k, v in dict(dp=8, tp=1, pp=1, cp=1, ep=1, zero=0,
    ...      micro_batch=1, virtual_stages=1, schedule="1f1b", recompute="none",
    ...      sequence_parallel=False).items()}
    >>> r = estimate_arrays("llama3-8b", hardware.cluster("h100", 8), p, 64, 4096)
    >>> 0.3 < float(r["mfu"][0]) < 0.7
    True
    """
    c = models.get(cfg)
    cluster = hardware.get_cluster(cluster)
    acc = cluster.accelerator
    cal = DEFAULT_CALIBRATION if calibration is None else calibration
    if not isinstance(cal, Calibration):
        raise ValueError(f"calibration={_brief(cal)} must be a Calibration")
    P = _plans(plans)
    T = check_count("T", T)
    B = check_count("global_batch", global_batch)
    a = dtype_bytes(dtype)
    dp, tp, pp, cp, ep, zero = (P[k].astype(float) for k in ("dp", "tp", "pp", "cp", "ep",
                                                             "zero"))
    b, v = P["micro_batch"].astype(float), P["virtual_stages"].astype(float)
    sp, rec = P["sequence_parallel"], P["recompute"]
    m = np.maximum(np.floor(B / (dp * b)), 1.0)  # micro-batches per step and pipeline
    T_q = T / cp
    M = b * T_q  # tokens of one micro-batch on one device
    links = _links(cluster, cal)

    # compute: one micro-batch on the busiest stage (the last one holds the output layer)
    lt = _layer_times(c, acc, a, cal, M, b, T_q, tp, sp, flash_attention, causal)
    # forward + backward of each part: matmuls twice again backward (input and weight
    # gradients), streaming kernels BACKWARD_STREAM_FACTOR times again
    fb = {k: (3 * g + (1 + BACKWARD_STREAM_FACTOR) * st, g + st) for k, (g, st) in lt.items()}
    core_fb, core_f = (x * cp for x in fb["core"])  # ring attention: cp blocks of T/cp keys
    extra = 1 - 1 / cp
    dense_fb, dense_f = fb["dense"][0] + core_fb * extra, fb["dense"][1] + core_f * extra
    moe_fb, moe_f = fb["moe"][0] + core_fb * extra, fb["moe"][1] + core_f * extra
    # kernels per layer forward: QKV and output projections, attention (one fused kernel, or
    # two batched matmuls, the softmax and the dropout), the element-wise ops, the MLP's three;
    # a backward launches about twice as many
    mask = 1.0 if c.dropout else 0.0
    k_layer = 2 + (1 if flash_attention else 4) + 4 + 2 * (1 + mask) + 3 + (4 if c.is_moe else 0)
    n_stage = np.ceil(c.L / pp)
    n_moe = np.minimum(c.n_moe_layers, n_stage)  # the deeper stages hold the MoE layers
    n_dense = n_stage - n_moe
    layers_f = n_dense * dense_f + n_moe * moe_f
    layers_fb = n_dense * dense_fb + n_moe * moe_fb
    re_f = np.where(rec == "full", layers_f, np.where(rec == "selective", n_stage * core_f, 0.0))
    # output layer and loss (last stage), the embedding's dense gradient (first stage): with
    # pp = 1 one device does both; with pp > 1 the busiest stage is taken to pay for both
    head_g = _gemm_time(M, c.D, c.V / tp, 1, acc, a, cal)
    head_f = head_g + _stream_time(M * c.V / tp * LOSS_BYTES_PER_LOGIT / 3, acc, cal)
    head_fb = 3 * head_g + _stream_time(M * c.V / tp * LOSS_BYTES_PER_LOGIT, acc, cal) \
        + _stream_time(c.V * c.D / tp * EMBEDDING_GRAD_BYTES_PER_PARAM, acc, cal)
    k_re = np.where(rec == "full", k_layer, np.where(rec == "selective", 3, 0))
    # the host dispatches every kernel, backward about twice as many as forward
    stage_mb = _host_bound(layers_fb + re_f, n_stage * (3 * k_layer + k_re), cal)
    head_mb = _host_bound(head_fb, HEAD_KERNELS, cal)

    # tensor-parallel and expert communication: on the critical path
    act = M * c.D * a
    n_tp = 2 * (2 + np.where(rec == "full", 1, 0))  # per layer: fwd 2, bwd 2, recompute 2
    tp_kind = "all-reduce"
    t_tp_one = np.where(sp, _coll_time("all-gather", act, tp, 1, links)
                        + _coll_time("reduce-scatter", act, tp, 1, links),
                        _coll_time(tp_kind, act, tp, 1, links))
    tp_mb = n_stage * n_tp / 2 * t_tp_one
    # expert dispatch and combine: each device sends its M·k token copies (V/ep of the array V
    # the all-to-all's cost is written in; with sequence parallelism its 1/tp share of the
    # tokens), once forward and once back, per MoE layer
    a2a = _coll_time("all-to-all", act * c.k * ep / np.where(sp, tp, 1.0), ep, tp, links) \
        if c.is_moe else 0.0 * m
    ep_mb = n_moe * 2 * (2 + np.where(rec == "full", 1, 0)) * a2a
    # context parallelism: K and V blocks passed round the ring, hidden under attention
    kv = 2 * M * c.K * c.H * a / np.minimum(tp, c.K)
    cp_step = _coll_time("collective-permute", kv, cp, tp, links)
    cp_mb = n_stage * 3 * np.maximum(0.0, (cp - 1) * cp_step - core_f)
    # pipeline sends: one activation forward and one gradient back per micro-batch and chunk
    # boundary (v of them with interleaving); Megatron scatters them over the tp ranks
    p2p = _coll_time("collective-permute", act / tp, pp, tp * dp * cp, links)
    pp_mb = np.where(pp > 1, 2 * v * p2p, 0.0)
    # ZeRO-3: gather the stage's weights before forward and backward, hidden under compute
    dense_params, expert_params, emb_params = _stage_params(c, P)
    stage_bytes = (dense_params + expert_params) * a
    zg = dp * cp
    ag3 = _coll_time("all-gather", stage_bytes, zg, tp, links)
    z3_mb = np.where(zero >= 3, np.maximum(0, ag3 - (layers_f + head_f))
                     + np.maximum(0, ag3 - 2 * (layers_f + head_f)), 0.0)

    compute_mb = stage_mb + head_mb
    exposed_mb = tp_mb + ep_mb + cp_mb + pp_mb + z3_mb
    busy = m * (compute_mb + exposed_mb)
    frac = np.zeros_like(m)
    for s in SCHEDULES:
        sel = P["schedule"] == s
        if not np.any(sel):
            continue
        vv = np.where(s == "gpipe", 1, P["virtual_stages"][sel])
        frac[sel] = pipeline_bubble_fraction(P["pp"][sel], m[sel].astype(np.int64), vv, s)
    bubble = frac / (1 - frac) * m * (stage_mb + tp_mb + ep_mb + cp_mb + pp_mb)

    # data-parallel gradient reduction (reduce-scatter with ZeRO >= 1), after or under backward
    grad_bytes = (dense_params + expert_params) * a
    g_kind_t = np.where(zero >= 1, _coll_time("reduce-scatter", grad_bytes, zg, tp, links),
                        _coll_time("all-reduce", grad_bytes, zg, tp, links))
    window = 2 * (layers_f + head_f) if overlap_grad_reduce else 0.0 * m
    last_bucket = g_kind_t * np.minimum(1.0, GRAD_BUCKET_BYTES / np.maximum(grad_bytes, 1.0))
    dp_exposed = np.where(zg > 1, np.maximum(g_kind_t - window, last_bucket if
                                             overlap_grad_reduce else g_kind_t), 0.0)
    # optimizer: Adam over the local shard, then ZeRO's gather of the updated weights
    shard = np.where(zero >= 1, dense_params / zg + expert_params / np.maximum(zg / ep, 1),
                     dense_params + expert_params)
    # (with the step's own host work: gradient norm, loss-scale check, logging)
    opt = _host_bound(_stream_time(shard * ADAM_BYTES_PER_PARAM, acc, cal), 10, cal) \
        + cal.step_overhead
    ag_opt = np.where((zero >= 1) & (zero < 3), _coll_time("all-gather", stage_bytes, zg, tp,
                                                          links), 0.0)
    optimizer = opt + ag_opt

    compute_time = m * compute_mb
    exposed = m * exposed_mb + dp_exposed
    step = compute_time + exposed + bubble + opt + ag_opt
    exposed_comm = exposed + ag_opt

    n_dev = dp * tp * pp * cp
    tokens_per_s = B * T / step
    peak = acc.peak_flops_per_s(dtype) * n_dev
    model_flops = float(transformer.train_flops(c, B, T, causal=False))
    mfu = model_flops / step / peak
    hw = np.zeros_like(step)
    for r in RECOMPUTE:
        sel = rec == r
        if np.any(sel):
            hw[sel] = float(transformer.train_flops(c, B, T, causal=False, recompute=r))
    hfu = hw / step / peak

    mem_parts = _memory_parts(c, P, m, T, a, recipe, flash_attention,
                              (dense_params, expert_params))
    mem = sum(mem_parts.values())
    out = dict(step_time=step, compute_time=compute_time, exposed_comm_time=exposed_comm,
               bubble_time=bubble, optimizer_time=opt, memory_bytes=mem,
               fits=mem <= acc.hbm_bytes, mfu=mfu, hfu=hfu, tokens_per_s=tokens_per_s)
    if detail:
        out["memory_parts"] = mem_parts
        out["comms"] = [
            ("tensor-parallel all-reduces", "tp", "all-reduce", tp, m * tp_mb, m * tp_mb),
            ("expert all-to-alls", "ep", "all-to-all", ep, m * ep_mb, m * ep_mb),
            ("context ring (K, V blocks)", "cp", "collective-permute", cp,
             m * n_stage * 3 * (cp - 1) * cp_step, m * cp_mb),
            ("pipeline sends", "pp", "collective-permute", pp, m * pp_mb, m * pp_mb),
            ("ZeRO-3 weight gathers", "dp", "all-gather", zg,
             np.where(zero >= 3, m * 2 * ag3, 0.0), m * z3_mb),
            ("gradient reduction", "dp", "all-reduce", zg, g_kind_t, dp_exposed),
            ("ZeRO weight all-gather", "dp", "all-gather", zg, ag_opt, ag_opt)]
    return out


def _groups(*cols):
    """(unique rows as a 2-D int array, inverse index) of equal-length integer columns: np.unique
    over rows, via one integer key (a 1-D sort is far faster than unique(axis=0))."""
    key = np.zeros(len(cols[0]), np.int64)
    parts = []
    for col in cols:
        u, inv = np.unique(np.asarray(col), return_inverse=True)
        key = key * len(u) + inv.ravel()
        parts.append(u)
    ukey, first, inv = np.unique(key, return_index=True, return_inverse=True)
    rows = np.stack([np.asarray(col)[first] for col in cols], axis=1)
    return rows, inv.ravel()


def _stage_params(c, P):
    """(dense, expert, embedding) parameters of the busiest stage on one device (before ZeRO),
    per plan, from ``memory._first_stage_params`` evaluated once per distinct (tp, pp, ep)."""
    uniq, inv = _groups(P["tp"], P["pp"], P["ep"])
    dense = np.empty(len(uniq))
    expert = np.empty(len(uniq))
    for i, (tp, pp, ep) in enumerate(uniq):
        plan = ParallelPlan(tp=int(tp), pp=int(min(pp, c.L)), dp=int(ep), ep=int(ep))
        d, e, _, _ = _memory._first_stage_params(c, plan)
        dense[i], expert[i] = d, e
    emb = (c.V + c.learned_positions) * c.D / P["tp"]
    return dense[inv.ravel()], expert[inv.ravel()], emb


def _memory_parts(c, P, m, T, a, recipe, flash, stage_params):
    """Bytes per device by part, per plan (the first pipeline stage, which holds the most
    activations; with pp = 1 also the output layer and the logits). ``stage_params``:
    :func:`_stage_params`'s (dense, expert) parameters."""
    p_b, g_b, o_b = _memory._recipe(recipe, "adam")
    dense, experts = stage_params
    zero = P["zero"]
    S = (P["dp"] * P["cp"]).astype(float)
    S_e = np.maximum(S / P["ep"], 1.0)

    def sharded(bytes_per, stage):
        return bytes_per * (np.where(zero >= stage, dense / S, dense)
                            + np.where(zero >= stage, experts / S_e, experts))

    tp, cp, pp = (P[k].astype(float) for k in ("tp", "cp", "pp"))
    n_stage = np.ceil(c.L / P["pp"])
    n_moe = np.minimum(c.n_moe_layers, n_stage)
    n_dense = n_stage - n_moe
    per_tok = np.zeros(len(zero))
    work = np.zeros(len(zero))
    r_idx = np.zeros(len(zero), np.int64)
    for j, r in enumerate(RECOMPUTE):
        r_idx[P["recompute"] == r] = j
    uniq, inv = _groups(P["tp"], P["sequence_parallel"].astype(np.int64), r_idx)
    for i, (t, s, r) in enumerate(uniq):
        rname = RECOMPUTE[r]
        sel = inv == i
        for moe, n in ((False, n_dense[sel]), (True, n_moe[sel])):
            if moe and not c.is_moe:
                continue
            terms = _memory._activation_terms(c, moe, T, float(t), bool(s), rname, flash, a)
            per_tok[sel] += n * float(sum(terms.values()))
            if rname == "full":
                full = _memory._activation_terms(c, moe, T, float(t), bool(s), "none", flash, a)
                work[sel] = np.maximum(work[sel], float(sum(full.values())))
    b = P["micro_batch"].astype(float)
    tokens = b * T / cp
    # micro-batches in flight on the first stage (memory.in_flight_microbatches)
    v = P["virtual_stages"].astype(float)
    inflight = np.where(P["schedule"] == "gpipe", m, np.minimum(pp, m))
    inflight = np.where((P["schedule"] != "gpipe") & (v > 1), inflight * (1 + (pp - 1) /
                                                                          (pp * v)), inflight)
    inflight = np.where(pp == 1, 1.0, inflight)
    acts = (per_tok * inflight + work) * tokens
    # fp32 logits on the last stage; with pp = 1 that is this device (2 copies at the loss peak)
    logits = np.where(pp == 1, _memory.logits_bytes(c, b, T / cp, 1, copies=2) / tp, 0.0)
    gbuf = np.where(S > 1, 2 * np.minimum(GRAD_BUCKET_BYTES, (dense + experts) * a), 0.0)
    gbuf = gbuf + np.where(zero >= 3, 2 * (dense + experts) / n_stage * a, 0.0)
    parts = {"parameters": sharded(p_b, 3), "gradients": sharded(g_b, 2),
             "optimizer": sharded(o_b, 1), "activations": acts, "logits": logits,
             "communication buffers": gbuf}
    allocated = sum(parts.values())
    parts["allocator fragmentation"] = ALLOCATOR_FRAGMENTATION * allocated
    parts["framework reserve"] = np.full(len(zero), FRAMEWORK_RESERVE_BYTES)
    return parts


def plan_arrays(plans) -> dict:
    """The arrays of :func:`estimate_arrays` for a list of ParallelPlans.

    >>> plan_arrays([ParallelPlan(dp=2)])["dp"]
    array([2])
    """
    plans = [check_plan(p) for p in plans]
    return {k: np.array([getattr(p, k) for p in plans]) for k in PLAN_FIELDS}


def estimate(cfg, cluster, plan: ParallelPlan, global_batch, T, *, dtype="bf16",
             calibration=None, flash_attention=True, causal=True, overlap_grad_reduce=True,
             recipe="mixed") -> StepEstimate:
    """The estimate of one plan's training step: :func:`estimate_arrays` for one plan, with the
    memory by part and each kind of communication with its time and exposed part.

    Raises ValueError when the plan cannot run: its world size is not the cluster's size or
    less, the global batch is not a multiple of dp · micro_batch, tp does not divide the heads.

    >>> e = estimate("llama3-8b", hardware.cluster("h100", 8), ParallelPlan(dp=8), 64, 4096)
    >>> e.fits, e.step_time > e.compute_time
    (False, True)
    """
    c = models.get(cfg)
    cluster = hardware.get_cluster(cluster)
    check_plan(plan)
    if plan.world_size > cluster.n_devices:
        raise ValueError(f"plan needs {plan.world_size} devices (dp·tp·pp·cp); the cluster has "
                         f"{cluster.n_devices}: choose degrees whose product is at most that")
    plan.n_microbatches(global_batch)  # raises unless global_batch is a multiple of dp·b
    _memory._check_tp(c, plan.tp, "does not divide")
    if plan.pp > c.L:
        raise ValueError(f"pp={plan.pp} stages exceed L={c.L} layers; choose pp <= {c.L}")
    r = estimate_arrays(c, cluster, plan_arrays([plan]), global_batch, T, dtype=dtype,
                        calibration=calibration, flash_attention=flash_attention,
                        causal=causal, overlap_grad_reduce=overlap_grad_reduce, recipe=recipe,
                        detail=True)
    one = {k: float(np.asarray(r[k])[0]) for k in OUTPUTS}
    mem = Breakdown({k: float(np.asarray(v)[0]) for k, v in r["memory_parts"].items()},
                    unit="bytes")
    comms = tuple(CommEstimate(name, axis, kind, int(np.asarray(g).ravel()[0]),
                               float(np.asarray(t).ravel()[0]), float(np.asarray(e).ravel()[0]))
                  for name, axis, kind, g, t, e in r["comms"]
                  if int(np.asarray(g).ravel()[0]) > 1 and float(np.asarray(t).ravel()[0]) > 0)
    return StepEstimate(plan=plan, step_time=one["step_time"], compute_time=one["compute_time"],
                        exposed_comm_time=one["exposed_comm_time"],
                        bubble_time=one["bubble_time"], optimizer_time=one["optimizer_time"],
                        memory=mem, fits=bool(one["fits"]), mfu=one["mfu"], hfu=one["hfu"],
                        tokens_per_s=one["tokens_per_s"], comms=comms)
