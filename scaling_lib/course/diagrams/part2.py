"""Diagrams of Part II (counting FLOPs, training memory, MFU, inference basics).

:func:`backward_matmuls` draws the one forward matmul of a weight and the two the backward pass
adds; :func:`flash_attention_tiles` the score matrix FlashAttention walks block by block;
:func:`grad_accumulation` the two ways ZeRO-2/3 accumulate gradients over micro-batches;
:func:`mfu_ledger` where a step's peak FLOPs go; :func:`batched_decode_reads` what one decode
step reads and which reads the batch shares. Every size comes from the library.

See: Chapters 5-8.
"""

from __future__ import annotations

import math

from ... import hardware, memory, models, transformer
from ...units import check_count, check_int, fmt_bytes, fmt_flops
from ._style import (LINE, PALETTE, TEXT, arrow, box, canvas, label, legend, new_axes, set_alt,
                     shard_colour)


def backward_matmuls(cfg="llama3-8b", tokens=4096, *, ax=None):
    """One weight's matmul forward (y = xW) and the two matmuls its backward pass adds.

    The MLP up-projection of ``cfg`` on ``tokens`` tokens: x[BT, D] · W[D, F]; backward,
    dx = dy · Wᵀ and dW = xᵀ · dy. Each box is labelled with its shape and its FLOPs,
    :func:`scaling_lib.transformer.einsum_flops`. Returns ax.
    """
    c = models.get(cfg)
    n = int(check_count("tokens", tokens))
    D, F = c.D, c.F
    f_fwd = transformer.einsum_flops("td,df->tf", (n, D), (D, F))
    f_dx = transformer.einsum_flops("tf,fd->td", (n, F), (F, D))
    f_dw = transformer.einsum_flops("td,tf->df", (n, D), (n, F))
    ax = new_axes(ax, (11, 4.2))
    canvas(ax, (0, 33), (-1.2, 9.4), f"{c.name}, MLP up-projection on {n:,} tokens: one matmul "
           "forward, two backward", equal=False)
    rows = [("forward", "x [T, D]", "W [D, F]", "y [T, F]", f_fwd, PALETTE["forward"],
             "passes y on to the next op"),
            ("backward: input gradient", "dy [T, F]", "Wᵀ [F, D]", "dx [T, D]", f_dx,
             PALETTE["backward"], "passes dx on to the previous op"),
            ("backward: weight gradient", "xᵀ [D, T]", "dy [T, F]", "dW [D, F]", f_dw,
             PALETTE["backward"], "hands dW to the optimizer")]
    for r, (name, a, b, out, fl, colour, note) in enumerate(rows):
        y = 6.6 - r * 3.0
        label(ax, 0.2, y + 1.55, name, ha="left", fontsize=9)
        box(ax, 0.4, y, 4.6, 1.2, a, fill="white")
        label(ax, 5.6, y + 0.6, "×", fontsize=12)
        box(ax, 6.2, y, 4.6, 1.2, b, fill="white" if r == 0 else PALETTE["free"])
        label(ax, 11.4, y + 0.6, "=", fontsize=12)
        box(ax, 12.0, y, 4.6, 1.2, out, fill=colour)
        label(ax, 17.2, y + 0.6, f"{fmt_flops(fl)}  (2·T·D·F)", ha="left", fontsize=9)
        label(ax, 24.6, y + 0.6, note, ha="left", fontsize=8)
    label(ax, 16.5, -0.8, f"backward = {fmt_flops(f_dx + f_dw)} = 2 × forward; a training step "
          f"= 3 × forward = 6 FLOPs per weight per token", fontsize=9)
    return set_alt(ax, f"Three matmuls of the MLP up-projection of {c.name} on {n:,} tokens, "
                   f"D = {D:,} and F = {F:,}: forward x times W gives y ({fmt_flops(f_fwd)}); "
                   f"the backward pass multiplies dy by W transposed to get the input gradient "
                   f"({fmt_flops(f_dx)}) and x transposed by dy to get the weight gradient "
                   f"({fmt_flops(f_dw)}), so backward costs twice the forward.")


def flash_attention_tiles(cfg="llama3-8b", T=8192, block=1024, *, row=2, ax=None):
    """The T x T score matrix of one head cut into blocks, FlashAttention's walk over it.

    Query block ``row`` stays on chip while every key/value block streams past it (arrows);
    nothing of the T x T grid is written to HBM. The caption compares one layer's forward HBM
    bytes with and without it, :func:`scaling_lib.transformer.attention_hbm_bytes`
    (``block`` sets the grid drawn and the no-cache upper bound). Returns ax.
    """
    c = models.get(cfg)
    T = int(check_count("T", T))
    block = int(check_count("block", block))
    nb = math.ceil(T / block)
    if nb > 16:
        raise ValueError(f"T/block = {nb} blocks per side; draw at most 16 (choose block >= "
                         f"{math.ceil(T / 16)})")
    row = int(check_int("row", row, minimum=0, maximum=nb - 1))
    std = transformer.attention_hbm_bytes(c, 1, T, flash=False)
    lo = transformer.attention_hbm_bytes(c, 1, T)
    hi = transformer.attention_hbm_bytes(c, 1, T, block=block)
    ax = new_axes(ax, (10, 5.2))
    s = 5.0 / nb
    canvas(ax, (-1.8, 16), (-1.6, 6.6),
           f"FlashAttention on {c.name}, T = {T:,}: one head's scores in {nb} x {nb} blocks of "
           f"{block:,}", equal=True)
    for i in range(nb):
        for j in range(nb):
            fill = PALETTE["accent"] if i == row else PALETTE["free"]
            box(ax, j * s, 5.0 - (i + 1) * s, s, s, fill=fill, lw=0.4)
    label(ax, 2.5, 5.35, "keys and values, streamed block by block  →", fontsize=8)
    label(ax, -0.3, 2.5, "query blocks", rotation=90, fontsize=8)
    y_row = 5.0 - (row + 0.5) * s
    box(ax, 6.0, y_row - 0.4, 2.6, 0.8, "Q block on chip", fill=PALETTE["accent"])
    arrow(ax, (5.05, y_row), (6.0, y_row), colour=LINE)
    label(ax, 9.0, 4.6, f"standard: S = QKᵀ and P = softmax(S)\nwritten to HBM and read back "
          f"(4·N·T² element reads and writes)\n→ {fmt_bytes(std)} per layer, forward",
          ha="left", fontsize=8)
    label(ax, 9.0, 2.6, f"FlashAttention: a running max and sum\nper query; S and P never leave "
          f"the chip\n→ {fmt_bytes(lo)} (K, V read once)\n   to {fmt_bytes(hi)} (K, V re-read "
          f"for each of\n   the {nb} query blocks, no cache help)", ha="left", fontsize=8)
    label(ax, 7.0, -1.0, "same FLOPs (4·T·N·H per token forward); the backward recomputes S: "
          "one more QKᵀ", fontsize=8)
    return set_alt(ax, f"The {T:,} by {T:,} score matrix of one attention head of {c.name} drawn "
                   f"as {nb} by {nb} blocks; one query block is held on chip while every key and "
                   f"value block streams past it. Standard attention writes the scores and "
                   f"probabilities to HBM, {fmt_bytes(std)} per layer forward; FlashAttention "
                   f"moves {fmt_bytes(lo)} to {fmt_bytes(hi)}.")


def grad_accumulation(cfg="llama3-8b", dp=64, m=4, *, T=8192, ax=None):
    """Two ways ZeRO-2/3 accumulates gradients over ``m`` micro-batches, as two timelines.

    Top: the gradient is a 1/dp shard, so each micro-batch's full gradient is reduce-scattered
    into it (m reduce-scatters per step). Bottom: an unsharded accumulator sums the m gradients
    locally and is reduce-scattered once. Bytes: the accumulator is
    ``memory.training_memory(..., grad_accumulation="unsharded")["gradient accumulator"]``; each
    reduce-scatter moves the bf16 gradient, ``2 · n_params``. Returns ax.
    """
    from ...parallelism import ParallelPlan

    c = models.get(cfg)
    dp = int(check_int("dp", dp, minimum=2))
    m = int(check_int("m", m, minimum=1, maximum=8))
    plan = ParallelPlan(dp=dp, zero=3)
    acc = memory.training_memory(c, plan, dp * m, T, grad_accumulation="unsharded")
    grad = 2.0 * transformer.n_params(c)
    ax = new_axes(ax, (11, 3.8))
    canvas(ax, (-3.2, m * 3.2 + 3.0), (-3.4, 2.4),
           f"{c.name}, ZeRO on {dp} ranks, {m} micro-batches per step: accumulating the gradient",
           equal=False)
    ways = (("sharded gradient", True), ("unsharded accumulator", False))
    for r, (name, every) in enumerate(ways):
        y = 0.6 - r * 2.4
        label(ax, -0.3, y + 0.35, name, ha="right", fontsize=8)
        for i in range(m):
            x = i * 3.2
            box(ax, x, y, 1.0, 0.7, f"fwd {i + 1}", fill=PALETTE["forward"], fontsize=7)
            box(ax, x + 1.0, y, 1.6, 0.7, f"bwd {i + 1}", fill=PALETTE["backward"], fontsize=7)
            if every or i == m - 1:
                box(ax, x + 1.4, y - 0.55, 1.6, 0.45, "RS", fill=PALETTE["comm"], fontsize=7)
        box(ax, m * 3.2 + 0.2, y, 1.3, 0.7, "optim.", fill=PALETTE["optimizer"], fontsize=7)
        n_rs = m if every else 1
        extra = (f"+{fmt_bytes(acc['gradient accumulator'])} per rank" if not every
                 else "no extra memory")
        label(ax, m * 3.2 + 1.7, y + 0.35, f"{n_rs} × RS of {fmt_bytes(grad)}\n{extra}",
              ha="left", fontsize=7)
    legend(ax, [("forward", PALETTE["forward"]), ("backward", PALETTE["backward"]),
                ("reduce-scatter (RS)", PALETTE["comm"]), ("optimizer", PALETTE["optimizer"])],
           loc="lower center", bbox_to_anchor=(0.5, -0.12), ncol=4)
    return set_alt(ax, f"Two timelines of one training step of {c.name} on {dp} ZeRO ranks with "
                   f"{m} micro-batches. With a sharded gradient every micro-batch's backward pass "
                   f"ends in a reduce-scatter of the {fmt_bytes(grad)} bf16 gradient, {m} per "
                   f"step; "
                   f"with an unsharded accumulator only the last one does, but every rank holds "
                   f"{fmt_bytes(acc['gradient accumulator'])} more.")


def mfu_ledger(cfg="llama3-70b", T=8192, tokens_per_s=None, n_devices=1024,
               accelerator="h100", *, recompute="full", flash_attention=True, ax=None):
    """Where a step's peak FLOPs go: model FLOPs, the recomputation and FlashAttention's extra
    (hardware FLOPs), and the rest of peak × time the chips did not use.

    Per token: model FLOPs :func:`scaling_lib.transformer.flops_per_token`; hardware FLOPs the same
    with ``recompute`` and ``flash_attention``; the peak's share n · peak / (tokens/s). With
    ``tokens_per_s=None`` the throughput is the one at 40% MFU. Returns ax.
    """
    c = models.get(cfg)
    acc = hardware.get(accelerator)
    n = int(check_count("n_devices", n_devices))
    model = float(transformer.flops_per_token(c, T))
    hw_fl = float(transformer.flops_per_token(c, T, recompute=recompute,
                                              flash_attention=flash_attention))
    peak = n * acc.peak_flops_per_s("bf16")
    tps = peak * 0.40 / model if tokens_per_s is None else float(tokens_per_s)
    budget = peak / tps
    if hw_fl > budget:
        raise ValueError(f"tokens_per_s={tps:.4g} needs {hw_fl / budget:.2f}x the peak for "
                         f"{recompute!r} recomputation; choose a smaller throughput")
    mfu, hfu = model / budget, hw_fl / budget
    ax = new_axes(ax, (10, 2.9))
    canvas(ax, (-0.5, 10.6), (-1.6, 1.9), f"{c.name} on {n:,} {acc.name}s, T = {T:,}: the peak's "
           f"FLOPs per token, {tps:,.0f} tokens/s", equal=False)
    w = 10.0 / budget
    parts = [("model FLOPs", model, PALETTE["compute"]),
             ("recomputed", hw_fl - model, PALETTE["backward"]),
             ("unused peak (memory-bound kernels, exposed comms, bubble, stalls)", budget - hw_fl,
              PALETTE["idle"])]
    x = 0.0
    for name, v, colour in parts:
        box(ax, x, 0.0, v * w, 1.0, fill=colour)
        x += v * w
    label(ax, model * w / 2, 0.5, f"MFU {mfu:.0%}", colour="white", fontsize=9)
    label(ax, (model + hw_fl) * w / 2, 1.35, f"HFU {hfu:.0%}", fontsize=8)
    label(ax, (hw_fl + budget) * w / 2, 0.5, f"{1 - hfu:.0%}", fontsize=9)
    legend(ax, [(p[0], p[2]) for p in parts], loc="lower center", bbox_to_anchor=(0.5, -0.1),
           ncol=3)
    return set_alt(ax, f"A bar of the peak FLOPs available per token for {c.name} on {n:,} "
                   f"{acc.name}s at {tps:,.0f} tokens per second: {mfu:.0%} are the model's FLOPs "
                   f"(MFU), {hfu - mfu:.0%} recomputation and FlashAttention's extra (together "
                   f"HFU {hfu:.0%}), and the remaining {1 - hfu:.0%} of the peak went unused.")


def batched_decode_reads(cfg="llama3-70b", B=4, S=8192, *, ax=None):
    """One decode step's HBM reads: one copy of the weights shared by all B sequences, and one
    KV cache per sequence used by that sequence alone.

    Box areas follow :func:`scaling_lib.inference.decode_bytes` (weights vs. each sequence's
    cache), so a longer S or a larger B shows the caches outgrowing the shared weights. Returns ax.
    """
    from ... import inference

    c = models.get(cfg)
    B = int(check_int("B", B, minimum=1, maximum=8))
    S = int(check_count("S", S))
    by = inference.decode_bytes(c, B, S)
    per_seq = by["kv cache"] / B
    ax = new_axes(ax, (10, 4.4))
    canvas(ax, (-0.5, 15), (-0.8, 6.4), f"One decode step of {c.name}, B = {B}, S = {S:,}: what "
           "it reads", equal=False)
    box(ax, 0.0, 1.0, 4.0, 4.0, f"weights\n{fmt_bytes(by['weights'])}\nread once,\nused by all "
        f"{B}", fill=PALETTE["params"], fontsize=8)
    h = max(0.35, min(1.0, 4.0 * per_seq / by["weights"]))
    gap = 5.0 / B
    for i in range(B):
        y = 5.4 - (i + 1) * gap + (gap - 0.5) / 2
        box(ax, 7.0, y, 1.6, 0.5, f"token {i + 1}", fill=shard_colour(i), fontsize=7)
        arrow(ax, (4.0, 3.0), (7.0, y + 0.25), colour=PALETTE["params"], lw=0.8)
        box(ax, 10.0, y + 0.25 - h * 0.25, 2.4, h * 0.5, fill=PALETTE["activations"])
        label(ax, 11.2, y + 0.25 + h * 0.25 + 0.15, f"cache {i + 1}", fontsize=7)
        arrow(ax, (10.0, y + 0.25), (8.6, y + 0.25), colour=PALETTE["activations"], lw=0.8)
    label(ax, 12.6, 3.0, f"{fmt_bytes(per_seq)}\nper sequence,\nused by its\nown token only",
          ha="left", fontsize=8)
    label(ax, 7.0, -0.4, f"bytes = weights + B × cache: {fmt_bytes(by['weights'])} + {B} × "
          f"{fmt_bytes(per_seq)}; batching shares only the first term", fontsize=8)
    return set_alt(ax, f"One decode step of {c.name} for {B} sequences of {S:,} cached tokens: a "
                   f"single {fmt_bytes(by['weights'])} copy of the weights feeds every new token, "
                   f"while each token reads its own {fmt_bytes(per_seq)} KV cache, which no other "
                   f"sequence can use, so batching amortises the weights but not the caches.")


__all__ = ["backward_matmuls", "batched_decode_reads", "flash_attention_tiles", "grad_accumulation",
           "mfu_ledger"]
