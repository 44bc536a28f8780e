"""The course in the reader's browser: the book's "live" button (JupyterLite's Pyodide kernel).

Everything in scaling_lib but :mod:`scaling_lib.simulate` and :mod:`scaling_lib.profile` is numpy
only and runs in Pyodide. JAX does not: there, asking for devices raises
:class:`NeedsFullKernel`, and the notebooks' set-up cell calls :func:`skip_cells_that_need_jax`
so that such a cell, and the cells that use what it would have defined, print one line saying so
instead of a traceback, and "Run all" goes on to the next cell (numpy figures and widgets work).
"""

from __future__ import annotations

import sys

from ..simulate.devices import MESSAGE, NeedsFullKernel, needs_full_kernel  # noqa: F401


def in_browser() -> bool:
    """True in JupyterLite's Pyodide kernel (Python compiled to WebAssembly)."""
    return sys.platform == "emscripten"


def _needs_jax(value) -> bool:
    return isinstance(value, ModuleNotFoundError) and \
        str(getattr(value, "name", "") or "").split(".")[0] in ("jax", "jaxlib")


def skip_cells_that_need_jax(shell=None):
    """Make cells that need JAX print :data:`MESSAGE` and succeed instead of raising.

    Installs an IPython custom exception handler for ModuleNotFoundError (of jax) and NameError
    (a name that a skipped cell would have defined); every other error shows its traceback as
    usual. Returns the handler (for tests)."""
    if shell is None:
        from IPython import get_ipython
        shell = get_ipython()
    skipped = []

    def handler(self, etype, value, tb, tb_offset=None):
        if _needs_jax(value):
            skipped.append(value)
            print(MESSAGE)
            return None
        if isinstance(value, NameError) and skipped:
            print(f"Skipped: this cell uses {getattr(value, 'name', None) or value}, which a cell "
                  f"that needs JAX would have defined (run the notebook on Colab or locally).")
            return None
        return self.showtraceback((etype, value, tb), tb_offset=tb_offset)

    if shell is not None:
        shell.set_custom_exc((ModuleNotFoundError, NameError), handler)
    return handler
