"""Measure your own machine: time matmuls and memory copies, and name the device you are on.

On a laptop or CI machine this times numpy (fp32) on the CPU; where JAX finds a TPU or GPU (a
Colab TPU runtime, say) it times ``jax.numpy`` in bf16 on that device and looks up its datasheet
numbers. JAX is imported only when it is installed and only inside these functions.

See: Chapter 1, "Measure your own machine".
"""

from __future__ import annotations

import importlib.util
import time
from dataclasses import dataclass

import numpy as np

from . import hardware
from .roofline import matmul_bytes, matmul_flops
from .units import check_positive

# JAX device_kind strings (as JAX reports them) -> our presets. Matched by substring, in order.
_DEVICE_KINDS = (
    ("tpu v6", "tpu-v6e"),
    ("tpu v5 lite", "tpu-v5e"),
    ("tpu v5e", "tpu-v5e"),
    ("tpu v5", "tpu-v5p"),
    ("tpu v4", "tpu-v4"),
    ("h200", "h200"),
    ("h100", "h100"),
    ("b200", "b200"),
    ("a100-sxm4-40gb", "a100-40gb"),
    ("a100", "a100-80gb"),
    ("v100", "v100"),
)


def accelerator_from_device_kind(device_kind: str) -> str | None:
    """Our preset name for a JAX ``device_kind`` string, or None when we have no preset.

    >>> accelerator_from_device_kind("TPU v5 lite"), accelerator_from_device_kind("NVIDIA H100 80GB HBM3")
    ('tpu-v5e', 'h100')
    >>> accelerator_from_device_kind("cpu") is None
    True
    """
    kind = device_kind.lower()
    for needle, name in _DEVICE_KINDS:
        if needle in kind:
            return name
    return None


@dataclass(frozen=True)
class Device:
    """What a measurement runs on: the backend used to time it and, if known, its datasheet."""

    description: str
    kind: str  # "cpu", "gpu" or "tpu"
    backend: str  # "numpy" or "jax"
    dtype: str  # the dtype matmuls are timed in
    accelerator: hardware.Accelerator | None


def detect_device(use_jax: bool | None = None) -> Device:
    """The device this kernel will time on: a JAX accelerator if there is one, else the CPU.

    ``use_jax=None`` uses JAX when it is installed and its default backend is a TPU or GPU.
    """
    if use_jax is not False and importlib.util.find_spec("jax") is not None:
        import jax

        dev = jax.devices()[0]
        if dev.platform in ("tpu", "gpu") or use_jax:
            name = accelerator_from_device_kind(dev.device_kind)
            acc = hardware.get(name) if name else None
            kind = dev.platform if dev.platform in ("tpu", "gpu") else "cpu"
            dtype = "bf16" if kind != "cpu" else "fp32"
            return Device(f"{dev.device_kind} (JAX, {len(jax.devices())} device(s))", kind,
                          "jax", dtype, acc)
    import platform

    return Device(f"CPU: {platform.processor() or platform.machine()} (numpy)", "cpu", "numpy",
                  "fp32", None)


def _timer(fn, repeats: int) -> float:
    fn()  # warm-up (and compilation for JAX)
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def time_matmul(n: int, device: Device | None = None, repeats: int = 3) -> float:
    """Best-of-``repeats`` seconds for one [n, n] x [n, n] matmul on ``device``."""
    n = int(check_positive("n", n))
    device = device or detect_device(use_jax=False)
    if device.backend == "jax":
        import jax
        import jax.numpy as jnp

        dt = jnp.bfloat16 if device.dtype == "bf16" else jnp.float32
        x = jnp.ones((n, n), dt)
        f = jax.jit(lambda a, b: a @ b)
        return _timer(lambda: f(x, x).block_until_ready(), repeats)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, n), dtype=np.float32)
    y = rng.standard_normal((n, n), dtype=np.float32)
    return _timer(lambda: x @ y, repeats)


def copy_bandwidth(nbytes: float = 2e8, repeats: int = 3) -> float:
    """Measured memory bandwidth (bytes/s) of copying a large array: read + write counted.

    A rough STREAM-copy-like figure; caches make small arrays look faster, so use >= 100 MB.
    """
    n = int(check_positive("nbytes", nbytes) // 4)
    src = np.ones(n, dtype=np.float32)
    dst = np.empty_like(src)
    t = _timer(lambda: np.copyto(dst, src), repeats)
    return 2 * src.nbytes / t


def device_bandwidth(device: Device | None = None, nbytes: float = 2.5e8, repeats: int = 3) -> float:
    """Measured memory bandwidth (bytes/s) of ``device`` itself: read + write of a large array.

    On a JAX device (a GPU or TPU with no preset, a T4 or a TPU v2, say) this times ``x + 1`` on
    an fp32 array of ``nbytes`` held in the device's own memory, jitted and waited for with
    ``block_until_ready``: the kernel reads ``nbytes`` and writes ``nbytes``, so the bandwidth is
    2 * nbytes / t. With the numpy backend it is :func:`copy_bandwidth` (host RAM). Caches make
    small arrays look faster: keep ``nbytes`` well above the last-level cache (50 MB on an H100).
    """
    nbytes = check_positive("nbytes", nbytes)
    device = device or detect_device(use_jax=False)
    if device.backend != "jax":
        return copy_bandwidth(nbytes, repeats)
    import jax
    import jax.numpy as jnp

    n = int(nbytes // 4)
    x = jax.device_put(jnp.ones(n, jnp.float32), jax.devices()[0])
    f = jax.jit(lambda a: a + 1.0)  # one fused elementwise kernel: read x, write a new array
    t = _timer(lambda: f(x).block_until_ready(), repeats)
    return 2 * x.nbytes / t


@dataclass(frozen=True)
class MatmulMeasurements:
    """Square matmuls of each size: FLOPs, bytes, seconds and achieved FLOP/s (arrays)."""

    sizes: np.ndarray
    flops: np.ndarray
    nbytes: np.ndarray
    seconds: np.ndarray
    device: Device

    @property
    def flops_per_s(self) -> np.ndarray:
        return self.flops / self.seconds

    @property
    def intensity(self) -> np.ndarray:
        return self.flops / self.nbytes


def measure_matmuls(sizes, device: Device | None = None, repeats: int = 3) -> MatmulMeasurements:
    """Time square matmuls of each size in ``sizes`` on ``device`` (default: detect it)."""
    device = device or detect_device()
    sizes = np.asarray(sizes, dtype=int)
    check_positive("sizes", sizes)
    secs = np.array([time_matmul(int(n), device, repeats) for n in sizes])
    return MatmulMeasurements(sizes, matmul_flops(sizes, sizes, sizes),
                              matmul_bytes(sizes, sizes, sizes, device.dtype), secs, device)


def measured_accelerator(m: MatmulMeasurements, bandwidth: float) -> hardware.Accelerator:
    """An Accelerator for a machine with no datasheet: the best measured FLOP/s as its peak and
    a measured bandwidth of the same device's memory (:func:`device_bandwidth`) as its memory
    bandwidth (an empirical roofline)."""
    return hardware.Accelerator(
        name="this machine (measured)", kind=m.device.kind,
        peak_flops={m.device.dtype: float(np.max(m.flops_per_s))},
        hbm_bytes=0.0, hbm_bytes_per_s=float(bandwidth), source="measured in this notebook")


__all__ = ["Device", "MatmulMeasurements", "accelerator_from_device_kind", "copy_bandwidth",
           "detect_device", "device_bandwidth", "measure_matmuls", "measured_accelerator", "time_matmul"]
