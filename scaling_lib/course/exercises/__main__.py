"""``python -m scaling_lib.course.exercises build|run``: see :mod:`scaling_lib.course.exercises.cli`."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
