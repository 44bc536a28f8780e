"""Answer key for Chapter 18 (Validating the planner) exercises."""

from __future__ import annotations

import numpy as np

from ... import hardware, validation
from ...parallelism import pipeline_bubble_fraction
from ...parallelism.estimate import DEFAULT_CALIBRATION, matmul_time


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
