"""The compiled program as XLA sees it: compiling without running, and XLA's own estimates.

:func:`compile_fn` lowers and compiles a function; :func:`cost_analysis` (:class:`Cost`) and
:func:`memory_analysis` (:class:`Memory`) wrap ``compiled.cost_analysis()`` and
``compiled.memory_analysis()`` in the library's units (FLOPs, bytes; per device). JAX is
imported only when a function needs it (:func:`_jax`).

See: Chapter "Profiling JAX programs".
"""

from __future__ import annotations

from dataclasses import dataclass


def _jax():
    try:
        import jax
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("scaling_lib.profile needs JAX: pip install 'scaling_lib[jax]'") from None
    return jax


def compile_fn(fn, *args, **kwargs):
    """``jax.jit(fn).lower(*args).compile()`` (an already jitted ``fn`` is used as is).

    Arguments may be arrays or ``jax.ShapeDtypeStruct``s; nothing is executed.
    """
    jax = _jax()
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    return jitted.lower(*args, **kwargs).compile()


@dataclass(frozen=True)
class Cost:
    """XLA's cost estimate of a compiled program, per device: FLOPs, transcendentals, bytes."""

    flops: float
    transcendentals: float
    bytes_accessed: float

    @property
    def intensity(self) -> float:
        """FLOPs per byte accessed."""
        return self.flops / self.bytes_accessed if self.bytes_accessed else float("inf")


def cost_analysis(compiled) -> Cost:
    """``compiled.cost_analysis()`` in the library's units (one device's share).

    XLA counts each instruction once: a loop body (``lax.scan``, ``fori_loop``) is counted once,
    not once per iteration; for a sharded program the numbers are per device.
    """
    raw = compiled.cost_analysis()
    if isinstance(raw, (list, tuple)):  # older JAX: one dict per program
        raw = raw[0] if raw else {}
    raw = raw or {}
    return Cost(float(raw.get("flops", 0.0)), float(raw.get("transcendentals", 0.0)),
                float(raw.get("bytes accessed", 0.0)))


@dataclass(frozen=True)
class Memory:
    """``compiled.memory_analysis()`` per device, in bytes.

    ``peak_bytes`` = arguments + outputs + temporaries - aliased (donated buffers reused as
    outputs): what the program needs on the device while it runs (generated code aside).
    """

    argument_bytes: float
    output_bytes: float
    temp_bytes: float
    alias_bytes: float
    generated_code_bytes: float

    @property
    def peak_bytes(self) -> float:
        return self.argument_bytes + self.output_bytes + self.temp_bytes - self.alias_bytes


def memory_analysis(compiled) -> Memory:
    """``compiled.memory_analysis()`` as a :class:`Memory` (bytes per device)."""
    m = compiled.memory_analysis()
    get = lambda k: float(getattr(m, k, 0) or 0)  # noqa: E731
    return Memory(get("argument_size_in_bytes"), get("output_size_in_bytes"),
                  get("temp_size_in_bytes"), get("alias_size_in_bytes"),
                  get("generated_code_size_in_bytes"))
