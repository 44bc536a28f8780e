"""Step time, memory and utilisation of any parallel plan: ``estimate`` and ``estimate_arrays``.

The library's one training step-time model (the model of record): the planner, the command
line, the validation against measured runs and the step-time views of the parallelism chapters
(:mod:`scaling_lib.parallelism.steptime`) all read it. It is built from

- :mod:`~scaling_lib.parallelism.kernels`: kernel timing on one accelerator (roofline sums,
  waves of output tiles, the host's dispatch), with its sourced constants;
- :mod:`~scaling_lib.parallelism.rules`: the one table of rules a plan must obey;
- :mod:`~scaling_lib.parallelism.step`: the step assembly (compute of the slowest stage, the
  communication on the critical path, the bubble, the data-parallel side, the optimizer);
- :mod:`~scaling_lib.parallelism.links`: each collective on the links its group crosses;
- :mod:`~scaling_lib.parallelism.step_memory`: memory per device by part;
- :mod:`~scaling_lib.parallelism.calibration`: the few fitted constants, each physical.

See: the chapters "Planning a training run" and "Validating the planner".
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import hardware, models
from ..breakdown import Breakdown
from ..units import MAX_DEVICES, _brief, check_count
from . import mesh, rules
from .calibration import DEFAULT_CALIBRATION, Calibration
from .kernels import (ADAM_BYTES_PER_PARAM, BACKWARD_STREAM_FACTOR,  # noqa: F401 (re-exported)
                      EMBEDDING_GRAD_BYTES_PER_PARAM, GEMM_TILE, HEAD_KERNELS,
                      LOSS_BYTES_PER_LOGIT, matmul_time, wave_efficiency)
from .plan import CP_VARIANTS, PP_LAYOUTS, RECOMPUTE, SCHEDULES, ParallelPlan, check_plan
from .step import assemble
from .step_memory import GRAD_BUCKET_BYTES  # noqa: F401 (re-exported)

PLAN_FIELDS = ("dp", "tp", "pp", "cp", "ep", "zero", "micro_batch", "virtual_stages",
               "schedule", "recompute", "sequence_parallel")
# Fields a plan dict may leave out, with ParallelPlan's defaults (shard_group 0: all replicas).
OPTIONAL_FIELDS = {"cp_variant": "allgather", "pp_layout": "even",
                   "reshard_after_forward": True, "shard_group": 0}
OUTPUTS = ("step_time", "compute_time", "exposed_comm_time", "bubble_time", "optimizer_time",
           "memory_bytes", "fits", "mfu", "hfu", "tokens_per_s")


@dataclass(frozen=True)
class CommEstimate:
    """One kind of communication of a step: seconds in all and the part compute does not hide."""

    name: str
    axis: str
    kind: str
    group_size: int
    time: float
    exposed: float


@dataclass(frozen=True)
class StepEstimate:
    """The estimate of one plan's training step (seconds, bytes, fractions)."""

    plan: ParallelPlan
    step_time: float
    compute_time: float
    exposed_comm_time: float
    bubble_time: float
    optimizer_time: float
    memory: Breakdown
    fits: bool
    mfu: float
    hfu: float
    tokens_per_s: float
    comms: tuple = field(default=())
    rules_broken: tuple = field(default=())  # framework rules the plan breaks (rules.py)

    @property
    def breakdown(self) -> dict:
        """Seconds of compute, exposed communication, bubble and optimizer (they sum to the step,
        with the per-step host overhead)."""
        return {"compute": self.compute_time, "exposed communication": self.exposed_comm_time,
                "bubble": self.bubble_time, "optimizer": self.optimizer_time}



def _plans(plans: dict) -> dict:
    if not isinstance(plans, dict):
        raise ValueError(f"plans={_brief(plans)} must be a dict of equal-length arrays "
                         f"{', '.join(PLAN_FIELDS)}")
    missing = [k for k in PLAN_FIELDS if k not in plans]
    if missing:
        raise ValueError(f"plans is missing {missing}; it needs arrays {', '.join(PLAN_FIELDS)}")
    try:
        out = {k: np.asarray(plans[k]) for k in PLAN_FIELDS}
    except (TypeError, ValueError, OverflowError) as e:
        raise ValueError(f"plans must hold arrays of numbers and strings ({e})") from None
    n = {v.shape for v in out.values()}
    if len(n) != 1 or len(next(iter(n))) != 1:
        raise ValueError(f"plans must hold equal-length 1-D arrays, got shapes {sorted(n)}")
    for k in PLAN_FIELDS[:8]:
        v = out[k]
        if v.dtype.kind not in "iuf" or (v.dtype.kind == "f" and (
                not np.all(np.isfinite(v)) or np.any(v != np.round(v)))):
            raise ValueError(f"plans[{k!r}]={_brief(plans[k])} must hold whole numbers")
        if np.any(v < (0 if k == "zero" else 1)) or np.any(v > MAX_DEVICES):
            raise ValueError(f"plans[{k!r}] must hold integers from {0 if k == 'zero' else 1} "
                             f"to {MAX_DEVICES:,}")
        out[k] = v.astype(np.int64)
    for k, valid in (("schedule", SCHEDULES), ("recompute", RECOMPUTE)):
        bad = sorted(set(map(str, out[k].tolist())) - set(valid))
        if bad or out[k].dtype.kind not in "US":
            raise ValueError(f"plans[{k!r}] holds {bad or _brief(plans[k])}; valid choices: "
                             f"{', '.join(valid)}")
    if out["sequence_parallel"].dtype.kind not in "bi":
        raise ValueError(f"plans['sequence_parallel']={_brief(plans['sequence_parallel'])} must "
                         "hold booleans")
    out["sequence_parallel"] = out["sequence_parallel"].astype(bool)
    n = len(out["dp"])
    for k, default in OPTIONAL_FIELDS.items():
        col = np.asarray(plans[k]) if k in plans else np.full(n, default)
        if col.shape != (n,):
            raise ValueError(f"plans[{k!r}] must be a 1-D array of {n} entries")
        out[k] = col
    for k, valid in (("cp_variant", CP_VARIANTS), ("pp_layout", PP_LAYOUTS)):
        bad = sorted(set(map(str, out[k].tolist())) - set(valid))
        if bad:
            raise ValueError(f"plans[{k!r}] holds {bad}; valid choices: {', '.join(valid)}")
    out["reshard_after_forward"] = out["reshard_after_forward"].astype(bool)
    out["shard_group"] = out["shard_group"].astype(np.int64)
    return out


def estimate_arrays(cfg, cluster, plans: dict, global_batch, T, *, dtype="bf16",
                    calibration=None, flash_attention=True, causal=True,
                    overlap_grad_reduce=True, recipe="mixed", detail=False,
                    order=mesh.ORDER) -> dict:
    """Step time, memory and utilisation of n plans at once (numpy arrays of shape (n,)).

    ``plans`` holds equal-length arrays ``dp, tp, pp, cp, ep, zero, micro_batch,
    virtual_stages`` (ints), ``schedule`` and ``recompute`` (strings) and
    ``sequence_parallel`` (bools), and optionally ``cp_variant``, ``pp_layout``,
    ``reshard_after_forward`` and ``shard_group`` (0: all replicas). Returns arrays ``step_time, compute_time,
    exposed_comm_time, bubble_time, optimizer_time`` (s), ``memory_bytes`` (the busiest
    device), ``fits``, ``mfu``, ``hfu`` (fractions) and ``tokens_per_s``. The plans are not
    checked for validity (divisibility, world size): the planner filters them with
    :func:`scaling_lib.parallelism.rules.check_arrays`. Devices are numbered in ``order``
    (default :data:`scaling_lib.parallelism.mesh.ORDER`, TP innermost, then CP, PP, DP).
    ``flash_attention``: fused attention (no T x T scores in HBM); ``causal``: the kernel skips
    the masked half. ``detail`` adds the per-collective times and the memory parts.

    >>> p = {k: np.array([v]) for k, v in dict(dp=8, tp=1, pp=1, cp=1, ep=1, zero=0,
    ...      micro_batch=1, virtual_stages=1, schedule="1f1b", recompute="none",
    ...      sequence_parallel=False).items()}
    >>> r = estimate_arrays("llama3-8b", hardware.cluster("h100", 8), p, 64, 4096)
    >>> 0.3 < float(r["mfu"][0]) < 0.7
    True
    """
    c = models.get(cfg)
    cluster = hardware.get_cluster(cluster)
    cal = DEFAULT_CALIBRATION if calibration is None else calibration
    if not isinstance(cal, Calibration):
        raise ValueError(f"calibration={_brief(cal)} must be a Calibration")
    P = _plans(plans)
    T = int(check_count("T", T))
    B = int(check_count("global_batch", global_batch))
    return assemble(c, cluster, P, B, T, dtype=dtype, cal=cal, flash=flash_attention,
                    causal=causal, overlap_grad_reduce=overlap_grad_reduce, recipe=recipe,
                    detail=detail, order=mesh.check_order(order))


def plan_arrays(plans) -> dict:
    """The arrays of :func:`estimate_arrays` for a list of ParallelPlans.

    >>> plan_arrays([ParallelPlan(dp=2)])["dp"]
    array([2])
    """
    plans = [check_plan(p) for p in plans]
    out = {k: np.array([getattr(p, k) for p in plans]) for k in PLAN_FIELDS}
    for k in OPTIONAL_FIELDS:
        out[k] = np.array([getattr(p, k) or 0 for p in plans])
    return out


def estimate(cfg, cluster, plan: ParallelPlan, global_batch, T, *, dtype="bf16",
             calibration=None, flash_attention=True, causal=True, overlap_grad_reduce=True,
             recipe="mixed", order=mesh.ORDER) -> StepEstimate:
    """The estimate of one plan's training step: :func:`estimate_arrays` for one plan, with the
    memory by part and each kind of communication with its time and exposed part.

    Raises ValueError when the step is not defined: its world size exceeds the cluster's, or it
    breaks a "shape" rule of :mod:`scaling_lib.parallelism.rules` (tp and the heads, the batch,
    cp and T, ...). A plan that breaks only a "framework" rule (layers that do not split
    evenly, an interleaved schedule whose micro-batches are not a multiple of pp, ZeRO-2 with
    stages) is timed, and the rules it breaks are listed in ``rules_broken``: the planner
    drops such plans.

    >>> e = estimate("llama3-8b", hardware.cluster("h100", 8), ParallelPlan(dp=8), 64, 4096)
    >>> e.fits, e.step_time > e.compute_time
    (False, True)
    """
    c = models.get(cfg)
    cluster = hardware.get_cluster(cluster)
    check_plan(plan)
    if plan.world_size > cluster.n_devices:
        raise ValueError(f"plan needs {plan.world_size} devices (dp·tp·pp·cp); the cluster has "
                         f"{cluster.n_devices}: choose degrees whose product is at most that")
    plan.n_microbatches(global_batch)  # raises unless global_batch is a multiple of dp·b
    check_count("T", T)
    rules.check(c, plan, global_batch, T, kinds=("shape",))
    broken = tuple(n for n in rules.broken(c, plan, global_batch, T)
                   if rules.BY_NAME[n].kind == "framework")
    r = estimate_arrays(c, cluster, plan_arrays([plan]), global_batch, T, dtype=dtype,
                        calibration=calibration, flash_attention=flash_attention,
                        causal=causal, overlap_grad_reduce=overlap_grad_reduce, recipe=recipe,
                        detail=True, order=order)
    one = {k: float(np.asarray(r[k])[0]) for k in OUTPUTS}
    from ..memory.training import ALWAYS_SHOWN  # the one rule of which parts a Breakdown shows

    mem = Breakdown({k: float(np.asarray(v)[0]) for k, v in r["memory_parts"].items()
                     if k in ALWAYS_SHOWN or float(np.asarray(v)[0]) > 0}, unit="bytes")
    comms = tuple(CommEstimate(name, axis, kind, int(np.asarray(g).ravel()[0]),
                               float(np.asarray(t).ravel()[0]), float(np.asarray(e).ravel()[0]))
                  for name, axis, kind, g, t, e in r["comms"]
                  if int(np.asarray(g).ravel()[0]) > 1 and float(np.asarray(t).ravel()[0]) > 0)
    return StepEstimate(plan=plan, step_time=one["step_time"], compute_time=one["compute_time"],
                        exposed_comm_time=one["exposed_comm_time"],
                        bubble_time=one["bubble_time"], optimizer_time=one["optimizer_time"],
                        memory=mem, fits=bool(one["fits"]), mfu=one["mfu"], hfu=one["hfu"],
                        tokens_per_s=one["tokens_per_s"], comms=comms, rules_broken=broken)


__all__ = ["Calibration", "CommEstimate", "DEFAULT_CALIBRATION", "OPTIONAL_FIELDS",
           "PLAN_FIELDS", "StepEstimate", "estimate", "estimate_arrays", "matmul_time",
           "plan_arrays", "wave_efficiency"]
