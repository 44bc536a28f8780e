"""The FSDP x TP split of a cluster: enumerate the tp x fsdp plans, keep those that fit, time them.

Ranks are laid out tp-innermost (a tp group is consecutive devices, inside a node when tp <= 8),
FSDP (ZeRO-3) over the dp = n / tp groups. Each plan is timed by the one step-time model,
:func:`scaling_lib.parallelism.steptime.step_time`: per phase, FSDP's gathers and
reduce-scatters overlap that phase's compute (each network level its own resource) and TP's
collectives sit on the critical path, so

    step = Σ_phases T_compute + Σ exposed,   exposed(phase) = max(0, max_λ T_comm,λ - T_compute)
           + the non-overlappable (TP) collectives in full

and memory per device is :func:`scaling_lib.memory.training_memory` against the HBM.

See: the chapter "Tensor and sequence parallelism".
"""

from __future__ import annotations

from .. import hardware, models
from ..units import _brief, check_count, check_fraction
from .comms import constraints
from .plan import RECOMPUTE, ParallelPlan
from .steptime import StepTime, _one, step_time


def split_table(cfg, cluster, B, T, *, recompute=RECOMPUTE, sequence_parallel=True,
                dtype="bf16", efficiency=None) -> list[StepTime]:
    """Every FSDP x TP split of ``cluster`` (tp a power of two), fastest fitting first.

    For each tp, FSDP over dp = n / tp ranks, with the fastest recomputation setting (of
    ``recompute``) and micro-batch (a power of two dividing B / dp) that fit; when none fits,
    the one needing least memory (``fits`` False, sorted last). Plans the strategies'
    constraints rule out are left out. Rows are :class:`~scaling_lib.parallelism.steptime.
    StepTime`: ``comm_by_axis()`` splits the traffic into FSDP ("dp") and TP ("tp").

    >>> from scaling_lib import hardware
    >>> rows = split_table("llama3-8b", hardware.cluster("h100", 16), 16, 2048)
    >>> sorted(r.plan.tp for r in rows), rows[0].fits
    ([1, 2, 4, 8, 16], True)
    """
    c = models.get(cfg)
    cluster = hardware.get_cluster(cluster)
    rule = f"recompute={_brief(recompute)} must list settings from {', '.join(RECOMPUTE)}"
    if not isinstance(recompute, (list, tuple, set, frozenset)) or not recompute \
            or any(not isinstance(r, str) or r not in RECOMPUTE for r in recompute):
        raise ValueError(rule)
    n = cluster.n_devices
    B = int(_one(check_count, "B", B))
    T = int(_one(check_count, "T", T))
    if efficiency is not None:
        _one(check_fraction, "efficiency", efficiency)
    if not isinstance(sequence_parallel, bool):
        raise ValueError(f"sequence_parallel={_brief(sequence_parallel)} must be True or False")
    rows = []
    for tp in (2 ** k for k in range(n.bit_length())):
        dp = n // tp
        if n % tp or B % dp:
            continue
        mbs = [b for b in (2 ** k for k in range(B.bit_length())) if (B // dp) % b == 0]
        plans = [ParallelPlan(dp=dp, tp=tp, zero=3 if dp > 1 else 0, micro_batch=b,
                              recompute=r, sequence_parallel=sequence_parallel and tp > 1)
                 for r in recompute for b in mbs]
        plans = [p for p in plans if not constraints(c, p, B, T)]
        if plans:
            cands = [step_time(c, cluster, p, B, T, dtype=dtype, efficiency=efficiency)
                     for p in plans]
            fit = [s for s in cands if s.fits]
            rows.append(min(fit, key=lambda s: s.step_time) if fit
                        else min(cands, key=lambda s: float(s.memory.total)))
    if not rows:
        raise ValueError(f"no tp x fsdp split of {n} devices runs B={B} sequences of T={T}: "
                         "B must be a multiple of n / tp for some power of two tp")
    return sorted(rows, key=lambda s: (not s.fits, s.step_time))


def best_split(cfg, cluster, B, T, **options) -> StepTime:
    """The fastest split of :func:`split_table` that fits in memory.

    >>> from scaling_lib import hardware
    >>> best_split("llama3-8b", hardware.cluster("h100", 16), 16, 2048).plan.world_size
    16
    """
    valid = ("recompute", "sequence_parallel", "dtype", "efficiency")
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise ValueError(f"unknown option(s) {unknown}; valid: {', '.join(valid)}")
    cluster = hardware.get_cluster(cluster)
    rows = [s for s in split_table(cfg, cluster, B, T, **options) if s.fits]
    if not rows:
        raise ValueError(f"no FSDP x TP split of {cluster.n_devices} devices fits B={B}, T={T}; "
                         "add devices or recompute more")
    return rows[0]
