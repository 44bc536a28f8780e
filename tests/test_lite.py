"""The live mode's Python side (scaling_lib.course.lite), run here in an IPython shell: cells that need JAX
print one line and do not fail; other errors still raise."""

import sys

import pytest

from scaling_lib.course import lite


def _shell():
    IPython = pytest.importorskip("IPython")
    from IPython.core.interactiveshell import InteractiveShell
    return InteractiveShell.instance() if IPython else None


def test_cells_that_need_jax_are_skipped_with_a_message(monkeypatch, capsys):
    shell = _shell()
    try:
        lite.skip_cells_that_need_jax(shell)
        monkeypatch.setattr(sys, "platform", "emscripten")
        r1 = shell.run_cell("from scaling_lib import simulate as sim\ndevices = sim.use_devices(8)")
        r2 = shell.run_cell("print(devices)")
        out = capsys.readouterr().out
        assert "needs JAX" in out and "Colab" in out
        assert "Skipped: this cell uses 'devices'" in out or "Skipped: this cell uses devices" in out
        assert "Traceback" not in out
        assert isinstance(r1.error_in_exec, lite.NeedsFullKernel)
        monkeypatch.setattr(sys, "platform", "linux")
        r3 = shell.run_cell("1 / 0")
        assert isinstance(r3.error_in_exec, ZeroDivisionError)
    finally:
        shell.set_custom_exc((), None)
