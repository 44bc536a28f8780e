"""System design questions: worked answers computed by the library.

:func:`design_training` (train a model on n chips in d days: budget, tokens, memory of one plan)
and :func:`design_serving` (serve a model at a target time per output token: chips needed), and
their Markdown write-ups :func:`training_answer` and :func:`serving_answer` for the notebooks.

See: the "Interview preparation" part of the book.
"""

from __future__ import annotations

import math

from ... import hardware, inference, memory, models, transformer
from ...parallelism import ParallelPlan
from ...units import DAY, fmt_bytes, fmt_flops, fmt_seconds

def design_training(model="llama3-70b", accelerator="h100", n=1024, days=30, mfu=0.40,
                    plan=None, T=8192, global_batch=512) -> dict:
    """A worked answer to "train ``model`` on ``n`` chips in ``days`` days": budget, memory, plan.

    The MFU is an assumption (Llama 3 405B reported 38-43% on H100s); the library's planner
    (``scaling_lib.planner.search``) is not written yet, so one hand-picked plan is checked for fit.
    """
    cfg = models.get(model)
    n_params = transformer.n_params(cfg)
    plan = plan or ParallelPlan(dp=n // 32, tp=8, pp=4, zero=1, recompute="selective",
                                sequence_parallel=True, micro_batch=1)
    if plan.world_size != n:
        raise ValueError(f"plan.world_size={plan.world_size} must equal n={n}")
    seconds = days * DAY
    flops = n * hardware.get(accelerator).peak_flops_per_s("bf16") * mfu * seconds
    tokens = flops / transformer.six_n_flops(n_params, 1)
    mem = memory.training_memory(cfg, plan, global_batch, T)
    fits, why = memory.check_fit(mem, accelerator)
    return {"n_params": n_params, "flops": flops, "tokens": tokens,
            "tokens_per_param": tokens / n_params, "tokens_per_s": tokens / seconds,
            "plan": plan, "memory": mem, "fits": fits, "why": why,
            "unsharded_states": memory.model_state_bytes(n_params).total}


def design_serving(model="llama3-70b", accelerator="h100", tpot=0.050, batch=32, context=8192,
                   sizes=(1, 2, 4, 8, 16, 32)) -> dict:
    """A worked answer to "serve ``model`` at ``tpot`` seconds per output token": chips and speed.

    The smallest n in ``sizes`` whose HBM holds the bf16 weights and the batch's KV cache and
    whose roofline decode step is within ``tpot``; the step bound ignores communication (a real
    server runs slower), and the serving estimator (``scaling_lib.serving``) is not written yet.
    """
    cfg = models.get(model)
    acc = hardware.get(accelerator)
    need = inference.weight_bytes_read(cfg) + transformer.kv_cache_bytes(cfg, batch, context)
    rows = []
    for n in sizes:
        step = inference.decode_step_time(cfg, batch, context, accelerator, n)
        rows.append({"chips": n, "fits": bool(need <= n * acc.hbm_bytes), "step": step,
                     "meets": bool(step <= tpot and need <= n * acc.hbm_bytes)})
    best = next((r for r in rows if r["meets"]), None)
    return {"need_bytes": need, "rows": rows, "best": best, "min_for_memory":
            math.ceil(need / acc.hbm_bytes)}


def _llama3_mfus() -> str:
    from ... import published
    mfus = sorted(r.mfu for r in published.RUNS.values() if r.name.startswith("llama3-405b"))
    return f"{mfus[0]:.0%} to {mfus[-1]:.0%}"


def training_answer(**kw) -> str:
    """The worked answer of "train a 70B model on 1,024 H100s in 30 days", as Markdown."""
    d = design_training(**kw)
    p, mem = d["plan"], d["memory"]
    parts = ", ".join(f"{k} {fmt_bytes(float(v))}" for k, v in mem.items())
    return (f"**Budget.** {kw.get('n', 1024):,} chips × dense peak × MFU "
            f"{kw.get('mfu', 0.40):.0%} × {kw.get('days', 30)} days = {fmt_flops(d['flops'])}. "
            f"At 6N = {fmt_flops(transformer.six_n_flops(d['n_params'], 1))} per token that trains "
            f"on {d['tokens'] / 1e12:.1f}T tokens ({d['tokens_per_param']:.0f} tokens per "
            f"parameter; Hoffmann et al. 2022 find about 20 compute-optimal), i.e. {d['tokens_per_s'] / 1e6:.2f}M "
            "tokens/s for the whole cluster.\n\n"
            f"**Memory.** Unsharded, the model states alone are "
            f"{fmt_bytes(d['unsharded_states'])} (16 bytes per parameter): no single GPU holds "
            f"them. The plan dp={p.dp}, tp={p.tp}, pp={p.pp}, ZeRO-{p.zero}, selective "
            f"recomputation, sequence parallelism needs per GPU: {parts}; total "
            f"{fmt_bytes(float(mem.total))}. {'It fits' if d['fits'] else 'It does not fit'}: "
            f"{d['why']}.\n\n"
            f"**MFU.** {kw.get('mfu', 0.40):.0%} is an assumption taken from published runs of "
            f"this size (Llama 3 405B reported {_llama3_mfus()} on H100s); the library's step estimator and planner are not written "
            "yet, so this page does not search plans or predict the MFU. Say in the interview "
            "which overheads eat the rest: the pipeline bubble, exposed DP and TP communication, "
            "recomputation, and kernels below peak.")


def serving_answer(**kw) -> str:
    """The worked answer of "serve Llama 3 70B at 50 ms per token: how many chips?", as Markdown."""
    d = design_serving(**kw)
    rows = [{"chips": r["chips"], "HBM holds it": "yes" if r["fits"] else "no",
             "decode step (roofline)": fmt_seconds(r["step"]),
             "meets the target": "yes" if r["meets"] else "no"} for r in d["rows"]]
    from ..nbtools import table

    best = d["best"]
    tpot = kw.get("tpot", 0.050)
    end = (f"The smallest that meets {fmt_seconds(tpot)} per token is **{best['chips']} chips** "
           f"({best['chips'] and kw.get('batch', 32) / best['step']:.0f} tokens/s for the server)"
           if best else "None of these sizes meets the target.")
    return (f"Weights plus the KV cache of {kw.get('batch', 32)} sequences of "
            f"{kw.get('context', 8192):,} tokens need {fmt_bytes(d['need_bytes'])}: at least "
            f"{d['min_for_memory']} chips for memory alone.\n\n" + table(rows) + "\n\n" + end +
            ". The bound leaves out the tensor-parallel AllReduce of every layer and the "
            "scheduler's overhead, so a real server needs margin; a power of two for TP.")
