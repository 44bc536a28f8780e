"""Answer key for Chapter 7 (MFU and HFU) exercises."""

from __future__ import annotations

from .. import hardware, published, transformer
from ..units import HOUR
from ..roofline import no_overlap_utilization


def _sig3(x):
    return float(f"{x:.3g}")


def measured_step_time(p):
    """Ex 7.2-7.3: the "measured" seconds per step shown to the student (3 significant digits):
    the run's ideal step time divided by a hidden utilisation p.u."""
    return _sig3(step_time_for_mfu(p.model, p.global_batch, p.T, p.n_devices, p.accelerator,
                                   p.u))


def gpu_hours(p):
    """Ex 7.6: device-hours the run is said to have taken (3 significant digits), from p.u."""
    flops = transformer.flops_per_token(p.model, p.T) * p.n_tokens
    peak = hardware.get(p.accelerator).peak_flops_per_s("bf16")
    return _sig3(flops / (peak * p.u) / HOUR)


def _tokens_per_s(p):
    return p.global_batch * p.T / measured_step_time(p)


def model_flops_per_token(p):
    """Ex 7.1: training FLOPs per token of p.model at sequence length p.T (attention included,
    no recomputation): the numerator of MFU."""
    return transformer.flops_per_token(p.model, p.T)


def mfu_from_step(p):
    """Ex 7.2: MFU of p.n_devices p.accelerator training p.model on p.global_batch sequences of
    p.T tokens in measured_step_time(p) seconds per step."""
    return transformer.mfu(p.model, _tokens_per_s(p), p.n_devices, p.accelerator, p.T)


def hfu_full_recompute(p):
    """Ex 7.3: HFU of the same run with full activation recomputation."""
    return transformer.hfu(p.model, _tokens_per_s(p), p.n_devices, p.accelerator, p.T,
                           recompute="full")


def megatron_mfu(p):
    """Ex 7.4: MFU behind the per-GPU FLOP/s that Megatron-LM Table 1 reports for run p.run."""
    return published.mfu_from_reported_flops(p.run)


def llama3_step_time(p):
    """Ex 7.5: seconds per step implied by a Llama 3 Table 4 row (full-square attention)."""
    return published.implied_step_time(p.run)


def whole_run_utilization(p):
    """Ex 7.6: model FLOPs of p.n_tokens tokens (at p.T) over gpu_hours(p) at p.accelerator peak."""
    flops = transformer.flops_per_token(p.model, p.T) * p.n_tokens
    peak = hardware.get(p.accelerator).peak_flops_per_s("bf16")
    return flops / (gpu_hours(p) * HOUR * peak)


def no_overlap_fraction(p):
    """Ex 7.7: fraction of peak reached by work of intensity p.intensity on p.accelerator when
    its memory traffic does not overlap its compute."""
    return float(no_overlap_utilization(p.intensity, p.accelerator))


def palm_extra_flops(p=None):
    """Ex 7.8: PaLM 540B's HFU over its MFU (hardware FLOPs per model FLOP)."""
    run = published.get("palm-540b")
    return run.hfu / published.mfu(run)


def recompute_changes_mfu(p=None):
    """Ex 7.9: does turning on recomputation change MFU at an unchanged step time? No."""
    return False


def mfu_from_step_time(cfg, global_batch, T, step_time, n_devices, accelerator):
    """Ex 7.10 reference: MFU from a measured step time."""
    return transformer.mfu(cfg, global_batch * T / step_time, n_devices, accelerator, T)


def step_time_for_mfu(cfg, global_batch, T, n_devices, accelerator, mfu):
    """Ex 7.11 reference: the seconds per step at which the run reaches ``mfu``."""
    return transformer.train_time(transformer.train_flops(cfg, global_batch, T), n_devices,
                                  accelerator, mfu)


def reported_to_mfu(cfg, T, flops_per_s_per_device, accelerator):
    """Ex 7.12 reference: MFU from a per-device FLOP/s counted with full recomputation."""
    peak = hardware.get(accelerator).peak_flops_per_s("bf16")
    return flops_per_s_per_device * published.model_flops_fraction(cfg, T, "full") / peak
