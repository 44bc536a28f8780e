"""Parallelism: the "how" of every estimate.

``plan`` holds :class:`ParallelPlan` (the degrees of each strategy, a small frozen record) and
the pipeline bubble. One module per strategy lives next to it, each exposing the same few
functions: ``comms`` (its collectives in one step, as :class:`Comm` records), ``memory`` (its
share of memory per device) and ``constraints`` (why a plan cannot run, as sentences):
``data``, ``fsdp`` (ZeRO stages and HSDP), ``tensor`` (with sequence parallelism) and
``context`` (ring, Ulysses and all-gather K/V), ``pipeline`` (with its schedule
generator) and ``expert`` (mixtures of experts: AllToAll dispatch and combine, capacity,
imbalance).
:func:`collectives` puts a plan's strategies together. ``rules`` is the one table of what a
plan must obey; :func:`estimate` the one step-time model (``kernels``, ``step``, ``links``,
``step_memory``, ``calibration``); ``steptime`` its per-phase view for the data-parallel
chapters, ``timeline`` layer-by-layer DDP and FSDP schedules, ``split`` the FSDP x TP search.

See: the parallelism chapters.
"""

from . import context, data, expert, fsdp, pipeline, tensor
from .comms import Comm, collectives, constraints, totals
from .plan import SCHEDULES, ParallelPlan, pipeline_bubble_fraction
from . import rules  # noqa: E402
from .calibration import DEFAULT_CALIBRATION, Calibration  # noqa: E402
from .estimate import StepEstimate, estimate, estimate_arrays  # noqa: E402
from .kernels import matmul_time  # noqa: E402
from . import split, steptime, timeline  # noqa: E402  (views of the estimate)

__all__ = ["DEFAULT_CALIBRATION", "SCHEDULES", "Calibration", "Comm", "ParallelPlan",
           "StepEstimate", "collectives", "constraints", "context", "data", "estimate",
           "estimate_arrays", "expert", "fsdp", "matmul_time", "pipeline",
           "pipeline_bubble_fraction", "rules", "split", "steptime", "tensor", "timeline",
           "totals"]
