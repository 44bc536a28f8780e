"""Moved to :mod:`scaling_lib.serving.parallel`; this name remains as a thin re-export."""
from .serving.parallel import *  # noqa: F401,F403
from .serving.parallel import __all__  # noqa: F401
