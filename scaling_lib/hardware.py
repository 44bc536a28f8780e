"""Accelerators, links and clusters: the "on what" of every estimate.

Peak FLOP/s are dense (never the 2:4 sparsity figure vendors print first). Bandwidths are one-way
per device in bytes/s unless a name says otherwise. Each preset cites its source next to it.

See: Chapter 1 (rooflines) and the hardware chapters (GPUs, TPUs, networks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from types import MappingProxyType

import numpy as np

from .units import GiB, KiB, MiB, canonical_dtype, check_positive, scalar_or_array

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
    internals: object = None  # GPUInternals, TPUInternals or None where unpublished

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


# ---- Inside a chip: memory levels, SMs, TensorCores ----------------------------------------------


@dataclass(frozen=True)
class MemoryLevel:
    """One level of a chip's memory hierarchy.

    ``capacity_bytes`` is the size of one copy (one per SM for registers and L1/SMEM, one per chip
    for L2 and HBM); ``copies`` how many there are; ``bytes_per_s`` the aggregate bandwidth of all
    copies together (``math.nan`` where no source gives one).
    """

    name: str
    capacity_bytes: float
    copies: int = 1
    bytes_per_s: float = math.nan
    source: str = ""

    @property
    def total_bytes(self) -> float:
        """Capacity of all copies together."""
        return self.capacity_bytes * self.copies


def chip_flops_per_s(n_units, flops_per_clock_per_unit, clock_hz):
    """Peak FLOP/s of a chip built from identical units: C = n_units * f_clock * (FLOPs/clock).

    Args: ``n_units`` SMs (GPU) or MXUs (TPU); ``flops_per_clock_per_unit`` FLOPs per clock of
    one unit (a fused multiply-add counts 2); ``clock_hz`` clock in Hz. Broadcasts over arrays.

    >>> chip_flops_per_s(132, 4096, 1.83e9) / 1e12   # H100 tensor cores, bf16 dense
    989.42976
    >>> chip_flops_per_s(132, 2 * 128, 1.98e9) / 1e12  # H100 FP32 cores (128 FMA lanes per SM)
    66.90816

    See: Chapter 2, "An H100 from the inside".
    """
    n = check_positive("n_units", n_units)
    f = check_positive("flops_per_clock_per_unit", flops_per_clock_per_unit)
    c = check_positive("clock_hz", clock_hz)
    return scalar_or_array(n * f * c)


def wave_efficiency(n_tiles, n_units):
    """Share of a chip's units kept busy when ``n_tiles`` equal tiles run on ``n_units`` at once.

    The tiles run in ceil(n_tiles / n_units) waves; the last wave may be partly empty:
    efficiency = n_tiles / (ceil(n_tiles / n_units) * n_units). On a GPU the units are SMs and a
    tile is one output block of a matmul ("wave quantization", NVIDIA Matrix Multiplication
    Background User's Guide). Broadcasts over arrays.

    >>> wave_efficiency(132, 132), round(wave_efficiency(133, 132), 3)
    (1.0, 0.504)

    See: Chapter 2, "An H100 from the inside".
    """
    t = check_positive("n_tiles", n_tiles)
    u = check_positive("n_units", n_units)
    return scalar_or_array(t / (np.ceil(t / u) * u))


def padding_efficiency(dim, multiple):
    """Share of useful work when a dimension ``dim`` is padded up to a multiple of ``multiple``.

    efficiency = dim / (ceil(dim / multiple) * multiple): a TPU MXU works on 128 x 128 tiles
    (256 x 256 on v6e), so a matmul dimension of 200 wastes 56 of every 256 lanes. Multiply the
    efficiencies of the dimensions that are tiled. Broadcasts over arrays.

    >>> round(padding_efficiency(200, 128), 4), padding_efficiency(4096, 256)
    (0.7812, 1.0)

    See: Chapter 3, "The MXU".
    """
    d = check_positive("dim", dim)
    m = check_positive("multiple", multiple)
    return scalar_or_array(d / (np.ceil(d / m) * m))


@dataclass(frozen=True)
class GPUInternals:
    """What is inside an NVIDIA GPU: its SMs, their cores, clocks and memory hierarchy.

    ``tensor_flops_per_clock_per_sm`` is the dense 16-bit (bf16, or fp16 before Ampere) tensor-core
    rate; 0 on chips without tensor cores. ``clock_hz`` is the boost clock the CUDA-core (FP32)
    peak is quoted at; ``tensor_clock_hz`` the clock the tensor-core peak is quoted at (lower on
    H100, which cannot sustain full boost with every tensor core busy).
    """

    architecture: str
    n_sm: int  # SMs enabled on the product
    n_sm_full: int  # SMs on the full die; the rest are disabled so dies with defects can ship
    tensor_cores_per_sm: int
    fp32_cores_per_sm: int
    clock_hz: float
    tensor_clock_hz: float
    tensor_flops_per_clock_per_sm: float
    memory: tuple = ()
    source: str = ""

    @property
    def fp32_flops_per_clock_per_sm(self) -> float:
        """FLOPs per clock of one SM's FP32 cores: 2 per core (one fused multiply-add)."""
        return 2.0 * self.fp32_cores_per_sm

    @property
    def tensor_flops_per_s(self) -> float:
        """Dense 16-bit tensor-core peak rebuilt from the parts (0 without tensor cores)."""
        if self.tensor_flops_per_clock_per_sm == 0:
            return 0.0
        return chip_flops_per_s(self.n_sm, self.tensor_flops_per_clock_per_sm, self.tensor_clock_hz)

    @property
    def fp32_flops_per_s(self) -> float:
        """FP32 CUDA-core peak rebuilt from the parts."""
        return chip_flops_per_s(self.n_sm, self.fp32_flops_per_clock_per_sm, self.clock_hz)

    def level(self, name: str) -> MemoryLevel:
        """The memory level called ``name`` ("registers", "L1/SMEM", "L2", "HBM")."""
        for lvl in self.memory:
            if lvl.name.lower() == str(name).lower():
                return lvl
        raise ValueError(f"no memory level {name!r}; levels: {', '.join(m.name for m in self.memory)}")


@dataclass(frozen=True)
class TPUInternals:
    """What is inside a TPU chip: TensorCores, their systolic MXUs, VMEM, and chips per host.

    ``vmem_bytes`` is per TensorCore (``math.nan`` where Google publishes no figure).
    """

    tensorcores: int
    mxus_per_core: int
    mxu_size: int  # the MXU is an mxu_size x mxu_size systolic array of multiply-accumulate cells
    chips_per_host: int
    vmem_bytes: float = math.nan
    source: str = ""

    @property
    def n_mxus(self) -> int:
        """MXUs on the chip."""
        return self.tensorcores * self.mxus_per_core

    @property
    def flops_per_clock(self) -> float:
        """bf16 FLOPs per clock of all MXUs: n_mxus * 2 * mxu_size^2 (each cell one MAC)."""
        return float(self.n_mxus * 2 * self.mxu_size**2)

    def implied_clock_hz(self, peak_flops_per_s: float) -> float:
        """The clock at which the MXUs reach ``peak_flops_per_s``: C / (FLOPs per clock)."""
        return check_positive("peak_flops_per_s", peak_flops_per_s) / self.flops_per_clock


def _gpu_memory(n_sm, fp32_cores, clock, l1, l2, l2_bw, l2_src, dram, dram_bw, *,
                smem_bytes_per_clock=128.0, dram_name="HBM"):
    """Registers, L1/SMEM, L2 and DRAM of a GPU, capacities from the architecture whitepapers.

    Register bandwidth is derived, not published: what the FP32 cores read at peak, three 4-byte
    operands per FMA per core per clock. SMEM bandwidth is 32 banks x 4 bytes = 128 bytes per clock
    per SM (CUDA C++ Programming Guide, "Shared Memory"; the A100 whitepaper lists 128 B/clk/SM
    for V100 and A100). Both at the boost clock.
    """
    return (
        MemoryLevel("registers", 256 * KiB, n_sm, n_sm * 12.0 * fp32_cores * clock,
                    "64K 32-bit registers per SM (whitepapers); bandwidth derived: 3 x 4 B per "
                    "FP32 core per clock"),
        MemoryLevel("L1/SMEM", l1, n_sm, n_sm * smem_bytes_per_clock * clock,
                    "capacity per SM (whitepaper); 32 banks x 4 bytes per clock per SM"),
        MemoryLevel("L2", l2, 1, l2_bw, l2_src),
        MemoryLevel(dram_name, dram, 1, dram_bw, "datasheet"),
    )


def _acc(name, kind, flops, hbm, bw, **kw) -> Accelerator:
    return Accelerator(name=name, kind=kind, peak_flops=flops, hbm_bytes=hbm, hbm_bytes_per_s=bw, **kw)


# ---- NVIDIA GPUs (SXM parts; dense tensor-core peaks from the datasheets) -------------------------
_NV = "NVIDIA"
# GPU internals. SM counts, cores per SM, clocks and cache sizes: NVIDIA architecture whitepapers
# (Kepler GK110, Tesla P100, Volta V100, Ampere A100, Hopper H100). Tensor FLOPs per clock per SM
# (dense 16-bit) = datasheet peak / (n_sm * tensor clock): 1,024 on V100 (8 tensor cores x 64
# FMA), 2,048 on A100 and 4,096 on H100 (4 tensor cores each). The H100 datasheet peaks imply two
# clocks: 66.9 TF FP32 = 132 x 256 x 1.98 GHz (boost) and 989.4 TF bf16 = 132 x 4096 x 1.83 GHz.
# L2 bandwidth: A100 whitepaper, V100-vs-A100 comparison table (5,120 B/clk on A100, 2,048 B/clk on V100); H100 measured
# at about 5.5 TB/s (Chips and Cheese, "Nvidia's H100: Funny L2, and Tons of Bandwidth", 2023, on
# the 114-SM PCIe card; NVIDIA publishes none). Full dies: GK110 15, GP100 60, GV100 84, GA100 128,
# GH100 144 SMs.
_K40_INSIDE = GPUInternals(
    "Kepler", 15, 15, 0, 192, 745e6, 745e6, 0.0,
    _gpu_memory(15, 192, 745e6, 64 * KiB, 1.5 * MiB, math.nan, "", 12e9, 288e9,
                smem_bytes_per_clock=math.nan, dram_name="GDDR5"),
    f"{_NV} Kepler GK110 whitepaper; Tesla K40 datasheet (peaks quoted at the 745 MHz base clock)")
_P100_INSIDE = GPUInternals(
    "Pascal", 56, 60, 0, 64, 1.48e9, 1.48e9, 0.0,
    _gpu_memory(56, 64, 1.48e9, 64 * KiB, 4 * MiB, math.nan, "", 16e9, 732e9),
    f"{_NV} Tesla P100 whitepaper (GP100)")
_V100_INSIDE = GPUInternals(
    "Volta", 80, 84, 8, 64, 1.53e9, 1.53e9, 1024.0,
    _gpu_memory(80, 64, 1.53e9, 128 * KiB, 6 * MiB, 2048 * 1.53e9, "A100 whitepaper (V100 vs A100 table)",
                32e9, 900e9),
    f"{_NV} Tesla V100 GPU architecture whitepaper")
_A100_INSIDE = dict(
    architecture="Ampere", n_sm=108, n_sm_full=128, tensor_cores_per_sm=4, fp32_cores_per_sm=64,
    clock_hz=1.41e9, tensor_clock_hz=1.41e9, tensor_flops_per_clock_per_sm=2048.0,
    source=f"{_NV} A100 Tensor Core GPU architecture whitepaper")
_A100_MEM = dict(n_sm=108, fp32_cores=64, clock=1.41e9, l1=192 * KiB, l2=40 * MiB,
                 l2_bw=5120 * 1.41e9, l2_src="A100 whitepaper: 5,120 bytes/clock")
_H100_INSIDE = dict(
    architecture="Hopper", n_sm=132, n_sm_full=144, tensor_cores_per_sm=4, fp32_cores_per_sm=128,
    clock_hz=1.98e9, tensor_clock_hz=1.83e9, tensor_flops_per_clock_per_sm=4096.0,
    source=f"{_NV} H100 Tensor Core GPU architecture whitepaper (SXM5)")
_H100_MEM = dict(n_sm=132, fp32_cores=128, clock=1.98e9, l1=256 * KiB, l2=50 * MiB, l2_bw=5.5e12,
                 l2_src="measured, Chips and Cheese 2023 (H100 PCIe); not published by NVIDIA")


def _gpu(inside: dict, mem: dict, dram: float, dram_bw: float) -> GPUInternals:
    return GPUInternals(**inside, memory=_gpu_memory(**mem, dram=dram, dram_bw=dram_bw))


# TPU internals: Google Cloud TPU system-architecture pages (TensorCores per chip, MXUs per
# TensorCore, MXU size, chips per host). v5e VMEM 128 MiB: Austin et al., "How to Scale Your
# Model" (2025), part 2; Google publishes no VMEM sizes for the others.
_TPU_INSIDE = {
    "tpu-v4": TPUInternals(2, 4, 128, 4, source="Google Cloud TPU v4 documentation"),
    "tpu-v5e": TPUInternals(1, 4, 128, 8, 128 * MiB, "Google Cloud TPU v5e documentation"),
    "tpu-v5p": TPUInternals(2, 4, 128, 4, source="Google Cloud TPU v5p documentation"),
    "tpu-v6e": TPUInternals(1, 2, 256, 8, source="Google Cloud TPU v6e documentation"),
}

ACCELERATORS: dict[str, Accelerator] = {
    # NVIDIA Tesla K40 datasheet: 4.29 TF fp32, 1.43 TF fp64 (base clock), 12 GB GDDR5 at 288 GB/s;
    # no 16-bit arithmetic at a higher rate, no tensor cores, no NVLink (PCIe 3.0 only). 15 SMX.
    "k40": _acc("k40", "gpu", {"fp32": 4.29e12, "fp64": 1.43e12}, 12e9, 288e9,
                n_cores=15, year=2013, source=f"{_NV} Tesla K40 datasheet", internals=_K40_INSIDE),
    # NVIDIA Tesla P100 datasheet (SXM2): 21.2 TF fp16 (CUDA cores at twice the fp32 rate), 10.6 fp32,
    # 5.3 fp64; 16 GB HBM2 at 732 GB/s; NVLink 1: 4 links, 160 GB/s both directions -> 80e9 one-way.
    "p100": _acc("p100", "gpu", {"fp16": 21.2e12, "fp32": 10.6e12, "fp64": 5.3e12}, 16e9, 732e9,
                 link_bytes_per_s=80e9, n_links=4, n_cores=56, year=2016,
                 source=f"{_NV} Tesla P100 datasheet (SXM2)", internals=_P100_INSIDE),
    # NVIDIA Tesla V100 datasheet (SXM2): 125 TFLOPS fp16 tensor, 15.7 fp32, 7.8 fp64; 900 GB/s;
    # NVLink 2: 300 GB/s both directions -> 150e9 one-way; 80 SMs. No bf16 support.
    "v100": _acc("v100", "gpu", {"fp16": 125e12, "fp32": 15.7e12, "fp64": 7.8e12}, 32e9, 900e9,
                 link_bytes_per_s=150e9, n_links=6, n_cores=80, year=2017,
                 source=f"{_NV} Tesla V100 datasheet (SXM2 32GB)", internals=_V100_INSIDE),
    # NVIDIA A100 datasheet (SXM): 312 TF bf16/fp16 dense, 156 tf32, 19.5 fp32, 624 TOPS int8;
    # 40GB at 1,555 GB/s; NVLink 3: 12 links x 25 GB/s each way = 300e9 one-way; 108 SMs.
    "a100-40gb": _acc("a100-40gb", "gpu",
                      {"bf16": 312e12, "fp16": 312e12, "tf32": 156e12, "fp32": 19.5e12,
                       "int8": 624e12, "fp64": 19.5e12}, 40e9, 1.555e12,
                      link_bytes_per_s=300e9, n_links=12, n_cores=108, year=2020,
                      source=f"{_NV} A100 Tensor Core GPU datasheet (SXM4 40GB)",
                      internals=_gpu(_A100_INSIDE, _A100_MEM, 40e9, 1.555e12)),
    # Same chip with HBM2e: 80GB at 2,039 GB/s (A100 datasheet, SXM4 80GB).
    "a100-80gb": _acc("a100-80gb", "gpu",
                      {"bf16": 312e12, "fp16": 312e12, "tf32": 156e12, "fp32": 19.5e12,
                       "int8": 624e12, "fp64": 19.5e12}, 80e9, 2.039e12,
                      link_bytes_per_s=300e9, n_links=12, n_cores=108, year=2020,
                      source=f"{_NV} A100 Tensor Core GPU datasheet (SXM4 80GB)",
                      internals=_gpu(_A100_INSIDE, _A100_MEM, 80e9, 2.039e12)),
    # NVIDIA H100 datasheet (SXM5): 989.4 TF bf16 dense (1,979 "with sparsity"), 1,978.9 fp8,
    # 494.7 tf32, 67 fp32 (non-tensor); 80GB HBM3 at 3.35 TB/s; NVLink 4: 18 links x 25 GB/s
    # each way = 450e9 one-way (900 GB/s both); 132 SMs.
    "h100": _acc("h100", "gpu",
                 {"bf16": 989.4e12, "fp16": 989.4e12, "fp8": 1978.9e12, "int8": 1978.9e12,
                  "tf32": 494.7e12, "fp32": 66.9e12, "fp64": 66.9e12}, 80e9, 3.35e12,
                 link_bytes_per_s=450e9, n_links=18, n_cores=132, year=2022,
                 source=f"{_NV} H100 Tensor Core GPU datasheet (SXM5)",
                 internals=_gpu(_H100_INSIDE, _H100_MEM, 80e9, 3.35e12)),
    # NVIDIA H200 datasheet (SXM): same compute as H100; 141GB HBM3e at 4.8 TB/s.
    "h200": _acc("h200", "gpu",
                 {"bf16": 989.4e12, "fp16": 989.4e12, "fp8": 1978.9e12, "int8": 1978.9e12,
                  "tf32": 494.7e12, "fp32": 66.9e12, "fp64": 66.9e12}, 141e9, 4.8e12,
                 link_bytes_per_s=450e9, n_links=18, n_cores=132, year=2024,
                 source=f"{_NV} H200 Tensor Core GPU datasheet (SXM)",
                 internals=_gpu(_H100_INSIDE, _H100_MEM, 141e9, 4.8e12)),
    # NVIDIA HGX B200 (1000 W) datasheet: 2.25 PF bf16 dense, 4.5 PF fp8, 9 PF fp4 (dense);
    # 192GB HBM3e at 8 TB/s (about 180GB usable in HGX listings); NVLink 5: 1.8 TB/s both
    # directions -> 900e9 one-way; 148 SMs.
    "b200": _acc("b200", "gpu",
                 {"bf16": 2.25e15, "fp16": 2.25e15, "fp8": 4.5e15, "int8": 4.5e15, "fp4": 9e15,
                  "tf32": 1.125e15}, 192e9, 8e12,
                 link_bytes_per_s=900e9, n_links=18, n_cores=148, year=2024,
                 source=f"{_NV} HGX B200 datasheet (1000 W)"),
    # The Blackwell GPU of a GB200 superchip (GB200 NVL72 specification, rack totals / 72, sparsity
    # figures halved): 180 PF bf16 dense -> 2.5e15; 13.4 TB HBM3e -> 186e9; 576 TB/s -> 8e12;
    # NVLink 5 at 1.8 TB/s both directions -> 900e9 one-way, 18 links.
    "gb200": _acc("gb200", "gpu",
                  {"bf16": 2.5e15, "fp16": 2.5e15, "fp8": 5e15, "int8": 5e15, "fp4": 10e15,
                   "tf32": 1.25e15}, 13.4e12 / 72, 576e12 / 72,
                  link_bytes_per_s=900e9, n_links=18, year=2024,
                  source=f"{_NV} GB200 NVL72 specification (per GPU = rack / 72)"),
    # ---- Google TPUs (Google Cloud TPU system-architecture pages, per chip) ----------------------
    # v4: 275 TF bf16 (and int8), 32 GiB HBM2 at 1.2 TB/s; 3D torus, 6 ICI links; 2 TensorCores.
    # ICI per link taken as 45e9 bytes/s each way (same generation of link as v5e; an estimate).
    "tpu-v4": _acc("tpu-v4", "tpu", {"bf16": 275e12, "int8": 275e12}, 32 * GiB, 1.2e12,
                   link_bytes_per_s=6 * 45e9, n_links=6, n_cores=2, year=2021,
                   source="Google Cloud TPU v4 documentation", internals=_TPU_INSIDE["tpu-v4"]),
    # v5e: 197 TF bf16, 394 TOPS int8, 16 GB HBM2 at 819 GB/s; 2D torus, 4 links of 45e9 each way.
    "tpu-v5e": _acc("tpu-v5e", "tpu", {"bf16": 197e12, "int8": 394e12}, 16e9, 819e9,
                    link_bytes_per_s=4 * 45e9, n_links=4, n_cores=1, year=2023,
                    source="Google Cloud TPU v5e documentation",
                    internals=_TPU_INSIDE["tpu-v5e"]),
    # v5p: 459 TF bf16, 918 TOPS int8, 95 GB HBM2e at 2,765 GB/s; 3D torus, 6 links of 90e9 each way.
    "tpu-v5p": _acc("tpu-v5p", "tpu", {"bf16": 459e12, "int8": 918e12}, 95e9, 2.765e12,
                    link_bytes_per_s=6 * 90e9, n_links=6, n_cores=2, year=2023,
                    source="Google Cloud TPU v5p documentation",
                    internals=_TPU_INSIDE["tpu-v5p"]),
    # v6e (Trillium): 918 TF bf16, 1,836 TOPS int8, 32 GB at 1,638 GB/s; 2D torus, 4 links of 90e9.
    "tpu-v6e": _acc("tpu-v6e", "tpu", {"bf16": 918e12, "int8": 1836e12}, 32e9, 1.638e12,
                    link_bytes_per_s=4 * 90e9, n_links=4, n_cores=1, year=2024,
                    source="Google Cloud TPU v6e documentation",
                    internals=_TPU_INSIDE["tpu-v6e"]),
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


# NVIDIA data-centre GPUs from 2013 to 2024, oldest first: the "twelve years" story of Chapter 2.
GPU_TIMELINE = ("k40", "p100", "v100", "a100-80gb", "h100", "b200")
_TRAINING_DTYPES = ("bf16", "fp16", "fp32")


def training_dtype(accelerator) -> str:
    """The narrowest format a chip trains in at full rate: bf16 if listed, else fp16, else fp32.

    >>> training_dtype("h100"), training_dtype("v100"), training_dtype("k40")
    ('bf16', 'fp16', 'fp32')

    See: Chapter 2, "Twelve years of GPUs".
    """
    acc = get(accelerator)
    for dtype in _TRAINING_DTYPES:
        if dtype in acc.peak_flops:
            return dtype
    raise ValueError(f"{acc.name} lists none of {_TRAINING_DTYPES}; it lists {acc.dtypes}")


def tensor_core_speedup(accelerator, dtype="bf16") -> float:
    """How many times a matmul in ``dtype`` outruns one in plain FP32: C_dtype / C_fp32.

    Plain FP32 runs on the CUDA cores; 16-bit inputs run on the tensor cores. Memory traffic
    (which also halves in 16 bits) is left out: this is the compute-bound ratio.

    >>> round(tensor_core_speedup("h100"), 1), round(tensor_core_speedup("a100-80gb"), 1)
    (14.8, 16.0)

    See: Chapter 2, "Mixed precision".
    """
    acc = get(accelerator)
    return acc.peak_flops_per_s(dtype) / acc.peak_flops_per_s("fp32")


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
        if self.topology not in TOPOLOGIES:
            raise ValueError(f"topology={self.topology!r}; valid choices: {', '.join(TOPOLOGIES)}")
        if self.n_devices < 1 or self.devices_per_node < 1:
            raise ValueError(
                f"n_devices={self.n_devices} and devices_per_node={self.devices_per_node} "
                "must be >= 1"
            )
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


def with_changes(acc: Accelerator, **changes) -> Accelerator:
    """A copy of ``acc`` with some fields changed (e.g. a measured HBM bandwidth)."""
    return replace(acc, **changes)


# ---- TPU slices: tori, wraparound, hops ------------------------------------------------------


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
    shape = tuple(shape)
    if len(shape) != ndim or any(isinstance(a, bool) or not isinstance(a, int) or a < 1
                                 for a in shape):
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
    shape = tuple(int(a) for a in shape)
    wrap = (True,) * len(shape) if wrap is None else tuple(bool(w) for w in wrap)
    if len(wrap) != len(shape) or any(a < 1 for a in shape):
        raise ValueError(f"shape={shape} needs positive axes and wrap={wrap} one bool per axis")
    return sum(a // 2 if w else a - 1 for a, w in zip(shape, wrap))


def tpu_slice(accelerator, shape, **overrides) -> Cluster:
    """One ICI-connected TPU slice of ``shape`` chips (a torus), with DCN to the outside.

    >>> s = tpu_slice("tpu-v5e", (4, 8))
    >>> s.n_devices, s.wraparound, s.n_hosts
    (32, (False, False), 4)

    See: Chapter 3, "Slices and pods".
    """
    acc = get(accelerator)
    shape = tuple(shape)
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
    "tpu-v5p-pod": lambda: tpu_slice("tpu-v5p", (16, 20, 28), name="TPU v5p pod"),
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
