"""serving_engine (paging, speculation, sharding for decode) and the serving additions of Ch 21."""

import math

import numpy as np
import pytest

from scaling_lib import inference, serving, serving_engine as eng, serving_sim as sim
from scaling_lib import serving as sv


def test_blocks_and_allocation():
    assert eng.kv_blocks([1, 16, 17], 16).tolist() == [1, 1, 2]
    assert eng.allocate_kv_blocks([16, 16, 16], 16, 3) == 3
    assert eng.allocate_kv_blocks([16, 16, 16], 16, 2) == 2
    assert eng.allocate_kv_blocks([5, 900, 5], 16, 20) == 1  # no skipping ahead
    assert eng.allocate_kv_blocks([5], 16, 0) == 0


def test_waste_paged_is_below_one_block_per_sequence():
    lengths = np.arange(1, 2000, 37)
    paged = eng.kv_waste(lengths, block_size=16)
    assert 0 <= paged < 15 * lengths.size / (lengths.sum() + 15 * lengths.size)
    assert eng.kv_waste(lengths, max_len=4096) > 0.5
    assert eng.kv_waste([4096], max_len=4096) == 0
    with pytest.raises(ValueError, match="exactly one"):
        eng.kv_waste(lengths)
    with pytest.raises(ValueError, match="exceeds max_len"):
        eng.kv_waste([5000], max_len=4096)


def test_speculation_limits():
    assert eng.expected_tokens_per_step(0.0, 5) == 1.0
    assert eng.expected_tokens_per_step(1.0, 5) == 6.0
    a, g = 0.7, 4
    assert eng.expected_tokens_per_step(a, g) == pytest.approx(sum(a ** i for i in range(g + 1)))
    c = eng.speculative_break_even_cost(a, g)
    assert serving.speculative_speedup(a, g, c) == pytest.approx(1.0)
    assert serving.speculative_speedup(a, g, 0.9 * c) > 1
    assert serving.speculative_speedup(a, g, 1.1 * c) < 1


def test_model_parallel_times_cross_at_the_limit():
    beta = eng.hbm_ici_ratio("tpu-v5e")
    limit = eng.model_parallel_limit(28672, 64, beta)
    t = eng.model_parallel_times(64, 8192, 28672, 32, "tpu-v5e")
    assert t["ici"] / t["hbm"] == pytest.approx(32 / limit)


def test_2d_weight_stationary_optimum_and_crossover():
    B, D, F, W = 32, 8192, 28672, 9e10
    for n in (16, 64, 256):
        best = eng.weight_stationary_comm_time(B, D, F, n, W)
        for x in (1.0, 2.0, eng.best_2d_split(D, F, n) * 1.5):
            assert eng.weight_stationary_comm_time(B, D, F, n, W, X=x) >= best * (1 - 1e-12)
        assert best == pytest.approx(4 * 2 * B * math.sqrt(D * F / n) / W)
    n_star = 4 * F / D
    one = eng.weight_stationary_comm_time(B, D, F, 16, W, layout="1d")
    assert eng.weight_stationary_comm_time(B, D, F, int(n_star) - 1, W) > one
    assert eng.weight_stationary_comm_time(B, D, F, int(n_star) + 2, W) < one


def test_kv_layout():
    assert eng.kv_cache_layout(8, 4) == (4, 1)
    assert eng.kv_cache_layout(8, 64) == (8, 8)
    with pytest.raises(ValueError, match="multiple of 4"):
        eng.kv_cache_layout(8, 32, batch=6)


def test_chunked_prefill_shares_the_weight_read():
    kw = dict(prompt_len=8192, batch=64, context=1152)
    ttft, step = eng.chunked_prefill("llama3-70b", "h100", 8, chunk_tokens=np.array(
        [64, 512, 8192, 10**6]), **kw)
    assert step[2] == step[3] and ttft[2] == ttft[3] == step[2]  # unchunked: one stall
    assert ttft[0] > ttft[1] > ttft[2] and step[0] < step[1] < step[2]
    dec = float(inference.decode_step_time("llama3-70b", 64, 1152, "h100", 8, tp=8, launch=True))
    parts = sv.mixed_step_parts("llama3-70b", "h100", 8, decode_batch=64, context=1152,
                                prefill_tokens=0, prompt_len=8192)
    assert float(parts["time"]) == pytest.approx(dec, rel=1e-9)  # no chunk: a decode step
    # the shared read: one mixed iteration is cheaper than a decode step plus the chunk alone
    alone = sv.mixed_step_parts("llama3-70b", "h100", 8, decode_batch=1, context=1,
                                prefill_tokens=64, prompt_len=8192)
    assert step[0] < dec + float(alone["time"])
    c_star = eng.ridge_chunk_tokens("llama3-70b", "h100", 8, **kw)
    at = sv.mixed_step_parts("llama3-70b", "h100", 8, decode_batch=64, context=1152,
                             prefill_tokens=c_star, prompt_len=8192)
    assert float(at["compute"]) == pytest.approx(float(at["memory"]), rel=1e-6)


def test_schedule_step_is_the_simulators_loop():
    t_pre, t0, t1, cap, G = 0.5, 1.0, 0.1, 2, 4
    left, waiting, now = [], 5, 0.0
    while left or waiting:
        b = len(left)
        new = min(waiting, cap - b)
        now += new * t_pre + (t0 + t1 * b if b else 0.0)
        left, waiting = sim.schedule_step(left, waiting, cap, G)
    r = sim.simulate(prompt_len=8, gen_len=G, kv_budget_tokens=cap * (8 + G), prefill_time=t_pre,
                     t0=t0, t1=t1, arrival_times=np.zeros(5))
    assert r.max_batch == cap and float(r.finish.max()) == pytest.approx(now)


def test_estimate_and_breakdown_agree():
    B = np.array([1, 32, 256])
    e = serving.estimate("llama3-70b", "h100", 8, batch=B, prompt_len=2048, gen_len=512, tp=8)
    t = serving.decode_time_breakdown("llama3-70b", "h100", 8, batch=B, context=2048 + 256)
    step = np.maximum(t["weights"] + t["kv cache"], t["flops"]) + t["communication"]
    assert np.all(t["launch"] == inference.launch_time("llama3-70b"))  # one graph launch per step
    assert np.maximum(step, t["launch"]) == pytest.approx(e.tpot)
    assert np.all(t["launch"] < step)  # a floor only a tiny model reaches
    assert e.tpot == pytest.approx(inference.decode_step_time("llama3-70b", B, 2304, "h100", 8,
                                                              tp=8, launch=True))


def test_int4_weights_multiply_in_bf16():
    assert serving.compute_dtype("h100", "int4") == "bf16"
    e4 = serving.estimate("llama3-70b", "h100", 8, batch=512, prompt_len=512, gen_len=64,
                          dtype="int4", kv_dtype="fp8", tp=8)
    e8 = serving.estimate("llama3-70b", "h100", 8, batch=512, prompt_len=512, gen_len=64,
                          dtype="fp8", kv_dtype="fp8", tp=8)
    assert e4.memory["weights"] == pytest.approx(e8.memory["weights"] / 2)
    assert e4.ttft > e8.ttft  # prefill at the bf16 peak, half fp8's
    # the decode step of int4 weights is defined (bf16 FLOPs, int4 bytes) in its one home too
    assert inference.decode_step_time("llama3-70b", 1, 1024, "h100", 8, "int4", tp=8) < \
        inference.decode_step_time("llama3-70b", 1, 1024, "h100", 8, "fp8", tp=8)


def test_best_batch_meets_the_budget():
    b = serving.best_batch("llama3-8b", "h100", 2, tpot_budget=0.01, prompt_len=1024, gen_len=256)
    e = serving.estimate("llama3-8b", "h100", 2, batch=np.array([b, b + 1]), prompt_len=1024,
                         gen_len=256)
    assert e.tpot[0] <= 0.01 and (e.tpot[1] > 0.01 or not e.fits[1])
    assert serving.best_batch("llama3-70b", "h100", 8, tpot_budget=1e-3, prompt_len=8,
                              gen_len=8) == 0


def test_mixed_step_parts_checks_its_input():
    with pytest.raises(ValueError, match="context"):
        sv.mixed_step_parts("llama3-70b", "h100", 8, decode_batch=1, context=[1, 2],
                            prefill_tokens=1, prompt_len=8)
    with pytest.raises(ValueError, match="tp=3"):
        sv.mixed_step_parts("llama3-70b", "h100", 3, decode_batch=1, context=8,
                            prefill_tokens=1, prompt_len=8)
