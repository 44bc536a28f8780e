import subprocess
import sys


def test_import_is_light_and_never_pulls_jax_or_widgets():
    code = ("import sys, scaling_lib; "
            "bad = [m for m in ('jax', 'ipywidgets', 'matplotlib', 'IPython') if m in sys.modules]; "
            "print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_public_modules_exposed():
    import scaling_lib

    for name in ("hardware", "roofline", "collectives", "models", "transformer", "memory",
                 "parallelism", "simulate", "units"):
        assert hasattr(scaling_lib, name)
    assert scaling_lib.Breakdown is scaling_lib.breakdown.Breakdown
