"""Answer key of solutions/90_numbers.ipynb: the functions of ``keys.drills``, and this notebook's wrong methods."""

from .drills import *  # noqa: F401,F403  (the key functions, shared by the drill notebooks)
from .drills import hints, wrong_methods

WRONG_METHODS = wrong_methods("90")
HINTS = hints("90")
