"""Answer key for Chapter 3 (TPUs) exercises."""

from __future__ import annotations

import math

import numpy as np

from ... import hardware, inference
from ...units import dtype_bytes
from ..grading.tables import with_messages


def sampling_latency_lower_bound(p):
    """Ex 3.1: seconds to read p.n_params bf16 weights once, split over p.n_chips chips."""
    return inference.weight_read_time(p.n_params, p.accelerator, p.n_chips)


def dcn_critical_tokens(p, *, grad_bytes=2.0, flops_per_token=4.0, share=None):
    """Ex 3.2: tokens per chip per step above which the DCN all-reduce of the gradients across
    p.k slices of p.m chips of p.accelerator hides under the backward pass (4 FLOPs per parameter
    per token). After the in-slice reduce-scatter each chip holds 1/m of the bf16 gradients and
    all-reduces that over DCN (collectives.collective_bytes). The keyword arguments exist for the
    listed mistakes."""
    from ... import collectives
    share = 1.0 / p.m if share is None else share
    sent = collectives.collective_bytes("all-reduce", grad_bytes * share, p.k).sent_bytes
    dcn = hardware.cluster(p.accelerator, 2).inter_node.bytes_per_s
    return sent / dcn * hardware.get(p.accelerator).peak_flops_per_s("bf16") / flops_per_token


def systolic_tile_clocks(p):
    """Ex 3.3: clocks for p.n_rows rows to stream through one MXU of p.accelerator."""
    return hardware.systolic_clocks(p.n_rows, hardware.get(p.accelerator).internals.mxu_size)


def pcie_critical_batch(p):
    """Ex 3.4: tokens per step above which bf16 weights streamed from the host over PCIe gen
    p.gen x16 hide under the weight matmuls' compute on p.accelerator: I = B FLOPs per byte
    against C / W_pcie."""
    from ... import collectives
    pcie = collectives.pcie_bytes_per_s(p.gen, 16)
    return hardware.get(p.accelerator).peak_flops_per_s("bf16") / pcie


def slice_max_hops(p):
    """Ex 3.5: most ICI hops between two chips of a TPU v5e slice of shape (p.X, p.Y)."""
    shape = (p.X, p.Y)
    return hardware.ici_max_hops(shape, hardware.wraparound("tpu-v5e", shape))


def implied_clock_hz(p):
    """Ex 3.6: the clock at which p.accelerator's MXUs reach its bf16 peak."""
    acc = hardware.get(p.accelerator)
    return acc.internals.implied_clock_hz(acc.peak_flops_per_s("bf16"))


def mxu_useful_fraction(p):
    """Ex 3.7: useful share of MXU work for a [B, D] x [D, F] matmul on p.accelerator (B large)."""
    size = hardware.get(p.accelerator).internals.mxu_size
    return hardware.padding_efficiency(p.D, size) * hardware.padding_efficiency(p.F, size)


def largest_square_in_vmem(p):
    """Ex 3.8: side of the largest square matrix of p.dtype that fits in TPU v5e VMEM."""
    vmem = hardware.get("tpu-v5e").internals.vmem_bytes
    return math.isqrt(int(vmem // dtype_bytes(p.dtype)))


def dcn_over_ici(p):
    """Ex 3.9: how many times longer a chip takes to send bytes over DCN than over all its ICI."""
    c = hardware.cluster(p.accelerator, 2)
    return c.intra_node.bytes_per_s / c.inter_node.bytes_per_s


def max_hops(shape, wrap):
    """Ex 3.10 reference."""
    return hardware.ici_max_hops(shape, wrap)


def mxu_padding_efficiency(dim, mxu_size):
    """Ex 3.11 reference."""
    return hardware.padding_efficiency(dim, mxu_size)


# ---- common wrong methods (tests/test_wrong_methods.py checks each FAILS for every seed) --------

def _acc(p):
    return hardware.get(p.accelerator)


def _pad_one(dim, size):
    return hardware.padding_efficiency(dim, size)


WRONG_METHODS = {
    "3.1": {
        "1 byte per parameter (bf16 is 2)":
            lambda p: p.n_params / p.n_chips / _acc(p).hbm_bytes_per_s,
        "all weights on one chip (not divided among the chips)":
            lambda p: 2 * p.n_params / _acc(p).hbm_bytes_per_s,
    },
    "3.2": {
        "no in-slice reduce-scatter (the whole gradient over DCN)":
            lambda p: dcn_critical_tokens(p, share=1.0),
        "the whole step's 6 FLOPs per parameter instead of the backward's 4":
            lambda p: dcn_critical_tokens(p, flops_per_token=6.0),
        "fp32 gradients (4 bytes) instead of bf16":
            lambda p: dcn_critical_tokens(p, grad_bytes=4.0),
    },
    "3.3": {
        "one traversal of the grid (size - 1 clocks of fill, none of drain)":
            lambda p: p.n_rows + _acc(p).internals.mxu_size - 1,
        "no fill or drain (one clock per row)":
            lambda p: p.n_rows,
    },
    "3.4": {
        "GT/s taken as bytes/s (the 8 bits of a byte forgotten)":
            lambda p: pcie_critical_batch(p) / 8,
        "HBM's ridge instead of the PCIe link's":
            lambda p: _acc(p).critical_intensity("bf16"),
        "one byte per weight (bf16 is 2): I = 2B taken":
            lambda p: pcie_critical_batch(p) / 2,
    },
    "3.5": {
        "wraparound on every axis":
            lambda p: p.X // 2 + p.Y // 2,
        "no wraparound on any axis":
            lambda p: (p.X - 1) + (p.Y - 1),
    },
    "3.6": {
        "one FLOP per multiply-accumulate (it is 2)":
            lambda p: 2 * implied_clock_hz(p),
        "TensorCores forgotten":
            lambda p: _acc(p).internals.tensorcores * implied_clock_hz(p),
    },
    "3.7": {
        "padding on D only":
            lambda p: _pad_one(p.D, _acc(p).internals.mxu_size),
        "padding on F only":
            lambda p: _pad_one(p.F, _acc(p).internals.mxu_size),
        "a 128-wide MXU on every chip (v6e's is 256)":
            lambda p: _pad_one(p.D, 128) * _pad_one(p.F, 128),
    },
    "3.8": {
        "128 MB instead of 128 MiB (GB vs GiB)":
            lambda p: math.isqrt(int(hardware.get("tpu-v5e").internals.vmem_bytes / 2**20 * 1e6
                                     // dtype_bytes(p.dtype))),
        "bytes as elements (dtype size forgotten)":
            lambda p: math.isqrt(int(hardware.get("tpu-v5e").internals.vmem_bytes)),
    },
    "3.9": {
        "one ICI link instead of all of them":
            lambda p: hardware.cluster(p.accelerator, 2).intra_node.per_link_bytes_per_s
            / hardware.cluster(p.accelerator, 2).inter_node.bytes_per_s,
        "DCN in bits per second taken as bytes (8x)":
            lambda p: dcn_over_ici(p) / 8,
    },
}

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '3.1': ('Sampling one token reads every weight once: which bandwidth limits it?',
            "split the bf16 weights among the chips and divide one chip's share by its HBM "
            'bandwidth'),
    '3.2': ('How many gradient bytes does each chip send over DCN, and what compute hides them?',
            'after the reduce-scatter a chip all-reduces 2/m bytes per parameter over k slices '
            '(2 (k-1)/k of it sent); set that time equal to 4 FLOPs per parameter per token at '
            'the peak and solve for the tokens'),
    '3.3': ('When does the last row reach the far corner of the grid?',
            'row r reaches cell (k, j) at clock r + k + j: take the last row and the corner '
            'cell, then count clocks from 0'),
    '3.4': ('How many FLOPs does each streamed byte of weight buy, and what does the link need?',
            "a bf16 weight matmul does about B FLOPs per weight byte; compare it with the chip's "
            'peak over the PCIe bandwidth (lanes x rate x 128/130, in bits)'),
    '3.5': ('Count hops axis by axis: does the axis wrap around?',
            'on each axis the farthest chip is half the ring away with wraparound, the whole '
            'line without; v5e wraps only its axes of 16; add the axes'),
    '3.6': ('The peak is a product of MXUs, their size and the clock.',
            "divide the peak by the TensorCores, the MXUs per TensorCore, 2 FLOPs and the MXU's "
            'size squared'),
    '3.7': ('The MXU works on whole tiles: how much of the last tile is padding?',
            'for each padded dimension divide it by itself rounded up to a multiple of the MXU '
            'size; multiply the two'),
    '3.8': ('How many elements fit in VMEM, and how does a square block grow?',
            "n² elements of the dtype's size must fit: solve for n and round down"),
    '3.9': ('The same bytes over two links: times scale as one over bandwidth.',
            'take the ratio of the ICI bandwidth to the DCN bandwidth'),
    '3.10': ('Handle each axis on its own, then add.',
             'per axis: half the ring with wraparound, the whole line without; sum over the axes'),
    '3.11': ('Useful work over the padded work, per dimension.',
             'divide each dimension by itself rounded up to a multiple of the size; use np.ceil '
             'so arrays work'),
}


# ---- More listed mistakes, each with what the student reads (issue 21).

WRONG_METHODS["3.10"] = {
    "every axis a line (no wraparound)": (
        lambda shape, wrap: sum(a - 1 for a in shape) + 0 * len(wrap),
        "a wrapped axis is a ring: its farthest chip is half-way round, not at the far end"),
    "every axis wraps": (
        lambda shape, wrap: sum(a // 2 for a in shape) + 0 * len(wrap),
        "an axis without wraparound is a line: its ends are a - 1 hops apart"),
}
WRONG_METHODS["3.11"] = {
    "rounded down, not up": (
        lambda dim, mxu_size: dim / (np.maximum(np.floor(dim / mxu_size), 1) * mxu_size),
        "the MXU pads a partial tile to a whole one: round the tiles up"),
    "padded over useful (inverted)": (
        lambda dim, mxu_size: np.ceil(dim / mxu_size) * mxu_size / dim,
        "that is the padded size over the useful size: the efficiency is useful over padded"),
}

with_messages(WRONG_METHODS, {
    "3.1": {"1 byte per parameter (bf16 is 2)": "a bf16 weight is 2 bytes",
            "all weights on one chip (not divided among the chips)":
            "each chip reads only its share of the weights"},
    "3.2": {"no in-slice reduce-scatter (the whole gradient over DCN)":
            "the slice reduce-scatters over ICI first: each chip sends only its 1/m over DCN",
            "the whole step's 6 FLOPs per parameter instead of the backward's 4":
            "only the backward pass (4 FLOPs per parameter per token) runs while the gradients "
            "are reduced",
            "fp32 gradients (4 bytes) instead of bf16":
            "the gradients are reduced in bf16, 2 bytes each"},
    "3.3": {"one traversal of the grid (size - 1 clocks of fill, none of drain)":
            "a row must cross the grid both ways: right along its row and down its column, "
            "2 (size - 1) cells in all",
            "no fill or drain (one clock per row)":
            "the first result leaves only after the row crossed the grid: add the fill and "
            "drain"},
    "3.4": {"GT/s taken as bytes/s (the 8 bits of a byte forgotten)":
            "PCIe rates are transfers (bits) per second per lane: divide by 8 for bytes",
            "HBM's ridge instead of the PCIe link's":
            "the weights cross PCIe, not HBM: use the PCIe link's bandwidth",
            "one byte per weight (bf16 is 2): I = 2B taken":
            "a bf16 weight is 2 bytes, so the intensity is 2B FLOPs / 2 bytes = B"},
    "3.5": {"wraparound on every axis": "only some axes wrap: v5e wraps only its axes of 16",
            "no wraparound on any axis": "a full axis wraps around: half-way round is farthest"},
    "3.6": {"one FLOP per multiply-accumulate (it is 2)": "a multiply-accumulate is 2 FLOPs",
            "TensorCores forgotten": "each chip has its TensorCores, each with its MXUs"},
    "3.7": {"padding on D only": "both padded dimensions waste MXU work: multiply the two",
            "padding on F only": "both padded dimensions waste MXU work: multiply the two",
            "a 128-wide MXU on every chip (v6e's is 256)": "v6e's MXU is 256 wide"},
    "3.8": {"128 MB instead of 128 MiB (GB vs GiB)": "VMEM is 128 MiB (2^20-byte MiB)",
            "bytes as elements (dtype size forgotten)": "divide the bytes by the dtype's size"},
    "3.9": {"one ICI link instead of all of them": "a chip sends over all its ICI links at once",
            "DCN in bits per second taken as bytes (8x)": "DCN is quoted in bits/s: 8 bits a byte"},
})
