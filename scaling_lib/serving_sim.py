"""Moved to :mod:`scaling_lib.serving.sim`; this name remains as a thin re-export."""
from .serving.sim import *  # noqa: F401,F403
from .serving.sim import __all__  # noqa: F401
