"""The one fitter of the estimator's constants, the choice of which to fit, and the report.

See: :mod:`scaling_lib.calibrate`.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from .. import hardware  # noqa: F401  (doctests)
from ..parallelism.estimate import DEFAULT_CALIBRATION, Calibration
from ..parallelism.plan import ParallelPlan  # noqa: F401  (doctests)
from ..units import _brief
from .measurements import Measurement, _Batches

# ---- the fitter ---------------------------------------------------------------------------------
FIT_FIELDS = ("gemm_efficiency", "hbm_efficiency", "kernel_time", "nvlink_efficiency",
              "nvlink_latency", "network_efficiency", "network_latency", "step_overhead")
# Bounds of each constant, physical limits and priors (lower, upper):
BOUNDS = {
    # a share of the dense datasheet peak: the largest cuBLAS matmul on an A100 (8192³, bf16)
    # reaches 258 of 312 TFLOP/s (83%) on random data, 295 (95%) only on all-zero inputs
    # that draw less power (H. He 2024, "Strangely, matrix multiplications on GPUs run faster
    # when given 'predictable' data", thonking.ai): 0.9 is the ceiling of real training data.
    # fp8 stacks and small or odd shapes reach far less: 0.2 leaves room for a slow stack
    "gemm_efficiency": (0.2, 0.9),
    # streaming kernels reach 80-93% of HBM bandwidth (Jia et al. 2018, "Dissecting the NVIDIA
    # Volta GPU architecture via microbenchmarking", table 3.1; the same holds on A100/H100);
    # unfused PyTorch element-wise chains far less
    "hbm_efficiency": (0.2, 1.0),
    # K½ of the output-tile model: tiles of K = 32-64 per stage (CUTLASS's default
    # threadblock shapes), a few dozen stages at most
    "gemm_k_half": (1.0, 2048.0),
    # NCCL's bus bandwidth on large messages: 60-95% of the line rate on NVLink and on
    # InfiniBand/RoCE (NVIDIA nccl-tests PERFORMANCE.md; Jeaugey, GTC 2023 "NCCL: scaling")
    "nvlink_efficiency": (0.6, 0.95), "network_efficiency": (0.6, 0.95),
    # one kernel's host dispatch: 0.1 µs (CUDA Graphs replay) to 1 ms (a slow Python loop);
    # eager PyTorch costs ~5-50 µs per op (PyTorch performance tuning guide)
    "kernel_time": (1e-7, 1e-3),
    # one step of a collective's schedule: NCCL's LL protocol ~1-2 µs inside a node, 5-20 µs
    # across InfiniBand (nccl-tests small-message all-reduce times); 50 µs allows congestion
    "nvlink_latency": (1e-6, 50e-6), "network_latency": (1e-6, 50e-6),
    # per-step host work outside the kernels: none, to a second (a slow data loader)
    "step_overhead": (0.0, 1.0),
}
# A row's miss beyond this log ratio counts linearly (soft-L1): rows with effects outside the
# model (allocator thrashing, a straggler) must not drag the physical constants.
ROBUST_SCALE = 0.05
# Pull towards the starting constants: moving one constant across its whole (log) range costs
# what one row missed by PRIOR_WEIGHT costs, so data decide whatever they can pin down and
# constants they cannot stay put.
PRIOR_WEIGHT = 0.1
# A constant is fitted only if some row's predicted time changes by at least this share when
# the constant doubles (d log t / d log x): otherwise the rows say nothing about it.
MIN_SENSITIVITY = 0.01
# Rows per fitted constant: a handful of rows fits a few constants, not all of them.
ROWS_PER_FIELD = 2
# Relative precision of the fitted constants (least squares' xtol).
FIT_TOLERANCE = 1e-3
# Cross-validation: leave one out up to this many rows, else this many interleaved folds.
LOO_MAX_ROWS = 30
# Choosing the constants: folds of the cross-validation, and the share by which the held-out
# error must fall for one more constant to be fitted (parsimony: physics, not rows).
SELECTION_FOLDS = 5
MIN_GAIN = 0.05


def _scales(fields):
    lo = np.array([BOUNDS[f][0] for f in fields])
    hi = np.array([BOUNDS[f][1] for f in fields])
    # work in units where each constant is of order one
    scale = np.where(hi <= 1e-3 + 1e-12, 1e-5, 1.0)  # times of µs in units of 10 µs
    scale = np.where(np.array(fields) == "step_overhead", 1e-2, scale)
    scale = np.where(np.array(fields) == "gemm_k_half", 100.0, scale)
    return lo, hi, scale


def _prior_residual(fields, x, x0):
    """Distance of each constant from its start, as a share of its allowed (log) range."""
    out = []
    for f, a, b in zip(fields, x, x0):
        lo, hi = BOUNDS[f]
        if lo > 0:
            out.append(math.log(a / b) / math.log(hi / lo))
        else:
            out.append((a - b) / (hi - lo))
    return PRIOR_WEIGHT * np.array(out)


def sensitivities(predict_fn, calibration, fields) -> dict:
    """d log t / d log x of each constant, largest over the rows (the log change of a row's
    predicted time when the constant changes by 1%, per 1%)."""
    base = np.log(predict_fn(calibration))
    out = {}
    for f in fields:
        x = getattr(calibration, f)
        lo, hi = BOUNDS[f]
        h = 0.01 if x > 0 else 0.0
        x1 = min(hi, x * (1 + h)) if x > 0 else min(hi, max(lo, 1e-3 * hi))
        if x1 == x:
            x1 = x * (1 - h) if x > 0 else x
        if x1 == x:
            out[f] = 0.0
            continue
        d = np.log(predict_fn(dataclasses.replace(calibration, **{f: x1}))) - base
        denom = math.log(x1 / x) if x > 0 else 1.0
        out[f] = float(np.max(np.abs(d)) / abs(denom))
    return out


def fit_constants(predict_fn, measured, calibration, fields, *, weights=None,
                  max_evals=200, initial=None) -> Calibration:
    """The one fitter: the constants ``fields`` of ``calibration`` that best explain
    ``measured`` (seconds) through ``predict_fn(calibration) -> predicted seconds``.

    Minimises Σ w_i ρ(log(t_i / m_i)) + Σ_f (PRIOR_WEIGHT · d_f)², ρ the soft-L1 loss with
    scale ``ROBUST_SCALE`` (quadratic for small misses, linear for large), w_i the row weights
    (default equal; they are normalised to average 1), d_f the distance of constant f from its
    start as a share of its log range; each constant inside ``BOUNDS``.
    """
    from scipy.optimize import least_squares

    fields = tuple(fields)
    measured = np.asarray(measured, float)
    if not fields:
        return calibration
    unknown = sorted(set(fields) - set(BOUNDS))
    if unknown:
        raise ValueError(f"cannot fit {unknown}; valid fields: {', '.join(BOUNDS)}")
    w = np.ones(len(measured)) if weights is None else np.asarray(weights, float)
    w = w * len(w) / w.sum()
    lo, hi, scale = _scales(fields)
    x_start = np.clip([getattr(calibration, f) for f in fields], lo, hi)
    init = calibration if initial is None else initial
    x0 = np.clip([getattr(init, f) for f in fields], lo, hi) / scale
    # bounds a hair inside so the start is strictly feasible even when it sits on a bound
    lb, ub = lo / scale, hi / scale
    x0 = np.clip(x0, lb + 1e-9 * (ub - lb), ub - 1e-9 * (ub - lb))
    x_prior = np.where(x_start > 0, x_start, lo + 1e-12)

    def cal_of(x):
        return dataclasses.replace(calibration, **dict(zip(fields, (x * scale).tolist())))

    def residuals(x):
        data = np.log(predict_fn(cal_of(x)) / measured)
        return np.concatenate([data, _prior_residual(fields, x * scale, x_prior)])

    wt = np.concatenate([w, np.full(len(fields), 1.0)])

    def loss(z):  # soft-L1 with per-residual weights
        t = 1 + z
        return np.stack([wt * 2 * (np.sqrt(t) - 1), wt / np.sqrt(t), -wt / 2 * t ** -1.5])

    # constants to 0.1% are plenty (FIT_TOLERANCE): a tighter fit only costs time
    res = least_squares(residuals, x0, bounds=(lb, ub), max_nfev=max_evals, x_scale="jac",
                        loss=loss, f_scale=ROBUST_SCALE, xtol=FIT_TOLERANCE,
                        ftol=FIT_TOLERANCE ** 2, diff_step=1e-3)
    return cal_of(res.x)


# ---- the report ---------------------------------------------------------------------------------
# Why a constant moves, by direction: (when it went down, when it went up).
WHY = {
    "gemm_efficiency": (
        "matmuls reach less of the peak than the library assumes (an older or untuned stack, "
        "small or odd shapes, fp8 scaling overheads, power or clock limits)",
        "matmuls run closer to the peak than the library assumes (a tuned stack, e.g. "
        "Megatron-LM with Transformer Engine)"),
    "hbm_efficiency": (
        "memory-bound kernels (norms, activations, the optimizer) stream slower: unfused "
        "kernels or a lower memory clock",
        "memory-bound kernels stream faster: fused kernels"),
    "kernel_time": (
        "each kernel costs less host time (CUDA Graphs, torch.compile fusing kernels)",
        "each kernel costs more host time: eager PyTorch, framework Python, small kernels the "
        "host cannot launch fast enough"),
    "nvlink_efficiency": ("collectives inside a node reach less of NVLink's line rate",
                          "collectives inside a node reach more of NVLink's line rate"),
    "nvlink_latency": ("small collectives inside a node are quicker per step",
                       "small collectives inside a node take longer per step"),
    "network_efficiency": (
        "collectives across nodes reach less of the NICs' line rate (fewer rails, no "
        "GPUDirect RDMA, congestion)",
        "collectives across nodes reach more of the NICs' line rate"),
    "network_latency": ("small collectives across nodes are quicker per step",
                        "small collectives across nodes take longer per step (switch hops, "
                        "congestion)"),
    "step_overhead": ("less host work per step outside the kernels",
                      "more host work per step outside the kernels (data loading, logging, "
                      "checkpoint hooks)"),
    "gemm_k_half": ("matmuls with a short inner dimension lose less efficiency",
                    "matmuls with a short inner dimension lose more efficiency"),
}
MOVED = 0.02  # a constant that changed by less than 2% is reported as unchanged


@dataclass(frozen=True)
class FitReport:
    """What a fit did: the rows, their predictions before (``predicted_start``) and after
    (``predicted``) and held out (``predicted_held_out``: each row predicted by a fit without
    it, NaN when not cross-validated), the constants fitted and those kept with the reason."""

    rows: tuple
    start: Calibration
    calibration: Calibration
    fitted: tuple
    kept: dict
    predicted_start: np.ndarray
    predicted: np.ndarray
    predicted_held_out: np.ndarray
    folds: int = 0
    measured: np.ndarray = field(default=None)

    def __post_init__(self):
        if self.measured is None:
            object.__setattr__(self, "measured",
                               np.array([r.step_time for r in self.rows], float))

    def errors(self, which="fitted") -> np.ndarray:
        """Signed relative error of each row: ``start``, ``fitted`` or ``held_out``."""
        p = {"start": self.predicted_start, "fitted": self.predicted,
             "held_out": self.predicted_held_out}[which]
        return p / self.measured - 1

    def mape(self, which="fitted") -> float:
        """Mean absolute percentage error (a fraction) of ``start``, ``fitted`` or
        ``held_out`` predictions."""
        return float(np.mean(np.abs(self.errors(which))))

    @property
    def moved(self) -> list[tuple]:
        """(constant, start, fitted, sentence) of each constant that moved by more than 2%."""
        out = []
        for f in self.fitted:
            a, b = getattr(self.start, f), getattr(self.calibration, f)
            if (a == 0 and b == 0) or (a and abs(b / a - 1) <= MOVED):
                continue
            out.append((f, a, b, WHY[f][int(b > a)]))
        return out

    def to_dict(self) -> dict:
        """A JSON-ready summary (no arrays of objects)."""
        held = self.folds > 0
        return {"rows": len(self.rows), "fitted": list(self.fitted), "kept": self.kept,
                "mape": {"start": self.mape("start"), "fitted": self.mape("fitted"),
                         "held_out": self.mape("held_out") if held else None},
                "cross_validation": ("leave-one-out" if self.folds == len(self.rows)
                                     else f"{self.folds}-fold") if held else None,
                "moved": [{"constant": f, "from": a, "to": b, "why": s}
                          for f, a, b, s in self.moved],
                "per_row": [{"line": r.line, "measured_s": r.step_time, "start_s": float(s),
                             "fitted_s": float(p),
                             "held_out_s": float(h) if held else None}
                            for r, s, p, h in zip(self.rows, self.predicted_start,
                                                  self.predicted, self.predicted_held_out)]}


def _folds(n: int, k: int) -> list[np.ndarray]:
    """Masks of k interleaved folds of n rows (row i in fold i mod k)."""
    idx = np.arange(n)
    return [idx % k == j for j in range(k)]


def _cross_predict(rows, measured, cal0, fields, weights, options, k, max_evals, initial=None):
    """Each row predicted by a fit of ``fields`` on the rows outside its fold (each fit
    starting its search from ``initial``, the fit on all rows, which it is close to)."""
    held = np.full(len(rows), np.nan)
    for out in _folds(len(rows), k):
        train = [r for r, o in zip(rows, out) if not o]
        wk = None if weights is None else weights[~out]
        ck = fit_constants(_Batches(train, options), measured[~out], cal0, fields, weights=wk,
                           max_evals=max_evals, initial=initial)
        held[out] = _Batches([r for r, o in zip(rows, out) if o], options)(ck)
    return held


def _at_bound(cal, fields, start) -> list:
    """The fitted constants that moved onto (within 1% of the log range of) a bound."""
    out = []
    for f in fields:
        lo, hi = BOUNDS[f]
        x = getattr(cal, f)
        if math.isclose(x, getattr(start, f), rel_tol=1e-3):
            continue  # did not move (it may start on a bound: the default fit put it there)
        if lo > 0:
            near = min(math.log(x / lo), math.log(hi / x)) <= 0.01 * math.log(hi / lo)
        else:
            near = min(x - lo, hi - x) <= 0.01 * (hi - lo)
        if near:
            out.append((f, lo if abs(x - lo) < abs(x - hi) else hi))
    return out


def choose_fields(rows, calibration=None, fields=FIT_FIELDS, *, weights=None, options=None,
                  max_evals=200) -> tuple[tuple, dict]:
    """(constants to fit, {constant kept at its start: why}), by forward selection.

    Candidates: the constants some row depends on (``MIN_SENSITIVITY``), the most influential
    first, at most one per ``ROWS_PER_FIELD`` rows. Each is added only if (1) with it the
    cross-validated error (``SELECTION_FOLDS`` interleaved folds: rows predicted by fits that
    did not see them) falls by at least ``MIN_GAIN`` of its value, and (2) no fitted constant
    ends on a physical bound: a constant pushed to its limit is standing in for an effect the
    model lacks, and would carry that error to other shapes and scales.
    """
    rows = tuple(rows)
    cal0 = DEFAULT_CALIBRATION if calibration is None else calibration
    measured = np.array([r.step_time for r in rows], float)
    w = None if weights is None else np.asarray(weights, float)
    batches = _Batches(rows, options)
    sens = sensitivities(batches, cal0, fields)
    kept, live = {}, []
    for f in fields:
        if sens[f] < MIN_SENSITIVITY:
            kept[f] = "no measured run depends on it"
        else:
            live.append(f)
    live.sort(key=lambda f: -sens[f])
    cap = max(1, len(rows) // ROWS_PER_FIELD)
    for f in live[cap:]:
        kept[f] = f"too few rows to fit it too ({len(rows)} rows fit at most {cap} constants)"
    k = min(len(rows), SELECTION_FOLDS)
    if k < 2:
        return tuple(live[:1]), kept
    wts = np.ones(len(rows)) if w is None else w / w.mean()

    def cv_error(fs, full=None):
        if not fs:
            return float(np.average(np.abs(batches(cal0) / measured - 1), weights=wts))
        held = _cross_predict(rows, measured, cal0, fs, w, options, k, max_evals, full)
        return float(np.average(np.abs(held / measured - 1), weights=wts))

    chosen: list = []
    best = cv_error(chosen)
    for f in live[:cap]:
        trial = chosen + [f]
        full = fit_constants(batches, measured, cal0, trial, weights=w, max_evals=max_evals)
        pinned = _at_bound(full, trial, cal0)
        if pinned:
            g, b = pinned[0]
            kept[f] = (f"fitting it pushed {g} to its bound {b:g}: the runs ask for more than "
                       "physics allows, a sign of an effect the model lacks")
            continue
        err = cv_error(trial, full)
        if err <= best * (1 - MIN_GAIN):
            chosen, best = trial, err
        else:
            kept[f] = (f"fitting it too did not lower the held-out error by {MIN_GAIN:.0%} "
                       f"({best:.1%} -> {err:.1%})")
    return tuple(chosen), kept


def fit_measurements(rows, *, fields=None, calibration=None, weights=None, options=None,
                     cross_validate=True, max_evals=200):
    """Fit the Calibration to measured runs: returns (Calibration, FitReport).

    ``rows``: Measurements (:func:`load_measurements`). ``fields``: the constants to fit
    (default: those of ``FIT_FIELDS`` the rows depend on, at most one per ``ROWS_PER_FIELD``
    rows, the most influential first; :func:`choose_fields`). ``calibration``: where to start
    (default: the library's). ``weights``: per row (default equal). ``options`` go to
    ``estimate_arrays`` for every row. ``cross_validate``: leave each row out in turn (or 10
    interleaved folds above ``LOO_MAX_ROWS`` rows), refit and predict it: the held-out error.

    >>> from scaling_lib.parallelism.estimate import estimate
    >>> c = hardware.cluster("a100-80gb", 8)
    >>> true = dataclasses.replace(DEFAULT_CALIBRATION, gemm_efficiency=0.6)
    >>> rows = [Measurement("llama3-8b", c, ParallelPlan(dp=8 // tp, tp=tp, zero=1,
    ...                     recompute="full"), 32, 2048,
    ...                     estimate("llama3-8b", c, ParallelPlan(dp=8 // tp, tp=tp, zero=1,
    ...                              recompute="full"), 32, 2048, calibration=true).step_time)
    ...         for tp in (1, 2, 4, 8)]
    >>> cal, rep = fit_measurements(rows, fields=("gemm_efficiency",), cross_validate=False)
    >>> round(cal.gemm_efficiency, 3)
    0.6
    """
    rows = tuple(rows)
    if not rows or not all(isinstance(r, Measurement) for r in rows):
        raise ValueError(f"rows={_brief(rows)} must be a non-empty list of Measurements "
                         "(load_measurements reads them from a CSV)")
    cal0 = DEFAULT_CALIBRATION if calibration is None else calibration
    if not isinstance(cal0, Calibration):
        raise ValueError(f"calibration={_brief(cal0)} must be a Calibration")
    measured = np.array([r.step_time for r in rows], float)
    w = None if weights is None else np.asarray(weights, float)
    if w is not None and (w.shape != measured.shape or not np.all(w > 0)):
        raise ValueError(f"weights must be {len(rows)} positive numbers, one per row")
    batches = _Batches(rows, options)
    if fields is None:
        fields, kept = choose_fields(rows, cal0, weights=w, options=options,
                                     max_evals=max_evals)
    else:
        fields = tuple(fields)
        unknown = sorted(set(fields) - set(BOUNDS))
        if unknown:
            raise ValueError(f"cannot fit {unknown}; valid fields: {', '.join(BOUNDS)}")
        kept = {f: "not asked to fit it" for f in FIT_FIELDS if f not in fields}
    cal = fit_constants(batches, measured, cal0, fields, weights=w, max_evals=max_evals)
    held = np.full(len(rows), np.nan)
    folds = 0
    if cross_validate and len(rows) > 1 and fields:
        folds = len(rows) if len(rows) <= LOO_MAX_ROWS else 10
        held = _cross_predict(rows, measured, cal0, fields, w, options, folds, max_evals, cal)
    rep = FitReport(rows, cal0, cal, fields, kept, batches(cal0), batches(cal), held, folds,
                    measured)
    return cal, rep
