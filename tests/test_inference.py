import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaling_lib import hardware as hw
from scaling_lib import inference as inf
from scaling_lib import models
from scaling_lib import transformer as tx

MODELS = ["llama3-8b", "llama3-70b", "llama3-405b", "llama2-13b", "palm-540b"]


# Golden values from the published configs (Llama 3 Herd of Models, Table 3; HF config.json):
# KV cache per token = 2·L·K·H·2 bytes in bf16.
@pytest.mark.parametrize("model, L", [("llama3-8b", 32), ("llama3-70b", 80), ("llama3-405b", 126)])
def test_llama3_kv_cache_per_token_golden(model, L):
    per_token = 2 * L * 8 * 128 * 2
    assert inf.decode_bytes(model, 1, 1)["kv cache"] == per_token
    assert inf.decode_bytes(model, 4, 8192)["kv cache"] == 4 * 8192 * per_token


def test_weights_read_excludes_untied_embedding_only():
    # Llama 3 8B: 8,030,261,248 parameters, of which V·D = 128,256·4,096 in the input embedding.
    assert inf.weight_bytes_read("llama3-8b") == 2 * (8_030_261_248 - 128_256 * 4096)
    # PaLM ties its embedding: the output matmul reads the shared table, so all of it counts.
    assert inf.weight_bytes_read("palm-540b") == 2 * tx.n_params("palm-540b")
    assert inf.weight_bytes_read("llama3-8b", "int8") == inf.weight_bytes_read("llama3-8b") / 2


@pytest.mark.parametrize("model", MODELS)
def test_decode_flops_sum_to_forward_flops_per_token(model):
    f = inf.decode_flops(model, 8, 4096)
    assert f.total == pytest.approx(8 * tx.flops_per_token(model, 4096, training=False))
    assert f["weights"] == pytest.approx(8 * tx.flops_per_token(model, 4096, training=False,
                                                                include_attention=False))


@pytest.mark.parametrize("model", ["llama3-8b", "llama3-70b", "llama3-405b", "llama2-13b"])
def test_attention_intensity_is_the_gqa_group(model):
    # Attention reads each cached K/V element once and uses it for N/K query heads:
    # 4·S·N·H FLOPs over 2·K·H·S·2 bytes per layer = N/K in bf16, at any batch and context.
    cfg = tx.models.get(model)
    for B, S in ((1, 128), (64, 32768)):
        ratio = inf.decode_flops(cfg, B, S)["attention"] / inf.decode_bytes(cfg, B, S)["kv cache"]
        assert ratio == pytest.approx(cfg.N / cfg.K)


def test_decode_is_memory_bound_for_llama3_70b_on_h100():
    h100 = hw.get("h100")
    for B in (1, 16, 128, 256):
        assert inf.decode_intensity("llama3-70b", B, 8192) < h100.critical_intensity()
    # Batch 1: the step time is the weight read at HBM bandwidth (plus one sequence's cache).
    t = inf.decode_step_time("llama3-70b", 1, 8192, "h100", 8)
    assert t == pytest.approx(inf.decode_bytes("llama3-70b", 1, 8192).total / (8 * 3.35e12))


def test_short_context_large_batch_becomes_compute_bound():
    # With a tiny cache, intensity ≈ B: above the H100's critical intensity (≈295) by B = 512.
    assert inf.decode_intensity("llama3-70b", 512, 16) > hw.get("h100").critical_intensity()
    t = inf.decode_step_time("llama3-70b", 4096, 16, "h100", 8)
    assert t == pytest.approx(inf.decode_flops("llama3-70b", 4096, 16).total / (8 * 989.4e12))


def test_max_cached_tokens_golden_and_no_fit():
    # 8 x 80 GB = 640 GB; 70.55B params x 2 bytes = 141.1 GB of weights; 327,680 B per token.
    free = 8 * 80e9 - 2 * tx.n_params("llama3-70b")
    assert inf.max_cached_tokens("llama3-70b", "h100", 8) == pytest.approx(free / 327680)
    assert inf.max_cached_tokens("llama3-405b", "h100", 1) == 0.0


@settings(max_examples=60, deadline=None)
@given(B=st.integers(1, 4096), S=st.integers(1, 2**17), model=st.sampled_from(MODELS))
def test_properties(B, S, model):
    # Bytes and FLOPs grow with batch; the step time is at least each roofline term; the step's
    # intensity lies between that of the weights alone and that of the cache alone.
    f, b = inf.decode_flops(model, B, S), inf.decode_bytes(model, B, S)
    f2, b2 = inf.decode_flops(model, B + 1, S), inf.decode_bytes(model, B + 1, S)
    assert f2.total > f.total and b2.total > b.total
    i = inf.decode_intensity(model, B, S)
    parts = (f["weights"] / b["weights"], f["attention"] / b["kv cache"])
    assert min(parts) * (1 - 1e-9) <= i <= max(parts) * (1 + 1e-9)
    acc = hw.get("h100")
    t = inf.decode_step_time(model, B, S, acc)
    assert t >= f.total / acc.peak_flops_per_s() * (1 - 1e-12)
    assert t >= b.total / acc.hbm_bytes_per_s * (1 - 1e-12)


def test_broadcasts_over_arrays():
    B = np.array([1, 8, 64])
    t = inf.decode_step_time("llama3-8b", B, 2048, "h100")
    assert t.shape == (3,) and np.all(np.diff(t) > 0)
    assert inf.max_cached_tokens("llama3-8b", "h100", np.array([1, 2])).shape == (2,)


def test_errors():
    with pytest.raises(ValueError, match="S="):
        inf.decode_flops("llama3-8b", 1, 0)
    with pytest.raises(ValueError, match="B="):
        inf.decode_bytes("llama3-8b", -1, 8)
    with pytest.raises(ValueError, match="unknown model"):
        inf.decode_intensity("llama9", 1, 8)
    with pytest.raises(ValueError, match="n_devices"):
        inf.decode_step_time("llama3-8b", 1, 8, "h100", 0)


# ---- the chapter's figures (scaling_lib.course.widgets.inference) -------------------------------------
def test_inference_figures_draw_library_numbers():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scaling_lib.course.widgets import inference as fig

    _, axes = plt.subplots(1, 2)
    fig.plot_kv_cache(axes[0], contexts=[1024, 8192])
    line = axes[0].get_lines()[1]  # llama3-70b
    assert line.get_ydata()[1] == pytest.approx(tx.kv_cache_bytes("llama3-70b", 1, 8192) / 1e9)
    fig.plot_decode_time(axes[1], batches=[1, 2, 4], contexts=(128,))
    first = axes[1].get_lines()[0]
    assert first.get_ydata()[0] == pytest.approx(
        inf.decode_step_time("llama3-70b", 1, 128, "h100", 8) * 1e3)
    plt.close("all")


# ---- MoE experts touched, tensor-parallel all-reduces, where the cache stops fitting ----------
def test_expected_experts_uniform_routing():
    assert inf.expected_experts(8, 2, 1) == 2.0  # one token: exactly k experts
    assert inf.expected_experts(256, 8, 1) == 8.0
    B = np.array([1, 2, 4, 64, 4096])
    e = inf.expected_experts(8, 2, B)
    assert np.all(np.diff(e) > 0) and e[-1] == pytest.approx(8.0)
    # Monte Carlo check of E(1 - (1 - k/E)^B) with k distinct picks per token
    rng = np.random.default_rng(0)
    draws = [len({x for _ in range(4) for x in rng.choice(8, 2, replace=False)})
             for _ in range(4000)]
    assert np.mean(draws) == pytest.approx(float(inf.expected_experts(8, 2, 4)), rel=0.03)
    with pytest.raises(ValueError, match="k=9"):
        inf.expected_experts(8, 9, 1)


def test_moe_decode_reads_touched_experts_only():
    # Mixtral 8x7B in bf16: 93 GB of weights, about 26 GB touched by one token (2 of 8 experts)
    assert inf.weight_bytes_read("mixtral-8x7b") / 1e9 == pytest.approx(93.1, abs=0.1)
    one = inf.weight_bytes_read("mixtral-8x7b", B=1)
    assert one / 1e9 == pytest.approx(25.5, abs=0.1)
    c = models.get("mixtral-8x7b")
    assert one == 2 * (tx.active_param_count(c).total - c.V * c.D)
    assert inf.decode_bytes(c, 1, 1024)["weights"] == one
    assert inf.weight_bytes_read(c, B=10**6) == pytest.approx(inf.weight_bytes_read(c))
    # dense models ignore B
    assert inf.weight_bytes_read("llama3-8b", B=1) == inf.weight_bytes_read("llama3-8b")


def test_tensor_parallel_all_reduces_in_decode():
    from scaling_lib import collectives as co

    c = models.get("llama3-70b")
    assert inf.tp_decode_comm_time(c, 1, 1) == 0
    cl = hw.cluster("h100", 8)
    # 2L + 1 all-reduces (the vocabulary-parallel embedding adds one), each the collectives'
    # cost of a 16 KiB all-reduce on one node (the algorithm a library would pick)
    one = co.group_time("all-reduce", c.D * 2, 8, 1, cl)
    ring = co.all_reduce_time(c.D * 2, 8, co.intra_node_link_bytes_per_s(cl), topology=cl.topology,
                              latency=cl.intra_node.latency)
    assert one < ring  # small messages: one-shot beats the ring's 2(n-1) steps
    assert inf.tp_decode_all_reduces(c) == 2 * c.L + 1
    assert inf.tp_decode_comm_time(c, 1, 8) == pytest.approx((2 * c.L + 1) * one)
    base = inf.decode_step_time(c, 1, 8192, "h100", 8)
    with_tp = inf.decode_step_time(c, 1, 8192, "h100", 8, tp=8)
    assert with_tp == pytest.approx(base + (2 * c.L + 1) * one)
    # latency-bound at batch 1: doubling a tiny message barely changes the time
    assert inf.tp_decode_comm_time(c, 2, 8) / inf.tp_decode_comm_time(c, 1, 8) < 1.01


def test_decode_figure_marks_where_the_cache_stops_fitting():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scaling_lib.course.widgets import inference as fig

    _, ax = plt.subplots()
    fit = fig.plot_decode_time(ax, contexts=(8192,))
    assert fit[8192] == pytest.approx(inf.max_cached_tokens("llama3-70b", "h100", 8) / 8192)
    markers = [ln for ln in ax.get_lines() if ln.get_marker() == "x" and len(ln.get_xdata())]
    assert markers and markers[0].get_xdata()[0] == pytest.approx(fit[8192])
    plt.close("all")


def test_new_function_errors():
    with pytest.raises(ValueError, match="tp=2.5"):
        inf.tp_decode_comm_time("llama3-70b", 1, 2.5)
    with pytest.raises(ValueError, match="B="):
        inf.expected_experts(8, 2, 0)


def test_max_batch_is_the_floor_of_cached_tokens_over_S():
    from scaling_lib import inference as _inf
    room = _inf.max_cached_tokens("llama3-70b", "h100", 8)
    assert _inf.max_batch("llama3-70b", 8192, "h100", 8) == int(room // 8192)
    assert _inf.max_batch("llama3-70b", 8192, "h100", 8) <= room / 8192 < \
        _inf.max_batch("llama3-70b", 8192, "h100", 8) + 1
