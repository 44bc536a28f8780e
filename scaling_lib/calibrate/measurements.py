"""Measured runs: the CSV a reader writes, one :class:`Measurement` per row, and their
predicted step times (grouped so each model, cluster and batch is one vectorised estimate).

See: :mod:`scaling_lib.calibrate`.
"""

from __future__ import annotations

import csv
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .. import hardware, models
from ..hardware.clusters import Link
from ..parallelism.estimate import DEFAULT_CALIBRATION, estimate_arrays, plan_arrays
from ..parallelism.plan import RECOMPUTE, SCHEDULES, ParallelPlan

# ---- the CSV ------------------------------------------------------------------------------------
MODEL_COLUMNS = ("model", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "head_dim",
                 "glu", "tied_embeddings")
CLUSTER_COLUMNS = ("gpu", "gpus", "gpus_per_node", "inter_node_gbps")
PLAN_COLUMNS = ("tp", "pp", "dp", "cp", "ep", "zero", "micro_batch", "virtual_stages",
                "schedule", "recompute", "sequence_parallel")
WORKLOAD_COLUMNS = ("global_batch", "seq_len", "dtype")
MEASURED_COLUMN = "step_time_s"
COLUMNS = MODEL_COLUMNS + CLUSTER_COLUMNS + PLAN_COLUMNS + WORKLOAD_COLUMNS + (MEASURED_COLUMN,)
REQUIRED = ("gpu", "gpus", "global_batch", "seq_len", MEASURED_COLUMN)
_INTS = {"layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "head_dim", "gpus",
         "gpus_per_node", "tp", "pp", "dp", "cp", "ep", "micro_batch", "virtual_stages",
         "global_batch", "seq_len"}
_BOOLS = {"glu", "tied_embeddings", "sequence_parallel"}
_FLOATS = {"inter_node_gbps", MEASURED_COLUMN}
DTYPES = ("bf16", "fp16", "fp8")  # the training precisions the estimator times
GPT_VOCAB = 51_200  # Megatron-LM's padded GPT-2 vocabulary (Narayanan et al. 2021, Table 1)
_TRUE, _FALSE = ("1", "true", "yes"), ("0", "false", "no")


def _csv_name(name, value) -> str:
    return f"{name}={value}"


def _parse(name: str, text: str, spell=_csv_name):
    """One CSV cell as the type of its column (ValueError naming the rule)."""
    text = text.strip()
    if name in _BOOLS:
        if text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
        raise ValueError(f"{spell(name, repr(text))} is a switch; write 0/1 or true/false")
    if name in _INTS:
        try:
            x = float(text)
        except ValueError:
            raise ValueError(f"{spell(name, repr(text))} must be a whole number") from None
        if not math.isfinite(x) or x != int(x) or x < (0 if name == "zero" else 1):
            raise ValueError(f"{spell(name, repr(text))} must be a whole number >= 1")
        return int(x)
    if name == "zero":
        if text not in ("0", "1", "2", "3"):
            raise ValueError(f"{spell(name, repr(text))} is not a ZeRO stage; choose one of: "
                             "0, 1, 2, 3")
        return int(text)
    if name in _FLOATS:
        try:
            x = float(text)
        except ValueError:
            raise ValueError(f"{spell(name, repr(text))} must be a number") from None
        if not 0 < x < math.inf:
            raise ValueError(f"{spell(name, repr(text))} must be a positive number")
        return x
    return text


# ---- a run: model, cluster, plan ----------------------------------------------------------------
def build_model(v: dict, spell=_csv_name):
    """The model of ``model`` (a preset) or of ``layers, hidden, heads`` (a custom GPT-style
    model: GeLU MLP with F = 4·hidden, vocabulary 51,200 unless ``ffn``, ``vocab``, ``kv_heads``,
    ``head_dim``, ``glu``, ``tied_embeddings`` say otherwise). ``v`` maps the column (or flag)
    names to values, None where not given; ``spell(name, value)`` writes a name in errors.

    >>> build_model({"layers": 24, "hidden": 2048, "heads": 16}).F
    8192
    """
    custom = [f for f in ("layers", "hidden", "heads", "ffn", "kv_heads", "head_dim", "vocab")
              if v.get(f) is not None]
    if v.get("model") is not None:
        if custom or v.get("glu") or v.get("tied_embeddings"):
            raise ValueError(f"give {spell('model', 'NAME')} or a custom model (layers, hidden, "
                             f"heads, ...), not both (got {', '.join(custom) or 'glu'} too)")
        try:
            return models.get(v["model"])
        except ValueError:
            raise ValueError(f"unknown model {v['model']!r}; choose one of: "
                             f"{', '.join(models.names())} (or layers, hidden, heads)") from None
    missing = [spell(f, "").strip(" =") for f in ("layers", "hidden", "heads")
               if v.get(f) is None]
    if missing:
        raise ValueError(f"give {spell('model', 'NAME')} ({', '.join(models.names())}) or a "
                         f"custom model with layers, hidden, heads; missing {' '.join(missing)}")
    L, D, N = v["layers"], v["hidden"], v["heads"]
    if D % N and v.get("head_dim") is None:
        raise ValueError(f"{spell('heads', N)} must divide {spell('hidden', D)} (head dimension "
                         f"D/N); choose heads among the divisors of {D}, or give head_dim")
    K = v.get("kv_heads") or N
    if N % K:
        raise ValueError(f"{spell('kv_heads', K)} must divide {spell('heads', N)}; choose one of "
                         f"{', '.join(str(d) for d in range(1, N + 1) if N % d == 0)}")
    cfg = models.gpt(L, D if D % N == 0 else N, N, V=v.get("vocab") or GPT_VOCAB,
                     tied_embeddings=False, name=f"custom L={L} D={D}")
    return cfg.with_changes(D=D, F=v.get("ffn") or 4 * D, K=K, H=v.get("head_dim") or D // N,
                            glu=bool(v.get("glu")), tied_embeddings=bool(v.get("tied_embeddings")))


def build_cluster(v: dict, spell=_csv_name):
    """The cluster of ``gpu, gpus`` with optional ``gpus_per_node`` and ``inter_node_gbps``
    (scale-out Gb/s per node, one way).

    >>> build_cluster({"gpu": "h100", "gpus": 16}).n_nodes
    2
    """
    try:
        acc = hardware.get(v["gpu"])
    except ValueError:
        raise ValueError(f"unknown GPU {v['gpu']!r}; choose one of: "
                         f"{', '.join(hardware.names())}") from None
    n, per = v["gpus"], v.get("gpus_per_node")
    over = {}
    if per is not None:
        if n % per and n > per:
            raise ValueError(f"{spell('gpus_per_node', per)} must divide {spell('gpus', n)}")
        over = dict(devices_per_node=min(per, n), devices_per_host=min(per, n))
    try:
        c = hardware.cluster(acc.name, n, **over)
    except ValueError as e:
        raise ValueError(f"{spell('gpu', v['gpu'])} with {spell('gpus', n)}: {e}") from None
    gbps = v.get("inter_node_gbps")
    if gbps is not None:
        link = Link(f"{gbps:g} Gb/s per node", gbps * 1e9 / 8 / c.devices_per_node,
                    c.inter_node.latency)
        c = hardware.cluster(acc.name, n, **over, inter_node=link)
    return c


def build_plan(v: dict, cfg, cluster, global_batch: int, T: int, spell=_csv_name, *,
               memory: bool = False) -> ParallelPlan:
    """The ParallelPlan of the plan columns (or flags): dp fills the devices when not given,
    schedule "interleaved" when virtual_stages > 1, sequence parallelism on with tp > 1,
    no recomputation, ZeRO 0, micro-batch 1. ValueError when a rule forbids the plan (the
    memory rule too with ``memory=True``; a measured run ran, so by default it is not asked).
    """
    from .. import planner
    from ..memory import tp_choices

    for name, choices in (("schedule", SCHEDULES), ("recompute", RECOMPUTE)):
        if v.get(name) is not None and v[name] not in choices:
            raise ValueError(f"{spell(name, repr(v[name]))} is not valid; choose one of: "
                             f"{', '.join(choices)}")
    if v.get("zero") is not None and v["zero"] not in (0, 1, 2, 3):
        raise ValueError(f"{spell('zero', v['zero'])} is not a ZeRO stage; choose one of: "
                         "0, 1, 2, 3")
    tp, pp, cp = v.get("tp") or 1, v.get("pp") or 1, v.get("cp") or 1
    n = cluster.n_devices
    if tp not in tp_choices(cfg):
        raise ValueError(f"{spell('tp', tp)} must divide the N={cfg.N} query heads and the MLP "
                         f"width F={cfg.F}, and divide or be a multiple of K={cfg.K} kv heads; "
                         f"choose tp in {tp_choices(cfg)}")
    if v.get("dp") is None:
        if n % (tp * pp * cp):
            raise ValueError(f"tp·pp·cp = {tp * pp * cp} must divide {spell('gpus', n)} (dp "
                             "fills the rest); choose degrees whose product divides it")
        dp = n // (tp * pp * cp)
    else:
        dp = v["dp"]
        if dp * tp * pp * cp != n:
            raise ValueError(f"dp·tp·pp·cp = {dp}·{tp}·{pp}·{cp} = {dp * tp * pp * cp} must "
                             f"equal {spell('gpus', n)}; e.g. leave out dp")
    vs = v.get("virtual_stages") or 1
    sp = v.get("sequence_parallel")
    plan = ParallelPlan(dp=dp, tp=tp, pp=pp, cp=cp, ep=v.get("ep") or 1, zero=v.get("zero") or 0,
                        micro_batch=v.get("micro_batch") or 1, virtual_stages=vs,
                        schedule=v.get("schedule") or ("interleaved" if vs > 1 else "1f1b"),
                        recompute=v.get("recompute") or "none",
                        sequence_parallel=tp > 1 if sp is None else bool(sp))
    mem_rule = dict(planner.RULES)["memory"]
    why = [w for w in planner.explain(cfg, cluster, plan, global_batch, T,
                                      dtype=v.get("dtype") or "bf16")
           if memory or not w.startswith(mem_rule)]
    if why:
        raise ValueError(f"this plan cannot run: {why[0]}")
    return plan


@dataclass(frozen=True)
class Measurement:
    """One measured run: what ran (model, cluster, plan, batch, sequence, precision) and its
    measured ``step_time`` in seconds; ``line`` its line in the CSV (0 when built in code)."""

    cfg: object
    cluster: object
    plan: ParallelPlan
    global_batch: int
    seq_len: int
    step_time: float
    dtype: str = "bf16"
    line: int = 0
    label: str = ""


def measurement(values: dict, line: int = 0) -> Measurement:
    """A Measurement from one row's values (column name -> parsed value; None or absent where
    the flag's default applies). Raises ValueError naming the rule.

    >>> m = measurement({"model": "llama3-8b", "gpu": "h100", "gpus": 8, "tp": 2,
    ...                  "global_batch": 32, "seq_len": 4096, "step_time_s": 3.0})
    >>> m.plan.dp, m.plan.sequence_parallel
    (4, True)
    """
    missing = [c for c in REQUIRED if values.get(c) is None]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}: every row needs {', '.join(REQUIRED)} "
                         "and a model (model, or layers, hidden, heads)")
    dtype = values.get("dtype") or "bf16"
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r} is not a training precision the estimator times; "
                         f"choose one of: {', '.join(DTYPES)}")
    cfg = build_model(values)
    cluster = build_cluster(values)
    B, T = values["global_batch"], values["seq_len"]
    plan = build_plan(values, cfg, cluster, B, T)
    label = values.get("model") or f"L={cfg.L} D={cfg.D}"
    return Measurement(cfg, cluster, plan, B, T, float(values[MEASURED_COLUMN]), dtype, line,
                       label)


def load_measurements(path) -> list[Measurement]:
    """The measured runs of a CSV, one Measurement per row (blank lines skipped).

    Columns: the ``estimate`` command's flags with underscores (``COLUMNS``) and the measured
    ``step_time_s``; missing optional columns take the flags' defaults; switches 0/1 or
    true/false; unknown columns are ignored with one warning. A bad row raises ValueError
    naming its line, the value, the rule and the valid choices.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"measurements file {str(path)!r} does not exist; give a CSV with one "
                         "row per measured run")
    with path.open(newline="") as f:
        reader = csv.reader(f)
        header = next(reader, None)
        if not header:
            raise ValueError(f"{path}: the file is empty; its first line names the columns "
                             f"(at least {', '.join(REQUIRED)} and a model)")
        names = [h.strip().lower().replace("-", "_") for h in header]
        unknown = [h for h, n in zip(header, names) if n and n not in COLUMNS]
        if unknown:
            warnings.warn(f"{path}: ignoring unknown column(s) {', '.join(unknown)}; known: "
                          f"{', '.join(COLUMNS)}", stacklevel=2)
        missing = [c for c in REQUIRED if c not in names]
        if missing:
            raise ValueError(f"{path}: no column {', '.join(missing)}; every file needs "
                             f"{', '.join(REQUIRED)} and a model (model, or layers, hidden, "
                             "heads)")
        rows = []
        for cells in reader:
            line = reader.line_num
            if not any(c.strip() for c in cells):
                continue
            if len(cells) > len(names):
                raise ValueError(f"{path}, line {line}: {len(cells)} cells for {len(names)} "
                                 "columns; quote cells that hold commas")
            try:
                values = {n: _parse(n, c) for n, c in zip(names, cells)
                          if n in COLUMNS and c.strip()}
                rows.append(measurement(values, line))
            except ValueError as e:
                raise ValueError(f"{path}, line {line}: {e}") from None
    if not rows:
        raise ValueError(f"{path}: no measured rows under the header")
    return rows


# ---- prediction ---------------------------------------------------------------------------------
class _Batches:
    """The rows grouped so that each (model, cluster, batch, sequence, precision) is one
    vectorised call of estimate_arrays."""

    def __init__(self, rows, options):
        self.n = len(rows)
        self.options = dict(options or {})
        self.options.pop("dtype", None)  # each row carries its own precision
        groups: dict = {}
        for i, r in enumerate(rows):
            key = (repr(r.cfg), repr(r.cluster), r.global_batch, r.seq_len, r.dtype)
            groups.setdefault(key, (r, []))[1].append(i)
        self.groups = [(r, np.array(idx), plan_arrays([rows[i].plan for i in idx]))
                       for r, idx in groups.values()]

    def __call__(self, calibration) -> np.ndarray:
        out = np.empty(self.n)
        for r, idx, plans in self.groups:
            res = estimate_arrays(r.cfg, r.cluster, plans, r.global_batch, r.seq_len,
                                  dtype=r.dtype, calibration=calibration, **self.options)
            out[idx] = res["step_time"]
        return out


def predict(rows, calibration=None, **options) -> np.ndarray:
    """Predicted step time (s) of each Measurement; ``options`` go to ``estimate_arrays``
    (e.g. ``flash_attention=False``)."""
    cal = DEFAULT_CALIBRATION if calibration is None else calibration
    return _Batches(list(rows), options)(cal)
