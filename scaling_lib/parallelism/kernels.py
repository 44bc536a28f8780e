"""Kernel timing on one accelerator: matmuls, memory-bound kernels, one transformer layer.

Each kernel is timed as a *roofline sum*: a matmul [M, K] x [K, N] takes
2MNK / (η_c · w · d · C) + a·(MK + KN + MN) / (η_m · W_HBM), so thin matmuls (small D/tp,
short micro-batches) lose efficiency for the physical reason (they move as many bytes as they
compute); element-wise kernels (norms, GeLU, dropout, softmax, the fp32 loss) take their bytes
over η_m · W_HBM; no sequence of kernels is shorter than the host's dispatch of them (τ each).
η_c, η_m, τ and K½ are :class:`~scaling_lib.parallelism.calibration.Calibration` fields; the
other constants below are counted from the kernels frameworks run, each with its source.

Left out: kernel fusion beyond FlashAttention's, and tensor-core shape quantisation other than
the output tiles' waves.

See: the chapters "Rooflines" and "Planning a training run".
"""

from __future__ import annotations

import numpy as np

from .. import hardware
from ..units import _brief, check_positive, dtype_bytes
from .calibration import DEFAULT_CALIBRATION

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
# Kernels of the output layer and the loss per micro-batch, forward and backward (the output
# matmul and its two gradients, the vocabulary-parallel cross-entropy's max, exp, sum and divide
# forward and its backward, their all-reduces' casts): counted from Megatron-LM's
# vocab_parallel_cross_entropy, 21; and of the embedding (look-up forward; zero-fill,
# scatter-add and the fp32 accumulation backward), 4: 25 per micro-batch on one device.
HEAD_KERNELS = 21
EMBEDDING_KERNELS = 4


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
    0.71
    """
    from .calibration import Calibration

    acc = hardware.get(accelerator)
    cal = DEFAULT_CALIBRATION if calibration is None else calibration
    if not isinstance(cal, Calibration):
        raise ValueError(f"calibration={_brief(cal)} must be a Calibration")
    M, K, N = (np.asarray(check_positive(k, v), float) for k, v in (("M", M), ("K", K), ("N", N)))
    return _gemm_time(M, K, N, 1, acc, dtype_bytes(dtype), cal)


def _stream_time(nbytes, acc, cal, n_kernels=1):
    """GPU seconds of memory-bound kernels moving ``nbytes`` in all."""
    return nbytes / (cal.hbm_efficiency * acc.hbm_bytes_per_s)


def _host_bound(gpu_time, n_kernels, cal):
    """A sequence of kernels takes the longer of the GPU's work and the host's dispatch of
    them, n_kernels · τ (the host runs ahead of the GPU asynchronously, so the two overlap)."""
    return np.maximum(gpu_time, n_kernels * cal.kernel_time)


def layer_kernels(c, flash) -> int:
    """Kernels one layer's forward launches: QKV and output projections (2), attention (one
    fused kernel, or two batched matmuls, the softmax and the dropout: 4), two norms and two
    residual adds (4), a dropout and its mask on each branch (2 or 4), the MLP's three
    matmul-and-activation kernels (3), and MoE's router, permute, un-permute and combine (4).
    A backward launches about twice as many."""
    mask = 1 if c.dropout else 0
    return 2 + (1 if flash else 4) + 4 + 2 * (1 + mask) + 3 + (4 if c.is_moe else 0)


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




def microbatch_parts(c, acc, a, cal, P, T, flash, causal) -> dict:
    """Per plan, GPU seconds of one micro-batch on one device, by part: per layer
    ``dense``/``moe`` (forward + backward, forward) pairs, attention's ``core_f`` (forward),
    the output layer and loss ``head`` (fb, f), the embedding's dense gradient ``emb``, and the
    kernel counts ``k_layer`` per layer forward. Backward: the matmuls twice again (input and
    weight gradients), the streaming kernels ``BACKWARD_STREAM_FACTOR`` times again. With
    context parallelism each device runs cp blocks of T/cp keys (ring order or gathered K, V:
    the same attention work)."""
    tp, cp = P["tp"].astype(float), P["cp"].astype(float)
    b, sp = P["micro_batch"].astype(float), P["sequence_parallel"]
    T_q = T / cp
    M = b * T_q  # tokens of one micro-batch on one device  # [n_plans]
    lt = _layer_times(c, acc, a, cal, M, b, T_q, tp, sp, flash, causal)
    fb = {k: (3 * g + (1 + BACKWARD_STREAM_FACTOR) * st, g + st) for k, (g, st) in lt.items()}
    core_fb, core_f = (x * cp for x in fb["core"])
    extra = 1 - 1 / cp
    out = {"dense": (fb["dense"][0] + core_fb * extra, fb["dense"][1] + core_f * extra),
           "moe": (fb["moe"][0] + core_fb * extra, fb["moe"][1] + core_f * extra),
           "core_f": core_f, "k_layer": layer_kernels(c, flash), "M": M}
    head_g = _gemm_time(M, c.D, c.V / tp, 1, acc, a, cal)
    loss = M * c.V / tp * LOSS_BYTES_PER_LOGIT
    out["head"] = (3 * head_g + _stream_time(loss, acc, cal),
                   head_g + _stream_time(loss / 3, acc, cal))
    out["emb"] = _stream_time(c.V * c.D / tp * EMBEDDING_GRAD_BYTES_PER_PARAM, acc, cal)
    return out


def stage_compute(c, parts, n_layers, rec, cal, *, head=False, embedding=False):
    """(seconds of one micro-batch's forward + backward + recomputation, forward seconds) on a
    stage of ``n_layers`` layers (MoE layers last, as DeepSeek places them), with the output
    layer and loss (``head``) and the embedding's gradient (``embedding``) where the stage
    holds them; each sequence of kernels at least its dispatch time (:func:`_host_bound`)."""
    n = np.asarray(n_layers, dtype=float)
    n_moe = np.minimum(c.n_moe_layers, n)
    n_dense = n - n_moe
    layers_f = n_dense * parts["dense"][1] + n_moe * parts["moe"][1]
    layers_fb = n_dense * parts["dense"][0] + n_moe * parts["moe"][0]
    re_f = np.where(rec == "full", layers_f, np.where(rec == "selective",
                                                      n * parts["core_f"], 0.0))
    k = parts["k_layer"]
    k_re = np.where(rec == "full", k, np.where(rec == "selective", 3, 0))
    t = _host_bound(layers_fb + re_f, n * (3 * k + k_re), cal)
    f = layers_f
    if head:
        t = t + _host_bound(parts["head"][0], HEAD_KERNELS, cal)
        f = f + parts["head"][1]
    if embedding:
        t = t + _host_bound(parts["emb"], EMBEDDING_KERNELS, cal)
    return t, f
