"""The step-time estimator against measured iteration times: vTrain's A100 runs, published runs.

:func:`load` reads the measurements shipped in ``scaling_lib/data/vtrain`` (Megatron-DeepSpeed on
DGX A100 nodes, from the vTrain authors; see its README): one record per run.
:func:`predict` runs :func:`scaling_lib.parallelism.estimate.estimate_arrays` on every row
with the setting the README describes (full recomputation, 1F1B, the GPT-2 vocabulary padded
as Megatron pads it, nodes of 8 A100s with 800 Gb/s of InfiniBand per node, fp16, no fused
attention, gradients reduced after the backward pass). :func:`fit` fits the few constants of
:class:`~scaling_lib.parallelism.estimate.Calibration` on a training split (the even rows of
each file) and :func:`report` gives the error on every split: mean absolute percentage error
(MAPE) and the worst rows.

:func:`published_comparisons` puts the estimate beside what papers report for much larger runs
(Megatron-LM, Korthikanti et al. 2022, MT-NLG, Llama 3 405B).

See: the chapter "Validating the planner".
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
from dataclasses import dataclass
from importlib import resources

import numpy as np

from . import calibrate as _calibrate
from .parallelism import rules as _rules
from . import hardware, models, published
from .parallelism.estimate import DEFAULT_CALIBRATION, Calibration, estimate_arrays
from .units import _brief, check_choice

FILES = {"single": "ground_truth_single.csv", "multi": "ground_truth_multi_calibration.csv"}
_COLUMNS = {"# GPUs": "n_gpus", "global batch": "global_batch", "micro batch": "micro_batch",
            "hidden size": "D", "attention heads": "N", "# layers": "L",
            "sequence length": "T", "tensor parallelism": "tp", "data parallelism": "dp",
            "pipeline parallelism": "pp", "iteration time (ms)": "measured"}
GPT2_VOCAB = 50257  # the GPT-2 BPE vocabulary (Radford et al. 2019), Megatron's default
# Megatron pads the vocabulary to a multiple of 128 · tp (--make-vocab-size-divisible-by 128)
VOCAB_DIVISOR = 128
# DGX A100 nodes: 8 GPUs on NVSwitch; 4 x 200 Gb/s HDR InfiniBand per node for the vTrain runs
# (their configuration's 800 Gb/s per node), i.e. 100 GB/s one-way per node, 12.5 GB/s per GPU.
VTRAIN_NODE_GBPS = 800
VTRAIN_ACCELERATOR = "a100-80gb"  # 39.1B with tp·pp = 16 needs more than 40 GB per GPU
# How Megatron-DeepSpeed ran these jobs (the README): what estimate_arrays is told. The
# gradient all-reduce is taken as overlapped with the backward pass: in the single-node file the
# same per-GPU work takes the same time with dp = 2, 4 and 8 (within 0.5%), which an exposed
# all-reduce of the whole gradient (tens of ms for the 1.2B model) would not allow.
VTRAIN_OPTIONS = dict(dtype="fp16", flash_attention=False, causal=False,
                      overlap_grad_reduce=True)
# The calibration fitted on the even rows of both files (see fit); values rounded.
VTRAIN_CALIBRATION = DEFAULT_CALIBRATION
# The calibration fitted on whole models only (fit(by="model", max_evals=150): the 12- and
# 20-layer single-node models and the 3.6B multi-node one), so that report(..., by="model")
# judges it on models no fit has seen (the 16- and 24-layer ones, the 39.1B); values rounded.
# η_c goes to its bound (0.90) and the step overhead to ~0: with whole models out, the fit
# trades the two against each other, a sign that the rows cannot separate them.
VTRAIN_CALIBRATION_BY_MODEL = dataclasses.replace(
    DEFAULT_CALIBRATION, gemm_efficiency=0.90, hbm_efficiency=0.567, kernel_time=46.1e-6,
    nvlink_efficiency=0.60, nvlink_latency=34.1e-6, network_efficiency=0.60,
    network_latency=50e-6, step_overhead=3.4e-6)
# What other tools report on the same data: vTrain's MAPE on the single- and multi-node sets
# (Bang et al. 2024, as the data's README quotes it), and Calculon's mean error on Korthikanti
# et al.'s Table 5 (Isaev et al. 2023, SC'23).
VTRAIN_MAPE = {"single": 0.084, "multi": 0.147}
CALCULON_TABLE5_ERROR = 0.0365


def padded_vocab(V: int, tp: int) -> int:
    """Megatron's padded vocabulary: V rounded up to a multiple of 128 · tp.

    >>> padded_vocab(50257, 1), padded_vocab(50257, 8)
    (50304, 51200)
    """
    unit = VOCAB_DIVISOR * int(tp)
    return -(-int(V) // unit) * unit


def vtrain_cluster(n_gpus: int):
    """n_gpus A100s in nodes of 8 with 800 Gb/s of scale-out per node (100 GB/s one-way)."""
    per_node = min(int(n_gpus), 8)
    net = hardware.Link("InfiniBand HDR x4", VTRAIN_NODE_GBPS / 8 * 1e9 / 8, 5e-6)
    return hardware.cluster(VTRAIN_ACCELERATOR, int(n_gpus), devices_per_node=per_node,
                            inter_node=net)


def load(which: str = "single") -> dict:
    """The rows of one vTrain file as numpy arrays (``measured`` in seconds).

    >>> rows = load("multi")
    >>> len(rows["measured"]), int(rows["n_gpus"].max())
    (73, 512)
    """
    check_choice("which", which, tuple(FILES))
    text = resources.files("scaling_lib.data").joinpath("vtrain", FILES[which]).read_text()
    reader = csv.reader(text.splitlines())
    header = next(reader)
    data = np.array([[float(x) for x in row] for row in reader if row])
    out = {}
    for i, name in enumerate(header):
        if name in _COLUMNS:
            key = _COLUMNS[name]
            out[key] = data[:, i] / 1e3 if key == "measured" else data[:, i].astype(np.int64)
    out["row"] = np.arange(len(data))
    return out


def predict(rows: dict, calibration=None) -> np.ndarray:
    """Predicted iteration time (s) of every row, grouped by model, batch and GPU count so that
    each group is one vectorised call."""
    cal = VTRAIN_CALIBRATION if calibration is None else calibration
    n = len(rows["measured"])
    pred = np.empty(n)
    keys = np.stack([rows[k] for k in ("D", "N", "L", "T", "global_batch", "n_gpus", "tp")],
                    axis=1)
    uniq, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.ravel()
    for i, (D, N, L, T, B, n_gpus, tp) in enumerate(uniq):
        sel = np.flatnonzero(inv == i)
        cfg = models.gpt(int(L), int(D), int(N), V=padded_vocab(GPT2_VOCAB, tp), T_max=int(T))
        k = len(sel)
        plans = dict(dp=rows["dp"][sel], tp=rows["tp"][sel], pp=rows["pp"][sel],
                     cp=np.ones(k, int), ep=np.ones(k, int), zero=np.zeros(k, int),
                     micro_batch=rows["micro_batch"][sel], virtual_stages=np.ones(k, int),
                     schedule=np.full(k, "1f1b"), recompute=np.full(k, "full"),
                     sequence_parallel=np.zeros(k, bool))
        r = estimate_arrays(cfg, vtrain_cluster(n_gpus), plans, int(B), int(T),
                            calibration=cal, **VTRAIN_OPTIONS)
        pred[sel] = r["step_time"]
    return pred


def split(rows: dict, part: str = "train", by: str = "row") -> np.ndarray:
    """Row mask of a split: ``train``, ``test`` (held out) or ``all``.

    ``by="row"``: the even rows train, the odd ones are held out (how ``VTRAIN_CALIBRATION`` was
    fitted). Neighbouring rows are the same sweep (same model and GPUs, another batch or
    micro-batch), so a held-out row has a near twin in the fit and its error flatters the model.
    ``by="model"``: whole models are held out: the models of a file (D, N, L), sorted, alternate
    between train and test, so every row of a held-out model is unseen (single-node: the 16- and
    24-layer models; multi-node: the 39.1B model, fitted on the 3.6B one).

    >>> split(load("multi"), "test")[:4]
    array([False,  True, False,  True])
    >>> int(split(load("multi"), "test", by="model").sum())  # the 39.1B model's rows
    47
    """
    check_choice("part", part, ("train", "test", "all"))
    check_choice("by", by, ("row", "model"))
    idx = rows["row"]
    if by == "row":
        odd = idx % 2 == 1
    else:
        keys = np.stack([rows[k] for k in ("D", "N", "L")], axis=1)
        _, inv = np.unique(keys, axis=0, return_inverse=True)
        odd = inv.ravel() % 2 == 1
    return {"train": ~odd, "test": odd, "all": np.ones(len(idx), bool)}[part]


def ape(pred, measured) -> np.ndarray:
    """Absolute percentage error |pred - measured| / measured, as fractions."""
    return np.abs(np.asarray(pred) - np.asarray(measured)) / np.asarray(measured)


FIT_FIELDS = _calibrate.FIT_FIELDS
_BOUNDS = _calibrate.BOUNDS  # the fitted constants' physical bounds, sourced in calibrate.BOUNDS
ROBUST_SCALE = _calibrate.ROBUST_SCALE


def measurements(which: str = "single", part: str = "all", by: str = "row") -> list:
    """The rows of a vTrain file as :class:`scaling_lib.calibrate.Measurement` records: what
    :func:`predict` hands the estimator (full recomputation, 1F1B, the padded GPT-2 vocabulary,
    :func:`vtrain_cluster`), so the public fitter runs on them (with ``VTRAIN_OPTIONS``).

    >>> m = measurements("multi", "test")
    >>> len(m), m[0].plan.recompute, m[0].line
    (36, 'full', 1)
    """
    from .parallelism import ParallelPlan

    rows = load(which)
    sel = np.flatnonzero(split(rows, part, by))
    clusters, cfgs, out = {}, {}, []
    for i in sel:
        D, N, L, T, tp = (int(rows[k][i]) for k in ("D", "N", "L", "T", "tp"))
        n = int(rows["n_gpus"][i])
        key = (L, D, N, T, tp)
        if key not in cfgs:
            cfgs[key] = models.gpt(L, D, N, V=padded_vocab(GPT2_VOCAB, tp), T_max=T)
        if n not in clusters:
            clusters[n] = vtrain_cluster(n)
        plan = ParallelPlan(dp=int(rows["dp"][i]), tp=tp, pp=int(rows["pp"][i]),
                            micro_batch=int(rows["micro_batch"][i]), recompute="full",
                            schedule="1f1b", sequence_parallel=False)
        out.append(_calibrate.Measurement(cfgs[key], clusters[n], plan,
                                          int(rows["global_batch"][i]), T,
                                          float(rows["measured"][i]), "fp16", int(i),
                                          f"vtrain-{which}"))
    return out


def fit(calibration=None, fields=FIT_FIELDS, *, which=("single", "multi"), part="train",
        by="row", max_evals=400) -> Calibration:
    """Fit ``fields`` of the Calibration to the rows of ``part`` of the files ``which``:
    :func:`scaling_lib.calibrate.fit_measurements` (the one fitter) on :func:`measurements`,
    each file weighted equally whatever its number of rows, no cross-validation (the odd rows
    are the held-out set).

    Robust least squares on the log ratio predicted / measured (a 10% miss weighs the same on
    a 60 ms and a 20 s step; misses beyond ``ROBUST_SCALE`` count linearly, so a few rows with
    effects outside the model do not drag the constants), bounded (``calibrate.BOUNDS``).
    Takes a few hundred evaluations of the estimator: seconds to minutes.
    ``VTRAIN_CALIBRATION`` is the result for the defaults, rounded.
    """
    cal0 = VTRAIN_CALIBRATION if calibration is None else calibration
    if not isinstance(cal0, Calibration):
        raise ValueError(f"calibration={_brief(cal0)} must be a Calibration")
    unknown = sorted(set(fields) - set(_BOUNDS))
    if unknown:
        raise ValueError(f"cannot fit {unknown}; valid fields: {', '.join(_BOUNDS)}")
    rows, weights = [], []
    for w in which:
        m = measurements(w, part, by)
        rows += m
        weights += [1 / len(m)] * len(m)
    cal, _ = _calibrate.fit_measurements(rows, fields=tuple(fields), calibration=cal0,
                                         weights=weights, options=VTRAIN_OPTIONS,
                                         cross_validate=False, max_evals=max_evals)
    return cal


@dataclass(frozen=True)
class Report:
    """Errors of one file of measurements: MAPE on each split and the worst rows."""

    which: str
    mape_train: float
    mape_test: float
    mape_all: float
    rows: dict
    predicted: np.ndarray

    def worst(self, k: int = 5) -> list[dict]:
        """The k rows with the largest errors, each as a dict of its columns, predicted, error."""
        err = ape(self.predicted, self.rows["measured"])
        out = []
        for i in np.argsort(-err)[:k]:
            d = {key: (float(v[i]) if key == "measured" else int(v[i]))
                 for key, v in self.rows.items()}
            d.update(predicted=float(self.predicted[i]), error=float(
                (self.predicted[i] - self.rows["measured"][i]) / self.rows["measured"][i]))
            out.append(d)
        return out


def report(which: str = "single", calibration=None, by: str = "row") -> Report:
    """MAPE of the estimate on one vTrain file: training split, held-out split (``split``'s
    ``by``), all rows.

    >>> r = report("multi")
    >>> r.mape_test < 0.15
    True
    """
    rows = load(which)
    pred = predict(rows, calibration)
    err = ape(pred, rows["measured"])
    return Report(which, float(err[split(rows, "train", by)].mean()),
                  float(err[split(rows, "test", by)].mean()), float(err.mean()), rows, pred)


def ranking_accuracy(report, *, margin=0.2) -> tuple[float, int]:
    """How often the estimate orders two plans of the same job (same model, batch and GPU count)
    as the measurements do, over the pairs whose measured times differ by more than ``margin``
    (relative): (share ordered correctly, number of pairs). What a planner needs most.

    >>> acc, n = ranking_accuracy(report("multi"))
    >>> acc > 0.8 and n > 100
    True
    """
    rows, pred = report.rows, report.predicted
    keys = np.stack([rows[k] for k in ("D", "N", "L", "T", "global_batch", "n_gpus")], axis=1)
    _, inv = np.unique(keys, axis=0, return_inverse=True)
    inv = inv.ravel()
    good = total = 0
    for g in np.unique(inv):
        idx = np.flatnonzero(inv == g)
        m, p = rows["measured"][idx], pred[idx]
        i, j = np.triu_indices(len(idx), 1)
        far = np.abs(m[i] / m[j] - 1) > margin
        good += int(np.sum((np.sign(m[i] - m[j]) == np.sign(p[i] - p[j]))[far]))
        total += int(np.sum(far))
    return (good / total if total else float("nan")), total


# ---- published runs -----------------------------------------------------------------------------
# Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models"),
# Table 1 (models and layouts on Selene, DGX A100 80GB, s = 2,048, V = 51,200) and Table 5
# (end-to-end iteration time in seconds): full recomputation, and the paper's own method
# (selective recomputation with sequence parallelism). Columns: name, L, D, N, tp, pp, GPUs,
# global batch, seconds with full recomputation, seconds with selective + SP.
# The paper's micro-batch of 1 and the interleaving depth (v = 3 for 175B and 530B, 1 otherwise)
# are taken as Calculon's published reproduction of the table takes them (Isaev et al. 2023).
KORTHIKANTI_TABLE5 = (
    ("22B", 48, 6144, 64, 8, 1, 8, 4, 1.42, 1.10),
    ("175B", 96, 12288, 96, 8, 8, 64, 64, 18.13, 13.75),
    ("530B", 105, 20480, 128, 8, 35, 280, 280, 49.05, 37.83),
    ("1T", 128, 25600, 160, 8, 64, 512, 512, 94.42, 71.49),
)
_KORTHIKANTI_V = {"22B": 1, "175B": 3, "530B": 3, "1T": 1}
_KORTHIKANTI_MB = {"22B": 4}  # Calculon runs the 22B row as one micro-batch of 4
# Megatron-era runs: fp16, the T x T scores in HBM (no fused attention), full square.
MEGATRON_OPTIONS = dict(dtype="fp16", flash_attention=False, causal=False)


def _one(cfg, cluster, plan, B, T, cal, **opts):
    from .parallelism.estimate import estimate

    return estimate(cfg, cluster, plan, B, T, calibration=cal, **opts)


def best_unstated(cfg, cluster, plan, global_batch, T, calibration=None, *,
                  micro_batches=(1, 2, 4, 8), virtual_stages=(1,), recomputes=None, **options):
    """The fastest plan that fits among ``plan`` with the knobs a paper does not print (its
    micro-batch, interleaving depth and, if ``recomputes`` lists candidates, recomputation) set
    to each candidate: authors tune these, so the comparison takes the best, not a guess.
    Returns the StepEstimate.

    >>> from scaling_lib.parallelism import ParallelPlan
    >>> e = best_unstated("llama3-8b", hardware.cluster("h100", 8), ParallelPlan(dp=8), 64, 4096)
    >>> e.plan.micro_batch in (1, 2, 4, 8)
    True
    """
    from .parallelism import estimate

    best = None
    per_rank = global_batch // plan.dp
    layers_per_stage = -(-models.get(cfg).L // plan.pp)
    for mb, v, rec in itertools.product(micro_batches, virtual_stages,
                                        recomputes or (plan.recompute,)):
        if per_rank % mb or (v > 1 and (plan.pp == 1 or (per_rank // mb) % plan.pp
                                        or layers_per_stage % v)):
            continue
        p = plan.with_changes(micro_batch=mb, virtual_stages=v, recompute=rec,
                              schedule="interleaved" if v > 1 else plan.schedule)
        if _rules.broken(cfg, p, global_batch, T):  # a layout the frameworks cannot run
            continue
        e = estimate(cfg, cluster, p, global_batch, T, calibration=calibration, **options)
        if best is None or (e.fits, -e.step_time) > (best.fits, -best.step_time):
            best = e  # a plan that fits beats one that does not; then the faster
    if best is None:
        raise ValueError(f"no micro-batch in {micro_batches} divides {per_rank} sequences per "
                         "data-parallel rank")
    return best


def korthikanti_comparison(calibration=None) -> list[dict]:
    """Table 5 of Korthikanti et al. 2022 beside our estimate: 4 models x 2 recomputation modes.

    Each record: ``name``, ``mode`` ("full" or "selective+SP"), ``published`` and
    ``estimated`` seconds per iteration, ``error`` (estimated / published - 1).
    """
    from .parallelism import ParallelPlan

    cal = VTRAIN_CALIBRATION if calibration is None else calibration
    out = []
    for name, L, D, N, tp, pp, n, B, full_s, sel_s in KORTHIKANTI_TABLE5:
        cfg = models.gpt(L, D, N, V=51200, T_max=2048, name=f"korthikanti-{name}")
        cluster = hardware.cluster("a100-80gb", n)
        v = _KORTHIKANTI_V[name]
        mb = _KORTHIKANTI_MB.get(name, 1)
        for mode, published_s, rec, sp in (("full", full_s, "full", False),
                                           ("selective+SP", sel_s, "selective", True)):
            plan = ParallelPlan(dp=n // (tp * pp), tp=tp, pp=pp, micro_batch=mb,
                                virtual_stages=v, schedule="interleaved" if v > 1 else "1f1b",
                                recompute=rec, sequence_parallel=sp)
            e = _one(cfg, cluster, plan, B, 2048, cal, **MEGATRON_OPTIONS)
            out.append(dict(source="Korthikanti et al. 2022, Table 5", name=name, mode=mode,
                            quantity="step_time", published=published_s,
                            estimated=e.step_time, error=e.step_time / published_s - 1))
    return out


def recalibrate_gemm(records_fn, calibration=None, *, train=lambda r: True):
    """A Calibration whose η_c (``gemm_efficiency``) alone is refitted so that the comparisons
    ``records_fn(calibration)`` selected by ``train`` match on average (least squares on the log
    error, by the one fitter :func:`scaling_lib.calibrate.fit_constants`), every other constant
    kept: how a user adapts the estimator to a faster or slower
    software stack from a few measured steps. Returns (calibration, records with it).
    """
    cal0 = VTRAIN_CALIBRATION if calibration is None else calibration

    def chosen(cal):
        return [r for r in records_fn(cal) if train(r)]

    measured = np.array([r["published"] for r in chosen(cal0)], float)
    fitted = _calibrate.fit_constants(
        lambda cal: np.array([r["estimated"] for r in chosen(cal)], float), measured, cal0,
        ("gemm_efficiency",))
    cal = dataclasses.replace(cal0, gemm_efficiency=round(fitted.gemm_efficiency, 3))
    return cal, records_fn(cal)


KORTHIKANTI_RECALIBRATION_ROWS = ("22B", "175B")


def korthikanti_recalibrated(calibration=None):
    """Korthikanti et al.'s Table 5 after refitting η_c on the rows of its two smaller models
    (``KORTHIKANTI_RECALIBRATION_ROWS``, both recomputation modes): (calibration, records); the
    530B and 1T rows are held out, as a user would calibrate on small runs and plan big ones.

    >>> cal, recs = korthikanti_recalibrated()
    >>> cal.gemm_efficiency > VTRAIN_CALIBRATION.gemm_efficiency  # Megatron-LM on Selene is faster
    True
    """
    return recalibrate_gemm(korthikanti_comparison, calibration,
                            train=lambda r: r["name"] in KORTHIKANTI_RECALIBRATION_ROWS)


def published_comparisons(calibration=None) -> list[dict]:
    """Our estimate beside published figures, one record per run: ``source``, ``name``,
    ``quantity`` ("step_time" in s, or "mfu"), ``published``, ``estimated``, ``error``
    (estimated / published - 1).

    Korthikanti et al. 2022 Table 5 (iteration times); MT-NLG 530B (Smith et al. 2022,
    section 2.4: iteration times on 280, 350 and 420 DGX A100 nodes); Megatron-LM Table 1
    (Narayanan et al. 2021: the step time its reported FLOP/s per GPU implies, with the fastest
    micro-batch that fits, :func:`best_unstated`); Llama 3 405B Table 4 (BF16 MFU on 8K and 16K
    H100s; micro-batch and interleaving depth the fastest that fit); PaLM 540B (MFU on 6,144
    TPU v4, Chowdhery et al. 2022 Table 3).
    """
    from .parallelism import ParallelPlan

    if calibration is not None and not isinstance(calibration, Calibration):
        raise ValueError(f"calibration={_brief(calibration)} must be a Calibration")
    cal = VTRAIN_CALIBRATION if calibration is None else calibration
    out = korthikanti_comparison(cal)
    for name in published.names():
        r = published.get(name)
        if name.startswith("mt-nlg"):
            plan = ParallelPlan(dp=r.dp, tp=r.tp, pp=r.pp, recompute="full")
            e = _one(r.model, hardware.cluster(r.accelerator, r.n_devices), plan,
                     r.global_batch, r.T, cal, overlap_grad_reduce=False, **MEGATRON_OPTIONS)
            out.append(dict(source=r.source, name=name, quantity="step_time",
                            published=r.step_time, estimated=e.step_time,
                            error=e.step_time / r.step_time - 1))
        elif name.startswith("megatron-"):
            plan = ParallelPlan(dp=r.dp, tp=r.tp, pp=r.pp, recompute="full")
            e = best_unstated(r.model, hardware.cluster(r.accelerator, r.n_devices), plan,
                              r.global_batch, r.T, cal, overlap_grad_reduce=False,
                              **MEGATRON_OPTIONS)
            implied = published.implied_step_time(r)
            out.append(dict(source=r.source + " (step time implied by its TFLOP/s per GPU)",
                            name=name, quantity="step_time", published=implied,
                            estimated=e.step_time, error=e.step_time / implied - 1))
        elif name.startswith("llama3-405b"):
            # Meta's layout from Table 4 with sequence parallelism, sharded optimizer states
            # (ZeRO-1) and no recomputation; micro-batch and interleaving depth, which the
            # paper does not print, the fastest (best_unstated). By our memory model none of
            # these fits in 80 GB without recomputation (the activations of ~16 micro-batches
            # in flight on the first stage); the paper does not say how Meta saved memory.
            # Meta's 126 layers on 16 stages: the first and last stage one layer lighter
            # (section 3.3.2), i.e. 128 = 16 x 8 chunks with pp_layout "light_ends"
            plan = ParallelPlan(dp=r.dp, tp=r.tp, pp=r.pp, cp=r.cp, zero=1,
                                sequence_parallel=True, pp_layout="light_ends")
            e = best_unstated(r.model, hardware.cluster(r.accelerator, r.n_devices), plan,
                              r.global_batch, r.T, cal, micro_batches=(1, 2),
                              virtual_stages=(1, 2, 4, 8))
            out.append(dict(source=r.source, name=name, quantity="mfu", published=r.mfu,
                            estimated=e.mfu, error=e.mfu / r.mfu - 1,
                            memory_bytes=e.memory.total, fits=e.fits))
        elif name == "palm-540b":
            # 12-way model parallelism, weights sharded over the data-parallel ranks, one
            # micro-batch of global_batch / dp sequences per replica; two pods of 3,072 chips
            # (section 4); rematerialisation: PaLM's HFU / MFU = 57.8 / 46.2 = 1.25 is closest
            # to full recomputation's 4/3, so "full"
            from .hardware.clusters import torus_shape

            pod = r.n_devices // 2
            cluster = hardware.cluster(r.accelerator, r.n_devices, devices_per_node=pod,
                                       torus_shape=torus_shape(pod, 3))
            plan = ParallelPlan(dp=r.dp, tp=r.tp, zero=3, micro_batch=r.global_batch // r.dp,
                                recompute="full")
            e = _one(r.model, cluster, plan, r.global_batch, r.T, cal)
            out.append(dict(source=r.source, name=name, quantity="mfu", published=r.mfu,
                            estimated=e.mfu, error=e.mfu / r.mfu - 1))
    return out


# ---- published runs of other frameworks: shapes, clusters and stacks the fit never saw -----------
# scaling_lib/data/published_runs/runs.csv (its README: sources, conventions, cautions). The
# accelerator of each row by the name the source gives; the lower-power H100s of TorchTitan's
# Grand Teton hosts are H100s to the model (what calibration to that stack is for).
_RUN_GPUS = (("a100-sxm4-40gb", "a100-40gb"), ("a100-sxm-40gb", "a100-40gb"),
             ("a100", "a100-80gb"), ("ampere", "a100-80gb"), ("h100", "h100"))
# A family, one software stack: one framework's runs on one kind of GPU in one precision (the
# framework from the id's prefix; TorchTitan's three benchmark pages are one framework)
_RUN_FAMILY = {"tt": "TorchTitan", "dgxc": "NeMo (DGX Cloud benchmarks)",
               "dgxc-paxml": "PaxML (DGX Cloud benchmarks)",
               "dgxc-maxtext": "MaxText (DGX Cloud benchmarks)", "nemo2407": "NeMo 24.07",
               "mcore080": "Megatron-Core", "megascale": "MegaScale", "nemo": "NeMo long-sequence",
               "nemolauncher": "NeMo-Megatron-Launcher", "mbridge2511": "Megatron-Bridge",
               "nemotron4": "Nemotron-4 production"}
SMALL_RUN_GPUS = 64  # "a few small runs": at most 8 nodes of 8 GPUs


def _run_gpu(text: str) -> str:
    low = text.lower()
    for key, name in _RUN_GPUS:
        if key in low:
            return name
    raise ValueError(f"gpu {text!r} is none of the accelerators the runs use")


def published_runs() -> tuple[list[dict], dict]:
    """The published runs whose step time is known (``measured_step_s``, or the global batch's
    tokens over ``measured_tokens_per_s``) and whose layout the estimator can run, as records
    ``id``, ``family`` (framework, GPU and precision: one software stack), ``n_gpus``, ``measurement`` (a
    :class:`scaling_lib.calibrate.Measurement`); and {id: why skipped} for the others.

    >>> runs, skipped = published_runs()
    >>> len(runs) > 50 and all(r["measurement"].step_time > 0 for r in runs)
    True
    """
    text = resources.files("scaling_lib.data").joinpath("published_runs", "runs.csv").read_text()
    out, skipped = [], {}
    for r in csv.DictReader(text.splitlines()):
        rid = r["id"]
        try:
            B, T = int(r["global_batch_seqs"] or 0), int(r["seq_len"])
            if r["measured_step_s"]:
                step = float(r["measured_step_s"])
            elif r["measured_tokens_per_s"] and B:
                step = B * T / float(r["measured_tokens_per_s"])
            else:
                raise ValueError("no measured step time or tokens/s (MFU and TFLOP/s follow "
                                 "each source's own FLOP count)")
            gpu = _run_gpu(r["gpu"])
            per_node = int(r["gpus_per_node"] or 8)
            v = dict(layers=int(r["n_layers"]), hidden=int(r["d_model"]),
                     heads=int(r["n_heads"] or int(r["d_model"]) // 128),
                     kv_heads=int(r["n_kv_heads"] or 0) or None, ffn=int(r["d_ff"] or 0) or None,
                     vocab=int(r["vocab"]), glu=r["glu(0/1)"] == "1", gpu=gpu,
                     gpus=int(r["n_gpus"]), gpus_per_node=per_node,
                     inter_node_gbps=float(r["inter_node_gbps_per_gpu"]) * per_node
                     if r["inter_node_gbps_per_gpu"] else None,
                     tp=int(r["tp"] or 1), pp=int(r["pp"] or 1), cp=int(r["cp"] or 1),
                     ep=int(r["ep"] or 1), zero=int(r["zero_stage"] or 0),
                     micro_batch=int(r["micro_batch"] or 1),
                     virtual_stages=int(r["virtual_stages"] or 1),
                     recompute=r["recompute(none/selective/full)"] or None,
                     dtype="fp8" if "fp8" in r["precision"] else (r["precision"] or "bf16"),
                     global_batch=B, seq_len=T, step_time_s=step)
            if v["kv_heads"] and v["heads"] % v["kv_heads"]:
                raise ValueError(f"{v['kv_heads']} kv heads do not divide {v['heads']} heads")
            m = _calibrate.measurement(v)
        except ValueError as e:
            skipped[rid] = str(e)
            continue
        prefix = rid.split("-")[0]
        fam = _RUN_FAMILY.get("-".join(rid.split("-")[:2]), _RUN_FAMILY.get(prefix, rid))
        m = dataclasses.replace(m, label=rid)
        out.append(dict(id=rid, family=f"{fam}, {gpu}, {v['dtype']}", n_gpus=v["gpus"],
                        measurement=m))
    return out, skipped


def published_check(runs=None, calibration=None) -> dict:
    """The estimate against every published run with a known step time, by family: out of the
    box (``calibration``, default the library's) and after calibrating the family's own
    small runs (at most ``SMALL_RUN_GPUS`` GPUs) with :func:`scaling_lib.calibrate.fit_measurements`
    and predicting its larger runs, which the fit never saw. Returns {family: record} with
    ``n_runs``, ``n_small``, ``mape`` (all runs, out of the box), ``mape_large`` (the larger
    runs, out of the box), ``mape_large_calibrated`` (after; None without small runs),
    ``fitted`` (the constants the fit moved), ``errors`` (id -> signed error out of the box).
    """
    runs = published_runs()[0] if runs is None else runs
    cal0 = VTRAIN_CALIBRATION if calibration is None else calibration
    fams: dict = {}
    for r in runs:
        fams.setdefault(r["family"], []).append(r)
    out = {}
    for fam, rs in fams.items():
        ms = [r["measurement"] for r in rs]
        meas = np.array([m.step_time for m in ms])
        err = _calibrate.predict(ms, cal0) / meas - 1
        small = np.array([r["n_gpus"] <= SMALL_RUN_GPUS for r in rs])
        rec = dict(n_runs=len(rs), n_small=int(small.sum()), mape=float(np.mean(np.abs(err))),
                   mape_large=float(np.mean(np.abs(err[~small]))) if (~small).any() else None,
                   mape_large_calibrated=None, fitted={},
                   errors={r["id"]: float(e) for r, e in zip(rs, err)})
        if small.any() and (~small).any():
            cal, rep = _calibrate.fit_measurements([m for m, s in zip(ms, small) if s],
                                                   calibration=cal0, cross_validate=False)
            large = [m for m, s in zip(ms, small) if not s]
            e2 = _calibrate.predict(large, cal) / meas[~small] - 1
            rec.update(mape_large_calibrated=float(np.mean(np.abs(e2))),
                       fitted={f: (a, b) for f, a, b, _ in rep.moved})
        out[fam] = rec
    return out
