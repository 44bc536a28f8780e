"""Part III's mechanisms: a collective matmul's ring, AllToAll as a resharding, async collectives.

:func:`collective_matmul` draws the ppermute ring of a collective matmul step by step: which block
of B each device holds and multiplies at each step (sizes and bytes from
:func:`scaling_lib.sharding.sharded_matmul`). :func:`all_to_all_reshard` draws an AllToAll that
turns A[I_X, J] into A[I, J_X] (bytes from :func:`scaling_lib.collectives.collective_bytes`).
:func:`async_trace` draws FSDP's forward pass as a profiler shows it on a GPU: each gather an
``all-gather-start`` / ``all-gather-done`` pair bracketing the compute it overlaps, from
:func:`scaling_lib.parallelism.timeline.fsdp_timeline`.

See: the chapters "Sharded arrays and how to multiply them" and "Profiling JAX programs".
"""

from __future__ import annotations

from ... import collectives as C
from ... import sharding as S
from ...units import check_int, fmt_seconds
from ._style import PALETTE, TEXT, arrow, box, canvas, fmt, label, new_axes, set_alt, shard_colour


def collective_matmul(n=4, I=8192, J=8192, K=28672, *, ax=None):
    """A collective matmul of A[I_X, J] · B[J_X, K] over ``n`` devices: one row per step.

    At step s device d holds the block of B's rows that device (d + s) mod n started with,
    multiplies it by the matching columns of its rows of A, and passes the block to device d - 1
    (``lax.ppermute``), so n - 1 one-direction sends replace the AllGather. Returns ax.
    """
    n = int(check_int("n", n, minimum=2, maximum=8))
    m = S.sharded_matmul(I, J, K, ("X", None), ("X", None), {"X": n})
    block = m.nbytes / n
    w, gap, h = 1.0, 0.7, 0.55
    ax = new_axes(ax, (min(2.8 + 1.7 * n, 13), 1.2 + 0.75 * n))
    canvas(ax, (-2.4, n * (w + gap)), (-n * 1.0 - 0.3, 0.7),
           f"collective matmul over {n} devices: {n} partial matmuls, {n - 1} ppermute steps "
           f"of {fmt(block)}", equal=False)
    for d in range(n):
        label(ax, d * (w + gap) + w / 2, 0.4, f"device {d}", fontsize=7)
    for s in range(n):
        y = -s * 1.0
        label(ax, -0.2, y - h / 2, f"step {s}" + ("\n(no transfer\nto hide behind)" if s == 0
                                                   else ""), fontsize=7, ha="right")
        for d in range(n):
            j = (d + s) % n
            box(ax, d * (w + gap), y - h, w, h, f"B{j}\nC += A[:, J{j}]·B{j}",
                fill=shard_colour(j), fontsize=6)
            if s < n - 1 and d > 0:  # d sends its block to d - 1 for the next step
                arrow(ax, (d * (w + gap), y - h - 0.05), ((d - 1) * (w + gap) + w, y - 1.0 + 0.02),
                      lw=1.0)
        if s < n - 1:
            arrow(ax, (0.0, y - h - 0.05), ((n - 1) * (w + gap) + w, y - 1.0 + 0.02), lw=0.7,
                  ls="--", rad=0.05)
    set_alt(ax, f"A collective matmul over {n} devices drawn as {n} rows, one per step. At step "
            f"s device d holds block (d + s) mod {n} of B's rows, multiplies it by the matching "
            f"columns of its own rows of A and adds the product to its output block; between "
            f"steps every device passes its block of B ({fmt(block)}) to its left neighbour, the "
            f"dashed arrow closing the ring from device 0 to device {n - 1}. After {n} partial "
            f"matmuls and {n - 1} transfers each device has its rows of C, without an AllGather.")
    return ax


def all_to_all_reshard(n=4, I=4096, J=4096, *, dtype_bytes=2, ax=None):
    """An AllToAll as a resharding: A[I_X, J] (rows split) becomes A[I, J_X] (columns split).

    Device d cuts its row block into n column blocks and sends block k to device k; it keeps
    block d. Each device sends (n - 1)/n of its shard. Returns ax.
    """
    n = int(check_int("n", n, minimum=2, maximum=8))
    V = I * J * dtype_bytes
    b = C.collective_bytes("all-to-all", V, n)
    side, gap = 2.4, 1.6
    ax = new_axes(ax, (9, 3.6))
    canvas(ax, (-0.4, 2 * side + gap + 0.4), (-0.5, side + 0.7),
           f"AllToAll over {n} devices: A[I_X, J] → A[I, J_X], each device sends "
           f"{fmt(b.sent_bytes)}", equal=False)
    c = side / n
    for d in range(n):          # left: rows of device d, cut into n column blocks
        for k in range(n):
            box(ax, k * c, side - (d + 1) * c, c, c, f"{d}→{k}" if d != k else f"{d} keeps",
                fill=shard_colour(d), fontsize=6 if n <= 4 else 5, edge="white")
    x0 = side + gap
    for k in range(n):          # right: columns of device k, made of every device's block k
        for d in range(n):
            box(ax, x0 + k * c, side - (d + 1) * c, c, c, f"from {d}" if d != k else "own",
                fill=shard_colour(d), fontsize=6 if n <= 4 else 5, edge="white")
    label(ax, side / 2, side + 0.3, "before: A[I_X, J], device d holds row block d", fontsize=8)
    label(ax, x0 + side / 2, side + 0.3, "after: A[I, J_X], device k holds column block k",
          fontsize=8)
    arrow(ax, (side + 0.15, side / 2), (x0 - 0.15, side / 2), label="all-to-all", lw=1.6)
    label(ax, side + gap / 2, -0.25, f"V = {fmt(V)}; every device keeps 1/{n} of its shard",
          fontsize=7)
    set_alt(ax, f"Two {n} by {n} grids of blocks. On the left the array is split by rows over "
            f"{n} devices, each row coloured by its device and each block labelled with the "
            f"device it is sent to; on the right the same array is split by columns, column k "
            f"gathering block k from every device, each block keeping its source's colour. One "
            f"AllToAll does the exchange: each device "
            f"sends {fmt(b.sent_bytes)} of its {fmt(V / n)} shard and keeps the rest.")
    return ax


def async_trace(cfg="llama3-8b", cluster=None, dp=8, tokens_per_device=1024, T=1024, *,
                n_layers=4, ax=None):
    """FSDP's forward pass as a GPU trace shows it: on the compute stream each layer's fusions,
    an ``all-gather-start`` issuing the next layer's gather and an ``all-gather-done`` where the
    stream waits for it; on the collective stream the gathers in flight
    (:func:`scaling_lib.parallelism.timeline.fsdp_timeline`). Returns ax."""
    from ... import hardware
    from ...parallelism import timeline

    n_layers = int(check_int("n_layers", n_layers, minimum=2, maximum=12))
    cluster = hardware.cluster("h100", dp) if cluster is None else cluster
    ev = timeline.fsdp_timeline(cfg, cluster, dp, tokens_per_device, T, n_layers=n_layers)
    comp = [e for e in ev if e[0] == "compute" and e[1].startswith("forward")]
    gath = {e[1].split()[-1]: e for e in ev if e[0] == "all-gather" and e[1].startswith("gather")}
    end = comp[-1][3]
    ms = 1e3
    ax = new_axes(ax, (10, 2.4))
    ax.set_facecolor("white")
    lanes = ["compute stream", "collective stream"]
    waited = 0.0
    for k, lane in enumerate(lanes):
        ax.broken_barh([(0, end * ms)], (k - 0.4, 0.8), facecolor=PALETTE["free"], lw=0)
    prev_end = 0.0
    for i, (_, name, start, stop) in enumerate(comp):
        layer = name.split()[-1]
        g = gath[layer]
        ax.broken_barh([(g[2] * ms, (g[3] - g[2]) * ms)], (1 - 0.35, 0.7),
                       facecolor=PALETTE["accent"], edgecolor="white", lw=0.6)
        ax.text((g[2] + g[3]) / 2 * ms, 1, f"gather {layer}", ha="center", va="center",
                fontsize=6, color=TEXT)
        wait = max(0.0, start - prev_end)  # the compute stream blocks in all-gather-done
        if wait > 0:
            waited += wait
            ax.broken_barh([(prev_end * ms, wait * ms)], (-0.35, 0.7),
                           facecolor=PALETTE["comm"], edgecolor="white", lw=0.6)
            ax.text((prev_end + wait / 2) * ms, -0.55, "done\n(wait)", ha="center", va="top",
                    fontsize=5, color=PALETTE["comm"])
        ax.broken_barh([(start * ms, (stop - start) * ms)], (-0.35, 0.7),
                       facecolor=PALETTE["compute"], edgecolor="white", lw=0.6)
        ax.text((start + stop) / 2 * ms, 0, f"fusions {layer}", ha="center", va="center",
                fontsize=6, color="white")
        ax.plot([g[2] * ms] * 2, [-0.45, 1.4], color=TEXT, lw=0.6, ls=":")
        ax.text(g[2] * ms, 1.47, "start", ha="center", va="bottom", fontsize=5, color=TEXT)
        prev_end = stop
    ax.set_yticks(range(len(lanes)), lanes, color=TEXT, fontsize=8)
    ax.set_ylim(len(lanes) - 0.3, -0.95)
    ax.set_xlim(0, end * ms * 1.01)
    ax.set_xlabel("time (ms)", color=TEXT)
    ax.tick_params(colors=TEXT, labelsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_title(f"FSDP forward, {n_layers} layers, {dp} ranks, {tokens_per_device:,} tokens "
                 f"per device: compute waits {fmt_seconds(waited)} in all-gather-done",
                 color=TEXT, fontsize=10)
    set_alt(ax, f"A profiler-style trace of FSDP's forward pass over {n_layers} layers on {dp} "
            f"ranks, two lanes. The collective stream shows each layer's all-gather in flight, "
            f"issued by an all-gather-start (dotted line) while the previous layer's fusions run "
            f"on the compute stream; where a gather is still in flight when its layer is due, the "
            f"compute stream waits in all-gather-done (orange), {fmt_seconds(waited)} in all.")
    return ax


__all__ = ["all_to_all_reshard", "async_trace", "collective_matmul"]
