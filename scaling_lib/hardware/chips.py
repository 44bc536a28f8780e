"""Accelerator presets: dense peak FLOP/s per dtype, HBM, scale-up links, with sources.

Peak FLOP/s are dense (never the 2:4 sparsity figure vendors print first). Bandwidths are one-way
per device in bytes/s unless a name says otherwise. Each preset cites its source next to it.

See: Chapter 1 (rooflines), Chapter 2 (GPUs), Chapter 3 (TPUs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from collections.abc import Mapping
from types import MappingProxyType

from ..units import (GiB, KiB, MiB, _brief, canonical_dtype, check_choice, check_int, check_positive)

from .internals import GPUInternals, TPUInternals
from .internals import _gpu_memory

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
    # What the driver reports as the device's total memory (nvidia-smi's "Memory-Usage" total),
    # the capacity a run can really fill; 0: not measured, use hbm_bytes. The datasheet's "80 GB"
    # is not this number: an H100 SXM reports 81,559 MiB = 85.5e9 bytes, an A100 80GB 81,920 MiB,
    # an A100 40GB 40,960 MiB (nvidia-smi totals collected in modal-labs/modal-client#2797; the
    # H100 figure also in NVIDIA/nccl#1264's nvidia-smi output).
    usable_hbm_bytes: float = 0.0

    def __post_init__(self):
        if not isinstance(self.name, str):
            raise ValueError(f"name={self.name!r} must be a string")
        check_choice("kind", self.kind, KINDS)
        if not isinstance(self.peak_flops, Mapping) or not self.peak_flops:
            raise ValueError(f"peak_flops={self.peak_flops!r} must map dtype names to FLOP/s, "
                             "e.g. {'bf16': 989.4e12}")
        peaks = {}
        for k, v in self.peak_flops.items():  # values are validated and kept as given
            check_positive(f"peak_flops[{k!r}]", v)
            peaks[canonical_dtype(k)] = v
        object.__setattr__(self, "peak_flops", MappingProxyType(peaks))
        check_positive("hbm_bytes", self.hbm_bytes, allow_zero=True)  # 0: not known
        check_positive("hbm_bytes_per_s", self.hbm_bytes_per_s)
        check_positive("usable_hbm_bytes", self.usable_hbm_bytes, allow_zero=True)
        check_positive("link_bytes_per_s", self.link_bytes_per_s, allow_zero=True)
        check_int("n_links", self.n_links)

    @property
    def memory_capacity_bytes(self) -> float:
        """Bytes a run can fill: the driver-reported total where measured, else ``hbm_bytes``.

        >>> get("h100").memory_capacity_bytes / 2**20
        81559.0
        """
        return self.usable_hbm_bytes or self.hbm_bytes

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
# Model" (2025), part 2; Google publishes no VMEM sizes for the others. v5e VMEM bandwidth: the
# same part 2 ("VMEM bandwidth is around 22x higher than HBM bandwidth"; its worked problem 4 uses
# 22 x 8.1e11 = 1.78e13 bytes/s for v5e). v6e: the v6e page has listed 2 and (earlier) 4 MXUs of
# 256x256 per TensorCore; the library follows the current page (2) and publishes no clock.
_V5E_VMEM_BYTES_PER_S = 1.78e13
_TPU_INSIDE = {
    "tpu-v4": TPUInternals(2, 4, 128, 4, source="Google Cloud TPU v4 documentation"),
    "tpu-v5e": TPUInternals(1, 4, 128, 8, 128 * MiB, "Google Cloud TPU v5e documentation",
                            vmem_bytes_per_s=_V5E_VMEM_BYTES_PER_S),
    "tpu-v5p": TPUInternals(2, 4, 128, 4, source="Google Cloud TPU v5p documentation"),
    "tpu-v6e": TPUInternals(1, 2, 256, 8, source="Google Cloud TPU v6e documentation"),
}

# Largest slice (chips on one ICI network, one job) per TPU generation, Google Cloud TPU docs:
# v5e and v6e slices go up to 16x16 = 256 chips, a whole pod; v5p "the largest job that can be
# scheduled is a 96 cube (6144 chip) job", shape 16x16x24, out of an 8,960-chip pod, and
# multislice (slices joined over DCN) reaches 18,432 chips. v4: no separate figure found, so its
# largest slice is taken as its 16x16x16 pod (4,096 chips), which no slice can exceed.
TPU_MAX_SLICE_SHAPE = {"tpu-v5e": (16, 16), "tpu-v6e": (16, 16), "tpu-v5p": (16, 16, 24),
                       "tpu-v4": (16, 16, 16)}
TPU_V5P_MAX_MULTISLICE_CHIPS = 18_432

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
                      usable_hbm_bytes=40960 * 2**20,
                      internals=_gpu(_A100_INSIDE, _A100_MEM, 40e9, 1.555e12)),
    # Same chip with HBM2e: 80GB at 2,039 GB/s (A100 datasheet, SXM4 80GB).
    "a100-80gb": _acc("a100-80gb", "gpu",
                      {"bf16": 312e12, "fp16": 312e12, "tf32": 156e12, "fp32": 19.5e12,
                       "int8": 624e12, "fp64": 19.5e12}, 80e9, 2.039e12,
                      link_bytes_per_s=300e9, n_links=12, n_cores=108, year=2020,
                      source=f"{_NV} A100 Tensor Core GPU datasheet (SXM4 80GB)",
                      usable_hbm_bytes=81920 * 2**20,
                      internals=_gpu(_A100_INSIDE, _A100_MEM, 80e9, 2.039e12)),
    # NVIDIA H100 datasheet (SXM5): 989.4 TF bf16 dense (1,979 "with sparsity"), 1,978.9 fp8,
    # 494.7 tf32, 67 fp32 (non-tensor); 80GB HBM3 at 3.35 TB/s; NVLink 4: 18 links x 25 GB/s
    # each way = 450e9 one-way (900 GB/s both); 132 SMs.
    "h100": _acc("h100", "gpu",
                 {"bf16": 989.4e12, "fp16": 989.4e12, "fp8": 1978.9e12, "int8": 1978.9e12,
                  "tf32": 494.7e12, "fp32": 66.9e12, "fp64": 66.9e12}, 80e9, 3.35e12,
                 link_bytes_per_s=450e9, n_links=18, n_cores=132, year=2022,
                 source=f"{_NV} H100 Tensor Core GPU datasheet (SXM5)",
                 usable_hbm_bytes=81559 * 2**20,
                 internals=_gpu(_H100_INSIDE, _H100_MEM, 80e9, 3.35e12)),
    # NVIDIA H200 datasheet (SXM): same compute as H100; 141GB HBM3e at 4.8 TB/s.
    "h200": _acc("h200", "gpu",
                 {"bf16": 989.4e12, "fp16": 989.4e12, "fp8": 1978.9e12, "int8": 1978.9e12,
                  "tf32": 494.7e12, "fp32": 66.9e12, "fp64": 66.9e12}, 141e9, 4.8e12,
                 link_bytes_per_s=450e9, n_links=18, n_cores=132, year=2024,
                 source=f"{_NV} H200 Tensor Core GPU datasheet (SXM)",
                 internals=_gpu(_H100_INSIDE, _H100_MEM, 141e9, 4.8e12)),
    # NVIDIA HGX B200 (1000 W) datasheet, 8 GPUs: 36 PF bf16/fp16 and 18 PF tf32 "with sparsity",
    # 72 PF fp8/int8 (sparse), 144 PF fp4 (sparse); halved for dense and divided by 8: 2.25e15 bf16,
    # 1.125e15 tf32, 4.5e15 fp8, 9e15 fp4. DGX B200 datasheet: "1,440GB total GPU memory" and
    # "64TB/s HBM3e bandwidth" for 8 GPUs -> 180e9 bytes and 8e12 bytes/s per GPU (the B200 chip
    # carries 192 GB of HBM3e, of which DGX/HGX B200 expose 180 GB). NVLink 5: 1.8 TB/s both
    # directions per GPU (14.4 TB/s for 8) -> 900e9 one-way. 148 SMs (not in the datasheets; as
    # widely reported, so `n_cores` is the one B200 figure without an NVIDIA source).
    "b200": _acc("b200", "gpu",
                 {"bf16": 2.25e15, "fp16": 2.25e15, "fp8": 4.5e15, "int8": 4.5e15, "fp4": 9e15,
                  "tf32": 1.125e15}, 180e9, 8e12,
                 link_bytes_per_s=900e9, n_links=18, n_cores=148, year=2024,
                 source=f"{_NV} HGX B200 datasheet (1000 W); DGX B200 datasheet (memory)"),
    # The Blackwell GPU of a GB200 superchip (GB200 NVL72 specification, rack totals / 72, sparsity
    # figures halved): 360 PF bf16 sparse -> 180 PF dense -> 2.5e15 per GPU; 720 PF fp8 sparse ->
    # 5e15; 1,440 PF fp4 sparse -> 10e15; "up to 13.4 TB HBM3e" -> 186e9; 576 TB/s -> 8e12;
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
        raise ValueError(f"accelerator must be a name or an Accelerator, got {_brief(name)}")
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


def with_changes(acc: Accelerator, **changes) -> Accelerator:
    """A copy of ``acc`` with some fields changed (e.g. a measured HBM bandwidth)."""
    return replace(acc, **changes)
