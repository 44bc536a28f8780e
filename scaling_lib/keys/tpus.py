"""Answer key for Chapter 3 (TPUs) exercises."""

from __future__ import annotations

import math

from .. import hardware, inference
from ..units import dtype_bytes


def sampling_latency_lower_bound(p):
    """Ex 3.1: seconds to read p.n_params bf16 weights once, split over p.n_chips chips."""
    return inference.weight_read_time(p.n_params, p.accelerator, p.n_chips)


def pod_flops_per_s(p):
    """Ex 3.2: bf16 dense peak of the whole pod p.pod."""
    return hardware.get_cluster(p.pod).peak_flops_per_s


def pod_hbm_bytes(p):
    """Ex 3.3: HBM of the whole pod p.pod."""
    return hardware.get_cluster(p.pod).hbm_bytes


def pod_hosts(p):
    """Ex 3.4: CPU hosts in the pod p.pod."""
    return hardware.get_cluster(p.pod).n_hosts


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
