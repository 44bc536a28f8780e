"""Parallelism: the "how" of every estimate.

``plan`` holds :class:`ParallelPlan` (the degrees of each strategy, a small frozen record) and
the pipeline bubble. One module per strategy (data, fsdp, tensor, pipeline, context, expert)
lives next to it, each exposing the same few functions.

See: the parallelism chapters.
"""

from .plan import SCHEDULES, ParallelPlan, pipeline_bubble_fraction

__all__ = ["SCHEDULES", "ParallelPlan", "pipeline_bubble_fraction"]
