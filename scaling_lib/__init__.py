"""scaling_lib: the answer key of the course "How LLM Training and Serving Scale".

Small, pure, tested functions for rooflines, hardware, transformer accounting, memory,
communication and parallelism. Everything is in SI base units (bytes, seconds, FLOPs, FLOP/s,
bytes/s). Importing the package is instant: it never imports jax or ipywidgets (``simulate`` and
``widgets`` import them lazily, inside the functions that need them).
"""

from . import (
    breakdown,
    collectives,
    hardware,
    inference,
    memory,
    models,
    parallelism,
    published,
    roofline,
    serving,
    serving_sim,
    sharding,
    simulate,
    transformer,
    units,
)
from .breakdown import Breakdown

__version__ = "0.1.0"
__all__ = ["Breakdown", "breakdown", "collectives", "hardware", "inference", "memory", "models",
           "parallelism", "published", "roofline", "serving", "serving_sim", "sharding", "simulate",
           "transformer", "units", "__version__"]
