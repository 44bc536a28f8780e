"""Diagrams of Part V (planning, validating the planner, the Llama 3 405B case, sharing a cluster).

Each draws a mechanism from library objects: the layers a pipeline's chunks hold
(:func:`layer_chunks`, from ``parallelism.rules``), the order of decisions before a search
(:func:`planning_procedure`), what the search drops and why (:func:`search_funnel`, from a
``planner.search`` result), held-out rows against held-out models (:func:`holdout_split`, from
``validation.split``), the calibrate workflow (:func:`calibrate_flow`, the ``Calibration``
fields), checkpoints and failures on a timeline (:func:`checkpoint_timeline`, Young's interval),
a scaling curve's marginal gain (:func:`marginal_gain`, ``scheduling.marginal_throughput``) and
two jobs shared fairly or shortest-remaining-first (:func:`share_or_srpt`, ``scheduling.simulate``).
"""

from __future__ import annotations

import matplotlib.patches as mpatches
import numpy as np

from ._style import LINE, PALETTE, TEXT, arrow, box, canvas, label, legend, new_axes, \
    new_grid, set_alt, shard_colour


def layer_chunks(L, pp, v=1, layout="even", ax=None):
    """The L layers over ``pp`` stages of ``v`` chunks each, as Megatron-LM's interleaved
    schedule places them (model chunk c·pp + s on stage s): one row per stage, one box per
    chunk with its layers. When a stage's layers do not split into v equal chunks (rule
    ``pp_virtual``) the stage is drawn whole, hatched, with the rule's sentence."""
    from ...parallelism import rules

    per_stage = float(rules.stage_layers(L, pp, 1, layout)[1])
    ok = float(rules.chunk_layers(L, pp, v, layout)) == int(rules.chunk_layers(L, pp, v, layout))
    ax = new_axes(ax, (8, 0.6 + 0.42 * min(pp, 8)))
    shown = list(range(pp)) if pp <= 8 else [0, 1, 2, pp - 2, pp - 1]
    canvas(ax, (-1.6, 10.3), (-len(shown) - 0.2, 0.9), equal=False)
    if ok:
        n = float(rules.chunk_layers(L, pp, v, layout))
        light = layout == "light_ends"
        for row, s in enumerate(shown):
            for c in range(v):
                k = c * pp + s  # Megatron-LM's round-robin: chunk k on stage k mod pp
                size = n - (1 if light and (k == 0 or k == pp * v - 1) else 0)
                first = int(sum(n - (1 if light and j == 0 else 0) for j in range(k)))
                box(ax, c * 10 / v, -row - 0.8, 10 / v - 0.05, 0.7,
                    f"{first}–{first + int(size) - 1}" if size > 1 else f"{first}",
                    fill=shard_colour(c), fontsize=7)
            label(ax, -0.8, -row - 0.45, f"stage {s}", fontsize=7)
        title = (f"L={L} layers, pp={pp}, v={v}: {n:g} layers per chunk"
                 + (" (first and last one lighter)" if light else ""))
        alt = (f"Each of {pp} pipeline stages drawn as a row of {v} chunks; chunk c of stage s "
               f"holds model chunk c times {pp} plus s, {n:g} layers each.")
    else:
        for row, s in enumerate(shown):
            box(ax, 0, -row - 0.8, 10, 0.7, f"{per_stage:g} layers", fill=PALETTE["free"])
            for c in range(1, v):
                ax.plot([c * 10 / v] * 2, [-row - 0.8, -row - 0.1], color=PALETTE["comm"],
                        ls=":", lw=1)
            label(ax, -0.8, -row - 0.45, f"stage {s}", fontsize=7)
        title = (f"L={L}, pp={pp}: {per_stage:g} layers per stage do not split into v={v} "
                 "chunks (rule pp_virtual)")
        alt = (f"{pp} pipeline stages of {per_stage:g} layers each, with dotted lines where "
               f"{v} equal chunks would fall; they do not land between layers, so Megatron-LM "
               "refuses the plan.")
    if pp > 8:
        label(ax, 5, -2.5 + 0.05, "⋮", fontsize=10)
    ax.set_title(title, color=TEXT, fontsize=9)
    return set_alt(ax, alt)


def planning_procedure(state_bytes, capacity_bytes, global_batch, n_devices, n_plans, ax=None):
    """The order of decisions before a search (the Playbook's procedure): fit the training
    state in memory, reach the target batch with data parallelism, then tune throughput;
    each box carries the run's own numbers."""
    ax = new_axes(ax, (9, 2.6))
    canvas(ax, (0, 12), (0, 3.2), equal=False)
    shard = int(np.ceil(state_bytes / capacity_bytes))
    steps = [
        ("1. Fit memory", f"state {state_bytes / 1e12:.1f} TB\nvs {capacity_bytes / 1e9:.0f} GB "
                          f"per GPU:\nshard over ≥ {shard} GPUs\n(ZeRO, TP, PP, recompute)"),
        ("2. Reach the batch", f"{global_batch:,} sequences\nover {n_devices:,} GPUs:\n"
                               f"{global_batch / n_devices:.2g} per GPU\n(DP, micro-batches)"),
        ("3. Tune throughput", f"time the {n_plans:,}\nplans left; keep\nthe fastest that fits\n"
                               "(schedule, v, SP)"),
    ]
    for i, (head, body) in enumerate(steps):
        x = 0.2 + 4 * i
        box(ax, x, 0.2, 3.4, 2.1, body, fill=shard_colour(i), fontsize=7, rounded=True)
        label(ax, x + 1.7, 2.7, head, fontsize=9)
        if i:
            arrow(ax, (x - 0.55, 1.25), (x - 0.05, 1.25), colour=LINE)
    ax.set_title("Before the search: three decisions, in this order", color=TEXT, fontsize=9)
    return set_alt(ax, f"Three boxes left to right: fit a {state_bytes / 1e12:.1f} TB training "
                       f"state into {capacity_bytes / 1e9:.0f} GB GPUs, spread {global_batch} "
                       f"sequences over {n_devices} GPUs, then time the remaining plans.")


def search_funnel(result, ax=None):
    """What a ``planner.search`` drops and why: one bar per rule (plans breaking it), the
    memory check, and the plans that run, on a log scale."""
    from ... import planner

    names = dict(planner.RULES)
    items = [("all plans", result.n_plans, PALETTE["other"])]
    items += [(f"breaks {k}", v, PALETTE["comm"]) for k, v in result.dropped.items()
              if v and k in names and k != "memory"]
    if result.dropped.get("memory"):
        items.append(("does not fit in memory", result.dropped["memory"], PALETTE["activations"]))
    items.append(("runs", len(result), PALETTE["optimizer"]))
    ax = new_axes(ax, (7, 0.5 + 0.32 * len(items)))
    y = np.arange(len(items))[::-1]
    ax.barh(y, [v for _, v, _ in items], color=[c for *_, c in items])
    for yi, (s, v, _) in zip(y, items):
        ax.text(v * 1.1, yi, f"{v:,}", va="center", fontsize=7, color=TEXT)
    ax.set_yticks(y, [s for s, *_ in items], fontsize=7, color=TEXT)
    ax.set_xscale("log")
    ax.set_xlim(1, result.n_plans * 8)
    ax.set_xlabel("plans (a plan can break several rules)", color=TEXT, fontsize=8)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_title("The search: every combination, the rules that drop them, the plans left",
                 color=TEXT, fontsize=9)
    return set_alt(ax, f"Horizontal bars on a log scale: {result.n_plans} plans in all, one bar "
                       f"per rule that drops some, and {len(result)} plans that run.")


def holdout_split(rows, ax=None):
    """Two ways to hold out measurements (``validation.split``): alternate rows, where each
    held-out row has a neighbour of its own sweep in the fit, and whole models, where none
    does. One column per model, one cell per row in file order."""
    from ... import validation

    axes = ax if ax is not None else new_grid(1, 2, (9, 3.2))
    keys = np.stack([rows[k] for k in ("D", "N", "L")], axis=1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.ravel()
    for a, by, title in zip(axes, ("row", "model"), ("alternate rows", "whole models")):
        test = validation.split(rows, "test", by)
        for m in range(len(uniq)):
            sel = np.flatnonzero(inv == m)
            for j, i in enumerate(sel):
                a.add_patch(mpatches.Rectangle(
                    (m, -j), 0.9, 0.9, facecolor=PALETTE["comm"] if test[i] else PALETTE["params"],
                    lw=0))
        canvas(a, (-0.2, len(uniq) + 0.1), (-np.bincount(inv).max() - 1, 1.5), equal=False)
        for m, (D, N, L) in enumerate(uniq):
            label(a, m + 0.45, 1.0, f"D{D}\nL{L}", fontsize=6)
        a.set_title(f"held out by {title}", color=TEXT, fontsize=9)
    legend(axes[1], [("fit", PALETTE["params"]), ("held out", PALETTE["comm"])], loc="lower right")
    set_alt(axes[0], f"Left: the {len(inv)} rows of {len(uniq)} models as columns of cells, "
                     "every other cell held out, so each held-out run has a fitted neighbour.")
    set_alt(axes[1], "Right: the same cells with whole columns held out, so no run of a "
                     "held-out model is seen by the fit.")
    return axes


def calibrate_flow(fields, ax=None):
    """The calibrate workflow: measure a few small runs, fit the constants ``fields``
    (``Calibration``'s), check on runs the fit did not see, plan the large run."""
    ax = new_axes(ax, (10, 2.4))
    canvas(ax, (0, 16), (0, 3), equal=False)
    steps = [("measure", "a few small runs\non your stack\n(a CSV row each)"),
             ("fit", "bounded, robust fit of\n" + "\n".join(", ".join(fields[i:i + 2])
                                                            for i in range(0, len(fields), 2))),
             ("check", "predict runs the fit\nnever saw; a constant\nat its bound = a missing\n"
                       "effect, not a fast GPU"),
             ("plan", "search the large run\nwith the calibration\n(--calibration CAL.json)")]
    for i, (head, body) in enumerate(steps):
        x = 0.2 + 4 * i
        box(ax, x, 0.15, 3.4, 2.1, body, fill=shard_colour(i), fontsize=6, rounded=True)
        label(ax, x + 1.7, 2.6, head, fontsize=9)
        if i:
            arrow(ax, (x - 0.55, 1.2), (x - 0.05, 1.2), colour=LINE)
    ax.set_title("scaling-lib calibrate: measure small, fit physics, check, plan large",
                 color=TEXT, fontsize=9)
    return set_alt(ax, "Four boxes left to right: measure small runs, fit the estimator's "
                       f"constants ({', '.join(fields)}), check on unseen runs, "
                       "plan the large run.")


def checkpoint_timeline(interval, checkpoint_time, restart_time, failure_at, ax=None):
    """Work in intervals of ``interval`` s, each followed by a checkpoint write of
    ``checkpoint_time`` s; a failure at ``failure_at`` s loses the work since the last
    checkpoint and costs ``restart_time`` s before the job resumes from it."""
    ax = new_axes(ax, (9, 1.9))
    t, segs, last_ckpt = 0.0, [], 0.0
    while t + interval + checkpoint_time <= failure_at:
        segs.append((t, interval, "work"))
        segs.append((t + interval, checkpoint_time, "checkpoint"))
        t += interval + checkpoint_time
        last_ckpt = t
    segs.append((t, failure_at - t, "lost"))
    segs.append((failure_at, restart_time, "restart"))
    t2 = failure_at + restart_time
    segs.append((t2, interval, "work"))
    colours = {"work": PALETTE["compute"], "checkpoint": PALETTE["grads"],
               "lost": PALETTE["comm"], "restart": PALETTE["idle"]}
    for start, w, kind in segs:
        ax.broken_barh([(start, w)], (0, 1), facecolor=colours[kind], edgecolor="white",
                       hatch="//" if kind == "lost" else None)
    ax.annotate("failure", (failure_at, 1), (failure_at, 1.6), ha="center", fontsize=8,
                color=TEXT, arrowprops={"arrowstyle": "-|>", "color": PALETTE["comm"]})
    end = t2 + interval
    ax.set_xlim(0, end)
    ax.set_ylim(0, 2)
    ax.set_yticks([])
    ax.set_xlabel("wall-clock time (minutes)", color=TEXT, fontsize=8)
    ticks = np.arange(0, end, 600 if end > 3600 else 300)
    ax.set_xticks(ticks, [f"{x / 60:.0f}" for x in ticks], fontsize=7)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    legend(ax, [("work (τ)", colours["work"]), ("checkpoint (δ)", colours["checkpoint"]),
                ("work lost", colours["lost"]), ("restart (R)", colours["restart"])],
           loc="upper left", ncol=4)
    ax.set_title(f"τ = {interval / 60:.0f} min of work per checkpoint, "
                 f"δ = {checkpoint_time:.0f} s, R = {restart_time / 60:.0f} min",
                 color=TEXT, fontsize=9)
    return set_alt(ax, f"A timeline of work blocks of {interval / 60:.0f} minutes, each followed "
                       f"by a {checkpoint_time:.0f} s checkpoint; a failure "
                       f"{(failure_at - last_ckpt) / 60:.0f} minutes after the last checkpoint "
                       f"loses that work, then a {restart_time / 60:.0f} minute restart.")


def marginal_gain(curve, n, m, ax=None):
    """A job's scaling curve (tokens/s against GPUs) with the grant from ``n`` to ``m`` GPUs:
    the chord's slope is the marginal throughput per added GPU the guided scheduler compares
    (``scheduling.marginal_throughput``), against the straight line of perfect scaling."""
    from ... import scheduling

    ax = new_axes(ax, (6, 3.4))
    ok = curve.tokens_per_s > 0
    s, thr = curve.sizes[ok], curve.tokens_per_s[ok]
    ax.plot(s, thr / 1e3, marker="o", color=PALETTE["compute"], label="best plan at each size")
    ax.plot(s, thr[0] / s[0] * s / 1e3, ls="--", color=PALETTE["other"], label="linear scaling")
    tn, tm = curve.throughput(n), curve.throughput(m)
    ax.plot([n, m], [tn / 1e3, tm / 1e3], color=PALETTE["comm"], lw=2.5,
            label=f"grant {n} → {m} GPUs")
    gain = scheduling.marginal_throughput(curve, n, m)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("GPUs", color=TEXT, fontsize=8)
    ax.set_ylabel("tokens/s (thousands)", color=TEXT, fontsize=8)
    ax.legend(fontsize=7, frameon=False)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_title(f"marginal gain {gain / 1e12:.0f} TFLOP/s per added GPU "
                 f"({(tm - tn) / (m - n):,.0f} tokens/s each)", color=TEXT, fontsize=9)
    return set_alt(ax, f"A job's tokens per second against GPUs on log axes, with the linear "
                       f"line and the chord from {n} to {m} GPUs whose slope is the gain per "
                       "added GPU.")


def share_or_srpt(curve, tokens, n_gpus, ax=None):
    """Two jobs of the same model, of ``tokens`` and ``tokens``/4, arriving together on
    ``n_gpus`` GPUs: shared (the proportional rule: half each, then all to the one left) against
    shortest remaining work first (the short job on all GPUs, then the long one), both from
    ``scheduling.simulate`` with free re-plans."""
    from ... import scheduling

    jobs = [scheduling.Job("long", "llama3-8b", tokens),
            scheduling.Job("short", "llama3-8b", tokens / 4)]
    curves = {"long": curve, "short": curve}
    runs = [("shared: half the GPUs each", scheduling.simulate(jobs, curves, n_gpus,
                                                               "proportional", replan_cost=0.0)),
            ("shortest remaining first", scheduling.simulate(jobs, curves, n_gpus, "srpt",
                                                               replan_cost=0.0))]
    axes = ax if ax is not None else new_grid(2, 1, (7, 2.6))
    end = max(s.makespan for _, s in runs)
    for a, (title, s) in zip(axes, runs):
        for seg in s.segments:
            y = 0 if seg.job == "long" else 1
            a.broken_barh([(seg.start / 3600, (seg.end - seg.start) / 3600)], (y + 0.1, 0.8),
                          facecolor=shard_colour(y), edgecolor="white")
            a.text((seg.start + seg.end) / 7200, y + 0.5, f"{seg.gpus} GPUs", ha="center",
                   va="center", fontsize=7, color="white")
        a.set_yticks([0.5, 1.5], ["long", "short"], fontsize=7)
        a.set_xlim(0, end / 3600 * 1.02)
        a.set_title(f"{title}: average completion {s.average_completion / 3600:.1f} h",
                    color=TEXT, fontsize=8)
        for side in ("top", "right"):
            a.spines[side].set_visible(False)
    axes[-1].set_xlabel("hours", color=TEXT, fontsize=8)
    done = [s.average_completion / 3600 for _, s in runs]
    set_alt(axes[0], f"Two Gantt charts of a long and a short job: shared, they average "
                     f"{done[0]:.1f} hours to finish;")
    set_alt(axes[1], f"short first on all GPUs, they average {done[1]:.1f} hours, and the "
                     "long job finishes no later.")
    return axes


__all__ = ["calibrate_flow", "checkpoint_timeline", "holdout_split", "layer_chunks",
           "marginal_gain", "planning_procedure", "search_funnel", "share_or_srpt"]
