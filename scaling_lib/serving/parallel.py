"""Tensor-parallel decode: what a sharded decode step communicates and where its KV cache lives.

A decode step runs one new token per sequence through the model. Sharded Megatron-style over tp
devices (column-parallel wq, wk, wv, w_gate, w_up and output layer; row-parallel wo and w_down),
each device holds 1/tp of every weight matrix and the KV cache of its own heads, and the step
needs one all-reduce of the B new tokens' activations per block:

    all-reduce of B·D·a bytes, 2L times per step (+ 1 with a vocabulary-parallel embedding)

with a the bytes per activation element. Nothing else: attention over the cache is local to a
device because the cache is split by heads like the query heads that read it, and the logits
stay split over the vocabulary (sampling reads them where they are, or gathers B·V values, which
this count leaves out). With grouped-query attention and tp > K, each kv head is copied to the
tp/K devices whose query heads read it (:func:`scaling_lib.parallelism.tensor.kv_replication`):
more cache per device, no more communication.

:func:`scaling_lib.simulate.decode_step` runs this step on simulated devices, and the tests
check that its compiled collectives equal :func:`decode_collectives`.

See: Chapter "Case study: serving Llama 3", "A real sharded decode step".
"""

from __future__ import annotations

import numpy as np

from .. import hardware, inference, models, transformer
from ..parallelism.comms import Comm, element_bytes
from ..parallelism.tensor import kv_replication
from ..units import _brief, check_count, check_fraction, check_int, check_positive, dtype_bytes

__all__ = ["GPT4_CLASS_ASSUMED", "H100_NVL_HBM_BYTES", "VLLM_MEMORY_UTILIZATION",
           "check_decode_tp", "decode_collectives", "decode_comm_bytes", "front",
           "kv_cache_bytes_per_device", "memory_per_device", "smallest_topology", "topologies"]


def check_decode_tp(cfg, tp) -> int:
    """tp as an int if every split of a decode step works over it, else ValueError naming why.

    tp must divide the N query heads, divide or be a multiple of the K kv heads, and divide F
    and V (the MLP and the output layer are split by columns).

    >>> check_decode_tp("llama3-70b", 8)
    8
    >>> check_decode_tp("llama3-70b", 3)
    Traceback (most recent call last):
    ...
    ValueError: tp=3 must divide N=64 query heads and divide or be a multiple of K=8 kv heads; choose tp in [1, 2, 4, 8, 16, 32, 64]
    """
    c = models.get(cfg)
    tp = check_int("tp", tp, maximum=2**24)
    kv_replication(c, tp)  # raises with the valid choices
    if c.is_moe:
        raise ValueError(f"{c.name or 'cfg'} is an MoE model (E={c.E}); the tensor-parallel "
                         "decode here covers dense models")
    for name, dim in (("F", c.F), ("V", c.V)):
        if dim % tp:
            raise ValueError(f"tp={tp} does not divide {name}={dim} (the {name} dimension is "
                             "split by columns); choose a tp that divides it")
    return tp


def decode_collectives(cfg, tp, B, dtype="bf16", *, vocab_parallel_embedding=True) -> list[Comm]:
    """The collectives one device takes part in during a tensor-parallel decode step.

    One all-reduce of the B new tokens' activations (V = B·D·a bytes) after each layer's
    attention and MLP, 2L in all, plus one after a vocabulary-parallel embedding lookup (each
    device holds V/tp rows and contributes the rows it owns). None when tp = 1. The count does
    not depend on the context length: the KV cache never moves.

    Args: cfg (preset name or TransformerConfig), tp (devices), B (sequences), dtype (of the
    activations: "bf16", "f32", ...), vocab_parallel_embedding (False: the table replicated).

    >>> [(c.kind, c.group_size, c.nbytes, c.count) for c in decode_collectives("llama3-70b", 8, 4)]
    [('all-reduce', 8, 65536.0, 161)]

    See: Chapter "Case study: serving Llama 3", "A real sharded decode step".
    """
    c = models.get(cfg)
    tp = check_decode_tp(c, tp)
    B = check_count("B", B)
    if np.ndim(B):
        raise ValueError(f"B={_brief(B)} must be a single number of sequences")
    if tp == 1:
        return []
    n = inference.tp_decode_all_reduces(c, vocab_parallel_embedding=vocab_parallel_embedding)
    return [Comm("all-reduce", "tp", tp, float(B * c.D * element_bytes(dtype)), n, "forward",
                 False)]


def decode_comm_bytes(cfg, tp, B, dtype="bf16", *, vocab_parallel_embedding=True) -> float:
    """Total V·count of :func:`decode_collectives`: the all-reduced bytes of one decode step.

    >>> decode_comm_bytes("llama3-70b", 8, 1) / 1e6  # 161 x 16 KiB
    2.637824
    """
    return float(sum(x.nbytes * x.count for x in decode_collectives(
        cfg, tp, B, dtype, vocab_parallel_embedding=vocab_parallel_embedding)))


def kv_cache_bytes_per_device(cfg, tp, B, S, kv_dtype="bf16") -> float:
    """KV cache bytes one device holds (one home: :func:`scaling_lib.serving.layout.
    kv_cache_bytes_per_device`), for a single B and S, after :func:`check_decode_tp`.

    >>> kv_cache_bytes_per_device("llama3-70b", 16, 1, 1000) / 1e6  # tp > K: still one head
    40.96
    """
    from .layout import kv_cache_bytes_per_device as per_device

    c = models.get(cfg)
    tp = check_decode_tp(c, tp)
    if np.ndim(B) or np.ndim(S):
        raise ValueError(f"B={_brief(B)} and S={_brief(S)} must be single numbers")
    return float(per_device(c, tp, B, S, kv_dtype))


# ---- sizing a deployment: topologies, the smallest one that fits, the front --------------------
# (the best batch for one topology is scaling_lib.serving.best_batch)
# Cloud TPU v5e and v6e slice shapes on offer: 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16 (Google
# Cloud TPU documentation, "TPU v5e" and "TPU v6e", supported topologies).
_TPU_2D_SLICES = (1, 4, 8, 16, 32, 64, 128, 256)
# A framework keeps part of the HBM for itself: vLLM preallocates gpu_memory_utilization = 0.9 of
# it by default (vLLM documentation, engine arguments). Used by the chapter as its stated choice.
VLLM_MEMORY_UTILIZATION = 0.9
# HBM of GPUs that the library has no preset for, to correct a common mistake: the H100 NVL
# (the dual-card PCIe part) has 94 GB per GPU, the H100 SXM 80 GB (NVIDIA H100 Tensor Core GPU
# datasheet, "H100 SXM" and "H100 NVL" columns).
H100_NVL_HBM_BYTES = 94e9

# A "GPT-4-class" model: UNCONFIRMED. OpenAI has published no architecture for GPT-4. This shape
# follows public estimates (D. Patel and G. Wong, "GPT-4 Architecture, Infrastructure, Training
# Dataset, Costs, Vision, MoE", SemiAnalysis, July 2023: about 1.8T parameters in 120 layers, 16
# experts with 2 routed per token, about 280B active). D, N, K, H and F are our own choices to
# land on those totals (K = 8 is grouped-query attention: the report says multi-query, K = 1,
# which would make the cache 8 times smaller); V is the cl100k_base tokenizer's 100,277 tokens
# padded to a multiple of 1,024.
GPT4_CLASS_ASSUMED = models.TransformerConfig(
    L=120, D=16384, F=18432, N=128, K=8, H=128, V=100352, E=16, k=2, name="gpt4-class (assumed)",
    source="unconfirmed public estimates (SemiAnalysis, July 2023); shape chosen to match them")


def topologies(accelerator, max_devices=None) -> list[int]:
    """Device counts a deployment on ``accelerator`` can take, smallest first.

    2D TPUs (v5e, v6e): the slice sizes on offer, 1, 4, 8, 16, 32, 64, 128, 256 (1x1 ... 16x16).
    Other TPUs and GPUs: powers of two, 1, 2, 4, 8 inside a node (GPUs) and then whole nodes,
    up to ``max_devices`` (default 256 for 2D TPUs, 1024 otherwise).

    >>> topologies("tpu-v5e", 64), topologies("h100", 32)
    ([1, 4, 8, 16, 32, 64], [1, 2, 4, 8, 16, 32])
    """
    acc = hardware.get(accelerator)
    two_d = acc.kind == "tpu" and acc.name in ("tpu-v5e", "tpu-v6e")
    top = (256 if two_d else 1024) if max_devices is None else check_int(
        "max_devices", max_devices, maximum=2**24)
    if two_d:
        return [n for n in _TPU_2D_SLICES if n <= top]
    return [2**i for i in range(0, 25) if 2**i <= top]


def memory_per_device(cfg, n_devices, *, dtype="bf16", kv_dtype=None, batch=0, context=0,
                      tp=None, pp=None):
    """Weights plus KV cache per device (bytes) on n devices: the least over the layouts of
    n (or the given tp / pp) that hold the ``batch`` sequences in one copy of the model
    (replicas = 1): n_params·w/(tp·pp) + :func:`scaling_lib.serving.kv_cache_bytes_per_device`
    (heads split, kv heads copied when tp > K, layers over stages).

    >>> round(memory_per_device("llama3-70b", 8, batch=16, context=4096) / 1e9, 2)
    20.32
    """
    from .layout import kv_cache_bytes_per_device as kv_per_device, layouts, weight_bytes_per_device

    c = models.get(cfg)
    n = check_int("n_devices", n_devices, maximum=2**24)
    batch = check_count("batch", batch, minimum=0)
    context = check_count("context", context, minimum=0)
    if np.ndim(batch) or np.ndim(context):
        raise ValueError(f"batch={_brief(batch)} and context={_brief(context)} must be single "
                         "numbers")
    best = None
    for lay in layouts(c, _ACC_FOR_LAYOUTS, n, tp=tp, pp=pp, replicas=1) if (tp or pp) else \
            _all_splits(c, n):
        kv = float(kv_per_device(c, lay.tp, batch, context, kv_dtype or dtype, pp=lay.pp)) \
            if batch and context else 0.0
        need = weight_bytes_per_device(c, lay.tp, lay.pp, dtype) + kv
        best = need if best is None else min(best, need)
    return float(best)


_ACC_FOR_LAYOUTS = "h100"  # given tp/pp are checked against the heads; the machine is not used


def _all_splits(c, n):
    """Every (tp, pp) with tp·pp = n the heads and layers allow (one copy of the model)."""
    from .layout import Layout, tp_choices

    out = [Layout(t, n // t, 1) for t in tp_choices(c) if n % t == 0 and n // t <= c.L]
    if not out:
        raise ValueError(f"n_devices={n} has no split tp·pp the model allows: tp in "
                         f"{tp_choices(c)}, pp <= L={c.L}")
    return out


def smallest_topology(cfg, accelerator, *, dtype="bf16", kv_dtype=None, batch=0, context=0,
                      usable=1.0, max_devices=None):
    """The fewest devices among :func:`topologies` that hold the model and a KV budget.

    Some layout of n (tp·pp = n, tp among the degrees the heads allow, pp stages across nodes,
    :func:`memory_per_device`) must fit in usable·HBM. ``usable`` is the fraction of HBM the
    framework leaves to weights and cache (e.g. :data:`VLLM_MEMORY_UTILIZATION`). Returns None
    when no topology up to ``max_devices`` fits. Compare :func:`scaling_lib.serving.min_devices`,
    the floor ⌈bytes / HBM⌉ before rounding up to a topology.

    >>> smallest_topology("llama3-70b", "h100"), smallest_topology("llama3-70b", "tpu-v5e")
    (2, 16)
    >>> smallest_topology("llama3-405b", "h100", dtype="fp8")  # 405 GB: a whole node
    8

    See: Chapter "Case study: serving Llama 3", "The smallest topology".
    """
    c = models.get(cfg)
    acc = hardware.get(accelerator)
    use = check_fraction("usable", usable)
    for n in topologies(acc, max_devices):
        try:
            need = memory_per_device(c, n, dtype=dtype, kv_dtype=kv_dtype, batch=batch,
                                     context=context)
        except ValueError:
            continue
        if need <= use * acc.hbm_bytes:
            return n
    return None


def front(cfg, accelerator, device_counts, batches, *, prompt_len, gen_len, dtype="bf16",
          kv_dtype=None, prefill_mfu=0.4, price_per_device_hour=None, prefill="chunked") -> dict:
    """Every (devices, layout, batch) point that fits, with its latency, throughput and cost,
    and which of them are on the latency-throughput Pareto front.

    For each device count, every layout :func:`scaling_lib.serving.layouts` allows (tp inside
    the scale-up domain, pp stages, replicas) at every batch (the whole deployment's). Returns a
    dict of 1-D numpy arrays: n, tp, pp, replicas, batch, tpot (s), ttft (s), tokens_per_s
    (output tokens/s of the system), per_device (tokens/s per device), cost (dollars per
    million output tokens; only with a price) and pareto (True on the front of tpot against
    tokens/s per device: no other point is both faster per token and cheaper per device).

    >>> f = front("llama3-70b", "h100", [8], [1, 64], prompt_len=1024, gen_len=256)
    >>> sorted(set(zip(f["tp"][f["pareto"]].tolist(), f["batch"][f["pareto"]].tolist())))[:2]  # (tp, batch)
    [(4, 64), (8, 1)]
    """
    from . import estimator as est
    from .layout import layouts
    from .sizing import pareto_mask

    keys = ("n", "tp", "pp", "replicas", "batch", "tpot", "ttft", "tokens_per_s", "per_device",
            "cost")
    rows = {k: [] for k in keys}
    counts = [check_int("device_counts", n, maximum=2**24) for n in np.atleast_1d(
        np.asarray(device_counts, dtype=object)).ravel()]
    B = np.atleast_1d(np.asarray(check_count("batches", batches))).astype(np.int64)
    if B.ndim != 1 or not counts or B.size * len(counts) > 4096:
        raise ValueError(f"batches={_brief(batches)} and device_counts={_brief(device_counts)} "
                         "must be 1-D lists, at most 4096 (devices, batch) points in all")
    for n in counts:
        for lay in layouts(cfg, accelerator, int(n)):
            keep = B >= lay.replicas  # every replica holds a sequence
            if not keep.any():
                continue
            Bk = B[keep]
            e = est.estimate(cfg, accelerator, int(n), batch=Bk, prompt_len=prompt_len,
                             gen_len=gen_len, dtype=dtype, kv_dtype=kv_dtype,
                             prefill_mfu=prefill_mfu, price_per_device_hour=price_per_device_hour,
                             tp=lay.tp, pp=lay.pp, replicas=lay.replicas, prefill=prefill)
            fits = np.atleast_1d(e.fits)
            cost = e.cost_per_million_tokens
            cols = {"n": int(n), "tp": lay.tp, "pp": lay.pp, "replicas": lay.replicas,
                    "batch": Bk, "tpot": e.tpot, "ttft": e.ttft, "tokens_per_s": e.tokens_per_s,
                    "per_device": e.tokens_per_s_per_device, "cost": 0.0 if cost is None else cost}
            for k, v in cols.items():
                rows[k].append(np.broadcast_to(np.atleast_1d(v), Bk.shape)[fits])
    out = {k: np.concatenate(v) if v else np.array([]) for k, v in rows.items()}
    if price_per_device_hour is None:
        del out["cost"]
    out["pareto"] = pareto_mask(out["tpot"], out["per_device"]) if out["n"].size \
        else np.array([], dtype=bool)
    return out
