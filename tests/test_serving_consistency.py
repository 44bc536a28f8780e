"""One home per serving quantity: every public route to a quantity gives the same number.

The serving issue's table: time per output token, KV cache per device, all-reduces per decode
step, valid tensor-parallel degrees, the Pareto front and speculative tokens each have exactly
one home; the other names call it. Checked over several models, accelerators, device counts and
batches (and int4, whose FLOPs run in bf16).
"""

import re

import numpy as np
import pytest

from scaling_lib import hardware, inference, memory, models, planner, serving, transformer
from scaling_lib import serving_engine, serving_parallel, serving_sim
from scaling_lib.serving import engine, layout, sim

CASES = [  # model, accelerator, devices, batch, dtype
    ("llama3-70b", "h100", 8, 1, "bf16"), ("llama3-70b", "h100", 8, 64, "int4"),
    ("llama3-70b", "h100", 16, 32, "bf16"), ("llama3-8b", "h100", 64, 256, "fp8"),
    ("llama3-405b", "h100", 16, 8, "bf16"), ("llama2-13b", "tpu-v5e", 8, 16, "bf16"),
    ("llama3-70b", "tpu-v5e", 16, 4, "int8"), ("mixtral-8x7b", "h200", 4, 32, "bf16"),
    ("deepseek-v3", "h200", 16, 8, "fp8"),
]


@pytest.mark.parametrize("model, acc, n, B, dtype", CASES)
def test_tpot_has_one_home(model, acc, n, B, dtype):
    e = serving.estimate(model, acc, n, batch=B, prompt_len=1024, gen_len=256, dtype=dtype)
    tp, pp, r = e.tp, e.pp, e.replicas
    assert tp * pp * r == n and tp in serving.tp_choices(model)
    Br = B / r
    m = min(pp, max(np.ceil(Br), 1))
    want = inference.decode_step_time(model, Br / m, 1024 + 128, acc, tp * pp, dtype, tp=tp,
                                      pp=pp, launch=True)
    assert e.tpot == pytest.approx(want, rel=1e-12)
    assert e.decode_tokens_per_s == pytest.approx(B / e.tpot)
    # the breakdown of the same layout adds up to the same step (plus the launch floor)
    if pp == 1 and r == 1:
        t = serving.decode_time_breakdown(model, acc, n, batch=B, context=1152, dtype=dtype,
                                          tp=tp)
        step = max(t["weights"] + t["kv cache"], t["flops"]) + t["communication"]
        assert max(step, t["launch"]) == pytest.approx(e.tpot)
        # the launch is a floor: for a real model the step equals the one without it
        assert e.tpot == pytest.approx(inference.decode_step_time(model, B, 1152, acc, n, dtype,
                                                                  tp=tp))


@pytest.mark.parametrize("model, acc, n, B, dtype", CASES)
def test_kv_cache_per_device_has_one_home(model, acc, n, B, dtype):
    e = serving.estimate(model, acc, n, batch=B, prompt_len=1000, gen_len=24, dtype=dtype)
    per = serving.kv_cache_bytes_per_device(model, e.tp, np.ceil(B / e.replicas), 1024, dtype,
                                            pp=e.pp)
    assert e.memory["kv cache"] == pytest.approx(per)
    c = models.get(model)
    copies = inference.kv_replication(c, e.tp)
    assert per == pytest.approx(transformer.kv_cache_bytes(c, np.ceil(B / e.replicas), 1024, dtype)
                                * copies / (e.tp * e.pp))
    if e.pp == 1 and not c.is_moe and c.V % e.tp == 0:
        assert serving_parallel.kv_cache_bytes_per_device(c, e.tp, int(np.ceil(B / e.replicas)),
                                                          1024, dtype) == pytest.approx(per)


def test_kv_heads_are_copied_beyond_k_and_cost_memory():
    c = models.get("llama3-70b")  # K = 8
    one = transformer.kv_cache_bytes(c, 16, 4096)
    for tp in (1, 2, 4, 8, 16, 32, 64):
        per = serving.kv_cache_bytes_per_device(c, tp, 16, 4096)
        assert per == pytest.approx(one * max(1, tp // 8) / tp)  # never below one kv head
    e16 = serving.estimate(c, "h100", 16, batch=16, prompt_len=4000, gen_len=96, tp=16)
    assert e16.memory["kv cache"] == pytest.approx(one / 8)  # not one / 16
    # MLA: the latent serves every head, so each tensor-parallel rank holds all of it
    ds = models.get("deepseek-v3")
    assert serving.kv_cache_bytes_per_device(ds, 8, 1, 1000) == pytest.approx(
        transformer.kv_cache_bytes(ds, 1, 1000))


def test_all_reduces_per_decode_step_have_one_home():
    c = models.get("llama3-70b")
    n = inference.tp_decode_all_reduces(c)
    assert n == 2 * c.L + 1  # the vocabulary-parallel embedding's all-reduce is real
    (comm,) = serving.decode_collectives(c, 8, 4)
    assert comm.count == n and comm.nbytes == 4 * c.D * 2
    one = inference.tp_all_reduce_time(4 * c.D * 2, 8, "h100")
    assert inference.tp_decode_comm_time(c, 4, 8) == pytest.approx(n * one)
    assert serving.decode_comm_bytes(c, 8, 4) == n * comm.nbytes


@pytest.mark.parametrize("model", ["llama3-8b", "llama3-70b", "llama2-13b", "gpt3-175b"])
def test_valid_tp_degrees_have_one_home(model):
    ok = serving.tp_choices(model)
    assert ok == memory.tp_choices(model)
    c = models.get(model)
    for t in range(1, 2 * c.N + 1):
        if t in ok:
            assert serving.check_tp(c, t) == t
        else:
            with pytest.raises(ValueError, match=re.escape(f"choose tp in {ok}")):
                serving.check_tp(c, t)
            n = t * 2
            with pytest.raises(ValueError, match="choose tp in"):
                serving.estimate(c, "h100", n, batch=n, prompt_len=16, gen_len=16, tp=t)


def test_serve_style_device_counts_pick_a_valid_layout():
    # 3 GPUs for llama3-70b: no tp of 3; the layout holds pipeline stages or replicas instead
    e = serving.estimate("llama3-70b", "h100", 3, batch=3, prompt_len=128, gen_len=16)
    assert e.tp in (1,) and e.tp * e.pp * e.replicas == 3
    # 64 GPUs for llama3-8b: tensor parallelism stays inside one node
    e = serving.estimate("llama3-8b", "h100", 64, batch=64, prompt_len=128, gen_len=16)
    assert e.tp <= 8 and e.tp * e.pp * e.replicas == 64


def test_pareto_front_has_one_home():
    rng = np.random.default_rng(1)
    lat, thr = rng.uniform(1, 10, 300).round(1), rng.uniform(0, 10, 300).round(1)
    np.testing.assert_array_equal(serving.pareto_mask(lat, thr), planner.pareto(lat, -thr))


def test_speculative_tokens_have_one_home():
    a = np.linspace(0, 1, 11)
    for g in (0, 1, 4, 8):
        np.testing.assert_allclose(serving.speculative_speedup(a, g, 0.0),
                                   engine.expected_tokens_per_step(a, g))
        np.testing.assert_allclose(serving.speculative_speedup(a, g, 0.1),
                                   engine.expected_tokens_per_step(a, g) / (1 + 0.1 * g))


def test_int4_is_handled_one_way():
    """Weight-only int4: int4 bytes, bf16 FLOPs, everywhere (it used to raise in one home)."""
    assert inference.compute_dtype("h100", "int4") == "bf16"
    t = inference.decode_step_time("llama3-70b", 1, 2048, "h100", 8, "int4", tp=8, launch=True)
    e = serving.estimate("llama3-70b", "h100", 8, batch=1, prompt_len=1920, gen_len=256,
                         dtype="int4", tp=8)
    assert e.tpot == pytest.approx(t)


def test_old_module_names_still_work():
    assert serving_engine.kv_blocks is engine.kv_blocks
    assert serving_sim.simulate is sim.simulate
    assert serving_parallel.front is serving.front
    assert serving.layouts is layout.layouts


# ---- layouts, communication, launch floor, chunked prefill --------------------------------------
def test_default_layout_keeps_tp_inside_the_scale_up_domain():
    assert not serving.estimate("llama3-405b", "h100", 8, batch=1, prompt_len=1024,
                                gen_len=128).fits  # 811 GB of bf16 weights: not one node
    for n in (16, 32):
        e = serving.estimate("llama3-405b", "h100", n, batch=n, prompt_len=1024, gen_len=128)
        assert e.tp <= serving.scale_up_domain("h100") and e.fits


def test_pipeline_stages_give_memory_not_latency():
    kw = dict(batch=1, prompt_len=1024, gen_len=128)
    tp8 = serving.estimate("llama3-70b", "h100", 16, **kw, tp=8, pp=2)
    one = serving.estimate("llama3-70b", "h100", 8, **kw, tp=8)
    assert tp8.memory["weights"] == pytest.approx(one.memory["weights"] / 2)
    assert tp8.tpot > one.tpot  # the stages run one after the other for a token, plus sends


def test_launch_floor_keeps_a_toy_model_above_microseconds():
    toy = models.TransformerConfig(L=1, D=64, F=256, N=4, K=4, H=16, V=128)
    e = serving.estimate(toy, "h100", 1, batch=1, prompt_len=8, gen_len=8)
    assert e.tpot >= inference.GRAPH_LAUNCH_TIME and e.decode_bound == "launch"
    eager = serving.estimate(toy, "h100", 1, batch=1, prompt_len=8, gen_len=8, cuda_graphs=False)
    assert eager.tpot > e.tpot


def test_chunked_prefill_bounds_the_activations():
    kw = dict(batch=768, prompt_len=1024, gen_len=256, tp=8)
    static = serving.estimate("llama3-70b", "h100", 8, **kw, prefill="static")
    chunked = serving.estimate("llama3-70b", "h100", 8, **kw)
    assert not static.fits and chunked.fits  # weights + cache: 58 of 80 GB
    assert chunked.memory["weights"] + chunked.memory["kv cache"] < 60e9
    c = models.get("llama3-70b")
    assert chunked.memory["activations"] == pytest.approx(
        serving.DEFAULT_CHUNK_TOKENS * (2 * c.D + 2 * c.F / 8) * 2)
    # the same prompts, chunked, take about as long as one static pass (compute-bound)
    assert chunked.ttft == pytest.approx(static.ttft, rel=0.25)


def test_kv_shrinking_architectures():
    base = models.get("llama3-8b")
    b = transformer.kv_cache_bytes(base, 1, 8192)
    assert transformer.kv_cache_bytes(base.with_changes(K=1), 1, 8192) == b / 8       # MQA
    assert transformer.kv_cache_bytes(base.with_changes(kv_share=2), 1, 8192) == b / 2  # CLA
    assert transformer.kv_cache_bytes(base.with_changes(sliding_window=2048), 1, 8192) == b / 4
    assert transformer.kv_cache_bytes(base, 1, 8192, "fp8") == b / 2
    ds = models.get("deepseek-v3")  # MLA: (512 + 64) values per token and layer
    assert transformer.kv_cache_bytes(ds, 1, 1, "bf16") == ds.L * (512 + 64) * 2
    e = serving.estimate(base.with_changes(kv_share=2), "h100", 1, batch=64, prompt_len=4000,
                         gen_len=96)
    f = serving.estimate(base, "h100", 1, batch=64, prompt_len=4000, gen_len=96)
    assert e.memory["kv cache"] == pytest.approx(f.memory["kv cache"] / 2) and e.tpot < f.tpot


# ---- the request simulator ----------------------------------------------------------------------
KW = dict(prompt_len=1024, gen_len=64, prefill_time=0.05, t0=0.01, t1=1e-4)


def test_tail_latencies_are_ordered_and_goodput_counts_the_slo():
    r = sim.simulate(kv_budget_tokens=20 * 1088, rate=8.0, n_requests=2000, seed=3,
                     slo_ttft=0.5, slo_tpot=0.02, **KW)
    for w in ("ttft", "tpot", "latency"):
        p = r.percentiles(w)
        assert p["p50"] <= p["p90"] <= p["p99"]
    met = (r.ttft <= 0.5) & (r.tpot <= 0.02)
    assert r.slo_attainment == pytest.approx(met.mean())
    span = r.finish.max() - r.arrival[0]
    assert r.goodput == pytest.approx(met.sum() / span)


def test_paged_cache_preempts_when_it_runs_out():
    tight = sim.simulate(kv_budget_tokens=8400, arrival_times=np.zeros(64),
                         kv_policy="paged", max_batch=16, **KW)
    assert tight.preemptions > 0 and np.all(np.isfinite(tight.finish))
    roomy = sim.simulate(kv_budget_tokens=64 * 1088, arrival_times=np.zeros(64),
                         kv_policy="paged", max_batch=16, **KW)
    assert roomy.preemptions == 0


def test_prefix_cache_hits_cut_the_prefill():
    cold = sim.simulate(kv_budget_tokens=10_000, arrival_times=[0.0], **KW)
    warm = sim.simulate(kv_budget_tokens=10_000, arrival_times=[0.0], prefix_hit_rate=0.75, **KW)
    assert warm.ttft[0] == pytest.approx(cold.ttft[0] / 4)


def test_disaggregated_prefill_prices_the_kv_transfer():
    t = sim.kv_transfer_time("llama3-70b", 4096, "h100")
    link = hardware.cluster("h100", 16).inter_node
    assert t == pytest.approx(link.latency + transformer.kv_cache_bytes("llama3-70b", 1, 4096)
                              / link.bytes_per_s)
    r = sim.simulate(kv_budget_tokens=10_000, arrival_times=[0.0], disaggregated=True,
                     kv_transfer_time=0.03, **KW)
    # first token from the prefill server; the cache moves; then 63 decode steps of batch 1
    assert r.ttft[0] == pytest.approx(0.05)
    assert r.latency[0] == pytest.approx(0.05 + 0.03 + 63 * (0.01 + 1e-4))


def test_a_given_pp_keeps_the_tp_degrees_it_divides():
    lays = serving.layouts("llama3-70b", "h100", 12, pp=4)
    assert lays and all(x.pp == 4 and x.tp * x.pp * x.replicas == 12 for x in lays)
    with pytest.raises(ValueError, match="pp=5 does not divide"):
        serving.layouts("llama3-70b", "h100", 12, pp=5)


def test_simulator_takes_per_request_lengths():
    P = np.array([512, 1024, 2048])
    r = sim.simulate(prompt_len=P, gen_len=np.array([4, 8, 16]), kv_budget_tokens=100_000,
                     prefill_time=0.01, t0=0.01, t1=0.0, arrival_times=[0.0, 10.0, 20.0])
    # prefill scales with each prompt (0.01 s for the first one's 512 tokens), alone on the server
    np.testing.assert_allclose(r.ttft, 0.01 * P / 512)
    np.testing.assert_allclose(r.latency, 0.01 * P / 512 + 0.01 * (np.array([4, 8, 16]) - 1))
