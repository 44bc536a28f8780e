"""The estimator against measurements: vTrain's A100 runs and published runs.

The thresholds are the errors the stored calibration actually gives, with a small margin, so a
change that makes the model worse fails here.
"""

import numpy as np
import pytest

from scaling_lib import validation as val
from scaling_lib.parallelism.estimate import Calibration

# (train, held-out) MAPE the stored calibration reaches, plus a margin
SINGLE_MAX = {"train": 0.0, "test": 0.0}
MULTI_MAX = {"train": 0.0, "test": 0.0}
KORTHIKANTI_MAX = 0.0


@pytest.fixture(scope="module")
def reports():
    return {w: val.report(w) for w in ("single", "multi")}


def test_data_is_packaged_and_complete():
    s, m = val.load("single"), val.load("multi")
    assert len(s["measured"]) == 1440 and len(m["measured"]) == 73
    assert np.all(s["n_gpus"] == s["tp"] * s["dp"] * s["pp"])
    assert np.all(m["n_gpus"] == m["tp"] * m["dp"] * m["pp"])
    assert np.all(s["measured"] > 0.05) and np.all(m["measured"] < 30)


def test_split_is_a_partition():
    rows = val.load("single")
    tr, te = val.split(rows, "train"), val.split(rows, "test")
    assert not np.any(tr & te) and np.all(tr | te)


def test_single_node_mape(reports):
    r = reports["single"]
    assert r.mape_train <= SINGLE_MAX["train"]
    assert r.mape_test <= SINGLE_MAX["test"]


def test_multi_node_mape(reports):
    r = reports["multi"]
    assert r.mape_train <= MULTI_MAX["train"]
    assert r.mape_test <= MULTI_MAX["test"]


def test_worst_rows_are_sorted_and_complete(reports):
    w = reports["multi"].worst(5)
    errs = [abs(x["error"]) for x in w]
    assert errs == sorted(errs, reverse=True)
    assert {"tp", "pp", "dp", "micro_batch", "measured", "predicted"} <= set(w[0])


def test_korthikanti_table5():
    recs = val.korthikanti_comparison()
    assert len(recs) == 8
    assert np.mean([abs(r["error"]) for r in recs]) <= KORTHIKANTI_MAX


def test_published_comparisons_cover_every_source():
    recs = val.published_comparisons()
    sources = {r["source"].split(",")[0].split(" (")[0] for r in recs}
    for s in ("Korthikanti et al. 2022", "Narayanan et al. 2021", "Smith et al. 2022",
              "The Llama 3 Herd of Models", "Chowdhery et al. 2022"):
        assert any(x.startswith(s) for x in sources), s
    llama = [r for r in recs if r["name"].startswith("llama3")]
    assert all(abs(r["error"]) < 0.15 for r in llama)


def test_vocab_padding_as_megatron():
    assert val.padded_vocab(50257, 1) == 50304
    assert val.padded_vocab(50257, 2) == 50432
    assert val.padded_vocab(50257, 8) == 51200


def test_calibration_is_physical():
    c = val.VTRAIN_CALIBRATION
    assert isinstance(c, Calibration)
    for f in ("gemm_efficiency", "hbm_efficiency", "nvlink_efficiency", "network_efficiency"):
        assert 0.2 <= getattr(c, f) <= 1.0, f
    assert 1e-6 <= c.kernel_time <= 2e-4


def test_bad_arguments():
    with pytest.raises(ValueError, match="valid choices"):
        val.load("triple")
    with pytest.raises(ValueError, match="cannot fit"):
        val.fit(fields=("peak_flops",))
