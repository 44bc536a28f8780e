"""``Breakdown``: a read-only mapping of named parts with a ``.total``.

Parameter counts, memory per device and step times are all sums of named parts; a Breakdown keeps
the parts so a chapter can show the table and a test can check that the parts add up.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import numpy as np

from .units import _brief, check_real


class Breakdown(Mapping):
    """Named parts (numbers) and their total, read-only.

    >>> b = Breakdown({"weights": 2.0, "grads": 2.0}, unit="bytes")
    >>> b.total, b["weights"], list(b)
    (4.0, 2.0, ['weights', 'grads'])
    """

    __slots__ = ("_parts", "unit")

    def __init__(self, parts: Mapping | None = None, *, unit: str = "", **kw):
        if parts is not None and not isinstance(parts, Mapping):
            raise ValueError(f"parts={_brief(parts)} must be a mapping of names to numbers")
        if not isinstance(unit, str):
            raise ValueError(f"unit={_brief(unit)} must be a string")
        merged = dict(parts or {})
        merged.update(kw)
        for key, value in merged.items():
            if not isinstance(key, str):
                raise ValueError(f"part name {_brief(key)} must be a string")
            if isinstance(value, (bool, np.bool_)) or not isinstance(
                    value, (int, float, np.integer, np.floating, np.ndarray)):
                raise ValueError(f"part {key!r}={_brief(value)} must be a number or an array "
                                 "of numbers")
            if isinstance(value, np.ndarray) and value.dtype.kind not in "iuf":
                raise ValueError(f"part {key!r} must hold real numbers, not {value.dtype}")
            if isinstance(value, (float, np.floating, np.ndarray)) and np.any(np.isnan(value)):
                raise ValueError(f"part {key!r}={_brief(value)} is not a number (NaN)")
        object.__setattr__(self, "_parts", MappingProxyType(merged))
        object.__setattr__(self, "unit", unit)

    def __setattr__(self, name, value):
        raise AttributeError("Breakdown is read-only")

    def __getitem__(self, key):
        return self._parts[key]

    def __iter__(self):
        return iter(self._parts)

    def __len__(self):
        return len(self._parts)

    @property
    def total(self):
        """Sum of the parts (an exact integer when every part is an int)."""
        return sum(self._parts.values())

    def fractions(self) -> dict:
        """Each part's share of the total."""
        total = self.total
        return {k: (v / total if total else 0.0) for k, v in self._parts.items()}

    def scaled(self, factor: float) -> Breakdown:
        """Every part multiplied by ``factor`` (e.g. bytes -> GB)."""
        factor = check_real("factor", factor)
        return Breakdown({k: v * factor for k, v in self._parts.items()}, unit=self.unit)

    def __repr__(self):
        inner = ", ".join(f"{k}={v!r}" for k, v in self._parts.items())
        unit = f", unit={self.unit!r}" if self.unit else ""
        return f"Breakdown({inner}{unit}; total={self.total!r})"

    def _repr_html_(self):
        rows = "".join(
            f"<tr><td>{k}</td><td style='text-align:right'>{v:,.6g}</td>"
            f"<td style='text-align:right'>{f:.1%}</td></tr>"
            for (k, v), f in zip(self._parts.items(), self.fractions().values())
        )
        unit = f" ({self.unit})" if self.unit else ""
        return (
            f"<table><tr><th>part</th><th>value{unit}</th><th>share</th></tr>{rows}"
            f"<tr><td><b>total</b></td><td style='text-align:right'><b>{self.total:,.6g}</b>"
            "</td><td></td></tr></table>"
        )
