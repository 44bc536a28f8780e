"""Step time of a data/ZeRO/tensor-parallel training step: compute, each collective, overlap.

Puts :func:`scaling_lib.parallelism.collectives` (what one device communicates) together with
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
- :func:`ddp_timeline` and :func:`fsdp_timeline`: layer-by-layer schedules (PyTorch DDP's
  gradient buckets; FSDP's prefetched gathers and reduce-scatters) as lists of events.

Left out: launch latencies of kernels, contention between collectives of the same level, the
optimizer step's own time, and pipeline/context/expert parallelism.

See: the chapter "Data parallelism, ZeRO/FSDP and HSDP".
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from . import hardware, models, transformer
from .collectives import hierarchical_time
from .memory import check_fit, training_memory
from .parallelism import ParallelPlan, collectives
from .parallelism.comms import Comm, element_bytes


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

    :func:`scaling_lib.collectives.hierarchical_time` of (kind, nbytes) over the group's
    cluster (:func:`group_cluster`), times ``count``.

    >>> c = hardware.cluster("h100", 16)
    >>> t = comm_time(Comm("all-reduce", "dp", 16, 2e9), c, ParallelPlan(dp=16))
    >>> sorted(t), round(t["inter-node"] * 1e3, 1)
    (['inter-node', 'intra-node'], 5.0)
    """
    if comm.group_size <= 1 or not comm.nbytes:
        return {}
    t = hierarchical_time(comm.kind, comm.nbytes, group_cluster(cluster, plan, comm))
    return {level: float(v) * comm.count for level, v in t.items() if float(v) > 0}


def compute_times(cfg, plan: ParallelPlan, B, T, accelerator, *, efficiency=1.0,
                  dtype="bf16") -> dict:
    """Seconds of forward and backward compute on one device: FLOPs / (dp·tp) / (η · peak).

    Backward is twice the forward (plus the forward again with ``plan.recompute="full"``).

    >>> ct = compute_times("llama3-8b", ParallelPlan(dp=8), 8, 4096, "h100")
    >>> round(ct["backward"] / ct["forward"], 6)
    2.0
    """
    acc = hardware.get(accelerator)
    share = plan.dp * plan.tp
    fwd = float(transformer.forward_flops(cfg, B, T, causal=True)) / share
    bwd = float(transformer.train_flops(cfg, B, T, causal=True, recompute=plan.recompute)) / share \
        - fwd
    peak = efficiency * acc.peak_flops_per_s(dtype)
    return {"forward": fwd / peak, "backward": bwd / peak}


@dataclass(frozen=True)
class CommTime:
    """One collective in a step: the Comm, its seconds by level, and whether compute hides it."""

    comm: Comm
    time: float
    levels: dict
    hidden: bool


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


def step_time(cfg, cluster, plan: ParallelPlan, B, T, *, dtype="bf16", efficiency=1.0,
              recipe="mixed", flash_attention=True) -> StepTime:
    """Time of one step of ``plan`` on ``cluster`` (B sequences of T tokens, the global batch).

    In each phase the overlappable collectives run under that phase's compute; each network
    level is its own resource, so a phase exposes max(0, max over levels of the level's
    communication - compute). Collectives that cannot overlap (``overlappable=False``, and the
    optimizer phase) are exposed in full. A collective is ``hidden`` when its phase exposes
    nothing and it is overlappable.

    >>> st = step_time("llama3-8b", hardware.cluster("h100", 8), ParallelPlan(dp=8), 64, 4096)
    >>> st.comm_bound, [c.comm.kind for c in st.comms]
    (False, ['all-reduce'])
    """
    cfg = models.get(cfg)
    if plan.world_size > cluster.n_devices:
        raise ValueError(f"plan needs {plan.world_size} devices; the cluster has "
                         f"{cluster.n_devices}: choose degrees whose product is at most that")
    compute = compute_times(cfg, plan, B, T, cluster.accelerator, efficiency=efficiency,
                            dtype=dtype)
    comms = collectives(cfg, plan, B, T, dtype=dtype)
    timed = [(c, comm_time(c, cluster, plan)) for c in comms]
    exposed = 0.0
    phase_exposed = {}
    for phase in ("forward", "backward", "optimizer"):
        levels: dict = {}
        for c, t in timed:
            if c.phase == phase and c.overlappable and phase != "optimizer":
                for lv, v in t.items():
                    levels[lv] = levels.get(lv, 0.0) + v
            elif c.phase == phase:
                exposed += sum(t.values())
        over = max(0.0, max(levels.values(), default=0.0) - compute.get(phase, 0.0))
        phase_exposed[phase] = over
        exposed += over
    out = [CommTime(c, sum(t.values()), t, c.overlappable and c.phase != "optimizer"
                    and phase_exposed[c.phase] == 0.0) for c, t in timed]
    mem = training_memory(cfg, plan, B, T, recipe=recipe, flash_attention=flash_attention)
    fits, _ = check_fit(mem, cluster.accelerator)
    return StepTime(plan, compute, out, exposed, mem, fits)


def critical_tokens_per_device(cfg, cluster, plan: ParallelPlan, T, *, dtype="bf16",
                               efficiency=1.0) -> float:
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
    p = plan.with_changes(micro_batch=1)
    B = p.dp
    st = step_time(cfg, cluster, p, B, T, dtype=dtype, efficiency=efficiency)
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


def layer_params(cfg) -> float:
    """Parameters of one transformer layer: all but the embedding and output layer, over L.

    >>> layer_params("llama3-8b")  # 2D(N+K)H + 3DF + 2D
    218112128.0
    """
    cfg = models.get(cfg)
    pc = transformer.param_count(cfg)
    return (pc.total - pc["embedding"] - pc["unembedding"]) / cfg.L


def ddp_timeline(cfg, cluster, dp, tokens_per_device, T, *, bucket_bytes=25e6, dtype="bf16",
                 efficiency=1.0) -> list:
    """PyTorch DDP's backward pass: layers back to front, gradients all-reduced in buckets.

    Each layer's backward takes 1/L of the backward compute (the output layer's is folded into
    the last layer); a bucket (consecutive layers, at least ``bucket_bytes`` of gradient, as
    DDP's 25 MB default) is all-reduced over ``dp`` ranks as soon as its last layer is done and
    the network is free. Returns events (stream, label, start, end) in seconds; the step's
    backward ends with the last event.

    >>> ev = ddp_timeline("llama3-8b", hardware.cluster("h100", 8), 8, 8192, 4096)
    >>> ev[0][:2], ev[-1][0]
    (('compute', 'backward L31'), 'network')
    """
    cfg = models.get(cfg)
    plan = ParallelPlan(dp=dp)
    B = tokens_per_device * dp / T
    bwd = compute_times(cfg, plan, B, T, cluster.accelerator, efficiency=efficiency,
                        dtype=dtype)["backward"]
    a = element_bytes(dtype)
    per_layer = layer_params(cfg) * a
    emb = transformer.param_count(cfg)["embedding"] * a
    events, t, net_free, bucket, first = [], 0.0, 0.0, 0.0, None
    for i, layer in enumerate(reversed(range(cfg.L))):
        events.append(("compute", f"backward L{layer}", t, t + bwd / cfg.L))
        t += bwd / cfg.L
        bucket += per_layer + (emb * 2 if layer == 0 else 0.0)
        first = layer if first is None else first
        if bucket >= bucket_bytes or layer == 0:
            ar = sum(comm_time(Comm("all-reduce", "dp", dp, bucket), cluster, plan).values())
            start = max(t, net_free)
            events.append(("network", f"all-reduce L{first}-L{layer}", start, start + ar))
            net_free, bucket, first = start + ar, 0.0, None
    return events


def fsdp_timeline(cfg, cluster, dp, tokens_per_device, T, *, dtype="bf16", efficiency=1.0,
                  n_layers=None) -> list:
    """FSDP's step, layer by layer: gather weights one layer ahead, reduce-scatter gradients.

    Forward: the all-gather of layer l+1 runs while layer l computes. Backward (layers back to
    front): layer l's weights are re-gathered while layer l+1 computes its backward, and layer
    l+1's gradients are reduce-scattered meanwhile, so in the steady state three things overlap:
    backward of l, reduce-scatter of l+1, all-gather of l-1. Gathers and reduce-scatters run on
    separate streams of the same network (FSDP2's), each its own resource here. Only the first
    ``n_layers`` layers are drawn (default all). Returns events (stream, label, start, end).

    >>> ev = fsdp_timeline("llama3-8b", hardware.cluster("h100", 8), 8, 8192, 4096, n_layers=4)
    >>> sorted({e[0] for e in ev})
    ['all-gather', 'compute', 'reduce-scatter']
    """
    cfg = models.get(cfg)
    L = cfg.L if n_layers is None else int(n_layers)
    plan = ParallelPlan(dp=dp, zero=3)
    B = tokens_per_device * dp / T
    ct = compute_times(cfg, plan, B, T, cluster.accelerator, efficiency=efficiency, dtype=dtype)
    f, b = ct["forward"] / cfg.L, ct["backward"] / cfg.L
    V = layer_params(cfg) * element_bytes(dtype)
    ag = sum(comm_time(Comm("all-gather", "dp", dp, V), cluster, plan).values())
    rs = sum(comm_time(Comm("reduce-scatter", "dp", dp, V), cluster, plan).values())
    ev = []
    comp, ag_free, rs_free = 0.0, 0.0, 0.0
    gathered = {}
    ag_free = ag
    ev.append(("all-gather", "gather L0", 0.0, ag))
    gathered[0] = ag
    for layer in range(L):  # forward
        start = max(comp, gathered[layer])
        if layer + 1 < L:  # prefetch the next layer while this one computes
            s = max(ag_free, start)
            ev.append(("all-gather", f"gather L{layer + 1}", s, s + ag))
            gathered[layer + 1] = ag_free = s + ag
        ev.append(("compute", f"forward L{layer}", start, start + f))
        comp = start + f
    s = max(ag_free, comp - f)  # the last layer's weights are re-gathered first for backward
    ev.append(("all-gather", f"re-gather L{L - 1}", s, s + ag))
    regathered = {L - 1: s + ag}
    ag_free = s + ag
    for layer in reversed(range(L)):  # backward
        start = max(comp, regathered[layer])
        if layer > 0:
            s = max(ag_free, start)
            ev.append(("all-gather", f"re-gather L{layer - 1}", s, s + ag))
            regathered[layer - 1] = ag_free = s + ag
        ev.append(("compute", f"backward L{layer}", start, start + b))
        comp = start + b
        s = max(rs_free, comp)
        ev.append(("reduce-scatter", f"reduce-scatter L{layer}", s, s + rs))
        rs_free = s + rs
    return ev
