"""Moved to :mod:`scaling_lib.serving.engine`; this name remains as a thin re-export."""
from .serving.engine import *  # noqa: F401,F403
from .serving.engine import __all__  # noqa: F401
