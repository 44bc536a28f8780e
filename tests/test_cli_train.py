"""The training commands: estimate, plan and optimal, in-process and as a subprocess."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scaling_lib import cli, hardware, planner
from scaling_lib.cli_train import count, duration, percent
from scaling_lib.parallelism import ParallelPlan
from scaling_lib.parallelism.estimate import estimate

ROOT = Path(__file__).resolve().parents[1]
EST = ["estimate", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "16", "--global-batch",
       "64", "--seq-len", "4096"]
PLAN = ["plan", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "16", "--global-batch", "64",
        "--seq-len", "4096"]


def run(argv, capsys):
    code = cli.main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_estimate_json_matches_the_library(capsys):
    code, out, err = run(EST + ["--tp", "2", "--zero", "1", "--recompute", "selective",
                                "--json"], capsys)
    assert code == 0, err
    rec = json.loads(out)
    assert set(rec) >= {"step_time_s", "mfu", "hfu", "tokens_per_s", "memory_per_device_bytes",
                        "fits", "breakdown"}
    assert set(rec["breakdown"]) == {"compute", "exposed_communication", "bubble", "optimizer"}
    plan = ParallelPlan(dp=8, tp=2, zero=1, recompute="selective", sequence_parallel=True)
    e = estimate("llama3-8b", hardware.cluster("h100", 16), plan, 64, 4096)
    assert rec["step_time_s"] == pytest.approx(e.step_time)
    assert rec["memory_per_device_bytes"] == pytest.approx(float(e.memory.total))
    assert rec["plan"]["dp"] == 8 and rec["fits"] is True


def test_estimate_table(capsys):
    code, out, _ = run(EST + ["--tp", "2", "--zero", "1"], capsys)
    assert code == 0 and "step time" in out and "MFU" in out and "bubble" in out


def test_custom_gpt_model(capsys):
    code, out, err = run(["estimate", "--layers", "24", "--hidden", "2048", "--heads", "16",
                          "--gpu", "a100-80gb", "--gpus", "8", "--global-batch", "32",
                          "--seq-len", "2048", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["fits"] is True


def test_custom_cluster_network_is_used(capsys):
    base = EST + ["--tp", "8", "--json"]
    _, fast, _ = run(base, capsys)
    _, slow, _ = run(base + ["--inter-node-gbps", "25"], capsys)
    assert json.loads(slow)["step_time_s"] > json.loads(fast)["step_time_s"]


def test_plan_json_is_the_search(capsys):
    code, out, err = run(PLAN + ["--top", "3", "--tokens", "1e12", "--price-per-gpu-hour", "2",
                                 "--json"], capsys)
    assert code == 0, err
    rec = json.loads(out)
    res = planner.search("llama3-8b", hardware.cluster("h100", 16), 64, 4096, top=3)
    assert [p["step_time_s"] for p in rec["plans"]] == pytest.approx(
        res.table["step_time"].tolist())
    best = rec["plans"][0]
    steps = 1e12 / (64 * 4096)
    assert best["days"] == pytest.approx(steps * best["step_time_s"] / 86400)
    assert best["cost"] == pytest.approx(best["gpu_hours"] * 2)
    assert rec["runner_up_loses"] and rec["plans_feasible"] == len(
        planner.search("llama3-8b", hardware.cluster("h100", 16), 64, 4096))


def test_plan_table_and_fixed_axes(capsys):
    code, out, _ = run(PLAN + ["--tp", "4", "--recompute", "full", "--top", "2"], capsys)
    assert code == 0 and "runner-up loses" in out and "dropped" in out
    rows = [line for line in out.splitlines() if "recompute=" in line]
    assert len(rows) == 2 and all("tp=4" in r and "recompute=full" in r for r in rows)


def test_plan_cost_objective(capsys):
    code, out, err = run(PLAN + ["--objective", "cost", "--json"], capsys)
    assert code == 0, err
    plans = json.loads(out)["plans"]
    gs = [p["step_time_s"] * p["n_devices"] for p in plans]
    assert gs == sorted(gs)


def test_optimal_json(capsys):
    code, out, err = run(["optimal", "--gpu", "a100-80gb", "--gpus", "3360", "--days", "30",
                          "--utilization", "0.356", "--json"], capsys)
    assert code == 0, err
    rec = json.loads(out)
    n, d = planner.compute_optimal(hardware.cluster("a100-80gb", 3360), 30)
    assert rec["at_100_percent"]["n_params"] == pytest.approx(n)
    assert rec["at_utilization"]["n_params"] == pytest.approx(n * 0.356 ** 0.5)
    assert rec["days_for_100_percent_model"] == pytest.approx(30 / 0.356)


@pytest.mark.parametrize("argv, needle", [
    (["estimate", "--model", "gpt5", "--gpu", "h100", "--gpus", "8", "--global-batch", "8",
      "--seq-len", "64"], "unknown model 'gpt5'; choose one of: llama3-8b"),
    (["estimate", "--model", "llama3-8b", "--gpu", "h1000", "--gpus", "8", "--global-batch", "8",
      "--seq-len", "64"], "unknown GPU 'h1000'; choose one of:"),
    (EST + ["--dp", "4"], "dp·tp·pp·cp = 4·1·1·1 = 4 must equal --gpus 16"),
    (EST + ["--tp", "3"], "--tp 3 must divide the N=32 query heads"),
    (EST + ["--dp", "16", "--micro-batch", "3"], "multiple of dp · micro_batch"),
    (EST + ["--dtype", "fp4"], "--dtype 'fp4' is not valid; choose one of: bf16, fp16, fp8"),
    (EST + ["--headroom", "90"], "--headroom 90 GB leaves no memory: the h100 has 85.5 GB usable"),
    (EST + ["--headroom", "-1"], "--headroom must be a number >= 0"),
    (EST + ["--calibration", "/nonexistent/cal.json"], "calibration file '/nonexistent/cal.json' "
     "does not exist"),
    (["estimate", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "1e12", "--global-batch",
      "8", "--seq-len", "64"], "n_devices=1000000000000"),
    (EST + ["--global-batch", "1.5"], "--global-batch must be a whole number, got '1.5'"),
    (EST + ["--recompute", "some"], "--recompute 'some' is not valid; choose one of: none"),
    (EST + ["--schedule", "zb"], "choose one of: 1f1b, gpipe, interleaved"),
    (EST + ["--zero", "4"], "--zero 4 is not a ZeRO stage"),
    (EST + ["--pp", "2", "--zero", "2"], "ZeRO-2 with pp > 1 does not run"),
    (PLAN + ["--objective", "fast"], "--objective 'fast' is not valid; choose one of: time, cost"),
    (["estimate", "--gpu", "h100", "--gpus", "8", "--global-batch", "8", "--seq-len", "64"],
     "missing --layers --hidden --heads"),
    (["estimate", "--layers", "2", "--hidden", "100", "--heads", "3", "--gpu", "h100", "--gpus",
      "8", "--global-batch", "8", "--seq-len", "64"], "--heads 3 must divide --hidden 100"),
    (["optimal", "--gpu", "h100", "--gpus", "8", "--days", "0"], "--days must be a positive"),
    (["optimal", "--gpu", "h100", "--gpus", "8", "--days", "3", "--utilization", "2"],
     "must be a fraction"),
    (EST[:-1] + ["lots"], "--seq-len must be a whole number"),
])
def test_bad_input_is_one_line_exit_2(argv, needle, capsys):
    code, out, err = run(argv, capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_estimate_of_a_plan_that_does_not_fit_prints_it_all(capsys):
    argv = ["estimate", "--model", "llama3-70b", "--gpu", "h100", "--gpus", "8",
            "--global-batch", "8", "--seq-len", "4096"]
    code, out, err = run(argv, capsys)
    assert code == 0, err
    assert any(line.split() == ["fits", "no"] for line in out.splitlines())
    lines = {line.split()[0] for line in out.splitlines() if line.strip()}
    assert {"step", "MFU", "parameters", "optimizer", "activations"} <= lines
    assert "does not fit:" in out
    code, out, err = run(argv + ["--json"], capsys)
    rec = json.loads(out)
    assert rec["fits"] is False and rec["step_time_s"] > 0
    assert sum(rec["memory_by_part_bytes"].values()) == pytest.approx(
        rec["memory_per_device_bytes"])
    assert rec["memory_per_device_bytes"] > rec["memory_limit_bytes"]


def test_dtype_reaches_the_estimate(capsys):
    _, b, _ = run(EST + ["--json"], capsys)
    _, f, _ = run(EST + ["--dtype", "fp8", "--json"], capsys)
    e = estimate("llama3-8b", hardware.cluster("h100", 16), ParallelPlan(dp=16), 64, 4096,
                 dtype="fp8")
    assert json.loads(f)["step_time_s"] == pytest.approx(e.step_time)
    assert json.loads(f)["step_time_s"] < json.loads(b)["step_time_s"]


def test_headroom_lowers_the_memory_limit(capsys):
    base = EST + ["--tp", "2", "--zero", "1", "--json"]
    _, out, _ = run(base, capsys)
    rec = json.loads(out)
    assert rec["fits"] is True
    spare = (rec["memory_limit_bytes"] - rec["memory_per_device_bytes"]) / 1e9
    headroom = round(spare + 1, 1)
    _, out, _ = run(base + ["--headroom", str(headroom)], capsys)
    tight = json.loads(out)
    assert tight["fits"] is False
    assert tight["memory_limit_bytes"] == pytest.approx(rec["memory_limit_bytes"] - headroom * 1e9)
    assert tight["step_time_s"] == pytest.approx(rec["step_time_s"])
    # a search keeps only plans that fit under the headroom
    _, out, _ = run(PLAN + ["--headroom", "40", "--json", "--top", "50"], capsys)
    room = hardware.get("h100").memory_capacity_bytes - 40e9  # what the driver reports, less the headroom
    assert all(p["memory_per_device_bytes"] <= room for p in json.loads(out)["plans"])


def test_calibration_file_reaches_estimate_plan_and_optimal(tmp_path, capsys):
    from scaling_lib.calibrate import load_calibration, save_calibration
    from scaling_lib.parallelism.estimate import DEFAULT_CALIBRATION
    import dataclasses

    slow = dataclasses.replace(DEFAULT_CALIBRATION, gemm_efficiency=0.4)
    path = save_calibration(slow, tmp_path / "cal.json")
    assert load_calibration(path) == slow
    _, out, _ = run(EST + ["--calibration", str(path), "--json"], capsys)
    e = estimate("llama3-8b", hardware.cluster("h100", 16), ParallelPlan(dp=16), 64, 4096,
                 calibration=slow)
    assert json.loads(out)["step_time_s"] == pytest.approx(e.step_time)
    _, out, _ = run(PLAN + ["--calibration", str(path), "--top", "2", "--json"], capsys)
    res = planner.search("llama3-8b", hardware.cluster("h100", 16), 64, 4096, top=2,
                         calibration=slow)
    assert [p["step_time_s"] for p in json.loads(out)["plans"]] == pytest.approx(
        res.table["step_time"].tolist())
    opt = ["optimal", "--gpu", "h100", "--gpus", "64", "--days", "10", "--json"]
    _, fast, _ = run(opt, capsys)
    _, slow_out, _ = run(opt + ["--calibration", str(path)], capsys)
    assert json.loads(slow_out)["utilization"] < json.loads(fast)["utilization"]
    bad = tmp_path / "bad.json"
    bad.write_text('{"calibration": {"gemm_eff": 0.5}}')
    code, out, err = run(EST + ["--calibration", str(bad)], capsys)
    assert code == 2 and "unknown constant(s) gemm_eff; valid: gemm_efficiency" in err
    assert err.count("\n") == 1


def test_plan_names_the_rule_that_alone_dropped_most(capsys):
    code, out, err = run(PLAN + ["--json"], capsys)
    rec = json.loads(out)
    most = rec["dropped_most"]
    assert most["rule"] in dict(planner.RULES) and most["plans_alone"] > 0
    # no rule alone dropped more than it dropped in all, and the named one dropped the most alone
    assert most["plans_alone"] <= rec["dropped"][most["rule"]]
    # a search in which nothing fits names that rule in one line
    code, out, err = run(["plan", "--model", "llama3-405b", "--gpu", "h100", "--gpus", "8",
                          "--global-batch", "8", "--seq-len", "4096"], capsys)
    assert code == 2 and err.count("\n") == 1
    assert "the rule that dropped most" in err and "memory" in err


def test_extreme_numbers_print_readably(capsys):
    # a step of years (a huge batch on one node) and nanosecond-scale parts
    code, out, err = run(["estimate", "--model", "llama3-405b", "--gpu", "h100", "--gpus", "8",
                          "--tp", "8", "--global-batch", "16000000", "--seq-len", "8192",
                          "--recompute", "full"], capsys)
    assert code == 0, err
    step = next(line for line in out.splitlines() if line.startswith("step time"))
    assert step.rstrip().endswith("years") and "e+" not in step
    assert "--zero 1" in out and "--recompute full" not in out.split("does not fit")[-1]
    assert (duration(1e-9), duration(3.2e-5), duration(3 * 86400)) == ("1 ns", "32 µs", "3 days")
    assert (count(1e12), percent(2e-9)) == ("1,000,000,000,000", "2e-07%")
    code, out, err = run(PLAN + ["--tokens", "1e30", "--top", "1"], capsys)
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith("1 "))
    assert "e+" in row and len(row) < 200  # days and GPU-hours in scientific notation


def test_subprocess_entry_points():
    ok = subprocess.run([sys.executable, "-m", "scaling_lib"] + EST + ["--tp", "2", "--zero", "1",
                                                                      "--json"],
                        capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["fits"] is True
    bad = subprocess.run([sys.executable, "-m", "scaling_lib"] + EST + ["--tp", "3"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and bad.stdout == ""
    assert bad.stderr.count("\n") == 1
