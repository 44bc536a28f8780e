"""One real tensor-parallel decode step on simulated CPU devices (``simulate.decode_step``).

(1) The one-device decode step equals the model's own forward pass over the prompt plus the new
token (last-position logits, and the cache it appends to equals the prefill's keys and values).
(2) For tp in {2, 4, 8}, with kv heads split (tp <= K) or copied (tp > K, grouped-query
attention), the sharded step's logits and updated cache equal the one-device step's in float32,
normwise relative difference below 1e-5, and the copies of a replicated kv head agree.
(3) The bytes per (collective kind, group size) XLA compiled equal
``serving_parallel.decode_collectives``: 2L + 1 all-reduces of B·D·a bytes (2L with the
embedding replicated). bf16 collectives run in f32 on XLA:CPU (``simulate.CPU_PROMOTED``), so a
bf16 step moves the f32 prediction's bytes.

Asks for 8 CPU devices before JAX starts, like tests/test_train_step.py (same count).
"""

import tempfile

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from scaling_lib import simulate as sim  # noqa: E402
from scaling_lib.models import TransformerConfig  # noqa: E402
from scaling_lib.parallelism import totals  # noqa: E402
from scaling_lib.serving_parallel import (decode_collectives, decode_comm_bytes,  # noqa: E402
                                          kv_cache_bytes_per_device)
from scaling_lib.simulate import model as sim_model  # noqa: E402
from scaling_lib.simulate.decode import prefill  # noqa: E402

sim.use_cpu_devices(8)
jax.config.update("jax_compilation_cache_dir", tempfile.mkdtemp(prefix="scaling_lib_jax_"))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)

CFG = TransformerConfig(L=2, D=32, F=64, N=8, K=2, H=8, V=64, name="tiny-gqa")
B, S = 4, 6
RTOL = 1e-5


def rel_err(got, want) -> float:
    return float(np.max(np.abs(got - want)) / np.max(np.abs(want)))


@pytest.fixture(scope="module")
def reference():
    return sim.decode_step(CFG, 1, B=B, S=S)


def test_one_device_decode_equals_the_full_forward_pass(reference):
    r = reference
    assert r.collectives == []
    full = np.concatenate([r.prompt, r.tokens[:, None]], axis=1)         # [B, S + 1]
    logits, k, v = prefill(CFG, sim_model.init_params(CFG, 0), full)
    assert r.logits.shape == (B, CFG.V)
    assert r.new_k_cache.shape == (CFG.L, B, S + 1, CFG.K, CFG.H)
    assert rel_err(r.logits, logits) < RTOL
    assert rel_err(r.new_k_cache, k) < RTOL and rel_err(r.new_v_cache, v) < RTOL
    np.testing.assert_array_equal(r.new_k_cache[:, :, :S], r.k_cache)  # the old cache is kept


@pytest.mark.parametrize("tp, vocab_parallel", [(2, True), (4, True), (8, True), (8, False)])
def test_sharded_decode_equals_one_device_and_collectives_match(tp, vocab_parallel, reference):
    r = sim.decode_step(CFG, tp, B=B, S=S, vocab_parallel_embedding=vocab_parallel)
    assert r.kv_copies == max(1, tp // CFG.K)
    assert r.copy_spread == 0.0  # each copy of a kv head computed the same key and value
    for name in ("logits", "new_k_cache", "new_v_cache"):
        assert rel_err(getattr(r, name), getattr(reference, name)) < RTOL, name
    predicted = totals(decode_collectives(CFG, tp, B, "f32",
                                          vocab_parallel_embedding=vocab_parallel))
    assert sim.emitted_totals(r.collectives) == predicted
    assert sum(predicted.values()) == decode_comm_bytes(
        CFG, tp, B, "f32", vocab_parallel_embedding=vocab_parallel)
    assert {c.kind for c in r.collectives} == {"all-reduce"}


def test_bf16_decode_collectives_widened_to_f32(reference):
    r = sim.decode_step(CFG, 4, B=B, S=S, dtype="bf16")
    assert sim.emitted_totals(r.collectives) == totals(decode_collectives(CFG, 4, B, "f32"))
    assert rel_err(r.logits, reference.logits) < 0.05  # bf16 rounding


def test_prediction_counts_and_kv_per_device():
    (c,) = decode_collectives("llama3-70b", 8, 16)
    assert (c.kind, c.group_size, c.count, c.nbytes) == ("all-reduce", 8, 161, 16 * 8192 * 2.0)
    assert decode_collectives("llama3-70b", 1, 16) == []
    (c,) = decode_collectives("llama3-70b", 8, 16, vocab_parallel_embedding=False)
    assert c.count == 160
    per8 = kv_cache_bytes_per_device("llama3-70b", 8, 2, 4096)
    assert kv_cache_bytes_per_device("llama3-70b", 4, 2, 4096) == 2 * per8
    assert kv_cache_bytes_per_device("llama3-70b", 32, 2, 4096) == per8  # copies: one head each


@pytest.mark.parametrize("kwargs, match", [
    ({"tp": 3}, "choose tp in"),
    ({"tp": 16}, "simulated devices"),
    ({"tp": 2, "dtype": "fp8"}, "valid choices"),
    ({"tp": 2, "B": 0}, "B=0"),
])
def test_unsupported_settings_raise(kwargs, match):
    args = {"B": B, "S": S, **kwargs}
    tp = args.pop("tp")
    with pytest.raises(ValueError, match=match):
        sim.decode_step(CFG.with_changes(N=16) if tp == 16 else CFG, tp, **args)


def test_moe_refused():
    with pytest.raises(ValueError, match="MoE|E=4"):
        sim.decode_step(CFG.with_changes(E=4, k=2), 2, B=B, S=S)
    with pytest.raises(ValueError, match="MoE"):
        decode_collectives("mixtral-8x7b", 8, 1)
