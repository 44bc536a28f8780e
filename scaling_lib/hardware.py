"""Accelerators, links and clusters: the "on what" of every estimate.

Peak FLOP/s are dense (never the 2:4 sparsity figure vendors print first). Bandwidths are one-way
per device in bytes/s unless a name says otherwise. Each preset cites its source next to it.

See: Chapter 1 (rooflines) and the hardware chapters (GPUs, TPUs, networks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from .units import GiB, canonical_dtype

KINDS = ("gpu", "tpu", "cpu")


@dataclass(frozen=True)
class Accelerator:
    """One chip: its dense peak FLOP/s per dtype and its HBM.

    ``peak_flops`` maps a dtype name ("bf16", "fp8", ...) to dense FLOP/s (or OP/s for int8).
    ``link_bytes_per_s`` is the chip's scale-up interconnect (NVLink, ICI), one-way, all links
    together; ``n_links`` is how many links that total is spread over.
    """

    name: str
    kind: str
    peak_flops: MappingProxyType
    hbm_bytes: float
    hbm_bytes_per_s: float
    link_bytes_per_s: float = 0.0
    n_links: int = 1
    n_cores: int = 0  # SMs on a GPU, TensorCores on a TPU
    year: int = 0
    source: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r} must be one of {KINDS}")
        if not isinstance(self.peak_flops, MappingProxyType):
            object.__setattr__(self, "peak_flops", MappingProxyType(dict(self.peak_flops)))

    @property
    def dtypes(self) -> tuple[str, ...]:
        """The dtypes this chip has a peak for."""
        return tuple(self.peak_flops)

    def supports(self, dtype) -> bool:
        """Whether ``dtype`` has a listed peak on this chip."""
        try:
            return canonical_dtype(dtype) in self.peak_flops
        except ValueError:
            return False

    def peak_flops_per_s(self, dtype="bf16") -> float:
        """Dense peak FLOP/s for matmuls in ``dtype``.

        >>> get("h100").peak_flops_per_s("bf16")
        989400000000000.0
        """
        key = canonical_dtype(dtype)
        if key not in self.peak_flops:
            raise ValueError(
                f"{self.name} has no listed peak for dtype={dtype!r}; "
                f"valid choices for {self.name}: {', '.join(self.peak_flops)}"
            )
        return self.peak_flops[key]

    def critical_intensity(self, dtype="bf16") -> float:
        """FLOPs per byte of HBM traffic at which compute time equals memory time: C / W_hbm.

        >>> round(get("tpu-v5e").critical_intensity())
        241
        """
        return self.peak_flops_per_s(dtype) / self.hbm_bytes_per_s

    def __repr__(self):
        return f"Accelerator({self.name!r})"


def _acc(name, kind, flops, hbm, bw, **kw) -> Accelerator:
    return Accelerator(name=name, kind=kind, peak_flops=flops, hbm_bytes=hbm, hbm_bytes_per_s=bw, **kw)


# ---- NVIDIA GPUs (SXM parts; dense tensor-core peaks from the datasheets) -------------------------
_NV = "NVIDIA"
ACCELERATORS: dict[str, Accelerator] = {
    # NVIDIA Tesla V100 datasheet (SXM2): 125 TFLOPS fp16 tensor, 15.7 fp32, 7.8 fp64; 900 GB/s;
    # NVLink 2: 300 GB/s both directions -> 150e9 one-way; 80 SMs. No bf16 support.
    "v100": _acc("v100", "gpu", {"fp16": 125e12, "fp32": 15.7e12, "fp64": 7.8e12}, 32e9, 900e9,
                 link_bytes_per_s=150e9, n_links=6, n_cores=80, year=2017,
                 source=f"{_NV} Tesla V100 datasheet (SXM2 32GB)"),
    # NVIDIA A100 datasheet (SXM): 312 TF bf16/fp16 dense, 156 tf32, 19.5 fp32, 624 TOPS int8;
    # 40GB at 1,555 GB/s; NVLink 3: 12 links x 25 GB/s each way = 300e9 one-way; 108 SMs.
    "a100-40gb": _acc("a100-40gb", "gpu",
                      {"bf16": 312e12, "fp16": 312e12, "tf32": 156e12, "fp32": 19.5e12,
                       "int8": 624e12, "fp64": 19.5e12}, 40e9, 1.555e12,
                      link_bytes_per_s=300e9, n_links=12, n_cores=108, year=2020,
                      source=f"{_NV} A100 Tensor Core GPU datasheet (SXM4 40GB)"),
    # Same chip with HBM2e: 80GB at 2,039 GB/s (A100 datasheet, SXM4 80GB).
    "a100-80gb": _acc("a100-80gb", "gpu",
                      {"bf16": 312e12, "fp16": 312e12, "tf32": 156e12, "fp32": 19.5e12,
                       "int8": 624e12, "fp64": 19.5e12}, 80e9, 2.039e12,
                      link_bytes_per_s=300e9, n_links=12, n_cores=108, year=2020,
                      source=f"{_NV} A100 Tensor Core GPU datasheet (SXM4 80GB)"),
    # NVIDIA H100 datasheet (SXM5): 989.4 TF bf16 dense (1,979 "with sparsity"), 1,978.9 fp8,
    # 494.7 tf32, 67 fp32 (non-tensor); 80GB HBM3 at 3.35 TB/s; NVLink 4: 18 links x 25 GB/s
    # each way = 450e9 one-way (900 GB/s both); 132 SMs.
    "h100": _acc("h100", "gpu",
                 {"bf16": 989.4e12, "fp16": 989.4e12, "fp8": 1978.9e12, "int8": 1978.9e12,
                  "tf32": 494.7e12, "fp32": 66.9e12, "fp64": 66.9e12}, 80e9, 3.35e12,
                 link_bytes_per_s=450e9, n_links=18, n_cores=132, year=2022,
                 source=f"{_NV} H100 Tensor Core GPU datasheet (SXM5)"),
    # NVIDIA H200 datasheet (SXM): same compute as H100; 141GB HBM3e at 4.8 TB/s.
    "h200": _acc("h200", "gpu",
                 {"bf16": 989.4e12, "fp16": 989.4e12, "fp8": 1978.9e12, "int8": 1978.9e12,
                  "tf32": 494.7e12, "fp32": 66.9e12, "fp64": 66.9e12}, 141e9, 4.8e12,
                 link_bytes_per_s=450e9, n_links=18, n_cores=132, year=2024,
                 source=f"{_NV} H200 Tensor Core GPU datasheet (SXM)"),
    # NVIDIA HGX B200 (1000 W) datasheet: 2.25 PF bf16 dense, 4.5 PF fp8, 9 PF fp4 (dense);
    # 192GB HBM3e at 8 TB/s (about 180GB usable in HGX listings); NVLink 5: 1.8 TB/s both
    # directions -> 900e9 one-way; 148 SMs.
    "b200": _acc("b200", "gpu",
                 {"bf16": 2.25e15, "fp16": 2.25e15, "fp8": 4.5e15, "int8": 4.5e15, "fp4": 9e15,
                  "tf32": 1.125e15}, 192e9, 8e12,
                 link_bytes_per_s=900e9, n_links=18, n_cores=148, year=2024,
                 source=f"{_NV} HGX B200 datasheet (1000 W)"),
    # ---- Google TPUs (Google Cloud TPU system-architecture pages, per chip) ----------------------
    # v4: 275 TF bf16 (and int8), 32 GiB HBM2 at 1.2 TB/s; 3D torus, 6 ICI links; 2 TensorCores.
    # ICI per link taken as 45e9 bytes/s each way (same generation of link as v5e; an estimate).
    "tpu-v4": _acc("tpu-v4", "tpu", {"bf16": 275e12, "int8": 275e12}, 32 * GiB, 1.2e12,
                   link_bytes_per_s=6 * 45e9, n_links=6, n_cores=2, year=2021,
                   source="Google Cloud TPU v4 documentation"),
    # v5e: 197 TF bf16, 394 TOPS int8, 16 GB HBM2 at 819 GB/s; 2D torus, 4 links of 45e9 each way.
    "tpu-v5e": _acc("tpu-v5e", "tpu", {"bf16": 197e12, "int8": 394e12}, 16e9, 819e9,
                    link_bytes_per_s=4 * 45e9, n_links=4, n_cores=1, year=2023,
                    source="Google Cloud TPU v5e documentation"),
    # v5p: 459 TF bf16, 918 TOPS int8, 95 GB HBM2e at 2,765 GB/s; 3D torus, 6 links of 90e9 each way.
    "tpu-v5p": _acc("tpu-v5p", "tpu", {"bf16": 459e12, "int8": 918e12}, 95e9, 2.765e12,
                    link_bytes_per_s=6 * 90e9, n_links=6, n_cores=2, year=2023,
                    source="Google Cloud TPU v5p documentation"),
    # v6e (Trillium): 918 TF bf16, 1,836 TOPS int8, 32 GB at 1,638 GB/s; 2D torus, 4 links of 90e9.
    "tpu-v6e": _acc("tpu-v6e", "tpu", {"bf16": 918e12, "int8": 1836e12}, 32e9, 1.638e12,
                    link_bytes_per_s=4 * 90e9, n_links=4, n_cores=1, year=2024,
                    source="Google Cloud TPU v6e documentation"),
}

_ALIASES = {
    "h100-sxm": "h100",
    "h100-80gb": "h100",
    "a100": "a100-80gb",
    "v5e": "tpu-v5e",
    "v5p": "tpu-v5p",
    "v4": "tpu-v4",
    "v6e": "tpu-v6e",
    "trillium": "tpu-v6e",
    "v100-32gb": "v100",
}


def names() -> tuple[str, ...]:
    """Names of every accelerator preset."""
    return tuple(ACCELERATORS)


def get(name) -> Accelerator:
    """Look up an accelerator preset by name (an Accelerator passes through unchanged).

    >>> get("h100").hbm_bytes
    80000000000.0
    """
    if isinstance(name, Accelerator):
        return name
    if not isinstance(name, str):
        raise ValueError(f"accelerator must be a name or an Accelerator, got {name!r}")
    key = name.strip().lower()
    key = _ALIASES.get(key, key)
    if key not in ACCELERATORS:
        raise ValueError(f"unknown accelerator {name!r}; known: {', '.join(ACCELERATORS)}")
    return ACCELERATORS[key]


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

    @property
    def per_link_bytes_per_s(self) -> float:
        """One-way bandwidth of one link."""
        return self.bytes_per_s / self.n_links


TOPOLOGIES = ("switch", "ring", "bidirectional_ring", "torus_2d", "torus_3d")


@dataclass(frozen=True)
class Cluster:
    """Devices, grouped in nodes (a scale-up domain), joined by a slower scale-out network.

    For TPUs a "node" is an ICI-connected slice (a torus of ``torus_shape``); for GPUs it is an
    NVLink/NVSwitch domain (8 GPUs in a DGX/HGX box, 72 in a GB200 NVL72 rack).
    """

    accelerator: Accelerator
    n_devices: int
    devices_per_node: int
    intra_node: Link
    inter_node: Link
    topology: str = "switch"  # topology inside a node
    torus_shape: tuple[int, ...] = field(default=())
    name: str = ""

    def __post_init__(self):
        if self.topology not in TOPOLOGIES:
            raise ValueError(f"topology={self.topology!r}; valid choices: {', '.join(TOPOLOGIES)}")
        if self.n_devices < 1 or self.devices_per_node < 1:
            raise ValueError(
                f"n_devices={self.n_devices} and devices_per_node={self.devices_per_node} "
                "must be >= 1"
            )

    @property
    def n_nodes(self) -> int:
        """Number of nodes (rounded up)."""
        return math.ceil(self.n_devices / self.devices_per_node)

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

    >>> torus_shape(256, 2), torus_shape(128, 2), torus_shape(64, 3)
    ((16, 16), (8, 16), (4, 4, 4))
    """
    if n < 1:
        raise ValueError(f"n={n} devices must be >= 1")
    shape = [1] * ndim
    rest = n
    for i in range(ndim, 0, -1):
        target = round(rest ** (1 / i))
        # the divisor of rest closest to target
        best = min((d for d in range(1, rest + 1) if rest % d == 0), key=lambda d: (abs(d - target), d))
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
    "tpu-v4": ("DCN", 6.25e9, 20e-6),
    "tpu-v5e": ("DCN", 3.125e9, 20e-6),
    "tpu-v5p": ("DCN", 6.25e9, 20e-6),
    "tpu-v6e": ("DCN", 3.125e9, 20e-6),
}
# Largest ICI-connected slice (hardware.md): v4 4096 (16x16x16), v5e/v6e 256 (16x16), v5p 8960.
_TPU_POD = {"tpu-v4": (4096, 3), "tpu-v5e": (256, 2), "tpu-v5p": (8960, 3), "tpu-v6e": (256, 2)}
_GPU_NODE = 8  # DGX/HGX boxes of 8 GPUs
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
    >>> cluster("tpu-v5e", 128).torus_shape
    (8, 16)
    """
    acc = get(accelerator)
    if isinstance(n_devices, bool) or not isinstance(n_devices, (int,)) or n_devices < 1:
        raise ValueError(f"n_devices={n_devices!r} must be a positive integer")
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
        defaults = dict(
            devices_per_node=min(n_devices, _GPU_NODE),
            intra_node=intra,
            inter_node=inter,
            topology="switch",
        )
    unknown = set(overrides) - (set(Cluster.__dataclass_fields__) - {"accelerator", "n_devices"})
    if unknown:
        raise ValueError(
            f"unknown cluster option(s) {sorted(unknown)}; valid: {', '.join(Cluster.__dataclass_fields__)}"
        )
    defaults.update(overrides)
    defaults.setdefault("name", f"{n_devices} x {acc.name}")
    return Cluster(accelerator=acc, n_devices=n_devices, **defaults)


def with_changes(acc: Accelerator, **changes) -> Accelerator:
    """A copy of ``acc`` with some fields changed (e.g. a measured HBM bandwidth)."""
    return replace(acc, **changes)
