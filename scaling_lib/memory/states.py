"""Model states: bytes per parameter by recipe, ZeRO sharding, offloading.

Model states follow the ZeRO paper's accounting (Rajbhandari et al. 2020, section 3.1): mixed
precision with Adam keeps bf16/fp16 parameters (2 bytes) and gradients (2 bytes) and an fp32
master copy, momentum and variance (K = 12 bytes), 16 bytes per parameter. ZeRO stages 1, 2, 3
shard the optimizer state, then the gradients, then the parameters over the N_d data-parallel
ranks.

See: Chapter 6, "Memory for training".
"""

from __future__ import annotations

import numpy as np

from .. import hardware
from ..breakdown import Breakdown
from ..units import check_choice, check_count, check_positive, scalar_or_array as _out

# Bytes per parameter: (weights, gradients, fp32 master copy, each optimizer state).
RECIPES: dict[str, tuple[float, float, float, float]] = {
    # ZeRO's mixed precision (Rajbhandari et al. 2020, section 3.1): 2 + 2 + (4 + 4 + 4) = 16.
    "mixed": (2, 2, 4, 4),
    # Megatron-LM accumulates gradients in an fp32 "main_grad" buffer: 2 + 4 + 12 = 18.
    "mixed_fp32_grads": (2, 4, 4, 4),
    # Everything in fp32; the weights are their own master copy: 4 + 4 + 8 = 16.
    "fp32": (4, 4, 0, 4),
    # Pure bf16, no master copy, bf16 moments: 2 + 2 + 4 = 8 (the "8 bytes/param" shortcut).
    "bf16": (2, 2, 0, 2),
    # 8-bit Adam (Dettmers et al. 2022, block-wise quantised states; one fp32 scale per block of
    # 2048 values, 0.002 bytes, left out): mixed precision with 1-byte moments, 2 + 2 + 4 + 2 = 10.
    "mixed_8bit_adam": (2, 2, 4, 1),
    # PyTorch FSDP mixed precision (MixedPrecision / MixedPrecisionPolicy): the sharded fp32
    # parameters are the master copy (cast to the compute dtype when gathered, a transient the
    # memory model counts apart), fp32 gradient shards, fp32 Adam: 4 + 4 + 8 = 16 per parameter,
    # all of it sharded under ZeRO-3 (torch.distributed.fsdp docs; torchtitan, Composer).
    "fsdp": (4, 4, 0, 4),
    # fp8 training as in DeepSeek-V3 (section 3.3): matmuls read 1-byte fp8 copies of the weights;
    # fp32 master weights and fp32 gradients (for accumulation) stay, and Adam's moments are
    # kept in bf16: 1 + 4 + 4 + 2·2 = 13. fp8 shrinks the weights the matmuls read and the
    # activations they store, not the optimizer.
    "fp8": (1, 4, 4, 2),
}
# Optimizer states per parameter (each stored at the recipe's state width).
OPTIMIZERS: dict[str, int] = {"adam": 2, "adamw": 2, "lion": 1, "momentum": 1, "sgd": 0}


def _recipe(recipe: str, optimizer: str) -> tuple[float, float, float]:
    check_choice("recipe", recipe, RECIPES)
    check_choice("optimizer", optimizer, OPTIMIZERS)
    p, g, master, state = RECIPES[recipe]
    return p, g, master + OPTIMIZERS[optimizer] * state


def bytes_per_param(recipe: str = "mixed", optimizer: str = "adam") -> Breakdown:
    """Bytes each parameter costs in model states, by part.

    >>> b = bytes_per_param()
    >>> dict(b), b.total
    ({'parameters': 2, 'gradients': 2, 'optimizer': 12}, 16)
    >>> bytes_per_param("bf16").total
    8
    """
    p, g, o = _recipe(recipe, optimizer)
    return Breakdown(parameters=p, gradients=g, optimizer=o, unit="bytes/param")


def _check_zero(zero):
    check_choice("zero", zero, (0, 1, 2, 3))


def model_state_bytes(n_params, dp=1, zero: int = 0, *, recipe: str = "mixed",
                      optimizer: str = "adam") -> Breakdown:
    """Per-device bytes of parameters, gradients and optimizer state under ZeRO.

    With Ψ parameters, N_d data-parallel ranks and (2, 2, K) bytes per parameter:
    stage 0: (2 + 2 + K)Ψ;  1: (2 + 2)Ψ + KΨ/N_d;  2: 2Ψ + (2 + K)Ψ/N_d;  3: (2 + 2 + K)Ψ/N_d.
    Broadcasts over ``n_params`` and ``dp``.

    >>> [round(model_state_bytes(7.5e9, 64, z).total / 1e9, 1) for z in range(4)]
    [120.0, 31.4, 16.6, 1.9]
    """
    _check_zero(zero)
    n = check_positive("n_params", n_params)
    nd = check_count("dp", dp)
    p, g, o = _recipe(recipe, optimizer)
    n = n * np.ones(np.broadcast(n, nd).shape)  # every part has the broadcast shape
    return Breakdown(parameters=_out(p * n / (nd if zero >= 3 else 1)),
                     gradients=_out(g * n / (nd if zero >= 2 else 1)),
                     optimizer=_out(o * n / (nd if zero >= 1 else 1)), unit="bytes")


def max_trainable_params(accelerator, dp=1, zero: int = 0, *, recipe: str = "mixed",
                         optimizer: str = "adam", reserve_bytes=0.0):
    """Largest Ψ whose model states fit in one device's HBM (activations not counted).

    Ψ_max = (HBM - reserve) / bytes per parameter after ZeRO sharding. Plain data parallelism
    with 16 bytes/param on an 80 GB GPU: 5e9 parameters, before a single activation is stored.
    ``accelerator`` is a name, an Accelerator or a number of bytes.

    >>> max_trainable_params("h100")
    5000000000.0
    """
    hbm = accelerator if isinstance(accelerator, (int, float, np.integer, np.floating,
                                                  np.ndarray)) \
        and not isinstance(accelerator, (bool, np.bool_)) else hardware.get(accelerator).hbm_bytes
    hbm = check_positive("hbm_bytes", hbm)
    reserve = check_positive("reserve_bytes", reserve_bytes, allow_zero=True)
    per_param = model_state_bytes(1.0, dp, zero, recipe=recipe, optimizer=optimizer).total
    return _out(np.maximum(hbm - reserve, 0.0) / per_param)


def offloaded_state_bytes(n_params, dp=1, *, recipe: str = "mixed",
                          optimizer: str = "adam") -> Breakdown:
    """Model states per rank with the optimizer offloaded to the CPU (ZeRO-Offload), by place.

    ZeRO-Offload (Ren et al. 2021, section 4) keeps only the 16-bit parameters on the device
    (p·Ψ bytes); the gradients (g·Ψ) and the fp32 master copy and optimizer states (o·Ψ) live
    in host memory, partitioned over the N_d data-parallel ranks as in ZeRO-2, and the CPU runs
    the optimizer step. Broadcasts over n_params and dp.

    >>> b = offloaded_state_bytes(7.5e9)
    >>> b["device"] / 1e9, b["host"] / 1e9
    (15.0, 105.0)

    See: Chapter 6, "Offloading and 8-bit optimizers".
    """
    n = check_positive("n_params", n_params)
    nd = check_positive("dp", dp)
    p, g, o = _recipe(recipe, optimizer)
    return Breakdown({"device": _out(p * n * np.ones(np.shape(nd))),
                      "host": _out((g + o) * n / nd)}, unit="bytes")


def offload_transfer_time(n_params, dp=1, *, pcie_bytes_per_s=None, recipe: str = "mixed",
                          optimizer: str = "adam"):
    """Seconds per step the offloaded optimizer spends on PCIe: max(g·Ψ, p·Ψ) / (N_d · W).

    Each step sends the rank's gradient shard down to the host (g·Ψ/N_d bytes) and the updated
    16-bit parameters back (p·Ψ/N_d); PCIe is full duplex, so the slower direction sets the
    time. ZeRO-Offload overlaps it with the backward pass. ``pcie_bytes_per_s``: one-way
    bandwidth (default PCIe 5.0 x16, :func:`scaling_lib.collectives.pcie_bytes_per_s`).

    >>> round(float(offload_transfer_time(7.5e9)), 3)  # 15 GB each way at 63 GB/s
    0.238

    See: Chapter 6, "Offloading and 8-bit optimizers".
    """
    from .. import collectives

    n = check_positive("n_params", n_params)
    nd = check_count("dp", dp)  # a degree: whole (dp=1e308 gave inf/inf = NaN)
    w = collectives.pcie_bytes_per_s(5, 16) if pcie_bytes_per_s is None else \
        check_positive("pcie_bytes_per_s", pcie_bytes_per_s)
    p, g, _ = _recipe(recipe, optimizer)
    return _out(max(p, g) * n / (nd * w))
