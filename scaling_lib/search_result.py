"""The result of a plan search: a lazily built, read-only list of StepEstimates, best first,
with the ranked arrays of every feasible plan, the counts of the rules that dropped the rest,
and why one plan loses to another (:func:`compare`). Re-exported by :mod:`scaling_lib.planner`.

See: the chapter "Planning a training run".
"""

from __future__ import annotations

import dataclasses

import numpy as np

from . import hardware
from .parallelism.plan import ParallelPlan

_INT_AXES = ("dp", "tp", "pp", "cp", "ep", "zero", "micro_batch", "virtual_stages")
_PLAN_KEYS = _INT_AXES + ("schedule", "recompute", "sequence_parallel", "pp_layout",
                          "reshard_after_forward")


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
        from .planner import explain

        return explain(self.cfg, self.cluster, plan, self.global_batch, self.T, dtype=self.dtype,
                       n_devices=n_devices, ranked=self)

    def why_not_first(self, i: int = 1) -> str:
        """One sentence: what makes the i-th plan slower (or dearer) than the best."""
        return compare(self.table, 0, i, self.objective)


def compare(table: dict, a: int, b: int, objective: str = "time") -> str:
    """Why plan ``b`` of a ranked table loses to plan ``a``: what differs in the plans, then the
    step's difference split into its parts (compute, exposed communication, bubble, optimizer),
    each with its sign, so that the parts add up to the whole; and the device count for cost.

    >>> t = {k: np.array(v) for k, v in dict(step_time=[10.0, 10.2], compute_time=[8.0, 8.6],
    ...      exposed_comm_time=[1.0, 1.0], bubble_time=[1.0, 0.6], optimizer_time=[0.0, 0.0],
    ...      n_devices=[8, 8], **{k: [1, 1] for k in _PLAN_KEYS}).items()}
    >>> compare(t, 0, 1)  # doctest: +NORMALIZE_WHITESPACE
    'it differs in nothing; its step is 200.0 ms longer: compute +600.0 ms,
     pipeline bubble -400.0 ms'
    """
    parts = ("compute_time", "exposed_comm_time", "bubble_time", "optimizer_time")
    label = {"compute_time": "compute", "exposed_comm_time": "exposed communication",
             "bubble_time": "pipeline bubble", "optimizer_time": "optimizer step"}
    diff = {k: float(table[k][b] - table[k][a]) for k in parts}
    dt = float(table["step_time"][b] - table["step_time"][a])
    changed = [f"{k} {table[k][a]} -> {table[k][b]}" for k in _PLAN_KEYS + ("n_devices",)
               if table[k][a] != table[k][b]]
    tol = 1e-4 * float(table["step_time"][a])
    terms = [f"{label[k]} {d * 1e3:+.1f} ms" for k, d in
             sorted(diff.items(), key=lambda kv: -abs(kv[1])) if abs(d) > tol]
    rest = dt - sum(diff.values())
    if abs(rest) > tol:
        terms.append(f"other (host overhead, stragglers) {rest * 1e3:+.1f} ms")
    msg = (f"it differs in {', '.join(changed) or 'nothing'}; its step is "
           f"{abs(dt) * 1e3:.1f} ms {'longer' if dt >= 0 else 'shorter'}: {', '.join(terms)}")
    if abs(dt) <= tol:
        msg = f"it differs in {', '.join(changed) or 'nothing'} and ties on step time"
    if objective == "cost":
        na, nb = int(table["n_devices"][a]), int(table["n_devices"][b])
        ga = float(table["step_time"][a]) * na
        gb = float(table["step_time"][b]) * nb
        msg = (f"it costs {gb / ga - 1:+.1%} more GPU-time per step ({nb} GPUs against {na}); "
               + msg)
    return msg
