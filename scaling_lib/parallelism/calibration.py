"""The estimator's calibration: its few fitted constants, each a physical quantity.

Fitted once on measured runs (:mod:`scaling_lib.validation`) and carried unchanged to other
accelerators through their own datasheet peaks and bandwidths; a reader fits them to their own
cluster with the ``calibrate`` command.

See: the chapter "Validating the planner".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from ..units import _brief


@dataclass(frozen=True)
class Calibration:
    """The estimator's few fitted constants, each a physical quantity that transfers.

    ``gemm_efficiency`` η_c: fraction of the dense peak a large matmul reaches (cuBLAS on big
    shapes). ``hbm_efficiency`` η_m: fraction of HBM bandwidth a streaming kernel reaches.
    ``gemm_k_half`` K½: the inner dimension at which a matmul's compute efficiency halves
    (each output tile's fixed prologue and epilogue against its K-loop); 0 turns it off (the
    vTrain fit drove it to 0: its shapes do not show the effect).
    ``kernel_time`` τ (s): host time to dispatch one kernel (PyTorch eager, the framework's
    Python, the launch): a layer takes at least its kernels' count times τ.
    ``nvlink_efficiency`` and ``network_efficiency``: fraction of the one-way line rate NCCL
    reaches on large messages inside and across nodes. ``nvlink_latency`` and
    ``network_latency`` (s): time of one step of a collective's schedule inside a node and
    across nodes (NCCL's protocol, the NIC and switches), replacing the clusters' nominal
    hop latencies.
    ``step_overhead`` (s): per-step host work outside the kernels (data loader, logging,
    the loss scaler's checks).
    """

    # Defaults: fitted by scaling_lib.validation.fit on the even rows of the vTrain A100
    # measurements (Megatron-DeepSpeed, fp16), within physical bounds, rounded; see the chapter
    # "Validating the planner". The NCCL efficiencies sit at the low end of their range (60%).
    # Issue 19 (one model of record) re-set η_c and τ on a grid, chosen by the training
    # rows' MAPE averaged over both files (single 7.97%, multi 7.73%).
    gemm_efficiency: float = 0.83
    gemm_k_half: float = 0.0
    hbm_efficiency: float = 0.670
    kernel_time: float = 47.5e-6
    nvlink_efficiency: float = 0.60
    nvlink_latency: float = 24.7e-6
    network_efficiency: float = 0.60
    network_latency: float = 50e-6
    step_overhead: float = 0.9e-3

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            try:
                finite = isinstance(v, (int, float, np.floating)) and math.isfinite(v)
            except OverflowError:   # an int too large for a float
                finite = False
            if not finite or v < 0:
                raise ValueError(f"{f.name}={_brief(v)} must be a finite number >= 0")
        for name in ("gemm_efficiency", "hbm_efficiency", "nvlink_efficiency",
                     "network_efficiency"):
            if not 0 < getattr(self, name) <= 1:
                raise ValueError(f"{name}={getattr(self, name)!r} is a fraction of a peak; "
                                 "choose a value in (0, 1]")


DEFAULT_CALIBRATION = Calibration()


