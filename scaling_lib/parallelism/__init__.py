"""Parallelism: the "how" of every estimate.

``plan`` holds :class:`ParallelPlan` (the degrees of each strategy, a small frozen record) and
the pipeline bubble. One module per strategy lives next to it, each exposing the same few
functions: ``comms`` (its collectives in one step, as :class:`Comm` records), ``memory`` (its
share of memory per device) and ``constraints`` (why a plan cannot run, as sentences):
``data``, ``fsdp`` (ZeRO stages and HSDP) and ``tensor`` (with sequence parallelism).
:func:`collectives` puts a plan's strategies together.

See: the parallelism chapters.
"""

from . import data, fsdp, tensor
from .comms import Comm, collectives, constraints, totals
from .plan import SCHEDULES, ParallelPlan, pipeline_bubble_fraction

__all__ = ["SCHEDULES", "Comm", "ParallelPlan", "collectives", "constraints", "data", "fsdp",
           "pipeline_bubble_fraction", "tensor", "totals"]
