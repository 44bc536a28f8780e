"""``python -m scaling_lib``: the command line (see ``scaling_lib.cli``)."""

import sys

from .cli import main

sys.exit(main())
