"""Rooflines: when is an operation limited by compute, by memory, or by the network?

Notation (Chapter 1): an op does F FLOPs and moves N bytes. On a chip with peak C FLOP/s and
bandwidth W bytes/s,

    T_math = F / C,   T_comms = N / W,
    max(T_math, T_comms) <= T <= T_math + T_comms   (perfect overlap vs none),

and its arithmetic intensity I = F / N is compared with the chip's critical intensity C / W:
above it the op is compute-bound. Every function broadcasts over numpy arrays.

See: Chapter 1, "Rooflines".
"""

from __future__ import annotations

import numpy as np

from . import hardware
from .units import check_positive, dtype_bytes, scalar_or_array as _out


def arithmetic_intensity(flops, nbytes):
    """FLOPs per byte moved: I = F / N.

    >>> arithmetic_intensity(2 * 4096**3, 3 * 2 * 4096**2)
    1365.3333333333333
    """
    flops = check_positive("flops", flops, allow_zero=True)
    nbytes = check_positive("nbytes", nbytes)
    return flops / nbytes


def t_math(flops, flops_per_s):
    """Time to do ``flops`` at ``flops_per_s`` (seconds): T_math = F / C.

    >>> t_math(989.4e12, 989.4e12)
    1.0
    """
    flops = check_positive("flops", flops, allow_zero=True)
    return flops / check_positive("flops_per_s", flops_per_s)


def t_comms(nbytes, bytes_per_s):
    """Time to move ``nbytes`` at ``bytes_per_s`` (seconds): T_comms = N / W.

    >>> t_comms(3.35e12, 3.35e12)
    1.0
    """
    nbytes = check_positive("nbytes", nbytes, allow_zero=True)
    return nbytes / check_positive("bytes_per_s", bytes_per_s)


def time_bounds(t_math, t_comms):
    """(lower, upper) bounds on the runtime: (max, sum) of compute and communication time.

    The lower bound assumes perfect overlap, the upper bound none.

    >>> time_bounds(2.0, 1.0)
    (2.0, 3.0)
    """
    a = check_positive("t_math", t_math, allow_zero=True)
    b = check_positive("t_comms", t_comms, allow_zero=True)
    return _out(np.maximum(a, b)), _out(a + b)


def attainable_flops_per_s(intensity, accelerator, dtype="bf16"):
    """The roofline: min(C, I * W_hbm), the best FLOP/s an op of intensity I can reach.

    >>> attainable_flops_per_s(100.0, "h100") == 100 * 3.35e12
    True
    """
    acc = hardware.get(accelerator)
    i = check_positive("intensity", intensity)
    return _out(np.minimum(acc.peak_flops_per_s(dtype), i * acc.hbm_bytes_per_s))


def no_overlap_utilization(intensity, accelerator, dtype="bf16"):
    """Fraction of peak reached by work of intensity I when compute and memory never overlap.

    T_math / (T_math + T_comms) = (I / C) / (I / C + 1 / W) = I / (I + I*), with I* = C / W the
    critical intensity: exactly 1/2 at the ridge point, and lower on a chip whose compute grew
    faster than its bandwidth.

    >>> no_overlap_utilization(hardware.get("h100").critical_intensity(), "h100")
    0.5
    """
    acc = hardware.get(accelerator)
    i = check_positive("intensity", intensity)
    return _out(i / (i + acc.critical_intensity(dtype)))


def elementwise_intensity(n_inputs=1, flops_per_element=1.0, dtype="bf16"):
    """Arithmetic intensity of an elementwise op: reads ``n_inputs`` arrays, writes one.

    I = f / ((n_in + 1) * a), with f the FLOPs per output element and a the bytes per element.
    In bf16 a scale or an activation like ReLU (one input, about one FLOP) moves 4 bytes per
    element, a residual add (two inputs, one FLOP) 6: I = 1/4 and 1/6, about 0.2, three orders of
    magnitude under any chip's critical intensity. Broadcast operands that stay in cache (a norm's
    weight vector) are not counted.

    >>> elementwise_intensity(1, 1), round(elementwise_intensity(2, 1), 3)
    (0.25, 0.167)
    """
    n = check_positive("n_inputs", n_inputs)
    f = check_positive("flops_per_element", flops_per_element)
    return _out(f / ((n + 1) * dtype_bytes(dtype)))


def matmul_flops(B, D, F):
    """FLOPs of [B, D] x [D, F]: 2 B D F (one multiply and one add per term).

    >>> matmul_flops(1, 2, 3)
    12.0
    """
    B, D, F = (check_positive(n, v) for n, v in (("B", B), ("D", D), ("F", F)))
    return 2.0 * B * D * F


def matmul_bytes(B, D, F, dtype="bf16", *, weight_dtype=None):
    """HBM bytes of [B, D] x [D, F] -> [B, F]: read x and W, write y.

    N = a (B D + B F) + w D F, with a the activation bytes per element (``dtype``) and w the
    weight bytes per element (``weight_dtype``, default the same). Assumes each array crosses HBM
    exactly once (a perfectly tiled kernel).

    >>> matmul_bytes(1, 2, 3)
    22.0
    """
    B, D, F = (check_positive(n, v) for n, v in (("B", B), ("D", D), ("F", F)))
    a = dtype_bytes(dtype)
    w = dtype_bytes(weight_dtype) if weight_dtype is not None else a
    return a * (B * D + B * F) + w * D * F


def matmul_intensity(B, D, F, dtype="bf16", *, weight_dtype=None):
    """Arithmetic intensity of [B, D] x [D, F]; about B (for bf16, B << D, F).

    >>> round(matmul_intensity(256, 8192, 8192), 1)
    240.9
    """
    return matmul_flops(B, D, F) / matmul_bytes(B, D, F, dtype, weight_dtype=weight_dtype)


def matmul_time(B, D, F, accelerator, dtype="bf16", *, weight_dtype=None):
    """Roofline lower bound on the time of [B, D] x [D, F] on one chip: max(T_math, T_comms).

    >>> matmul_time(4096, 4096, 4096, "h100") == matmul_flops(4096, 4096, 4096) / 989.4e12
    True
    """
    acc = hardware.get(accelerator)
    tm = t_math(matmul_flops(B, D, F), acc.peak_flops_per_s(dtype))
    tc = t_comms(matmul_bytes(B, D, F, dtype, weight_dtype=weight_dtype), acc.hbm_bytes_per_s)
    return _out(np.maximum(tm, tc))


def critical_batch(accelerator, dtype="bf16", *, weight_dtype=None, D=None, F=None):
    """Batch above which [B, D] x [D, F] is compute-bound on ``accelerator``.

    With B << D, F the weights dominate the traffic, I = 2 B / w, and the op is compute-bound when
    I > C / W:  B_crit = (C / W) * w / 2. For bf16 that is C / W itself (≈240 on TPU v5e, ≈295 on
    H100); int8 weights with bf16 compute halve it. Given ``D`` and ``F`` the exact threshold
    (activations counted) is solved instead:
    B_crit = I* w D F / (2 D F - I* a (D + F)), infinite when no batch is large enough.

    >>> round(critical_batch("tpu-v5e")), round(critical_batch("h100"))
    (241, 295)
    >>> round(critical_batch("tpu-v5e", weight_dtype="int8"))
    120
    """
    acc = hardware.get(accelerator)
    i_star = acc.critical_intensity(dtype)
    a = dtype_bytes(dtype)
    w = dtype_bytes(weight_dtype) if weight_dtype is not None else a
    if D is None and F is None:
        return i_star * w / 2.0
    if D is None or F is None:
        raise ValueError(f"pass both D and F for the exact critical batch (got D={D}, F={F})")
    D = check_positive("D", D)
    F = check_positive("F", F)
    denom = 2.0 * D * F - i_star * a * (D + F)
    with np.errstate(divide="ignore"):
        return _out(np.where(denom > 0, i_star * w * D * F / np.where(denom > 0, denom, 1.0), np.inf))


def _check_chips(n, least=2):
    """n chips sharing a matmul: a whole number >= ``least``."""
    arr = np.asarray(n) if not isinstance(n, (str, bytes)) else np.asarray(np.nan)
    ok = arr.dtype.kind in "iuf" and np.all(np.isfinite(arr)) and np.all(arr >= least) and np.all(
        arr % 1 == 0)
    if isinstance(n, (bool, np.bool_)) or not ok:
        raise ValueError(f"n={n!r} chips is not allowed: the matmul is split over a whole number "
                         f"of chips >= {least}")
    return check_positive("n", n)


def sharded_matmul_times(B, D, F, n, accelerator, *, link_bytes_per_s=None, dtype="bf16"):
    """Network roofline of [B, D] x [D, F] with the contraction dimension D split over n chips.

    Each chip multiplies its [B, D/n] slice by its [D/n, F] slice (2 B D F / n FLOPs) and the
    partial sums [B, F] must then be summed across the chips; on a ring each chip sends and
    receives (n-1)/n * 2 * (B F a) bytes for that AllReduce (a = bytes per element). Returns
    (T_math, T_comms) in seconds; comms-bound when T_comms > T_math, that is when
    D < (n - 1) a C / W_link, independent of B and F (see :func:`network_critical_dim`).

    ``link_bytes_per_s`` defaults to the chip's one-way scale-up bandwidth (NVLink / ICI).

    >>> tm, tc = sharded_matmul_times(1024, 8192, 8192, 2, "tpu-v5e")
    >>> bool(tm > tc)
    True
    """
    acc = hardware.get(accelerator)
    n = _check_chips(n, least=1)
    bw = acc.link_bytes_per_s if link_bytes_per_s is None else link_bytes_per_s
    bw = check_positive("link_bytes_per_s", bw)
    tm = matmul_flops(B, D, F) / n / acc.peak_flops_per_s(dtype)
    comm_bytes = 2.0 * (n - 1) / n * B * F * dtype_bytes(dtype)
    return tm, comm_bytes / bw


def network_critical_dim(accelerator, n=2, *, link_bytes_per_s=None, dtype="bf16"):
    """Contraction size D above which a matmul split over ``n`` chips on D stays compute-bound.

    Setting T_math = T_comms in :func:`sharded_matmul_times`:
    2 B D F / (n C) = 2 (n-1)/n * a B F / W  =>  D* = (n - 1) a C / W.

    >>> round(network_critical_dim("tpu-v5e", link_bytes_per_s=45e9))
    8756
    """
    acc = hardware.get(accelerator)
    n = _check_chips(n)
    bw = acc.link_bytes_per_s if link_bytes_per_s is None else link_bytes_per_s
    bw = check_positive("link_bytes_per_s", bw)
    return (n - 1) * dtype_bytes(dtype) * acc.peak_flops_per_s(dtype) / bw
