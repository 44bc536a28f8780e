"""Context parallelism inside :func:`~scaling_lib.simulate.train_step`: attention over a
sequence split across the ``cp`` mesh axis.

Each cp rank holds T/cp tokens of every sequence: with Llama 3's load balancing, chunks i and
2·cp-1-i of 2·cp (``parallelism.context.token_order``; ``train_step`` lays the tokens out in
that order on the host, as a data loader would). Everything but attention is per token, so the
model runs unchanged on the local tokens; the loss is a sum over tokens, so each rank's share
adds up, and the gradients are summed over the dp·cp replicas. Attention is replaced by one of
three functions, the plan's ``cp_variant``; each masks with the tokens' global positions
(key position <= query position):

- ``allgather``: all-gather K and V (one array) over cp, attend locally. ``jax.grad`` turns the
  all-gather into a reduce-scatter of dK and dV.
- ``ring``: cp steps; at each, attend to the K/V block in hand and pass it to the next rank
  (``lax.ppermute``, cp - 1 times), merging the blocks' partial results with the online softmax
  (a running maximum m, denominator l and unnormalised output o, rescaled by exp(m_old - m_new)
  when the maximum grows). The backward pass sends the dK/dV blocks back around the ring (the
  transposes of the ppermutes).
- ``ulysses``: ``lax.all_to_all`` turns q, k, v from [my tokens, all my heads] into [all
  tokens, 1/cp of my key/value groups (with their query heads)], attention runs locally, and a
  second all_to_all turns the output back; their transposes are all_to_alls too. With fewer
  key/value heads than cp each is replicated cp/k times before the all_to_all.
"""

from __future__ import annotations

import math

import numpy as np

SEQ, HEADS = 1, 2
NEG = -1e30  # finite "minus infinity" of the mask (no inf - inf = nan)


def positions(T, cp):
    """[cp, T/cp] global positions of each rank's tokens (the load-balanced layout)."""
    from ..parallelism.context import token_order

    return token_order(T, cp).reshape(cp, -1).astype(np.int32)


def _scores(jnp, q, k, pos_q, pos_k, H):
    """Masked scores [b, m, g, Sq, Sk] of q [b, Sq, m, g, H] against k [b, Sk, m, H]."""
    s = jnp.einsum("btmgh,bsmh->bmgts", q, k) / math.sqrt(H)
    mask = pos_k[None, :] <= pos_q[:, None]
    return jnp.where(mask, s, jnp.asarray(NEG, s.dtype)), mask


def attend(jax, jnp, q, k, v, pos_q, pos_k, H):
    """Causal attention by global positions: q [b, Sq, m, g, H], k, v [b, Sk, m, H]."""
    s, _ = _scores(jnp, q, k, pos_q, pos_k, H)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("bmgts,bsmh->btmgh", p, v)


def _split(q, k, v, H):
    b, S, _ = q.shape
    m = k.shape[-1] // H
    return q.reshape(b, S, m, -1, H), k.reshape(b, S, m, H), v.reshape(b, S, m, H)


def allgather(jax, lax, jnp, q, k, v, H, axis, pos):
    """Llama 3's variant: gather K and V of the whole sequence, attend to them locally."""
    q5, k4, v4 = _split(q, k, v, H)
    kv = lax.all_gather(jnp.concatenate([k4, v4], axis=-1), axis, axis=SEQ, tiled=True)
    k_all, v_all = kv[..., :H], kv[..., H:]
    pos_q = jnp.asarray(pos)[lax.axis_index(axis)]
    out = attend(jax, jnp, q5, k_all, v_all, pos_q, jnp.asarray(pos.reshape(-1)), H)
    return out.reshape(q.shape)


def ring(jax, lax, jnp, q, k, v, H, axis, pos):
    """Ring attention: pass K/V blocks around the ring, merge them with the online softmax."""
    cp = pos.shape[0]
    q5, k4, v4 = _split(q, k, v, H)
    me = lax.axis_index(axis)
    table = jnp.asarray(pos)
    pos_q = table[me]
    kv = jnp.concatenate([k4, v4], axis=-1)
    b, S, m, g, _ = q5.shape
    run_max = jnp.full((b, m, g, S), NEG, q.dtype)
    denom = jnp.zeros((b, m, g, S), q.dtype)
    out = jnp.zeros((b, m, g, S, H), q.dtype)
    for step in range(cp):
        src = (me - step) % cp  # the rank whose block is in hand
        s, mask = _scores(jnp, q5, kv[..., :H], pos_q, table[src], H)
        new_max = jax.lax.stop_gradient(jnp.maximum(run_max, jnp.max(s, axis=-1)))
        scale = jnp.exp(run_max - new_max)
        p = jnp.where(mask, jnp.exp(s - new_max[..., None]), 0.0)
        denom = denom * scale + jnp.sum(p, axis=-1)
        out = out * scale[..., None] + jnp.einsum("bmgts,bsmh->bmgth", p, kv[..., H:])
        run_max = new_max
        if step < cp - 1:
            kv = lax.ppermute(kv, axis, [(j, (j + 1) % cp) for j in range(cp)])
    out = out / denom[..., None]
    return jnp.einsum("bmgth->btmgh", out).reshape(q.shape)


def ulysses(jax, lax, jnp, q, k, v, H, axis, pos):
    """DeepSpeed-Ulysses: all_to_all from sequence to heads, attend, all_to_all back. With fewer
    key/value groups m than cp ranks, each is replicated r = cp/m times first (its g query
    heads split r ways with it), so every rank gets one group."""
    q5, k4, v4 = _split(q, k, v, H)
    cp, m = pos.shape[0], k4.shape[2]
    if m < cp:  # replicate the kv heads (parallelism.context.ulysses_kv_heads)
        r = cp // m
        b, S, _, g, _ = q5.shape
        q5 = q5.reshape(b, S, m * r, g // r, H)
        k4, v4 = jnp.repeat(k4, r, axis=2), jnp.repeat(v4, r, axis=2)

    def to_heads(x):  # [b, S/cp, m, ...] -> [b, S, m/cp, ...]
        return lax.all_to_all(x, axis, split_axis=HEADS, concat_axis=SEQ, tiled=True)

    every = jnp.asarray(pos.reshape(-1))
    out = attend(jax, jnp, to_heads(q5), to_heads(k4), to_heads(v4), every, every, H)
    out = lax.all_to_all(out, axis, split_axis=SEQ, concat_axis=HEADS, tiled=True)
    return out.reshape(q.shape)


VARIANTS = {"allgather": allgather, "ring": ring, "ulysses": ulysses}


def attention(jax, variant, q, k, v, H, axis, T, cp):
    """The plan's context-parallel attention on this rank's tokens (see the module docstring)."""
    return VARIANTS[variant](jax, jax.lax, jax.numpy, q, k, v, H, axis, positions(T, cp))
