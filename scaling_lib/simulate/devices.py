"""Simulated devices: N fake CPU devices, meshes, and the book's notation for a sharding.

JAX is imported inside the functions that need it, never at import time.
"""

from __future__ import annotations

import math
import os
import re
import sys

import numpy as np

# The book's live mode (JupyterLite's Pyodide kernel) has no JAX: asking for devices there raises
# NeedsFullKernel, which the course's set-up cell (scaling_lib.course.lite) turns into one line.
MESSAGE = ("This cell needs JAX, which does not run in the browser's Python (Pyodide): open the "
           "notebook on Colab or run it locally (`make lab`) to run it. Skipped here; the book's "
           "page shows its output.")


class NeedsFullKernel(ModuleNotFoundError):
    """JAX is not available in this kernel (the browser's Pyodide)."""


def needs_full_kernel() -> NeedsFullKernel:
    return NeedsFullKernel(MESSAGE, name="jax")


def _jax():
    if sys.platform == "emscripten":  # the book's live mode: JupyterLite's Pyodide kernel
        raise needs_full_kernel()
    try:
        import jax
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError(
            "scaling_lib.simulate needs JAX: pip install 'scaling_lib[jax]' (or pip install jax)"
        ) from None
    return jax


def use_cpu_devices(n: int):
    """Ask for ``n`` simulated CPU devices; call it before anything else uses JAX.

    Sets ``jax_num_cpu_devices`` (which wins over the ``--xla_force_host_platform_device_count``
    flag). If JAX already started with a different number of CPU devices, raises RuntimeError
    telling you to restart the kernel. Other backends (a Colab TPU) are left alone; build meshes
    with :func:`make_mesh`, which uses the CPU devices. Returns the list of CPU devices.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"n={n!r} must be a whole number of devices >= 1")
    jax = _jax()
    try:
        jax.config.update("jax_num_cpu_devices", int(n))
    except RuntimeError:
        pass  # JAX has already started; check what it has below
    except (AttributeError, KeyError, ValueError):  # JAX older than the option: use the flag
        flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "",
                       os.environ.get("XLA_FLAGS", ""))
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={n}".strip()
    devices = jax.devices("cpu")
    if len(devices) != n:
        raise RuntimeError(
            f"JAX already started with {len(devices)} CPU device(s), but {n} were asked for. "
            f"The device count is fixed when JAX starts: restart the kernel (or Python) and call "
            f"scaling_lib.simulate.use_cpu_devices({n}) before any other JAX code runs."
        )
    return devices


def use_devices(n: int, *, verbose: bool = True):
    """``n`` devices for a multi-device example: real accelerators if the runtime has ``n``, else CPU.

    Call it where a chapter would call :func:`use_cpu_devices`, before anything else uses JAX. It
    asks for ``n`` simulated CPU devices first (the count is fixed when JAX starts), then looks at
    the default backend: a GPU or TPU runtime with at least ``n`` devices (a Colab TPU v2-8 has 8)
    gives its first ``n`` devices; anything else gives the ``n`` simulated CPU devices. Prints
    which it chose and why (``verbose=False`` to stay quiet) and returns the list of devices: pass
    it on, as in ``make_mesh((2, 4), ("X", "Y"), devices=devices)``.
    """
    cpu = use_cpu_devices(n)  # validates n; leaves accelerators alone
    jax = _jax()
    backend = jax.default_backend()
    real = [d for d in jax.devices() if d.platform != "cpu"] if backend != "cpu" else []
    if len(real) >= n:
        chosen = real[:n]
        message = f"Using {n} real {backend.upper()} device(s) ({real[0].device_kind})."
    else:
        chosen = cpu
        why = ("this runtime has no GPU or TPU" if not real else
               f"this runtime has {len(real)} {backend.upper()} device(s), fewer than {n}")
        message = f"Using {n} simulated CPU devices: {why}."
    if verbose:
        print(message)
    return chosen


def make_mesh(shape, names, *, devices=None):
    """A device mesh of ``shape`` with axis ``names`` (e.g. ``(2, 4), ("X", "Y")``).

    Uses the first prod(shape) CPU devices unless ``devices`` is given, with Auto axis types, so
    plain arrays can be passed to ``jax.shard_map`` and ``jax.jit``.
    """
    jax = _jax()
    shape = tuple(int(k) for k in shape)
    names = tuple(names)
    if len(shape) != len(names):
        raise ValueError(f"shape={shape} and names={names} must have the same length")
    size = math.prod(shape)
    pool = list(jax.devices("cpu") if devices is None else devices)
    if len(pool) < size:
        raise ValueError(
            f"a mesh of shape {shape} needs {size} devices but only {len(pool)} are available; "
            f"call scaling_lib.simulate.use_cpu_devices({size}) in a fresh kernel first"
        )
    grid = np.empty(size, dtype=object)
    grid[:] = pool[:size]
    auto = (jax.sharding.AxisType.Auto,) * len(shape)
    return jax.sharding.Mesh(grid.reshape(shape), names, axis_types=auto)


def shard(x, mesh, spec):
    """Place ``x`` on ``mesh`` sharded by ``spec`` (a tuple like ``("X", None)``)."""
    jax = _jax()
    spec = spec if isinstance(spec, jax.sharding.PartitionSpec) else jax.sharding.PartitionSpec(
        *spec)
    return jax.device_put(x, jax.sharding.NamedSharding(mesh, spec))


def notation(spec, dims=None, name="A") -> str:
    """The book's notation for a sharding: A[I_X, J] for spec ("X", None).

    A dimension sharded over several mesh axes gets them all (I_XY); ``dims`` names the
    dimensions in order (default I, J, K, L for as many entries as ``spec`` has).

    >>> notation(("X", None)), notation((None, ("X", "Y")), dims="BD", name="W")
    ('A[I_X, J]', 'W[B, D_XY]')
    """
    spec = tuple(spec)
    dims = "IJKL"[:max(len(spec), 1)] if dims is None else dims
    spec = spec + (None,) * (len(dims) - len(spec))
    parts = []
    for d, entry in zip(dims, spec):
        if entry is None:
            parts.append(d)
        else:
            axes = (entry,) if isinstance(entry, str) else tuple(entry)
            parts.append(f"{d}_{''.join(axes)}")
    return f"{name}[{', '.join(parts)}]"


def show_sharding(x, dims=None, name="A") -> str:
    """Describe how ``x`` is laid out: its notation, and which slice each device holds."""
    sharding = x.sharding
    spec = tuple(getattr(sharding, "spec", ()))
    spec = spec + (None,) * (x.ndim - len(spec))
    dims = "IJKL"[:x.ndim] if dims is None else dims
    index = sorted(sharding.devices_indices_map(x.shape).items(), key=lambda t: t[0].id)
    lines = []
    for dev, idx in index:
        sizes = [len(range(*s.indices(n))) for s, n in zip(idx, x.shape)]
        cells = ", ".join(":" if k == n else f"{s.indices(n)[0]}:{s.indices(n)[1]}"
                          for s, k, n in zip(idx, sizes, x.shape))
        lines.append(f"  device {dev.id}: {name}[{cells}]")
    per_device = math.prod(sizes) * x.dtype.itemsize if index else 0
    head = (f"{notation(spec, dims, name)}: {x.dtype}{list(x.shape)}, {x.nbytes:,} bytes in all, "
            f"{per_device:,} bytes per device")
    return "\n".join([head] + lines)
