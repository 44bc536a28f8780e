"""Figures and the planner explorer (Chapter 17, "Planning a training run").

``plot_ranked`` shows how much slower the feasible plans are than the best; ``plot_pareto`` the
days and cost (or GPU-hours) of every plan of a cost search, with its Pareto front;
``plan_rows`` the ranked plans as table rows; ``explorer()`` wraps them: model, cluster and
budget in, ranked plans and the front out. matplotlib and ipywidgets are imported only when the
explorer is called; every number comes from :mod:`scaling_lib.planner`.
"""

from __future__ import annotations

import numpy as np

from ... import hardware, models, planner, transformer


def plan_rows(result, n_tokens, *, top=5, price_per_gpu_hour=None) -> list[dict]:
    """The ``top`` plans of a search as table rows: plan, GPUs, step time, MFU, memory, days,
    GPU-hours (and cost with a price)."""
    t = result.table
    rows = []
    for i in range(min(top, len(result))):
        p = result.plan(i)
        run = planner.training_run(float(t["step_time"][i]), n_tokens, result.global_batch,
                                   result.T, int(t["n_devices"][i]),
                                   price_per_gpu_hour=price_per_gpu_hour)
        row = {"GPUs": int(t["n_devices"][i]),
               "tp·pp·dp·cp": f"{p.tp}·{p.pp}·{p.dp}·{p.cp}",
               "ZeRO": p.zero, "mb": p.micro_batch,
               "schedule": (f"{p.schedule} v={p.virtual_stages}" if p.virtual_stages > 1
                            else p.schedule) if p.pp > 1 else "-",
               "recompute": p.recompute, "SP": "yes" if p.sequence_parallel else "no",
               "step (s)": round(float(t["step_time"][i]), 2),
               "MFU": f"{float(t['mfu'][i]):.1%}",
               "memory (GB)": round(float(t["memory_bytes"][i]) / 1e9, 1),
               "days": round(run.days, 1), "GPU-hours": f"{run.gpu_hours:,.0f}"}
        if run.cost is not None:
            row["cost ($M)"] = round(run.cost / 1e6, 2)
        rows.append(row)
    return rows


def plot_ranked(ax, result, *, label=None, mark=None):
    """Step time of every feasible plan over the best's, best first (log scale): how much a
    plan picked by habit can lose. ``mark``: a ParallelPlan to point at (e.g. a heuristic)."""
    st = result.table["step_time"]
    ax.plot(np.arange(1, len(st) + 1), st / st[0], lw=1.5, label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("rank among the feasible plans")
    ax.set_ylabel("step time / best step time")
    ax.grid(True, which="both", alpha=0.3)
    if mark is not None:
        why = result.explain(mark)
        hit = np.ones(len(st), dtype=bool)
        for k in ("dp", "tp", "pp", "cp", "zero", "micro_batch", "virtual_stages", "schedule",
                  "recompute", "sequence_parallel"):
            hit &= result.table[k] == getattr(mark, k)
        if hit.any():
            i = int(np.flatnonzero(hit)[0])
            ax.plot(i + 1, st[i] / st[0], "o", color="C3", ms=8)
            ax.annotate(f"heuristic plan: rank {i + 1:,}, {st[i] / st[0]:.2f}x", (i + 1,
                        st[i] / st[0]), textcoords="offset points", xytext=(-10, 12),
                        ha="right", fontsize=8)
        elif why:
            ax.set_title(why[0], fontsize=8)


def plot_pareto(ax, result, n_tokens, *, price_per_gpu_hour=None):
    """Days against GPU-hours (or cost) for every plan of a search, coloured by GPU count,
    with the Pareto front: no plan is both faster and cheaper than a point on it."""
    t = result.table
    steps = n_tokens / (result.global_batch * result.T)
    days = t["step_time"] * steps / planner.SECONDS_PER_DAY
    gpu_h = t["step_time"] * steps * t["n_devices"] / 3600
    y = gpu_h * (price_per_gpu_hour or 1.0)
    ns = t["n_devices"]
    for j, n in enumerate(sorted(set(ns.tolist()))):
        sel = ns == n
        ax.scatter(days[sel], y[sel], s=4, alpha=0.3, color=f"C{j % 10}", label=f"{n:,} GPUs")
    front = planner.pareto(days, y)
    order = np.argsort(days[front])
    ax.plot(days[front][order], y[front][order], "k.-", lw=1.2, ms=5, label="Pareto front")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("days to train")
    ax.set_ylabel("cost ($)" if price_per_gpu_hour else "GPU-hours")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, markerscale=3)
    return front


def explorer(model="llama3-70b", accelerator="h100", n_devices=1024, global_batch=1024,
             T=8192, n_tokens=2e12, price_per_gpu_hour=2.0):
    """Model, cluster and budget in; the ranked plans and the days-cost front out."""
    import ipywidgets as w
    import matplotlib.pyplot as plt
    from IPython.display import Markdown, display

    from ..nbtools import table

    model_w = w.Dropdown(options=[n for n in models.names()], value=model,
                         description="model")
    acc_w = w.Dropdown(options=[n for n in ("a100-80gb", "h100", "h200", "b200")],
                       value=accelerator, description="GPU")
    n_w = w.Dropdown(options=[2 ** k for k in range(4, 15)], value=n_devices,
                     description="GPUs")
    b_w = w.IntText(value=global_batch, description="batch (seq)")
    t_w = w.Dropdown(options=[2048, 4096, 8192], value=T, description="T")
    tok_w = w.FloatLogSlider(value=n_tokens, base=10, min=10, max=13.5, step=0.05,
                             description="tokens")
    price_w = w.FloatText(value=price_per_gpu_hour, description="$/GPU-h")
    obj_w = w.ToggleButtons(options=["time", "cost"], value="cost", description="rank by")
    out = w.Output()

    def redraw(*_):
        with out:
            out.clear_output(wait=True)
            if b_w.value < 1 or price_w.value < 0:
                print("the batch must be a positive number of sequences, the price >= 0")
                return
            cl = hardware.cluster(acc_w.value, n_w.value)
            try:
                res = planner.search(model_w.value, cl, b_w.value, t_w.value,
                                     objective=obj_w.value)
            except ValueError as e:
                print(e)
                return
            if not len(res):
                print(f"no plan fits: {res.dropped}")
                return
            display(Markdown(table(plan_rows(res, tok_w.value, price_per_gpu_hour=price_w.value
                                             or None))))
            print(f"runner-up loses: {res.why_not_first(1)}" if len(res) > 1 else "")
            fig, ax = plt.subplots(figsize=(7, 4))
            plot_pareto(ax, res, tok_w.value, price_per_gpu_hour=price_w.value or None)
            n_params = transformer.param_count(models.get(model_w.value)).total
            ax.set_title(f"{model_w.value} ({n_params / 1e9:.0f}B), {tok_w.value:.2g} tokens",
                         fontsize=9)
            plt.show()

    for ctl in (model_w, acc_w, n_w, b_w, t_w, tok_w, price_w, obj_w):
        ctl.observe(redraw, names="value")
    redraw()
    return w.VBox([w.HBox([model_w, acc_w, n_w]), w.HBox([b_w, t_w, obj_w]),
                   w.HBox([tok_w, price_w]), out])


def plot_breakdown(ax, estimates, labels):
    """Stacked bars of each estimate's step: compute, exposed communication, bubble, optimizer
    (seconds), one bar per (StepEstimate, label)."""
    parts = (("compute_time", "compute", "#4c72b0"),
             ("exposed_comm_time", "exposed communication", "#c44e52"),
             ("bubble_time", "pipeline bubble", "#dd8452"),
             ("optimizer_time", "optimizer", "#55a868"))
    left = np.zeros(len(estimates))
    for attr, name, color in parts:
        v = np.array([getattr(e, attr) for e in estimates])
        ax.barh(range(len(estimates)), v, left=left, color=color, label=name)
        left += v
    ax.set_yticks(range(len(estimates)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds per step")
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, axis="x", alpha=0.3)


def plot_goodput(ax, mtbf, checkpoint_times, *, restart_time=0.0):
    """Goodput against the checkpoint interval (minutes, log axis) for each checkpoint time,
    with Young's optimum sqrt(2·δ·M) marked on each curve."""
    from ... import reliability

    taus = np.logspace(0.5, 4.5, 400)
    for j, d in enumerate(checkpoint_times):
        g = [reliability.goodput(t, d, mtbf, restart_time=restart_time) for t in taus]
        best = reliability.young_daly_interval(d, mtbf)
        gb = reliability.goodput(best, d, mtbf, restart_time=restart_time)
        ax.plot(taus / 60, g, color=f"C{j}", label=f"checkpoint {d:g} s")
        ax.plot(best / 60, gb, "o", color=f"C{j}")
    ax.set_xscale("log")
    ax.set_xlabel("checkpoint interval (minutes of work)")
    ax.set_ylabel("goodput")
    ax.set_ylim(0, 1)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
