"""``python -m scaling_lib``: the command line (see ``scaling_lib.cli``)."""

import sys

from .cli import main

if __name__ == "__main__":  # not when a doctest collector imports this file
    sys.exit(main())
