"""scaling_lib.serving_sim: the continuous-batching simulator against closed forms."""

import numpy as np
import pytest

from scaling_lib import inference, serving, serving_sim as sim

T0, T1, PRE = 0.01, 1e-4, 0.05
KW = dict(prompt_len=1024, gen_len=64, prefill_time=PRE, t0=T0, t1=T1)


def test_single_request_closed_form():
    r = sim.simulate(kv_budget_tokens=10_000, arrival_times=[3.0], **KW)
    assert r.ttft[0] == pytest.approx(PRE)
    assert r.latency[0] == pytest.approx(PRE + 63 * (T0 + T1))
    assert r.first_token[0] == pytest.approx(3.0 + PRE)


def test_light_load_every_request_sees_the_single_request_latency():
    alone = PRE + 63 * (T0 + T1)
    times = np.arange(20) * (alone * 1.5)  # each leaves before the next arrives
    r = sim.simulate(kv_budget_tokens=10_000, arrival_times=times, **KW)
    np.testing.assert_allclose(r.latency, alone)
    np.testing.assert_allclose(r.ttft, PRE)


def test_saturated_throughput_matches_closed_form():
    budget = 32 * (1024 + 64)
    r = sim.simulate(kv_budget_tokens=budget, arrival_times=np.zeros(3000), **KW)
    assert r.max_batch == 32
    want = sim.saturated_tokens_per_s(32, 64, PRE, T0, T1)
    assert r.tokens_per_s == pytest.approx(want, rel=0.02)


def test_poisson_overload_tends_to_saturated_rate_and_light_load_to_arrival_rate():
    budget = 16 * (1024 + 64)
    sat = sim.saturated_tokens_per_s(16, 64, PRE, T0, T1)
    heavy = sim.simulate(kv_budget_tokens=budget, rate=1000.0, n_requests=2000, **KW)
    assert heavy.tokens_per_s == pytest.approx(sat, rel=0.03)
    light = sim.simulate(kv_budget_tokens=budget, rate=0.5, n_requests=400, seed=1, **KW)
    # under light load the server keeps up: output rate = arrival rate x G (to sampling noise)
    assert light.tokens_per_s == pytest.approx(0.5 * 64, rel=0.15)
    assert np.median(light.ttft) == pytest.approx(PRE, rel=0.05)
    # queueing: heavier load means longer waits for the first token
    assert np.mean(heavy.ttft) > 10 * np.mean(light.ttft)


def test_kv_budget_caps_the_batch_and_latency_grows_with_load():
    lat = [np.mean(sim.simulate(kv_budget_tokens=8 * 1088, rate=rate, n_requests=600, seed=2,
                                **KW).latency) for rate in (1.0, 5.0, 20.0)]
    assert lat[0] < lat[1] < lat[2]
    r = sim.simulate(kv_budget_tokens=8 * 1088 + 1000, rate=50.0, n_requests=300, **KW)
    assert r.max_batch == 8 and r.mean_batch <= 8


def test_linear_step_time_reproduces_decode_step_time():
    t0, t1 = sim.linear_step_time("llama3-70b", "h100", 8, 4096)
    for b in (1, 8, 32):
        exact = inference.decode_step_time("llama3-70b", b, 4096, "h100", 8, tp=8, launch=True)
        # the all-reduces grow with b (their bytes), which the linear form leaves out: 3% at b=32
        assert exact * 0.96 < t0 + t1 * b <= exact * (1 + 1e-9)
    e = serving.estimate("llama3-70b", "h100", 8, batch=1, prompt_len=4064, gen_len=64)
    assert t0 + t1 == pytest.approx(e.tpot, rel=1e-3)


@pytest.mark.parametrize("kw, match", [
    (dict(kv_budget_tokens=100, arrival_times=[0.0]), "exceed kv_budget_tokens"),
    (dict(kv_budget_tokens=4096, arrival_times=[1.0, 0.0]), "sorted"),
    (dict(kv_budget_tokens=4096), "either rate"),
    (dict(kv_budget_tokens=4096, rate=1.0), "n_requests"),
    (dict(kv_budget_tokens=4096, rate=-1.0, n_requests=3), "rate"),
    (dict(kv_budget_tokens=4096, arrival_times=np.zeros(100_001)), "1 to 100,000"),
])
def test_bad_input_is_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        sim.simulate(**KW, **kw)


def test_chunked_prefill_alone_and_under_load():
    from scaling_lib.serving import sim as ssim
    kw = dict(prompt_len=512, gen_len=4, kv_budget_tokens=4096, prefill_time=0.02, t0=0.01,
              t1=0.0, arrival_times=[0.0])
    whole = ssim.simulate(**kw)
    for c in (100, 512, 4096):  # alone, the chunks add up to the whole prefill
        r = ssim.simulate(**kw, chunk_tokens=c)
        assert float(r.ttft[0]) == pytest.approx(float(whole.ttft[0]))
        assert float(r.latency[0]) == pytest.approx(float(whole.latency[0]))
    load = dict(prompt_len=2048, gen_len=256, kv_budget_tokens=64 * 2304, prefill_time=0.2,
                t0=0.011, t1=6e-5, rate=4.0, n_requests=300, seed=3, max_batch=64)
    plain = ssim.simulate(**load)
    chunked = ssim.simulate(**load, chunk_tokens=256)
    # prefills no longer stall the running sequences: the TPOT tail shrinks
    assert chunked.percentiles("tpot")["p99"] < plain.percentiles("tpot")["p99"]
    with pytest.raises(ValueError, match="chunk_tokens"):
        ssim.simulate(**load, chunk_tokens=256, disaggregated=True)
