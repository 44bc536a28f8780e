"""Layer-by-layer schedules of a data-parallel step: DDP's gradient buckets, FSDP's prefetch.

Built on the step-time model: each layer computes 1/L of the forward or backward compute time
``parallelism.estimate`` gives the step (through
:func:`~scaling_lib.parallelism.steptime.step_time`),
and each collective takes what the estimator
charges for it, :func:`scaling_lib.parallelism.links.group_time` at the calibration's link
efficiencies and latencies (one hierarchical collective: its NVLink phases, then its NIC phase).
The schedules are lists of events (stream, label, start, end) in seconds, for
``widgets.parallelism.plot_timeline`` and ``course.diagrams.ddp_buckets`` / ``fsdp_prefetch``.

See: the chapter "Data parallelism, ZeRO/FSDP and HSDP".
"""

from __future__ import annotations

from .. import hardware, models, transformer
from ..units import check_count, check_positive
from .comms import element_bytes
from .plan import ParallelPlan
from .steptime import _calibration, _one


def _phase_times(cfg, cluster, plan, B, T, dtype, efficiency, flash_attention) -> dict:
    """Forward and backward compute seconds of the step as the estimator counts them
    (:func:`~scaling_lib.parallelism.steptime.step_time`'s ``compute``: the estimate's compute
    time split by the phases' FLOPs)."""
    from .steptime import step_time

    return step_time(cfg, cluster, plan, B, T, dtype=dtype, efficiency=efficiency,
                     flash_attention=flash_attention).compute


def _collective_time(kind, nbytes, dp, cluster, cal) -> float:
    """Seconds of one ``kind`` of V = ``nbytes`` over ``dp`` consecutive devices, as the
    estimator times it (:func:`scaling_lib.parallelism.links.group_time`)."""
    from .links import group_time

    return float(group_time(kind, nbytes, dp, 1, cluster, cal)) if dp > 1 else 0.0


def _check_sizes(cluster, dp, tokens_per_device, T):
    """The cluster (a Cluster or a preset name), after checking dp, tokens and T."""
    _one(check_count, "dp", dp)
    _one(check_positive, "tokens_per_device", tokens_per_device)
    _one(check_count, "T", T)
    return hardware.get_cluster(cluster)


def layer_params(cfg) -> float:
    """Parameters of one transformer layer: all but the embedding and output layer, over L.

    >>> layer_params("llama3-8b")  # 2D(N+K)H + 3DF + 2D
    218112128.0
    """
    cfg = models.get(cfg)
    pc = transformer.param_count(cfg)
    return (pc.total - pc["embedding"] - pc["unembedding"]) / cfg.L


def ddp_bucket_bytes(cfg, *, bucket_bytes=25e6, dtype="bf16") -> list:
    """DDP's gradient buckets in the order they become ready: (first layer, last layer, bytes).

    Layers back to front; the output layer's gradient (the unembedding, ready first) joins the
    first bucket, the input embedding's (ready last) the last. A bucket closes at the first
    layer boundary where it holds at least ``bucket_bytes``, so layers larger than the cap give
    one bucket per layer.

    >>> b = ddp_bucket_bytes("llama3-8b")
    >>> len(b), b[0][:2], b[-1][:2], round(b[1][2] / 1e6)  # 32 layers of 436 MB
    (32, (31, 31), (0, 0), 436)
    """
    cfg = models.get(cfg)
    _one(check_positive, "bucket_bytes", bucket_bytes)  # DDP's default: 25e6
    a = element_bytes(dtype)
    per_layer = layer_params(cfg) * a
    pc = transformer.param_count(cfg)
    out_layer, emb = pc["unembedding"] * a, pc["embedding"] * a  # tied: unembedding is 0
    out, bucket, first = [], 0.0, None
    for i, layer in enumerate(reversed(range(cfg.L))):
        bucket += per_layer + (out_layer if i == 0 else 0.0) + (emb if layer == 0 else 0.0)
        first = layer if first is None else first
        if bucket >= bucket_bytes or layer == 0:
            out.append((first, layer, bucket))
            bucket, first = 0.0, None
    return out


def ddp_timeline(cfg, cluster, dp, tokens_per_device, T, *, bucket_bytes=25e6, dtype="bf16",
                 efficiency=None, flash_attention=True) -> list:
    """PyTorch DDP's backward pass: layers back to front, gradients all-reduced in buckets.

    Each layer's backward takes 1/L of the backward compute (the output layer's, which runs
    first, is folded into the last layer's); the output layer's gradient is therefore in the
    first bucket and the input embedding's in the last. Buckets are made of whole layers: one
    closes at the first layer boundary where it holds at least ``bucket_bytes`` (DDP's 25 MB
    default), so a model whose layers are larger than the cap gets one bucket per layer (PyTorch
    would cut a layer into several buckets by tensor; the bytes and the last bucket's exposure
    are what matter here). Each bucket is all-reduced over ``dp`` ranks as soon as its last layer
    is done and the network is free, and takes what the estimator charges for it
    (:func:`_collective_time`). ``efficiency`` is the fraction of peak FLOP/s (None: the
    calibration's η_c). Returns events (stream, label, start, end) in seconds; the step's
    backward ends with the last event. ``flash_attention`` counts the attention FlashAttention
    recomputes in the backward pass, as :func:`~scaling_lib.parallelism.steptime.step_time` does.

    >>> ev = ddp_timeline("llama3-8b", hardware.cluster("h100", 8), 8, 8192, 4096)
    >>> ev[0][:2], ev[-1][0]
    (('compute', 'backward L31'), 'network')
    """
    cfg = models.get(cfg)
    cluster = _check_sizes(cluster, dp, tokens_per_device, T)
    plan = ParallelPlan(dp=dp)
    cal = _calibration(efficiency)
    B = tokens_per_device * dp / T
    bwd = _phase_times(cfg, cluster, plan, B, T, dtype, efficiency, flash_attention)["backward"]
    events, t, net_free = [], 0.0, 0.0
    buckets = {last: (first, nbytes) for first, last, nbytes in
               ddp_bucket_bytes(cfg, bucket_bytes=bucket_bytes, dtype=dtype)}
    for layer in reversed(range(cfg.L)):
        events.append(("compute", f"backward L{layer}", t, t + bwd / cfg.L))
        t += bwd / cfg.L
        if layer in buckets:
            first, nbytes = buckets[layer]
            ar = _collective_time("all-reduce", nbytes, dp, cluster, cal)
            start = max(t, net_free)
            events.append(("network", f"all-reduce L{first}-L{layer}", start, start + ar))
            net_free = start + ar
    return events


def fsdp_timeline(cfg, cluster, dp, tokens_per_device, T, *, dtype="bf16", efficiency=None,
                  n_layers=None, flash_attention=True) -> list:
    """FSDP's step, layer by layer: gather weights one layer ahead, reduce-scatter gradients.

    Forward: the all-gather of layer l+1 runs while layer l computes. Backward (layers back to
    front): layer l's weights are re-gathered while layer l+1 computes its backward, and layer
    l+1's gradients are reduce-scattered meanwhile, so in the steady state three things overlap:
    backward of l, reduce-scatter of l+1, all-gather of l-1. Gathers and reduce-scatters run on
    separate streams of the same network (FSDP2's), each its own resource here. Only the first
    ``n_layers`` layers are drawn (default all); ``efficiency`` and ``flash_attention`` as in
    :func:`ddp_timeline`, each collective timed as the estimator times it.
    Returns events (stream, label, start, end).

    >>> ev = fsdp_timeline("llama3-8b", hardware.cluster("h100", 8), 8, 8192, 4096, n_layers=4)
    >>> sorted({e[0] for e in ev})
    ['all-gather', 'compute', 'reduce-scatter']
    """
    cfg = models.get(cfg)
    cluster = _check_sizes(cluster, dp, tokens_per_device, T)
    L = cfg.L if n_layers is None else int(_one(check_count, "n_layers", n_layers))
    if not 1 <= L <= cfg.L:
        raise ValueError(f"n_layers={n_layers!r} must be between 1 and L={cfg.L}")
    plan = ParallelPlan(dp=dp, zero=3)
    cal = _calibration(efficiency)
    B = tokens_per_device * dp / T
    ct = _phase_times(cfg, cluster, plan, B, T, dtype, efficiency, flash_attention)
    f, b = ct["forward"] / cfg.L, ct["backward"] / cfg.L
    V = layer_params(cfg) * element_bytes(dtype)
    ag = _collective_time("all-gather", V, dp, cluster, cal)
    rs = _collective_time("reduce-scatter", V, dp, cluster, cal)
    ev = []
    comp, ag_free, rs_free = 0.0, 0.0, 0.0
    gathered = {}
    ag_free = ag
    ev.append(("all-gather", "gather L0", 0.0, ag))
    gathered[0] = ag
    for layer in range(L):  # forward
        start = max(comp, gathered[layer])
        if layer + 1 < L:  # prefetch the next layer while this one computes
            s = max(ag_free, start)
            ev.append(("all-gather", f"gather L{layer + 1}", s, s + ag))
            gathered[layer + 1] = ag_free = s + ag
        ev.append(("compute", f"forward L{layer}", start, start + f))
        comp = start + f
    s = max(ag_free, comp - f)  # the last layer's weights are re-gathered first for backward
    ev.append(("all-gather", f"re-gather L{L - 1}", s, s + ag))
    regathered = {L - 1: s + ag}
    ag_free = s + ag
    for layer in reversed(range(L)):  # backward
        start = max(comp, regathered[layer])
        if layer > 0:
            s = max(ag_free, start)
            ev.append(("all-gather", f"re-gather L{layer - 1}", s, s + ag))
            regathered[layer - 1] = ag_free = s + ag
        ev.append(("compute", f"backward L{layer}", start, start + b))
        comp = start + b
        s = max(rs_free, comp)
        ev.append(("reduce-scatter", f"reduce-scatter L{layer}", s, s + rs))
        rs_free = s + rs
    return ev
