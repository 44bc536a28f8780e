"""The reference model that :func:`~scaling_lib.simulate.train_step` trains: the library's own
small decoder-only transformer, written once for every parallel plan.

Token embedding, then L layers of (RMSNorm, causal grouped-query attention, residual; RMSNorm,
gated MLP (SwiGLU), or in an MoE layer a mixture of experts (see ``moe``), residual), a final
RMSNorm and the output layer, with the mean next-token cross-entropy as the loss. No positional
encoding (the causal mask alone orders the tokens).

The forward pass never calls a collective itself: it asks an ``ops`` object (see
``step.Ops``) to fetch a weight, to enter and leave a tensor-parallel block, to attend (across
context-parallel ranks), to look up embeddings and to compute the loss. With the plan of one device every op is the plain
single-device computation, so the same code is the reference and every parallel version.
"""

from __future__ import annotations

import math

import numpy as np

from . import moe as _moe

# Each parameter's layout: (shape from cfg, the dimension tensor parallelism splits, the dimension
# ZeRO/FSDP shards). Column-parallel matrices (wq, wk, wv, w_gate, w_up, unembed) split their
# output dimension, row-parallel ones (wo, w_down) their input dimension, and the embedding its
# vocabulary (Megatron's vocabulary-parallel embedding); norm weights are replicated over tp.
LAYER_PARAMS = ("attn_norm", "wq", "wk", "wv", "wo", "mlp_norm", "w_gate", "w_up", "w_down")


def layout(cfg) -> dict:
    """{name: (shape, tp_dim, zero_dim)} for every parameter of ``cfg``, in a fixed order."""
    D, F, N, K, H, V = cfg.D, cfg.F, cfg.N, cfg.K, cfg.H, cfg.V
    per_layer = {"attn_norm": ((D,), None, 0), "wq": ((D, N * H), 1, 0),
                 "wk": ((D, K * H), 1, 0), "wv": ((D, K * H), 1, 0), "wo": ((N * H, D), 0, 1),
                 "mlp_norm": ((D,), None, 0), "w_gate": ((D, F), 1, 0), "w_up": ((D, F), 1, 0),
                 "w_down": ((F, D), 0, 1)}
    out = {"embed": ((V, D), 0, 1)}
    for layer in range(cfg.L):
        params = dict(per_layer)
        if _moe.is_moe_layer(cfg, layer):  # the MLP becomes router + experts (see ``moe``)
            params = {k: v for k, v in params.items() if k not in ("w_gate", "w_up", "w_down")}
            params.update(_moe.layer_layout(cfg))
        out.update({f"layers.{layer}.{k}": v for k, v in params.items()})
    out["final_norm"] = ((D,), None, 0)
    out["unembed"] = ((D, V), 1, 0)
    return out


def init_params(cfg, seed: int) -> dict:
    """Float64 host arrays: matrices ~ N(0, 1/fan_in), norm weights 1 + N(0, 0.1)."""
    rng = np.random.default_rng([seed, 1])
    out = {}
    for name, (shape, _, _) in layout(cfg).items():
        if len(shape) == 1:
            out[name] = 1.0 + 0.1 * rng.standard_normal(shape)
        else:
            out[name] = rng.standard_normal(shape) / math.sqrt(shape[-2])  # fan-in
    return out


def batch(cfg, B: int, T: int, seed: int):
    """B sequences of T random tokens and their next-token targets (int32 host arrays)."""
    rng = np.random.default_rng([seed, 2])
    ids = rng.integers(0, cfg.V, size=(B, T + 1)).astype(np.int32)
    return ids[:, :-1], ids[:, 1:]


def rms_norm(jnp, x, w, eps=1e-6):
    """x / sqrt(mean(x^2) + eps) * w over the last dimension."""
    return x * (1.0 / jnp.sqrt(jnp.mean(x * x, axis=-1, keepdims=True) + eps)) * w


def attention(jax, jnp, q, k, v, H):
    """Causal grouped-query attention on this device's heads.

    q [b, T, n·H], k and v [b, T, m·H]: n query heads share m key/value heads (n/m per group,
    heads of a group adjacent, so a tensor-parallel rank's heads are a contiguous slice).
    """
    b, T, _ = q.shape
    m = k.shape[-1] // H
    q = q.reshape(b, T, m, -1, H)
    k = k.reshape(b, T, m, H)
    v = v.reshape(b, T, m, H)
    s = jnp.einsum("btmgh,bsmh->bmgts", q, k) / math.sqrt(H)
    causal = jnp.tril(jnp.ones((T, T), bool))
    s = jnp.where(causal, s, jnp.asarray(-1e30, s.dtype))
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("bmgts,bsmh->btmgh", p, v).reshape(b, T, -1)


def layer(jax, jnp, ops, cfg, x, w):
    """One transformer layer; ``w`` maps LAYER_PARAMS names to this device's (fetched) weights."""
    h = ops.enter(rms_norm(jnp, x, w["attn_norm"]))
    a = ops.attention(jax, jnp, h @ w["wq"], h @ w["wk"], h @ w["wv"], cfg.H)
    x = x + ops.leave(a @ w["wo"])
    h = ops.enter(rms_norm(jnp, x, w["mlp_norm"]))
    if "router" in w:
        y = _moe.mlp(jax, jnp, ops, cfg, h, w)
    else:
        y = (jax.nn.silu(h @ w["w_gate"]) * (h @ w["w_up"])) @ w["w_down"]
    return x + ops.leave(y)


def loss_sum(jax, jnp, ops, cfg, params, tokens, targets):
    """Sum over this device's tokens of -log p(target): the forward pass of the whole model."""
    x = ops.embed(ops.fetch("embed", params["embed"]), tokens)

    def one_layer(x, shards, i):
        w = {k: ops.fetch(f"layers.{i}.{k}", shards[k]) for k in shards}
        return layer(jax, jnp, ops, cfg, x, w)

    for i in range(cfg.L):
        prefix = f"layers.{i}."
        shards = {k[len(prefix):]: v for k, v in params.items() if k.startswith(prefix)}
        x = ops.remat(lambda x, s, i=i: one_layer(x, s, i))(x, shards)

    def head(x, norm, unembed):
        h = ops.enter(rms_norm(jnp, x, ops.fetch("final_norm", norm)))
        return h @ ops.fetch("unembed", unembed)

    logits = ops.remat(head)(x, params["final_norm"], params["unembed"])
    return ops.cross_entropy_sum(logits.astype(jnp.float32), targets)
