"""Serving mechanisms (Part VI): what a decode step reads, a chunked-prefill iteration, a
serving layout across nodes, and disaggregated prefill and decode.

Every size and time comes from the serving model (:mod:`scaling_lib.inference`,
:mod:`scaling_lib.serving`): the bytes a decode step reads (``inference.decode_bytes``), the
mixed iteration of chunked prefill (``serving.mixed_step_parts``), the layout's all-reduces and
pipeline sends (``inference.tp_decode_all_reduces``, ``transformer`` shapes), the KV transfer of
a disaggregated server (``serving.sim.kv_transfer_time``).

See: the chapters "Serving at scale" and "Case study: serving Llama 3".
"""

from __future__ import annotations

import numpy as np

from ._style import LINE, PALETTE, arrow, box, canvas, fmt, label, new_axes, set_alt, shard_colour


def decode_reads(model="llama3-70b", batch=4, context=8192, *, dtype="bf16", ax=None):
    """One decode step's HBM reads for ``batch`` sequences: the weights once, shared by every
    sequence, and each sequence's own KV cache, drawn to scale (bytes from
    ``inference.decode_bytes``). Returns ax."""
    from ... import inference, models

    c = models.get(model)
    B = int(batch)
    if not 1 <= B <= 8:
        raise ValueError(f"batch={batch}: draw 1 to 8 sequences")
    one = inference.decode_bytes(c, 1, context, dtype)
    w, kv1 = float(one["weights"]), float(one["kv cache"])
    ax = new_axes(ax, (10, 1.6 + 0.45 * B))
    width = 9.0
    scale = width / max(w, B * kv1)
    canvas(ax, (-2.6, width + 3.2), (-0.7 * B - 1.4, 1.5),
           f"{c.name}: one decode step of {B} sequences at {context:,} tokens of context",
           equal=False)
    box(ax, 0, 0.4, w * scale, 0.6, f"weights {fmt(w)}: read once, used by all {B}",
        fill=PALETTE["params"], fontsize=7)
    label(ax, -0.2, 0.7, "shared", ha="right", fontsize=7)
    for s in range(B):
        y = -0.7 * s - 0.6
        label(ax, -0.2, y + 0.25, f"seq {s}", ha="right", fontsize=7)
        box(ax, 0, y, max(kv1 * scale, 0.05), 0.5, "", fill=shard_colour(s + 1))
        label(ax, max(kv1 * scale, 0.05) + 0.15, y + 0.25, f"its own KV cache {fmt(kv1)}",
              ha="left", fontsize=7)
    from ...units import dtype_bytes
    a = dtype_bytes(dtype)
    i_w, i_kv = 2 * B / a, 2 * c.N / (c.K * a)   # FLOPs per byte of each read
    label(ax, width / 2, -0.7 * B - 0.9,
          f"weights: {i_w:g} FLOPs per byte (2B/a: grows with the batch); KV cache: "
          f"{i_kv:g} FLOPs per byte in any batch (2N/(K·a), N/K = {c.N}/{c.K})", fontsize=7)
    set_alt(ax, f"A bar for the {fmt(w)} of {c.name} weights, read once per decode step and "
            f"shared by all {B} sequences, above {B} small bars, one per sequence, for each "
            f"sequence's own {fmt(kv1)} KV cache at {context:,} tokens: the weight read is "
            f"amortised over the batch, the cache reads are not.")
    return ax


def chunked_prefill_timeline(model="llama3-70b", accelerator="h100", tp=8, *, batch=64,
                             context=1152, prompt_len=4096, chunk_tokens=512, ax=None):
    """Two timelines to scale: a ``prompt_len`` prompt joining ``batch`` decoding sequences
    prefilled in one iteration (the others stall) and in chunks that ride with the decode
    tokens (each iteration one mixed batch, ``serving.mixed_step_parts``). Returns ax."""
    from ...serving.estimator import mixed_step_parts

    kw = dict(decode_batch=batch, context=context, prompt_len=prompt_len)
    t_dec = float(mixed_step_parts(model, accelerator, tp, prefill_tokens=0, **kw)["time"])
    t_all = float(mixed_step_parts(model, accelerator, tp, prefill_tokens=prompt_len,
                                   **kw)["time"])
    c = min(int(chunk_tokens), int(prompt_len))
    n_ch = -(-int(prompt_len) // c)
    t_ch = float(mixed_step_parts(model, accelerator, tp, prefill_tokens=c, **kw)["time"])
    t_last = float(mixed_step_parts(model, accelerator, tp,
                                    prefill_tokens=prompt_len - (n_ch - 1) * c, **kw)["time"])
    if n_ch > 24:
        raise ValueError(f"chunk_tokens={chunk_tokens}: {n_ch} chunks; draw at most 24")
    pre = 3
    total = max(pre * t_dec + t_all, pre * t_dec + (n_ch - 1) * t_ch + t_last) + 3 * t_dec
    ax = new_axes(ax, (11, 3.2))
    sx = 10.0 / total
    canvas(ax, (-2.4, 10.6), (-1.5, 2.4),
           f"a {prompt_len:,}-token prompt joins {batch} decoding sequences ({model}, tp={tp})",
           equal=False)
    rows = (("one prefill", 1.2), (f"chunks of {c}", 0.0))
    for name, y in rows:
        label(ax, -0.15, y + 0.3, name, ha="right", fontsize=8)
    x = 0.0
    for _ in range(pre):
        for _, y in rows:
            box(ax, x * sx, y, t_dec * sx, 0.6, "", fill=PALETTE["params"], lw=0.5)
        x += t_dec
    start = x
    box(ax, x * sx, 1.2, t_all * sx, 0.6, f"whole prompt: {t_all * 1e3:.0f} ms",
        fill=PALETTE["activations"], fontsize=7)
    first_a = x + t_all
    xa = first_a
    while xa + t_dec <= total:
        box(ax, xa * sx, 1.2, t_dec * sx, 0.6, "", fill=PALETTE["params"], lw=0.5)
        xa += t_dec
    xb = start
    for i in range(n_ch):
        t = t_ch if i < n_ch - 1 else t_last
        box(ax, xb * sx, 0.0, t * sx, 0.6, "", fill=PALETTE["activations"], lw=0.5)
        box(ax, xb * sx, 0.0, t * sx, 0.18, "", fill=PALETTE["params"], lw=0.3)
        xb += t
    first_b = xb
    while xb + t_dec <= total:
        box(ax, xb * sx, 0.0, t_dec * sx, 0.6, "", fill=PALETTE["params"], lw=0.5)
        xb += t_dec
    for xf, y in ((first_a, 1.2), (first_b, 0.0)):
        ax.plot([xf * sx], [y + 0.75], marker="v", color=PALETTE["comm"], ms=7)
    label(ax, first_a * sx, 2.1, f"first token after {(first_a - start) * 1e3:.0f} ms",
          fontsize=7)
    label(ax, first_b * sx, -0.35, f"first token after {(first_b - start) * 1e3:.0f} ms",
          fontsize=7)
    label(ax, 5.0, -1.15,
          f"blue: decode step {t_dec * 1e3:.1f} ms (the others' token); pink: prompt tokens. "
          f"Others wait {t_all * 1e3:.0f} ms once, or {t_ch * 1e3:.1f} ms per mixed iteration "
          f"({n_ch} of them)", fontsize=7)
    set_alt(ax, f"Two timelines to scale. Top: decode steps of {t_dec * 1e3:.1f} ms, then the "
            f"whole {prompt_len:,}-token prompt in one {t_all * 1e3:.0f} ms iteration during "
            f"which the {batch} running sequences get no token. Bottom: the prompt in {n_ch} "
            f"chunks of {c} tokens, each riding in one mixed iteration of {t_ch * 1e3:.1f} ms "
            f"with the decode tokens, so the running sequences keep getting tokens and the new "
            f"request's first token comes a little later.")
    return ax


def serving_layout(model="llama3-405b", accelerator="h100", tp=8, pp=2, *, ax=None):
    """A tp x pp serving layout: pp nodes (stages of L/pp layers), tp devices per node joined by
    the node's switch for the all-reduces, one pipeline send per token across nodes.
    Returns ax."""
    from ... import hardware, inference, models
    from ...serving import layout as lay

    c = models.get(model)
    tp, pp = lay.check_tp(c, tp), lay._check_pp(c, pp)
    if pp > 4 or tp > 16:
        raise ValueError(f"tp={tp}, pp={pp}: draw at most 4 stages of at most 16 devices")
    per_node = lay.scale_up_domain(accelerator)
    acc = hardware.get(accelerator)
    w_dev = lay.weight_bytes_per_device(c, tp, pp)
    n_ar = inference.tp_decode_all_reduces(c)
    ax = new_axes(ax, (10, 0.8 + 1.2 * pp))
    canvas(ax, (-0.5, 10.5), (-1.6 * pp + 0.2, 0.1),
           f"{c.name} on {tp * pp} x {acc.name}: tp={tp} inside each node, pp={pp} across nodes",
           equal=False)
    layers = [c.L // pp + (1 if i < c.L % pp else 0) for i in range(pp)]
    first = 0
    for s in range(pp):
        y = -1.6 * s - 1.0
        box(ax, 0, y - 0.15, 7.6, 1.2, "", fill="white", edge=LINE, lw=1.0, rounded=True)
        label(ax, 0.1, y + 0.9, f"node {s}: stage {s}, layers {first}-{first + layers[s] - 1}",
              ha="left", fontsize=7)
        first += layers[s]
        wdt = 7.2 / tp
        for d in range(tp):
            box(ax, 0.2 + d * wdt, y, wdt * 0.9, 0.55, f"{d}" if tp <= 16 else "",
                fill=shard_colour(s), fontsize=6)
        label(ax, 8.9, y + 0.3, f"{2 * layers[s] + (n_ar - 2 * c.L if s == 0 else 0)} all-reduces\nper step on "
              f"{'NVLink' if tp <= per_node else 'the network'}", fontsize=6)
        if s < pp - 1:
            arrow(ax, (3.8, y - 0.15), (3.8, y - 0.45), colour=PALETTE["comm"],
                  label=f"send B·D activations ({fmt(c.D * 2)} per token)", fontsize=6)
    set_alt(ax, f"{pp} nodes stacked, each a pipeline stage holding about {c.L // pp} of the "
            f"{c.L} layers of {c.name} split over {tp} devices ({fmt(w_dev)} of weights each) "
            f"that all-reduce over the node's own switch; between nodes one arrow per stage "
            f"boundary carries each token's activations, the only traffic that crosses the "
            f"network.")
    return ax


def disaggregated(model="llama3-70b", accelerator="h100", *, prompt_len=1024, gen_len=256,
                  batch=64, n_devices=8, ax=None):
    """Disaggregated serving: a pool of prefill servers sends each prompt's KV cache to the
    decode servers, in the ratio ``serving.prefill_decode_ratio`` (times from
    ``serving.estimate``, transfer from ``serving.sim.kv_transfer_time``). Returns ax."""
    import math

    from ... import models, serving, transformer
    from ...serving import sim

    c = models.get(model)
    pre = serving.estimate(c, accelerator, n_devices, batch=1, prompt_len=prompt_len,
                           gen_len=gen_len)
    dec = serving.estimate(c, accelerator, n_devices, batch=batch, prompt_len=prompt_len,
                           gen_len=gen_len)
    ratio = float(serving.prefill_decode_ratio(pre.ttft, dec.tpot, batch, gen_len))
    n_pre = min(max(math.ceil(ratio), 1), 4)
    kv = float(transformer.kv_cache_bytes(c, 1, prompt_len))
    t_x = float(sim.kv_transfer_time(c, prompt_len, accelerator))
    ax = new_axes(ax, (10, 3.4))
    canvas(ax, (-0.5, 10.5), (-0.6, 3.6),
           f"disaggregated serving of {c.name}: {ratio:.2f} prefill servers per decode server",
           equal=False)
    box(ax, -0.3, 3.0, 1.3, 0.4, "requests", fill=PALETTE["free"], fontsize=7)
    for i in range(n_pre):
        y = 2.6 - i * 0.75
        box(ax, 1.4, y, 2.6, 0.55, f"prefill server {i}: {pre.ttft * 1e3:.0f} ms/prompt",
            fill=PALETTE["activations"], fontsize=6)
        arrow(ax, (1.0, 3.2), (1.4, y + 0.27), colour=LINE, lw=0.7)
        arrow(ax, (4.0, y + 0.27), (6.4, 1.5), colour=PALETTE["comm"], lw=1.0)
    label(ax, 5.2, 2.7, f"KV cache of each prompt\n{fmt(kv)} in {t_x * 1e3:.1f} ms",
          fontsize=7)
    box(ax, 6.4, 0.9, 3.3, 1.2, f"decode server\n{batch} sequences, {dec.tpot * 1e3:.1f} ms "
        f"per token", fill=PALETTE["params"], fontsize=7)
    arrow(ax, (9.7, 1.5), (10.3, 1.5), colour=LINE, lw=0.8)
    label(ax, 5.0, -0.3, f"balance: B·TTFT/(G·TPOT) = {batch}·{pre.ttft * 1e3:.0f} ms/"
          f"({gen_len}·{dec.tpot * 1e3:.1f} ms) = {ratio:.2f}", fontsize=7)
    set_alt(ax, f"Requests enter {n_pre} prefill server(s) of {n_devices} devices, each taking "
            f"{pre.ttft * 1e3:.0f} ms per {prompt_len:,}-token prompt; each prompt's "
            f"{fmt(kv)} KV cache moves over the network in {t_x * 1e3:.1f} ms to a decode server "
            f"running {batch} sequences at {dec.tpot * 1e3:.1f} ms per token; {ratio:.2f} "
            f"prefill servers keep one decode server full.")
    return ax


__all__ = ["decode_reads", "chunked_prefill_timeline", "serving_layout", "disaggregated"]
