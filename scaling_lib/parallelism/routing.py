"""Routing tokens to experts: capacity, top-k routing, drops and load imbalance.

The routing half of :mod:`~scaling_lib.parallelism.expert` (which re-exports every name here):
each token's router scores pick its top k of E experts; with a capacity factor c an expert takes
at most C = min(⌈c·k·n/E⌉, n) tokens of a routing group of n, first choices first, and drops the
rest; the layer waits for its busiest expert (:func:`imbalance`). Keeping routers balanced:
Switch's auxiliary loss (:func:`load_balance_loss`), ST-MoE's router z-loss
(:func:`router_z_loss`) and DeepSeek-V3's bias update (:func:`bias_update`, :func:`biased_route`).

See: the chapter "Expert parallelism and mixtures of experts".
"""

from __future__ import annotations

import math

import numpy as np

from .. import models
from ..units import _brief, check_int, check_positive

MAX_LOGITS = 2**22  # toy_router's largest n·E (32 MB of float64 logits)


# ---- routing -------------------------------------------------------------------------------
def capacity(n_tokens, E, k, capacity_factor) -> int:
    """Slots per expert for a group of n routed tokens: C = min(⌈c·k·n/E⌉, n).

    ``capacity_factor`` None (dropless) gives n, the most tokens of a group one expert can
    receive (top-k picks k distinct experts): the static buffer a dropless layer needs.

    >>> capacity(4096, 8, 2, 1.25), capacity(4096, 8, 2, 1.0), capacity(16, 8, 2, None)
    (1280, 1024, 16)
    """
    n = check_int("n_tokens", n_tokens)
    E = check_int("E", E)
    k = check_int("k", k)
    if k > E:
        raise ValueError(f"k={k} active experts cannot exceed E={E} experts")
    if capacity_factor is None:
        return int(n)
    cf = check_positive("capacity_factor", capacity_factor)
    if np.ndim(cf) or not cf > 0:
        raise ValueError(f"capacity_factor={_brief(capacity_factor)} must be one positive "
                         "number (or None for dropless)")
    return int(min(math.ceil(cf * k * n / E - 1e-9), n))


def tokens_per_expert(cfg, n_tokens) -> float:
    """Tokens each expert receives under balanced routing: k·n/E. Broadcasts over n.

    >>> tokens_per_expert("deepseek-v3", 32 * 8192)
    8192.0
    """
    c = _moe_cfg(cfg)
    n = np.asarray(check_positive("n_tokens", n_tokens), dtype=float)
    return _scalar(c.k * n / c.E)


def route(logits, k):
    """Top-k routing of a [n, E] array of router logits: (experts [n, k], gates [n, k]).

    Experts in order of preference; gates are the softmax over the k chosen logits (equal to
    renormalising the softmax over all E to the chosen k, as Mixtral does).

    >>> route(np.array([[0.0, 2.0, 1.0]]), 2)[0].tolist()
    [[1, 2]]
    """
    z = _logits(logits)
    k = check_int("k", k, maximum=z.shape[1])
    if k < z.shape[1]:  # the k largest (in no order), then sorted: ties go to the lower index
        chosen = np.argpartition(-z, k - 1, axis=1)[:, :k]
    else:
        chosen = np.broadcast_to(np.arange(z.shape[1]), z.shape)
    chosen = np.sort(chosen, axis=1)
    order = np.argsort(-np.take_along_axis(z, chosen, axis=1), axis=1, kind="stable")
    experts = np.take_along_axis(chosen, order, axis=1)
    top = np.take_along_axis(z, experts, axis=1)
    g = np.exp(top - top[:, :1])
    return experts, g / g.sum(axis=1, keepdims=True)


def _logits(logits):
    try:
        z = np.asarray(logits, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"logits={_brief(logits)} must be a [n_tokens, E] array of numbers") \
            from None
    if z.ndim != 2 or not z.size or not np.isfinite(z).all():
        raise ValueError(f"logits must be a finite [n_tokens, E] array, got shape {z.shape}")
    return z


def load_balance_loss(logits, k=1, *, alpha=0.01) -> float:
    """Switch Transformer's auxiliary loss, α·E·Σ_i f_i·P_i, of a [n, E] array of router logits.

    f_i: the share of the k·n assignments that top-k routing sends to expert i (a count: no
    gradient); P_i: the router's softmax probability of expert i averaged over the n tokens (the
    differentiable part). Both sum to 1; perfectly balanced, f_i = P_i = 1/E and the loss is α,
    its minimum when either is uniform. Fedus et al. 2022, eq. 4 (α = 0.01 there); top-k with
    f counted over all k choices, as Megatron-Core and Hugging Face's Mixtral do.

    >>> round(load_balance_loss(np.zeros((4, 8)), 2), 6)   # uniform router: alpha
    0.01
    """
    z = _logits(logits)
    E = z.shape[1]
    alpha = check_positive("alpha", alpha, allow_zero=True)
    f = expert_loads(route(z, k)[0], E) / (z.shape[0] * check_int("k", k, maximum=E))
    p = np.exp(z - z.max(axis=1, keepdims=True))
    P = (p / p.sum(axis=1, keepdims=True)).mean(axis=0)
    return float(alpha * E * np.sum(f * P))


def router_z_loss(logits, *, coef=1e-3) -> float:
    """ST-MoE's router z-loss, coef · mean over tokens of (log Σ_j e^{z_j})², which keeps the
    router's logits small (large logits make the softmax's exponentials overflow in bf16 and
    destabilise training). Zoph et al. 2022, eq. 5 (coef = 1e-3 there).

    >>> round(router_z_loss(np.zeros((2, 4))) * 1e3, 4)   # log(4)² = 1.9218
    1.9218
    """
    z = _logits(logits)
    coef = check_positive("coef", coef, allow_zero=True)
    top = z.max(axis=1)
    lse = top + np.log(np.exp(z - top[:, None]).sum(axis=1))
    return float(coef * np.mean(lse ** 2))


def biased_route(logits, bias, k):
    """DeepSeek-V3's auxiliary-loss-free routing: pick the top k of logits + bias (a [E]
    per-expert bias), but weight the chosen experts by the softmax of their *unbiased* logits,
    so the bias steers which experts are chosen without changing what they output.
    Returns (experts [n, k], gates [n, k]).

    >>> biased_route(np.array([[0.0, 2.0, 1.0]]), np.array([3.0, 0.0, 0.0]), 1)[0].tolist()
    [[0]]
    """
    z = _logits(logits)
    b = np.asarray(bias, dtype=float)
    if b.shape != (z.shape[1],) or not np.isfinite(b).all():
        raise ValueError(f"bias of shape {b.shape} must be a finite [E] array, E={z.shape[1]}")
    experts, _ = route(z + b, k)
    top = np.take_along_axis(z, experts, axis=1)
    g = np.exp(top - top.max(axis=1, keepdims=True))
    return experts, g / g.sum(axis=1, keepdims=True)


def bias_update(bias, loads, *, gamma=0.001):
    """One step of DeepSeek-V3's bias update: b_i - γ·sign(load_i - mean load), lowering the
    bias of overloaded experts and raising that of underloaded ones (DeepSeek-AI 2024, section
    2.1.2; γ = 0.001 for most of its training).

    >>> bias_update(np.zeros(3), np.array([5, 1, 3]), gamma=0.1).tolist()
    [-0.1, 0.1, 0.0]
    """
    b = np.asarray(bias, dtype=float)
    loads = np.asarray(loads, dtype=float)
    if b.ndim != 1 or loads.shape != b.shape:
        raise ValueError(f"bias {b.shape} and loads {loads.shape} must be two [E] arrays")
    gamma = check_positive("gamma", gamma, allow_zero=True)
    return b - gamma * np.sign(loads - loads.mean())


def toy_router(n, E, k, *, skew=0.0, seed=0):
    """The [n, k] experts a toy router picks: logits N(0, 1) per token and expert, plus a fixed
    per-expert bias skew · N(0, 1) that favours some experts (0: balanced on average).

    A stand-in for a trained router, to study capacity and imbalance; real routers are
    balanced by an auxiliary loss (Switch, GShard) or a per-expert bias (DeepSeek-V3).

    >>> toy_router(4, 8, 2, seed=1).shape
    (4, 2)
    """
    n = check_int("n", n)
    E = check_int("E", E)
    k = check_int("k", k, maximum=E)
    skew = check_positive("skew", skew, allow_zero=True)
    if np.ndim(skew):
        raise ValueError(f"skew={_brief(skew)} must be one number >= 0")
    seed = check_int("seed", seed, minimum=0)
    if n * E > MAX_LOGITS or n * k > MAX_LOGITS // 4:
        raise ValueError(f"n={n} tokens, E={E}, k={k}: the toy router draws at most "
                         f"{MAX_LOGITS:,} logits (n·E) and {MAX_LOGITS // 4:,} choices (n·k); "
                         "route fewer tokens (a sample is enough)")
    return route(toy_logits(n, E, k, skew=skew, seed=seed), k)[0]


def toy_logits(n, E, k=1, *, skew=0.0, seed=0) -> np.ndarray:
    """The [n, E] logits :func:`toy_router` routes: N(0, 1) per token and expert plus a fixed
    per-expert bias skew · N(0, 1) (the same draw for the same n, E, k, skew and seed).

    >>> toy_logits(4, 8, 2, seed=1).shape
    (4, 8)
    """
    n, E = check_int("n", n), check_int("E", E)
    k, seed = check_int("k", k, maximum=E), check_int("seed", seed, minimum=0)
    skew = check_positive("skew", skew, allow_zero=True)
    if n * E > MAX_LOGITS:
        raise ValueError(f"n={n} tokens, E={E}: at most {MAX_LOGITS:,} logits (n·E); route "
                         "fewer tokens (a sample is enough)")
    rng = np.random.default_rng([seed, n, E, k])
    return rng.standard_normal((n, E)) + skew * rng.standard_normal(E)


def keep_mask(experts, E, C):
    """Which (token, choice) assignments fit in capacity C: [n, k] booleans.

    Priority: every token's first choice, in token order, then every second choice, ...
    (GShard's order); an expert keeps its first C assignments.

    >>> keep_mask(np.array([[0, 1], [0, 1], [0, 2]]), 3, 2).tolist()
    [[True, True], [True, True], [False, True]]
    """
    try:
        ex = np.asarray(experts)
    except (TypeError, ValueError, OverflowError):
        ex = np.asarray(0.5)  # reported below
    if ex.ndim != 2:
        raise ValueError(f"experts must be [n_tokens, k], got shape {ex.shape}")
    C = check_int("C", C, minimum=0)
    E = check_int("E", E)
    if ex.dtype.kind not in "iu" or ex.size and (ex.min() < 0 or ex.max() >= E):
        raise ValueError(f"experts must hold expert indices in [0, E={E}), got {_brief(ex)}")
    order = ex.T.reshape(-1)  # choice-major: all first choices, then all second choices
    onehot = order[:, None] == np.arange(E)[None, :]
    position = np.cumsum(onehot, axis=0)[np.arange(order.size), order] - 1
    return (position < C).reshape(ex.shape[1], ex.shape[0]).T


def expert_loads(experts, E):
    """Tokens routed to each expert (before any capacity): [E] counts.

    >>> expert_loads(np.array([[0, 1], [0, 2]]), 4).tolist()
    [2, 1, 1, 0]
    """
    try:
        ex = np.asarray(experts)
    except (TypeError, ValueError, OverflowError):
        ex = np.asarray(0.5)  # reported below
    E = check_int("E", E)
    if ex.dtype.kind not in "iu" or ex.size and (ex.min() < 0 or ex.max() >= E):
        raise ValueError(f"experts must hold expert indices in [0, E={E}), got {_brief(ex)}")
    return np.bincount(ex.reshape(-1), minlength=E)


def dropped_tokens(loads, C):
    """Assignments beyond capacity: Σ_e max(load_e - C, 0). Sums over the last axis.

    >>> dropped_tokens([5, 1, 3, 3], 3)
    2.0
    """
    loads = np.asarray(check_positive("loads", loads, allow_zero=True), dtype=float)
    C = check_positive("C", C, allow_zero=True)
    return _scalar(np.maximum(loads - C, 0).sum(axis=-1))


def imbalance(loads):
    """Load imbalance: the busiest expert's tokens over the mean, max/mean >= 1.

    The experts of a layer run in parallel and the layer waits for the busiest, so its expert
    compute takes imbalance times the balanced time (see :func:`layer_times`).

    >>> imbalance([6, 2, 2, 2])
    2.0
    """
    loads = np.asarray(check_positive("loads", loads, allow_zero=True), dtype=float)
    if loads.ndim == 0 or loads.shape[-1] == 0:
        raise ValueError(f"loads={_brief(loads)} must be an array of tokens per expert")
    mean = loads.mean(axis=-1)
    if np.any(mean <= 0):
        raise ValueError(f"loads={_brief(loads)} must route at least one token")
    return _scalar(loads.max(axis=-1) / mean)


def _moe_cfg(cfg):
    c = models.get(cfg)
    if not c.is_moe:
        raise ValueError(f"{c.name or 'cfg'} is dense (E=1); expert routing needs an MoE model "
                         "(E > 1)")
    return c


def _scalar(x):
    x = np.asarray(x)
    return x.item() if x.ndim == 0 else x
