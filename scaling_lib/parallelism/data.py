"""Data parallelism: dp replicas of the model, each on B/dp of the batch.

Averaging gradients is exact because the gradient is linear in the per-example losses: the
mean over the batch of per-sequence gradients equals the sum over the dp ranks of their
partial sums divided by B. One AllReduce of the gradient (2Ψ bytes in bf16, Ψ parameters per
device) per step, after the last micro-batch; it overlaps with the backward pass when issued
layer by layer (PyTorch DDP's buckets). With ZeRO (zero >= 1) the gradient traffic belongs to
:mod:`~scaling_lib.parallelism.fsdp` instead.

See: the chapter "Data parallelism, ZeRO/FSDP and HSDP".
"""

from __future__ import annotations

from .. import memory as _memory
from ..breakdown import Breakdown
from .comms import Comm, element_bytes, params_per_device
from .plan import ParallelPlan, check_step_args


def comms(cfg, plan: ParallelPlan, B, T, *, dtype="bf16") -> list[Comm]:
    """The gradient AllReduce over the dp ranks: V = a·Ψ bytes, Ψ parameters per device.

    With context parallelism the group is the dp·cp replicas (each cp rank's gradient covers its
    share of the tokens). Expert parameters are reduced over the dp/ep ranks that hold the same
    experts.

    >>> from scaling_lib.models import TransformerConfig
    >>> c = TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64)
    >>> comms(c, ParallelPlan(dp=8), 8, 16, dtype="bf16")  # 2 bytes × 22,688 parameters
    [Comm(kind='all-reduce', axis='dp', group_size=8, nbytes=45376.0, count=1, phase='backward', overlappable=True)]
    """
    check_step_args(plan, B, T)
    replicas = plan.dp * plan.cp  # the cp ranks hold the same weights too
    if plan.zero or replicas == 1:
        return []
    a = element_bytes(dtype)
    emb, rest, experts = params_per_device(cfg, plan)
    out = [Comm("all-reduce", "dp", replicas, a * (emb + rest), 1, "backward", True)]
    g_e = replicas // plan.ep  # ep is carved out of dp·cp: each expert has dp·cp/ep replicas
    if experts and g_e > 1:
        out.append(Comm("all-reduce", "dp", g_e, a * experts, 1, "backward", True))
    return out


def memory(cfg, plan: ParallelPlan, B, T, **options):
    """Model states per device as plain DP keeps them: every replica holds all of them.

    :func:`scaling_lib.memory.training_memory`'s parameters, gradients and optimizer state for
    the plan without ZeRO (16 bytes/param with mixed-precision Adam), whatever dp is.
    """
    check_step_args(plan, B, T, options)
    full = _memory.training_memory(cfg, plan.with_changes(zero=0, shard_group=None), B, T,
                                   **options)
    return Breakdown({k: full[k] for k in ("parameters", "gradients", "optimizer")},
                             unit="bytes")


def constraints(cfg, plan: ParallelPlan, B, T) -> list[str]:
    """The batch must split evenly: B a multiple of dp · micro_batch.

    >>> constraints(None, ParallelPlan(dp=4, micro_batch=2), 8, 16)
    []
    """
    check_step_args(plan, B, T)
    per_step = plan.dp * plan.micro_batch
    if B % per_step:
        return [f"B={B} sequences must be a multiple of dp·micro_batch = {per_step}"]
    return []
