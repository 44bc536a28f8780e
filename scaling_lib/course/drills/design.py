"""System design questions: worked answers computed by the library's estimators and planner.

Each question has a function returning its figures (a dict of rows, one per layout compared)
and a Markdown write-up for the notebooks and the book:

- :func:`design_training` / :func:`training_answer`: train a model on n chips in d days. The
  planner (:func:`scaling_lib.planner.search`) ranks every plan with the step-time model of
  record (:func:`scaling_lib.parallelism.estimate`: compute, exposed communication with every
  all-reduce, all-gather and send, the bubble, the optimizer), beside hand-picked layouts.
- :func:`design_serving` / :func:`serving_answer`: serve a model at a time per output token:
  :func:`scaling_lib.serving.estimate` (decode step with its 2L + 1 all-reduces, chunked
  prefill, memory per device) over device counts and layouts.
- :func:`design_gpt4_serving` / :func:`gpt4_serving_answer`: a GPT-4-class mixture of experts
  (an assumed shape, :data:`scaling_lib.serving.parallel.GPT4_CLASS_ASSUMED`) on A100s and H100s.
- :func:`design_low_mfu` / :func:`low_mfu_answer`: why a run reaches only about a quarter of
  peak, and what each change buys.
- :func:`design_long_context` / :func:`long_context_answer`: size a long-context fine-tune.

See: the "Interview preparation" part of the book.
"""

from __future__ import annotations

from ... import hardware, models, serving, transformer
from ...parallelism import ParallelPlan, estimate
from ...units import DAY, fmt_bytes, fmt_flops, fmt_seconds


def _layout(plan: ParallelPlan) -> str:
    parts = [f"{k}={getattr(plan, k)}" for k in ("dp", "tp", "pp", "cp", "ep")
             if getattr(plan, k) > 1]
    if plan.cp > 1:
        parts.append(f"cp by {plan.cp_variant}")
    parts.append(f"ZeRO-{plan.zero}")
    if plan.zero == 3 and not plan.reshard_after_forward:
        parts.append("weights kept after forward")
    if plan.shard_group:
        parts.append(f"HSDP groups of {plan.shard_group}")
    if plan.recompute != "none":
        parts.append(f"{plan.recompute} recompute")
    if plan.sequence_parallel:
        parts.append("SP")
    if plan.micro_batch > 1:
        parts.append(f"micro-batch {plan.micro_batch}")
    return ", ".join(parts)


def _row(label, e, days=None) -> dict:
    row = {"layout": label, "plan": e.plan, "step_time": e.step_time, "mfu": e.mfu,
           "tokens_per_s": e.tokens_per_s, "compute_time": e.compute_time,
           "exposed_comm_time": e.exposed_comm_time, "bubble_time": e.bubble_time,
           "memory_bytes": float(e.memory.total), "fits": bool(e.fits)}
    if days is not None:
        row["tokens"] = e.tokens_per_s * days * DAY
    return row


def _table_rows(rows, days=None) -> list[dict]:
    out = []
    for r in rows:
        d = {"layout": r["layout"], "step": fmt_seconds(r["step_time"]), "MFU": f"{r['mfu']:.0%}",
             "compute": fmt_seconds(r["compute_time"]),
             "exposed comm.": fmt_seconds(r["exposed_comm_time"]),
             "bubble": fmt_seconds(r["bubble_time"]),
             "memory / GPU": fmt_bytes(r["memory_bytes"]), "fits": "yes" if r["fits"] else "no"}
        if days is not None:
            d[f"tokens in {days} days"] = f"{r['tokens'] / 1e12:.1f}T"
        out.append(d)
    return out


TEXTBOOK_3D = ParallelPlan(dp=32, tp=8, pp=4, zero=1, recompute="selective",
                           sequence_parallel=True)


def design_training(model="llama3-70b", accelerator="h100", n=1024, days=30, global_batch=1024,
                    T=8192, plans=None, top=3) -> dict:
    """A worked answer to "train ``model`` on ``n`` chips in ``days`` days": the planner's best
    ``top`` plans and hand-picked layouts (``plans``; default the textbook 3D layout and plain
    FSDP, scaled to ``n``), each timed by the step-time model of record with all its
    communication, and the tokens each trains on in ``days``.

    (Tested in tests/test_drills.py, not as a doctest: a planner search costs a second.)
    """
    from ... import planner

    cfg = models.get(model)
    cluster = hardware.cluster(accelerator, n)
    n_params = transformer.n_params(cfg)
    if plans is None:
        plans = [ParallelPlan(dp=n // 32, tp=8, pp=4, zero=1, recompute="selective",
                              sequence_parallel=True),
                 ParallelPlan(dp=n, zero=3, recompute="full")] if n % 32 == 0 else []
    for p in plans:
        if p.world_size != n:
            raise ValueError(f"plan.world_size={p.world_size} must equal n={n}; choose degrees "
                             f"whose product is {n}")
    ranked = planner.search(cfg, cluster, global_batch, T, top=top)
    rows = [_row(f"planner #{i + 1}: {_layout(ranked[i].plan)}", ranked[i], days)
            for i in range(len(ranked))]
    rows += [_row(_layout(p), estimate(cfg, cluster, p, global_batch, T), days) for p in plans]
    best = rows[0] if rows else None
    return {"n_params": n_params, "rows": rows, "best": best, "days": days,
            "global_batch": global_batch, "T": T, "n": n, "accelerator": accelerator,
            "model": cfg.name, "n_runnable": ranked.n_runnable,
            "chinchilla_tokens": 20 * n_params,
            "unsharded_states": 16 * n_params,
            "best_memory": (estimate(cfg, cluster, ranked[0].plan, global_batch, T).memory
                            if len(ranked) else None)}


def _memory_text(mem, plan) -> str:
    parts = ", ".join(f"{k} {fmt_bytes(float(v))}" for k, v in mem.items())
    text = f"per GPU: {parts}; total {fmt_bytes(float(mem.total))}."
    if plan.pp > 1 and float(mem.get("logits", 0.0)) == 0.0:
        text += (" (The report is the busier of the first and the last pipeline stage; here "
                 "the first, which keeps the most micro-batches' activations in flight. The "
                 "logits live on the last stage, so this one shows 0 B for them.)")
    return text


def training_answer(**kw) -> str:
    """The worked answer of "train a 70B model on 1,024 H100s in 30 days", as Markdown."""
    from ..nbtools import table

    d = design_training(**kw)
    best = d["best"]
    flop = transformer.six_n_flops(d["n_params"], 1)
    head = (f"**Size the job first.** {d['model']} has {d['n_params'] / 1e9:.1f}B parameters; "
            f"by the 6N rule a token costs {fmt_flops(flop)} to train. Unsharded, mixed-"
            f"precision Adam states take 16 bytes per parameter, {fmt_bytes(d['unsharded_states'])}"
            ": no single GPU holds them, so the weights, gradients and optimizer must be "
            "sharded (ZeRO/FSDP, tensor or pipeline parallelism).\n\n"
            f"**Let the planner search.** It tried every valid plan of {d['n']:,} "
            f"{d['accelerator'].upper()}s (global batch {d['global_batch']:,} sequences of "
            f"{d['T']:,} tokens; {d['n_runnable']:,} fit and run) with the step-time model of "
            "record, which charges every collective of the step (tensor-parallel all-reduces, "
            "gradient reduce-scatters, ZeRO all-gathers, pipeline sends) and hides only what "
            "compute can overlap. The best plans and two hand-picked layouts:\n\n")
    body = table(_table_rows(d["rows"], d["days"]))
    if best is None:
        return head + body + "\n\nNo plan fits."
    tail = (f"\n\n**What it gives.** The best plan reaches {best['mfu']:.0%} MFU: "
            f"{best['tokens_per_s'] / 1e6:.2f}M tokens/s, {best['tokens'] / 1e12:.1f}T tokens in "
            f"{d['days']} days, {best['tokens'] / d['n_params']:.0f} tokens per parameter "
            f"(Hoffmann et al. 2022's compute-optimal ratio is about 20: "
            f"{d['chinchilla_tokens'] / 1e12:.1f}T tokens). Its memory "
            + _memory_text(d["best_memory"], d["rows"][0]["plan"]) +
            "\n\n**Defend it.** The MFU is the model's, not an assumption: compare it with "
            "published runs of this size, then say what eats the rest (exposed communication, "
            "the bubble, recomputation, kernels below peak), what you would measure first (one "
            "node's step time against the estimate), and what the 30 days leave for failures "
            "and restarts.")
    return head + body + tail


def design_serving(model="llama3-70b", accelerator="h100", tpot=0.050, batch=32, prompt_len=4096,
                   gen_len=512, sizes=(2, 4, 8, 16), dtype="bf16") -> dict:
    """A worked answer to "serve ``model`` at ``tpot`` seconds per output token": for each device
    count, the serving estimator's best layout (its decode step includes the 2L + 1 all-reduces)
    and whether it fits and meets the target; the smallest that does is ``best``.

    >>> d = design_serving(tpot=0.050)
    >>> d["best"]["fits"] and d["best"]["tpot"] <= 0.050
    True
    """
    cfg = models.get(model)
    acc = hardware.get(accelerator)
    usable = hardware.with_changes(acc, hbm_bytes=acc.memory_capacity_bytes)
    rows = []
    for n in sizes:
        e = serving.estimate(cfg, acc, n, batch=batch, prompt_len=prompt_len, gen_len=gen_len,
                             dtype=dtype)
        rows.append({"chips": n, "layout": e.layout, "fits": bool(e.fits), "tpot": float(e.tpot),
                     "ttft": float(e.ttft), "tokens_per_s": float(e.tokens_per_s),
                     "memory_bytes": float(e.memory.total), "bound": e.decode_bound,
                     "meets": bool(e.fits and e.tpot <= tpot)})
    best = next((r for r in rows if r["meets"]), None)
    alt = []  # the other layouts of the largest size: latency against throughput
    n_alt = max(sizes)
    for lay in serving.layouts(cfg, acc, n_alt):
        if lay.pp != 1:
            continue
        e = serving.estimate(cfg, acc, n_alt, batch=batch, prompt_len=prompt_len,
                             gen_len=gen_len, dtype=dtype, tp=lay.tp, pp=1,
                             replicas=lay.replicas)
        alt.append({"layout": e.layout, "fits": bool(e.fits), "tpot": float(e.tpot),
                    "tokens_per_s": float(e.tokens_per_s),
                    "meets": bool(e.fits and e.tpot <= tpot)})
    kv = transformer.kv_cache_bytes(cfg, batch, prompt_len + gen_len, dtype)
    weights = serving.weight_bytes_per_device(cfg, 1, 1, dtype)  # every weight, resident
    return {"rows": rows, "best": best, "tpot_target": tpot, "kv_bytes": float(kv),
            "alternatives": alt, "alternatives_chips": n_alt,
            "weight_bytes": weights, "need_bytes": weights + float(kv),
            "min_for_memory": serving.min_devices(cfg, usable, dtype=dtype, kv_bytes=kv),
            "batch": batch, "context": prompt_len + gen_len}


def serving_answer(**kw) -> str:
    """The worked answer of "serve Llama 3 70B at 50 ms per token: how many chips?", as Markdown."""
    from ..nbtools import table

    d = design_serving(**kw)
    tpot = d["tpot_target"]
    rows = [{"chips": r["chips"], "layout": r["layout"], "fits": "yes" if r["fits"] else "no",
             "TPOT": fmt_seconds(r["tpot"]), "TTFT": fmt_seconds(r["ttft"]),
             "tokens/s": f"{r['tokens_per_s']:,.0f}", "memory / GPU": fmt_bytes(r["memory_bytes"]),
             "decode bound": r["bound"]} for r in d["rows"]]
    best = d["best"]
    end = (f"The smallest that meets {fmt_seconds(tpot)} per token is **{best['chips']} chips** "
           f"({best['layout']}, {best['tokens_per_s']:,.0f} output tokens/s)."
           if best else "None of these sizes meets the target: quantise, or shorten the batch.")
    alt = [{"layout": r["layout"], "fits": "yes" if r["fits"] else "no",
            "TPOT": fmt_seconds(r["tpot"]), "tokens/s": f"{r['tokens_per_s']:,.0f}",
            "meets the target": "yes" if r["meets"] else "no"} for r in d["alternatives"]]
    end += (f"\n\n**Replicas or a wider group?** The same batch on {d['alternatives_chips']} "
            "chips, split differently. A wider tensor-parallel group splits every weight read "
            "over more chips, which cuts the time per token; more replicas split the batch "
            "instead, and each replica still reads all of its weights every step, so while "
            "the step is memory-bound a replica with a small batch wastes its bandwidth. "
            "Replicas win once each carries a batch near the critical batch, or once the "
            "all-reduces of a wide group cost more than the reads they save.\n\n"
            + table(alt))
    return (f"Every weight must be resident ({fmt_bytes(d['weight_bytes'])}, the input "
            "embedding included), plus the KV cache of the whole batch at its longest context "
            f"({d['batch']} sequences of {d['context']:,} tokens: {fmt_bytes(d['kv_bytes'])}): "
            f"{fmt_bytes(d['need_bytes'])}, at least {d['min_for_memory']} chips' usable memory "
            "before anything else. The serving estimator then times each size with its best layout (tensor "
            "parallel inside the node, stages across nodes); its decode step is the split "
            "roofline plus the 2L + 1 all-reduces, each costed on the links they cross.\n\n"
            + table(rows) + "\n\n" + end + "\n\nA real server keeps room for activations and "
            "its own reserve, and its scheduler adds overhead: leave margin, and measure.")


def design_gpt4_serving(accelerators=("a100-80gb", "h100"), n=64, batch=256, prompt_len=2048,
                        gen_len=512, tps=(8, 4, 2)) -> dict:
    """Serve the assumed GPT-4-class mixture of experts on ``n`` A100s and H100s: for each chip
    and weight format (bf16, and the 8-bit format the chip computes in: int8 on A100, fp8 on
    H100) the fewest chips for the weights and the serving estimate of several layouts.

    >>> d = design_gpt4_serving(tps=(8,))
    >>> {r["chip"] for r in d["rows"]} == {"a100-80gb", "h100"}
    True
    """
    from ...serving.parallel import GPT4_CLASS_ASSUMED as cfg

    rows, floors = [], {}
    for name in accelerators:
        acc = hardware.get(name)
        usable = hardware.with_changes(acc, hbm_bytes=acc.memory_capacity_bytes)
        for dtype in ("bf16", "fp8" if acc.supports("fp8") else "int8"):
            floors[(name, dtype)] = serving.min_devices(cfg, usable, dtype=dtype)
            for tp in tps:
                e = serving.estimate(cfg, acc, n, batch=batch, prompt_len=prompt_len,
                                     gen_len=gen_len, dtype=dtype, tp=tp, pp=n // tp)
                rows.append({"chip": name, "dtype": dtype, "layout": e.layout,
                             "fits": bool(e.fits), "tpot": float(e.tpot),
                             "ttft": float(e.ttft), "tokens_per_s": float(e.tokens_per_s),
                             "memory_bytes": float(e.memory.total), "bound": e.decode_bound})
    return {"model": cfg, "n_params": transformer.n_params(cfg), "rows": rows, "floors": floors,
            "n": n, "batch": batch, "prompt_len": prompt_len, "gen_len": gen_len}


def gpt4_serving_answer(**kw) -> str:
    """The worked answer of "serve a GPT-4-class model on A100s and on H100s", as Markdown."""
    from ..nbtools import table

    d = design_gpt4_serving(**kw)
    c = d["model"]
    floors = "; ".join(f"{chip} {dt}: {k}" for (chip, dt), k in d["floors"].items())
    rows = [{"chip": r["chip"], "weights": r["dtype"], "layout": r["layout"],
             "fits": "yes" if r["fits"] else "no", "TPOT": fmt_seconds(r["tpot"]),
             "TTFT": fmt_seconds(r["ttft"]), "tokens/s": f"{r['tokens_per_s']:,.0f}",
             "memory / GPU": fmt_bytes(r["memory_bytes"])} for r in d["rows"]]
    fast = min((r for r in d["rows"] if r["fits"]), key=lambda r: r["tpot"])
    return (f"**State the model.** GPT-4's architecture is unpublished; take the public estimate "
            f"the library records: {c.L} layers, {c.E} experts with {c.k} routed per token, "
            f"{d['n_params'] / 1e12:.2f}T parameters in all (every expert must be resident, "
            "though a token reads only its own).\n\n"
            f"**Memory floor.** Fewest chips whose usable memory holds the weights: {floors}. "
            "That is before any KV cache: round up to whole nodes.\n\n"
            f"**Compare layouts on {d['n']} chips** ({d['n'] // 8} nodes of 8), batch "
            f"{d['batch']}, prompts of {d['prompt_len']:,} tokens, {d['gen_len']} generated, with "
            "the serving estimator (tensor parallel inside a node, pipeline stages across):\n\n"
            + table(rows) +
            f"\n\nThe fastest is {fast['chip']} {fast['dtype']} with {fast['layout']} "
            f"({fmt_seconds(fast['tpot'])} per token). Decode is memory-bound on every row: "
            "what helps is fewer bytes per token (8-bit weights halve them), more HBM "
            "bandwidth per chip (H100 over A100), and a wider tensor-parallel group (more "
            "chips read one token's weights at once, at the cost of all-reduces). The estimator "
            "shards experts like dense weights; expert parallelism and a disaggregated prefill "
            "tier are the next questions.")


LOW_MFU_PLAN = ParallelPlan(dp=16, tp=8, pp=8, zero=1, recompute="full", sequence_parallel=True)


def design_low_mfu(model="llama3-70b", accelerator="h100", n=1024, global_batch=512, T=8192,
                   plan=LOW_MFU_PLAN) -> dict:
    """Why does ``plan`` reach only about a quarter of peak? Its step by part, then the step after
    each change, one at a time (every figure from the step-time model of record).

    (Tested in tests/test_drills.py, not as a doctest: a planner search costs a second.)
    """
    from dataclasses import replace

    from ... import planner

    cfg = models.get(model)
    cluster = hardware.cluster(accelerator, n)
    e0 = estimate(cfg, cluster, plan, global_batch, T)
    steps = [("the run as launched", plan)]
    p1 = replace(plan, recompute="selective")
    steps.append(("selective instead of full recomputation", p1))
    if plan.pp > 1 and plan.pp % 2 == 0:
        p2 = replace(p1, pp=plan.pp // 2, dp=plan.dp * 2)
        steps.append(("half the pipeline stages, twice the data parallelism", p2))
    rows = [_row(label, estimate(cfg, cluster, p, global_batch, T)) for label, p in steps]
    best = planner.search(cfg, cluster, global_batch, T, top=1)
    if len(best):
        rows.append(_row(f"the planner's best: {_layout(best[0].plan)}", best[0]))
    comms = [{"collective": c.name, "axis": c.axis, "group": c.group_size, "time": c.time,
              "exposed": c.exposed} for c in e0.comms]
    return {"plan": plan, "estimate": e0, "rows": rows, "comms": comms,
            "recompute_share": 1 - e0.mfu / e0.hfu if e0.hfu else 0.0}


def low_mfu_answer(**kw) -> str:
    """The worked answer of "why does this run reach only about 25% MFU?", as Markdown."""
    from ..nbtools import table

    d = design_low_mfu(**kw)
    e = d["estimate"]
    comm_rows = [{"collective": c["collective"], "over": f"{c['axis']} ({c['group']})",
                  "time": fmt_seconds(c["time"]), "exposed": fmt_seconds(c["exposed"])}
                 for c in d["comms"]]
    return (f"**Read the step before guessing.** The plan ({_layout(d['plan'])}) runs at "
            f"{e.mfu:.0%} MFU: a step of {fmt_seconds(e.step_time)} is "
            f"{fmt_seconds(e.compute_time)} of compute, {fmt_seconds(e.exposed_comm_time)} of "
            f"communication nothing hides, {fmt_seconds(e.bubble_time)} of pipeline bubble and "
            f"{fmt_seconds(e.optimizer_time)} of optimizer. Its hardware FLOP utilisation is "
            f"{e.hfu:.0%}: full recomputation runs the forward pass twice, so "
            f"{d['recompute_share']:.0%} of the FLOPs the GPUs do are not model FLOPs. The "
            "collectives:\n\n" + table(comm_rows) +
            "\n\nThe tensor-parallel all-reduces are on the critical path (each layer waits for "
            "the previous one's), so none of their time is hidden; the data-parallel reduction "
            "overlaps the backward pass.\n\n**Change one thing at a time** and re-estimate:\n\n"
            + table(_table_rows(d["rows"])) +
            "\n\nIn an interview, name the three suspects in order of evidence: recomputation "
            "(HFU against MFU), exposed communication (a profile's NCCL kernels outside the "
            "compute streams), the bubble (idle time at the start and end of each step on the "
            "first and last stages); then what you would measure to tell them apart.")


def design_long_context(model="llama3-8b", accelerator="h100", n=64, T=131072, global_batch=64,
                        top=3) -> dict:
    """Size a long-context fine-tune: ``model`` at ``T`` tokens per sequence on ``n`` chips.
    Without context parallelism the activations of one sequence do not fit; the planner's best
    plans split the sequence (cp) and shard the states.

    (Tested in tests/test_drills.py, not as a doctest: a planner search costs a second.)
    """
    from ... import planner

    cfg = models.get(model)
    cluster = hardware.cluster(accelerator, n)
    ranked = planner.search(cfg, cluster, global_batch, T, top=top)
    rows = [_row(f"planner #{i + 1}: {_layout(ranked[i].plan)}", ranked[i])
            for i in range(len(ranked))]
    tries = [ParallelPlan(dp=n // 8, tp=8, zero=3, recompute="full", sequence_parallel=True),
             ParallelPlan(dp=n, zero=3, recompute="full")]
    rows += [_row(_layout(p), estimate(cfg, cluster, p, global_batch, T)) for p in tries]
    return {"rows": rows, "model": cfg.name, "T": T, "n": n, "global_batch": global_batch,
            "kv_per_sequence": float(transformer.kv_cache_bytes(cfg, 1, T))}


def long_context_answer(**kw) -> str:
    """The worked answer of "size a long-context fine-tune", as Markdown."""
    from ..nbtools import table

    d = design_long_context(**kw)
    best = d["rows"][0]
    no_cp = d["rows"][-1]
    return (f"**Why long context is different.** Attention's FLOPs grow with T² and the "
            f"activations of one sequence with T: at T = {d['T']:,} a single sequence of "
            f"{d['model']} holds {fmt_bytes(d['kv_per_sequence'])} of keys and values alone. "
            "Sharding the model states (ZeRO-3) and recomputing everything is not enough: the "
            f"last row below keeps one whole sequence per GPU and needs "
            f"{fmt_bytes(no_cp['memory_bytes'])}. Tensor parallelism with sequence "
            "parallelism splits the activations only tp ways, inside a node; context "
            "parallelism (ring attention or an all-gather of K and V) splits the sequence "
            "itself across more devices.\n\n"
            f"**Compare layouts** on {d['n']} H100s, {d['global_batch']} sequences per step:\n\n"
            + table(_table_rows(d["rows"])) +
            f"\n\nThe planner's best splits each sequence {best['plan'].cp} ways and reaches "
            f"{best['mfu']:.0%} MFU ({fmt_seconds(best['step_time'])} per step). Follow-ups: "
            "what the cp exchange costs against the attention it hides behind, how causal "
            "masking unbalances the chunks (and the zig-zag split that fixes it), and why "
            "recomputation is the first knob, not the last.")
