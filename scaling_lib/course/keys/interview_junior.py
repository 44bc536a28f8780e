"""Answer key of solutions/91_interview_junior.ipynb: the functions of ``keys.drills``, and this notebook's wrong methods."""

from .drills import *  # noqa: F401,F403  (the key functions, shared by the drill notebooks)
from .drills import hints, wrong_methods

WRONG_METHODS = wrong_methods("91")
HINTS = hints("91")
