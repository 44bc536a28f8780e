"""Answer key for Chapter 1 (Rooflines) exercises."""

from __future__ import annotations

from ... import hardware, roofline
from ..grading.tables import with_messages


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


def _op_bytes(p):
    """Ex 1.6: HBM bytes of an op of p.flops FLOPs at intensity p.intensity (N = F / I)."""
    return p.flops / p.intensity


def upper_bound_time(p):
    """Ex 1.6: no-overlap upper bound (seconds) for an op of p.flops FLOPs at p.intensity."""
    acc = hardware.get(p.accelerator)
    tm = roofline.t_math(p.flops, acc.peak_flops_per_s("bf16"))
    tc = roofline.t_comms(_op_bytes(p), acc.hbm_bytes_per_s)
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


# ---- Common wrong methods (each must FAIL the exercise's tolerance; tests/test_wrong_methods.py) --

_GIB_PER_GB = 2**30 / 1e9  # reading a GB/s datasheet figure as GiB/s inflates it by 7.4%


def _acc(p):
    return hardware.get(p.accelerator)


def _t_math_sparse(p):  # the "with sparsity" headline peak, twice the dense one
    return roofline.matmul_flops(p.B, p.D, p.F) / (2 * _acc(p).peak_flops_per_s("bf16"))


def _t_math_one_flop_per_mac(p):  # B·D·F FLOPs: a multiply-add counted as one
    return p.B * p.D * p.F / _acc(p).peak_flops_per_s("bf16")


def _intensity_about_b(p):  # the B << D, F shortcut where the exact count was asked
    return float(p.B)


def _intensity_no_output(p):  # reads counted, the write of the output forgotten
    return roofline.matmul_flops(p.B, p.D, p.F) / (2 * (p.B * p.D + p.D * p.F))


def _intensity_fp32(p):  # 4 bytes per element
    return roofline.matmul_intensity(p.B, p.D, p.F, "fp32")


def _crit_gib(p):  # bandwidth read as GiB/s
    acc = _acc(p)
    return acc.peak_flops_per_s("bf16") / (acc.hbm_bytes_per_s * _GIB_PER_GB)


def _crit_sparse(p):
    return 2 * critical_batch(p)


def _int8_unchanged(p):  # int8 weights ignored (or the peak doubled as well): the bf16 value
    return critical_batch(p)


def _int8_gib(p):
    return _crit_gib(p) / 2


def _bound_sparse(p):  # 1.5 against the sparsity peak's ridge
    acc = _acc(p)
    return bool(roofline.matmul_intensity(p.B, p.D, p.F) > 2 * acc.critical_intensity("bf16"))


def _no_overlap_max(p):  # the perfect-overlap bound where no overlap was asked
    acc = _acc(p)
    return max(p.flops / acc.peak_flops_per_s("bf16"), _op_bytes(p) / acc.hbm_bytes_per_s)


def _no_overlap_sparse(p):
    acc = _acc(p)
    return p.flops / (2 * acc.peak_flops_per_s("bf16")) + _op_bytes(p) / acc.hbm_bytes_per_s


def _no_overlap_bytes_as_intensity_times_flops(p):  # N = F * I instead of F / I
    acc = _acc(p)
    return p.flops / acc.peak_flops_per_s("bf16") + p.flops * p.intensity / acc.hbm_bytes_per_s


def _net_no_dtype(p):  # a = 2 bytes per bf16 element forgotten
    return _acc(p).peak_flops_per_s("bf16") / p.link_bytes_per_s


def _net_both_ways(p):  # the link counted in both directions (2W)
    return network_critical_dim(p) / 2


def _net_gib(p):
    return network_critical_dim(p) / _GIB_PER_GB


WRONG_METHODS = {
    "1.1": {"sparsity peak (2x dense)": _t_math_sparse,
            "one FLOP per multiply-add": _t_math_one_flop_per_mac},
    "1.2": {"I ≈ B shortcut instead of the exact count": _intensity_about_b,
            "output write forgotten": _intensity_no_output,
            "fp32 bytes (4 per element)": _intensity_fp32},
    "1.3": {"GB/s read as GiB/s": _crit_gib, "sparsity peak (2x dense)": _crit_sparse},
    "1.4": {"bf16 critical batch (weight bytes ignored)": _int8_unchanged,
            "GB/s read as GiB/s": _int8_gib},
    "1.5": {"sparsity peak (2x dense)": _bound_sparse},
    "1.6": {"max (perfect overlap) instead of the sum": _no_overlap_max,
            "sparsity peak (2x dense)": _no_overlap_sparse,
            "bytes = FLOPs x intensity": _no_overlap_bytes_as_intensity_times_flops},
    "1.7": {"bytes per element forgotten (C / W)": _net_no_dtype,
            "link bandwidth counted both ways": _net_both_ways,
            "GB/s read as GiB/s": _net_gib},
}

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '1.1': ('How many FLOPs does the matmul do, and how fast can the chip do them?',
            'count a multiply and an add for each of the B·D·F products, then divide by the '
            "chip's dense bf16 peak"),
    '1.2': ('Intensity is FLOPs over bytes: which bytes move between HBM and the chip?',
            'count the FLOPs of the matmul and the bf16 bytes of both inputs and the output, '
            'every term kept'),
    '1.3': ("The critical batch is where the matmul's intensity reaches the chip's ridge.",
            'for B much smaller than D and F the intensity is about B; compare it with peak '
            'FLOP/s over HBM bytes/s'),
    '1.4': ('Which of FLOPs, bytes and peak does int8 storage change?',
            'recount only the weight bytes at 1 byte per element; keep the FLOPs and the bf16 peak'),
    '1.5': ("Compare two intensities: the matmul's and the chip's.",
            "compute the matmul's FLOPs over its exact bytes and the chip's peak over its HBM "
            'bandwidth'),
    '1.6': ('Without overlap, does the op wait for the slower of math and memory, or for both?',
            'get the bytes from the FLOPs and the intensity; the time is the math time plus the '
            'memory time'),
    '1.7': ("At the network ridge, the matmul's time equals the time to send its partial sums.",
            "write the math time of one chip's half and the time to send its bf16 [B, F] "
            'partial sum over the link; set them equal and solve for B'),
    '1.8': ('With perfect overlap, which of the two times decides?',
            'take the element-wise larger of the two times; it must work on numpy arrays too'),
    '1.9': ('Intensity: FLOPs per byte moved.',
            'count 2 FLOPs per product and the bf16 bytes of both inputs and the output'),
}


# ---- More listed mistakes, each with what the student reads (issue 21: every exercise lists at
# least its two most common slips, computed from the key's functions with the slip applied).

WRONG_METHODS["1.5"]["fp32 bytes (4 per element)"] = (
    lambda p: bool(_intensity_fp32(p) > _acc(p).critical_intensity("bf16")),
    "that counts 4 bytes per element: the matmul is bf16, 2 bytes per element")
WRONG_METHODS["1.8"] = {
    "the sum (no overlap)": (
        lambda flops, nbytes, flops_per_s, bytes_per_s: flops / flops_per_s + nbytes / bytes_per_s,
        "that adds the two times, as if nothing overlapped: the roofline time assumes perfect "
        "overlap, so the slower of the two decides"),
    "the math time only": (
        lambda flops, nbytes, flops_per_s, bytes_per_s: flops / flops_per_s + 0 * nbytes,
        "that is the math time alone: a memory-bound op takes its memory time"),
}
WRONG_METHODS["1.9"] = {
    "output write forgotten": (
        lambda B, D, F: 2 * B * D * F / (2 * (B * D + D * F)),
        "the output [B, F] is written to HBM too: count its bytes"),
    "fp32 bytes (4 per element)": (
        lambda B, D, F: 2 * B * D * F / (4 * (B * D + D * F + B * F)),
        "that counts 4 bytes per element: a bf16 value is 2 bytes"),
    "one FLOP per multiply-add": (
        lambda B, D, F: B * D * F / (2 * (B * D + D * F + B * F)),
        "a multiply-add is 2 FLOPs: count both"),
}

with_messages(WRONG_METHODS, {
    "1.1": {"sparsity peak (2x dense)": "the datasheet's \"with sparsity\" peak is twice the dense one: dense matmuls run at the dense peak",
            "one FLOP per multiply-add": "a multiply-add is 2 FLOPs: the matmul does 2·B·D·F"},
    "1.2": {"I ≈ B shortcut instead of the exact count":
            "I ≈ B holds only when B is much smaller than D and F: count every byte exactly",
            "output write forgotten": "the output [B, F] is written to HBM too: count its bytes",
            "fp32 bytes (4 per element)": "a bf16 element is 2 bytes, not 4"},
    "1.3": {"GB/s read as GiB/s": "HBM bandwidth is quoted in GB/s (1e9 bytes/s), not GiB/s",
            "sparsity peak (2x dense)": "the datasheet's \"with sparsity\" peak is twice the dense one: dense matmuls run at the dense peak"},
    "1.4": {"bf16 critical batch (weight bytes ignored)":
            "int8 weights halve the weight bytes read per FLOP, so the ridge moves",
            "GB/s read as GiB/s": "HBM bandwidth is quoted in GB/s (1e9 bytes/s), not GiB/s"},
    "1.5": {"sparsity peak (2x dense)": "the datasheet's \"with sparsity\" peak is twice the dense one: dense matmuls run at the dense peak"},
    "1.6": {"max (perfect overlap) instead of the sum":
            "that is the overlapped bound: without overlap the two times add",
            "sparsity peak (2x dense)": "the datasheet's \"with sparsity\" peak is twice the dense one: dense matmuls run at the dense peak",
            "bytes = FLOPs x intensity": "intensity is FLOPs per byte: bytes = FLOPs / intensity"},
    "1.7": {"bytes per element forgotten (C / W)":
            "the partial sums are bf16, 2 bytes per element: count them in bytes",
            "link bandwidth counted both ways": "a chip sends one way at the one-way bandwidth",
            "GB/s read as GiB/s": "link bandwidth is quoted in GB/s (1e9 bytes/s), not GiB/s"},
})
