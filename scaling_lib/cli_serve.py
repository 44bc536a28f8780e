"""``python -m scaling_lib serve``: latency, throughput, memory and cost of serving a model.

    python -m scaling_lib serve --model llama3-70b --gpu h100 --gpus 8 --batch 64 \\
        --prompt-len 1024 --gen-len 256 [--dtype bf16] [--kv-dtype fp8] \\
        [--price-per-gpu-hour 2.5] [--tp 8] [--pp 2] [--replicas 1] [--prefill chunked|static]
        [--slo-ttft 1.0] [--slo-tpot 0.05] [--rate 4] [--requests 2000] [--json] [--pareto]

A custom model instead of ``--model``: the same flags and GPT-style defaults as ``estimate``
(:func:`scaling_lib.cli_train.build_model`): ``--layers L --hidden D --heads N`` and optionally
``--ffn F`` (default 4·D), ``--kv-heads K`` (default N), ``--head-dim H`` (default D/N),
``--vocab V`` (default 51,200), ``--glu/--no-glu`` (default --no-glu) and ``--tied-embeddings``.
The figures come from :func:`scaling_lib.serving.estimate`: the layout (``--tp``, ``--pp``,
``--replicas``; left out, the one with the lowest time per output token that fits) and the
prefill (chunked, or static batching). Tail latencies come from the request simulator
(:func:`scaling_lib.serving.sim.simulate`) run on one replica with Poisson arrivals at ``--rate``
requests/s (default: 80% of the rate the simulated server sustains at ``--batch``), p50/p90/p99 of TTFT, TPOT
and latency, and the goodput under ``--slo-ttft`` / ``--slo-tpot``. ``--pareto`` adds the
latency-throughput front over batches 1..4096 (:func:`scaling_lib.serving.pareto_mask`).

Registered in :data:`scaling_lib.cli.SUBCOMMANDS` by :func:`add_serve`.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from .cli_train import _float as _positive_float  # the one parser of a positive number flag

DTYPES = ("fp32", "bf16", "fp16", "fp8", "int8", "int4")
PARETO_BATCHES = 2 ** np.arange(13)  # 1 .. 4096


def _int(flag: str):
    def parse(text: str) -> int:
        try:
            x = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{flag} must be a whole number, got {text!r}")
        if x < 1:
            raise argparse.ArgumentTypeError(f"{flag} must be at least 1, got {text!r}")
        return x
    return parse


def _price(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--price-per-gpu-hour must be a number of dollars, "
                                         f"got {text!r}")
    if not 0 < x < float("inf"):
        raise argparse.ArgumentTypeError(f"--price-per-gpu-hour must be a positive number of "
                                         f"dollars, got {text!r}")
    return x


def add_serve(sub) -> None:
    """Register the ``serve`` subcommand on an argparse subparsers object."""
    s = sub.add_parser("serve", help="latency, throughput, memory and cost of serving a model",
                       description=__doc__.split("\n\n")[2].replace("\n", " "))
    from .cli_train import _model_flags

    _model_flags(s)  # the same model flags (and GPT-style custom defaults) as estimate and plan
    s.add_argument("--gpu", required=True, help="accelerator name, e.g. h100, tpu-v5e")
    s.add_argument("--gpus", type=_int("--gpus"), required=True,
                   help="devices the model is tensor-parallel over")
    s.add_argument("--batch", type=_int("--batch"), required=True,
                   help="sequences decoded together")
    s.add_argument("--prompt-len", type=_int("--prompt-len"), required=True,
                   help="prompt tokens per sequence")
    s.add_argument("--gen-len", type=_int("--gen-len"), required=True,
                   help="generated tokens per sequence")
    s.add_argument("--dtype", default="bf16", help=f"weights: one of {', '.join(DTYPES)}")
    s.add_argument("--kv-dtype", help="KV cache (default: --dtype)")
    s.add_argument("--price-per-gpu-hour", type=_price, help="dollars per device-hour")
    s.add_argument("--tp", type=_int("--tp"), help="tensor-parallel degree (default: chosen)")
    s.add_argument("--pp", type=_int("--pp"), help="pipeline stages (default: chosen)")
    s.add_argument("--replicas", type=_int("--replicas"),
                   help="copies of the model (default: chosen); tp x pp x replicas = --gpus")
    s.add_argument("--prefill", default="chunked", choices=("chunked", "static"),
                   help="chunked prefill (decode rides along; default) or static batching")
    s.add_argument("--slo-ttft", type=_positive_float("--slo-ttft"),
                   help="target time to first token, seconds (goodput)")
    s.add_argument("--slo-tpot", type=_positive_float("--slo-tpot"),
                   help="target time per output token, seconds (goodput)")
    s.add_argument("--rate", type=_positive_float("--rate"),
                   help="requests/s for the tail latencies (default: 80%% of the sustained rate)")
    s.add_argument("--requests", type=_int("--requests"), default=2000,
                   help="requests the simulator runs for the tail latencies (default 2000)")
    s.add_argument("--json", action="store_true", help="print one JSON object")
    s.add_argument("--pareto", action="store_true",
                   help="also give the latency-throughput front over batches 1..4096")
    s.set_defaults(run=run)


def _usage(msg: str):
    from .cli import UsageError
    return UsageError(f"serve: {msg}")


def _model(args):
    from .cli_train import build_model

    return build_model(args)


def _check_dtype(flag, value):
    if value is not None and value not in DTYPES:
        raise _usage(f"{flag} {value!r} is not a supported precision; choose one of "
                     f"{', '.join(DTYPES)}")


def compute(args) -> dict:
    """The figures ``serve`` prints, as a JSON-ready dict (SI units)."""
    from . import hardware, serving

    cfg = _model(args)
    if args.gpu not in hardware.names():
        raise _usage(f"--gpu {args.gpu!r} is not a known accelerator; choose one of "
                     f"{', '.join(hardware.names())}")
    _check_dtype("--dtype", args.dtype)
    _check_dtype("--kv-dtype", args.kv_dtype)
    kw = dict(prompt_len=args.prompt_len, gen_len=args.gen_len, dtype=args.dtype,
              kv_dtype=args.kv_dtype, price_per_device_hour=args.price_per_gpu_hour,
              prefill=args.prefill)
    lay = dict(tp=args.tp, pp=args.pp, replicas=args.replicas)
    try:
        e = serving.estimate(cfg, args.gpu, args.gpus, batch=args.batch, **kw, **lay)
    except ValueError as exc:
        raise _usage(str(exc)) from None
    out = {
        "model": cfg.name or "custom", "accelerator": args.gpu, "n_devices": args.gpus,
        "tp": int(e.tp), "pp": int(e.pp), "replicas": int(e.replicas), "prefill": e.prefill,
        "batch": args.batch, "prompt_len": args.prompt_len, "gen_len": args.gen_len,
        "dtype": args.dtype, "kv_dtype": args.kv_dtype or args.dtype,
        "ttft_s": float(e.ttft), "tpot_s": float(e.tpot),
        "tokens_per_s": float(e.tokens_per_s),
        "tokens_per_s_per_device": float(e.tokens_per_s_per_device),
        "decode_tokens_per_s": float(e.decode_tokens_per_s),
        "memory_per_device_bytes": {k: float(v) for k, v in e.memory.items()},
        "memory_total_per_device_bytes": float(e.memory.total),
        "hbm_per_device_bytes": float(hardware.get(args.gpu).hbm_bytes),
        "fits": bool(e.fits),
        "cost_per_million_tokens": (None if e.cost_per_million_tokens is None
                                    else float(e.cost_per_million_tokens)),
        "prefill_bound": e.prefill_bound, "decode_bound": e.decode_bound,
        "min_devices": serving.min_devices(cfg, args.gpu, dtype=args.dtype),
    }
    if e.fits:
        out["tail"] = _tail(cfg, args, e)
    if args.pareto:
        f = serving.estimate(cfg, args.gpu, args.gpus, batch=PARETO_BATCHES, **kw, **lay)
        keep = np.asarray(f.fits) & serving.pareto_mask(f.tpot, f.tokens_per_s)
        out["pareto"] = [{"batch": int(b), "tpot_s": float(t), "tokens_per_s": float(r),
                          "cost_per_million_tokens": None if c is None else float(c)}
                         for b, t, r, c in zip(
                             PARETO_BATCHES[keep], np.asarray(f.tpot)[keep],
                             np.asarray(f.tokens_per_s)[keep],
                             [None] * int(keep.sum()) if f.cost_per_million_tokens is None
                             else np.asarray(f.cost_per_million_tokens)[keep])]
    return out


def _tail(cfg, args, e) -> dict:
    """p50/p90/p99 of TTFT, TPOT and latency, and the goodput, from the request simulator on
    one replica of the estimate's layout (Poisson arrivals, the KV cache that fits, a paged
    cache). The simulator runs each iteration as one batch: with pipeline stages it does not
    overlap micro-batches, so its TPOT is then an upper bound of the estimate's."""
    from . import hardware, inference, serving
    from .serving import sim
    from .units import dtype_bytes

    acc = hardware.get(args.gpu)
    tp, pp, reps = int(e.tp), int(e.pp), int(e.replicas)
    kv_dtype = args.kv_dtype or args.dtype
    S = args.prompt_len + args.gen_len // 2
    t_1, t_2 = (float(inference.decode_step_time(cfg, b, S, acc, tp * pp, args.dtype, kv_dtype,
                                                 tp=tp, pp=pp, launch=True)) for b in (1, 2))
    free = acc.hbm_bytes - float(e.memory["weights"]) - float(e.memory["activations"])
    per_token = float(serving.kv_cache_bytes_per_device(cfg, tp, 1, 1, kv_dtype, pp=pp))
    budget = int(max(free, 0.0) // per_token)
    need = args.prompt_len + args.gen_len
    if budget < need:
        return {"error": f"the KV cache left ({budget} tokens) holds no request of {need}"}
    one = serving.estimate(cfg, args.gpu, args.gpus, batch=reps, prompt_len=args.prompt_len,
                           gen_len=args.gen_len, dtype=args.dtype, kv_dtype=args.kv_dtype,
                           tp=tp, pp=pp, replicas=reps)
    t0, t1, pre = t_1 - (t_2 - t_1), max(t_2 - t_1, 0.0), float(one.ttft)
    b = max(min(args.batch // reps, budget // need), 1)
    # default load: 80% of what the simulated server sustains at this batch (its iterations run
    # the new requests' prefills, then the decode step: no piggybacking)
    rate = args.rate if args.rate else \
        0.8 * reps * sim.saturated_tokens_per_s(b, args.gen_len, pre, t0, t1) / args.gen_len
    r = sim.simulate(prompt_len=args.prompt_len, gen_len=args.gen_len, kv_budget_tokens=budget,
                     prefill_time=pre, t0=t0, t1=t1, rate=rate / reps, n_requests=args.requests, kv_policy="paged",
                     max_batch=max(args.batch // reps, 1), slo_ttft=args.slo_ttft,
                     slo_tpot=args.slo_tpot)
    return {"rate_per_s": rate, "requests": args.requests,
            **{f"{w}_s": r.percentiles(w) for w in ("ttft", "tpot", "latency")},
            "goodput_per_s": r.goodput * reps, "slo_attainment": r.slo_attainment,
            "preemptions": r.preemptions}


def _rate(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def table(r: dict) -> str:
    """The readable report of :func:`compute`'s dict."""
    from .units import fmt_bytes, fmt_seconds

    mem = r["memory_per_device_bytes"]
    rows = [
        ("model", f"{r['model']} ({r['dtype']} weights, {r['kv_dtype']} KV cache)"),
        ("hardware", f"{r['n_devices']} x {r['accelerator']} (tp={r['tp']} pp={r['pp']} "
                     f"replicas={r['replicas']}; at least {r['min_devices']} to hold the "
                     "weights)"),
        ("requests", f"batch {r['batch']}, {r['prompt_len']} prompt + {r['gen_len']} "
                     "generated tokens each"),
        ("time to first token", f"{fmt_seconds(r['ttft_s'])} ({r['prefill_bound']}-bound)"),
        ("time per output token", f"{fmt_seconds(r['tpot_s'])} ({r['decode_bound']}-bound)"),
        ("throughput", f"{_rate(r['tokens_per_s'])} output tokens/s "
                       f"({_rate(r['tokens_per_s_per_device'])} per device; decode alone "
                       f"{_rate(r['decode_tokens_per_s'])})"),
        ("memory per device", f"{fmt_bytes(r['memory_total_per_device_bytes'])} of "
                              f"{fmt_bytes(r['hbm_per_device_bytes'])}: "
                              + ", ".join(f"{k} {fmt_bytes(v)}" for k, v in mem.items())
                              + ("" if r["fits"] else "  DOES NOT FIT")),
        ("cost", "give --price-per-gpu-hour" if r["cost_per_million_tokens"] is None
         else f"${r['cost_per_million_tokens']:,.2f} per million output tokens"),
    ]
    tail = r.get("tail")
    if tail and "error" not in tail:
        def pct(d):
            return "/".join(fmt_seconds(d[k]) for k in ("p50", "p90", "p99"))
        rows += [
            ("tail (p50/p90/p99)", f"{tail['requests']:,} requests at {tail['rate_per_s']:.3g}/s: "
                                   f"TTFT {pct(tail['ttft_s'])}, TPOT {pct(tail['tpot_s'])}"),
            ("goodput", f"{tail['goodput_per_s']:.3g} requests/s within the targets "
                        f"({tail['slo_attainment']:.0%} of requests; {tail['preemptions']} "
                        "preemptions)"),
        ]
    elif tail:
        rows.append(("tail", tail["error"]))
    width = max(len(k) for k, _ in rows)
    lines = [f"{k:<{width}}  {v}" for k, v in rows]
    if "pareto" in r:
        lines += ["", "latency-throughput front (batches that fit, none dominated):",
                  f"{'batch':>6}  {'TPOT':>10}  {'tokens/s':>12}  {'$/1M tokens':>12}"]
        for p in r["pareto"]:
            cost = "-" if p["cost_per_million_tokens"] is None \
                else f"{p['cost_per_million_tokens']:,.2f}"
            lines.append(f"{p['batch']:>6}  {fmt_seconds(p['tpot_s']):>10}  "
                         f"{_rate(p['tokens_per_s']):>12}  {cost:>12}")
    return "\n".join(lines)


def run(args) -> int:
    r = compute(args)
    print(json.dumps(r, indent=2) if args.json else table(r))
    return 0


__all__ = ["add_serve", "compute", "table", "run", "DTYPES"]
