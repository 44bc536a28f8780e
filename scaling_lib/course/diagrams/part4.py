"""Part IV's mechanisms: pipeline stages, the data-parallel reduction under a pipeline,
Ulysses' AllToAll, router balance, and the groups of a four-axis mesh.

- :func:`pipeline_stages`: a model cut by depth into stages (:func:`scaling_lib.parallelism.
  pipeline.layer_split`), the activation and its gradient crossing each boundary
  (:func:`~scaling_lib.parallelism.pipeline.send_bytes`).
- :func:`pipeline_dp_overlap`: a 1F1B schedule (:func:`diagrams.pipeline_schedule`) with each
  stage's gradient reduction, which can start only after its last micro-batch's backward.
- :func:`split_backward`: 1F1B against the same step with each backward split into the input's
  gradient B and the weights' gradient W, W filling the bubble
  (:func:`~scaling_lib.parallelism.pipeline.split_backward_schedule`).
- :func:`ulysses_all_to_all`: Ulysses' AllToAll from "my tokens, all heads" to "all tokens, my
  heads", with key/value heads replicated when fewer than cp
  (:func:`~scaling_lib.parallelism.context.ulysses_kv_heads`).
- :func:`router_balance`: the two factors of Switch's auxiliary loss, f_i and P_i, for a toy
  router, and DeepSeek-V3's bias update flattening the loads
  (:mod:`scaling_lib.parallelism.routing`).
- :func:`mesh_axes`: the device numbers of a small plan on nodes, one panel per axis, each
  axis's groups coloured (:func:`scaling_lib.parallelism.mesh.groups`).

See: the chapters "Pipeline parallelism", "Context parallelism", "Expert parallelism" and
"N-dimensional parallelism".
"""

from __future__ import annotations

import numpy as np

from ... import models
from ...parallelism import context, mesh, pipeline, routing
from ...parallelism.plan import ParallelPlan
from ...units import check_int, check_positive
from ._style import (LINE, PALETTE, TEXT, arrow, box, canvas, fmt, label, legend, new_axes,
                     new_grid, set_alt, shard_colour)


def pipeline_stages(cfg="llama3-70b", pp=4, T=4096, *, b=1, tp=1, ax=None):
    """The layers of ``cfg`` cut into ``pp`` stages (one box per stage with its layers), the
    activation sent forward and its gradient sent back across each boundary, labelled with the
    bytes per micro-batch. Returns ax."""
    c = models.get(cfg)
    pp = int(check_int("pp", pp, minimum=2, maximum=8))
    split = pipeline.layer_split(c.L, pp)
    sent = pipeline.send_bytes(c.D, b, T, tp=tp, sequence_parallel=tp > 1)
    ax = new_axes(ax, (1.2 + 2.3 * pp, 2.6))
    canvas(ax, (-0.3, pp * 2.3), (-1.4, 1.6),
           f"{c.name} cut by depth into {pp} stages", equal=False)
    first = 0
    for s, n in enumerate(split):
        x = s * 2.3
        extra = " + embedding" if s == 0 else (" + output, loss" if s == pp - 1 else "")
        box(ax, x, 0.0, 1.6, 1.0, f"stage {s}\nlayers {first}-{first + n - 1}", fill=shard_colour(s),
            fontsize=7, rounded=True)
        label(ax, x + 0.8, -0.25, f"{n} layers{extra}", fontsize=6)
        first += n
        if s + 1 < pp:
            arrow(ax, (x + 1.62, 0.75), (x + 2.28, 0.75), colour=PALETTE["forward"], lw=1.2)
            arrow(ax, (x + 2.28, 0.25), (x + 1.62, 0.25), colour=PALETTE["backward"], lw=1.2)
    label(ax, pp * 1.15 - 0.15, 1.35, f"each boundary, per micro-batch of {b} x {T:,} tokens: "
          f"activation forward (blue) and its gradient back (orange), {fmt(sent)} each",
          fontsize=7)
    label(ax, pp * 1.15 - 0.15, -0.95, "a stage cannot start a micro-batch before the stage "
          "before it has finished it: that wait is the bubble", fontsize=7)
    set_alt(ax, f"{c.name}'s {c.L} layers cut into {pp} pipeline stages of "
            f"{', '.join(str(n) for n in split)} layers, the first also holding the embedding "
            f"and the last the output layer and loss; between neighbouring stages an arrow "
            f"forward carries the activation and an arrow back its gradient, {fmt(sent)} each "
            f"per micro-batch of {b} sequence(s) of {T:,} tokens.")
    return ax


def pipeline_dp_overlap(pp=4, m=6, *, t_reduce=3.5, ax=None):
    """A 1F1B schedule with each stage's data-parallel gradient reduction (``t_reduce`` forward
    units long) drawn after the stage's last backward: the only backward it can overlap is the
    last micro-batch's. Returns ax."""
    from . import pipeline_schedule

    pp = int(check_int("pp", pp, minimum=2, maximum=8))
    m = int(check_int("m", m, minimum=1, maximum=16))
    t_reduce = float(check_positive("t_reduce", t_reduce))
    ev = pipeline.schedule(pp, m)
    ax = pipeline_schedule(pp, m, ax=ax)
    end = pipeline.makespan(ev)
    t_b = float(np.max(ev["end"] - ev["start"]))
    exposed = []
    for s in range(pp):
        mine = ev[(ev["stage"] == s) & (ev["op"] == "B")]
        last = mine[np.argmax(mine["end"])]
        start = float(last["start"])  # buckets of the last backward can reduce while it runs
        stop = start + t_reduce
        ax.broken_barh([(start, t_reduce)], (s + 0.05, 0.35), facecolor=PALETTE["comm"],
                       edgecolor="white", lw=0.6)
        exposed.append(max(0.0, stop - end))
    ax.set_xlim(0, end + max(exposed) + 0.5)
    legend(ax, [("forward", PALETTE["forward"]), ("backward", PALETTE["backward"]),
                ("gradient reduction", PALETTE["comm"]), ("idle (bubble)", PALETTE["idle"])],
           loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(f"1F1B, p={pp}, m={m}: each stage reduces its gradients after its last backward",
                 color=TEXT, fontsize=10)
    set_alt(ax, f"A 1F1B pipeline schedule on {pp} devices with {m} micro-batches, and under "
            f"each device's lane its gradient reduction in red: it starts with the device's last "
            f"backward pass (about {t_b:g} time units) and lasts {t_reduce:g}, so it overlaps only "
            f"that one backward; on device 0, which finishes last, {exposed[0]:g} units of it "
            f"run after all compute has ended.")
    return ax


def _lanes(ax, ev, end, title):
    colours = {"F": PALETTE["forward"], "B": PALETTE["backward"], "W": PALETTE["optimizer"]}
    p = int(ev["stage"].max()) + 1
    for s in range(p):
        ax.broken_barh([(0, end)], (s - 0.4, 0.8), facecolor=PALETTE["idle"], lw=0)
    for e in ev:
        w = float(e["end"] - e["start"])
        ax.broken_barh([(float(e["start"]), w)], (int(e["stage"]) - 0.4, 0.8),
                       facecolor=colours[str(e["op"])], edgecolor="white", lw=0.6)
        ax.text(float(e["start"]) + w / 2, int(e["stage"]), str(int(e["micro"]) + 1), ha="center",
                va="center", fontsize=6, color="white" if e["op"] == "F" else TEXT)
    ax.set_yticks(range(p), [f"device {s}" for s in range(p)], color=TEXT, fontsize=8)
    ax.set_ylim(p - 0.5, -0.5)
    ax.set_xlim(0, end)
    ax.tick_params(colors=TEXT, labelsize=8)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.set_title(title, color=TEXT, fontsize=9, loc="left")


def split_backward(pp=4, m=8, *, t_fwd=1.0, t_input_grad=1.0, t_weight_grad=1.0):
    """Top: 1F1B with whole backward passes (t_B + t_W); bottom: the same work with each backward
    split into B (input gradient) and W (weight gradient), W deferred to fill the bubble
    (:func:`scaling_lib.parallelism.pipeline.split_backward_schedule`). Returns the two Axes."""
    pp = int(check_int("pp", pp, minimum=2, maximum=8))
    m = int(check_int("m", m, minimum=1, maximum=16))
    one = pipeline.schedule(pp, m, t_fwd=t_fwd, t_bwd=t_input_grad + t_weight_grad)
    split = pipeline.split_backward_schedule(pp, m, t_fwd=t_fwd, t_input_grad=t_input_grad,
                                             t_weight_grad=t_weight_grad)
    end = max(pipeline.makespan(one), pipeline.makespan(split))
    axes = new_grid(2, 1, (9, 1.4 + 0.9 * pp))
    b1, b2 = pipeline.bubble_fraction(one), pipeline.bubble_fraction(split)
    _lanes(axes[0], one, end, f"1F1B, backward = B + W together: idle {b1:.0%}, step "
           f"{pipeline.makespan(one):g}")
    _lanes(axes[1], split, end, f"B and W split, W deferred: idle {b2:.0%}, step "
           f"{pipeline.makespan(split):g}")
    axes[1].set_xlabel("time (forward passes of one micro-batch through one stage)", color=TEXT)
    legend(axes[0], [("F: forward", PALETTE["forward"]), ("B: input gradient", PALETTE["backward"]),
                     ("W: weight gradient", PALETTE["optimizer"]), ("idle", PALETTE["idle"])],
           loc="upper left", bbox_to_anchor=(1.0, 1.0))
    axes[0].figure.tight_layout()
    set_alt(axes[0], f"Two pipeline timelines on {pp} devices with {m} micro-batches. Top, 1F1B "
            f"with each backward pass whole: the devices idle {b1:.0%} of a step of "
            f"{pipeline.makespan(one):g} time units. Bottom, the same forward, input-gradient "
            f"and weight-gradient work with the weight gradients deferred into the gaps: idle "
            f"{b2:.0%} of a step of {pipeline.makespan(split):g}, with no more micro-batches "
            f"held at once.")
    set_alt(axes[1], "")
    return axes


def ulysses_all_to_all(cfg="llama3-8b", cp=4, *, tp=1, ax=None):
    """Ulysses on ``cp`` ranks: before, each rank holds T/cp tokens of every head; after the
    AllToAll, all T tokens of n/cp query heads and their key/value heads (replicated to
    k_u = max(k, cp) when fewer than cp). Returns ax."""
    c = models.get(cfg)
    cp = int(check_int("cp", cp, minimum=2, maximum=8))
    n, k = context.heads_per_rank(c, tp)
    if n % cp:
        raise ValueError(f"cp={cp} does not divide the n={n:g} query heads per tensor rank; "
                         f"choose cp in {[d for d in range(2, 9) if n % d == 0]}")
    ku = context.ulysses_kv_heads(c, cp, tp)
    ax = new_axes(ax, (10, 1.2 + 0.6 * cp))
    canvas(ax, (-1.2, 2 * cp + 3.2), (-cp - 0.6, 1.2),
           f"Ulysses on cp={cp}: {n:g} query heads and {k:g} key/value head(s) per rank "
           f"({c.name}, t={tp})", equal=False)
    for r in range(cp):        # before: rank r, sequence block r, all heads
        label(ax, -0.4, -r - 0.5, f"rank {r}", fontsize=7, ha="right")
        for j in range(cp):
            box(ax, j * 0.9, -r - 0.9, 0.85, 0.8, f"T{r}\nh{j}", fill=shard_colour(r), fontsize=6)
        for j in range(cp):    # after: rank r holds head group r of every sequence block
            box(ax, cp + 2.2 + j * 0.9, -r - 0.9, 0.85, 0.8, f"T{j}\nh{r}", fill=shard_colour(j),
                fontsize=6)
    label(ax, cp * 0.45, 0.6, "before: my T/cp tokens, all my heads", fontsize=8)
    label(ax, cp * 1.35 + 2.2, 0.6, "after: all T tokens, 1/cp of the heads", fontsize=8)
    arrow(ax, (cp * 0.9 + 0.1, -cp / 2), (cp + 2.1, -cp / 2), label="AllToAll", lw=1.6)
    label(ax, cp + 1.1, -cp - 0.35, f"h = a group of {n / cp:g} query head(s); key/value heads "
          f"{k:g} → {ku:g} (replicated {ku / k:g}x)" if ku > k else
          f"h = a group of {n / cp:g} query head(s) and {k / cp:g} key/value head(s)", fontsize=7)
    set_alt(ax, f"Ulysses sequence parallelism on {cp} ranks. Left, before the AllToAll, each "
            f"rank holds its own block of the sequence for every head group; right, after it, "
            f"each rank holds every block of the sequence for one head group, so attention "
            f"runs locally per head. Each rank keeps 1/{cp} of its data and sends the rest. "
            f"With {k:g} key/value heads per rank and cp={cp}, "
            + (f"each key/value head is replicated to {ku:g} first." if ku > k else
               "the key/value heads split evenly."))
    return ax


def router_balance(n=2048, E=16, k=2, *, skew=1.0, steps=200, gamma=0.01, seed=0):
    """Left: the two factors of Switch's auxiliary loss for a skewed toy router, each expert's
    share of the assignments f_i and mean probability P_i; right: the loads after ``steps``
    DeepSeek-V3 bias updates (the router's logits fixed). Returns the two Axes."""
    n = int(check_int("n", n, minimum=16, maximum=16384))
    E = int(check_int("E", E, minimum=2, maximum=64))
    k = int(check_int("k", k, minimum=1, maximum=E))
    steps = int(check_int("steps", steps, minimum=1, maximum=2000))
    z = routing.toy_logits(n, E, k, skew=skew, seed=seed)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    P = (p / p.sum(axis=1, keepdims=True)).mean(axis=0)
    loads = routing.expert_loads(routing.route(z, k)[0], E)
    f = loads / (k * n)
    aux = routing.load_balance_loss(z, k, alpha=1.0)
    bias = np.zeros(E)
    for _ in range(steps):
        bias = routing.bias_update(bias, routing.expert_loads(routing.biased_route(z, bias, k)[0],
                                                              E), gamma=gamma)
    after = routing.expert_loads(routing.biased_route(z, bias, k)[0], E)
    axes = new_grid(1, 2, (11, 3.4))
    x = np.arange(E)
    axes[0].bar(x - 0.2, f, 0.4, color=PALETTE["params"], label="f_i: share of assignments")
    axes[0].bar(x + 0.2, P, 0.4, color=PALETTE["grads"], label="P_i: mean router probability")
    axes[0].axhline(1 / E, color=LINE, lw=0.8, ls=":")
    axes[0].set_title(f"skewed router: E·Σ f_i·P_i = {aux:.2f} (1 when balanced)", fontsize=9,
                      color=TEXT)
    axes[0].set_xlabel("expert")
    axes[0].legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.18), ncol=2,
                   frameon=False)
    mean = k * n / E
    axes[1].bar(x - 0.2, loads / mean, 0.4, color=PALETTE["other"], label="no bias")
    axes[1].bar(x + 0.2, after / mean, 0.4, color=PALETTE["optimizer"],
                label=f"after {steps} bias updates (γ={gamma:g})")
    axes[1].axhline(1.0, color=LINE, lw=0.8, ls=":")
    axes[1].set_title(f"load / mean: busiest {loads.max() / mean:.2f} → {after.max() / mean:.2f}",
                      fontsize=9, color=TEXT)
    axes[1].set_xlabel("expert")
    axes[1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(0.0, -0.18), ncol=2,
                   frameon=False)
    for a in axes:
        a.tick_params(colors=TEXT, labelsize=7)
    axes[0].figure.subplots_adjust(bottom=0.3)
    set_alt(axes[0], f"Left: for a skewed toy router sending {n:,} tokens to the top {k} of {E} "
            f"experts, two bars per expert, the share of assignments f_i and the mean router "
            f"probability P_i; both are high for the same experts, so Switch's auxiliary loss "
            f"E times the sum of f_i P_i is {aux:.2f} instead of 1. Right: each expert's load "
            f"over the mean, without bias (busiest {loads.max() / mean:.2f}) and after {steps} "
            f"DeepSeek-V3 bias updates (busiest {after.max() / mean:.2f}).")
    set_alt(axes[1], "")
    return axes


def mesh_axes(tp=2, cp=2, pp=2, dp=2, *, devices_per_node=8, order=mesh.ORDER):
    """One panel per axis of a small plan: the device numbers on nodes of
    ``devices_per_node``, each group of that axis in its own colour. Returns the four Axes."""
    plan = ParallelPlan(tp=tp, cp=cp, pp=pp, dp=dp)
    if plan.world_size > 64:
        raise ValueError(f"tp·cp·pp·dp = {plan.world_size} devices is too many to draw; "
                         "choose degrees whose product is at most 64")
    per = int(check_int("devices_per_node", devices_per_node, minimum=1, maximum=16))
    n = plan.world_size
    n_nodes = -(-n // per)
    axes = new_grid(4, 1, (1.0 + 0.55 * per, 1.1 + 4 * (0.5 + 0.45 * n_nodes)))
    strides = mesh.strides(plan, order)
    for a, name in zip(axes, ("tp", "cp", "pp", "dp")):
        grp = mesh.groups(plan, name, order)
        colour = np.empty(n, dtype=int)
        for g, members in enumerate(grp):
            colour[members] = g
        canvas(a, (-1.4, per * 1.1), (-n_nodes * 1.0 - 0.1, 0.1),
               f"{name} = {getattr(plan, name)}: stride {strides[name]}, {len(grp)} groups",
               equal=False)
        for r in range(n):
            node, slot = divmod(r, per)
            box(a, slot * 1.1, -node - 0.9, 1.0, 0.8, str(r), fill=shard_colour(colour[r]),
                fontsize=7)
        for node in range(n_nodes):
            label(a, -0.2, -node - 0.5, f"node {node}", fontsize=7, ha="right")
    set_alt(axes[0], f"The {n} devices of a plan with tensor {tp}, context {cp}, pipeline {pp} "
            f"and data {dp} parallelism on nodes of {per}, in the order "
            f"{', '.join(order)} (inner to outer), drawn four times: each panel colours the "
            f"groups of one axis. Tensor groups are consecutive devices (stride "
            f"{strides['tp']}), context groups stride {strides['cp']}, pipeline groups stride "
            f"{strides['pp']}, data-parallel groups stride {strides['dp']}.")
    for a in axes[1:]:
        set_alt(a, "")
    return axes


__all__ = ["mesh_axes", "pipeline_dp_overlap", "pipeline_stages", "router_balance",
           "split_backward", "ulysses_all_to_all"]
