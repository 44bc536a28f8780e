"""``python -m scaling_lib.exercises build|run``: see :mod:`scaling_lib.exercises.cli`."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
