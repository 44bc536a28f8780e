"""Parametric exercises: the numbers of a question drawn from a seed.

:func:`draw` gives the same numbers for the same seed and exercise, so a question changes when
the seed does and its expected answer (computed by ``scaling_lib``) follows; :class:`Params`
holds them.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from types import MappingProxyType

import numpy as np

from .feedback import _fmt


class Params(Mapping):
    """The numbers drawn for one parametric exercise: a read-only mapping with attribute access.

    >>> p = draw(0, "1.3", B=[128, 256])
    >>> p.B in (128, 256)
    True
    """

    def __init__(self, values: dict):
        object.__setattr__(self, "_values", MappingProxyType(values))

    def __getattr__(self, key):
        try:
            return self._values[key]
        except KeyError:
            raise AttributeError(key) from None

    def __setattr__(self, key, value):
        raise AttributeError("Params are read-only")

    def __getitem__(self, key):
        return self._values[key]

    def __iter__(self):
        return iter(self._values)

    def __len__(self):
        return len(self._values)

    def __repr__(self):
        return ", ".join(f"{k} = {_fmt(v) if not isinstance(v, str) else v}"
                         for k, v in self._values.items())


def draw(seed: int, exercise: str, **spec) -> Params:
    """Draw the numbers of a parametric exercise from ``seed`` (same seed, same numbers).

    Each keyword names a parameter: a list or tuple of choices picks one of them; a pair
    ``(low, high)`` of ints draws a power of two in [low, high]; a ``range`` draws from it;
    a pair of floats draws uniformly and rounds to 3 significant digits. ``exercise`` is mixed
    into the seed so different exercises get different numbers from one notebook seed.

    >>> draw(1, "x", D=(1024, 8192)) == draw(1, "x", D=(1024, 8192))
    True
    """
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise ValueError(f"seed={seed!r} must be an integer")
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, zlib.crc32(exercise.encode())])
    out = {}
    for key, rule in spec.items():
        if isinstance(rule, range):
            out[key] = int(rng.choice(rule))
        elif (isinstance(rule, tuple) and len(rule) == 2 and
              all(isinstance(v, (int, np.integer)) for v in rule)):
            lo, hi = int(rule[0]), int(rule[1])
            if lo < 1 or hi < lo:
                raise ValueError(f"{key}={rule}: need 1 <= low <= high for a power-of-two draw")
            exps = np.arange(math.ceil(math.log2(lo)), math.floor(math.log2(hi)) + 1)
            out[key] = int(2 ** rng.choice(exps))
        elif (isinstance(rule, tuple) and len(rule) == 2 and
              all(isinstance(v, (float, int)) for v in rule)):
            x = rng.uniform(float(rule[0]), float(rule[1]))
            out[key] = float(f"{x:.3g}")
        elif isinstance(rule, (list, tuple)) and rule:
            choice = rule[int(rng.integers(len(rule)))]
            out[key] = choice.item() if isinstance(choice, np.generic) else choice
        else:
            raise ValueError(f"{key}={rule!r}: give a list of choices, a (low, high) pair "
                             "or a range")
    params = Params(out)
    from . import session

    session.record_draw(exercise, params)  # so a FAIL can compute the listed mistakes' answers
    return params
