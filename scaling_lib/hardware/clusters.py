"""Links and clusters: nodes, pods, TPU slices with their wraparound, and named cluster presets.

See: Chapter 4 (networks and collectives).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..units import (MAX_DEVICES, _brief, check_choice, check_int, check_positive,
                     divisors)
from .chips import TPU_MAX_SLICE_SHAPE, Accelerator, get

# ---- Links and clusters -----------------------------------------------------------------------


@dataclass(frozen=True)
class Link:
    """A network level as one device sees it.

    ``bytes_per_s`` is one-way bandwidth per device over all its links at this level;
    ``latency`` is the time of one hop (seconds); ``n_links`` splits the bandwidth per link.
    """

    name: str
    bytes_per_s: float
    latency: float = 0.0
    n_links: int = 1

    def __post_init__(self):
        if not isinstance(self.name, str):
            raise ValueError(f"Link name={_brief(self.name)} must be a string")
        check_positive("bytes_per_s", self.bytes_per_s)  # validated, kept as given
        check_positive("latency", self.latency, allow_zero=True)
        object.__setattr__(self, "n_links", check_int("n_links", self.n_links,
                                                      maximum=MAX_DEVICES))

    @property
    def per_link_bytes_per_s(self) -> float:
        """One-way bandwidth of one link."""
        return self.bytes_per_s / self.n_links


TOPOLOGIES = ("switch", "ring", "bidirectional_ring", "torus_2d", "torus_3d")


@dataclass(frozen=True)
class Cluster:
    """Devices, grouped in nodes (a scale-up domain), joined by a slower scale-out network.

    For TPUs a "node" is an ICI-connected slice (a torus of ``torus_shape``, whose axes close into
    rings where ``wraparound`` says so); for GPUs it is an NVLink/NVSwitch domain (8 GPUs in a
    DGX/HGX box, 72 in a GB200 NVL72 rack). A host is the CPU server the devices plug into
    (``devices_per_host``, 0 = one host per node). An optional third level groups nodes into pods
    (``devices_per_pod``) joined by ``inter_pod``, e.g. an oversubscribed spine between the pods
    of a data centre.
    """

    accelerator: Accelerator
    n_devices: int
    devices_per_node: int
    intra_node: Link
    inter_node: Link
    topology: str = "switch"  # topology inside a node
    torus_shape: tuple[int, ...] = field(default=())
    name: str = ""
    wraparound: tuple[bool, ...] = field(default=())  # per torus axis; () = no torus
    devices_per_host: int = 0
    devices_per_pod: int = 0  # 0 = no pod level
    inter_pod: Link | None = None
    source: str = ""

    def __post_init__(self):
        if not isinstance(self.accelerator, Accelerator):
            raise ValueError(f"accelerator={_brief(self.accelerator)} must be an Accelerator "
                             "(hardware.get(name) gives one)")
        check_choice("topology", self.topology, TOPOLOGIES)
        for name in ("intra_node", "inter_node"):
            if not isinstance(getattr(self, name), Link):
                raise ValueError(f"{name}={_brief(getattr(self, name))} must be a Link")
        if self.inter_pod is not None and not isinstance(self.inter_pod, Link):
            raise ValueError(f"inter_pod={_brief(self.inter_pod)} must be a Link or None")
        n = check_int("n_devices", self.n_devices, maximum=MAX_DEVICES)
        per_node = check_int("devices_per_node", self.devices_per_node, maximum=MAX_DEVICES)
        for name, value in (("n_devices", n), ("devices_per_node", per_node),
                            ("devices_per_host", check_int("devices_per_host",
                                                           self.devices_per_host, minimum=0,
                                                           maximum=MAX_DEVICES)),
                            ("devices_per_pod", check_int("devices_per_pod",
                                                          self.devices_per_pod, minimum=0,
                                                          maximum=MAX_DEVICES))):
            object.__setattr__(self, name, value)
        if not isinstance(self.name, str) or not isinstance(self.source, str):
            raise ValueError(f"name={_brief(self.name)} and source={_brief(self.source)} "
                             "must be strings")
        try:
            shape = tuple(self.torus_shape)
            wrap = tuple(self.wraparound)
        except TypeError:
            raise ValueError(f"torus_shape={_brief(self.torus_shape)} and wraparound="
                             f"{_brief(self.wraparound)} must be tuples") from None
        shape = tuple(check_int("torus_shape axis", a, maximum=MAX_DEVICES) for a in shape)
        if any(not isinstance(w, (bool, np.bool_)) for w in wrap):
            raise ValueError(f"wraparound={_brief(self.wraparound)} must be one bool per axis")
        object.__setattr__(self, "torus_shape", shape)
        object.__setattr__(self, "wraparound", tuple(bool(w) for w in wrap))
        if self.wraparound and len(self.wraparound) != len(self.torus_shape):
            raise ValueError(f"wraparound={self.wraparound} needs one entry per axis of "
                             f"torus_shape={self.torus_shape}")
        if self.devices_per_pod and (self.devices_per_pod % self.devices_per_node
                                     or self.inter_pod is None):
            raise ValueError(f"devices_per_pod={self.devices_per_pod} must be a multiple of "
                             f"devices_per_node={self.devices_per_node} and come with an inter_pod "
                             "Link")

    @property
    def n_nodes(self) -> int:
        """Number of nodes (rounded up)."""
        return math.ceil(self.n_devices / self.devices_per_node)

    @property
    def n_hosts(self) -> int:
        """Number of CPU hosts (rounded up)."""
        return math.ceil(self.n_devices / (self.devices_per_host or self.devices_per_node))

    @property
    def n_pods(self) -> int:
        """Number of pods (1 when the cluster has no pod level)."""
        return math.ceil(self.n_devices / self.devices_per_pod) if self.devices_per_pod else 1

    @property
    def peak_flops_per_s(self) -> float:
        """bf16 dense peak of the whole cluster."""
        return self.n_devices * self.accelerator.peak_flops_per_s("bf16")

    @property
    def hbm_bytes(self) -> float:
        """HBM of the whole cluster."""
        return self.n_devices * self.accelerator.hbm_bytes


def torus_shape(n: int, ndim: int) -> tuple[int, ...]:
    """A near-cubic shape of ``ndim`` axes whose product is ``n`` (axes sorted ascending).

    Each axis takes the divisor of the devices still to place that is closest to their
    ``ndim``-th root; divisors come in pairs (d, n/d) with d <= √n, so the search is fast.
    ``n`` is at most 2**24 devices and ``ndim`` 1, 2 or 3.

    >>> torus_shape(256, 2), torus_shape(128, 2), torus_shape(64, 3)
    ((16, 16), (8, 16), (4, 4, 4))
    """
    n = check_int("n", n, maximum=MAX_DEVICES)
    ndim = check_choice("ndim", ndim, (1, 2, 3))
    shape = [1] * ndim
    rest = n
    for i in range(ndim, 0, -1):
        target = round(rest ** (1 / i))
        best = min(divisors(rest), key=lambda d: (abs(d - target), d))
        shape[ndim - i] = best
        rest //= best
    return tuple(sorted(shape))


# Scale-out network per accelerator family: (name, one-way bytes/s per device, latency s).
# H100/H200/B200: one ConnectX-7 400 Gb/s NIC per GPU (DGX H100 / DGX B200 user guides) = 50e9.
# A100: DGX A100 has 8 x 200 Gb/s HDR compute NICs, one per GPU = 25e9.
# V100: DGX-1 has 4 x 100 Gb/s EDR for 8 GPUs = 6.25e9 per GPU.
# TPU DCN per chip (hardware.md): 6.25e9 on v5p, 3.125e9 on v5e; v4/v6e taken as v5p/v5e alike.
# Latencies are order-of-magnitude: ~1 µs per ICI hop (hardware.md); a few µs per NVLink or
# InfiniBand collective step (NCCL small-message latencies); DCN tens of µs.
_SCALE_OUT = {
    "v100": ("InfiniBand EDR", 6.25e9, 5e-6),
    "a100-40gb": ("InfiniBand HDR", 25e9, 5e-6),
    "a100-80gb": ("InfiniBand HDR", 25e9, 5e-6),
    "h100": ("InfiniBand NDR", 50e9, 5e-6),
    "h200": ("InfiniBand NDR", 50e9, 5e-6),
    "b200": ("InfiniBand NDR", 50e9, 5e-6),
    "gb200": ("InfiniBand NDR", 50e9, 5e-6),
    "tpu-v4": ("DCN", 6.25e9, 20e-6),
    "tpu-v5e": ("DCN", 3.125e9, 20e-6),
    "tpu-v5p": ("DCN", 6.25e9, 20e-6),
    "tpu-v6e": ("DCN", 3.125e9, 20e-6),
}
# Largest ICI-connected slice (hardware.md): v4 4096 (16x16x16), v5e/v6e 256 (16x16), v5p 8960.
_TPU_POD = {"tpu-v4": (4096, 3), "tpu-v5e": (256, 2), "tpu-v5p": (8960, 3), "tpu-v6e": (256, 2)}
# Wraparound rules (Google Cloud TPU docs; hardware.md): a 2D pod axis wraps only at its full
# width; 3D slices are built from cubes of TPU_CUBE_SIDE^3 chips whose optical switches close rings.
TPU_2D_FULL_AXIS = 16
TPU_CUBE_SIDE = 4
_GPU_NODE = 8  # DGX/HGX boxes of 8 GPUs
# GB200 NVL72: 72 GPUs in one NVLink domain; a compute tray (host) holds 2 superchips = 4 GPUs
# (NVIDIA GB200 NVL72 specification).
_GPU_NODE_OVERRIDE = {"gb200": (72, 4)}
_NVLINK_LATENCY = 2e-6
_ICI_LATENCY = 1e-6


def cluster(accelerator, n_devices: int, **overrides) -> Cluster:
    """A cluster of ``n_devices`` chips with sensible defaults for the accelerator.

    GPUs: nodes of 8 on NVLink/NVSwitch (``switch`` topology), one 400 Gb/s (H100 class) NIC per
    GPU between nodes. TPUs: one ICI torus of up to a full pod (2D for v5e/v6e, 3D for v4/v5p),
    DCN between pods. Any field of ``Cluster`` can be overridden, e.g. ``devices_per_node=72``.

    >>> c = cluster("h100", 64)
    >>> c.n_nodes, c.intra_node.bytes_per_s, c.inter_node.bytes_per_s
    (8, 450000000000.0, 50000000000.0)
    >>> cluster("tpu-v5e", 128).torus_shape, cluster("tpu-v5e", 128).wraparound
    ((8, 16), (False, True))
    """
    acc = get(accelerator)
    n_devices = check_int("n_devices", n_devices, maximum=MAX_DEVICES)
    if acc.name not in _SCALE_OUT:
        raise ValueError(
            f"no default cluster for {acc.name!r}; pass devices_per_node, intra_node, inter_node "
            f"and topology, or use one of {', '.join(_SCALE_OUT)}"
        )
    net_name, net_bw, net_lat = _SCALE_OUT[acc.name]
    inter = Link(net_name, net_bw, net_lat)
    if acc.kind == "tpu":
        pod, ndim = _TPU_POD[acc.name]
        per_node = min(n_devices, pod)
        intra = Link("ICI", acc.link_bytes_per_s, _ICI_LATENCY, n_links=acc.n_links)
        defaults = dict(
            devices_per_node=per_node,
            intra_node=intra,
            inter_node=inter,
            topology="torus_2d" if ndim == 2 else "torus_3d",
            torus_shape=torus_shape(per_node, ndim),
        )
    else:
        intra = Link("NVLink", acc.link_bytes_per_s, _NVLINK_LATENCY, n_links=acc.n_links)
        node, host = _GPU_NODE_OVERRIDE.get(acc.name, (_GPU_NODE, _GPU_NODE))
        defaults = dict(
            devices_per_node=min(n_devices, node),
            intra_node=intra,
            inter_node=inter,
            topology="switch",
            devices_per_host=min(n_devices, host),
        )
    unknown = set(overrides) - (set(Cluster.__dataclass_fields__) - {"accelerator", "n_devices"})
    if unknown:
        raise ValueError(
            f"unknown cluster option(s) {sorted(unknown)}; valid: {', '.join(Cluster.__dataclass_fields__)}"
        )
    defaults.update(overrides)
    defaults.setdefault("name", f"{n_devices} x {acc.name}")
    if acc.kind == "tpu" and "wraparound" not in overrides:
        defaults["wraparound"] = wraparound(acc, defaults["torus_shape"])
    if acc.kind == "tpu" and "devices_per_host" not in overrides and acc.internals is not None:
        defaults["devices_per_host"] = min(n_devices, acc.internals.chips_per_host)
    return Cluster(accelerator=acc, n_devices=n_devices, **defaults)


# ---- TPU slices: tori, wraparound, hops ------------------------------------------------------


def _shape(shape) -> tuple[int, ...]:
    """A torus shape as a tuple of 1 to 3 whole numbers >= 1 (ValueError otherwise)."""
    if isinstance(shape, (str, bytes)) or not isinstance(shape, (tuple, list, np.ndarray)):
        raise ValueError(f"shape={_brief(shape)} must be a tuple of axis sizes, e.g. (4, 8)")
    try:
        shape = tuple(check_int("axis", a, maximum=MAX_DEVICES) for a in shape)
    except ValueError as e:
        raise ValueError(f"shape={_brief(shape)} must hold positive integers ({e})") from None
    if not 1 <= len(shape) <= 3:
        raise ValueError(f"shape={shape} must have 1 to 3 axes")
    if math.prod(shape) > MAX_DEVICES:
        raise ValueError(f"shape={shape} holds {math.prod(shape):,} devices; at most "
                         f"{MAX_DEVICES:,}")
    return shape


def wraparound(accelerator, shape) -> tuple[bool, ...]:
    """Which axes of a TPU slice of ``shape`` chips close into a ring (have a wraparound link).

    v5e/v6e (2D): an axis wraps only at the full pod width of 16 chips. v4/v5p (3D): slices are
    built from 4x4x4 cubes joined by optical circuit switches, which supply the wraparound links,
    so a slice whose axes are all multiples of 4 wraps on every axis and a smaller one on none
    (Google Cloud TPU v4/v5p docs; hardware.md). Other accelerators raise ValueError.

    >>> wraparound("tpu-v5e", (8, 16)), wraparound("tpu-v5p", (4, 4, 8))
    ((False, True), (True, True, True))
    >>> wraparound("tpu-v5p", (2, 2, 4))
    (False, False, False)

    See: Chapter 3, "ICI: tori with wraparound".
    """
    acc = get(accelerator)
    if acc.name not in _TPU_POD:
        raise ValueError(f"wraparound is defined for TPU slices; {acc.name!r} is not one of "
                         f"{', '.join(_TPU_POD)}")
    pod, ndim = _TPU_POD[acc.name]
    shape = _shape(shape)
    if len(shape) != ndim:
        raise ValueError(f"shape={shape} must be {ndim} positive integers for {acc.name} "
                         f"(a {ndim}D torus)")
    if math.prod(shape) > pod:
        raise ValueError(f"shape={shape} has {math.prod(shape)} chips; a {acc.name} pod has {pod}")
    if ndim == 2:
        return tuple(a == TPU_2D_FULL_AXIS for a in shape)
    full_cubes = all(a % TPU_CUBE_SIDE == 0 for a in shape)
    return tuple(full_cubes for _ in shape)


def ici_max_hops(shape, wrap=None) -> int:
    """Most ICI hops between two chips of a torus: sum over axes of a//2 with wraparound, a-1 without.

    ``wrap`` gives one bool per axis (default: every axis wraps).

    >>> ici_max_hops((4, 4), (False, False)), ici_max_hops((16, 16))
    (6, 16)

    See: Chapter 3, "ICI: tori with wraparound".
    """
    shape = _shape(shape)
    if wrap is None:
        wrap = (True,) * len(shape)
    elif isinstance(wrap, (bool, np.bool_)):
        wrap = (bool(wrap),) * len(shape)
    else:
        wrap = tuple(wrap) if isinstance(wrap, (tuple, list)) else ()
        if len(wrap) != len(shape) or any(not isinstance(w, (bool, np.bool_)) for w in wrap):
            raise ValueError(f"wrap={_brief(wrap)} needs one bool per axis of shape={shape}")
    return sum(a // 2 if w else a - 1 for a, w in zip(shape, wrap))


def tpu_slice(accelerator, shape, **overrides) -> Cluster:
    """One ICI-connected TPU slice of ``shape`` chips (a torus), with DCN to the outside.

    A slice is at most the largest single slice Google documents for the generation
    (``chips.TPU_MAX_SLICE_SHAPE``: v5e and v6e 16x16, v5p 16x16x24 = 6,144 chips; v4 its
    16x16x16 pod), axis by axis once both shapes are sorted; a larger job is a multislice joined
    over DCN, not one slice (ValueError).

    >>> s = tpu_slice("tpu-v5e", (4, 8))
    >>> s.n_devices, s.wraparound, s.n_hosts
    (32, (False, False), 4)

    See: Chapter 3, "Slices and pods".
    """
    acc = get(accelerator)
    shape = _shape(shape)
    biggest = TPU_MAX_SLICE_SHAPE.get(acc.name)
    if biggest is not None and (len(shape) > len(biggest) or any(
            a > b for a, b in zip(sorted(shape, reverse=True),
                                  sorted(biggest, reverse=True)))):
        raise ValueError(
            f"shape={'x'.join(map(str, shape))} ({math.prod(shape):,} chips) is larger than the "
            f"largest single {acc.name} slice, {'x'.join(map(str, biggest))} "
            f"({math.prod(biggest):,} chips); choose a shape within it, or join slices over DCN")
    return _torus(acc, shape, overrides)


def _torus(acc, shape, overrides) -> Cluster:
    """A torus of ``shape`` chips of ``acc`` with its wraparound (no size check: pods use it)."""
    fixed = sorted({"torus_shape", "wraparound", "devices_per_node"} & set(overrides))
    if fixed:
        raise ValueError(f"{', '.join(fixed)} follow from the slice's shape; pass shape= only")
    wrap = wraparound(acc, shape)
    n = math.prod(shape)
    overrides.setdefault("name", f"{acc.name} {'x'.join(map(str, shape))} slice")
    return cluster(acc, n, torus_shape=shape, wraparound=wrap, devices_per_node=n, **overrides)


# ---- Named clusters ---------------------------------------------------------------------------

# Llama 3 training cluster (Dubey et al., "The Llama 3 Herd of Models", 2024, section 3.3): 24,576
# H100 (80 GB, 700 W) in 8 pods of 3,072; 8 GPUs per server on NVLink; RoCE at 400 Gb/s per GPU;
# full bisection inside a pod, 1:7 oversubscription at the aggregation layer between pods, so a
# GPU's share of cross-pod bandwidth is 1/7 of its NIC.
LLAMA3_N_GPUS = 24_576
LLAMA3_POD_GPUS = 3_072
LLAMA3_OVERSUBSCRIPTION = 7.0
_DCN_LATENCY = 20e-6


def _llama3_24k() -> Cluster:
    nic = _SCALE_OUT["h100"][1]
    return cluster(
        "h100", LLAMA3_N_GPUS, name="Llama 3 cluster (24K H100)",
        inter_node=Link("RoCE 400 Gb/s", nic, 5e-6),
        devices_per_pod=LLAMA3_POD_GPUS,
        inter_pod=Link("RoCE between pods (1:7)", nic / LLAMA3_OVERSUBSCRIPTION, _DCN_LATENCY),
        source="Dubey et al. 2024, The Llama 3 Herd of Models, section 3.3")


_DGX_H100 = "NVIDIA DGX H100 user guide: 8 H100 SXM5, 4 NVSwitch, 8 x 400 Gb/s ConnectX-7"
_DGX_A100 = "NVIDIA DGX A100 user guide: 8 A100 SXM4 80GB, 6 NVSwitch, 8 x 200 Gb/s ConnectX-6"
_NVL72 = "NVIDIA GB200 NVL72 specification: 72 GPUs on NVLink 5 switches, 18 trays of 4"
_CLUSTER_PRESETS = {
    "dgx-h100": lambda: cluster("h100", 8, name="DGX H100", source=_DGX_H100),
    "hgx-h100": lambda: cluster("h100", 8, name="HGX H100 (8 GPUs)", source=_DGX_H100),
    "dgx-a100": lambda: cluster("a100-80gb", 8, name="DGX A100", source=_DGX_A100),
    "hgx-a100": lambda: cluster("a100-80gb", 8, name="HGX A100 (8 GPUs)", source=_DGX_A100),
    "gb200-nvl72": lambda: cluster("gb200", 72, name="GB200 NVL72", source=_NVL72),
    "tpu-v4-pod": lambda: tpu_slice("tpu-v4", (16, 16, 16), name="TPU v4 pod"),
    "tpu-v5e-pod": lambda: tpu_slice("tpu-v5e", (16, 16), name="TPU v5e pod"),
    # a v5p pod (8,960 chips) is larger than its largest single slice (6,144): a pod, not a slice
    "tpu-v5p-pod": lambda: _torus(get("tpu-v5p"), (16, 20, 28), {"name": "TPU v5p pod"}),
    "tpu-v6e-pod": lambda: tpu_slice("tpu-v6e", (16, 16), name="TPU v6e pod"),
    "llama3-24k": _llama3_24k,
}


def cluster_names() -> tuple[str, ...]:
    """Names of the cluster presets (TPU slices are also reachable as e.g. ``tpu-v5e-4x8``)."""
    return tuple(_CLUSTER_PRESETS)


def get_cluster(name) -> Cluster:
    """A named cluster preset, or a TPU slice named ``<tpu>-<shape>`` such as ``tpu-v5p-4x4x8``.

    >>> get_cluster("dgx-h100").n_devices, get_cluster("tpu-v5e-pod").torus_shape
    (8, (16, 16))
    >>> get_cluster("tpu-v5e-4x4").wraparound
    (False, False)

    See: Chapters 2 and 3, and "Networks".
    """
    if isinstance(name, Cluster):
        return name
    if not isinstance(name, str):
        raise ValueError(f"cluster must be a name or a Cluster, got {name!r}")
    key = name.strip().lower()
    if key in _CLUSTER_PRESETS:
        return _CLUSTER_PRESETS[key]()
    chip, _, shape = key.rpartition("-")
    if chip in _TPU_POD and shape and all(p.isdigit() for p in shape.split("x")):
        return tpu_slice(chip, tuple(int(p) for p in shape.split("x")))
    raise ValueError(f"unknown cluster {name!r}; known: {', '.join(_CLUSTER_PRESETS)}, or a TPU "
                     f"slice such as tpu-v5e-4x8 / tpu-v5p-4x4x8 (chips: {', '.join(_TPU_POD)})")


# ---- NCCL over NVLink: what a collective really gets ------------------------------------------

# nccl-tests report a collective's "bus bandwidth": the algorithm bandwidth V / t times a factor
# that makes it the rate at which each GPU's busiest link carries data, comparable with the link's
# one-way line rate whatever n is (NVIDIA nccl-tests, doc/PERFORMANCE.md).
_BUS_FACTOR = {
    "all-reduce": lambda n: 2 * (n - 1) / n,
    "all-gather": lambda n: (n - 1) / n,
    "reduce-scatter": lambda n: (n - 1) / n,
    "all-to-all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}


def bus_bandwidth_factor(collective, n) -> float:
    """nccl-tests' factor from algorithm bandwidth (V / t) to bus bandwidth, for ``n`` GPUs.

    All-reduce 2(n-1)/n; all-gather, reduce-scatter and all-to-all (n-1)/n; broadcast and
    reduce 1. A collective of V bytes at bus bandwidth W_bus takes t = factor * V / W_bus.

    >>> bus_bandwidth_factor("all-reduce", 8), bus_bandwidth_factor("all-gather", 8)
    (1.75, 0.875)

    See: Chapter 2, "NCCL inside and across nodes".
    """
    key = str(collective).replace("_", "-").lower()
    if key not in _BUS_FACTOR:
        raise ValueError(f"collective={collective!r}; valid choices: {', '.join(_BUS_FACTOR)}")
    if isinstance(n, bool) or not isinstance(n, int) or n < 2:
        raise ValueError(f"n={n!r} must be an integer >= 2 (a collective needs two GPUs)")
    return float(_BUS_FACTOR[key](n))


@dataclass(frozen=True)
class NCCLOnNVLink:
    """Measured NCCL bandwidths on one NVLink generation, next to its line rate (bytes/s, one-way).

    ``ring_bus_bytes_per_s``: the bus bandwidth NCCL reaches with its ring and other
    point-to-point algorithms at large messages; ``nvls_bus_bytes_per_s`` and
    ``nvls_alg_bytes_per_s``: an all-reduce of 8 GPUs with NVLink SHARP (NVLS), the NVSwitch
    adding the GPUs' data itself, as bus and as algorithm bandwidth.
    """

    line_bytes_per_s: float
    ring_bus_bytes_per_s: float
    nvls_bus_bytes_per_s: float
    nvls_alg_bytes_per_s: float
    source: str = ""

    @property
    def efficiency(self) -> float:
        """Share of the line rate NCCL's ring algorithms reach: ring bus bandwidth / line rate."""
        return self.ring_bus_bytes_per_s / self.line_bytes_per_s


# H100 (NVLink 4, 18 links, 450 GB/s one-way): S. Jeaugey (NCCL lead, NVIDIA) in NVIDIA/nccl-tests
# issue #212 (2024): "450GB/s is the line rate. With the protocol overhead (~20%) NCCL can get an
# effective NVLink bandwidth of 370GB/s", observed as busBw for operations other than all-reduce or
# with NCCL_ALGO=RING; all-reduce with NVLink SHARP on 8 GPUs peaks at a busBw of about 480 GB/s
# (algbw about 275 GB/s) at large sizes. Issue #326 (2025): 360 GB/s "is exactly what we'd
# expect on H100". H200 has the same NVLink 4.
_NCCL_H100 = NCCLOnNVLink(450e9, 370e9, 480e9, 275e9,
                          "NVIDIA/nccl-tests issues #212 (2024) and #326 (2025), NCCL maintainers")
NCCL_ON_NVLINK = {"h100": _NCCL_H100, "h200": _NCCL_H100}


def nccl_on_nvlink(accelerator) -> NCCLOnNVLink:
    """The measured NCCL-over-NVLink figures for ``accelerator`` (H100 and H200 so far).

    >>> round(nccl_on_nvlink("h100").efficiency, 2)
    0.82
    """
    acc = get(accelerator)
    if acc.name not in NCCL_ON_NVLINK:
        raise ValueError(f"no measured NCCL figures for {acc.name!r}; known: "
                         f"{', '.join(NCCL_ON_NVLINK)}")
    return NCCL_ON_NVLINK[acc.name]


def all_reduce_bytes_per_device(nbytes, n, *, in_switch=False):
    """Bytes each device sends (and receives) in an all-reduce of V = ``nbytes`` over ``n`` devices.

    Ring (or any reduce-scatter + all-gather): 2 (n-1)/n * V. With the reduction done in the
    switch (NVLink SHARP, "NVLS"; InfiniBand SHARP across nodes): about V, each device sending its
    V once and receiving the reduced V once, so the traffic falls by 2(n-1)/n, close to 2x for
    large n. Leaves out the switch's own limits, which is why measured gains are smaller.

    >>> all_reduce_bytes_per_device(8e9, 8), all_reduce_bytes_per_device(8e9, 8, in_switch=True)
    (14000000000.0, 8000000000.0)

    See: Chapter 2, "NCCL inside and across nodes".
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n={n!r} must be a positive integer")
    if isinstance(nbytes, bool) or not isinstance(nbytes, (int, float)) or not nbytes >= 0 \
            or not math.isfinite(nbytes):
        raise ValueError(f"nbytes={nbytes!r} must be a finite number >= 0")
    if n == 1:
        return 0.0
    return float(nbytes) if in_switch else 2.0 * (n - 1) / n * float(nbytes)
