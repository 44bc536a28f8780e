"""scaling_lib.simulate.use_devices: real accelerators when the runtime has enough, else CPU.

This machine has no accelerator, so the accelerator branch is checked with a stand-in backend
(monkeypatched jax.default_backend and jax.devices); tests/conftest.py already asked for 8 CPU
devices, as every multi-device chapter does.
"""

from dataclasses import dataclass

import pytest

jax = pytest.importorskip("jax")
from scaling_lib import simulate as sim  # noqa: E402


@dataclass(frozen=True)
class FakeDevice:
    id: int
    platform: str = "tpu"
    device_kind: str = "TPU v2"


def test_cpu_only_runtime_gets_simulated_cpu_devices_and_says_so(capsys):
    devices = sim.use_devices(8)
    assert devices == jax.devices("cpu") and len(devices) == 8
    out = capsys.readouterr().out
    assert "8 simulated CPU devices" in out and "no GPU or TPU" in out


def test_runtime_with_enough_accelerators_gets_them(monkeypatch, capsys):
    tpus = [FakeDevice(i) for i in range(8)]
    cpus = jax.devices("cpu")
    monkeypatch.setattr(jax, "default_backend", lambda: "tpu")
    monkeypatch.setattr(jax, "devices", lambda backend=None: cpus if backend == "cpu" else tpus)
    assert sim.use_devices(8) == tpus
    assert "Using 8 real TPU device(s) (TPU v2)" in capsys.readouterr().out


def test_runtime_with_too_few_accelerators_falls_back_to_cpu(monkeypatch, capsys):
    gpus = [FakeDevice(0, "gpu", "NVIDIA T4")]
    cpus = jax.devices("cpu")
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    monkeypatch.setattr(jax, "devices", lambda backend=None: cpus if backend == "cpu" else gpus)
    assert sim.use_devices(8, verbose=False) == cpus
    assert capsys.readouterr().out == ""
    sim.use_devices(8)
    assert "1 GPU device(s), fewer than 8" in capsys.readouterr().out


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "8"])
def test_bad_counts_are_rejected(bad):
    with pytest.raises(ValueError, match="whole number of devices"):
        sim.use_devices(bad)
