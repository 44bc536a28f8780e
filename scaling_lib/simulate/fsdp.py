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
  forward pass and again before its backward pass, in every micro-batch: each layer (and the
  output layer) is rematerialised in the backward pass without its gathered weights (the
  checkpoint policy keeps activations but nothing derived from a gathered weight), and an
  optimization barrier keeps the gathers inside the micro-batch loop; ``jax.grad`` turns the
  all-gather into the reduce-scatter of its gradient. (XLA:CPU, with no memory pressure,
  merges the backward re-gather into the forward gather by CSE: see
  tests/test_train_step.py.)
- HSDP (S < dp): the gradient shards are then all-reduced across the dp / S replicas.
"""

from __future__ import annotations


def fetch(jax, lax, w, zero_dim, shard_axis):
    """ZeRO-3: all-gather a weight's shards over the shard group."""
    return lax.all_gather(w, shard_axis, axis=zero_dim, tiled=True)


def _keep(prim, *_, **params) -> bool:
    """Checkpoint policy: save activations, never a gathered weight nor what is cheaply derived
    from one (a weight's transpose, as the backward matmul uses it, or its broadcast, as a
    norm's backward uses it, would otherwise be saved in its place)."""
    if prim.name == "all_gather":
        return "dps" not in tuple(params.get("axis_name", ()))
    return prim.name not in ("transpose", "broadcast_in_dim", "reduce_precision",
                             "convert_element_type")


def remat(jax, fn):
    """Keep ``fn``'s activations for the backward pass but re-gather its weights there."""
    return jax.checkpoint(fn, policy=_keep)


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
