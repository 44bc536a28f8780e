"""Answer key for Chapter 2 (GPUs) exercises."""

from __future__ import annotations

import math

from .. import hardware, inference
from ..units import dtype_bytes


def tensor_flops_per_clock_per_sm(p):
    """Ex 2.1: dense 16-bit tensor-core FLOPs per clock per SM of p.accelerator."""
    acc = hardware.get(p.accelerator)
    g = acc.internals
    return acc.peak_flops_per_s(hardware.training_dtype(acc)) / (g.n_sm * g.tensor_clock_hz)


def fp32_slowdown(p):
    """Ex 2.2: how many times slower a compute-bound matmul runs in FP32 than in 16 bits."""
    return hardware.tensor_core_speedup(p.accelerator, hardware.training_dtype(p.accelerator))


def disabled_sm_fraction(p):
    """Ex 2.3: share of the full die's SMs that the product leaves disabled."""
    g = hardware.get(p.accelerator).internals
    return (g.n_sm_full - g.n_sm) / g.n_sm_full


def level_critical_intensity(p):
    """Ex 2.4: FLOPs per byte needed to stay compute-bound reading from memory level p.level."""
    acc = hardware.get(p.accelerator)
    peak = acc.peak_flops_per_s(hardware.training_dtype(acc))
    return peak / acc.internals.level(p.level).bytes_per_s


def largest_square_in_l2(p):
    """Ex 2.5: side of the largest square bf16 matrix that fits in p.accelerator's L2."""
    l2 = hardware.get(p.accelerator).internals.level("L2").total_bytes
    return math.isqrt(int(l2 // dtype_bytes("bf16")))


def critical_intensity_growth(p):
    """Ex 2.6: critical intensity of p.new over that of p.old (each in its training dtype)."""
    new, old = hardware.get(p.new), hardware.get(p.old)
    return (new.critical_intensity(hardware.training_dtype(new))
            / old.critical_intensity(hardware.training_dtype(old)))


def wave_efficiency(p):
    """Ex 2.7: share of SM time doing useful work for p.n_tiles tiles on p.accelerator."""
    return hardware.wave_efficiency(p.n_tiles, hardware.get(p.accelerator).n_cores)


def decode_step_lower_bound(p):
    """Ex 2.8: seconds to read p.n_params bf16 weights split evenly over p.n_gpus GPUs."""
    return inference.weight_read_time(p.n_params, p.accelerator, p.n_gpus)


def tensor_core_peak(n_sm, tensor_cores_per_sm, flops_per_clock_per_tensor_core, clock_hz):
    """Ex 2.9 reference: chip peak from its parts."""
    return hardware.chip_flops_per_s(n_sm, tensor_cores_per_sm * flops_per_clock_per_tensor_core,
                                     clock_hz)


def sm_wave_efficiency(n_tiles, n_sm):
    """Ex 2.10 reference: wave quantization."""
    return hardware.wave_efficiency(n_tiles, n_sm)
