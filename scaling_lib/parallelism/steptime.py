"""Step time of a data/ZeRO/tensor-parallel training step: compute, each collective, overlap.

The one step-time model of the library (the seed of ``parallelism.estimate``). Puts
:func:`scaling_lib.parallelism.collectives` (what one device communicates) together with
:mod:`scaling_lib.collectives` (what a collective costs on a cluster) and
:mod:`scaling_lib.transformer` (what the step computes):

- :func:`comm_time`: one :class:`~scaling_lib.parallelism.Comm` on a cluster, by network level.
  Devices are numbered with tensor parallelism innermost, then the ZeRO shard group, then the
  HSDP replicas (the mesh order of ``simulate.train_step``), so a group of stride s has
  ``devices_per_node // s`` members per node.
- :func:`step_time`: compute per phase (forward, backward) at a fraction of peak; collectives
  of a phase that compute can hide run under it, each network level (NVLink, NIC, ...) its own
  resource; what sticks out is exposed.
- :func:`critical_tokens_per_device`: the per-device token batch above which the step is
  compute-bound (communication hidden), the C/W of the chapter.

Layer-by-layer schedules (DDP's buckets, FSDP's prefetch) are in
:mod:`scaling_lib.parallelism.timeline`; the FSDP x TP search built on :func:`step_time` in
:mod:`scaling_lib.parallelism.split`.

Left out: launch latencies of kernels, contention between collectives of the same level, the
optimizer step's own time, and pipeline/context/expert parallelism.

See: the chapter "Data parallelism, ZeRO/FSDP and HSDP".
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from .. import hardware, models, transformer
from ..collectives import hierarchical_time
from .. import memory as _memory
from ..units import _brief, check_count, check_fraction, check_positive
from .comms import Comm, collectives
from .plan import ParallelPlan, check_plan


def _one(check, name, value, **kw) -> float:
    """``check(name, value)`` for a single number (these models time one step, not a sweep)."""
    if np.ndim(value) != 0:
        raise ValueError(f"{name}={_brief(value)} must be one number, not an array or list")
    return check(name, value, **kw)


def _check_comm(comm) -> Comm:
    if not isinstance(comm, Comm):
        raise ValueError(f"comm={_brief(comm)} must be a parallelism.Comm (kind, axis, "
                         "group_size, nbytes, ...)")
    return comm


def _stride(plan: ParallelPlan, comm: Comm) -> int:
    """Distance between consecutive members of the comm's group in the device numbering."""
    if comm.axis == "tp":
        return 1
    if plan.zero and comm.kind == "all-reduce":  # HSDP: across the shard groups
        return plan.tp * plan.zero_group
    return plan.tp


def group_cluster(cluster, plan: ParallelPlan, comm: Comm):
    """The cluster one group of ``comm`` spans: its size, members per node (and per pod).

    GPU clusters keep their links with fewer members per node; a TPU group becomes the default
    slice of that many chips (``hardware.cluster``): an approximation when the group is strided.

    >>> c = hardware.cluster("h100", 64)
    >>> g = group_cluster(c, ParallelPlan(dp=8, tp=8), Comm("all-reduce", "dp", 8, 1.0))
    >>> g.devices_per_node  # one dp rank per node: tp fills the node
    1
    """
    cluster = hardware.get_cluster(cluster)
    check_plan(plan)
    _check_comm(comm)
    g = int(comm.group_size)
    if cluster.topology.startswith("torus"):
        if g == cluster.n_devices and _stride(plan, comm) == 1:
            return cluster
        return hardware.cluster(cluster.accelerator.name, g)
    s = _stride(plan, comm)
    per_node = max(1, min(g, cluster.devices_per_node // s))
    per_node = math.gcd(per_node, g)
    changes = dict(n_devices=g, devices_per_node=per_node, devices_per_host=0)
    if cluster.devices_per_pod:
        per_pod = max(per_node, min(g, cluster.devices_per_pod // s))
        per_pod = per_node * math.gcd(per_pod // per_node, g // per_node)
        changes.update(devices_per_pod=0 if per_pod >= g else per_pod,
                       inter_pod=None if per_pod >= g else cluster.inter_pod)
    return dataclasses.replace(cluster, **changes)


def comm_time(comm: Comm, cluster, plan: ParallelPlan) -> dict:
    """Seconds one step spends on ``comm`` (all ``count`` repetitions), by network level.

    t = count · :func:`scaling_lib.collectives.hierarchical_time` (kind, V) over the group's
    cluster (:func:`group_cluster`): the one way the library times a collective of a plan.

    >>> c = hardware.cluster("h100", 16)
    >>> t = comm_time(Comm("all-reduce", "dp", 16, 2e9), c, ParallelPlan(dp=16))
    >>> sorted(t), round(t["inter-node"] * 1e3, 1)
    (['inter-node', 'intra-node'], 5.0)
    """
    _check_comm(comm)
    cluster = hardware.get_cluster(cluster)
    check_plan(plan)
    if comm.group_size <= 1 or not comm.nbytes:
        return {}
    if comm.kind == "collective-permute":  # ring step: every device sends to its neighbour at
        g = group_cluster(cluster, plan, comm)  # once; the slowest hop is a node boundary
        level, link = (("intra-node", g.intra_node) if g.devices_per_node >= g.n_devices
                       else ("inter-node", g.inter_node))
        return {level: (link.latency + comm.nbytes / link.bytes_per_s) * comm.count}
    t = hierarchical_time(comm.kind, comm.nbytes, group_cluster(cluster, plan, comm))
    return {level: float(v) * comm.count for level, v in t.items() if float(v) > 0}


def compute_times(cfg, plan: ParallelPlan, B, T, accelerator, *, efficiency=1.0,
                  dtype="bf16", flash_attention=False) -> dict:
    """Seconds of forward and backward compute on one device: FLOPs / (dp·tp·cp) / (η · C).

    Forward: :func:`scaling_lib.transformer.forward_flops` (causal); backward: what
    :func:`~scaling_lib.transformer.train_flops` adds, twice the forward, plus the forward again
    with ``plan.recompute="full"`` and the attention FlashAttention recomputes with
    ``flash_attention``. η = ``efficiency`` (0 < η <= 1), C the peak FLOP/s in ``dtype``.

    >>> ct = compute_times("llama3-8b", ParallelPlan(dp=8), 8, 4096, "h100")
    >>> round(ct["backward"] / ct["forward"], 6)
    2.0
    """
    _one(check_fraction, "efficiency", efficiency)
    check_plan(plan)
    _one(check_positive, "B", B)  # a float when a timeline derives it from tokens per device
    _one(check_count, "T", T)
    acc = hardware.get(accelerator)
    share = plan.dp * plan.tp * plan.cp  # cp: load-balanced chunks, an equal share each
    fwd = float(transformer.forward_flops(cfg, B, T, causal=True)) / share
    bwd = float(transformer.train_flops(cfg, B, T, causal=True, recompute=plan.recompute,
                                        flash_attention=flash_attention)) / share - fwd
    peak = efficiency * acc.peak_flops_per_s(dtype)
    return {"forward": fwd / peak, "backward": bwd / peak}


@dataclass(frozen=True)
class CommTime:
    """One collective in a step: the Comm, its seconds (in all and by network level), the part
    of them compute does not hide (``exposed``), and whether compute hides all of it."""

    comm: Comm
    time: float
    levels: dict
    hidden: bool
    exposed: float = 0.0


@dataclass(frozen=True)
class StepTime:
    """One device's training step: compute and communication by phase, exposed time, memory."""

    plan: ParallelPlan
    compute: dict  # phase -> seconds
    comms: list  # CommTime per collective
    exposed_time: float
    memory: object  # memory.Breakdown per device
    fits: bool

    @property
    def compute_time(self) -> float:
        return sum(self.compute.values())

    @property
    def comm_time(self) -> float:
        return sum(c.time for c in self.comms)

    @property
    def step_time(self) -> float:
        return self.compute_time + self.exposed_time

    @property
    def comm_bound(self) -> bool:
        """Whether communication adds to the step (some of it is not hidden)."""
        return self.exposed_time > 1e-12 * max(self.compute_time, 1e-30)

    def comm_by_axis(self, *, exposed=False) -> dict:
        """Seconds of communication per plan axis ("dp", "tp", ...), or only their exposed part.

        >>> st = step_time("llama3-8b", hardware.cluster("h100", 8), ParallelPlan(dp=8), 64, 4096)
        >>> st.comm_by_axis(exposed=True)
        {'dp': 0.0}
        """
        out: dict = {}
        for c in self.comms:
            out[c.comm.axis] = out.get(c.comm.axis, 0.0) + (c.exposed if exposed else c.time)
        return out


def step_time(cfg, cluster, plan: ParallelPlan, B, T, *, dtype="bf16", efficiency=1.0,
              recipe="mixed", flash_attention=True) -> StepTime:
    """Time of one step of ``plan`` on ``cluster`` (B sequences of T tokens, the global batch).

    In each phase p the overlappable collectives run under that phase's compute; each network
    level is its own resource, so the phase exposes

        max(0, max over levels λ of Σ t_λ(collectives of p) - T_compute(p))

    Collectives that cannot overlap (``overlappable=False``, and the optimizer phase) are
    exposed in full. A phase's exposed time is shared among the collectives of its slowest level
    in proportion to their time there (``CommTime.exposed``); a collective is ``hidden`` when
    that share is zero. Step = Σ T_compute + Σ exposed. ``flash_attention`` counts the attention
    FlashAttention recomputes in the backward pass and drops the stored scores from memory.

    >>> st = step_time("llama3-8b", hardware.cluster("h100", 8), ParallelPlan(dp=8), 64, 4096)
    >>> st.comm_bound, [c.comm.kind for c in st.comms]
    (False, ['all-reduce'])
    """
    cfg = models.get(cfg)
    cluster = hardware.get_cluster(cluster)
    check_plan(plan)
    if plan.world_size > cluster.n_devices:
        raise ValueError(f"plan needs {plan.world_size} devices; the cluster has "
                         f"{cluster.n_devices}: choose degrees whose product is at most that")
    compute = compute_times(cfg, plan, B, T, cluster.accelerator, efficiency=efficiency,
                            dtype=dtype, flash_attention=flash_attention)
    timed = [(c, comm_time(c, cluster, plan)) for c in collectives(cfg, plan, B, T, dtype=dtype)]
    exposed = [0.0] * len(timed)
    for phase in ("forward", "backward", "optimizer"):
        levels: dict = {}
        for i, (c, t) in enumerate(timed):
            if c.phase != phase:
                continue
            if c.overlappable and phase != "optimizer":
                for lv, v in t.items():
                    levels[lv] = levels.get(lv, 0.0) + v
            else:
                exposed[i] = sum(t.values())
        if not levels:
            continue
        slowest = max(levels, key=levels.get)
        over = max(0.0, levels[slowest] - compute.get(phase, 0.0))
        for i, (c, t) in enumerate(timed):
            if c.phase == phase and c.overlappable and phase != "optimizer":
                exposed[i] = over * t.get(slowest, 0.0) / levels[slowest]
    out = [CommTime(c, sum(t.values()), t,
                    c.overlappable and c.phase != "optimizer" and e == 0.0, e)
           for (c, t), e in zip(timed, exposed)]
    mem = _memory.training_memory(cfg, plan, B, T, recipe=recipe,
                                  flash_attention=flash_attention, dtype=dtype)
    fits, _ = _memory.check_fit(mem, cluster.accelerator)
    return StepTime(plan, compute, out, float(sum(exposed)), mem, bool(fits))


def critical_tokens_per_device(cfg, cluster, plan: ParallelPlan, T, *, dtype="bf16",
                               efficiency=1.0, flash_attention=True) -> float:
    """Tokens per data-parallel rank (per device when tp = 1) per step above which compute hides
    all overlappable communication.

    With one micro-batch per step, DP/ZeRO/FSDP communication does not grow with the batch
    while compute does, so each phase is compute-bound above
    b* = (its slowest level's communication) / (its compute per token); the answer is the
    largest b* over the phases. For plain DP in bf16 on a ring, backward compute 4Ψb/C against
    an AllReduce of 2(n-1)/n · 2Ψ/W gives b* = (n-1)/n · C/W.

    >>> c = hardware.cluster("h100", 8)
    >>> b = critical_tokens_per_device("llama3-8b", c, ParallelPlan(dp=8), 4096)
    >>> C_over_W = c.accelerator.peak_flops_per_s() / c.intra_node.bytes_per_s
    >>> 0.8 < b / (7 / 8 * C_over_W) < 1.0  # attention FLOPs and the embedding move it a little
    True
    """
    cfg = models.get(cfg)
    cluster = hardware.get_cluster(cluster)
    check_plan(plan)
    _one(check_count, "T", T)
    p = plan.with_changes(micro_batch=1)
    st = step_time(cfg, cluster, p, p.dp, T, dtype=dtype, efficiency=efficiency,
                   flash_attention=flash_attention)
    worst = 0.0
    for phase in ("forward", "backward"):
        levels: dict = {}
        for ct in st.comms:
            if ct.comm.phase == phase and ct.comm.overlappable:
                for lv, v in ct.levels.items():
                    levels[lv] = levels.get(lv, 0.0) + v
        if levels:
            per_token = st.compute[phase] / T
            worst = max(worst, max(levels.values()) / per_token)
    return worst
