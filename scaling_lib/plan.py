"""``ParallelPlan``: how a model is split over devices, and the pipeline bubble.

Degrees: dp (data), tp (tensor), pp (pipeline stages), cp (context), ep (expert). Expert
parallelism is carved out of the data-parallel ranks (the Megatron-Core and DeepSpeed-MoE
convention), so the world size is dp · tp · pp · cp and ep must divide dp · cp.
``zero`` is the ZeRO stage over the data-parallel ranks (3 = FSDP); ``shard_group`` shards over
a smaller group than dp · cp and replicates across groups (HSDP when ``zero=3``).

See: Chapter 6, "Memory for training", and the parallelism chapters.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

import numpy as np

from .units import (MAX_DEVICES, _brief, check_choice, check_count, divisors as _divisors,
                     scalar_or_array as _out)

SCHEDULES = ("1f1b", "gpipe", "interleaved")
CP_VARIANTS = ("allgather", "ring", "ulysses")  # see parallelism.context
RECOMPUTE = ("none", "selective", "full")
ZERO_STAGES = (0, 1, 2, 3)
# How layers are split over pipeline stages: "even" (Megatron-LM's default: L/pp per stage) or
# "light_ends" (the embedding and the loss each counted as a layer, so the first and the last
# chunk hold one layer fewer: Megatron-Core's --account-for-embedding-in-pipeline-split and
# --account-for-loss-in-pipeline-split; Llama 3 405B's 7 + 14 x 8 + 7 layers on 16 stages,
# Dubey et al. 2024, section 3.3.2).
PP_LAYOUTS = ("even", "light_ends")


@dataclass(frozen=True)
class ParallelPlan:
    """Degrees of parallelism and the per-device training options. Frozen and validated.

    ``micro_batch`` is sequences per micro-batch on each data-parallel rank;
    ``virtual_stages`` is the number of model chunks per pipeline device (interleaved 1F1B);
    ``recompute`` is "none", "selective" or "full"; ``sequence_parallel`` shards the
    layer-norm and dropout activations over the tp group; ``cp_variant`` is how the cp ranks
    share keys and values: "allgather", "ring" or "ulysses" (see ``parallelism.context``).
    ``pp_layout`` is how layers split over the stages (:data:`PP_LAYOUTS`; the split itself is
    :func:`scaling_lib.parallelism.rules.stage_layers`). ``reshard_after_forward`` (ZeRO-3,
    PyTorch FSDP's option of that name): True frees each gathered layer after its forward and
    gathers it again for the backward, every micro-batch; False keeps the stage's gathered
    weights for the whole step (one gather per step: what torchtitan does with pipeline stages).

    >>> p = ParallelPlan(dp=64, tp=8, pp=16)
    >>> p.world_size
    8192
    >>> ParallelPlan(zero=4)
    Traceback (most recent call last):
    ...
    ValueError: zero=4 is not a ZeRO stage; valid choices: 0, 1, 2, 3 (3 = FSDP)
    """

    dp: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1
    zero: int = 0
    micro_batch: int = 1
    virtual_stages: int = 1
    schedule: str = "1f1b"
    recompute: str = "none"
    sequence_parallel: bool = False
    shard_group: int | None = None
    cp_variant: str = "allgather"
    pp_layout: str = "even"
    reshard_after_forward: bool = True

    def __post_init__(self):
        for name in ("dp", "tp", "pp", "cp", "ep", "micro_batch", "virtual_stages"):
            v = getattr(self, name)
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) \
                    or not 1 <= v <= MAX_DEVICES:
                raise ValueError(f"{name}={_brief(v)} must be a positive integer "
                                 f"(at most {MAX_DEVICES:,})")
            object.__setattr__(self, name, int(v))
        z = self.zero
        if isinstance(z, (bool, np.bool_)) or not isinstance(z, (int, np.integer)) \
                or z not in ZERO_STAGES:
            raise ValueError(f"zero={_brief(z)} is not a ZeRO stage; valid choices: 0, 1, 2, 3 "
                             "(3 = FSDP)")
        object.__setattr__(self, "zero", int(z))
        if self.world_size > MAX_DEVICES:
            raise ValueError(f"world_size = dp·tp·pp·cp = {self.world_size:,} exceeds "
                             f"{MAX_DEVICES:,} devices")
        check_choice("schedule", self.schedule, SCHEDULES)
        if not isinstance(self.sequence_parallel, (bool, np.bool_)):
            raise ValueError(f"sequence_parallel={_brief(self.sequence_parallel)} must be True "
                             "or False")
        if self.schedule == "gpipe" and self.virtual_stages != 1:
            raise ValueError(f"virtual_stages={self.virtual_stages} needs an interleaved "
                             "schedule; use schedule='interleaved' or virtual_stages=1")
        check_choice("recompute", self.recompute, RECOMPUTE)
        check_choice("cp_variant", self.cp_variant, CP_VARIANTS)
        check_choice("pp_layout", self.pp_layout, PP_LAYOUTS)
        if not isinstance(self.reshard_after_forward, (bool, np.bool_)):
            raise ValueError(f"reshard_after_forward={_brief(self.reshard_after_forward)} must "
                             "be True or False")
        object.__setattr__(self, "reshard_after_forward", bool(self.reshard_after_forward))
        object.__setattr__(self, "sequence_parallel", bool(self.sequence_parallel))
        replicas = self.dp * self.cp
        if replicas % self.ep:
            raise ValueError(f"ep={self.ep} must divide dp * cp = {replicas} (experts are "
                             f"spread over the data-parallel ranks); choose ep in "
                             f"{_divisors(replicas)}")
        if self.shard_group is not None:
            g = self.shard_group
            if isinstance(g, (bool, np.bool_)) or not isinstance(g, (int, np.integer)) \
                    or g < 1 or replicas % g:
                raise ValueError(f"shard_group={_brief(g)} must divide dp * cp = {replicas}; "
                                 f"choose one of {_divisors(replicas)} (or None for all)")
            object.__setattr__(self, "shard_group", int(g))

    @property
    def world_size(self) -> int:
        """Devices the plan uses: dp · tp · pp · cp (ep lives inside dp · cp)."""
        return self.dp * self.tp * self.pp * self.cp

    @property
    def zero_group(self) -> int:
        """Ranks that ZeRO shards states over: ``shard_group``, or every replica (dp · cp)."""
        return self.shard_group if self.shard_group is not None else self.dp * self.cp

    def n_microbatches(self, global_batch: int) -> int:
        """Micro-batches per step on each pipeline: global_batch / (dp · micro_batch).

        >>> ParallelPlan(dp=8, micro_batch=2).n_microbatches(64)
        4
        """
        per_step = self.dp * self.micro_batch
        try:
            b = check_count("global_batch", global_batch)
        except ValueError as e:
            raise ValueError(f"{e}; it must be a positive multiple of dp * micro_batch = "
                             f"{per_step}") from None
        if np.ndim(b) or b < per_step or b % per_step:
            raise ValueError(f"global_batch={_brief(global_batch)} sequences must be a positive "
                             f"multiple of dp * micro_batch = {per_step}")
        return int(b) // per_step

    def with_changes(self, **changes) -> ParallelPlan:
        """A copy with some fields changed (validated again)."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        unknown = sorted(set(changes) - set(values))
        if unknown:
            raise ValueError(f"unknown field(s) {unknown}; valid: {', '.join(values)}")
        values.update(changes)
        return ParallelPlan(**values)


def pipeline_bubble_fraction(pp, n_microbatches, virtual_stages=1, schedule="1f1b", *,
                             relative_to="step"):
    """Idle share of a pipelined step: (p - 1) / (v·m + p - 1).

    For GPipe and 1F1B (v = 1) and interleaved 1F1B with v model chunks per device, the step
    takes v·m + p - 1 chunk-times of which p - 1 are ramp-up and drain; 1 minus this is the
    utilisation ceiling. ``relative_to="compute"`` gives Megatron-LM's form (p - 1)/(v·m), the
    same idle time measured against the ideal compute time (Narayanan et al. 2021, section 2.2).
    Broadcasts over numpy arrays.

    >>> pipeline_bubble_fraction(4, 4)  # 3/7 idle: a 57% ceiling
    0.42857142857142855
    >>> pipeline_bubble_fraction(4, 4, relative_to="compute")
    0.75
    """
    check_choice("schedule", schedule, SCHEDULES)
    check_choice("relative_to", relative_to, ("step", "compute"))
    p = np.asarray(check_count("pp", pp))
    m = np.asarray(check_count("n_microbatches", n_microbatches))
    v = np.asarray(check_count("virtual_stages", virtual_stages))
    if schedule == "gpipe" and np.any(v != 1):
        raise ValueError("GPipe has no virtual stages; use schedule='interleaved'")
    if relative_to == "compute":
        return _out((p - 1) / (v * m))
    return _out((p - 1) / (v * m + p - 1))


def check_plan(plan) -> ParallelPlan:
    """``plan`` unchanged if it is a ParallelPlan, else a ValueError saying so.

    >>> check_plan(ParallelPlan(dp=8)).dp
    8
    """
    if not isinstance(plan, ParallelPlan):
        raise ValueError(f"plan={_brief(plan)} must be a ParallelPlan")
    return plan


def check_step_args(plan, B, T, options=None) -> None:
    """Raise ValueError unless ``plan`` is a ParallelPlan and B (sequences) and T (tokens per
    sequence) are whole numbers >= 1: the arguments every strategy module's functions share.
    ``options`` (a strategy's ``memory(**options)``) must be keywords of
    :func:`scaling_lib.memory.training_memory`.

    >>> check_step_args(ParallelPlan(), 8, 2048)
    >>> check_step_args("dp=8", 8, 2048)
    Traceback (most recent call last):
    ...
    ValueError: plan='dp=8' must be a ParallelPlan
    """
    check_plan(plan)
    check_count("B", B)
    check_count("T", T)
    if options is not None and not isinstance(options, Mapping):
        raise ValueError(f"options={_brief(options)} must be a mapping of keyword arguments")
    if options:
        import inspect

        from .memory import training_memory  # memory imports this module: import lazily

        valid = [p.name for p in inspect.signature(training_memory).parameters.values()
                 if p.kind is p.KEYWORD_ONLY]
        unknown = sorted(set(options) - set(valid))
        if unknown:
            raise ValueError(f"unknown option(s) {unknown}; valid: {', '.join(valid)}")
