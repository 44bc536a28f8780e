"""Answer key for Chapter 2 (GPUs) exercises."""

from __future__ import annotations

import math

import numpy as np

from ... import hardware, inference
from ...units import dtype_bytes
from ..grading.tables import with_messages


def tensor_flops_per_clock_per_sm(p):
    """Ex 2.1: dense 16-bit tensor-core FLOPs per clock per SM of p.accelerator."""
    acc = hardware.get(p.accelerator)
    g = acc.internals
    return acc.peak_flops_per_s(hardware.training_dtype(acc)) / (g.n_sm * g.tensor_clock_hz)


def fp32_slowdown(p):
    """Ex 2.2: how many times slower a compute-bound matmul runs in FP32 than in 16 bits."""
    return hardware.tensor_core_speedup(p.accelerator, hardware.training_dtype(p.accelerator))


def tp_mlp_critical_width(p):
    """Ex 2.3: smallest MLP width F for which a Megatron MLP split over p.n GPUs of one node of
    p.accelerator hides its all-reduce: one matmul's J* (sharding.reduce_critical_dim on the
    NVLink switch), halved because the first matmul adds as many FLOPs with no communication."""
    from ... import sharding
    acc = hardware.get(p.accelerator)
    return float(sharding.reduce_critical_dim(p.n, acc.peak_flops_per_s("bf16"),
                                              acc.link_bytes_per_s, topology="switch")) / 2


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


GPU_COUNTS = (1, 2, 4, 8)  # Ex 2.8: tensor-parallel widths inside one 8-GPU server
HBM_RESERVE = 0.1  # Ex 2.8: share of each GPU's HBM kept free for the KV cache and activations


def fewest_gpus(p):
    """Ex 2.8: the fewest of 1, 2, 4, 8 GPUs whose HBM, less 10%, holds p.n_params bf16 weights.

    The draw keeps n_params small enough (<= 2.8e11) that 8 of the smallest GPU (80 GB) always do.
    """
    acc = hardware.get(p.accelerator)
    need = p.n_params * dtype_bytes("bf16")
    for n in GPU_COUNTS:
        if need <= (1 - HBM_RESERVE) * n * acc.hbm_bytes:
            return n
    raise ValueError(f"n_params={p.n_params:.3g} in bf16 does not fit on {GPU_COUNTS[-1]} "
                     f"{acc.name} GPUs with {HBM_RESERVE:.0%} of HBM kept free")


def decode_step_lower_bound(p):
    """Ex 2.8: seconds to read p.n_params bf16 weights split evenly over the fewest GPUs holding them."""
    return inference.weight_read_time(p.n_params, p.accelerator, fewest_gpus(p))


def tensor_core_peak(n_sm, tensor_cores_per_sm, flops_per_clock_per_tensor_core, clock_hz):
    """Ex 2.9 reference: chip peak from its parts."""
    return hardware.chip_flops_per_s(n_sm, tensor_cores_per_sm * flops_per_clock_per_tensor_core,
                                     clock_hz)


def sm_wave_efficiency(n_tiles, n_sm):
    """Ex 2.10 reference: wave quantization."""
    return hardware.wave_efficiency(n_tiles, n_sm)


# ---- Common wrong methods (each must FAIL the exercise's tolerance; tests/test_wrong_methods.py) --

_GIB_PER_GB = 2**30 / 1e9  # reading a GB/s datasheet figure as GiB/s inflates it by 7.4%


def _sparse(fn):
    """The same method with the 2:4-sparsity headline peak (twice the dense one)."""
    return lambda p: 2 * fn(p)


def _tc_boost_clock(p):  # the FP32 boost clock instead of the clock the tensor peak is quoted at
    acc = hardware.get(p.accelerator)
    g = acc.internals
    return acc.peak_flops_per_s(hardware.training_dtype(acc)) / (g.n_sm * g.clock_hz)


def _tc_per_tensor_core(p):  # per tensor core instead of per SM
    g = hardware.get(p.accelerator).internals
    return tensor_flops_per_clock_per_sm(p) / g.tensor_cores_per_sm


def _fp32_bytes_too(p):  # the memory-bound factor of 2 added to a compute-bound ratio
    return 2 * fp32_slowdown(p)


def _tp_one_matmul(p):  # the first matmul's FLOPs forgotten
    return 2 * tp_mlp_critical_width(p)


def _tp_n_not_n_minus_1(p):  # n in place of n - 1
    return tp_mlp_critical_width(p) * p.n / (p.n - 1)


def _tp_both_directions(p):  # NVLink's both-directions figure taken as W
    return tp_mlp_critical_width(p) / 2


def _level_fp32(p):  # the FP32-core peak instead of the 16-bit tensor peak
    acc = hardware.get(p.accelerator)
    return acc.peak_flops_per_s("fp32") / acc.internals.level(p.level).bytes_per_s


def _l2_fp32(p):  # 4 bytes per element
    return math.isqrt(int(hardware.get(p.accelerator).internals.level("L2").total_bytes // 4))


def _l2_mb(p):  # "50 MB" read as 50e6 bytes (the whitepapers' MB are MiB)
    l2 = hardware.get(p.accelerator).internals.level("L2").total_bytes
    return math.isqrt(int(l2 / 2**20 * 1e6 // dtype_bytes("bf16")))


def _growth_inverted(p):
    return 1 / critical_intensity_growth(p)


def _growth_peak_only(p):  # the growth of peak FLOP/s, bandwidth ignored
    new, old = hardware.get(p.new), hardware.get(p.old)
    return (new.peak_flops_per_s(hardware.training_dtype(new))
            / old.peak_flops_per_s(hardware.training_dtype(old)))


def _waves_fractional(p):  # n_tiles / n_SM, as if a wave could be partly paid for
    return p.n_tiles / hardware.get(p.accelerator).n_cores


def _decode_one_byte(p):  # one byte per bf16 parameter
    return decode_step_lower_bound(p) / 2


def _decode_bits(p):  # 16 bits counted as 16 bytes
    return 8 * decode_step_lower_bound(p)


def _decode_not_split(p):  # every GPU reads all the weights
    return inference.weight_read_time(p.n_params, p.accelerator, 1)


def _decode_all_eight(p):  # always 8 GPUs, however few would hold the model
    return inference.weight_read_time(p.n_params, p.accelerator, GPU_COUNTS[-1])


def _decode_gib(p):
    return decode_step_lower_bound(p) / _GIB_PER_GB


WRONG_METHODS = {
    "2.1": {"FP32 boost clock instead of the tensor clock": _tc_boost_clock,
            "sparsity peak (2x dense)": _sparse(tensor_flops_per_clock_per_sm),
            "per tensor core instead of per SM": _tc_per_tensor_core},
    "2.2": {"sparsity peak (2x dense)": _sparse(fp32_slowdown),
            "bytes factor of 2 added to a compute-bound ratio": _fp32_bytes_too},
    "2.3": {"only the second matmul's FLOPs (no halving)": _tp_one_matmul,
            "n instead of n - 1": _tp_n_not_n_minus_1,
            "NVLink's both-directions bandwidth as W": _tp_both_directions},
    "2.4": {"sparsity peak (2x dense)": _sparse(level_critical_intensity),
            "FP32 peak instead of the 16-bit tensor peak": _level_fp32},
    "2.5": {"fp32 bytes (4 per element)": _l2_fp32, "MiB read as MB": _l2_mb},
    "2.6": {"old / new instead of new / old": _growth_inverted,
            "peak growth only": _growth_peak_only},
    "2.7": {"n_tiles / n_SM (no whole waves)": _waves_fractional},
    "2.8": {"one byte per bf16 parameter": _decode_one_byte,
            "bits counted as bytes": _decode_bits,
            "weights not split over the GPUs": _decode_not_split,
            "always 8 GPUs": _decode_all_eight,
            "GB/s read as GiB/s": _decode_gib},
}

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '2.1': ('The peak is a product of SMs, clock and FLOPs per clock per SM.',
            'divide the peak by the number of SMs and by the clock in Hz'),
    '2.2': ('Which units run FP32 matmuls, and how fast are they compared with the tensor cores?',
            "take the ratio of the chip's 16-bit tensor-core peak to its FP32 peak"),
    '2.3': ('Which of the two matmuls communicates, and how many FLOPs do both do per GPU?',
            'set 4BDF/(nC) equal to the ring all-reduce time of the [B, D] output, '
            '2 (n-1)/n x 2BD / W, and solve for F'),
    '2.4': ("The ridge at each level: peak FLOP/s over that level's bandwidth.",
            "read each level's bandwidth from internals.level(name) and divide the peak by it"),
    '2.5': ('How many bf16 elements does L2 hold, and how does a square matrix grow with n?',
            'n² elements of 2 bytes must fit in L2: solve for n and round down'),
    '2.6': ('The ridge is peak over bandwidth; compare it on both chips.',
            "compute each chip's critical intensity in its own training dtype and take the ratio"),
    '2.7': ('The SMs work in waves: how full is the last one?',
            'count the waves the tiles need (rounding up) and compare the tiles with the slots '
            'those waves offer'),
    '2.8': ('Decoding reads every weight once per step: first how many GPUs hold them?',
            'find the fewest GPUs whose usable HBM holds the bf16 weights, then time one GPU '
            'reading its share at HBM bandwidth'),
    '2.9': ('The peak is the product of its parts.',
            'multiply the SMs, the tensor cores per SM, the FLOPs each does per clock and the '
            'clock'),
    '2.10': ('The last wave may be partly empty.',
             'count the waves (round up), then divide the tiles by the slots of all the waves'),
}


# ---- More listed mistakes, each with what the student reads (issue 21).

WRONG_METHODS["2.7"]["waves rounded down"] = (
    lambda p: p.n_tiles / (max(p.n_tiles // hardware.get(p.accelerator).n_cores, 1)
                           * hardware.get(p.accelerator).n_cores),
    "a partly filled last wave still takes a whole wave's time: round the waves up")
WRONG_METHODS["2.9"] = {
    "tensor cores per SM left out": (
        lambda n_sm, tensor_cores_per_sm, flops_per_clock_per_tensor_core, clock_hz: (
            n_sm * flops_per_clock_per_tensor_core * clock_hz + 0 * tensor_cores_per_sm),
        "each SM has several tensor cores: multiply by them too"),
    "clock in GHz": (
        lambda n_sm, tensor_cores_per_sm, flops_per_clock_per_tensor_core, clock_hz: (
            n_sm * tensor_cores_per_sm * flops_per_clock_per_tensor_core * clock_hz / 1e9),
        "the clock is given in Hz: a peak in FLOP/s needs cycles per second, not GHz"),
}
WRONG_METHODS["2.10"] = {
    "fractional waves (always 1)": (
        lambda n_tiles, n_sm: n_tiles / (n_tiles / n_sm * n_sm),
        "a wave is paid for whole: count the waves rounded up"),
    "waves rounded down": (
        lambda n_tiles, n_sm: n_tiles / (np.maximum(np.floor(n_tiles / n_sm), 1) * n_sm),
        "a partly filled last wave still runs: round the waves up, not down"),
}

_SPARSE = "the datasheet's \"with sparsity\" peak is twice the dense one: use the dense peak"
_GIB = "bandwidth is quoted in GB/s (1e9 bytes/s), not GiB/s"
with_messages(WRONG_METHODS, {
    "2.1": {"FP32 boost clock instead of the tensor clock":
            "the tensor-core peak is quoted at its own clock: use that one",
            "sparsity peak (2x dense)": _SPARSE,
            "per tensor core instead of per SM": "the question asks per SM: all its tensor cores"},
    "2.2": {"sparsity peak (2x dense)": _SPARSE,
            "bytes factor of 2 added to a compute-bound ratio":
            "a compute-bound model slows by the ratio of the peaks alone"},
    "2.3": {"only the second matmul's FLOPs (no halving)":
            "the first matmul runs in the same layer with no communication: its FLOPs hide the "
            "all-reduce too",
            "n instead of n - 1":
            "an all-reduce moves 2 (n-1)/n of the array per GPU: (n - 1), not n",
            "NVLink's both-directions bandwidth as W":
            "W is one way: NVIDIA's NVLink figure counts both directions"},
    "2.4": {"sparsity peak (2x dense)": _SPARSE,
            "FP32 peak instead of the 16-bit tensor peak": "matmuls run on the 16-bit tensor cores"},
    "2.5": {"fp32 bytes (4 per element)": "a bf16 element is 2 bytes",
            "MiB read as MB": "the whitepaper's MB of L2 are MiB (2^20 bytes)"},
    "2.6": {"old / new instead of new / old": "the growth is the new chip's ridge over the old",
            "peak growth only": "the ridge is peak over bandwidth: the bandwidth grew too"},
    "2.7": {"n_tiles / n_SM (no whole waves)": "a wave is paid for whole: round the waves up"},
    "2.8": {"one byte per bf16 parameter": "a bf16 weight is 2 bytes",
            "bits counted as bytes": "the answer is in bytes: 16 bits are 2 bytes",
            "weights not split over the GPUs": "each GPU reads only its share of the weights",
            "always 8 GPUs": "use the fewest GPUs that hold the weights",
            "GB/s read as GiB/s": _GIB},
})
