"""Expert parallelism: the E experts of every MoE layer spread over ep devices.

A mixture-of-experts layer (Shazeer et al. 2017; GShard, Lepikhin et al. 2020) replaces the MLP
by E expert MLPs and a router: each token's router scores pick its top k experts, and the
layer's output is the gate-weighted sum of those k experts' outputs. With ep > 1 each device
holds E/ep experts, so tokens travel to their experts and back: two AllToAlls over the ep group
per MoE layer forward (dispatch, combine) and, as their transposes, two backward.

Capacity. Routing happens per group of n tokens (here: one sequence of T/cp tokens). With a
capacity factor c each expert takes at most C = min(⌈c·k·n/E⌉, n) tokens of a group, earlier
tokens first (every token's first choice before any second choice), and drops the rest: a
dropped token skips that expert (its residual carries it on). Dispatch buffers have the static
shape [E, C, D] per group. Dropless routing (c = None) keeps every token; the cost model then
counts the k·n tokens actually moved (a ragged AllToAll, as dropless systems use).

Per micro-batch of b sequences per dp rank, a bytes per element, each of the 4·n_moe AllToAlls
of a step moves (V: the full array, ep times one device's buffer)

    V = ep · a · b · E·C · D      (with capacity; C per sequence)
    V = ep · a · b · k·T/cp · D   (dropless, ``dispatch="ragged"``: the k·T/cp routed tokens,
                                   balanced routing; Megatron-Core's all-to-all dispatcher,
                                   MegaBlocks)
    V = ep · a · b · E·T/cp · D   (dropless, ``dispatch="padded"``: static buffers of C = T/cp
                                   slots per expert, the most one expert can receive; GShard's
                                   einsum dispatch, what XLA compiles without a ragged
                                   AllToAll: E/k times the ragged bytes, 2x at E = 4, k = 2)

n_moe is the number of MoE layers of the first pipeline stage (its ⌈L/pp⌉ layers after the
``n_dense_layers`` dense ones), as the other strategies count the first stage's layers.

With tp > 1 (and no sequence parallelism) every tp rank dispatches the same tokens, and the
router's weight gradient (a·D·E per MoE layer), partial on each tp rank, is summed by an
AllReduce over tp. Expert weight gradients are summed over the dp·cp/ep ranks holding the
same experts (see :mod:`~scaling_lib.parallelism.data`). Routing itself (capacity, top-k, drops,
imbalance) is in :mod:`~scaling_lib.parallelism.routing`, whose names this module re-exports.

See: the chapter "Expert parallelism and mixtures of experts".
"""

from __future__ import annotations

import numpy as np

from .. import collectives as _collectives
from .. import hardware, models
from .. import roofline as _roofline
from ..breakdown import Breakdown
from ..transformer import _mlp_biases, _mlp_weights
from ..units import _brief, check_int, check_positive, divisors
from .comms import Comm, element_bytes, params_per_device
from . import rules as _rules
from .plan import ParallelPlan, check_step_args
from .routing import (MAX_LOGITS, _moe_cfg, _scalar, bias_update, biased_route,  # noqa: F401
                      capacity, dropped_tokens, expert_loads, imbalance, keep_mask,
                      load_balance_loss, route, router_z_loss, tokens_per_expert, toy_logits,
                      toy_router)


DISPATCH = ("ragged", "padded")  # how a dropless layer's AllToAll sends (module docstring)


# ---- communication and memory per step (the strategy interface) -------------------------------
def all_to_all_bytes(cfg, tokens, ep, *, dtype="bf16", group_tokens=None,
                     dispatch="ragged") -> float:
    """V of one dispatch (or combine) AllToAll for ``tokens`` tokens on each of ep devices.

    With ``cfg.capacity_factor`` the static buffers of E·C slots per group of ``group_tokens``
    tokens (default: all ``tokens``): V = ep · a · (tokens / group_tokens) · E·C · D. Dropless:
    ``dispatch="ragged"`` sends the routed tokens, V = ep · a · k · tokens · D (balanced);
    ``dispatch="padded"`` the static buffers of C = group_tokens slots (:func:`capacity` with
    no factor), E/k times more.

    >>> round(all_to_all_bytes("mixtral-8x7b", 4096, 8) / 1e6, 1)  # 8 · 2 · 2 · 4096 · 4096
    536.9
    >>> padded = all_to_all_bytes("mixtral-8x7b", 4096, 8, dispatch="padded")
    >>> padded / all_to_all_bytes("mixtral-8x7b", 4096, 8)  # E / k = 8 / 2
    4.0
    """
    c = _moe_cfg(cfg)
    n = check_int("tokens", tokens)
    ep = check_int("ep", ep)
    if dispatch not in DISPATCH:
        raise ValueError(f"dispatch={dispatch!r}; valid choices: {', '.join(DISPATCH)}")
    if c.E % ep:
        raise ValueError(f"ep={ep} does not divide E={c.E} experts; choose ep in {divisors(c.E)}")
    a = element_bytes(dtype)
    if c.capacity_factor is None and dispatch == "ragged":
        return float(ep * a * c.k * n * c.D)
    g = n if group_tokens is None else check_int("group_tokens", group_tokens)
    if n % g:
        raise ValueError(f"tokens={n} must be a multiple of group_tokens={g}")
    return float(ep * a * (n // g) * c.E * capacity(g, c.E, c.k, c.capacity_factor) * c.D)


def stage_moe_layers(cfg, pp=1) -> int:
    """MoE layers of the first of pp pipeline stages: its ⌈L/pp⌉ layers after the dense ones.

    >>> stage_moe_layers("deepseek-v3", 1), stage_moe_layers("deepseek-v3", 2)
    (58, 28)
    """
    c = models.get(cfg)
    pp = check_int("pp", pp)
    if not c.is_moe:
        return 0
    return max(0, min(-(-c.L // pp), c.L) - c.n_dense_layers)


def comms(cfg, plan: ParallelPlan, B, T, *, dtype="bf16", dispatch="ragged") -> list[Comm]:
    """Expert parallelism's collectives in one step, per device (empty for a dense model).

    Per MoE layer of the first pipeline stage (:func:`stage_moe_layers`) and micro-batch:
    dispatch and combine AllToAlls forward, their transposes backward (V from
    :func:`all_to_all_bytes` with ``dispatch``, one group per sequence); with tp > 1 the router
    gradient's AllReduce over tp.

    >>> c = models.TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64, E=4, k=2)
    >>> plan = ParallelPlan(dp=2, ep=2, micro_batch=4)  # V = 2 · 4 bytes · 4 · 2·16 · 32
    >>> [(x.kind, x.nbytes, x.count, x.phase) for x in comms(c, plan, 8, 16, dtype="f32")]
    [('all-to-all', 32768.0, 4, 'forward'), ('all-to-all', 32768.0, 4, 'backward')]
    """
    check_step_args(plan, B, T)
    c = models.get(cfg)
    if not c.is_moe or c.n_moe_layers == 0:
        return []
    a = element_bytes(dtype)
    m = plan.n_microbatches(B)
    b = B // (plan.dp * m)  # sequences per micro-batch on one dp rank
    n_seq = T // plan.cp
    layers = stage_moe_layers(c, plan.pp)
    out = []
    if layers == 0:
        return out
    if plan.ep > 1:
        V = b * all_to_all_bytes(c, n_seq, plan.ep, dtype=dtype, group_tokens=n_seq,
                                 dispatch=dispatch)
        n = 2 * layers * m
        out += [Comm("all-to-all", "ep", plan.ep, V, n, "forward", False),
                Comm("all-to-all", "ep", plan.ep, V, n, "backward", False)]
    if plan.tp > 1:
        out.append(Comm("all-reduce", "tp", plan.tp, a * c.D * c.E, layers * m,
                        "backward", True))
    return out


def memory(cfg, plan: ParallelPlan, B, T, *, recipe="mixed", optimizer="adam", **options):
    """The experts' model states per device: E/ep experts (split tp ways), at the recipe's
    bytes per parameter, sharded further by ZeRO over the dp/ep ranks that hold them.

    >>> m = memory("mixtral-8x7b", ParallelPlan(dp=8, ep=8), 8, 4096)
    >>> round(m["expert parameters"] / 1e9, 2)  # 32 layers · 3·4096·14336 · 2 bytes
    11.27
    """
    from .. import memory as _memory

    check_step_args(plan, B, T, dict(options, recipe=recipe, optimizer=optimizer))
    reasons = constraints(cfg, plan, B, T)
    if reasons:
        raise ValueError("; ".join(reasons))
    p_b, g_b, o_b = _memory._recipe(recipe, optimizer)
    experts = params_per_device(cfg, plan)[2]
    S_e = max(plan.zero_group / plan.ep, 1.0)
    shard = {stage: (S_e if plan.zero >= stage else 1.0) for stage in (1, 2, 3)}
    return Breakdown({"expert parameters": p_b * experts / shard[3],
                      "expert gradients": g_b * experts / shard[2],
                      "expert optimizer": o_b * experts / shard[1]}, unit="bytes")


def constraints(cfg, plan: ParallelPlan, B, T) -> list[str]:
    """ep > 1 needs an MoE model whose E experts split evenly over the ep ranks (the rule
    ep_experts of :mod:`~scaling_lib.parallelism.rules`, as a sentence with the choices).

    (ep dividing dp · cp is checked by :class:`ParallelPlan` itself.)

    >>> constraints("mixtral-8x7b", ParallelPlan(dp=6, ep=3), 6, 16)
    ['ep=3 does not divide E=8 experts; choose ep in [1, 2, 4, 8]']
    """
    check_step_args(plan, B, T)
    if plan.ep == 1:
        return []
    c = models.get(cfg)
    if "ep_experts" not in _rules.broken(c, plan, B, T):  # the rule's one home
        return []
    if not c.is_moe:
        return [f"ep={plan.ep} needs a mixture-of-experts model; {c.name or 'cfg'} is dense "
                "(E=1): use ep=1"]
    return [f"ep={plan.ep} does not divide E={c.E} experts; choose ep in {divisors(c.E)}"]


def active_expert_params(cfg) -> Breakdown:
    """Expert parameters one token uses, over all MoE layers: ``routed`` (its k experts, behind
    the AllToAlls) and ``shared`` (the shared experts, computed where the token is, with no
    communication).

    >>> b = active_expert_params("deepseek-v3")  # 58 layers · (8 | 1) · 3·7168·2048
    >>> b["routed"] // b["shared"]
    8
    """
    c = _moe_cfg(cfg)
    one = _mlp_weights(c, c.F_e) + _mlp_biases(c, c.F_e)
    return Breakdown({"routed": c.n_moe_layers * c.k * one,
                      "shared": c.n_moe_layers * c.n_shared_experts * one}, unit="params")


# ---- when expert parallelism pays -------------------------------------------------------------
def critical_tokens_per_expert(accelerator, dtype="bf16") -> float:
    """Tokens per expert above which an expert's matmuls are compute-bound: C / W_hbm · w/2.

    An expert's weights are read from HBM once per step of the layer whatever the tokens; with
    t tokens its matmuls do 2·t FLOPs per weight, so it is compute-bound when t exceeds the
    critical batch of :func:`scaling_lib.roofline.critical_batch` (≈295 on an H100 in bf16).

    >>> round(critical_tokens_per_expert("h100"))
    295
    """
    return float(_roofline.critical_batch(accelerator, dtype))


def min_tokens_for_compute_bound(cfg, accelerator, dtype="bf16") -> float:
    """Routed tokens per MoE layer (over the ep group) that keep every expert compute-bound:
    E/k times :func:`critical_tokens_per_expert` (balanced routing).

    >>> round(min_tokens_for_compute_bound("deepseek-v3", "h100"))  # 256/8 · 295.3
    9451
    """
    c = _moe_cfg(cfg)
    return c.E / c.k * critical_tokens_per_expert(accelerator, dtype)


def layer_times(cfg, tokens, ep, accelerator, bytes_per_s, *, imbalance=1.0, topology="switch",
                latency=0.0, dtype="bf16"):
    """(T_math, T_comm) of one MoE layer's forward pass on one of ep devices, in seconds.

    T_math = imbalance · k · tokens · 2·(3·D·F_e) / C: the routed experts' matmuls (the
    busiest device's share: ``imbalance`` = max/mean load); T_comm = the dispatch and combine
    AllToAlls (:func:`all_to_all_bytes`, :func:`scaling_lib.collectives.collective_time`,
    ``bytes_per_s`` one-way per device). ``tokens`` per device. Left out: attention, the
    router, shared experts.

    >>> t_math, t_comm = layer_times("deepseek-v3", 8192, 64, "h100", 50e9)
    >>> round(t_math * 1e3, 3), round(t_comm * 1e3, 3)
    (5.834, 36.994)
    """
    c = _moe_cfg(cfg)
    acc = hardware.get(accelerator)
    n = check_int("tokens", tokens)
    ep = check_int("ep", ep)
    imb = check_positive("imbalance", imbalance)
    if np.any(np.asarray(imb) < 1):
        raise ValueError(f"imbalance={_brief(imbalance)} must be >= 1 (busiest load / mean)")
    flops = c.k * n * 2.0 * _mlp_weights(c, c.F_e)
    t_math = np.asarray(imb) * flops / acc.peak_flops_per_s(dtype)
    V = all_to_all_bytes(c, n, ep, dtype=dtype)
    t_comm = 2 * _collectives.collective_time("all-to-all", V, ep, bytes_per_s,
                                             topology=topology, latency=latency)
    return _scalar(t_math), _scalar(t_comm)
