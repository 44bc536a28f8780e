"""Tensor (and sequence) parallelism inside :func:`~scaling_lib.simulate.train_step`.

Megatron-LM's split (Shoeybi et al. 2019): the first matmul of a block is column-parallel, the
second row-parallel, so a block needs one collective on the way in (f) and one on the way out
(g). Without sequence parallelism the activations between blocks are replicated over tp: f is
the identity forward and an AllReduce backward, g an AllReduce forward and the identity
backward. With sequence parallelism (Korthikanti et al. 2022) they are split over the sequence:
f is an AllGather forward (ReduceScatter backward), g a ReduceScatter forward (AllGather
backward). The backward collectives are not written here: ``jax.grad`` derives them as the
transposes (``pcast`` <-> ``psum``, ``all_gather`` <-> ``psum_scatter``).

The embedding is vocabulary-parallel (each rank holds V/tp rows and looks up the tokens it
owns, then g sums the partial rows) and so is the loss: three AllReduces of one number per
token (the largest logit, the sum of exponentials, the target's logit).
"""

from __future__ import annotations

SEQ = 1  # activations are [batch, sequence, features]


def enter(lax, x, tp, sp):
    """Megatron's f: make the block input usable by every tp rank's column shard."""
    if tp is None:
        return x
    if sp:
        return lax.all_gather(x, tp, axis=SEQ, tiled=True)
    return lax.pcast(x, tp, to="varying")  # once, so the backward sums one cotangent


def leave(lax, y, tp, sp):
    """Megatron's g: sum the row-parallel partial outputs (and split the sequence with SP)."""
    if tp is None:
        return y
    if sp:
        return lax.psum_scatter(y, tp, scatter_dimension=SEQ, tiled=True)
    return lax.psum(y, tp)


def embed(lax, jnp, table, tokens, tp, sp):
    """Rows of ``table`` for ``tokens``; with tp, this rank's V/tp rows, then g."""
    if tp is None:
        return table[tokens]
    rows = table.shape[0]
    local = tokens - lax.axis_index(tp) * rows
    mine = (local >= 0) & (local < rows)
    part = jnp.where(mine[..., None], table[jnp.clip(local, 0, rows - 1)], 0.0)
    return leave(lax, part.astype(table.dtype), tp, sp)


def cross_entropy_sum(jax, lax, jnp, logits, targets, tp):
    """Sum of log(sum_v exp(logit_v)) - logit_target over tokens (vocabulary-parallel with tp)."""
    stop = jax.lax.stop_gradient
    m = stop(jnp.max(logits, axis=-1))  # any constant works: only for numerical range
    if tp is not None:
        m = lax.pmax(m, tp)
    sum_exp = jnp.sum(jnp.exp(logits - m[..., None]), axis=-1)
    if tp is None:
        target = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    else:
        cols = logits.shape[-1]
        local = targets - lax.axis_index(tp) * cols
        mine = (local >= 0) & (local < cols)
        picked = jnp.take_along_axis(logits, jnp.clip(local, 0, cols - 1)[..., None], -1)[..., 0]
        target = jnp.where(mine, picked, 0.0)
        sum_exp, target = lax.psum(sum_exp, tp), lax.psum(target, tp)
    return jnp.sum(jnp.log(sum_exp) + m - target)
