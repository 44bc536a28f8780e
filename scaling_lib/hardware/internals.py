"""Inside a chip: memory levels, SMs, tensor cores, MXUs, and tile quantization.

See: Chapter 2 (GPUs) and Chapter 3 (TPUs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..units import KiB, check_positive, scalar_or_array

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

    ``vmem_bytes`` is per TensorCore and ``vmem_bytes_per_s`` the bandwidth between VMEM and the
    MXUs (bytes/s), both ``math.nan`` where no figure is published.
    """

    tensorcores: int
    mxus_per_core: int
    mxu_size: int  # the MXU is an mxu_size x mxu_size systolic array of multiply-accumulate cells
    chips_per_host: int
    vmem_bytes: float = math.nan
    source: str = ""
    vmem_bytes_per_s: float = math.nan

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
