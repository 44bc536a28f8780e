"""Step time of a data/ZeRO/tensor-parallel training step: compute, each collective, overlap.

A per-phase view of the library's one step-time model, ``parallelism.estimate``. Puts
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

Since the model of record (issue 19), :func:`step_time` and :func:`critical_tokens_per_device`
are views of :func:`scaling_lib.parallelism.estimate.estimate` (its step time, exactly); the
per-collective :func:`comm_time` and the FLOP-count :func:`compute_times` remain the pieces the
layer-by-layer schedules of ``timeline`` draw.

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
    overhead: float = 0.0  # the pipeline bubble and the optimizer step (seconds)

    @property
    def compute_time(self) -> float:
        return sum(self.compute.values())

    @property
    def comm_time(self) -> float:
        return sum(c.time for c in self.comms)

    @property
    def step_time(self) -> float:
        return self.compute_time + self.exposed_time + self.overhead

    @property
    def comm_bound(self) -> bool:
        """Whether communication adds noticeably to the step: its exposed part exceeds 1% of
        the compute (the last gradient bucket is always exposed, a fraction of a percent)."""
        return sum(c.exposed for c in self.comms) > 0.01 * self.compute_time

    def comm_by_axis(self, *, exposed=False) -> dict:
        """Seconds of communication per plan axis ("dp", "tp", ...), or only their exposed part.

        >>> st = step_time("llama3-8b", hardware.cluster("h100", 8), ParallelPlan(dp=8), 64, 4096)
        >>> {k: round(v * 1e3, 1) for k, v in st.comm_by_axis(exposed=True).items()}  # ms
        {'dp': 0.4}
        """
        out: dict = {}
        for c in self.comms:
            out[c.comm.axis] = out.get(c.comm.axis, 0.0) + (c.exposed if exposed else c.time)
        return out


def _calibration(efficiency):
    """The estimate's calibration with η_c = ``efficiency`` (None: the library's defaults)."""
    from .calibration import DEFAULT_CALIBRATION

    if efficiency is None:
        return DEFAULT_CALIBRATION
    return dataclasses.replace(DEFAULT_CALIBRATION,
                               gemm_efficiency=_one(check_fraction, "efficiency", efficiency))


def _phase_split(cfg, plan, B, T, flash_attention):
    """Share of a step's compute that is the forward pass (the rest is backward and
    recomputation), from the FLOP counts of :mod:`scaling_lib.transformer`."""
    fwd = float(transformer.forward_flops(cfg, B, T, causal=True))
    total = float(transformer.train_flops(cfg, B, T, causal=True, recompute=plan.recompute,
                                          flash_attention=flash_attention))
    return fwd / total


_PHASE = {"tp": "forward", "ep": "forward", "cp": "forward", "pp": "forward"}


def step_time(cfg, cluster, plan: ParallelPlan, B, T, *, dtype="bf16", efficiency=None,
              recipe="mixed", flash_attention=True) -> StepTime:
    """One step of ``plan`` on ``cluster`` (B sequences of T tokens, the global batch), as
    :func:`scaling_lib.parallelism.estimate.estimate` (the one step-time model) times it,
    viewed by phase: ``compute`` splits the estimate's compute time into forward and backward
    by their FLOPs; each collective of the estimate is a :class:`CommTime` with its seconds
    and the part compute does not hide; ``exposed_time`` is everything besides compute
    (exposed communication, the pipeline bubble, the optimizer step), so ``step_time`` is the
    estimate's. ``efficiency`` (None: the calibrated default) is the fraction of the dense peak
    a large matmul reaches (the calibration's η_c).

    >>> c = hardware.cluster("h100", 8)
    >>> st = step_time("llama3-8b", c, ParallelPlan(dp=8), 64, 4096)
    >>> from scaling_lib.parallelism import estimate
    >>> st.step_time == estimate("llama3-8b", c, ParallelPlan(dp=8), 64, 4096).step_time
    True
    """
    from .estimate import estimate

    cfg = models.get(cfg)
    cluster = hardware.get_cluster(cluster)
    e = estimate(cfg, cluster, plan, B, T, dtype=dtype, calibration=_calibration(efficiency),
                 flash_attention=flash_attention, recipe=recipe)
    share = _phase_split(cfg, plan, B, T, flash_attention)
    compute = {"forward": e.compute_time * share, "backward": e.compute_time * (1 - share)}
    from .mesh import link_class

    comms = []
    for ce in e.comms:
        phase = _PHASE.get(ce.axis, "optimizer" if "weight all-gather" in ce.name
                           else "backward")
        comm = Comm(ce.kind, ce.axis, ce.group_size, 0.0, 1, phase, ce.exposed < ce.time)
        level = link_class(cluster, plan, "dp" if ce.axis == "ep" else ce.axis)
        comms.append(CommTime(comm, ce.time, {level: ce.time}, ce.exposed <= 0.0, ce.exposed))
    exposed = sum(c.exposed for c in comms)
    return StepTime(plan, compute, comms, exposed, e.memory, e.fits,
                    overhead=e.step_time - e.compute_time - exposed)


def critical_tokens_per_device(cfg, cluster, plan: ParallelPlan, T, *, dtype="bf16",
                               efficiency=None, flash_attention=True) -> float:
    """Tokens per data-parallel rank (per device when tp = 1) per step above which compute hides
    the data-parallel communication, in the estimate's model.

    With one micro-batch per step the gradient reduction (time G) runs under the backward pass
    (twice the forward's f per token), and ZeRO-3's gathers (time A each) under the forward and
    the backward: none sticks out once tokens · 2f >= G and tokens · f >= A, so the answer is
    max(G / 2f, A / f). For plain DP on a ring, G = 2(n-1)/n · 2Ψ/W against backward compute
    4Ψ/C per token gives (n-1)/n · C/W with C and W the rates the calibration says kernels and
    NCCL reach.

    >>> c = hardware.cluster("h100", 8)
    >>> b = critical_tokens_per_device("llama3-8b", c, ParallelPlan(dp=8), 4096)
    >>> from scaling_lib.parallelism.calibration import DEFAULT_CALIBRATION as cal
    >>> C_over_W = (cal.gemm_efficiency * c.accelerator.peak_flops_per_s()
    ...             / (cal.nvlink_efficiency * c.intra_node.bytes_per_s))
    >>> 0.4 < b / (7 / 8 * C_over_W) < 1.5  # NVLS (H100) moves half a ring's bytes
    True
    """
    cfg = models.get(cfg)
    cluster = hardware.get_cluster(cluster)
    check_plan(plan)
    T = int(_one(check_count, "T", T))
    p = plan.with_changes(micro_batch=1)
    st = step_time(cfg, cluster, p, p.dp, T, dtype=dtype, efficiency=efficiency,
                   flash_attention=flash_attention)
    f_tok = st.compute["forward"] / T  # one sequence per rank: forward seconds per token
    grad = sum(c.time for c in st.comms if c.comm.axis == "dp" and c.comm.phase == "backward"
               and "gather" not in c.comm.kind)
    gathers = sum(c.time for c in st.comms if c.comm.kind == "all-gather"
                  and c.comm.axis == "dp" and c.comm.phase == "backward") / 2
    return max(grad / (2 * f_tok), gathers / f_tok, 0.0)
