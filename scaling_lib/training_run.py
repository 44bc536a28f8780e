"""Time, cost and size of a training run: days and GPU-hours of a token budget, the
Chinchilla-optimal model for a cluster, the Pareto front of two costs, a GPT-style shape of a
given size. Re-exported by :mod:`scaling_lib.planner`, which adds the plan search.

See: the chapter "Planning a training run".
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import hardware, models
from .units import check_count, check_fraction, check_positive

SECONDS_PER_DAY = 86_400.0
# Hoffmann et al. 2022 ("Training Compute-Optimal Large Language Models"), Table 3 and section
# 3.4: compute-optimal training uses about 20 tokens per parameter; training costs C ≈ 6·N·D.
CHINCHILLA_TOKENS_PER_PARAM = 20.0
TRAIN_FLOPS_PER_PARAM_TOKEN = 6.0


# ---- time and cost of a training run ----------------------------------------------------------
@dataclass(frozen=True)
class TrainingRun:
    """How long and how much to train ``n_tokens``: steps, seconds, days, GPU-hours, cost."""

    n_tokens: float
    steps: float
    seconds: float
    n_devices: int
    cost: float | None

    @property
    def days(self) -> float:
        return self.seconds / SECONDS_PER_DAY

    @property
    def gpu_hours(self) -> float:
        return self.seconds * self.n_devices / 3600.0


def training_run(step_time, n_tokens, global_batch, T, n_devices, *, price_per_gpu_hour=None,
                 goodput=1.0) -> TrainingRun:
    """Time and cost of training ``n_tokens`` tokens at ``step_time`` seconds per step.

    steps = n_tokens / (B·T); seconds = steps · step_time / goodput; GPU-hours = seconds ·
    n_devices / 3600; cost = GPU-hours · price. ``goodput`` (0, 1] is the share of wall-clock
    time that makes progress (failures, restarts, checkpoints: :mod:`scaling_lib.reliability`).

    >>> run = training_run(10.0, 1e12, 1024, 4096, 1024, price_per_gpu_hour=2.0)
    >>> round(run.days, 2), round(run.gpu_hours), round(run.cost)
    (27.59, 678168, 1356337)
    """
    st = check_positive("step_time", step_time)
    tok = check_positive("n_tokens", n_tokens)
    B = check_count("global_batch", global_batch)
    T = check_count("T", T)
    n = check_count("n_devices", n_devices)
    g = check_fraction("goodput", goodput)
    steps = tok / (B * T)
    seconds = steps * st / g
    price = None if price_per_gpu_hour is None else \
        check_positive("price_per_gpu_hour", price_per_gpu_hour, allow_zero=True)
    cost = None if price is None else float(seconds * n / 3600.0 * price)
    return TrainingRun(float(tok), float(steps), float(seconds), int(n), cost)


def days_to_train(n_params, n_tokens, n_devices, peak_flops_per_s, utilization=1.0, *,
                  flops_per_param_token=TRAIN_FLOPS_PER_PARAM_TOKEN):
    """Days to train N parameters on D tokens: f·N·D / (n · peak · u) / 86,400 s.

    f = 6 FLOPs per parameter and token (forward 2, backward 4), with u the MFU; f = 8 with
    full activation recomputation and u the hardware utilisation (the forward runs twice):
    Megatron-LM's end-to-end estimate 8·T·P / (n·X) (Narayanan et al. 2021, section 5.1).

    >>> round(days_to_train(175e9, 300e9, 1024, 312e12, 0.5), 1)  # GPT-3 on 1,024 A100s
    22.8
    >>> round(days_to_train(175e9, 300e9, 1024, 140e12, flops_per_param_token=8))  # Megatron
    34
    """
    N = check_positive("n_params", n_params)
    D = check_positive("n_tokens", n_tokens)
    n = check_positive("n_devices", n_devices)
    peak = check_positive("peak_flops_per_s", peak_flops_per_s)
    u = check_fraction("utilization", utilization)
    f = check_positive("flops_per_param_token", flops_per_param_token)
    return f * N * D / (n * peak * u) / SECONDS_PER_DAY


def compute_optimal(cluster, days, *, utilization=None, dtype="bf16",
                    tokens_per_param=CHINCHILLA_TOKENS_PER_PARAM):
    """Chinchilla-optimal model size and tokens for a cluster and a wall-clock budget.

    The cluster delivers C = n · peak · u · days · 86,400 FLOPs; training costs C = 6·N·D
    and the compute-optimal ratio is D = 20·N (Hoffmann et al. 2022), so

        N = sqrt(C / (6 · 20)),   D = 20 · N.

    ``utilization`` u: None for 100% (the upper bound), a fraction, or a function of the
    model size ``u(n_params)`` (e.g. the MFU the planner predicts for the best plan of a model
    that big); then N solves N = sqrt(C(u(N)) / 120) by fixed-point iteration.
    Returns (n_params, n_tokens).

    >>> N, D = compute_optimal(hardware.cluster("a100-80gb", 3360), 30)  # vTrain's example
    >>> round(N / 1e9, 1), round(D / 1e12, 2)
    (150.5, 3.01)
    """
    cluster = hardware.get_cluster(cluster)
    d = check_positive("days", days)
    r = check_positive("tokens_per_param", tokens_per_param)
    peak = cluster.n_devices * cluster.accelerator.peak_flops_per_s(dtype)

    def size(u):
        u = check_fraction("utilization", u)
        c = peak * u * d * SECONDS_PER_DAY
        return math.sqrt(c / (TRAIN_FLOPS_PER_PARAM_TOKEN * r))

    if utilization is None:
        n = size(1.0)
    elif callable(utilization):
        n = size(1.0)
        for _ in range(50):
            new = size(utilization(n))
            if abs(new - n) <= 1e-4 * n:
                n = new
                break
            n = new
    else:
        n = size(utilization)
    return float(n), float(r * n)


def pareto(x, y) -> np.ndarray:
    """True where no other point has both x and y lower or equal (one strictly): the front of
    two costs to minimise, e.g. days against GPU-hours. Vectorised: sort by x, keep the points
    whose y beats every point before them.

    >>> pareto([1, 2, 2, 3], [5, 3, 4, 3]).tolist()
    [True, True, False, False]
    """
    x = np.asarray(x, dtype=float)
    y = np.asarray(y, dtype=float)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"x and y must be 1-D arrays of one shape, not {x.shape} and {y.shape}")
    order = np.lexsort((y, x))
    ys = y[order]
    best_before = np.concatenate(([np.inf], np.minimum.accumulate(ys)[:-1]))
    keep = np.zeros(len(x), dtype=bool)
    keep[order] = ys < best_before
    return keep


def shape_for(n_params, *, aspect=128, head_dim=128, V=51200, T_max=2048):
    """A GPT-style model (Megatron's: GeLU MLP with F = 4D, multi-head attention) of about
    ``n_params`` parameters, with D / L = ``aspect`` (GPT-3 175B: 12,288 / 96 = 128).

    12·L·D² ≈ n_params with L = D / aspect gives D = (n_params · aspect / 12)^(1/3), rounded to
    a multiple of 8 · ``head_dim`` (N = D / head_dim heads, a multiple of 8 so that tensor
    parallelism up to a node of 8 splits them) and L to a whole number of layers.

    >>> c = shape_for(175e9)
    >>> c.L, c.D, c.N
    (97, 12288, 96)
    """
    n = check_positive("n_params", n_params)
    step = 8 * head_dim
    D = max(step, int(round((n * aspect / 12) ** (1 / 3) / step)) * step)
    L = max(1, int(round(n / (12 * D * D))))
    return models.gpt(L, D, D // head_dim, V=V, T_max=T_max, tied_embeddings=False,
                      name=f"gpt-{n / 1e9:.0f}b")


__all__ = ["CHINCHILLA_TOKENS_PER_PARAM", "SECONDS_PER_DAY", "TRAIN_FLOPS_PER_PARAM_TOKEN",
           "TrainingRun", "compute_optimal", "days_to_train", "pareto", "shape_for",
           "training_run"]
