"""PCIe link bandwidth, the host link that NVLink is compared with.

See: Chapter "Networks and collectives", "NVLink vs PCIe".
"""

from __future__ import annotations

import numpy as np

from ..units import scalar_or_array as _out
from .validation import _positive

# ---- network facts (one-way bytes/s unless said otherwise) -------------------------------------
# PCIe: lanes x transfer rate x 128b/130b encoding / 8 bits (PCI-SIG base specs 3.0-5.0).
_PCIE_GT_PER_S = {3: 8e9, 4: 16e9, 5: 32e9}


def pcie_bytes_per_s(gen=5, lanes=16):
    """One-way bandwidth of a PCIe link: lanes * rate * (128/130) / 8 bytes/s.

    ``gen`` is 3, 4 or 5 (8, 16, 32 GT/s per lane, all with 128b/130b encoding).

    >>> round(pcie_bytes_per_s(4, 16) / 1e9, 1), round(pcie_bytes_per_s(5, 16) / 1e9, 1)
    (31.5, 63.0)

    See: Chapter "Networks and collectives", "NVLink vs PCIe".
    """
    if isinstance(gen, bool) or not isinstance(gen, (int, np.integer)) or gen not in _PCIE_GT_PER_S:
        raise ValueError(f"gen={gen!r} is not a known PCIe generation; valid choices: 3, 4, 5")
    lanes = _positive("lanes", lanes)
    return _out(lanes * _PCIE_GT_PER_S[gen] * (128 / 130) / 8)
