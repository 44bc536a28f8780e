"""Sizing a deployment (``scaling_lib.serving_parallel``): topologies, the smallest one that fits,
the latency-throughput front, the assumed GPT-4-class
shape. Numpy only (the sharded decode itself is tests/test_decode_sharded.py)."""

import numpy as np
import pytest

from scaling_lib import hardware, models, serving, transformer
from scaling_lib import serving_parallel as sp
from scaling_lib.units import dtype_bytes

P, G = 2048, 512


def test_topologies():
    assert sp.topologies("tpu-v5e") == [1, 4, 8, 16, 32, 64, 128, 256]
    assert sp.topologies("h100", 16) == [1, 2, 4, 8, 16]
    assert 2 not in sp.topologies("tpu-v6e")


@pytest.mark.parametrize("model", ["llama3-8b", "llama3-70b", "llama3-405b"])
@pytest.mark.parametrize("acc", ["tpu-v5e", "h100", "a100-80gb"])
@pytest.mark.parametrize("dtype", ["bf16", "int8", "int4"])
def test_smallest_topology_is_the_first_that_fits_and_splits_the_heads(model, acc, dtype):
    c, hbm = models.get(model), hardware.get(acc).hbm_bytes
    n = sp.smallest_topology(model, acc, dtype=dtype)
    assert n >= serving.min_devices(model, acc, dtype=dtype)
    assert transformer.n_params(c) * dtype_bytes(dtype) / n <= hbm
    assert n == 1 or (c.N % n == 0 and (c.K % n == 0 or n % c.K == 0))
    smaller = [m for m in sp.topologies(acc) if m < n]
    for m in smaller:  # every smaller topology fails the memory or the head rule
        fits = transformer.n_params(c) * dtype_bytes(dtype) / m <= hbm
        heads = m == 1 or (c.N % m == 0 and (c.K % m == 0 or m % c.K == 0))
        assert not (fits and heads)
    with_kv = sp.smallest_topology(model, acc, dtype=dtype, batch=32, context=8192, usable=0.9)
    assert with_kv is None or with_kv >= n


def test_llama3_405b_needs_two_nodes_in_bf16_and_one_in_fp8():
    """Llama 3 paper (Llama Team 2024, sections 6.1-6.2): in BF16 the 405B model does not fit one
    machine of 8 H100s and is served on 16 GPUs over two machines; FP8 quantization fits one."""
    assert sp.smallest_topology("llama3-405b", "h100") == 16
    assert sp.smallest_topology("llama3-405b", "h100", dtype="fp8") == 8


def test_front_points_are_not_dominated():
    f = sp.front("llama3-70b", "h100", [4, 8, 16], [1, 4, 16, 64, 256], prompt_len=P,
                 gen_len=G, price_per_device_hour=2.0)
    on = np.flatnonzero(f["pareto"])
    assert on.size >= 3
    for i in on:
        better = (f["tpot"] <= f["tpot"][i]) & (f["per_device"] >= f["per_device"][i]) & (
            (f["tpot"] < f["tpot"][i]) | (f["per_device"] > f["per_device"][i]))
        assert not better.any()
    np.testing.assert_allclose(f["cost"], 2.0 * f["n"] / (3600 * f["tokens_per_s"]) * 1e6)
    assert "cost" not in sp.front("llama3-70b", "h100", [8], [1], prompt_len=P, gen_len=G)


def test_gpt4_class_matches_the_estimates_it_claims_and_is_labelled():
    g = sp.GPT4_CLASS_ASSUMED
    assert 1.7e12 < transformer.n_params(g) < 1.9e12       # "about 1.8T"
    assert 2.5e11 < transformer.n_params(g, active=True) < 3.2e11  # "about 280B active"
    assert (g.L, g.E, g.k) == (120, 16, 2)
    assert "unconfirmed" in g.source and "assumed" in g.name


def test_errata_constants():
    assert hardware.get("h100").hbm_bytes == 80e9 < sp.H100_NVL_HBM_BYTES == 94e9
    assert hardware.get("h200").hbm_bytes == 141e9
    assert hardware.get("a100-80gb").link_bytes_per_s == 300e9  # NVLink 3: 600 GB/s both ways


@pytest.mark.parametrize("call, match", [
    (lambda: sp.smallest_topology("llama3-70b", "h100", usable=1.5), "usable"),
    (lambda: sp.memory_per_device("llama3-70b", 8, batch=[1, 2], context=8), "single"),
    (lambda: sp.front("llama3-70b", "h100", [8], list(range(1, 5000)), prompt_len=P,
                      gen_len=G), "at most 4096"),
    (lambda: sp.decode_collectives("llama3-70b", 6, 1), "choose tp in"),
])
def test_bad_input_raises_value_error(call, match):
    with pytest.raises(ValueError, match=match):
        call()
