"""Tensor parallelism (Megatron-LM) and sequence parallelism over tp ranks.

Attention is split by heads and the MLP by its hidden units: each block's first matmul is
column-parallel, its second row-parallel, so each block needs one collective pair: without
sequence parallelism an AllReduce of the block output forward (g) and of the block input's
gradient backward (f), V = a·b·T·D bytes each, b sequences per micro-batch. Per micro-batch,
with L layers, the embedding (vocabulary-parallel: one g) and the output layer (one f):

    no SP:  AllReduce a·b·T·D, 2L + 1 times forward and 2L + 1 times backward
    SP:     each AllReduce becomes ReduceScatter + AllGather of the same V (same bytes), and
            the norm weights' gradients (replicated, fed by sequence shards) are summed:
            AllReduce of a·(2L + 1)·D
    loss:   vocabulary-parallel cross-entropy: 3 AllReduces of 4·b·T bytes (fp32: the largest
            logit, the sum of exponentials, the target logit)

These sit on the critical path (not overlappable) unless a collective matmul hides them.

See: the chapter "Tensor and sequence parallelism".
"""

from __future__ import annotations

from .. import memory as _memory
from .. import models
from ..breakdown import Breakdown
from ..transformer import _norm_params
from .comms import Comm, element_bytes
from .plan import ParallelPlan, check_step_args


def comms(cfg, plan: ParallelPlan, B, T, *, dtype="bf16") -> list[Comm]:
    """Tensor (and sequence) parallelism's collectives in one step, per device.

    >>> from scaling_lib.models import TransformerConfig
    >>> c = TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64)
    >>> plan = ParallelPlan(tp=2, micro_batch=8)  # one micro-batch of 8 sequences
    >>> [(x.kind, x.nbytes, x.count, x.phase) for x in comms(c, plan, 8, 16)]  # V = 2·8·16·32
    [('all-reduce', 8192.0, 5, 'forward'), ('all-reduce', 8192.0, 5, 'backward'), ('all-reduce', 512.0, 3, 'forward')]
    """
    check_step_args(plan, B, T)
    if plan.tp == 1:
        return []
    c = models.get(cfg)
    t, a = plan.tp, element_bytes(dtype)
    m = plan.n_microbatches(B)
    b = B // (plan.dp * m)  # sequences per micro-batch
    act = a * b * T / plan.cp * c.D
    n = (2 * c.L + 1) * m
    if plan.sequence_parallel:
        out = [Comm("all-gather", "tp", t, act, n, "forward", False),
               Comm("reduce-scatter", "tp", t, act, n, "forward", False),
               Comm("reduce-scatter", "tp", t, act, n, "backward", False),
               Comm("all-gather", "tp", t, act, n, "backward", False),
               Comm("all-reduce", "tp", t, a * (2 * c.L + 1) * _norm_params(c, c.D), m,
                    "backward", True)]
    else:
        out = [Comm("all-reduce", "tp", t, act, n, "forward", False),
               Comm("all-reduce", "tp", t, act, n, "backward", False)]
    out.append(Comm("all-reduce", "tp", t, 4.0 * b * T / plan.cp, 3 * m, "forward", False))
    return out


def memory(cfg, plan: ParallelPlan, B, T, **options):
    """Activations and logits per device, which tp splits (and SP splits further).

    From :func:`scaling_lib.memory.training_memory` (Korthikanti et al. 2022); the weights' tp
    split is already in every model-state figure (see ``data.memory``, ``fsdp.memory``).
    """
    check_step_args(plan, B, T, options)
    full = _memory.training_memory(cfg, plan, B, T, **options)
    return Breakdown({k: full[k] for k in ("activations", "logits")}, unit="bytes")


def constraints(cfg, plan: ParallelPlan, B, T) -> list[str]:
    """Heads, kv heads, MLP width, vocabulary (and T with SP) must split over tp.

    >>> c = models.TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64)
    >>> plan = ParallelPlan(tp=8, sequence_parallel=True)
    >>> constraints(c, plan, 8, 12)  # doctest: +NORMALIZE_WHITESPACE
    ['tp=8 does not divide N=4 query heads; choose tp in [1, 2, 4]',
     'T=12 tokens must be divisible by tp=8 (sequence parallelism splits the sequence)']
    """
    check_step_args(plan, B, T)
    t = plan.tp
    if t == 1:
        return []
    c = models.get(cfg)
    out = []
    if c.N % t:
        ok = [d for d in range(1, c.N + 1) if c.N % d == 0]
        out.append(f"tp={t} does not divide N={c.N} query heads; choose tp in {ok}")
    elif c.K % t and t % c.K:
        out.append(f"K={c.K} kv heads must divide or be divisible by tp={t} (tp > K "
                   "replicates kv heads)")
    width = c.F_e if c.is_moe else c.F
    if c.F % t or width % t:
        out.append(f"MLP width F={width} is not divisible by tp={t}")
    if c.V % t:
        out.append(f"V={c.V} is not divisible by tp={t} (pad the vocabulary, as Megatron does)")
    if plan.sequence_parallel and (T // plan.cp) % t:
        out.append(f"T={T} tokens must be divisible by tp={t} (sequence parallelism splits "
                   "the sequence)")
    return out
