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

import dataclasses
import math
import time
from dataclasses import dataclass

import numpy as np

from . import hardware, models
from .parallelism import rules as _rules
from .parallelism.plan import PP_LAYOUTS, RECOMPUTE, SCHEDULES, ParallelPlan
from .parallelism.rules import tp_choices
from .units import _brief, check_choice, check_count, check_fraction, check_positive, divisors

SECONDS_PER_DAY = 86_400.0
# Hoffmann et al. 2022 ("Training Compute-Optimal Large Language Models"), Table 3 and section
# 3.4: compute-optimal training uses about 20 tokens per parameter; training costs C ≈ 6·N·D.
CHINCHILLA_TOKENS_PER_PARAM = 20.0
TRAIN_FLOPS_PER_PARAM_TOKEN = 6.0

# (name, sentence): why a plan cannot run. The structural rules are the one table of
# scaling_lib.parallelism.rules (the same bits); the search adds memory and the deadline.
RULES = tuple((r.name, r.message) for r in _rules.RULES) + (
    ("memory", "does not fit in the accelerator's memory"),
    ("deadline", "its step is slower than max_step_time (the run would miss its deadline)"),
)
_BIT = {name: 1 << i for i, (name, _) in enumerate(RULES)}
_INT_AXES = ("dp", "tp", "pp", "cp", "ep", "zero", "micro_batch", "virtual_stages")
SPACE_KEYS = ("tp", "pp", "cp", "ep", "zero", "micro_batch", "virtual_stages", "schedule",
              "recompute", "sequence_parallel", "n_devices", "pp_layout",
              "reshard_after_forward")
_PLAN_KEYS = _INT_AXES + ("schedule", "recompute", "sequence_parallel", "pp_layout",
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


def _plan_at(cols: dict, i: int) -> ParallelPlan:
    return ParallelPlan(**{k: int(cols[k][i]) for k in _INT_AXES},
                        schedule=str(cols["schedule"][i]), recompute=str(cols["recompute"][i]),
                        sequence_parallel=bool(cols["sequence_parallel"][i]),
                        pp_layout=str(cols["pp_layout"][i]),
                        reshard_after_forward=bool(cols["reshard_after_forward"][i]))


def _cluster_of(cluster, n: int):
    """The same cluster with ``n`` devices (a smaller share of it for a cost search)."""
    n = int(n)
    if n == cluster.n_devices:
        return cluster
    if cluster.topology.startswith("torus"):
        return hardware.cluster(cluster.accelerator.name, n)
    per_node = min(n, cluster.devices_per_node)
    pod = cluster.devices_per_pod if cluster.devices_per_pod and cluster.devices_per_pod < n \
        else 0
    return dataclasses.replace(cluster, n_devices=n, devices_per_node=per_node,
                               devices_per_host=min(n, cluster.devices_per_host),
                               devices_per_pod=pod, inter_pod=cluster.inter_pod if pod else None,
                               name=f"{n} x {cluster.accelerator.name}")


class SearchResult(list):
    """Feasible plans of a :func:`search`, best first: a list of StepEstimates.

    A read-only ``list`` whose items are built lazily: ``len``, indexing, slicing, iteration,
    ``in``, ``==`` and ``+`` behave as on the list of every feasible plan's StepEstimate, but an
    item costs an estimate (a few ms) only when read; ``list(result)`` makes a plain mutable copy.

    ``result[i]`` is the full :func:`~scaling_lib.parallelism.estimate.estimate` of the i-th
    best plan (built when first read); ``table`` holds the ranked arrays of every feasible plan
    (``step_time``, ``mfu``, ``memory_bytes``, ... and the plan's degrees); ``dropped`` counts
    the plans each rule removed; :meth:`explain` says why any plan is not in the result.
    """

    def __init__(self, cfg, cluster, global_batch, T, dtype, objective, space, table,
                 n_plans, dropped, seconds):
        self.cfg, self.cluster, self.global_batch, self.T = cfg, cluster, global_batch, T
        self.dtype, self.objective, self.space = dtype, objective, space
        self.table, self.n_plans, self.dropped, self.seconds = table, n_plans, dropped, seconds
        self.n_runnable = len(table["step_time"])  # plans that run, before ``top`` cut them
        self._cache: dict = {}

    def __len__(self) -> int:
        return len(self.table["step_time"])

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __reversed__(self):
        return (self[i] for i in reversed(range(len(self))))

    def __bool__(self) -> bool:
        return len(self) > 0

    def __contains__(self, item) -> bool:
        return any(x == item for x in self)

    def __eq__(self, other) -> bool:
        return isinstance(other, list) and len(self) == len(other) and \
            all(a == b for a, b in zip(self, other))

    def __ne__(self, other) -> bool:
        return not self == other

    __hash__ = None

    def __add__(self, other):
        return list(self) + list(other)

    def __radd__(self, other):
        return list(other) + list(self)

    def __mul__(self, n):
        return list(self) * n

    __rmul__ = __mul__

    def __repr__(self) -> str:
        best = f", best {self.plan(0)}" if len(self) else ""
        return f"<SearchResult: {len(self):,} feasible plans of {self.n_plans:,}{best}>"

    def index(self, item, *args) -> int:
        return list(self).index(item, *args)

    def count(self, item) -> int:
        return sum(1 for x in self if x == item)

    def copy(self) -> list:
        return list(self)

    def _read_only(self, *_, **__):
        raise ValueError("a SearchResult is read-only; list(result) gives a mutable copy")

    append = extend = insert = remove = pop = clear = sort = reverse = _read_only
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only

    def plan(self, i: int) -> ParallelPlan:
        """The i-th best plan (no estimate built)."""
        return _plan_at(self.table, range(len(self))[i])

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = range(len(self))[i]
        if i not in self._cache:
            from .parallelism.estimate import estimate

            n = int(self.table["n_devices"][i])
            self._cache[i] = estimate(self.cfg, _cluster_of(self.cluster, n), self.plan(i),
                                      self.global_batch, self.T, dtype=self.dtype)
        return self._cache[i]

    @property
    def n_feasible(self) -> int:
        return len(self)

    @property
    def plans_per_s(self) -> float:
        """Plans searched (valid or not) per second of the search."""
        return self.n_plans / max(self.seconds, 1e-9)

    def explain(self, plan: ParallelPlan, n_devices=None) -> list[str]:
        """Why ``plan`` is not among the results (its broken rules), or where it ranks.

        Works for any plan, in the space or not.
        """
        return explain(self.cfg, self.cluster, plan, self.global_batch, self.T, dtype=self.dtype,
                       n_devices=n_devices, ranked=self)

    def why_not_first(self, i: int = 1) -> str:
        """One sentence: what makes the i-th plan slower (or dearer) than the best."""
        return compare(self.table, 0, i, self.objective)


def compare(table: dict, a: int, b: int, objective: str = "time") -> str:
    """Why plan ``b`` of a ranked table loses to plan ``a``: the part of the step that differs
    most (compute, exposed communication, bubble, optimizer), and the device count for cost."""
    parts = ("compute_time", "exposed_comm_time", "bubble_time", "optimizer_time")
    diff = {k: float(table[k][b] - table[k][a]) for k in parts}
    worst = max(diff, key=diff.get)
    label = {"compute_time": "compute (recomputation or a worse matmul shape)",
             "exposed_comm_time": "exposed communication",
             "bubble_time": "pipeline bubble", "optimizer_time": "optimizer step"}[worst]
    dt = float(table["step_time"][b] - table["step_time"][a])
    changed = [f"{k} {table[k][a]} -> {table[k][b]}" for k in _PLAN_KEYS + ("n_devices",)
               if table[k][a] != table[k][b]]
    msg = (f"it differs in {', '.join(changed) or 'nothing'}; its step is {dt * 1e3:+.1f} ms "
           f"longer, mostly {label} ({diff[worst] * 1e3:+.1f} ms)")
    if abs(dt) <= 1e-4 * float(table["step_time"][a]):
        msg = f"it differs in {', '.join(changed) or 'nothing'} and ties on step time"
    if objective == "cost":
        na, nb = int(table["n_devices"][a]), int(table["n_devices"][b])
        ga = float(table["step_time"][a]) * na
        gb = float(table["step_time"][b]) * nb
        msg = (f"it costs {gb / ga - 1:+.1%} more GPU-time per step ({nb} GPUs against {na}); "
               + msg)
    return msg


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
        hbm = cluster.accelerator.hbm_bytes
        return [f"{dict(RULES)['memory']} (rule: memory): it needs {float(est.memory.total) / 1e9:.1f} GB per device, "
                f"the {cluster.accelerator.name} has {hbm / 1e9:.0f} GB"]
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


# ---- time and cost of a training run ----------------------------------------------------------
@dataclass(frozen=True)
class TrainingRun:
    """How long and how much to train ``n_tokens``: steps, seconds, days, GPU-hours, cost."""

    n_tokens: float
    steps: float
    seconds: float
    n_devices: int
    cost: float | None

    @property
    def days(self) -> float:
        return self.seconds / SECONDS_PER_DAY

    @property
    def gpu_hours(self) -> float:
        return self.seconds * self.n_devices / 3600.0


def training_run(step_time, n_tokens, global_batch, T, n_devices, *, price_per_gpu_hour=None,
                 goodput=1.0) -> TrainingRun:
    """Time and cost of training ``n_tokens`` tokens at ``step_time`` seconds per step.

    steps = n_tokens / (B·T); seconds = steps · step_time / goodput; GPU-hours = seconds ·
    n_devices / 3600; cost = GPU-hours · price. ``goodput`` (0, 1] is the share of wall-clock
    time that makes progress (failures, restarts, checkpoints: :mod:`scaling_lib.reliability`).

    >>> run = training_run(10.0, 1e12, 1024, 4096, 1024, price_per_gpu_hour=2.0)
    >>> round(run.days, 2), round(run.gpu_hours), round(run.cost)
    (27.59, 678168, 1356337)
    """
    st = check_positive("step_time", step_time)
    tok = check_positive("n_tokens", n_tokens)
    B = check_count("global_batch", global_batch)
    T = check_count("T", T)
    n = check_count("n_devices", n_devices)
    g = check_fraction("goodput", goodput)
    steps = tok / (B * T)
    seconds = steps * st / g
    price = None if price_per_gpu_hour is None else \
        check_positive("price_per_gpu_hour", price_per_gpu_hour, allow_zero=True)
    cost = None if price is None else float(seconds * n / 3600.0 * price)
    return TrainingRun(float(tok), float(steps), float(seconds), int(n), cost)


def days_to_train(n_params, n_tokens, n_devices, peak_flops_per_s, utilization=1.0, *,
                  flops_per_param_token=TRAIN_FLOPS_PER_PARAM_TOKEN):
    """Days to train N parameters on D tokens: f·N·D / (n · peak · u) / 86,400 s.

    f = 6 FLOPs per parameter and token (forward 2, backward 4), with u the MFU; f = 8 with
    full activation recomputation and u the hardware utilisation (the forward runs twice):
    Megatron-LM's end-to-end estimate 8·T·P / (n·X) (Narayanan et al. 2021, section 5.1).

    >>> round(days_to_train(175e9, 300e9, 1024, 312e12, 0.5), 1)  # GPT-3 on 1,024 A100s
    22.8
    >>> round(days_to_train(175e9, 300e9, 1024, 140e12, flops_per_param_token=8))  # Megatron
    34
    """
    N = check_positive("n_params", n_params)
    D = check_positive("n_tokens", n_tokens)
    n = check_positive("n_devices", n_devices)
    peak = check_positive("peak_flops_per_s", peak_flops_per_s)
    u = check_fraction("utilization", utilization)
    f = check_positive("flops_per_param_token", flops_per_param_token)
    return f * N * D / (n * peak * u) / SECONDS_PER_DAY


def compute_optimal(cluster, days, *, utilization=None, dtype="bf16",
                    tokens_per_param=CHINCHILLA_TOKENS_PER_PARAM):
    """Chinchilla-optimal model size and tokens for a cluster and a wall-clock budget.

    The cluster delivers C = n · peak · u · days · 86,400 FLOPs; training costs C = 6·N·D
    and the compute-optimal ratio is D = 20·N (Hoffmann et al. 2022), so

        N = sqrt(C / (6 · 20)),   D = 20 · N.

    ``utilization`` u: None for 100% (the upper bound), a fraction, or a function of the
    model size ``u(n_params)`` (e.g. the MFU the planner predicts for the best plan of a model
    that big); then N solves N = sqrt(C(u(N)) / 120) by fixed-point iteration.
    Returns (n_params, n_tokens).

    >>> N, D = compute_optimal(hardware.cluster("a100-80gb", 3360), 30)  # vTrain's example
    >>> round(N / 1e9, 1), round(D / 1e12, 2)
    (150.5, 3.01)
    """
    cluster = hardware.get_cluster(cluster)
    d = check_positive("days", days)
    r = check_positive("tokens_per_param", tokens_per_param)
    peak = cluster.n_devices * cluster.accelerator.peak_flops_per_s(dtype)

    def size(u):
        u = check_fraction("utilization", u)
        c = peak * u * d * SECONDS_PER_DAY
        return math.sqrt(c / (TRAIN_FLOPS_PER_PARAM_TOKEN * r))

    if utilization is None:
        n = size(1.0)
    elif callable(utilization):
        n = size(1.0)
        for _ in range(50):
            new = size(utilization(n))
            if abs(new - n) <= 1e-4 * n:
                n = new
                break
            n = new
    else:
        n = size(utilization)
    return float(n), float(r * n)


def pareto(x, y) -> np.ndarray:
    """True where no other point has both x and y lower or equal (one strictly): the front of
    two costs to minimise, e.g. days against GPU-hours. Vectorised: sort by x, keep the points
    whose y beats every point before them.

    >>> pareto([1, 2, 2, 3], [5, 3, 4, 3]).tolist()
    [True, True, False, False]
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"x and y must be 1-D arrays of one shape, not {x.shape} and {y.shape}")
    order = np.lexsort((y, x))
    ys = y[order]
    best_before = np.concatenate(([np.inf], np.minimum.accumulate(ys)[:-1]))
    keep = np.zeros(len(x), dtype=bool)
    keep[order] = ys < best_before
    return keep


def shape_for(n_params, *, aspect=128, head_dim=128, V=51200, T_max=2048):
    """A GPT-style model (Megatron's: GeLU MLP with F = 4D, multi-head attention) of about
    ``n_params`` parameters, with D / L = ``aspect`` (GPT-3 175B: 12,288 / 96 = 128).

    12·L·D² ≈ n_params with L = D / aspect gives D = (n_params · aspect / 12)^(1/3), rounded to
    a multiple of 8 · ``head_dim`` (N = D / head_dim heads, a multiple of 8 so that tensor
    parallelism up to a node of 8 splits them) and L to a whole number of layers.

    >>> c = shape_for(175e9)
    >>> c.L, c.D, c.N
    (97, 12288, 96)
    """
    n = check_positive("n_params", n_params)
    step = 8 * head_dim
    D = max(step, int(round((n * aspect / 12) ** (1 / 3) / step)) * step)
    L = max(1, int(round(n / (12 * D * D))))
    return models.gpt(L, D, D // head_dim, V=V, T_max=T_max, tied_embeddings=False,
                      name=f"gpt-{n / 1e9:.0f}b")


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


__all__ = ["RULES", "SearchResult", "TrainingRun", "compute_optimal", "days_to_train",
           "describe", "describe_named", "explain", "most_dropped", "pareto", "plan_space", "predicted_utilization", "search",
           "shape_for", "training_run"]
