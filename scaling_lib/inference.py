"""First-order accounting for autoregressive decoding: FLOPs, bytes and the roofline of one step.

A decode step feeds one new token for each of B sequences that already hold S tokens in their KV
cache. Every weight matrix is read once per step (shared by the B tokens) and every cached key and
value is read once (used only by its own sequence):

    FLOPs = B · (2·W + L·4·S·N·H),        bytes = w·W_read + B · S · 2·L·K·H · a,

with W the matmul weights touched per token (Chapter 5), w and a the bytes per weight and per
cache element. The weights give an intensity of about 2B/w, the cache about N/K FLOPs per byte
in bf16, whatever the batch: far below the few hundred a modern accelerator needs, which is why
decoding is memory-bound. W_read counts every weight of a dense model; a mixture-of-experts step
reads only the experts its B tokens are expected to touch, E·(1 - (1 - k/E)^B) per layer under
uniform routing. Tensor parallelism adds 2·L + 1 latency-bound all-reduces per step when asked
for (``tp=``), pipeline stages their sends (``pp=``), and engines a launch floor (``launch=``). Activations, norms, sampling and other communication are left out.

See: Chapter 8, "Inference basics".
"""

from __future__ import annotations

import numpy as np

from . import collectives, hardware, models, roofline, transformer
from .breakdown import Breakdown
from .units import check_count, check_int, check_positive, dtype_bytes, scalar_or_array as _out


def _cfg(cfg) -> models.TransformerConfig:
    return models.get(cfg)


def expected_experts(E, k, B):
    """Expected number of distinct experts B tokens touch in one MoE layer: E·(1 - (1 - k/E)^B).

    Each token picks k of the E experts; assuming uniform, independent routing, an expert is
    missed by one token with probability 1 - k/E and by all B with (1 - k/E)^B. Real routers
    are not uniform (some experts are popular), which touches fewer distinct experts; the
    formula is the uniform case. Broadcasts over B.

    >>> float(expected_experts(8, 2, 1)), round(float(expected_experts(8, 2, 16)), 2)
    (2.0, 7.92)

    See: Chapter 8, "Mixture-of-experts decode reads only the experts it touches".
    """
    E = check_positive("E", E)
    k = check_positive("k", k)
    if np.any(k > E):
        raise ValueError(f"k={k!r} active experts exceed E={E!r}; choose k <= E")
    B = check_positive("B", B)
    return _out(E * (1 - (1 - k / E) ** B))


def weight_bytes_read(cfg, dtype="bf16", B=None):
    """Bytes of weights one decode step reads: every parameter except the input embedding table.

    The embedding lookup touches only B rows, so an untied table is left out; a tied table is read
    by the output matmul and counted. MoE models: with ``B=None`` every expert is counted (the
    bound once B·k is large); with a batch B, only the experts it is expected to touch
    (:func:`expected_experts`, uniform routing), so batch 1 reads k of the E experts per layer.

    >>> round(weight_bytes_read("llama3-8b") / 1e9, 2)  # (8.03e9 - 0.525e9) params x 2 bytes
    15.01
    >>> all_experts = weight_bytes_read("mixtral-8x7b")
    >>> round(all_experts / 1e9, 1), round(weight_bytes_read("mixtral-8x7b", B=1) / 1e9, 1)
    (93.1, 25.5)
    """
    c = _cfg(cfg)
    parts = transformer.param_count(c)
    n = parts.total - (0 if c.tied_embeddings else parts["embedding"])
    if B is not None and c.is_moe:
        routed = parts["experts"]
        n = n - routed + routed * expected_experts(c.E, c.k, B) / c.E
    return _out(n * dtype_bytes(dtype))


def weight_read_time(n_params, accelerator, n_devices=1, dtype="bf16"):
    """Lower bound on a decode step from weights alone: n_params · w / (n · W_hbm) seconds.

    Every weight is read once per step, split evenly over ``n_devices`` chips; a bound whatever
    the batch (the KV cache and compute only add to it). For a model given as a config, use
    :func:`weight_bytes_read` for the exact bytes.

    >>> round(weight_read_time(200e9, "tpu-v5e", 32) * 1e3, 1)  # ms
    15.3
    """
    acc = hardware.get(accelerator)
    n = check_count("n_devices", n_devices)
    nbytes = check_positive("n_params", n_params) * dtype_bytes(dtype)
    return roofline.t_comms(nbytes / n, acc.hbm_bytes_per_s)


def decode_flops(cfg, B, S) -> Breakdown:
    """FLOPs of one decode step by part: the weight matmuls, and attention over the cache.

    "weights": B · 2 · (W + D·V), every matmul weight once per new token (active experts only);
    "attention": B · L · 4 · S · N · H, one query against S cached keys and values (no masked
    half: the new token sees every cached one). The total is B · flops_per_token(cfg, S,
    training=False).

    >>> f = decode_flops("llama3-70b", 1, 8192)
    >>> round(f["weights"] / 1e9), round(f["attention"] / 1e9)
    (139, 21)
    """
    c = _cfg(cfg)
    B = check_positive("B", B)  # may be fractional: figures mark where the cache stops fitting
    S = check_count("S", S, sweep=True)
    weights = transformer.flops_per_token(c, 1.0, training=False, include_attention=False)
    attention = np.asarray(transformer.flops_per_token(c, S, training=False)) - weights
    return Breakdown({"weights": _out(B * weights), "attention": _out(B * attention)},
                     unit="FLOPs")


def decode_bytes(cfg, B, S, dtype="bf16", kv_dtype=None) -> Breakdown:
    """HBM bytes one decode step reads: the weights once, plus the B sequences' KV caches.

    ``dtype``: the weights' format; ``kv_dtype``: the cache's (default: the same). An MoE model
    reads only the experts the B tokens are expected to touch (:func:`weight_bytes_read`).

    >>> b = decode_bytes("llama3-70b", 1, 8192)
    >>> round(b["weights"] / 1e9, 1), round(b["kv cache"] / 1e9, 2)
    (139.0, 2.68)
    """
    kv = transformer.kv_cache_bytes(cfg, B, S, kv_dtype or dtype)
    return Breakdown({"weights": weight_bytes_read(cfg, dtype, B), "kv cache": kv}, unit="bytes")


def decode_intensity(cfg, B, S, dtype="bf16", kv_dtype=None):
    """Arithmetic intensity of a decode step: FLOPs per byte of HBM traffic.

    About B for the weights in bf16 when the cache is small; never above N/K for the cache part.

    >>> round(decode_intensity("llama3-70b", 1, 8192), 2)
    1.13
    """
    return roofline.arithmetic_intensity(decode_flops(cfg, B, S).total,
                                         decode_bytes(cfg, B, S, dtype, kv_dtype).total)


def compute_dtype(accelerator, dtype) -> str:
    """The precision the matmuls run in for weights stored in ``dtype`` on ``accelerator``.

    ``dtype`` itself when the chip lists a peak for it (fp8 or int8 matmuls), else bf16:
    weight-only quantization (int4 on GPUs) dequantizes the weights before each matmul, so it
    saves bytes, not FLOPs, and the activations stay in bf16. Every decode and prefill time of
    the library takes its FLOP/s and activation bytes from here (int4 handled one way).

    >>> compute_dtype("h100", "int4"), compute_dtype("h100", "fp8")
    ('bf16', 'fp8')
    """
    acc = hardware.get(accelerator)
    return dtype if acc.supports(dtype) else "bf16"


def tp_decode_all_reduces(cfg, *, vocab_parallel_embedding=True) -> int:
    """All-reduces in one tensor-parallel forward step: 2·L + 1.

    One after each layer's attention and one after its MLP (Megatron's row-parallel wo and
    w_down), and one after the vocabulary-parallel embedding lookup, which vLLM and Megatron-LM
    both use (each rank holds V/tp rows and the looked-up rows are summed:
    ``VocabParallelEmbedding.forward`` in vllm/model_executor/layers/vocab_parallel_embedding.py).
    The logits stay split over the vocabulary (vLLM gathers them for sampling: a gather of
    B·V/tp values per rank, left out here). The one home of this count: the decode step
    (:func:`tp_decode_comm_time`), the prefill and the list of collectives
    (:func:`scaling_lib.serving.decode_collectives`, checked against XLA) all use it.

    >>> tp_decode_all_reduces("llama3-70b"), tp_decode_all_reduces("llama3-70b",
    ...                                                            vocab_parallel_embedding=False)
    (161, 160)
    """
    c = _cfg(cfg)
    return 2 * c.L + (1 if vocab_parallel_embedding else 0)


def tp_all_reduce_time(nbytes, tp, accelerator="h100", *, stride=1):
    """One all-reduce of ``nbytes`` (the full array) over ``tp`` devices of ``accelerator``'s
    default cluster, neighbours ``stride`` ranks apart, costed by the training model's
    collectives: :func:`scaling_lib.collectives.group_time` (which picks the algorithm a library
    would: one-shot / two-shot / NVLS on NVSwitch for small messages, rings for large, torus
    rules on TPU slices) where it exists, else the hierarchical alpha-beta model
    (:func:`scaling_lib.collectives.hierarchical_time`: intra-node, then inter-node phases).
    Not a second cost model: this only picks the cluster. 0 when tp = 1. Broadcasts over nbytes.

    >>> tp_all_reduce_time(16384, 1)
    0.0
    """
    tp = check_int("tp", tp, maximum=2**24)
    stride = check_int("stride", stride, maximum=2**24)
    V = check_positive("nbytes", nbytes, allow_zero=True)
    if tp == 1:
        return _out(0.0 * np.asarray(V, dtype=float))
    cl = hardware.cluster(accelerator, tp * int(stride))
    if hasattr(collectives, "group_time"):
        return _out(collectives.group_time("all-reduce", V, tp, int(stride), cl))
    if int(stride) != 1:
        cl = hardware.cluster(accelerator, tp)
    return _out(collectives.hierarchical_time("all-reduce", V, cl).total)


def tp_decode_comm_time(cfg, B, tp, link=None, *, accelerator="h100", dtype="bf16",
                        vocab_parallel_embedding=True):
    """Time of the tensor-parallel all-reduces of one decode step (seconds).

    Megatron-style tensor parallelism ends each layer's attention and MLP with an all-reduce of
    the B tokens' activations (B·D·a bytes), and a vocabulary-parallel embedding adds one:
    :func:`tp_decode_all_reduces` = 2·L + 1 per step, one after the other on the critical path
    (each layer needs the previous one's output). At small B each is latency-bound. Each is
    costed by :func:`tp_all_reduce_time` on ``accelerator``'s cluster of tp devices (NVLink
    inside a node, the scale-out network beyond it); an explicit ``link`` (a
    :class:`scaling_lib.hardware.Link`) instead costs it as a switch at that link's bandwidth
    and latency (:func:`scaling_lib.collectives.all_reduce_time`). ``dtype``: the activations'
    (:func:`compute_dtype` of the weights). 0 when tp = 1. Broadcasts over B.

    >>> t = tp_decode_comm_time("llama3-70b", 1, 8)  # 161 all-reduces of 16 KiB on NVLink
    >>> t == 161 * tp_all_reduce_time(16384, 8)
    True

    See: Chapter 8, "Tensor-parallel decode pays all-reduces".
    """
    c = _cfg(cfg)
    B = check_positive("B", B)
    tp_in = check_positive("tp", tp)
    if np.any(np.asarray(tp_in) != np.round(tp_in)):
        raise ValueError(f"tp={tp!r} must be a whole number of devices (1, 2, 4, 8, ...)")
    if link is not None and not isinstance(link, hardware.Link):
        raise ValueError(f"link={link!r} must be a hardware.Link or None (the accelerator's "
                         "cluster of tp devices)")
    count = tp_decode_all_reduces(c, vocab_parallel_embedding=vocab_parallel_embedding)
    nbytes = np.asarray(B, dtype=float) * c.D * dtype_bytes(dtype)
    tps = np.asarray(tp_in)
    out = np.zeros(np.broadcast(nbytes, tps).shape)
    for t in np.unique(tps):
        t = int(t)
        if t == 1:
            continue
        if link is None:
            one = tp_all_reduce_time(nbytes, t, accelerator)
        else:
            one = collectives.all_reduce_time(nbytes, t, link.bytes_per_s, topology="switch",
                                              latency=link.latency)
        out = np.where(tps == t, count * np.asarray(one), out)
    return _out(out)


# A decode step launches hundreds of kernels; engines capture it as one CUDA graph (vLLM and
# TensorRT-LLM do by default) so the CPU issues one cudaGraphLaunch per step, a few µs, instead of
# ~5 µs per kernel (NVIDIA, "Getting Started with CUDA Graphs", developer blog, 2019: launch
# overheads of a few µs per kernel; one graph launch replaces them). The launches overlap the GPU's
# work (the CPU runs ahead), so they set a floor under the step, not an addition: one graph launch
# per pipeline stage and step, or every kernel in eager mode. It binds only for tiny models (a
# one-layer toy does not report nanoseconds per token) or eager launches of many small kernels.
GRAPH_LAUNCH_TIME = 5e-6      # s per cudaGraphLaunch (or one compiled XLA program dispatch)
KERNEL_LAUNCH_TIME = 5e-6     # s of CPU per cudaLaunchKernel, eager mode
KERNELS_PER_LAYER = 12        # norms, qkv, rope, attention, wo, all-reduce, MLP (fused engine)


def launch_time(cfg, *, pp=1, cuda_graphs=True):
    """Launch floor of one decode step: one graph launch per stage (``cuda_graphs``), or every
    kernel launched from the CPU: KERNELS_PER_LAYER·L·t_kernel (eager). A step takes at least
    this long (when the GPU work is shorter than the CPU's launches the GPU waits for them).

    >>> launch_time("llama3-8b") * 1e6, round(launch_time("llama3-8b", cuda_graphs=False) * 1e3, 2)
    (5.0, 1.92)
    """
    c = _cfg(cfg)
    pp = check_int("pp", pp, maximum=2**20)
    if cuda_graphs:
        return pp * GRAPH_LAUNCH_TIME
    return KERNELS_PER_LAYER * c.L * KERNEL_LAUNCH_TIME


def kv_replication(cfg, tp) -> int:
    """Copies of the KV cache per kv head across tp tensor-parallel ranks: 1 while tp divides
    K, tp / K beyond it (each rank holds the kv heads its N/tp query heads read); with
    multi-head latent attention (MLA) the latent is shared by all heads, so every rank holds it
    whole: tp copies (why engines serve DeepSeek-V3 with data-parallel attention).

    >>> kv_replication("llama3-70b", 8), kv_replication("llama3-70b", 32), kv_replication("deepseek-v3", 8)
    (1, 4, 8)
    """
    c = _cfg(cfg)
    tp = int(check_count("tp", tp))
    if c.mla is not None:
        return tp
    return 1 if c.K % tp == 0 else max(tp // c.K, 1)


def decode_step_parts(cfg, B, S, accelerator, n_devices=1, dtype="bf16", kv_dtype=None, *,
                      tp=1, link=None, pp=1, launch=False, cuda_graphs=True) -> Breakdown:
    """The parts of one decode step (seconds): "compute", "memory", "communication",
    "pipeline", "launch". The step (:func:`decode_step_time`) is
    max(max(compute, memory) + communication + pipeline, launch): FLOPs and HBM traffic overlap,
    communication and sends are on the critical path, and the launch is a floor. See
    :func:`decode_step_time` for each term.

    >>> p = decode_step_parts("llama3-70b", 1, 8192, "h100", 8, tp=8)
    >>> round(p["memory"] * 1e3, 2), p["communication"] > 0, p["pipeline"], p["launch"]
    (5.29, True, 0.0, 0.0)
    """
    c = _cfg(cfg)
    acc = hardware.get(accelerator)
    n = check_count("n_devices", n_devices)
    pp = int(check_count("pp", pp))
    tp_i = check_count("tp", tp)
    act = compute_dtype(acc, dtype)
    per_token = n / pp
    nbytes = decode_bytes(c, B, S, dtype, kv_dtype)
    if np.ndim(tp_i):
        r = np.array([kv_replication(c, t) if t <= n else 1 for t in np.ravel(tp_i)],
                     dtype=float).reshape(np.shape(tp_i))
    else:
        r = kv_replication(c, tp_i) if tp_i <= n else 1
    t_math = roofline.t_math(decode_flops(c, B, S).total, per_token * acc.peak_flops_per_s(act))
    t_mem = roofline.t_comms(nbytes["weights"] + r * np.asarray(nbytes["kv cache"]),
                             per_token * acc.hbm_bytes_per_s)
    t_comm = tp_decode_comm_time(c, B, tp_i, link, accelerator=acc, dtype=act)
    t_pipe = pipeline_send_time(c, B, 1 if np.ndim(tp_i) else tp_i, pp, acc, dtype=act)
    t_launch = launch_time(c, pp=pp, cuda_graphs=cuda_graphs) if launch else 0.0
    zero = 0.0 * np.asarray(t_math)
    return Breakdown({"compute": _out(t_math + zero), "memory": _out(t_mem + zero),
                      "communication": _out(t_comm + zero), "pipeline": _out(t_pipe + zero),
                      "launch": _out(t_launch + zero)}, unit="s")


def decode_step_time(cfg, B, S, accelerator, n_devices=1, dtype="bf16", kv_dtype=None, *,
                     tp=1, link=None, pp=1, launch=False, cuda_graphs=True):
    """Time of one decode step (seconds): the one home of the time per output token.

    T = max(max(FLOPs / (n'·C), (w·W_read + r·KV) / (n'·W_hbm)) + T_comm + T_pipe, T_launch), with
    n' = n / pp the devices one token's work is spread over (pipeline stages run one after the
    other for a token, so pp stages give no latency back: they add memory and micro-batches),
    r = :func:`kv_replication` (kv heads copied when tp > K), T_comm = :func:`tp_decode_comm_time`
    (2L + 1 all-reduces over the tp group, not overlapped), T_pipe = :func:`pipeline_send_time`
    (pp sends per token; 0 when pp = 1), T_launch = :func:`launch_time` when ``launch`` (a
    floor: the CPU issues the next launches while the GPU works, so a step takes the longer of
    the two; it binds only for tiny models or eager launches of many small kernels).
    The default tp = 1, pp = 1, launch=False is the roofline bound of Chapter 8 (work split
    evenly over n, no communication). C is the peak of :func:`compute_dtype` (bf16 for
    weight-only int4). B is the batch one step carries (a micro-batch with pp > 1). Parts:
    :func:`decode_step_parts`.

    >>> round(decode_step_time("llama3-70b", 1, 8192, "h100", 8) * 1e3, 2)  # ms
    5.29
    >>> round(decode_step_time("llama3-70b", 1, 8192, "h100", 8, "int4") * 1e3, 2)  # int4 bytes
    1.32
    """
    p = decode_step_parts(cfg, B, S, accelerator, n_devices, dtype, kv_dtype, tp=tp, link=link,
                          pp=pp, launch=launch, cuda_graphs=cuda_graphs)
    work = np.maximum(p["compute"], p["memory"]) + p["communication"] + p["pipeline"]
    return _out(np.maximum(work, p["launch"]))


def pipeline_send_time(cfg, B, tp, pp, accelerator="h100", *, dtype="bf16"):
    """Point-to-point sends of one decode step through ``pp`` pipeline stages of ``tp`` devices.

    Each stage boundary sends the B tokens' activations, B·D·a bytes, to the next stage, and the
    last stage sends the sampled tokens back to the first: pp sends per token, each
    :func:`scaling_lib.collectives.send_recv_time` on the node's link, or on the scale-out link
    where the boundary crosses nodes (stages laid out node after node: a boundary after stage i
    crosses when (i+1)·tp is a multiple of the devices per node). 0 when pp = 1.

    >>> round(pipeline_send_time("llama3-405b", 1, 8, 2, "h100") * 1e6, 1)  # µs: 2 sends on IB
    11.3
    """
    c = _cfg(cfg)
    pp = int(check_count("pp", pp))
    tp = int(check_count("tp", tp))
    B = check_positive("B", B)
    if pp == 1:
        return _out(0.0 * np.asarray(B, dtype=float))
    cl = hardware.cluster(accelerator, tp * pp)
    per_node = cl.devices_per_node
    nbytes = np.asarray(B, dtype=float) * c.D * dtype_bytes(dtype)
    total = 0.0
    for i in range(pp):
        cross = tp * pp > per_node and ((i + 1) * tp) % per_node == 0
        link = cl.inter_node if cross else cl.intra_node
        total = total + collectives.send_recv_time(nbytes, link.bytes_per_s, link.latency)
    return _out(total)


def max_cached_tokens(cfg, accelerator, n_devices=1, dtype="bf16", kv_dtype=None):
    """Tokens of KV cache that fit in the HBM left after the weights, over ``n_devices``.

    (n · HBM - weight bytes) / (KV bytes per token); 0 when the weights alone do not fit.
    Activations and the framework's own reserve are left out, so real servers fit fewer.

    >>> int(max_cached_tokens("llama3-70b", "h100", 8))  # about 185 sequences of 8K tokens
    1522499
    """
    c = _cfg(cfg)
    acc = hardware.get(accelerator)
    n = check_count("n_devices", n_devices)
    free = n * acc.hbm_bytes - transformer.n_params(c) * dtype_bytes(dtype)
    per_token = transformer.kv_cache_bytes(c, 1, 1, kv_dtype or dtype)
    return _out(np.maximum(free, 0.0) / per_token)


def max_batch(cfg, S, accelerator, n_devices=1, dtype="bf16", kv_dtype=None):
    """The most sequences of S cached tokens whose caches fit next to the weights.

    ⌊max_cached_tokens / S⌋: a sequence's cache is whole or not there. Chapter 8's tables and
    prose both quote this number. An int, or an int array when S is an array.

    >>> max_batch("llama3-70b", 8192, "h100", 8)
    185
    """
    S = check_count("S", S, sweep=True)
    n = np.floor_divide(np.asarray(max_cached_tokens(cfg, accelerator, n_devices, dtype, kv_dtype)),
                        S).astype(int)
    return int(n) if n.ndim == 0 else n
