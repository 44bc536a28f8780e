"""Failures at scale: mean time between failures, checkpoint cost, the best checkpoint interval
(Young-Daly) and the goodput that results.

A job on n devices fails whenever any of them (or the network, or the host) does: its mean time
between failures is M = M_device / n, or measured directly as (time / interruptions). Saving a
checkpoint takes δ seconds of stalled training; after a failure the job loses R seconds to
restart and, on average, half an interval of work since the last checkpoint. Checkpointing
every τ seconds of work wastes about

    δ / τ  (saving)   +   (R + τ / 2) / M  (failures)

of the time, which is smallest at τ* = sqrt(2 · δ · M) (Young 1974; Daly 2006 adds higher-order
terms). Goodput is the share of wall-clock time that makes progress.

Left out: failures during a checkpoint or a restart, checkpoints written asynchronously (they
shrink δ to the copy to host memory), and spare nodes that shorten R.

See: the chapter "Case study: training Llama 3 405B".
"""

from __future__ import annotations

import math

from . import models, transformer
from .memory import bytes_per_param
from .units import check_count, check_positive

# Dubey et al. 2024 (The Llama 3 Herd of Models), section 3.3.4 and Table 5: 466 job
# interruptions in a 54-day snapshot of 405B pre-training on 16K H100s (47 planned, 419
# unexpected); effective training time above 90%.
LLAMA3_INTERRUPTIONS = 466
LLAMA3_UNEXPECTED_INTERRUPTIONS = 419
LLAMA3_SNAPSHOT_DAYS = 54
LLAMA3_EFFECTIVE_TRAINING_TIME = 0.90
# Same section: "GPU issues are the largest category, accounting for 58.7% of all unexpected
# issues" (faulty GPUs, HBM3, SRAM, the GPU system processor, thermal, silent data corruption);
# the rest are software bugs, network switches and cables, host maintenance, NICs, NCCL
# timeouts and other host parts. A per-GPU failure rate counts only this share.
LLAMA3_GPU_SHARE_OF_UNEXPECTED = 0.587
# Same paper, section 3.3.1: Tectonic storage sustains 2 TB/s (peaks at 7 TB/s) for checkpoints.
LLAMA3_STORAGE_BYTES_PER_S = 2e12


def mtbf(n_interruptions, seconds) -> float:
    """Mean time between failures of a job: observed seconds / interruptions.

    >>> round(mtbf(466, 54 * 86400) / 3600, 2)  # Llama 3 405B: one every 2.78 hours
    2.78
    """
    n = check_count("n_interruptions", n_interruptions)
    return float(check_positive("seconds", seconds) / n)


def job_mtbf(device_mtbf, n_devices) -> float:
    """MTBF of a job that stops when any of ``n_devices`` fails: M_device / n.

    >>> round(job_mtbf(50_000 * 3600, 16384) / 3600, 2)  # 50,000 h per GPU, 16K GPUs
    3.05
    """
    return float(check_positive("device_mtbf", device_mtbf) / check_count("n_devices",
                                                                         n_devices))


def checkpoint_bytes(cfg, *, recipe="mixed", optimizer="adam") -> float:
    """Bytes of a full training checkpoint: every parameter with its master copy and optimizer
    state, the training state less its gradients (which are not saved). Mixed precision with
    Adam holds 16 bytes per parameter in training (bf16 weights 2, bf16 gradients 2, fp32
    master weights 4, two fp32 Adam moments 8); the checkpoint leaves out the gradients:
    **14 bytes per parameter**, 5.68 TB for Llama 3 405B's 405.9B parameters.

    >>> round(checkpoint_bytes("llama3-405b") / 1e12, 2)
    5.68
    """
    b = bytes_per_param(recipe, optimizer)
    per = float(b.total - b["gradients"])
    return float(transformer.param_count(models.get(cfg)).total) * per


def checkpoint_time(nbytes, write_bytes_per_s) -> float:
    """Seconds training stalls to write a checkpoint: bytes / storage write bandwidth.

    >>> checkpoint_time(4e12, 2e12)
    2.0
    """
    return float(check_positive("nbytes", nbytes) / check_positive("write_bytes_per_s",
                                                                   write_bytes_per_s))


def young_daly_interval(checkpoint_time, mtbf, *, higher_order=False) -> float:
    """Seconds of work between checkpoints that waste least: τ* = sqrt(2 · δ · M) (Young 1974).

    ``higher_order``: Daly's (2006) refinement for δ < 2M,
    τ = sqrt(2δM) · (1 + sqrt(δ / 2M) / 3 + δ / (18 M)) - δ, else τ = M.

    >>> round(young_daly_interval(60.0, 3 * 3600))  # a 1-minute checkpoint, MTBF 3 hours
    1138
    """
    d = check_positive("checkpoint_time", checkpoint_time)
    M = check_positive("mtbf", mtbf)
    base = math.sqrt(2 * d * M)
    if not higher_order:
        return float(base)
    if d >= 2 * M:
        return float(M)
    return float(base * (1 + math.sqrt(d / (2 * M)) / 3 + d / (18 * M)) - d)


def goodput(interval, checkpoint_time, mtbf, *, restart_time=0.0, exact=False) -> float:
    """Share of wall-clock time that makes progress, checkpointing every ``interval`` s of work.

    First order (Young 1974): 1 - δ/τ - (R + τ/2)/M, clipped at 0 (τ interval, δ checkpoint
    time, R restart time, M the job's MTBF). It adds the costs as if they were small against
    M, so it reaches 0 at a finite τ (or R), where the true goodput is still positive.
    ``exact=True`` takes failures as a Poisson process (exponential times between them, Daly
    2006): a segment of τ + δ seconds succeeds with probability e^(-(τ+δ)/M), and the
    expected wall time to complete one is (M + R)(e^((τ+δ)/M) - 1), so the goodput is
    τ / ((M + R)(e^((τ+δ)/M) - 1)): it approaches 0 but never reaches it.

    >>> round(goodput(1138.0, 60.0, 3 * 3600, restart_time=600.0), 3)
    0.839
    >>> round(goodput(1138.0, 60.0, 3 * 3600, restart_time=600.0, exact=True), 3)
    0.851
    """
    t = check_positive("interval", interval)
    d = check_positive("checkpoint_time", checkpoint_time, allow_zero=True)
    M = check_positive("mtbf", mtbf)
    R = check_positive("restart_time", restart_time, allow_zero=True)
    if exact:
        return float(t / ((M + R) * math.expm1((t + d) / M)))
    return float(max(0.0, 1 - d / t - (R + t / 2) / M))


__all__ = ["LLAMA3_GPU_SHARE_OF_UNEXPECTED", "LLAMA3_INTERRUPTIONS", "LLAMA3_SNAPSHOT_DAYS",
           "LLAMA3_STORAGE_BYTES_PER_S",
           "checkpoint_bytes", "checkpoint_time", "goodput", "job_mtbf", "mtbf",
           "young_daly_interval"]
