import numpy as np
import pytest

from scaling_lib import measure
from scaling_lib.course.nbtools import source_of, table
from scaling_lib.roofline import matmul_flops


def test_device_kind_mapping():
    assert measure.accelerator_from_device_kind("TPU v5 lite") == "tpu-v5e"
    assert measure.accelerator_from_device_kind("TPU v5p") == "tpu-v5p"
    assert measure.accelerator_from_device_kind("TPU v4") == "tpu-v4"
    assert measure.accelerator_from_device_kind("TPU v6 lite") == "tpu-v6e"
    assert measure.accelerator_from_device_kind("NVIDIA A100-SXM4-40GB") == "a100-40gb"
    assert measure.accelerator_from_device_kind("NVIDIA A100-SXM4-80GB") == "a100-80gb"
    assert measure.accelerator_from_device_kind("NVIDIA H200") == "h200"
    assert measure.accelerator_from_device_kind("Tesla V100-SXM2-32GB") == "v100"
    assert measure.accelerator_from_device_kind("cpu") is None


def test_numpy_measurements_are_consistent():
    dev = measure.detect_device(use_jax=False)
    assert dev.backend == "numpy" and dev.kind == "cpu" and dev.dtype == "fp32"
    m = measure.measure_matmuls([16, 64], dev, repeats=1)
    assert np.all(m.seconds > 0)
    assert np.array_equal(m.flops, matmul_flops(m.sizes, m.sizes, m.sizes))
    assert np.allclose(m.intensity, m.sizes / 6)  # fp32 square matmul: 2n^3 / (3 * 4 n^2)
    acc = measure.measured_accelerator(m, 1e10)
    assert acc.peak_flops_per_s("fp32") == pytest.approx(m.flops_per_s.max())
    assert acc.critical_intensity("fp32") == pytest.approx(m.flops_per_s.max() / 1e10)


def test_copy_bandwidth_positive():
    assert measure.copy_bandwidth(8e6, repeats=1) > 1e8  # any machine copies > 100 MB/s


def test_bad_sizes():
    with pytest.raises(ValueError):
        measure.measure_matmuls([0, 16])


def test_nbtools_table_and_source():
    assert table([{"a": 1, "b": 2.5}]).splitlines()[2] == "| 1 | 2.5 |"
    assert "def matmul_flops" in source_of(matmul_flops)
    with pytest.raises(ValueError):
        table([])


def test_device_bandwidth_numpy_is_host_copy():
    dev = measure.detect_device(use_jax=False)
    assert measure.device_bandwidth(dev, 8e6, repeats=1) > 1e8


def test_device_bandwidth_times_the_jax_device(monkeypatch):
    pytest.importorskip("jax")
    import jax

    dev = measure.detect_device(use_jax=True)  # on a CPU-only machine: the JAX CPU device
    assert dev.backend == "jax"
    calls = []
    real_jit = jax.jit

    def spy(fn, *a, **k):
        calls.append(fn)
        return real_jit(fn, *a, **k)

    monkeypatch.setattr(jax, "jit", spy)
    bw = measure.device_bandwidth(dev, 8e6, repeats=1)
    assert calls, "the JAX path must time a jitted kernel on the device, not a numpy copy"
    assert 1e8 < bw < 1e14  # bytes/s: read + write of 8 MB, any real machine


def test_device_bandwidth_counts_read_and_write(monkeypatch):
    # with a fake clock every timed call takes exactly 1 s: bandwidth = bytes read + written
    pytest.importorskip("jax")
    dev = measure.detect_device(use_jax=True)
    ticks = iter(range(100))
    monkeypatch.setattr(measure.time, "perf_counter", lambda: float(next(ticks)))
    assert measure.device_bandwidth(dev, 4e6, repeats=2) == pytest.approx(2 * 4e6)
    assert measure.copy_bandwidth(4e6, repeats=2) == pytest.approx(2 * 4e6)


def test_device_bandwidth_bad_size():
    with pytest.raises(ValueError):
        measure.device_bandwidth(nbytes=0)
