"""Training subcommands of the command line: ``estimate``, ``plan`` and ``optimal``.

    estimate  one plan's step time, MFU, memory and breakdown
              (``--model NAME`` or ``--layers --hidden --heads``; ``--gpu --gpus``; plan flags)
    plan      the best plans for a model, cluster and token budget (``--tokens``,
              ``--price-per-gpu-hour``, ``--top``, ``--objective time|cost``)
    optimal   the compute-optimal model size and tokens for ``--gpu --gpus --days``
    calibrate fit the estimator's constants to measured step times (``scaling_lib.cli_calibrate``)

``estimate``, ``plan`` and ``optimal`` take ``--calibration CAL.json`` (written by ``calibrate``)
and ``--headroom GB`` (memory kept free on every device); ``estimate`` and ``plan`` take
``--dtype bf16|fp16|fp8``. Each prints a readable table, or JSON with ``--json``. Registered in
:data:`scaling_lib.cli.SUBCOMMANDS`; bad input exits with status 2 and one line.

See: the chapter "Planning a training run".
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math

from . import calibrate, hardware, models, planner, transformer
from .parallelism.plan import RECOMPUTE, SCHEDULES, ParallelPlan
from .units import fmt_bytes, fmt_seconds

def UsageError(message: str) -> Exception:  # noqa: N802  (raised like the class it builds)
    """:class:`scaling_lib.cli.UsageError` (imported when raised: ``cli`` imports this module)."""
    from .cli import UsageError as error

    return error(message)


GPT_VOCAB = calibrate.GPT_VOCAB  # Megatron-LM's padded GPT-2 vocabulary
DTYPES = calibrate.DTYPES  # bf16, fp16, fp8
YEAR = 365.25 * 86_400.0  # a Julian year, for durations too long to read in days


def _flag(name, value) -> str:
    """How a flag and its value read in an error: ``--kv-heads 3``."""
    return f"--{name.replace('_', '-')} {value}"


def _int(what: str, lo: int = 1):
    def parse(text: str) -> int:
        try:
            x = int(text)
        except ValueError:
            try:  # 1e12 and 4096.0 are whole numbers too
                f = float(text)
            except ValueError:
                f = math.nan
            if not (math.isfinite(f) and f == int(f)):
                raise argparse.ArgumentTypeError(f"{what} must be a whole number, got {text!r}") \
                    from None
            x = int(f)
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


def _nonnegative(what: str):
    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a number, got {text!r}")
        if not 0 <= x < float("inf"):
            raise argparse.ArgumentTypeError(f"{what} must be a number >= 0, got {text!r}")
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
    g.add_argument("--headroom", type=_nonnegative("--headroom"), default=0.0, metavar="GB",
                   help="memory kept free on every device: a plan fits in HBM minus this "
                   "(default 0)")
    g.add_argument("--calibration", metavar="CAL.json",
                   help="the estimator's constants fitted to your cluster by `calibrate` "
                   "(default: the library's, fitted on A100 measurements)")


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
    w.add_argument("--dtype", default="bf16",
                   help=f"training precision of the matmuls: {', '.join(DTYPES)} (default bf16)")
    p.add_argument("--json", action="store_true", help="print JSON for machines")


def _choice(flag, value, choices):
    if value is not None and value not in choices:
        raise UsageError(f"{flag} {value!r} is not valid; choose one of: {', '.join(choices)}")
    return value


def build_model(args):
    """The model of the flags: a preset, or a custom GPT-style model
    (:func:`scaling_lib.calibrate.build_model`, which the measurement CSV shares)."""
    return calibrate.build_model(vars(args), _flag)


def build_cluster(args):
    """The cluster of ``--gpu --gpus [--gpus-per-node] [--inter-node-gbps] [--headroom GB]``."""
    c = calibrate.build_cluster(vars(args), _flag)
    headroom = getattr(args, "headroom", 0.0) or 0.0
    if headroom:
        acc = c.accelerator
        if headroom * 1e9 >= acc.memory_capacity_bytes:
            raise UsageError(f"--headroom {headroom:g} GB leaves no memory: the {acc.name} has "
                             f"{acc.memory_capacity_bytes / 1e9:.1f} GB usable; choose less than that")
        less = {"hbm_bytes": acc.hbm_bytes - headroom * 1e9}
        if getattr(acc, "usable_hbm_bytes", 0):  # the driver-reported capacity, where known
            less["usable_hbm_bytes"] = acc.usable_hbm_bytes - headroom * 1e9
        c = dataclasses.replace(c, accelerator=dataclasses.replace(acc, **less))
    return c


def load_calibration(args):
    """The Calibration of ``--calibration CAL.json`` (None: the library's defaults)."""
    path = getattr(args, "calibration", None)
    return None if path is None else calibrate.load_calibration(path)


def _common(args):
    _choice("--schedule", args.schedule, SCHEDULES)
    _choice("--recompute", args.recompute, RECOMPUTE)
    _choice("--dtype", args.dtype, DTYPES)
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
            "memory_by_part_bytes": {k: float(v) for k, v in est.memory.items()},
            "breakdown": {k: float(v) for k, v in _breakdown(est).items()}}


# ---- numbers that stay readable at any size ------------------------------------------------------
def duration(seconds: float) -> str:
    """A duration from nanoseconds to millions of years: ``fmt_seconds`` up to a year, then
    years (``'3.17e+04 years'`` rather than a number of days no one reads).

    >>> duration(2e-9), duration(34.4), duration(1e12)
    ('2 ns', '34.4 s', '3.17e+04 years')
    """
    if not math.isfinite(seconds):
        return str(seconds)
    if abs(seconds) >= YEAR:
        return f"{seconds / YEAR:.3g} years"
    return fmt_seconds(seconds)


def count(x: float, digits: int = 0) -> str:
    """A count with thousands separators, in scientific notation beyond 10^15 (where the digits
    stop meaning anything) and for positive values too small for ``digits`` decimals.

    >>> count(60984.2), count(2.5e21), count(68.44, 1), count(0.0004, 1)
    ('60,984', '2.5e+21', '68.4', '0.0004')
    """
    if not math.isfinite(x):
        return str(x)
    if abs(x) >= 1e15 or (x and abs(x) < 0.5 * 10 ** -digits):
        return f"{x:.3g}"
    return f"{x:,.{digits}f}"


def _tokens(n: float) -> str:
    return f"{n / 1e12:.3g}T tokens" if n < 1e15 else f"{n:.3g} tokens"


def percent(fraction: float) -> str:
    """A fraction as a percentage, one decimal, with significant digits when it is tiny.

    >>> percent(0.464), percent(3e-7)
    ('46.4%', '3e-05%')
    """
    if fraction and abs(fraction) < 0.0005:
        return f"{fraction * 100:.2g}%"
    return f"{fraction:.1%}"


def _plan_dict(plan: ParallelPlan) -> dict:
    return {k: getattr(plan, k) for k in ("dp", "tp", "pp", "cp", "ep", "zero", "micro_batch",
                                          "virtual_stages", "schedule", "recompute",
                                          "sequence_parallel")}


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    left = {i for i, h in enumerate(rows[0]) if h in ("", "plan", "run")}  # text columns
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
    """The ParallelPlan of the plan flags; dp fills the devices when it is not given. A plan
    that breaks a rule is refused; one that only does not fit in memory is returned (its
    estimate says ``fits: no``)."""
    try:
        return calibrate.build_plan(vars(args), cfg, cluster, args.global_batch, args.seq_len,
                                    _flag)
    except ValueError as e:
        msg = str(e)
        if msg.startswith("this plan cannot run: "):
            tp = args.tp or 1
            pp, cp = args.pp or 1, args.cp or 1
            dp = args.dp or cluster.n_devices // (tp * pp * cp)
            plan = ParallelPlan(dp=dp, tp=tp, pp=pp, cp=cp, micro_batch=args.micro_batch or 1)
            msg += _hint(msg[len("this plan cannot run: "):], cfg, plan)
        raise UsageError(msg) from None


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
    cal = load_calibration(args)
    plan = fixed_plan(args, cfg, cluster)
    est = estimate(cfg, cluster, plan, args.global_batch, args.seq_len, dtype=args.dtype,
                   calibration=cal)
    limit = cluster.accelerator.memory_capacity_bytes  # what estimate's fits compares with
    if args.json:
        print(json.dumps(_record(est) | {"plan": _plan_dict(plan), "dtype": args.dtype,
                                         "memory_limit_bytes": float(limit),
                                         "headroom_bytes": args.headroom * 1e9,
                                         "calibration": args.calibration}, indent=2))
        return 0
    print(f"{cfg.name or 'model'} on {cluster.name}, batch {count(args.global_batch)} x "
          f"{count(args.seq_len)} tokens" + (f", {args.dtype}" if args.dtype != "bf16" else "")
          + (f", calibration {args.calibration}" if args.calibration else ""))
    print(f"plan: {_plan_text(plan)}")
    rows = [["", "value"], ["step time", duration(est.step_time)],
            ["MFU", percent(est.mfu)], ["HFU", percent(est.hfu)],
            ["tokens/s", count(est.tokens_per_s)],
            ["memory/device", fmt_bytes(float(est.memory.total))],
            ["fits", "yes" if est.fits else "no"]]
    rows += [[f"  {k.replace('_', ' ')}", duration(v)] for k, v in _breakdown(est).items()]
    if not est.fits:
        rows.append([f"memory by part (limit {fmt_bytes(float(limit))}"
                     + (f" after {args.headroom:g} GB headroom)" if args.headroom else ")"), ""])
        rows += [[f"  {k}", fmt_bytes(float(v))] for k, v in est.memory.items() if v]
    print(_table(rows))
    if not est.fits:
        tries = [t for t, ok in (("--recompute full", plan.recompute != "full"),
                                 (f"--zero {plan.zero + 1}", plan.zero < (1 if plan.pp > 1 else 3)),
                                 ("larger --tp / --pp", True)) if ok]
        print(f"does not fit: {fmt_bytes(float(est.memory.total))} per device against "
              f"{fmt_bytes(float(limit))}; try {', '.join(tries)}")
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


def decisive_rule(cfg, cluster, global_batch, T, res, space, objective="time"):
    """(rule name, plans it alone dropped) for the rule that dropped most plans breaking no
    other rule: the one to relax to get most plans back. A plan often breaks several rules,
    so ``res.dropped`` (plans breaking each rule) overlaps and its largest count can name a rule
    whose relaxing brings nothing back. (None, 0) when every dropped plan breaks two or more.
    """
    import numpy as np

    space = dict(space)
    if objective == "cost" and space.get("n_devices") is None:
        space["n_devices"] = [cluster.n_devices // 2 ** k for k in range(7)
                              if cluster.n_devices % 2 ** k == 0]
    reasons = planner.plan_space(cfg, cluster, global_batch, T, **space)["reasons"]
    alone = {}
    for i, (name, _) in enumerate(planner.RULES):
        if name in ("memory", "deadline"):  # set only on plans that break no structural rule
            alone[name] = int(res.dropped.get(name, 0))
        else:
            alone[name] = int(np.count_nonzero(reasons == (1 << i)))
    name = max(alone, key=alone.get)
    return (name, alone[name]) if alone[name] else (None, 0)


def _plan_records(res, t, args, tokens) -> list[dict]:
    """The JSON record of each of the ``--top`` best plans, with days, GPU-hours and cost."""
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
    return out


def _nothing_runs(cfg, cluster, res, space, args) -> Exception:
    """The one-line error of a search in which no plan runs: the rule that dropped most."""
    rules = dict(planner.RULES)
    name, n = decisive_rule(cfg, cluster, args.global_batch, args.seq_len, res, space,
                            args.objective)
    if args.dp is not None and getattr(res, "n_runnable", 0):
        return UsageError(f"no plan with --dp {args.dp} runs among the {res.n_plans:,} "
                          "searched; leave out --dp or choose another")
    if name is None:
        name = max(res.dropped, key=res.dropped.get)
        return UsageError(f"no plan of the {res.n_plans:,} searched can run; every one breaks "
                          f"several rules, most often: {rules[name]}")
    return UsageError(f"no plan of the {res.n_plans:,} searched can run; the rule that "
                      f"dropped most ({n:,} plans that broke no other): {rules[name]}")


def _plan(args) -> int:
    cfg, cluster = _common(args)
    _choice("--objective", args.objective, ("time", "cost"))
    cal = load_calibration(args)
    n_params = float(transformer.param_count(cfg).total)
    tokens = args.tokens or planner.CHINCHILLA_TOKENS_PER_PARAM * n_params
    limit = None
    if args.max_days is not None:  # step time that trains the tokens in max_days
        limit = args.max_days * planner.SECONDS_PER_DAY * args.global_batch * args.seq_len / tokens
    space = _space(args)
    res = planner.search(cfg, cluster, args.global_batch, args.seq_len, dtype=args.dtype,
                         calibration=cal, objective=args.objective, max_step_time=limit,
                         **space)
    t = res.table
    if args.dp is not None:
        keep = t["dp"] == args.dp
        t = {k: v[keep] for k, v in t.items()}
        res.table = t
    rules = dict(planner.RULES)
    if not len(res):
        raise _nothing_runs(cfg, cluster, res, space, args)
    out = _plan_records(res, t, args, tokens)
    why = res.why_not_first(1) if len(res) > 1 else None
    name, n_alone = decisive_rule(cfg, cluster, args.global_batch, args.seq_len, res, space,
                                  args.objective)
    if args.json:
        print(json.dumps({"tokens": tokens, "objective": args.objective, "dtype": args.dtype,
                          "calibration": args.calibration, "headroom_bytes": args.headroom * 1e9,
                          "plans_searched": res.n_plans, "plans_feasible": len(res),
                          "dropped": res.dropped,
                          "dropped_most": {"rule": name, "plans_alone": n_alone,
                                           "why": rules.get(name)},
                          "plans": out, "runner_up_loses": why}, indent=2))
        return 0
    extra = "".join(x for x in ((f", {args.dtype}" if args.dtype != "bf16" else ""),
                                (f", calibration {args.calibration}" if args.calibration
                                 else "")))
    print(f"{cfg.name or 'model'} ({n_params / 1e9:.1f}B params) on {cluster.name}, batch "
          f"{count(args.global_batch)} x {count(args.seq_len)}, {_tokens(tokens)}{extra}; "
          f"{res.n_plans:,} plans searched, {len(res):,} run, in {res.seconds:.2f} s")
    head = ["#", "GPUs", "plan", "step", "MFU", "memory", "days", "GPU-hours"]
    if args.price_per_gpu_hour:
        head.append("cost $")
    rows = [head]
    for r in out:
        row = [str(r["rank"]), count(r["n_devices"]), _plan_text(res.plan(r["rank"] - 1)),
               duration(r["step_time_s"]), percent(r["mfu"]),
               fmt_bytes(r["memory_per_device_bytes"]), count(r["days"], 1),
               count(r["gpu_hours"])]
        if args.price_per_gpu_hour:
            row.append(count(r["cost"]))
        rows.append(row)
    print(_table(rows))
    if why:
        print(f"runner-up loses: {why}")
    gone = {k: v for k, v in res.dropped.items() if v}
    if gone:
        print("dropped (a plan may break several rules): "
              + "; ".join(f"{v:,} {k}" for k, v in gone.items()))
    if name:
        print(f"dropped most: {name}, {n_alone:,} plans that broke no other rule ({rules[name]})")
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
    cal = load_calibration(args)
    if args.utilization is not None and args.utilization > 1:
        raise UsageError(f"--utilization {args.utilization:g} must be a fraction in (0, 1]")
    if not math.isfinite(cluster.peak_flops_per_s * args.days * planner.SECONDS_PER_DAY):
        raise UsageError(f"--days {args.days:g}: the cluster's FLOPs over that long overflow a "
                         "float (about 1.8e308); choose fewer days")
    n100, d100 = planner.compute_optimal(cluster, args.days)
    if args.utilization is not None:
        u = args.utilization
        n_u, d_u = planner.compute_optimal(cluster, args.days, utilization=u)
    else:
        n_u, d_u = planner.compute_optimal(
            cluster, args.days,
            utilization=lambda n: planner.predicted_utilization(cluster, n, calibration=cal))
        u = 6 * n_u * d_u / (cluster.peak_flops_per_s * args.days * planner.SECONDS_PER_DAY)
    u100 = u if args.utilization is not None else \
        planner.predicted_utilization(cluster, n100, calibration=cal)
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
    print(f"the 100% model would take {count(args.days / u100)} days at its {percent(u100)} "
          "utilisation")
    return 0


from .cli_calibrate import add_calibrate  # noqa: E402  (it uses build_* from here lazily)

COMMANDS = (_add_estimate, _add_plan, _add_optimal, add_calibrate)
