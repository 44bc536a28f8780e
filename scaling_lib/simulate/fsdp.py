"""ZeRO stages 1-3, FSDP and HSDP inside :func:`~scaling_lib.simulate.train_step`.

The data-parallel ranks form a mesh ``(replicas, shard)`` = (dp / S, S), S = the plan's
``zero_group``. Each parameter is cut along one dimension (``model.layout``) into S shards; rank
r of a shard group owns shard r of the optimizer state (stage 1), of the gradients (stage 2) and
of the parameters (stage 3).

- Stages 1 and 2: every rank keeps the full weights; the gradients are reduce-scattered over the
  shard group (stage 1 once per step, after gradient accumulation; stage 2 after every
  micro-batch, since it keeps only its shard), each rank updates its shard, and the updated
  shards are all-gathered.
- Stage 3 (FSDP): the weights stay sharded; a layer's weights are all-gathered before its
  forward pass and again before its backward pass (they are not kept in between: the gathered
  weight is the one thing the checkpoint policy refuses to save); ``jax.grad`` turns the
  all-gather into the reduce-scatter of its gradient.
- HSDP (S < dp): the gradient shards are then all-reduced across the dp / S replicas.
"""

from __future__ import annotations

GATHERED = "fsdp_gathered"


def fetch(jax, lax, w, zero_dim, shard_axis):
    """ZeRO-3: all-gather a weight's shards over the shard group, named so remat drops it."""
    from jax.ad_checkpoint import checkpoint_name

    return checkpoint_name(lax.all_gather(w, shard_axis, axis=zero_dim, tiled=True), GATHERED)


def remat(jax, fn):
    """Keep every activation for the backward pass except the gathered weights (re-gathered)."""
    policy = jax.checkpoint_policies.save_anything_except_these_names(GATHERED)
    return jax.checkpoint(fn, policy=policy)


def reduce_scatter(lax, g, zero_dim, shard_axis):
    """Sum the gradient over the shard group, each rank keeping its shard."""
    return lax.psum_scatter(g, shard_axis, scatter_dimension=zero_dim, tiled=True)


def my_shard(lax, p, zero_dim, shard_axis, size):
    """This rank's slice of a full (replicated) parameter along ``zero_dim``."""
    n = p.shape[zero_dim] // size
    return lax.dynamic_slice_in_dim(p, lax.axis_index(shard_axis) * n, n, axis=zero_dim)


def all_gather(lax, p, zero_dim, shard_axis):
    """Stages 1-2: every rank gets the updated full parameter back."""
    return lax.all_gather(p, shard_axis, axis=zero_dim, tiled=True, to="invarying")
