"""`python -m scaling_lib serve`: the figures of serving.estimate, its front, one-line errors."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from scaling_lib import cli, serving

ROOT = Path(__file__).resolve().parents[1]
BASE = ["serve", "--gpu", "h100", "--gpus", "8", "--batch", "64", "--prompt-len", "1024",
        "--gen-len", "256"]


def _json(argv, capsys):
    assert cli.main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_equals_the_library(capsys):
    r = _json(BASE + ["--model", "llama3-70b", "--price-per-gpu-hour", "2"], capsys)
    e = serving.estimate("llama3-70b", "h100", 8, batch=64, prompt_len=1024, gen_len=256,
                         price_per_device_hour=2.0)
    assert r["ttft_s"] == pytest.approx(e.ttft) and r["tpot_s"] == pytest.approx(e.tpot)
    assert r["tokens_per_s"] == pytest.approx(e.tokens_per_s)
    assert r["cost_per_million_tokens"] == pytest.approx(e.cost_per_million_tokens)
    assert r["memory_total_per_device_bytes"] == pytest.approx(e.memory.total)
    assert r["fits"] is True and r["decode_bound"] == "memory" and r["min_devices"] == 2
    assert "pareto" not in r


def test_custom_model_equals_the_preset(capsys):
    preset = _json(BASE + ["--model", "llama3-8b"], capsys)
    custom = _json(BASE + ["--layers", "32", "--hidden", "4096", "--heads", "32", "--kv-heads",
                           "8", "--ffn", "14336", "--vocab", "128256", "--glu"], capsys)
    assert custom["model"].startswith("custom")
    # the custom model is GPT-style (biases, LayerNorm, learned positions: the defaults of
    # estimate and plan), so it differs from the preset by those few parameters only
    for k in ("ttft_s", "tpot_s", "tokens_per_s", "memory_total_per_device_bytes"):
        assert custom[k] == pytest.approx(preset[k], rel=0.01)


def test_pareto_front_is_monotone_and_fits(capsys):
    r = _json(BASE + ["--model", "llama3-70b", "--pareto", "--kv-dtype", "fp8"], capsys)
    front = r["pareto"]
    assert front and front[0]["batch"] == 1
    tpot = np.array([p["tpot_s"] for p in front])
    rate = np.array([p["tokens_per_s"] for p in front])
    assert np.all(np.diff(tpot) > 0) and np.all(np.diff(rate) > 0)
    assert r["kv_dtype"] == "fp8"


def test_readable_table(capsys):
    assert cli.main(BASE + ["--model", "llama3-70b", "--pareto"]) == 0
    out = capsys.readouterr().out
    assert "time to first token" in out and "time per output token" in out
    assert "give --price-per-gpu-hour" in out and "latency-throughput front" in out


@pytest.mark.parametrize("extra, needle", [
    (["--model", "llama3-7b"], "unknown model 'llama3-7b'; choose one of: llama3-8b"),
    ([], "give --model NAME (llama3-8b"),
    (["--model", "llama3-70b", "--layers", "2"], "not both"),
    (["--layers", "2", "--hidden", "100", "--heads", "3"], "--heads 3 must divide --hidden 100"),
    (["--layers", "2", "--hidden", "96", "--heads", "6", "--kv-heads", "4"],
     "must divide --heads 6; choose one of 1, 2, 3, 6"),
    (["--model", "llama3-70b", "--dtype", "int3"], "choose one of fp32, bf16"),
    (["--model", "llama3-70b", "--kv-dtype", "fp4"], "--kv-dtype 'fp4'"),
    (["--model", "llama3-70b", "--price-per-gpu-hour", "-1"], "positive number of dollars"),
])
def test_bad_input_is_one_line_exit_2(extra, needle, capsys):
    assert cli.main(BASE + extra) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


@pytest.mark.parametrize("argv, needle", [
    (["serve", "--model", "llama3-70b", "--gpu", "h101", "--gpus", "8", "--batch", "1",
      "--prompt-len", "8", "--gen-len", "8"], "choose one of k40"),
    (["serve", "--model", "llama3-70b", "--gpu", "h100", "--gpus", "0", "--batch", "1",
      "--prompt-len", "8", "--gen-len", "8"], "--gpus must be at least 1"),
    (["serve", "--model", "llama3-70b", "--gpu", "h100", "--gpus", "8", "--batch", "x",
      "--prompt-len", "8", "--gen-len", "8"], "--batch must be a whole number"),
    (["serve", "--model", "llama3-70b", "--gpus", "8"], "required"),
])
def test_argument_errors(argv, needle, capsys):
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err


def test_module_entry_point():
    run = subprocess.run([sys.executable, "-m", "scaling_lib", *BASE, "--model", "llama2-13b",
                          "--json"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout)["model"] == "llama2-13b"
    bad = subprocess.run([sys.executable, "-m", "scaling_lib", "serve", "--gpu", "h100"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert bad.returncode == 2 and bad.stderr.startswith("error: ") and bad.stdout == ""


# ---- layouts, latency targets and tail latencies (serving issue) --------------------------------
@pytest.mark.parametrize("extra, needle", [
    (["--model", "llama3-70b", "--tp", "3"], "tp=3 does not divide N=64 query heads"),
    (["--model", "llama3-70b", "--tp", "16"], "tp=16 does not divide n_devices=8"),
    (["--model", "llama3-70b", "--pp", "3"], "pp=3 does not divide"),
    (["--model", "llama3-70b", "--replicas", "3"], "replicas=3 does not divide"),
    (["--model", "llama3-70b", "--slo-ttft", "-1"], "--slo-ttft must be a positive number"),
])
def test_layout_errors_are_one_line_exit_2(extra, needle, capsys):
    assert cli.main(BASE + extra) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_llama3_8b_on_64_gpus_refuses_tp_64_and_picks_a_layout(capsys):
    """The heads decide: tp=64 > N=32 is refused; left free, 64 GPUs hold replicas."""
    argv = ["serve", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "64", "--batch", "64",
            "--prompt-len", "1024", "--gen-len", "256"]
    assert cli.main(argv + ["--tp", "64"]) == 2
    assert "choose tp in [1, 2, 4, 8, 16, 32]" in capsys.readouterr().err
    r = _json(argv, capsys)
    assert r["tp"] * r["pp"] * r["replicas"] == 64 and r["tp"] <= 8


def test_layout_flags_reach_the_library(capsys):
    argv = ["serve", "--model", "llama3-405b", "--gpu", "h100", "--gpus", "16", "--batch", "8",
            "--prompt-len", "1024", "--gen-len", "128", "--requests", "300"]
    r = _json(argv, capsys)
    assert (r["tp"], r["pp"], r["replicas"]) == (8, 2, 1) and r["fits"]
    e = serving.estimate("llama3-405b", "h100", 16, batch=8, prompt_len=1024, gen_len=128)
    assert r["tpot_s"] == pytest.approx(e.tpot)
    t16 = _json(argv + ["--tp", "16"], capsys)
    assert (t16["tp"], t16["pp"]) == (16, 1)
    assert t16["tpot_s"] == pytest.approx(serving.estimate(
        "llama3-405b", "h100", 16, batch=8, prompt_len=1024, gen_len=128, tp=16).tpot)


def test_tail_latencies_and_goodput(capsys):
    r = _json(BASE + ["--model", "llama3-8b", "--requests", "500", "--slo-ttft", "0.5",
                      "--slo-tpot", "0.02"], capsys)
    tail = r["tail"]
    for w in ("ttft_s", "tpot_s", "latency_s"):
        assert tail[w]["p50"] <= tail[w]["p90"] <= tail[w]["p99"]
    assert 0 <= tail["slo_attainment"] <= 1
    assert tail["goodput_per_s"] <= tail["rate_per_s"] * 1.5
    # a target nobody meets gives no goodput
    none = _json(BASE + ["--model", "llama3-8b", "--requests", "200", "--slo-tpot", "1e-6"],
                 capsys)
    assert none["tail"]["goodput_per_s"] == 0 and none["tail"]["slo_attainment"] == 0
