"""Training subcommands of the command line: ``estimate``, ``plan`` and ``optimal``.

    estimate  one plan's step time, MFU, memory and breakdown
              (``--model NAME`` or ``--layers --hidden --heads``; ``--gpu --gpus``; plan flags)
    plan      the best plans for a model, cluster and token budget (``--tokens``,
              ``--price-per-gpu-hour``, ``--top``, ``--objective time|cost``)
    optimal   the compute-optimal model size and tokens for ``--gpu --gpus --days``

Each prints a readable table, or JSON with ``--json``. Registered in
:data:`scaling_lib.cli.SUBCOMMANDS`; bad input exits with status 2 and one line.

See: the chapter "Planning a training run".
"""

from __future__ import annotations

import argparse
import json

from . import hardware, models, planner, transformer
from .hardware.clusters import Link
from .parallelism.plan import RECOMPUTE, SCHEDULES, ParallelPlan
from .units import fmt_bytes, fmt_seconds

def UsageError(message: str) -> Exception:  # noqa: N802  (raised like the class it builds)
    """:class:`scaling_lib.cli.UsageError` (imported when raised: ``cli`` imports this module)."""
    from .cli import UsageError as error

    return error(message)


GPT_VOCAB = 51_200  # Megatron-LM's padded GPT-2 vocabulary (Narayanan et al. 2021, Table 1)


def _int(what: str, lo: int = 1):
    def parse(text: str) -> int:
        try:
            x = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a whole number, got {text!r}")
        if x < lo:
            raise argparse.ArgumentTypeError(f"{what} must be at least {lo}, got {text!r}")
        return x
    return parse


def _float(what: str):
    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a number, got {text!r}")
        if not 0 < x < float("inf"):
            raise argparse.ArgumentTypeError(f"{what} must be a positive number, got {text!r}")
        return x
    return parse


# ---- shared flags ------------------------------------------------------------------------------
def _model_flags(p) -> None:
    g = p.add_argument_group("model (a preset, or a custom GPT-style model)")
    g.add_argument("--model", metavar="NAME", help=f"preset: {', '.join(models.names())}")
    g.add_argument("--layers", type=_int("--layers"), help="L, number of layers")
    g.add_argument("--hidden", type=_int("--hidden"), help="D, model width")
    g.add_argument("--heads", type=_int("--heads"), help="N, query heads")
    g.add_argument("--ffn", type=_int("--ffn"), help="F, MLP width (default 4·hidden)")
    g.add_argument("--kv-heads", type=_int("--kv-heads"), help="K, kv heads (default: heads)")
    g.add_argument("--head-dim", type=_int("--head-dim"), help="H, head dimension (default D/N)")
    g.add_argument("--vocab", type=_int("--vocab"), help=f"V (default {GPT_VOCAB:,})")
    g.add_argument("--glu", action=argparse.BooleanOptionalAction, default=False,
                   help="gated MLP (SwiGLU, three matrices); default --no-glu (GeLU)")
    g.add_argument("--tied-embeddings", action="store_true",
                   help="share the input embedding and the output layer")


def _cluster_flags(p, *, plan_flags=True) -> None:
    g = p.add_argument_group("cluster")
    g.add_argument("--gpu", metavar="NAME", required=True,
                   help=f"accelerator: {', '.join(hardware.names())}")
    g.add_argument("--gpus", type=_int("--gpus"), required=True, help="number of devices")
    g.add_argument("--gpus-per-node", type=_int("--gpus-per-node"),
                   help="devices per scale-up node (default 8 for GPUs)")
    g.add_argument("--inter-node-gbps", type=_float("--inter-node-gbps"),
                   help="scale-out bandwidth per node, Gb/s one way (default: one 400 Gb/s NIC "
                   "per H100)")


def _plan_flags(p, *, fixed: bool) -> None:
    g = p.add_argument_group("parallel plan" + ("" if fixed else
                                                " (any flag given fixes that axis of the search)"))
    for name, help_ in (("tp", "tensor-parallel degree"), ("pp", "pipeline stages"),
                        ("dp", "data-parallel degree (default: gpus / (tp·pp·cp))"),
                        ("cp", "context-parallel degree"), ("ep", "expert-parallel degree"),
                        ("micro-batch", "sequences per micro-batch"),
                        ("virtual-stages", "model chunks per pipeline device")):
        g.add_argument(f"--{name}", type=_int(f"--{name}"), help=help_)
    g.add_argument("--zero", type=_int("--zero", 0), help="ZeRO stage 0-3 (3 = FSDP)")
    g.add_argument("--schedule", help=f"pipeline schedule: {', '.join(SCHEDULES)}")
    g.add_argument("--recompute", help=f"activation recomputation: {'|'.join(RECOMPUTE)}")
    g.add_argument("--sequence-parallel", action=argparse.BooleanOptionalAction, default=None,
                   help="shard norms and dropout over the tp group")
    w = p.add_argument_group("workload")
    w.add_argument("--global-batch", type=_int("--global-batch"), required=True,
                   help="sequences per step")
    w.add_argument("--seq-len", type=_int("--seq-len"), required=True, help="T, tokens per sequence")
    p.add_argument("--json", action="store_true", help="print JSON for machines")


def _choice(flag, value, choices):
    if value is not None and value not in choices:
        raise UsageError(f"{flag} {value!r} is not valid; choose one of: {', '.join(choices)}")
    return value


def build_model(args):
    """The model of the flags: a preset, or a custom GPT-style model."""
    custom = [f for f in ("layers", "hidden", "heads", "ffn", "kv_heads", "head_dim", "vocab")
              if getattr(args, f) is not None]
    if args.model is not None:
        if custom or args.glu or args.tied_embeddings:
            raise UsageError("give --model NAME or a custom model (--layers --hidden --heads ...), "
                             "not both")
        try:
            return models.get(args.model)
        except ValueError:
            raise UsageError(f"unknown model {args.model!r}; choose one of: "
                             f"{', '.join(models.names())} (or --layers --hidden --heads)") \
                from None
    missing = [f"--{f}" for f in ("layers", "hidden", "heads") if getattr(args, f) is None]
    if missing:
        raise UsageError(f"give --model NAME ({', '.join(models.names())}) or a custom model "
                         f"with --layers --hidden --heads; missing {' '.join(missing)}")
    D, N = args.hidden, args.heads
    if D % N and args.head_dim is None:
        raise UsageError(f"--heads {N} must divide --hidden {D} (head dimension D/N); choose "
                         f"heads among the divisors of {D}, or give --head-dim")
    K = args.kv_heads or N
    if N % K:
        raise UsageError(f"--kv-heads {K} must divide --heads {N}; choose one of "
                         f"{', '.join(str(d) for d in range(1, N + 1) if N % d == 0)}")
    cfg = models.gpt(args.layers, D if D % N == 0 else N, N, V=args.vocab or GPT_VOCAB,
                     tied_embeddings=False, name=f"custom L={args.layers} D={D}")
    return cfg.with_changes(D=D, F=args.ffn or 4 * D, K=K, H=args.head_dim or D // N,
                            glu=bool(args.glu), tied_embeddings=bool(args.tied_embeddings))


def build_cluster(args):
    """The cluster of ``--gpu --gpus [--gpus-per-node] [--inter-node-gbps]``."""
    try:
        acc = hardware.get(args.gpu)
    except ValueError:
        raise UsageError(f"unknown GPU {args.gpu!r}; choose one of: "
                         f"{', '.join(hardware.names())}") from None
    over = {}
    if args.gpus_per_node is not None:
        if args.gpus % args.gpus_per_node and args.gpus > args.gpus_per_node:
            raise UsageError(f"--gpus-per-node {args.gpus_per_node} must divide --gpus "
                             f"{args.gpus}")
        over["devices_per_node"] = min(args.gpus_per_node, args.gpus)
        over["devices_per_host"] = min(args.gpus_per_node, args.gpus)
    try:
        c = hardware.cluster(acc.name, args.gpus, **over)
    except ValueError as e:
        raise UsageError(f"--gpu {args.gpu}: {e}") from None
    if args.inter_node_gbps is not None:
        per_device = args.inter_node_gbps * 1e9 / 8 / c.devices_per_node
        c = hardware.cluster(acc.name, args.gpus, **over, inter_node=Link(
            f"{args.inter_node_gbps:g} Gb/s per node", per_device, c.inter_node.latency))
    return c


def _common(args):
    _choice("--schedule", args.schedule, SCHEDULES)
    _choice("--recompute", args.recompute, RECOMPUTE)
    if args.zero is not None and args.zero not in (0, 1, 2, 3):
        raise UsageError(f"--zero {args.zero} is not a ZeRO stage; choose one of: 0, 1, 2, 3")
    return build_model(args), build_cluster(args)


def _breakdown(est) -> dict:
    return {"compute": est.compute_time, "exposed_communication": est.exposed_comm_time,
            "bubble": est.bubble_time, "optimizer": est.optimizer_time}


def _record(est) -> dict:
    return {"step_time_s": float(est.step_time), "mfu": float(est.mfu), "hfu": float(est.hfu),
            "tokens_per_s": float(est.tokens_per_s),
            "memory_per_device_bytes": float(est.memory.total), "fits": bool(est.fits),
            "breakdown": {k: float(v) for k, v in _breakdown(est).items()}}


def _plan_dict(plan: ParallelPlan) -> dict:
    return {k: getattr(plan, k) for k in ("dp", "tp", "pp", "cp", "ep", "zero", "micro_batch",
                                          "virtual_stages", "schedule", "recompute",
                                          "sequence_parallel")}


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    left = {i for i, h in enumerate(rows[0]) if h in ("", "plan")}  # text columns
    lines = ["  ".join(c.ljust(w) if i in left else c.rjust(w)
                       for i, (c, w) in enumerate(zip(r, widths))).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# ---- estimate ----------------------------------------------------------------------------------
def _add_estimate(sub) -> None:
    p = sub.add_parser("estimate", help="step time, MFU and memory of one parallel plan",
                       description="Estimate one training step of a parallel plan.")
    _model_flags(p)
    _cluster_flags(p)
    _plan_flags(p, fixed=True)
    p.set_defaults(run=_estimate)


def fixed_plan(args, cfg, cluster) -> ParallelPlan:
    """The ParallelPlan of the plan flags; dp fills the devices when it is not given."""
    from .memory import tp_choices

    tp, pp, cp = args.tp or 1, args.pp or 1, args.cp or 1
    n = cluster.n_devices
    if tp not in tp_choices(cfg):
        raise UsageError(f"--tp {tp} must divide the N={cfg.N} query heads and the MLP width "
                         f"F={cfg.F}, and divide or be a multiple of K={cfg.K} kv heads; choose "
                         f"tp in {tp_choices(cfg)}")
    if args.dp is None:
        if n % (tp * pp * cp):
            raise UsageError(f"tp·pp·cp = {tp * pp * cp} must divide --gpus {n} (dp fills the "
                             "rest); choose degrees whose product divides it")
        dp = n // (tp * pp * cp)
    else:
        dp = args.dp
        if dp * tp * pp * cp != n:
            raise UsageError(f"dp·tp·pp·cp = {dp}·{tp}·{pp}·{cp} = {dp * tp * pp * cp} must "
                             f"equal --gpus {n}; e.g. leave out --dp")
    v = args.virtual_stages or 1
    sched = args.schedule or ("interleaved" if v > 1 else "1f1b")
    sp = args.sequence_parallel if args.sequence_parallel is not None else tp > 1
    plan = ParallelPlan(dp=dp, tp=tp, pp=pp, cp=cp, ep=args.ep or 1, zero=args.zero or 0,
                        micro_batch=args.micro_batch or 1, virtual_stages=v, schedule=sched,
                        recompute=args.recompute or "none", sequence_parallel=sp)
    why = planner.explain(cfg, cluster, plan, args.global_batch, args.seq_len)
    if why:
        raise UsageError(f"this plan cannot run: {why[0]}{_hint(why[0], cfg, plan)}")
    return plan


def _hint(reason: str, cfg, plan) -> str:
    from .memory import tp_choices

    if reason.startswith("tp must"):
        return f" (tp={plan.tp}; valid tp for this model: {tp_choices(cfg)})"
    if reason.startswith("the global batch"):
        return f" (dp·micro_batch = {plan.dp * plan.micro_batch})"
    if reason.startswith(dict(planner.RULES)["memory"]):
        return "; try --recompute full, --zero 1 or more, or larger --tp / --pp"
    return ""


def _estimate(args) -> int:
    from .parallelism.estimate import estimate

    cfg, cluster = _common(args)
    plan = fixed_plan(args, cfg, cluster)
    est = estimate(cfg, cluster, plan, args.global_batch, args.seq_len)
    if args.json:
        print(json.dumps(_record(est) | {"plan": _plan_dict(plan)}, indent=2))
        return 0
    print(f"{cfg.name or 'model'} on {cluster.name}, batch {args.global_batch} x "
          f"{args.seq_len} tokens")
    print(f"plan: {_plan_text(plan)}")
    rows = [["", "value"], ["step time", fmt_seconds(est.step_time)],
            ["MFU", f"{est.mfu:.1%}"], ["HFU", f"{est.hfu:.1%}"],
            ["tokens/s", f"{est.tokens_per_s:,.0f}"],
            ["memory/device", fmt_bytes(float(est.memory.total))],
            ["fits", "yes" if est.fits else "no"]]
    rows += [[f"  {k.replace('_', ' ')}", fmt_seconds(v)] for k, v in _breakdown(est).items()]
    print(_table(rows))
    return 0


def _plan_text(plan: ParallelPlan) -> str:
    s = (f"dp={plan.dp} tp={plan.tp} pp={plan.pp} cp={plan.cp} ep={plan.ep} zero={plan.zero} "
         f"mb={plan.micro_batch}")
    if plan.pp > 1:
        s += f" {plan.schedule}" + (f" v={plan.virtual_stages}" if plan.virtual_stages > 1 else "")
    return s + f" recompute={plan.recompute}" + (" sp" if plan.sequence_parallel else "")


# ---- plan ----------------------------------------------------------------------------------------
def _add_plan(sub) -> None:
    p = sub.add_parser("plan", help="search the parallel plans: best first, with days and cost",
                       description="Search every valid parallel plan and print the best.")
    _model_flags(p)
    _cluster_flags(p)
    _plan_flags(p, fixed=False)
    p.add_argument("--tokens", type=_float("--tokens"),
                   help="training tokens (default: 20 per parameter, Chinchilla)")
    p.add_argument("--price-per-gpu-hour", type=_float("--price-per-gpu-hour"),
                   help="dollars per GPU-hour, for the cost column")
    p.add_argument("--max-days", type=_float("--max-days"),
                   help="drop plans that take longer than this to train --tokens")
    p.add_argument("--top", type=_int("--top"), default=5, help="plans to print (default 5)")
    p.add_argument("--objective", default="time",
                   help="rank by 'time' (step time) or 'cost' (GPU-hours; also tries fewer GPUs)")
    p.set_defaults(run=_plan)


def _space(args) -> dict:
    space = {}
    for flag in ("tp", "pp", "cp", "ep", "zero", "micro_batch", "virtual_stages", "schedule",
                 "recompute", "sequence_parallel"):
        v = getattr(args, flag)
        if v is not None:
            space[flag] = (v,)
    if args.virtual_stages and args.virtual_stages > 1 and "schedule" not in space:
        space["schedule"] = ("interleaved",)
    return space


def _plan(args) -> int:
    cfg, cluster = _common(args)
    _choice("--objective", args.objective, ("time", "cost"))
    n_params = float(transformer.param_count(cfg).total)
    tokens = args.tokens or planner.CHINCHILLA_TOKENS_PER_PARAM * n_params
    limit = None
    if args.max_days is not None:  # step time that trains the tokens in max_days
        limit = args.max_days * planner.SECONDS_PER_DAY * args.global_batch * args.seq_len / tokens
    res = planner.search(cfg, cluster, args.global_batch, args.seq_len,
                         objective=args.objective, max_step_time=limit, **_space(args))
    t = res.table
    if args.dp is not None:
        keep = t["dp"] == args.dp
        t = {k: v[keep] for k, v in t.items()}
        res.table = t
    if not len(res):
        worst = max(res.dropped, key=res.dropped.get)
        rule = dict(planner.RULES)[worst]
        raise UsageError(f"no plan of the {res.n_plans:,} searched can run; most were dropped "
                         f"because {rule}")
    out = []
    for i in range(min(args.top, len(res))):
        plan = res.plan(i)
        run = planner.training_run(float(t["step_time"][i]), tokens, args.global_batch,
                                   args.seq_len, int(t["n_devices"][i]),
                                   price_per_gpu_hour=args.price_per_gpu_hour)
        out.append({"rank": i + 1, "n_devices": int(t["n_devices"][i]),
                    "plan": _plan_dict(plan), "step_time_s": float(t["step_time"][i]),
                    "mfu": float(t["mfu"][i]), "hfu": float(t["hfu"][i]),
                    "tokens_per_s": float(t["tokens_per_s"][i]),
                    "memory_per_device_bytes": float(t["memory_bytes"][i]), "fits": True,
                    "breakdown": {"compute": float(t["compute_time"][i]),
                                  "exposed_communication": float(t["exposed_comm_time"][i]),
                                  "bubble": float(t["bubble_time"][i]),
                                  "optimizer": float(t["optimizer_time"][i])},
                    "days": run.days, "gpu_hours": run.gpu_hours, "cost": run.cost})
    why = res.why_not_first(1) if len(res) > 1 else None
    if args.json:
        print(json.dumps({"tokens": tokens, "objective": args.objective,
                          "plans_searched": res.n_plans, "plans_feasible": len(res),
                          "dropped": res.dropped, "plans": out, "runner_up_loses": why},
                         indent=2))
        return 0
    print(f"{cfg.name or 'model'} ({n_params / 1e9:.1f}B params) on {cluster.name}, batch "
          f"{args.global_batch} x {args.seq_len}, {tokens / 1e12:.3g}T tokens; "
          f"{res.n_plans:,} plans searched, {len(res):,} run, in {res.seconds:.2f} s")
    head = ["#", "GPUs", "plan", "step", "MFU", "memory", "days", "GPU-hours"]
    if args.price_per_gpu_hour:
        head.append("cost $")
    rows = [head]
    for r in out:
        row = [str(r["rank"]), str(r["n_devices"]), _plan_text(res.plan(r["rank"] - 1)),
               fmt_seconds(r["step_time_s"]), f"{r['mfu']:.1%}",
               fmt_bytes(r["memory_per_device_bytes"]), f"{r['days']:.1f}",
               f"{r['gpu_hours']:,.0f}"]
        if args.price_per_gpu_hour:
            row.append(f"{r['cost']:,.0f}")
        rows.append(row)
    print(_table(rows))
    if why:
        print(f"runner-up loses: {why}")
    gone = {k: v for k, v in res.dropped.items() if v}
    if gone:
        print("dropped: " + "; ".join(f"{v:,} {k}" for k, v in gone.items()))
    return 0


# ---- optimal -------------------------------------------------------------------------------------
def _add_optimal(sub) -> None:
    p = sub.add_parser("optimal", help="compute-optimal model size and tokens for a cluster",
                       description="Chinchilla-optimal size (C = 6·N·D, D = 20·N) for a cluster "
                       "and a number of days, at 100%% and at the predicted utilisation.")
    _cluster_flags(p)
    p.add_argument("--days", type=_float("--days"), required=True, help="wall-clock days")
    p.add_argument("--utilization", type=_float("--utilization"),
                   help="use this utilisation (0-1) instead of the planner's prediction")
    p.add_argument("--json", action="store_true", help="print JSON for machines")
    p.set_defaults(run=_optimal)


def _optimal(args) -> int:
    cluster = build_cluster(args)
    if args.utilization is not None and args.utilization > 1:
        raise UsageError(f"--utilization {args.utilization:g} must be a fraction in (0, 1]")
    n100, d100 = planner.compute_optimal(cluster, args.days)
    if args.utilization is not None:
        u = args.utilization
        n_u, d_u = planner.compute_optimal(cluster, args.days, utilization=u)
    else:
        n_u, d_u = planner.compute_optimal(
            cluster, args.days,
            utilization=lambda n: planner.predicted_utilization(cluster, n))
        u = 6 * n_u * d_u / (cluster.peak_flops_per_s * args.days * planner.SECONDS_PER_DAY)
    u100 = u if args.utilization is not None else planner.predicted_utilization(cluster, n100)
    rec = {"gpu": cluster.accelerator.name, "gpus": cluster.n_devices, "days": args.days,
           "at_100_percent": {"n_params": n100, "n_tokens": d100},
           "utilization": u, "at_utilization": {"n_params": n_u, "n_tokens": d_u},
           "utilization_of_100_percent_model": u100,
           "days_for_100_percent_model": args.days / u100}
    if args.json:
        print(json.dumps(rec, indent=2))
        return 0
    print(f"{cluster.n_devices:,} x {cluster.accelerator.name} for {args.days:g} days "
          "(Chinchilla: C = 6·N·D, D = 20·N)")
    print(_table([["utilisation", "params", "tokens"],
                  ["100%", f"{n100 / 1e9:.1f}B", f"{d100 / 1e12:.2f}T"],
                  [f"{u:.1%}", f"{n_u / 1e9:.1f}B", f"{d_u / 1e12:.2f}T"]]))
    print(f"the 100% model would take {args.days / u100:.0f} days at its {u100:.1%} "
          "utilisation")
    return 0


COMMANDS = (_add_estimate, _add_plan, _add_optimal)
