"""Parallelism: the "how" of every estimate.

``plan`` holds :class:`ParallelPlan` (the degrees of each strategy, a small frozen record) and
the pipeline bubble. One module per strategy lives next to it, each exposing the same few
functions: ``comms`` (its collectives in one step, as :class:`Comm` records), ``memory`` (its
share of memory per device) and ``constraints`` (why a plan cannot run, as sentences):
``data``, ``fsdp`` (ZeRO stages and HSDP), ``tensor`` (with sequence parallelism) and
``context`` (ring, Ulysses and all-gather K/V), ``pipeline`` (with its schedule
generator) and ``expert`` (mixtures of experts: AllToAll dispatch and combine, capacity,
imbalance).
:func:`collectives` puts a plan's strategies together. ``steptime`` is the one step-time model
(compute, each collective on the links its group crosses, overlap per phase), ``timeline`` its
layer-by-layer DDP and FSDP schedules, ``split`` the FSDP x TP search built on it.

See: the parallelism chapters.
"""

from . import context, data, expert, fsdp, pipeline, tensor
from .comms import Comm, collectives, constraints, totals
from .plan import SCHEDULES, ParallelPlan, pipeline_bubble_fraction
from . import split, steptime, timeline
from .estimate import StepEstimate, estimate, estimate_arrays  # noqa: E402

__all__ = ["SCHEDULES", "Comm", "ParallelPlan", "StepEstimate", "collectives", "constraints",
           "context", "data", "estimate", "estimate_arrays", "expert", "fsdp", "pipeline",
           "pipeline_bubble_fraction", "split", "steptime", "tensor", "timeline", "totals"]
