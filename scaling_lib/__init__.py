"""scaling_lib: the answer key of the course "How LLM training and serving scale".

Small, pure, tested functions for rooflines, hardware, transformer accounting, communication and
parallelism. Everything is in SI base units (bytes, seconds, FLOPs, FLOP/s, bytes/s).
Importing the package is instant: it never imports jax or ipywidgets (modules that need them
import them lazily).
"""

from . import breakdown, hardware, roofline, units
from .breakdown import Breakdown

__version__ = "0.1.0"
__all__ = ["Breakdown", "breakdown", "hardware", "roofline", "units", "__version__"]
