"""Four axes on one device mesh: which links each axis's groups cross, and the traffic on each.

A plan with degrees (tp, cp, pp, dp) numbers its dp·pp·cp·tp devices as a mesh whose axes run
from the innermost (consecutive device numbers) to the outermost. Llama 3 405B used the order
[TP, CP, PP, DP] from inner to outer (The Llama 3 Herd of Models, 2024, section 3.3.2): the axis
that talks most often and on the critical path (TP, an all-reduce in every layer) gets the
consecutive devices of one node and its NVLink; the one that talks least (DP, one gradient
reduction per step, hidden under the backward pass) spans the whole cluster.

Device r has coordinate ⌊r / stride(a)⌋ mod degree(a) on axis a, where stride(a) is the product
of the degrees of the axes inside a; this extends the numbering of ``steptime`` (tp
consecutive, dp strided by tp) to cp and pp. A group of axis a (the devices that differ only in
their coordinate on a) lies in one node when stride(a)·degree(a) <= devices per node and the
node size is a multiple of it; otherwise it crosses the scale-out network, and, on a cluster with
pods, possibly the links between pods.

Data-parallel collectives run over the dp·cp replicas (the cp ranks hold the same weights); a
ZeRO shard group of S ranks is the S innermost of them, and HSDP's all-reduce runs across the
groups (stride S); the expert all-reduce runs over the dp/ep ranks holding the same experts.

Traffic: each collective's bytes sent per device (:func:`scaling_lib.collectives.collective_bytes`;
for a point-to-point send, the Comm's bytes; times its count) are charged to the slowest link class its group crosses, the class that sets
its pace. This is the traffic *through* collectives on that class, not a hop-by-hop link load:
a hierarchical collective sends only part of it across the slowest links.

See: the chapter "N-dimensional parallelism".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import hardware, models
from ..breakdown import Breakdown
from ..collectives import collective_bytes
from ..units import _brief, check_count
from .comms import Comm, collectives
from .plan import ParallelPlan, check_plan

ORDER = ("tp", "cp", "pp", "dp")  # Llama 3's mesh, inner (fastest links) to outer
AXES = ORDER
LINK_CLASSES = ("intra-node", "inter-node", "inter-pod")  # fastest to slowest


def _check_comm(comm) -> Comm:
    if not isinstance(comm, Comm):
        raise ValueError(f"comm={_brief(comm)} must be a parallelism.Comm (kind, axis, "
                         "group_size, nbytes, ...)")
    return comm


def _axis_strides(plans: dict, order=ORDER) -> dict:
    """:func:`strides` for arrays of plans (the estimator's, unchecked) (``plans[a]`` an integer array per axis): the one
    device numbering the estimator, the planner and :func:`strides` share.

    >>> import numpy as np
    >>> _axis_strides({"tp": np.array([8]), "cp": np.array([2]), "pp": np.array([4]),
    ...               "dp": np.array([16])})["dp"].tolist()
    [64]
    """
    out, s = {}, 1
    for a in check_order(order):
        out[a] = s
        s = s * np.asarray(plans[a])
    return {a: np.asarray(out[a]) * np.ones_like(np.asarray(plans[a])) for a in AXES}


def _replica_members_per_node(plans: dict, node: int, order=ORDER, shard=None):
    """Members of a data-parallel replica group (the dp·cp ranks that hold the same weights)
    in one node of ``node`` devices, per plan; with ``shard`` (an array of ZeRO shard-group
    sizes, the innermost replicas) those of one shard group. A group whose members fill a node
    m at a time crosses the network with g/m of them: what decides its links."""
    st = _axis_strides(plans, order)
    cp, dp = np.asarray(plans["cp"]), np.asarray(plans["dp"])
    in_cp = np.clip(node // st["cp"], 1, cp)
    in_dp = np.clip(node // st["dp"], 1, dp)
    both = in_cp * np.where(in_cp >= cp, in_dp, 1)
    if shard is None:
        return both
    s = np.asarray(shard)
    return np.minimum(both, np.where(s <= cp, np.minimum(in_cp, s), s))


def _count(name, value, minimum=1) -> int:
    """A whole number >= minimum, one value (not an array)."""
    if np.ndim(value):
        raise ValueError(f"{name}={_brief(value)} must be one whole number, not an array")
    return int(check_count(name, value, minimum=minimum))


def check_order(order) -> tuple:
    """The mesh order as a tuple, after checking it holds each of tp, cp, pp and dp once."""
    ok = isinstance(order, (tuple, list)) and all(isinstance(a, str) for a in order)
    if not ok or sorted(order) != sorted(AXES):
        raise ValueError(f"order={_brief(order)} must list each of {', '.join(AXES)} once, "
                         "innermost first, e.g. ('tp', 'cp', 'pp', 'dp')")
    return tuple(order)


def strides(plan: ParallelPlan, order=ORDER) -> dict:
    """Distance in device numbers between neighbours on each axis: the product of the inner
    axes' degrees.

    >>> strides(ParallelPlan(tp=8, cp=16, pp=16, dp=8))
    {'tp': 1, 'cp': 8, 'pp': 128, 'dp': 2048}
    """
    check_plan(plan)
    out, s = {}, 1
    for a in check_order(order):
        out[a] = s
        s *= getattr(plan, a)
    return {a: out[a] for a in AXES}


def coordinates(rank, plan: ParallelPlan, order=ORDER) -> dict:
    """Coordinates of device ``rank`` on each axis: ⌊rank / stride⌋ mod degree.

    >>> coordinates(1000, ParallelPlan(tp=8, pp=16, dp=64))
    {'tp': 0, 'cp': 0, 'pp': 13, 'dp': 7}
    """
    check_plan(plan)
    r = _count("rank", rank, minimum=0)
    if r >= plan.world_size:
        raise ValueError(f"rank={r} is outside the plan's {plan.world_size} devices; "
                         f"choose 0 <= rank < {plan.world_size}")
    st = strides(plan, order)
    return {a: (r // st[a]) % getattr(plan, a) for a in AXES}


def _grid(plan, order):
    """Device numbers as an array indexed [tp, cp, pp, dp] (whatever the order)."""
    order = check_order(order)
    shape = [getattr(plan, a) for a in reversed(order)]  # outer first, as numbers grow
    g = np.arange(plan.world_size).reshape(shape)  # axes: reversed(order)
    perm = [list(reversed(order)).index(a) for a in AXES]
    return g.transpose(perm)


def groups(plan: ParallelPlan, axes, order=ORDER) -> np.ndarray:
    """All groups spanning ``axes`` (one axis name, or several, e.g. ("cp", "dp") for the
    gradient's replicas): an array [n_groups, group size] of device numbers, members in the
    order of the listed axes (the first varies fastest).

    >>> groups(ParallelPlan(tp=2, dp=2), "dp").tolist()
    [[0, 2], [1, 3]]
    """
    check_plan(plan)
    axes = (axes,) if isinstance(axes, str) else axes
    ok = isinstance(axes, (tuple, list)) and all(isinstance(a, str) for a in axes)
    if not ok or not axes or any(a not in AXES for a in axes) or len(set(axes)) != len(axes):
        raise ValueError(f"axes={_brief(axes)} must be distinct names among {', '.join(AXES)}")
    g = _grid(plan, order)
    idx = [AXES.index(a) for a in axes]
    rest = [i for i in range(4) if i not in idx]
    g = g.transpose(rest + idx[::-1])  # the first listed axis last (fastest)
    return g.reshape(-1, int(np.prod([getattr(plan, a) for a in axes])))


def comm_groups(plan: ParallelPlan, comm: Comm, order=ORDER) -> np.ndarray:
    """The groups of devices one collective of ``plan`` runs over, [n_groups, group size].

    tp, cp and pp: the groups of that axis. dp: the dp·cp replicas, or the ZeRO shard group
    (the S innermost replicas), or HSDP's all-reduce across shard groups, or the expert
    all-reduce over the dp/ep ranks that hold the same experts. ep: ep consecutive dp ranks.

    >>> p = ParallelPlan(tp=8, cp=2, dp=4)
    >>> comm_groups(p, Comm("all-reduce", "dp", 8, 1.0))[0].tolist()  # cp fastest, then dp
    [0, 8, 16, 24, 32, 40, 48, 56]
    """
    check_plan(plan)
    _check_comm(comm)
    g = int(comm.group_size)
    if comm.axis in ("tp", "cp", "pp"):
        out = groups(plan, comm.axis, order)
    elif comm.axis in ("dp", "ep"):
        rep = groups(plan, ("cp", "dp"), order)  # [tp·pp, dp·cp]
        n = rep.shape[1]
        if comm.axis == "ep":
            out = rep.reshape(-1, g)
        elif g == n:
            out = rep
        elif (comm.kind == "all-reduce" and plan.zero and plan.zero_group > 1
              and g == n // plan.zero_group):  # HSDP
            out = rep.reshape(-1, g, plan.zero_group).transpose(0, 2, 1).reshape(-1, g)
        elif plan.ep > 1 and g == n // plan.ep:  # expert weights: the dp·cp replicas, stride ep
            out = rep.reshape(-1, g, plan.ep).transpose(0, 2, 1).reshape(-1, g)
        else:  # a ZeRO shard group: the g innermost replicas
            out = rep.reshape(-1, g)
    else:
        raise ValueError(f"comm.axis={comm.axis!r} is not a mesh axis; valid choices: "
                         "tp, cp, pp, dp, ep")
    if out.shape[1] != g:
        raise ValueError(f"a {comm.axis} group of {g} devices does not fit the plan "
                         f"(dp={plan.dp}, cp={plan.cp}, pp={plan.pp}, tp={plan.tp})")
    return out


def _classes(cluster, plan, grp: np.ndarray) -> np.ndarray:
    """Per group (row of device numbers): 0 one node, 1 several nodes of one pod, 2 pods."""
    cluster = hardware.get_cluster(cluster)
    if plan.world_size > cluster.n_devices:
        raise ValueError(f"plan needs {plan.world_size} devices (dp·tp·pp·cp); the cluster has "
                         f"{cluster.n_devices}: choose degrees whose product is at most that")
    node = grp // cluster.devices_per_node
    cls = (node.min(axis=1) != node.max(axis=1)).astype(int)
    if cluster.devices_per_pod:
        pod = grp // cluster.devices_per_pod
        cls = np.where(pod.min(axis=1) != pod.max(axis=1), 2, cls)
    return cls


@dataclass(frozen=True)
class AxisPlacement:
    """Where one axis's groups lie: degree, stride, and the share of groups on each link class
    (``shares[c]`` for c in LINK_CLASSES); ``link`` is the slowest class any group crosses."""

    axis: str
    degree: int
    stride: int
    shares: dict
    link: str


def placement(cluster, plan: ParallelPlan, order=ORDER) -> dict:
    """{axis: AxisPlacement} for tp, cp, pp and dp on ``cluster`` (its first world-size devices).

    >>> pl = placement("llama3-24k", ParallelPlan(tp=8, pp=16, dp=64))
    >>> {a: p.link for a, p in pl.items()}
    {'tp': 'intra-node', 'cp': 'none', 'pp': 'inter-node', 'dp': 'inter-pod'}
    """
    st = strides(plan, order)
    out = {}
    for a in AXES:
        d = getattr(plan, a)
        if d == 1:
            out[a] = AxisPlacement(a, 1, st[a], {c: 0.0 for c in LINK_CLASSES}, "none")
            continue
        cls = _classes(cluster, plan, groups(plan, a, order))
        shares = {c: float(np.mean(cls == i)) for i, c in enumerate(LINK_CLASSES)}
        out[a] = AxisPlacement(a, d, st[a], shares, LINK_CLASSES[int(cls.max())])
    return out


def link_class(cluster, plan: ParallelPlan, axis: str, order=ORDER) -> str:
    """The slowest link class any group of ``axis`` crosses ("none" for a degree of 1).

    >>> link_class(hardware.cluster("h100", 16), ParallelPlan(tp=4, dp=2, pp=2), "dp")
    'inter-node'
    """
    if axis not in AXES:
        raise ValueError(f"axis={axis!r}; valid choices: {', '.join(AXES)}")
    return placement(cluster, plan, order)[axis].link


def comm_traffic(comm: Comm, cluster, plan: ParallelPlan, order=ORDER) -> dict:
    """Bytes one device sends per step in ``comm`` (all its repetitions), averaged over the
    devices, by the slowest link class its group crosses.

    >>> c16 = hardware.cluster("h100", 16)
    >>> t = comm_traffic(Comm("all-reduce", "dp", 2, 1e9), c16, ParallelPlan(dp=2, tp=8))
    >>> {k: v / 1e9 for k, v in t.items()}
    {'intra-node': 0.0, 'inter-node': 1.0, 'inter-pod': 0.0}
    """
    _check_comm(comm)
    check_plan(plan)
    if comm.kind == "collective-permute":  # a Comm's permute bytes are what each device sends
        sent = float(comm.nbytes)
    else:
        sent = float(collective_bytes(comm.kind, comm.nbytes, comm.group_size).sent_bytes)
    cls = _classes(cluster, plan, comm_groups(plan, comm, order))
    return {c: sent * comm.count * float(np.mean(cls == i)) for i, c in enumerate(LINK_CLASSES)}


def traffic(cfg, cluster, plan: ParallelPlan, B, T, *, order=ORDER, dtype="bf16") -> dict:
    """{link class: {axis: bytes}} one device sends per step (averaged over devices), each
    collective of :func:`parallelism.collectives` charged to the slowest class its group
    crosses. B is the global batch in sequences of T tokens.

    >>> t = traffic("llama3-8b", "dgx-h100", ParallelPlan(tp=8), 8, 4096)
    >>> sorted(t["intra-node"]), t["inter-node"]
    (['tp'], {})
    """
    cfg = models.get(cfg)
    out: dict = {c: {} for c in LINK_CLASSES}
    for comm in collectives(cfg, plan, B, T, dtype=dtype):
        if comm.group_size <= 1 or not comm.nbytes:
            continue
        for c, v in comm_traffic(comm, cluster, plan, order).items():
            if v > 0:
                out[c][comm.axis] = out[c].get(comm.axis, 0.0) + v
    return out


def link_bytes_per_s(cluster, link: str) -> float:
    """One-way bandwidth per device of a link class on ``cluster`` (bytes/s)."""
    cluster = hardware.get_cluster(cluster)
    if link not in LINK_CLASSES:
        raise ValueError(f"link={link!r}; valid choices: {', '.join(LINK_CLASSES)}")
    obj = {"intra-node": cluster.intra_node, "inter-node": cluster.inter_node,
           "inter-pod": cluster.inter_pod or cluster.inter_node}[link]
    return float(obj.bytes_per_s)


@dataclass(frozen=True)
class MeshReport:
    """One plan on one cluster: axis placement, traffic per device by link class and axis
    (bytes per step), the seconds that traffic takes at line rate, and memory per GPU."""

    plan: ParallelPlan
    order: tuple
    placement: dict
    traffic: dict
    line_rate_time: dict
    memory: Breakdown
    fits: bool


def mesh_report(cfg, cluster, plan: ParallelPlan, B, T, *, order=ORDER, dtype="bf16",
                **estimate_options) -> MeshReport:
    """Placement, traffic and memory per GPU of ``plan`` (memory from
    :func:`parallelism.estimate`, whose other options pass through).

    >>> r = mesh_report("llama3-8b", "dgx-h100", ParallelPlan(tp=8), 8, 4096)
    >>> r.placement["tp"].link, r.fits
    ('intra-node', True)
    """
    from .estimate import estimate  # the planner's memory model (busiest device)

    cluster = hardware.get_cluster(cluster)
    order = check_order(order)
    pl = placement(cluster, plan, order)
    tr = traffic(cfg, cluster, plan, B, T, order=order, dtype=dtype)
    secs = {c: sum(v.values()) / link_bytes_per_s(cluster, c) for c, v in tr.items()}
    e = estimate(cfg, cluster, plan, B, T, dtype=dtype, **estimate_options)
    return MeshReport(plan, order, pl, tr, secs, e.memory, e.fits)


def dp_degree(n_devices, tp=1, cp=1, pp=1) -> int:
    """The data-parallel degree that fills ``n_devices`` with the other degrees fixed:
    n / (tp · cp · pp).

    >>> dp_degree(16384, tp=8, cp=16, pp=16)
    8
    """
    n = _count("n_devices", n_devices)
    inner = _count("tp", tp) * _count("cp", cp) * _count("pp", pp)
    if n % inner:
        raise ValueError(f"tp·cp·pp = {inner} does not divide n_devices={n}; choose degrees "
                         "whose product divides the device count")
    return n // inner


def context_degree(T, tokens_per_device) -> int:
    """The smallest power-of-two cp that leaves at most ``tokens_per_device`` tokens of one
    sequence per cp rank: 2^⌈log2(T / tokens_per_device)⌉.

    >>> context_degree(131072, 8192)  # Llama 3's long-context stage: 16
    16
    """
    T = _count("T", T)
    m = _count("tokens_per_device", tokens_per_device)
    need = -(-T // m)
    return 1 << max(0, int(need - 1).bit_length())
