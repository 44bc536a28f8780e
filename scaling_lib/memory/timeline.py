"""Memory of one device at each point of one training step (one micro-batch, no pipeline).

See: Chapter 6, "A memory timeline over one step".
"""

from __future__ import annotations

import numpy as np

from .. import models
from ..breakdown import Breakdown
from ..plan import ParallelPlan
from ..units import check_positive, dtype_bytes
from .activations import _activation_terms, logits_bytes
from .training import training_memory


def memory_timeline(cfg, plan: ParallelPlan | None = None, T=2048, *, recipe: str = "mixed",
                    optimizer: str = "adam", flash_attention: bool = True, dtype="bf16",
                    loss_copies=2, bucket_bytes=25e6, fragmentation=0.0):
    """Memory of one device at each point of one training step (one micro-batch, pp = 1).

    Returns ``(phases, parts)``: labels ("start", "fwd 1".."fwd L", "loss", "bwd L".."bwd 1",
    "optimizer") and a Breakdown of arrays, one value per phase:

    - parameters and optimizer state: the device's shards, there all step (as
      :func:`training_memory`);
    - activations: the forward adds one layer's worth per layer; the backward frees each
      layer's after its gradient is computed (full recomputation stores the layer inputs and
      rebuilds one layer in the backward pass);
    - gradients: built layer by layer in the backward pass (ZeRO ≥ 2 keeps only the shard);
    - gather buffers (ZeRO-3/FSDP): two unsharded 16-bit units (a layer or the embedding), the
      one computing and the one being prefetched (``training_memory``'s gathered parameters);
    - gradient buckets: in the backward pass with dp > 1, ``bucket_bytes`` in flight for an
      all-reduce (PyTorch DDP's default bucket_cap_mb = 25), or with ZeRO ≥ 2 the reduce-scatter
      buffers of ``training_memory`` (two buckets, or two units' unsharded gradients);
    - logits: ``loss_copies`` fp32 copies at the loss (see :func:`logits_bytes`);
    - allocator reserve: ``fragmentation`` times everything allocated, an allowance for the
      caching allocator's unused blocks (an assumption to choose, not a measured constant).

    Left out: the optimizer step's temporaries, the CUDA context and NCCL's buffers
    (``training_memory``'s runtime reserve), gradient accumulation over several micro-batches
    (the gradients then persist through the later forwards).

    >>> phases, m = memory_timeline("llama3-8b", ParallelPlan(dp=8, zero=3), 4096)
    >>> phases[int(np.argmax(m.total))]   # the peak: the loss, with every activation stored
    'loss'

    See: Chapter 6, "A memory timeline over one step".
    """
    c = models.get(cfg)
    plan = ParallelPlan() if plan is None else plan
    if not isinstance(plan, ParallelPlan):
        raise ValueError(f"plan must be a ParallelPlan, got {plan!r}")
    if plan.pp != 1:
        raise ValueError(f"pp={plan.pp}: the timeline models one stage holding every layer; "
                         "use pp=1 (training_memory covers pipeline schedules)")
    T = float(check_positive("T", T))
    frag = check_positive("fragmentation", fragmentation, allow_zero=True)
    if frag > 1:
        raise ValueError(f"fragmentation={fragmentation!r} is a fraction of the allocated bytes; "
                         "choose a value in [0, 1]")
    bucket = check_positive("bucket_bytes", bucket_bytes, allow_zero=True)
    m = training_memory(c, plan, plan.dp * plan.micro_batch, T, recipe=recipe, optimizer=optimizer,
                        flash_attention=flash_attention, dtype=dtype, reserve=False,
                        fragmentation=0.0)
    L = c.L
    tokens = plan.micro_batch * T / plan.cp
    a = dtype_bytes(dtype)
    sp = plan.sequence_parallel
    if plan.recompute == "full":
        stored = sum(_activation_terms(c, False, T, float(plan.tp), sp, "full", flash_attention,
                                       a).values()) * tokens
        working = float(m["activations"]) - L * stored
    else:
        stored, working = float(m["activations"]) / L, 0.0
    gather = float(m["gathered parameters"]) if "gathered parameters" in m else 0.0
    zero_buffers = float(m["communication buffers"]) if "communication buffers" in m else 0.0
    grad_bucket = (zero_buffers if plan.zero >= 2 else bucket) if plan.dp > 1 else 0.0
    logits = float(logits_bytes(c, plan.micro_batch, T / plan.cp, plan.tp, copies=loss_copies))
    phases = ["start", *[f"fwd {i}" for i in range(1, L + 1)], "loss",
              *[f"bwd {i}" for i in range(L, 0, -1)], "optimizer"]
    n = len(phases)
    acts, grads, gath, buck, logit = (np.zeros(n) for _ in range(5))
    fwd = np.arange(1, L + 1)
    acts[1:L + 1] = fwd * stored
    gath[1:L + 1] = gather
    acts[L + 1] = L * stored
    gath[L + 1] = gather
    logit[L + 1] = logits
    bwd = np.arange(L, 0, -1)  # layer being back-propagated; its activations are still there
    acts[L + 2:2 * L + 2] = bwd * stored + working
    grads[L + 2:2 * L + 2] = (L - bwd + 1) / L * float(m["gradients"])
    gath[L + 2:2 * L + 2] = gather
    buck[L + 2:2 * L + 2] = grad_bucket
    grads[-1] = float(m["gradients"])
    fixed = np.ones(n)
    parts = {"parameters": float(m["parameters"]) * fixed,
             "optimizer": float(m["optimizer"]) * fixed,
             "gradients": grads, "activations": acts, "gather buffers": gath,
             "gradient buckets": buck, "logits": logit}
    allocated = sum(parts.values())
    parts["allocator reserve"] = frag * allocated
    return phases, Breakdown(parts, unit="bytes")
