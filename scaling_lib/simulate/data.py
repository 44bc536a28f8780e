"""Data parallelism inside :func:`~scaling_lib.simulate.train_step`.

Each of the dp ranks takes B/dp of the B sequences and computes the gradient of its share of
the loss, sum of its tokens' losses / (B·T). The gradient is linear in the per-token losses, so
the sum of the dp partial gradients is exactly the gradient of the whole batch: one AllReduce
of every gradient (once per step, after any gradient accumulation) makes every replica's
gradient the full one, and every replica takes the same optimizer step.
"""

from __future__ import annotations


def all_reduce(lax, g, axes):
    """Sum a gradient over the data-parallel ``axes`` (a tuple of mesh axis names)."""
    return lax.psum(g, axes) if axes else g
