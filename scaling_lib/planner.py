"""The training planner: search every parallel plan, say how long and how much, size the model.

- :func:`plan_space`: every combination of TP, PP, DP, CP, EP, ZeRO stage, micro-batch, virtual
  stages, schedule, recomputation and sequence parallelism for a model on a cluster, as numpy
  arrays, each with a bit mask of the rules it breaks (:data:`RULES`).
- :func:`search`: the valid plans timed at once by
  :func:`scaling_lib.parallelism.estimate.estimate_arrays`, those that do not fit in memory
  dropped too, ranked by step time or by cost (GPU-seconds per step). It returns a
  :class:`SearchResult`: a sequence of :class:`~scaling_lib.parallelism.estimate.StepEstimate`,
  best first (each built when first read), that also says why plans were dropped
  (``dropped``, ``explain``).
- :func:`training_run`: days, GPU-hours and cost to train a token budget with one plan.
- :func:`compute_optimal`: the Chinchilla-optimal model size and tokens for a cluster and a
  wall-clock budget (Hoffmann et al. 2022: C = 6·N·D with D ≈ 20·N).

Ranks are laid out TP innermost, then CP, then DP, then PP (Megatron-LM's order), so a TP group
stays inside a node while tp <= GPUs per node.

See: the chapters "Planning a training run" and "Case study: training Llama 3 405B".
"""

from __future__ import annotations

import time

import numpy as np

from . import hardware, models
from .parallelism import rules as _rules
from .parallelism.plan import PP_LAYOUTS, RECOMPUTE, SCHEDULES, ParallelPlan
from .parallelism.rules import tp_choices
from .units import _brief, check_choice, check_count, check_positive, divisors
from .search_result import (_INT_AXES, _PLAN_KEYS, SearchResult, _cluster_of,  # noqa: F401
                            _plan_at, compare)
from .training_run import (CHINCHILLA_TOKENS_PER_PARAM, SECONDS_PER_DAY,  # noqa: F401
                           TRAIN_FLOPS_PER_PARAM_TOKEN, TrainingRun, compute_optimal,
                           days_to_train, pareto, shape_for, training_run)

# (name, sentence): why a plan cannot run. The structural rules are the one table of
# scaling_lib.parallelism.rules (the same bits); the search adds memory and the deadline.
RULES = tuple((r.name, r.message) for r in _rules.RULES) + (
    ("memory", "does not fit in the accelerator's memory"),
    ("deadline", "its step is slower than max_step_time (the run would miss its deadline)"),
)
_BIT = {name: 1 << i for i, (name, _) in enumerate(RULES)}
SPACE_KEYS = ("tp", "pp", "cp", "ep", "zero", "micro_batch", "virtual_stages", "schedule",
              "recompute", "sequence_parallel", "n_devices", "pp_layout",
              "reshard_after_forward")


def _choices(name, value, default, valid=None):
    """A tuple of choices for one axis of the space (a scalar becomes a one-element tuple)."""
    if value is None:
        return tuple(default)
    vals = tuple(value) if isinstance(value, (list, tuple, set, frozenset, range, np.ndarray)) \
        else (value,)
    if not vals:
        raise ValueError(f"{name}={_brief(value)} must list at least one choice")
    for v in vals:
        if valid is not None:
            check_choice(name, v, valid)
        elif name in ("sequence_parallel", "reshard_after_forward"):
            if not isinstance(v, (bool, np.bool_)):
                raise ValueError(f"{name}={_brief(v)} must be True or False")
        else:
            check_count(name, v)
    return tuple(sorted(set(vals), key=str))


def _pow2(limit):
    return [2 ** k for k in range(int(limit).bit_length()) if 2 ** k <= limit]


def plan_space(cfg, cluster, global_batch, T, **space) -> dict:
    """Every plan of the search space as equal-length numpy arrays, with the rules each breaks.

    Each device count n in ``n_devices`` (default: the cluster's) is split as n = dp·tp·pp·cp
    for every tp, pp, cp of the space; each split is combined with every ZeRO stage,
    micro-batch, (virtual stages, schedule) pair, recomputation and sequence-parallel setting.
    Defaults: tp the powers of two that split the heads and fit in a node; pp the divisors of
    n up to L; cp in 1, 2, 4, 8, 16; ep the divisors of E (MoE) or 1; ZeRO 0-3; micro-batch
    1-32 (powers of two); v = 1 with 1F1B and GPipe, v in 2, 3, 4, 6, 8 interleaved; all
    recomputation settings; SP on and off. Combinations that are the same plan as a simpler one
    (GPipe or interleaving without a pipeline, SP without TP, ZeRO without replicas) are not
    listed. Returns arrays ``dp tp pp cp ep zero micro_batch virtual_stages`` (int),
    ``schedule recompute`` (str), ``sequence_parallel`` (bool), ``n_devices`` (int) and
    ``reasons`` (bit i set when the plan breaks RULES[i]; memory is checked by :func:`search`).

    >>> s = plan_space("llama3-8b", hardware.cluster("h100", 8), 64, 4096)
    >>> int(np.all(s["dp"] * s["tp"] * s["pp"] * s["cp"] == 8)), len(s["dp"]) > 1000
    (1, True)
    """
    c = models.get(cfg)
    cluster = hardware.get_cluster(cluster)
    B = check_count("global_batch", global_batch)
    T = check_count("T", T)
    if np.ndim(B) or np.ndim(T):
        raise ValueError("global_batch and T must be single numbers")
    B, T = int(B), int(T)
    unknown = sorted(set(space) - set(SPACE_KEYS))
    if unknown:
        raise ValueError(f"unknown search option(s) {unknown}; valid: {', '.join(SPACE_KEYS)}")
    n_all = _choices("n_devices", space.get("n_devices"), (cluster.n_devices,))
    node = cluster.devices_per_node
    tps = _choices("tp", space.get("tp"), [t for t in tp_choices(c) if t <= node
                                           and t & (t - 1) == 0])
    cps = _choices("cp", space.get("cp"), (1, 2, 4, 8, 16))
    eps = _choices("ep", space.get("ep"), divisors(c.E) if c.is_moe else (1,))
    zeros = _choices("zero", space.get("zero"), (0, 1, 2, 3), valid=(0, 1, 2, 3))
    mbs = _choices("micro_batch", space.get("micro_batch"), (1, 2, 4, 8, 16, 32))
    vs = _choices("virtual_stages", space.get("virtual_stages"), (1, 2, 3, 4, 6, 8))
    scheds = _choices("schedule", space.get("schedule"), SCHEDULES, valid=SCHEDULES)
    recs = _choices("recompute", space.get("recompute"), RECOMPUTE, valid=RECOMPUTE)
    sps = _choices("sequence_parallel", space.get("sequence_parallel"), (False, True))
    # (v, schedule) pairs that are distinct plans: v = 1 for 1F1B and GPipe, v > 1 interleaved
    pairs = [(v, s) for s in scheds for v in vs if (v == 1) == (s != "interleaved")]
    if not pairs:
        raise ValueError(f"virtual_stages={vs} and schedule={scheds} give no plan: use v = 1 "
                         "with '1f1b' or 'gpipe' and v > 1 with 'interleaved'")
    # degrees: every (n, tp, pp, cp) with dp = n / (tp·pp·cp) whole
    deg = []
    for n in n_all:
        pps = _choices("pp", space.get("pp"), [p for p in divisors(n) if p <= c.L])
        for tp in tps:
            for pp in pps:
                for cp in cps:
                    if n % (tp * pp * cp) == 0:
                        deg.append((n, n // (tp * pp * cp), tp, pp, cp))
    if not deg:
        raise ValueError(f"no tp·pp·cp of tp={tps}, cp={cps} divides n_devices={n_all}; choose "
                         f"degrees whose product divides the device count")
    deg = np.array(deg, dtype=np.int64)  # [n_deg, 5]
    grid = np.meshgrid(np.arange(len(deg)), np.array(eps), np.array(zeros), np.array(mbs),
                       np.arange(len(pairs)), np.arange(len(recs)), np.array(sps, dtype=bool),
                       indexing="ij")
    d_i, ep, zero, mb, pair_i, rec_i, sp = (g.ravel() for g in grid)
    n, dp, tp, pp, cp = (deg[d_i, j] for j in range(5))
    v = np.array([p[0] for p in pairs], dtype=np.int64)[pair_i]
    sched = np.array([p[1] for p in pairs])[pair_i]
    rec = np.array(recs)[rec_i]
    # one representative of plans that are the same: no pipeline options without a pipeline,
    # no SP without TP, no ZeRO stage without replicas to shard over
    keep = ((pp > 1) | ((v == 1) & (sched == scheds[0] if "1f1b" not in scheds
                                    else sched == "1f1b")))
    keep &= (tp > 1) | ~sp | (len(sps) == 1)
    keep &= (dp * cp > 1) | (zero == zeros[0])
    cols = dict(dp=dp, tp=tp, pp=pp, cp=cp, ep=ep, zero=zero, micro_batch=mb,
                virtual_stages=v, schedule=sched, recompute=rec, sequence_parallel=sp,
                n_devices=n)
    cols = {k: a[keep] for k, a in cols.items()}
    cols = _options(cols, space)
    cols["reasons"] = _rules.check_arrays(c, cols, B, T)
    return cols


def _options(cols: dict, space: dict) -> dict:
    """Add the layout and FSDP options as copies of the plans they apply to: each pipeline of
    3 or more stages also with ``pp_layout="light_ends"``, each ZeRO-3 plan with replicas also
    with ``reshard_after_forward=False`` (the defaults unless ``space`` narrows them)."""
    layouts = _choices("pp_layout", space.get("pp_layout"), PP_LAYOUTS, valid=PP_LAYOUTS)
    reshard = _choices("reshard_after_forward", space.get("reshard_after_forward"),
                       (True, False))
    n = len(cols["dp"])
    cols["pp_layout"] = np.full(n, layouts[0], dtype=f"<U{max(map(len, PP_LAYOUTS))}")
    cols["reshard_after_forward"] = np.full(n, reshard[0], dtype=bool)
    extra = []
    if len(layouts) > 1:
        sel = np.flatnonzero(cols["pp"] >= 3)
        extra.append((sel, "pp_layout", layouts[1]))
    if len(reshard) > 1:
        sel = np.flatnonzero((cols["zero"] == 3) & (cols["dp"] * cols["cp"] > 1))
        extra.append((sel, "reshard_after_forward", reshard[1]))
    for sel, key, value in extra:
        copy = {k: v[sel].copy() for k, v in cols.items()}
        copy[key][:] = value
        cols = {k: np.concatenate([cols[k], copy[k]]) for k in cols}
    return cols


def describe(mask: int) -> list[str]:
    """The sentences of the RULES set in a reasons bit mask.

    >>> describe(_BIT["batch"])
    ['the global batch must be a multiple of dp · micro_batch']
    """
    return [text for i, (_, text) in enumerate(RULES) if int(mask) >> i & 1]


def describe_named(mask: int) -> list[str]:
    """:func:`describe` with each sentence ending in the name of its rule.

    >>> describe_named(_BIT["batch"])
    ['the global batch must be a multiple of dp · micro_batch (rule: batch)']
    """
    return [f"{text} (rule: {name})" for i, (name, text) in enumerate(RULES)
            if int(mask) >> i & 1]


def most_dropped(dropped: dict) -> tuple[str, int] | None:
    """The rule that dropped most plans of a search, with its count (None when none was).

    >>> most_dropped({"batch": 3, "memory": 10, "tp_heads": 0})
    ('memory', 10)
    """
    name = max(dropped, key=dropped.get, default=None)
    return None if name is None or not dropped[name] else (name, dropped[name])


def _progress(total, enabled):
    if not enabled:
        return None
    try:
        from tqdm.auto import tqdm
    except ImportError:  # the bar is optional
        return None
    return tqdm(total=total, unit="plan", desc="search", leave=False)


def search(cfg, cluster, global_batch, T, *, objective="time", top=None, dtype="bf16",
           calibration=None, progress=None, chunk=200_000, max_step_time=None,
           **space) -> SearchResult:
    """Every valid plan of ``cfg`` on ``cluster``, the fitting ones ranked, best first.

    ``objective``: "time" ranks by step time; "cost" by GPU-seconds per step (step time x
    devices: the same tokens per step, so the cheaper run), which only differs when
    ``n_devices`` lists several device counts (by default, a cost search also tries half,
    a quarter, ... down to 1/64 of the cluster). ``top`` keeps only the best ``top`` plans.
    ``space`` narrows or widens the axes of :func:`plan_space` (e.g. ``tp=8``,
    ``recompute=("full",)``). Plans that break a rule or do not fit are dropped; the result
    counts them (``dropped``) and :meth:`SearchResult.explain` says why any one went.
    ``max_step_time`` (seconds) drops slower plans (rule "deadline"): a cost search under a
    deadline.
    Each device count is timed in one vectorised call of ``estimate_arrays``; ``progress``
    (default: when more than ``chunk`` plans) shows a tqdm bar if tqdm is installed.

    >>> res = search("llama3-8b", hardware.cluster("h100", 16), 64, 4096, top=3)
    >>> len(res), res[0].step_time <= res[1].step_time, res.n_runnable > 1000
    (3, True, True)
    >>> res.explain(ParallelPlan(dp=8, pp=2, zero=2))[0][-16:]
    '(rule: zero2_pp)'
    """
    from .parallelism.estimate import estimate_arrays

    check_choice("objective", objective, ("time", "cost"))
    if top is not None:
        top = int(check_count("top", top))
    cfg = models.get(cfg)
    cluster = hardware.get_cluster(cluster)
    t0 = time.perf_counter()
    if objective == "cost" and space.get("n_devices") is None:
        space["n_devices"] = [cluster.n_devices // 2 ** k for k in range(7)
                              if cluster.n_devices % 2 ** k == 0]
    cols = plan_space(cfg, cluster, global_batch, T, **space)
    n_plans = len(cols["dp"])
    valid = cols["reasons"] == 0
    keys = ("step_time", "compute_time", "exposed_comm_time", "bubble_time", "optimizer_time",
            "memory_bytes", "fits", "mfu", "hfu", "tokens_per_s")
    res = {k: np.full(n_plans, np.nan) for k in keys}
    res["fits"] = np.zeros(n_plans, dtype=bool)
    idx_valid = np.flatnonzero(valid)
    bar = _progress(len(idx_valid), progress if progress is not None else
                    len(idx_valid) > chunk)
    for n in np.unique(cols["n_devices"][idx_valid]):
        sel = idx_valid[cols["n_devices"][idx_valid] == n]
        sub_cluster = _cluster_of(cluster, int(n))
        for start in range(0, len(sel), chunk):
            part = sel[start:start + chunk]
            plans = {k: cols[k][part] for k in _PLAN_KEYS}
            out = estimate_arrays(cfg, sub_cluster, plans, global_batch, T, dtype=dtype,
                                  calibration=calibration)
            for k in keys:
                res[k][part] = np.asarray(out[k])
            if bar is not None:
                bar.update(len(part))
    if bar is not None:
        bar.close()
    cols["reasons"] = cols["reasons"] | np.where(valid & ~res["fits"], _BIT["memory"], 0)
    if max_step_time is not None:
        limit = check_positive("max_step_time", max_step_time)
        late = (cols["reasons"] == 0) & (res["step_time"] > limit)
        cols["reasons"] = cols["reasons"] | np.where(late, _BIT["deadline"], 0)
    ok = cols["reasons"] == 0
    score = res["step_time"] * (cols["n_devices"] if objective == "cost" else 1)
    order = np.flatnonzero(ok)[np.argsort(score[ok], kind="stable")]
    if top is not None:
        order = order[:top]
    table = {k: v[order] for k, v in cols.items()} | {k: v[order] for k, v in res.items()}
    dropped = {name: int(np.count_nonzero(cols["reasons"] & bit))
               for name, bit in _BIT.items()}
    res = SearchResult(cfg, cluster, int(global_batch), int(T), dtype, objective, space, table,
                       n_plans, dropped, time.perf_counter() - t0)
    res.n_runnable = int(np.count_nonzero(ok))
    return res


def explain(cfg, cluster, plan: ParallelPlan, global_batch, T, *, dtype="bf16", n_devices=None,
            ranked: SearchResult | None = None) -> list[str]:
    """Why ``plan`` cannot run: one sentence per broken rule (memory included); an empty list
    when it can (and, with ``ranked``, a sentence giving its rank there).

    >>> c = hardware.cluster("h100", 16)
    >>> explain("llama3-8b", c, ParallelPlan(dp=16, micro_batch=3), 64, 4096)[0]
    'the global batch must be a multiple of dp · micro_batch (rule: batch)'
    """
    from .parallelism.estimate import estimate

    c = models.get(cfg)
    cluster = hardware.get_cluster(cluster)
    if not isinstance(plan, ParallelPlan):
        raise ValueError(f"plan={_brief(plan)} must be a ParallelPlan")
    n = plan.world_size if n_devices is None else int(n_devices)
    out = describe_named(_rules.check_arrays(c, _rules.plan_columns([plan]), int(global_batch),
                                       int(T))[0])
    if n > cluster.n_devices:
        out.append(f"the plan needs {n} devices; the cluster has {cluster.n_devices}")
    if out:
        return out
    est = estimate(c, _cluster_of(cluster, n), plan, global_batch, T, dtype=dtype)
    if not est.fits:
        room = cluster.accelerator.memory_capacity_bytes  # what the driver reports
        return [f"{dict(RULES)['memory']} (rule: memory): it needs {float(est.memory.total) / 1e9:.1f} GB per device, "
                f"the {cluster.accelerator.name} has {room / 1e9:.1f} GB usable"]
    if ranked is not None:
        t = ranked.table
        same = np.ones(len(ranked), dtype=bool)
        for k in _PLAN_KEYS:
            same &= t[k] == getattr(plan, k)
        hit = np.flatnonzero(same)
        if len(hit):
            return [] if hit[0] == 0 else [f"it runs, ranked {hit[0] + 1} of {len(ranked)}: "
                                           + compare(t, 0, int(hit[0]), ranked.objective)]
        return ["it runs but lies outside the searched space (or below the top kept)"]
    return []


def predicted_utilization(cluster, n_params, *, T=2048, tokens_per_step=4 * 2**20,
                          dtype="bf16", **space) -> float:
    """The MFU of the fastest plan the search finds for :func:`shape_for` (n_params) on
    ``cluster``: the utilisation :func:`compute_optimal` can use instead of 100%.

    The global batch is the multiple of the device count nearest ``tokens_per_step`` / T
    sequences (so every split of the devices divides it).
    """
    cluster = hardware.get_cluster(cluster)
    n = cluster.n_devices
    B = max(1, int(round(tokens_per_step / T / n))) * n
    res = search(shape_for(n_params), cluster, B, T, top=1, dtype=dtype, **space)
    if not len(res):
        raise ValueError(f"no plan of a {n_params / 1e9:.0f}B-parameter model fits on "
                         f"{cluster.name}; it needs more devices")
    return float(res.table["mfu"][0])


__all__ = ["RULES", "SearchResult", "TrainingRun", "compare", "compute_optimal",
           "days_to_train", "describe", "describe_named", "explain", "most_dropped", "pareto",
           "plan_space", "predicted_utilization", "search", "shape_for", "training_run"]
