"""The mixture-of-experts MLP and expert parallelism inside
:func:`~scaling_lib.simulate.train_step`.

A MoE layer's MLP (every layer from ``cfg.n_dense_layers`` on) is a [D, E] router, E expert
SwiGLU MLPs of width F_e and ``n_shared_experts`` always-active ones (one SwiGLU of width
n_shared·F_e). Each sequence is one routing group (:mod:`scaling_lib.parallelism.expert`): its
T tokens pick their top k experts from the router logits, gates are the softmax over the k
chosen logits, and each expert keeps its first C = capacity(T, E, k, cfg.capacity_factor) of the
sequence's assignments (first choices before second choices); dropless routing uses C = T,
the most one expert can receive. Because routing is per sequence, the tokens a plan drops do
not depend on how sequences are spread over devices: every plan drops exactly the tokens the
one-device reference drops.

Dispatch and combine are GShard's one-hot einsums into static buffers [E, b·C, D]. With expert
parallelism (mesh axis ``ep``) each device holds E/ep experts; one AllToAll sends each expert's
slots to the device that holds it ([E, b·C, D] -> [E/ep, ep·b·C, D]) and one brings the results
back; ``jax.grad`` derives the two backward AllToAlls as their transposes.
"""

from __future__ import annotations

from ..parallelism.expert import capacity

EP_AXIS = "ep"


def is_moe_layer(cfg, i: int) -> bool:
    """Whether layer i's MLP is a mixture of experts."""
    return cfg.is_moe and i >= cfg.n_dense_layers


def layer_layout(cfg) -> dict:
    """{name: (shape, tp_dim, zero_dim)} of a MoE layer's MLP parameters (see ``model.layout``).

    Experts are stacked on a leading E dimension, which expert parallelism splits (see
    :func:`is_expert`); tensor parallelism splits each expert's hidden width F_e as it splits
    a dense MLP's F; the router is replicated.
    """
    D, E, Fe = cfg.D, cfg.E, cfg.F_e
    out = {"router": ((D, E), None, 0),
           "experts.w_gate": ((E, D, Fe), 2, 1), "experts.w_up": ((E, D, Fe), 2, 1),
           "experts.w_down": ((E, Fe, D), 1, 2)}
    if cfg.n_shared_experts:
        S = cfg.n_shared_experts * Fe
        out.update({"shared.w_gate": ((D, S), 1, 0), "shared.w_up": ((D, S), 1, 0),
                    "shared.w_down": ((S, D), 0, 1)})
    return out


def is_expert(name: str) -> bool:
    """Whether parameter ``name`` is a routed expert's (split over ep on its first dimension)."""
    return ".experts." in name


def dispatch(lax, x, ep):
    """[E, b·C, D] slots of this device's tokens -> [E/ep, ep·b·C, D] for its own experts."""
    if ep is None:
        return x
    return lax.all_to_all(x, ep, split_axis=0, concat_axis=1, tiled=True)


def combine(lax, y, ep):
    """The inverse of :func:`dispatch`: expert outputs back to the devices of their tokens."""
    if ep is None:
        return y
    return lax.all_to_all(y, ep, split_axis=1, concat_axis=0, tiled=True)


def route(jax, jnp, logits, k, C):
    """(dispatch [b, T, E, C] 0/1, combine [b, T, E, C] gate weights) for router ``logits``
    [b, T, E]: top-k per token, then each expert's first C assignments of the sequence."""
    b, T, E = logits.shape
    top, experts = jax.lax.top_k(logits, k)  # [b, T, k]
    gates = jax.nn.softmax(top, axis=-1)
    chosen = jax.nn.one_hot(experts, E, dtype=jnp.int32)  # [b, T, k, E]
    order = chosen.transpose(0, 2, 1, 3).reshape(b, k * T, E)  # first choices first
    position = jnp.sum((jnp.cumsum(order, axis=1) - 1) * order, axis=-1)  # [b, k·T]
    position = position.reshape(b, k, T).transpose(0, 2, 1)  # [b, T, k]
    slot = jax.nn.one_hot(jnp.where(position < C, position, C), C, dtype=logits.dtype)
    sent = jnp.einsum("btke,btkc->btec", chosen.astype(logits.dtype), slot)  # dropped: all 0
    weights = jnp.einsum("btk,btec,btke->btec", gates, sent, chosen.astype(logits.dtype))
    return sent, weights


def swiglu(jax, x, w_gate, w_up, w_down):
    return (jax.nn.silu(x @ w_gate) * (x @ w_up)) @ w_down


def mlp(jax, jnp, ops, cfg, h, w):
    """The MoE MLP of one layer on this device's tokens h [b, T, D] (weights ``w`` fetched)."""
    b, T, D = h.shape
    E = cfg.E
    C = capacity(T, E, cfg.k, cfg.capacity_factor)
    logits = (h @ w["router"]).astype(jnp.float32)  # [b, T, E]
    sent, weights = route(jax, jnp, logits, cfg.k, C)
    x = jnp.einsum("btec,btd->ebcd", sent.astype(h.dtype), h).reshape(E, b * C, D)
    x = ops.dispatch(x)  # [E_local, n_slots, D]
    g = jax.nn.silu(jnp.einsum("end,edf->enf", x, w["experts.w_gate"]))
    u = jnp.einsum("end,edf->enf", x, w["experts.w_up"])
    y = jnp.einsum("enf,efd->end", g * u, w["experts.w_down"])
    y = ops.combine(y).reshape(E, b, C, -1)
    out = jnp.einsum("btec,ebcd->btd", weights.astype(h.dtype), y)
    if cfg.n_shared_experts:
        out = out + swiglu(jax, h, w["shared.w_gate"], w["shared.w_up"], w["shared.w_down"])
    return out
