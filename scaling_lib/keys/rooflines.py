"""Answer key for Chapter 1 (Rooflines) exercises."""

from __future__ import annotations

from .. import hardware, roofline


def t_math_matmul(p):
    """Ex 1.1: seconds of compute for [B, D] x [D, F] in bf16 on p.accelerator."""
    acc = hardware.get(p.accelerator)
    return roofline.t_math(roofline.matmul_flops(p.B, p.D, p.F), acc.peak_flops_per_s("bf16"))


def matmul_intensity(p):
    """Ex 1.2: arithmetic intensity of [B, D] x [D, F] in bf16."""
    return roofline.matmul_intensity(p.B, p.D, p.F, "bf16")


def critical_batch(p):
    """Ex 1.3: bf16 critical batch of p.accelerator."""
    return roofline.critical_batch(p.accelerator, "bf16")


def critical_batch_int8_weights(p):
    """Ex 1.4: critical batch with int8 weights and bf16 compute."""
    return roofline.critical_batch(p.accelerator, "bf16", weight_dtype="int8")


def is_compute_bound(p):
    """Ex 1.5: whether [B, D] x [D, F] in bf16 is compute-bound on p.accelerator (exact bytes)."""
    acc = hardware.get(p.accelerator)
    return bool(roofline.matmul_intensity(p.B, p.D, p.F, "bf16") > acc.critical_intensity("bf16"))


def upper_bound_time(p):
    """Ex 1.6: no-overlap upper bound (seconds) for an op of p.flops FLOPs and p.nbytes bytes."""
    acc = hardware.get(p.accelerator)
    tm = roofline.t_math(p.flops, acc.peak_flops_per_s("bf16"))
    tc = roofline.t_comms(p.nbytes, acc.hbm_bytes_per_s)
    return roofline.time_bounds(tm, tc)[1]


def network_critical_dim(p):
    """Ex 1.7: smallest D keeping a 2-chip D-sharded matmul compute-bound over p.link_bytes_per_s."""
    return roofline.network_critical_dim(p.accelerator, 2, link_bytes_per_s=p.link_bytes_per_s)


def roofline_time(flops, nbytes, flops_per_s, bytes_per_s):
    """Ex 1.8 reference: the perfect-overlap (lower-bound) time of an op."""
    return roofline.time_bounds(roofline.t_math(flops, flops_per_s),
                                roofline.t_comms(nbytes, bytes_per_s))[0]


def bf16_matmul_intensity(B, D, F):
    """Ex 1.9 reference: intensity of a bf16 matmul."""
    return roofline.matmul_intensity(B, D, F, "bf16")
