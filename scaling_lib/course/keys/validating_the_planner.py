"""Answer key for Chapter 18 (Validating the planner) exercises."""

from __future__ import annotations

import numpy as np

from ... import hardware, validation
from ...parallelism import pipeline_bubble_fraction
from ...parallelism.estimate import DEFAULT_CALIBRATION, matmul_time
from ..grading.tables import with_messages


def mape(predicted, measured):
    """Ex 18.1 (implement): mean absolute percentage error, as a fraction."""
    return float(np.mean(validation.ape(predicted, measured)))


def matmul_seconds(p):
    """Ex 18.2: the roofline-sum time of one [M, K] x [K, N] bf16 matmul on p.accelerator."""
    return float(matmul_time(p.M, p.K, p.N, p.accelerator))


def matmul_fraction_of_peak(p):
    """Ex 18.3: the share of the bf16 peak that matmul reaches: 2MNK / (t · C)."""
    t = matmul_seconds(p)
    return 2.0 * p.M * p.K * p.N / t / hardware.get(p.accelerator).peak_flops_per_s("bf16")


def layer_time_host_bound(p):
    """Ex 18.4: a layer of p.kernels kernels doing p.gpu_ms of GPU work, dispatched at the
    library's τ per kernel: max(GPU time, kernels · τ), in seconds."""
    return max(p.gpu_ms * 1e-3, p.kernels * DEFAULT_CALIBRATION.kernel_time)


def padded_vocab(V, tp):
    """Ex 18.5 (implement): Megatron's padded vocabulary."""
    return validation.padded_vocab(V, tp)


def pipelined_step(p):
    """Ex 18.6: step time of a 1F1B pipeline whose stages take p.t_mb seconds per micro-batch
    (forward and backward), m micro-batches, pp stages: busy time over (1 - bubble)."""
    frac = pipeline_bubble_fraction(p.pp, p.m)
    return p.m * p.t_mb / (1 - frac)


def multi_node_mape_by_tp(p):
    """Ex 18.7: MAPE of the stored calibration on the multi-node rows with tensor parallelism
    p.tp (all rows, calibration and held-out)."""
    r = validation.report("multi")
    sel = r.rows["tp"] == p.tp
    return mape(r.predicted[sel], r.rows["measured"][sel])


def korthikanti_estimate(p):
    """Ex 18.8: the estimated iteration time of Korthikanti et al.'s model p.model in p.mode."""
    for r in validation.korthikanti_comparison():
        if r["name"] == p.model and r["mode"] == p.mode:
            return r["estimated"]
    raise ValueError(f"no Table 5 row for {p.model!r} in mode {p.mode!r}")


# Methods students commonly use instead, each of which the tolerance must reject.
WRONG_METHODS = {
    "18.2": {"FLOPs at the efficient peak only (no bytes)":
             lambda p: 2.0 * p.M * p.K * p.N / (DEFAULT_CALIBRATION.gemm_efficiency *
                                                hardware.get(p.accelerator)
                                                .peak_flops_per_s("bf16"))},
    "18.3": {"η_c alone": lambda p: DEFAULT_CALIBRATION.gemm_efficiency},
    "18.4": {"sum instead of max":
             lambda p: p.gpu_ms * 1e-3 + p.kernels * DEFAULT_CALIBRATION.kernel_time},
    "18.6": {"no bubble": lambda p: p.m * p.t_mb,
             "step-relative bubble added to the busy time":
             lambda p: p.m * p.t_mb * (1 + (p.pp - 1) / (p.m + p.pp - 1))},
}

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '18.1': ('An error relative to what?',
             'divide each error by the measured value, take absolute values, average'),
    '18.2': ('The roofline sum: time for the math plus time for the bytes, each at reachable '
             'rates.',
             'FLOPs over the reachable peak plus bytes over the reachable HBM bandwidth'),
    '18.3': ('Achieved FLOP/s over the peak.',
             '2MNK over the measured time, divided by the peak'),
    '18.4': ('Host and GPU work at the same time.',
             'the slower of the two decides'),
    '18.5': ('Megatron pads the vocabulary to a multiple.',
             'round V up to the next multiple of 128·tp'),
    '18.6': ('The busy time is the step minus the bubble.',
             "the micro-batches' busy time is 1 - bubble of the step"),
    '18.7': ('Pick the rows of this tp, then average their errors.',
             "select the rows with r.rows['tp'] == tp, then the mean absolute relative error"),
    '18.8': ('The library lists the published rows beside its predictions.',
             'val.korthikanti_comparison() gives all eight with the published time'),
}


# ---- More listed mistakes, each with what the student reads (issue 21).

def _multi_node_errors(p):
    r = validation.report("multi")
    sel = r.rows["tp"] == p.tp
    return np.asarray(r.predicted[sel], float), np.asarray(r.rows["measured"][sel], float)


WRONG_METHODS["18.1"] = {
    "divided by the prediction": (
        lambda predicted, measured: float(np.mean(np.abs(
            np.asarray(predicted, float) - np.asarray(measured, float))
            / np.asarray(predicted, float))),
        "a percentage error is relative to the measured value, not the prediction"),
    "signed errors averaged": (
        lambda predicted, measured: float(np.mean(
            (np.asarray(predicted, float) - np.asarray(measured, float))
            / np.asarray(measured, float))),
        "take absolute values before averaging, or over- and under-estimates cancel"),
}
def _flops_time(p):
    """18.2: the FLOPs' time alone, at the efficient peak."""
    return 2.0 * p.M * p.K * p.N / (DEFAULT_CALIBRATION.gemm_efficiency
                                    * hardware.get(p.accelerator).peak_flops_per_s("bf16"))


WRONG_METHODS["18.2"]["the larger of the two terms"] = (
    lambda p: max(_flops_time(p), matmul_seconds(p) - _flops_time(p)),
    "the roofline sum adds the math and the memory times; the larger alone is the overlapped "
    "bound")
WRONG_METHODS["18.3"]["time over the peak time (inverted)"] = (
    lambda p: 1 / matmul_fraction_of_peak(p),
    "that is the measured time over the time at peak: the share of peak is the other way up")
WRONG_METHODS["18.4"]["the GPU work only"] = (
    lambda p: p.gpu_ms * 1e-3,
    "the host must launch every kernel too: the layer takes the slower of the GPU's work and "
    "the host's launches")
WRONG_METHODS["18.5"] = {
    "rounded to a multiple of 128 only": (
        lambda V, tp: -(-V // 128) * 128 + 0 * tp,
        "Megatron pads so that each of the tp shards is a multiple of 128: round up to a "
        "multiple of 128·tp"),
    "rounded down": (
        lambda V, tp: V // (128 * tp) * (128 * tp),
        "padding adds rows: round up, not down"),
}
WRONG_METHODS["18.7"] = {
    "signed errors averaged": (
        lambda p: float(np.mean((_multi_node_errors(p)[0] - _multi_node_errors(p)[1])
                                / _multi_node_errors(p)[1])),
        "take absolute values before averaging, or over- and under-estimates cancel"),
    "divided by the prediction": (
        lambda p: float(np.mean(np.abs(_multi_node_errors(p)[0] - _multi_node_errors(p)[1])
                                / _multi_node_errors(p)[0])),
        "a percentage error is relative to the measured value, not the prediction"),
}
WRONG_METHODS["18.8"] = {
    "milliseconds, not seconds": (
        lambda p: 1e3 * korthikanti_estimate(p),
        "the answer is in seconds per iteration"),
    "the other recomputation mode": (
        lambda p: next(r["estimated"] for r in validation.korthikanti_comparison()
                       if r["name"] == p.model and r["mode"] != p.mode),
        "that is the estimate for the other recomputation mode"),
}

with_messages(WRONG_METHODS, {
    "18.2": {"FLOPs at the efficient peak only (no bytes)": "the roofline sum adds the bytes' time"},
    "18.3": {"η_c alone": "bytes, waves and the K-loop lower it below η_c: compute it"},
    "18.4": {"sum instead of max": "host and GPU work at the same time: the slower decides"},
    "18.6": {"no bubble": "a pipelined step also idles in the ramp-up and drain",
             "step-relative bubble added to the busy time":
             "the busy time is the step's non-bubble share: divide by 1 - bubble"},
})
