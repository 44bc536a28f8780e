"""Checking the inputs of the collective cost models; errors name the value and the rule.

:func:`_positive` (sizes, bandwidths, latencies), :func:`_check_n` (device counts, broadcast
over arrays), :func:`_as_cluster` (a Cluster or a preset name) and :func:`_axes` (a torus's axis
sizes and wraparound flags). Private to the package: the public functions call them first.
"""

from __future__ import annotations

import math

import numpy as np

from .. import hardware
from ..units import check_positive

# Device counts above this are rejected: far beyond any machine, and where float steps stop
# being whole numbers (2**53).
_MAX_DEVICES = 2**40


def _positive(name, value, *, allow_zero=False):
    """``units.check_positive`` that also turns bools, complex numbers and ints too large for a
    float into a ValueError naming the rule."""
    rule = f"{name} must be a finite real number {'>= 0' if allow_zero else '> 0'}"
    if (isinstance(value, (bool, np.bool_, str, bytes)) or np.iscomplexobj(value)
            or np.asarray(value).dtype == bool):
        raise ValueError(f"{name}={value!r} is not allowed: {rule}")
    try:
        return check_positive(name, value, allow_zero=allow_zero)
    except OverflowError:
        raise ValueError(f"{name}={value!r} is too large: {rule}") from None


def _check_n(n, name="n"):
    """A device count (or array of them) as floats; ValueError unless whole numbers >= 1."""
    def rule():  # built only when raising: formatting a large array is slow
        return f"{name}={n!r} devices must be a whole number in [1, 2**40]"
    if isinstance(n, (str, bytes)) or np.iscomplexobj(n):
        raise ValueError(rule())
    try:
        arr = np.asarray(n)
        as_float = np.asarray(arr, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(rule()) from None
    if (arr.dtype == bool or arr.dtype == object or not np.all(np.isfinite(as_float))
            or np.any(as_float < 1) or np.any(as_float % 1 != 0)
            or np.any(as_float > _MAX_DEVICES)):
        raise ValueError(rule())
    return as_float


def _as_cluster(cluster):
    """A Cluster from a Cluster or a preset name; ValueError naming the valid names otherwise."""
    return hardware.get_cluster(cluster)


def _axes(n, topology, shape, wraparound):
    """Axis sizes and wraparound flags of a torus (the shape's product must equal n)."""
    ndim = 2 if topology == "torus_2d" else 3
    if shape is None:
        if np.ndim(n) != 0:
            raise ValueError(f"topology={topology!r} with an array of n needs an explicit shape=")
        shape = hardware.torus_shape(int(n), ndim)
    rule = f"shape={shape!r} must have {ndim} axes, whole numbers >= 1, for topology={topology!r}"
    try:
        shape = tuple(shape)
    except TypeError:
        raise ValueError(rule) from None
    if len(shape) != ndim or any(np.ndim(k) != 0 for k in shape):
        raise ValueError(rule)
    shape = tuple(int(_check_n(k, "shape")) for k in shape)
    if np.any(np.asarray(n) != math.prod(shape)):
        raise ValueError(f"shape={shape} holds {math.prod(shape)} devices but n={n!r}")
    rule = f"wraparound={wraparound!r}: give one bool or one per axis ({ndim} bools)"
    if isinstance(wraparound, (bool, np.bool_)):
        wrap = (wraparound,) * ndim
    else:
        try:
            wrap = tuple(wraparound)
        except TypeError:
            raise ValueError(rule) from None
    if len(wrap) != ndim or not all(isinstance(w, (bool, np.bool_)) for w in wrap):
        raise ValueError(rule)
    return shape, tuple(bool(w) for w in wrap)
