import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaling_lib import hardware as hw
from scaling_lib import roofline as rl

pos = st.floats(min_value=1e-3, max_value=1e18, allow_nan=False, allow_infinity=False)
dims = st.integers(min_value=1, max_value=2**16)


# Golden values: datasheet numbers (H100 SXM5: 989.4e12 bf16 dense, 3.35e12 B/s; TPU v5e:
# 197e12, 819e9 B/s; Google Cloud TPU docs) and the critical batches they imply.
def test_critical_batch_golden():
    assert rl.critical_batch("h100") == pytest.approx(989.4e12 / 3.35e12)  # ≈295
    assert rl.critical_batch("tpu-v5e") == pytest.approx(197e12 / 819e9)  # ≈240
    assert round(rl.critical_batch("h100")) == 295
    assert round(rl.critical_batch("tpu-v5e")) == 241


def test_int8_weights_halve_critical_batch():
    for name in ("h100", "tpu-v5e", "a100-80gb"):
        assert rl.critical_batch(name, weight_dtype="int8") == pytest.approx(
            rl.critical_batch(name) / 2)
    # int8 compute doubles the peak as well: back to the bf16 figure on v5e (394 vs 197 TOPS).
    assert rl.critical_batch("tpu-v5e", "int8") == pytest.approx(rl.critical_batch("tpu-v5e"))


def test_exact_critical_batch_makes_matmul_balanced():
    acc = hw.get("h100")
    b = rl.critical_batch(acc, D=8192, F=28672)
    assert rl.matmul_intensity(b, 8192, 28672) == pytest.approx(acc.critical_intensity())
    # tiny D, F: no batch is large enough
    assert rl.critical_batch(acc, D=64, F=64) == np.inf


def test_matmul_counts_golden():
    assert rl.matmul_flops(4096, 4096, 4096) == 2 * 4096**3
    assert rl.matmul_bytes(1, 2, 3) == 2 * (2 + 3 + 6)
    assert rl.matmul_bytes(1, 2, 3, weight_dtype="int8") == 2 * (2 + 3) + 6


def test_time_bounds_and_matmul_time():
    assert rl.time_bounds(2.0, 1.0) == (2.0, 3.0)
    t = rl.matmul_time(4096, 4096, 4096, "h100")
    assert t == pytest.approx(2 * 4096**3 / 989.4e12)  # compute-bound
    t_small = rl.matmul_time(1, 8192, 8192, "h100")
    assert t_small == pytest.approx(rl.matmul_bytes(1, 8192, 8192) / 3.35e12)  # memory-bound


def test_network_critical_dim_golden():
    # 2 chips, bf16, one v5e ICI link of 45e9 B/s: D* = 2 * 197e12 / 45e9 ≈ 8756
    assert rl.network_critical_dim("tpu-v5e", link_bytes_per_s=45e9) == pytest.approx(8755.6, rel=1e-4)
    tm, tc = rl.sharded_matmul_times(1024, 8756 * 1.01, 4096, 2, "tpu-v5e", link_bytes_per_s=45e9)
    assert tm > tc


@pytest.mark.parametrize("call", [
    lambda: rl.matmul_flops(0, 1, 1),
    lambda: rl.matmul_flops(-4, 1, 1),
    lambda: rl.matmul_bytes(1, 1, 1, "fp7"),
    lambda: rl.critical_batch("h1000"),
    lambda: rl.critical_batch("v100", "bf16"),
    lambda: rl.t_math(1.0, 0.0),
    lambda: rl.critical_batch("h100", D=1024),
])
def test_bad_input_raises_value_error(call):
    with pytest.raises(ValueError):
        call()


def test_unknown_accelerator_lists_known():
    with pytest.raises(ValueError, match="known: .*h100.*tpu-v5e"):
        rl.critical_batch("h1000")


def test_broadcasting():
    B = np.array([1, 64, 4096])
    out = rl.matmul_time(B, 8192, 8192, "h100")
    assert out.shape == (3,)
    assert np.all(np.diff(out) > 0)


@settings(max_examples=100, deadline=None)
@given(pos, pos)
def test_bounds_ordered(a, b):
    lo, hi = rl.time_bounds(a, b)
    assert max(a, b) == lo <= hi <= 2 * lo


@settings(max_examples=100, deadline=None)
@given(dims, dims, dims)
def test_matmul_intensity_bounded_by_batch(B, D, F):
    # I = BDF / (BD + DF + BF) < min(B, D, F) for bf16
    i = rl.matmul_intensity(B, D, F)
    assert 0 < i <= min(B, D, F)


@settings(max_examples=100, deadline=None)
@given(dims, dims, dims, dims)
def test_matmul_time_monotone_in_batch(B1, B2, D, F):
    lo, hi = sorted((B1, B2))
    assert rl.matmul_time(lo, D, F, "tpu-v5e") <= rl.matmul_time(hi, D, F, "tpu-v5e")


@settings(max_examples=100, deadline=None)
@given(st.floats(min_value=1e-2, max_value=1e6))
def test_attainable_below_roof_and_slope(i):
    acc = hw.get("h100")
    a = rl.attainable_flops_per_s(i, acc)
    assert a <= acc.peak_flops_per_s() and a <= i * acc.hbm_bytes_per_s * (1 + 1e-12)


def test_no_overlap_utilization_half_at_ridge_and_lower_on_newer_chips():
    a100 = hw.get("a100-40gb")
    assert rl.no_overlap_utilization(a100.critical_intensity(), a100) == pytest.approx(0.5)
    # same work on an H100 (compute grew faster than bandwidth): lower utilisation
    assert rl.no_overlap_utilization(a100.critical_intensity(), "h100") < 0.5
    i = np.geomspace(1, 1e4, 50)
    u_ = rl.no_overlap_utilization(i, "h100")
    assert np.all(np.diff(u_) > 0) and np.all((u_ > 0) & (u_ < 1))


def test_elementwise_intensity_counts_every_operand_and_the_output():
    # bf16: a ReLU/scale reads 2 bytes and writes 2 per element; a residual add reads 4, writes 2
    assert rl.elementwise_intensity(1, 1) == pytest.approx(1 / 4)
    assert rl.elementwise_intensity(2, 1) == pytest.approx(1 / 6)
    assert rl.elementwise_intensity(2, 1, "fp32") == pytest.approx(1 / 12)
    # about 0.2 FLOP/byte, not 1: three orders of magnitude under every chip's ridge
    for name in hw.names():
        acc = hw.get(name)
        dtype = next(d for d in ("bf16", "fp16", "fp32") if acc.supports(d))
        assert rl.elementwise_intensity(2, 1, dtype) < acc.critical_intensity(dtype) / 10
    with pytest.raises(ValueError):
        rl.elementwise_intensity(0, 1)


@pytest.mark.parametrize("n", [0.5, 1, 2.5, True, "2", float("nan"), 2**70, -3])
def test_network_critical_dim_rejects_bad_chip_counts(n):
    """n = 0.5 used to give a negative size; n must be a whole number of chips >= 2."""
    with pytest.raises(ValueError, match="whole number of chips >= 2"):
        rl.network_critical_dim("tpu-v5e", n)
