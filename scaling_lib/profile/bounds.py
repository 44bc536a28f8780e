"""Measured times against the roofline: max(F / C, N / W_hbm) on one chip.

:func:`roofline_time` and :func:`bound` for a piece of work, :func:`op_roofline` for each row of
an op table (efficiency = roofline / measured). ``accelerator`` is a preset name or one measured
with ``scaling_lib.measure``.

See: Chapter "Profiling JAX programs".
"""

from __future__ import annotations

from .. import hardware
from ..roofline import t_comms, t_math

def roofline_time(flops, nbytes, accelerator, dtype="bf16"):
    """Roofline lower bound on the time of work of ``flops`` moving ``nbytes`` on one chip:
    max(F / C, N / W_hbm) in seconds.

    >>> roofline_time(989.4e12, 1.0, "h100")
    1.0
    """
    acc = hardware.get(accelerator)
    return max(t_math(flops, acc.peak_flops_per_s(dtype)), t_comms(nbytes, acc.hbm_bytes_per_s))


def bound(flops, nbytes, accelerator, dtype="bf16") -> str:
    """"compute" when F / C >= N / W on ``accelerator``, else "memory".

    >>> bound(2 * 4096**3, 3 * 2 * 4096**2, "h100"), bound(1e6, 4e6, "h100")
    ('compute', 'memory')
    """
    acc = hardware.get(accelerator)
    tm = t_math(flops, acc.peak_flops_per_s(dtype))
    return "compute" if tm >= t_comms(nbytes, acc.hbm_bytes_per_s) else "memory"


def op_roofline(rows, ops: dict, accelerator, dtype="bf16") -> list[dict]:
    """Each measured op of :func:`op_table` beside its roofline time on ``accelerator``.

    Adds ``flops``, ``bytes``, ``roofline`` (seconds, :func:`roofline_time`), ``bound`` and
    ``efficiency`` = roofline / measured (1 = at the roofline; the rest is overhead or a slower
    path than the roofline assumes). The measured time is the row's ``time`` (per call, one
    device): a top-level op runs once per call, though a GPU may split it into several kernels
    (several events). Ops unknown to ``ops`` or with no work are skipped.
    """
    out = []
    for r in rows:
        info = ops.get(r["op"])
        if info is None or (info.flops == 0 and info.nbytes == 0):
            continue
        t_roof = roofline_time(info.flops, info.nbytes, accelerator, dtype)
        out.append({**r, "flops": info.flops, "bytes": info.nbytes, "roofline": t_roof,
                    "bound": bound(info.flops, info.nbytes, accelerator, dtype),
                    "efficiency": t_roof / r["time"] if r["time"] > 0 else float("nan")})
    return out
