"""Calibration to a reader's cluster: the CSV, the fit, the report, the files, the command.

The fit is checked where the answer is known (step times made by the estimator itself with
known constants) and where it is not (calibrated on some vTrain and published runs, checked on
others it never saw).
"""

import csv
import dataclasses
import json

import numpy as np
import pytest

from scaling_lib import calibrate as cb
from scaling_lib import cli, hardware
from scaling_lib import validation as val
from scaling_lib.parallelism import ParallelPlan
from scaling_lib.parallelism.estimate import DEFAULT_CALIBRATION, Calibration, estimate

# The slower stack the synthetic rows come from: matmuls at 55% of the peak.
TRUE = dataclasses.replace(DEFAULT_CALIBRATION, gemm_efficiency=0.55)
LAYOUTS = [(8, 1, 1, 1, "full"), (8, 2, 1, 2, "full"), (8, 4, 1, 1, "selective"),
           (8, 8, 1, 1, "none"), (16, 2, 2, 1, "full"), (16, 4, 1, 2, "selective")]


def synthetic_rows(cal=TRUE):
    """One CSV row per layout of llama3-8b, with the step time the estimator gives under cal."""
    rows = []
    for gpus, tp, pp, mb, rec in LAYOUTS:
        plan = ParallelPlan(dp=gpus // (tp * pp), tp=tp, pp=pp, micro_batch=mb, recompute=rec,
                            zero=1, sequence_parallel=tp > 1)
        t = estimate("llama3-8b", hardware.cluster("h100", gpus), plan, 64, 4096,
                     calibration=cal).step_time
        rows.append(dict(model="llama3-8b", gpu="h100", gpus=gpus, tp=tp, pp=pp, zero=1,
                         micro_batch=mb, recompute=rec, global_batch=64, seq_len=4096,
                         step_time_s=t))
    return rows


def write_csv(path, rows, extra=None):
    names = list(rows[0]) + list(extra or {})
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=names)
        w.writeheader()
        for r in rows:
            w.writerow(r | (extra or {}))
    return path


def test_fit_recovers_the_constant_that_made_the_step_times(tmp_path):
    rows = cb.load_measurements(write_csv(tmp_path / "m.csv", synthetic_rows()))
    cal, rep = cb.fit_measurements(rows)
    assert "gemm_efficiency" in rep.fitted
    assert cal.gemm_efficiency == pytest.approx(TRUE.gemm_efficiency, rel=0.02)
    assert rep.mape("start") > 0.1 and rep.mape() < 0.005
    # every row left out in turn is still predicted from the others
    assert rep.folds == len(rows) and rep.mape("held_out") < 0.01
    moved = {f: (a, b) for f, a, b, _ in rep.moved}
    assert moved["gemm_efficiency"][1] < moved["gemm_efficiency"][0]


def test_fit_of_rows_made_with_the_defaults_moves_nothing():
    rows = [cb.measurement(r) for r in synthetic_rows(DEFAULT_CALIBRATION)]
    cal, rep = cb.fit_measurements(rows, cross_validate=False)
    assert rep.moved == [] and rep.mape() < 1e-3
    for f in cb.FIT_FIELDS:
        assert getattr(cal, f) == pytest.approx(getattr(DEFAULT_CALIBRATION, f), rel=0.02)


def test_constants_no_row_depends_on_are_kept_and_said_so():
    rows = [cb.measurement(r) for r in synthetic_rows() if r["gpus"] == 8]  # one node
    cal, rep = cb.fit_measurements(rows, cross_validate=False)
    for f in ("network_efficiency", "network_latency"):
        assert f not in rep.fitted and "no measured run depends on it" in rep.kept[f]
        assert getattr(cal, f) == getattr(DEFAULT_CALIBRATION, f)


def test_fit_stays_within_the_physical_bounds():
    # rows 3x faster than the defaults predict: no physical constant can explain that
    rows = [cb.measurement(r | {"step_time_s": r["step_time_s"] / 3})
            for r in synthetic_rows(DEFAULT_CALIBRATION)]
    cal, rep = cb.fit_measurements(rows, fields=cb.FIT_FIELDS, cross_validate=False)
    for f in cb.FIT_FIELDS:
        lo, hi = cb.BOUNDS[f]
        assert lo <= getattr(cal, f) <= hi, f
    assert rep.mape() > 0.2  # the fit does not pretend


def test_csv_to_json_to_estimate_round_trip(tmp_path, capsys):
    path = write_csv(tmp_path / "m.csv", synthetic_rows())
    out = tmp_path / "cal.json"
    assert cli.main(["calibrate", str(path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    start = DEFAULT_CALIBRATION.gemm_efficiency
    assert "leave-one-out" in printed and f"gemm_efficiency {start:.3g} -> 0.55" in printed
    assert f"wrote {out}" in printed
    cal = cb.load_calibration(out)
    assert isinstance(cal, Calibration) and cal.gemm_efficiency == pytest.approx(0.55, rel=0.02)
    rec = json.loads(out.read_text())
    assert rec["fit"]["rows"] == len(LAYOUTS) and rec["source"] == str(path)
    # the estimate with the file reproduces a measured row
    argv = ["estimate", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "16", "--tp", "4",
            "--zero", "1", "--micro-batch", "2", "--recompute", "selective", "--global-batch",
            "64", "--seq-len", "4096", "--calibration", str(out), "--json"]
    assert cli.main(argv) == 0
    got = json.loads(capsys.readouterr().out)["step_time_s"]
    assert got == pytest.approx(synthetic_rows()[-1]["step_time_s"], rel=0.01)


def test_json_output_of_the_command(tmp_path, capsys):
    path = write_csv(tmp_path / "m.csv", synthetic_rows())
    assert cli.main(["calibrate", str(path), "--out", str(tmp_path / "c.json"), "--json",
                     "--fit", "gemm_efficiency", "--no-cross-validate"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["fitted"] == ["gemm_efficiency"] and rec["mape"]["held_out"] is None
    assert len(rec["per_row"]) == len(LAYOUTS) and rec["per_row"][0]["line"] == 2


def test_unknown_columns_warn_once(tmp_path, capsys):
    path = write_csv(tmp_path / "m.csv", synthetic_rows()[:2], extra={"cluster_name": "a",
                                                                       "notes": "b"})
    with pytest.warns(UserWarning, match="ignoring unknown column") as rec:
        rows = cb.load_measurements(path)
    assert len(rec) == 1 and "cluster_name, notes" in str(rec[0].message)
    assert len(rows) == 2
    assert cli.main(["calibrate", str(path), "--out", str(tmp_path / "c.json"),
                     "--no-cross-validate"]) == 0
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and err.count("\n") == 1


def test_missing_optional_columns_take_the_flags_defaults():
    m = cb.measurement({"layers": 24, "hidden": 2048, "heads": 16, "gpu": "a100-80gb",
                        "gpus": 8, "global_batch": 32, "seq_len": 2048, "step_time_s": 1.0})
    assert m.plan == ParallelPlan(dp=8)
    assert m.cfg.F == 4 * 2048 and m.cfg.V == cb.GPT_VOCAB and m.dtype == "bf16"
    s = cb.measurement({"model": "llama3-8b", "gpu": "h100", "gpus": 16, "tp": 2, "pp": 2,
                        "virtual_stages": 2, "sequence_parallel": False, "global_batch": 64,
                        "seq_len": 4096, "step_time_s": 1.0})
    assert s.plan.schedule == "interleaved" and s.plan.dp == 4 and not s.plan.sequence_parallel


@pytest.mark.parametrize("column, value, needle", [
    ("tp", "3", "line 3: tp=3 must divide the N=32 query heads"),
    ("gpus", "eight", "line 3: gpus='eight' must be a whole number"),
    ("recompute", "some", "line 3: recompute='some' is not valid; choose one of: none"),
    ("sequence_parallel", "maybe", "line 3: sequence_parallel='maybe' is a switch; write 0/1 "
                                   "or true/false"),
    ("zero", "4", "line 3: zero='4' is not a ZeRO stage; choose one of: 0, 1, 2, 3"),
    ("step_time_s", "-2", "line 3: step_time_s='-2' must be a positive number"),
    ("dtype", "fp4", "line 3: dtype='fp4' is not a training precision the estimator times; "
                     "choose one of: bf16, fp16, fp8"),
    ("model", "gpt5", "line 3: unknown model 'gpt5'; choose one of: llama3-8b"),
    ("gpu", "h1000", "line 3: unknown GPU 'h1000'; choose one of:"),
    ("global_batch", "63", "line 3: this plan cannot run: the global batch must be a multiple"),
])
def test_a_bad_row_is_named_by_its_line(tmp_path, capsys, column, value, needle):
    rows = synthetic_rows()[:3]
    rows[1][column] = value
    rows[1].setdefault(column, value)
    path = write_csv(tmp_path / "m.csv", [rows[0] | {column: rows[0].get(column, "")},
                                          rows[1], rows[2] | {column: rows[2].get(column, "")}])
    with pytest.raises(ValueError, match="line 3: "):
        cb.load_measurements(path)
    code = cli.main(["calibrate", str(path), "--out", str(tmp_path / "c.json")])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("text, needle", [
    ("", "the file is empty"),
    ("model,gpu,gpus\nllama3-8b,h100,8\n", "no column global_batch, seq_len, step_time_s"),
    ("model,gpu,gpus,global_batch,seq_len,step_time_s\n", "no measured rows"),
])
def test_bad_files(tmp_path, capsys, text, needle):
    path = tmp_path / "m.csv"
    path.write_text(text)
    code = cli.main(["calibrate", str(path), "--out", str(tmp_path / "c.json")])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and err.count("\n") == 1


def test_bad_output_path(tmp_path, capsys):
    path = write_csv(tmp_path / "m.csv", synthetic_rows()[:2])
    for out in (tmp_path / "no" / "c.json", tmp_path / "c.txt"):
        code = cli.main(["calibrate", str(path), "--out", str(out)])
        err = capsys.readouterr().err
        assert code == 2 and "must name a .json file in an existing folder" in err
        assert err.count("\n") == 1


def test_bad_calibration_files(tmp_path):
    p = tmp_path / "c.json"
    p.write_text("{not json")
    with pytest.raises(ValueError, match="is not JSON"):
        cb.load_calibration(p)
    p.write_text('{"gemm_efficiency": "fast"}')
    with pytest.raises(ValueError, match="must be a number"):
        cb.load_calibration(p)
    p.write_text('{"gemm_efficiency": 1.5}')
    with pytest.raises(ValueError, match="fraction of a peak"):
        cb.load_calibration(p)
    with pytest.raises(ValueError, match="does not exist"):
        cb.load_calibration(tmp_path / "none.json")


def test_fit_rejects_bad_arguments():
    rows = [cb.measurement(r) for r in synthetic_rows()[:2]]
    with pytest.raises(ValueError, match="cannot fit"):
        cb.fit_measurements(rows, fields=("peak_flops",))
    with pytest.raises(ValueError, match="non-empty list of Measurements"):
        cb.fit_measurements([])
    with pytest.raises(ValueError, match="2 positive numbers"):
        cb.fit_measurements(rows, weights=[1.0, -1.0])


def test_validation_fit_is_the_public_fitter():
    # the vTrain fit runs through fit_measurements on the same rows predict() times
    m = val.measurements("multi", "train")
    rows = val.load("multi")
    sel = val.split(rows, "train")
    assert np.allclose(cb.predict(m, val.VTRAIN_CALIBRATION, **val.VTRAIN_OPTIONS),
                       val.predict({k: v[sel] for k, v in rows.items()}))


def test_single_node_calibration_predicts_the_multi_node_runs():
    """Issue 19, done-when: calibrated on the vTrain single-node runs (every 30th: 48 runs of
    2-8 GPUs), the estimate predicts the 73 multi-node runs (64 and 512 GPUs, models 10-100x
    larger) within 10% MAPE. Measured: 9.2% (9.9% on the odd rows no fit saw)."""
    single, multi = val.measurements("single")[::30], val.measurements("multi")
    cal, rep = cb.fit_measurements(single, options=val.VTRAIN_OPTIONS, cross_validate=False)
    measured = np.array([m.step_time for m in multi])
    pred = cb.predict(multi, cal, **val.VTRAIN_OPTIONS)
    assert np.mean(np.abs(pred / measured - 1)) <= 0.10
    for f in ("network_efficiency", "network_latency"):  # one node says nothing about them
        assert f in rep.kept


def test_small_runs_of_a_stack_calibrate_its_large_runs():
    """Published runs of other frameworks: out of the box the estimate is optimistic for a
    stack it never saw; calibrated on that stack's runs of at most 64 GPUs it predicts the
    stack's larger runs (never seen by the fit) far better. Measured (NeMo 24.07 fp8 on H100,
    NeMo-Megatron-Launcher bf16 on A100): 19% -> 4% and 30% -> 11%."""
    runs, _ = val.published_runs()
    fams = {"NeMo 24.07, h100, fp8", "NeMo-Megatron-Launcher, a100-80gb, bf16"}
    res = val.published_check([r for r in runs if r["family"] in fams])
    assert set(res) == fams
    for fam, r in res.items():
        assert r["n_small"] >= 2 and r["mape_large"] > 0.15, fam
        assert r["mape_large_calibrated"] <= 0.5 * r["mape_large"], fam
