"""Inside a chip: memory levels, SMs, tensor cores, MXUs, and tile quantization.

See: Chapter 2 (GPUs) and Chapter 3 (TPUs).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..units import KiB, check_count, check_positive, scalar_or_array

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


def systolic_clocks(n_rows, size):
    """Clocks for ``n_rows`` input rows to pass through a ``size`` x ``size`` weight-stationary
    systolic array, from the first row entering to the last result leaving: n + 2 (size - 1).

    Row r reaches cell (k, j) (row k, column j of the grid) at clock r + k + j: one clock per
    cell to the right and one per cell down. The last row, r = n - 1, leaves the far corner
    (size - 1, size - 1) at clock n - 1 + 2 (size - 1), so the array is busy n + 2 (size - 1)
    clocks for n * size^2 multiply-adds; the 2 (size - 1) are filling and draining. A real MXU
    overlaps one tile's drain with the next tile's fill, so this is the cost of an isolated
    tile. Broadcasts over arrays.

    >>> int(systolic_clocks(128, 128)), int(systolic_clocks(4, 4))
    (382, 10)

    See: Chapter 3, "The MXU is a systolic array".
    """
    n = np.asarray(check_count("n_rows", n_rows), dtype=float)
    s = np.asarray(check_count("size", size), dtype=float)
    return scalar_or_array(n + 2.0 * (s - 1))


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
    # The VPU works on vector registers (VREGs) of sublanes x lanes 32-bit words: 8 x 128 on every
    # generation here (Google Cloud TPU v6e page: "a 128x8 vector processing unit (VPU) with 128
    # lanes x 8 sublanes"; Austin et al., "How to Scale Your Model", part 2, for the others).
    vpu_sublanes: int = 8
    vpu_lanes: int = 128

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


# ---- Warps, SIMT and occupancy ------------------------------------------------------------------


@dataclass(frozen=True)
class SMLimits:
    """What one SM can hold at once: the limits that decide a kernel's occupancy.

    A warp is ``warp_size`` threads that issue one instruction together (SIMT). Registers are
    allocated per warp in units of ``register_unit`` registers; shared memory per block in units
    of ``smem_unit`` bytes, plus ``smem_reserved_per_block`` the CUDA runtime keeps per block.
    """

    name: str
    warp_size: int
    max_warps: int  # resident warps per SM
    max_blocks: int  # resident thread blocks per SM
    max_threads_per_block: int
    registers: int  # 32-bit registers per SM
    max_registers_per_thread: int
    register_unit: int  # registers are allocated per warp in multiples of this
    smem_bytes: int  # shared memory per SM a kernel can use
    max_smem_per_block: int
    smem_unit: int
    smem_reserved_per_block: int
    source: str = ""


# CUDA C++ Programming Guide, "Compute Capabilities", technical specifications for compute
# capability 9.0 (Hopper, H100) and 8.0 (A100), and the Hopper / Ampere tuning guides: 32 threads
# per warp; 64 resident warps (2,048 threads) and 32 blocks per SM; 1,024 threads per block; 64K
# 32-bit registers per SM, at most 255 per thread; shared memory per SM 228 KB (H100) / 164 KB
# (A100), per block 227 KB / 163 KB, with 1 KB per block reserved by the CUDA runtime.
# Allocation granularities (256 registers per warp, 128 bytes of shared memory): NVIDIA's CUDA
# Occupancy Calculator (Nsight Compute) for these compute capabilities.
SM_LIMITS = {
    "Hopper": SMLimits("H100 SM (compute capability 9.0)", 32, 64, 32, 1024, 65536, 255, 256,
                       228 * 1024, 227 * 1024, 128, 1024,
                       "CUDA C++ Programming Guide (compute capability 9.0); Hopper tuning guide"),
    "Ampere": SMLimits("A100 SM (compute capability 8.0)", 32, 64, 32, 1024, 65536, 255, 256,
                       164 * 1024, 163 * 1024, 128, 1024,
                       "CUDA C++ Programming Guide (compute capability 8.0); Ampere tuning guide"),
}


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks and warps per SM, the share of the SM's warp slots used, and the limiter."""

    blocks: int
    warps: int
    fraction: float  # warps / max_warps, in [0, 1]
    limited_by: str  # "warps", "blocks", "registers" or "shared memory"
    limits: dict  # blocks per SM each resource alone would allow


def _whole(name, value, lo, hi=None):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name}={value!r} must be a whole number")
    if value < lo or (hi is not None and value > hi):
        top = f" and <= {hi}" if hi is not None else ""
        raise ValueError(f"{name}={value} must be >= {lo}{top}")
    return int(value)


def occupancy(registers_per_thread, smem_bytes_per_block=0, threads_per_block=256,
              limits="Hopper") -> Occupancy:
    """How many blocks of a kernel one SM holds at once, and the occupancy that gives.

    Each resource allows a number of resident blocks; the SM holds the smallest:

        warps per block  w = ceil(threads / 32)
        by warp slots    floor(max_warps / w)
        by block slots   max_blocks
        by registers     floor(floor(registers / r_warp) / w), r_warp = ceil(32 r / 256) * 256
        by shared memory floor(smem_SM / (ceil(s / 128) * 128 + 1 KB))

    and occupancy = blocks * w / max_warps; 0 blocks means one block does not fit and the launch
    fails ("too many resources requested"). ``registers_per_thread`` r (what ``nvcc -Xptxas -v``
    prints), ``smem_bytes_per_block`` s (bytes), ``threads_per_block``; ``limits`` an
    architecture name of ``SM_LIMITS`` or an ``SMLimits``. Leaves out the register file's split
    into four per-scheduler quarters, which can cost a block at some register counts.

    >>> o = occupancy(32, 0, 256)            # a light elementwise kernel: every warp slot used
    >>> o.blocks, o.warps, o.fraction
    (8, 64, 1.0)
    >>> o = occupancy(64, 0, 256)            # 64 registers per thread: half the warp slots
    >>> o.warps, o.limited_by
    (32, 'registers')
    >>> occupancy(168, 200 * 1024, 384).fraction  # a big matmul tile: one block per SM
    0.1875

    See: Chapter 2, "Warps, SIMT and occupancy".
    """
    lim = SM_LIMITS.get(limits) if isinstance(limits, str) else limits
    if not isinstance(lim, SMLimits):
        raise ValueError(f"limits={limits!r}; valid choices: {', '.join(SM_LIMITS)} or an SMLimits")
    r = _whole("registers_per_thread", registers_per_thread, 1, lim.max_registers_per_thread)
    s = _whole("smem_bytes_per_block", smem_bytes_per_block, 0, lim.max_smem_per_block)
    t = _whole("threads_per_block", threads_per_block, 1, lim.max_threads_per_block)
    w = math.ceil(t / lim.warp_size)
    regs_per_warp = math.ceil(r * lim.warp_size / lim.register_unit) * lim.register_unit
    smem = math.ceil(s / lim.smem_unit) * lim.smem_unit + lim.smem_reserved_per_block
    by = {"warps": lim.max_warps // w,
          "blocks": lim.max_blocks,
          "registers": (lim.registers // regs_per_warp) // w,
          "shared memory": lim.smem_bytes // smem}
    blocks = min(by.values())
    limiter = min(by, key=lambda k: (by[k], list(by).index(k)))
    warps = blocks * w
    return Occupancy(blocks, warps, warps / lim.max_warps, limiter, by)


# Blackwell (B200, GB200) tensor memory: a per-SM memory next to the fifth-generation tensor cores
# that holds MMA accumulators instead of registers. NVIDIA PTX ISA, "Tensor Memory" (tcgen05): 128
# lanes x 512 columns of 32-bit cells per CTA's SM, so 128 * 512 * 4 bytes = 256 KiB.
TMEM_LANES = 128
TMEM_COLUMNS = 512
TMEM_BYTES_PER_SM = TMEM_LANES * TMEM_COLUMNS * 4
