"""Every test process gets JAX's 8 simulated CPU devices before any test can start JAX.

The device count is fixed when JAX starts, and pytest-xdist runs many test files in one worker:
the multi-device tests (simulate, train_step, sharding) and the wrong-method audit, which runs
solution notebooks' import cells (``use_cpu_devices(8)``), must not find JAX already started
with one device by an earlier file.
"""

import importlib.util


def pytest_configure(config):
    if importlib.util.find_spec("jax") is not None:
        from scaling_lib import simulate

        simulate.use_cpu_devices(8)
