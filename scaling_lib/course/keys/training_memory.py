"""Answer key for Chapter 6 (Memory for training) exercises."""

from __future__ import annotations

from ... import hardware, memory, models, transformer
from ...parallelism import ParallelPlan
from ..grading.tables import with_messages

# Megatron-LM (Narayanan et al. 2021, Table 1) shapes: layers, hidden, heads.
GPT_SHAPES = {"1.7B": (24, 2304, 24), "7.5B": (36, 4096, 32), "39.1B": (48, 8192, 64),
              "145.6B": (80, 12288, 96), "1T": (128, 25600, 160)}


def gpt_shape(p) -> models.TransformerConfig:
    """The GPT-style model named p.model in GPT_SHAPES."""
    return models.gpt(*GPT_SHAPES[p.model])


def bytes_per_param(p):
    """Ex 6.1: model-state bytes per parameter for p.recipe and p.optimizer."""
    return memory.bytes_per_param(p.recipe, p.optimizer).total


def zero_state_bytes(p):
    """Ex 6.2: per-device model-state bytes for p.n_params under ZeRO stage p.zero on p.dp ranks."""
    return memory.model_state_bytes(p.n_params, p.dp, p.zero).total


def largest_dp_model(p):
    """Ex 6.3: largest model plain data parallelism can hold on p.accelerator with p.recipe."""
    return memory.max_trainable_params(p.accelerator, recipe=p.recipe)


def fewest_gpus_zero3(p):
    """Ex 6.4: smallest power-of-two dp with ZeRO-3 model states <= half of HBM."""
    n = transformer.n_params(p.model)
    limit = hardware.get(p.accelerator).hbm_bytes / 2
    dp = 1
    while memory.model_state_bytes(n, dp, 3).total > limit:
        dp *= 2
    return dp


def layer_activations(p):
    """Ex 6.5: activation bytes of one layer, no parallelism, no recomputation (scores stored)."""
    return memory.activation_bytes(gpt_shape(p), p.b, p.s, flash_attention=False)


def layer_activations_tp_sp_selective(p):
    """Ex 6.6: the same with tensor parallelism p.t, sequence parallelism, selective recompute."""
    return memory.activation_bytes(gpt_shape(p), p.b, p.s, "selective", p.t, True,
                                   flash_attention=False)


def full_recompute_activations(p):
    """Ex 6.7: checkpoints of all L layers with full recomputation (no sequence parallelism)."""
    cfg = gpt_shape(p)
    return cfg.L * memory.activation_bytes(cfg, p.b, p.s, "full")


def selective_saving(p):
    """Ex 6.8: fraction of a layer's activations that selective recomputation removes."""
    cfg = gpt_shape(p)
    kept = memory.activation_bytes(cfg, 1, p.s, "selective", flash_attention=False)
    return 1 - kept / memory.activation_bytes(cfg, 1, p.s, flash_attention=False)


def full_recompute_overhead(p):
    """Ex 6.9: extra FLOPs of full recomputation as a fraction of the model FLOPs."""
    return transformer.train_flops(p.model, 1, p.T, recompute="full") / \
        transformer.train_flops(p.model, 1, p.T) - 1


def plan_of(p) -> ParallelPlan:
    """Ex 6.10: the plan of the exercise."""
    return ParallelPlan(dp=p.dp, tp=p.tp, zero=p.zero, recompute=p.recompute,
                        sequence_parallel=p.tp > 1)


def device_memory(p):
    """Ex 6.10: total bytes on one device for p.model under the plan, micro-batch 1, T = p.T."""
    return memory.training_memory(p.model, plan_of(p), p.dp, p.T, flash_attention=True).total


def zero_bytes_per_device(n_params, dp, stage):
    """Ex 6.11 reference: mixed-precision Adam (2 + 2 + 12 bytes) under ZeRO ``stage``."""
    return memory.model_state_bytes(n_params, dp, stage).total


def gpt_layer_activation_bytes(s, b, h, a, t=1, sp=False):
    """Ex 6.12 reference: Korthikanti's per-layer activation bytes (no recomputation)."""
    return memory.activation_bytes(models.gpt(1, h, a), b, s, "none", t, sp,
                                   flash_attention=False)


# ---- common wrong methods (tests/test_wrong_methods.py checks that each one FAILs) -------------
def _no_master_copy(p):
    w, g, _, state = memory.RECIPES[p.recipe]
    return w + g + memory.OPTIMIZERS[p.optimizer] * state


def _zero_8_bytes(p):
    """ZeRO with the '8 bytes/param' shortcut (no fp32 master copy): 2 + 2 + 4."""
    return memory.model_state_bytes(p.n_params, p.dp, p.zero, recipe="bf16").total


def _zero_one_kind_per_stage(p):
    """Stage k shards only its own kind of state (not the earlier stages' too)."""
    n, d = p.n_params, p.dp
    return {0: 16 * n, 1: 4 * n + 12 * n / d, 2: 14 * n + 2 * n / d, 3: 14 * n + 2 * n / d}[p.zero]


def _hbm_in_gib(p):
    """HBM read as GiB (2^30 bytes) while the datasheet's GB are 10^9 bytes."""
    return largest_dp_model(p) * 2**30 / 1e9


def _eight_bytes_per_param(p):
    return hardware.get(p.accelerator).hbm_bytes / 8


def _zero3_fill_all_hbm(p):
    """Model states up to all of HBM, not half."""
    n = transformer.n_params(p.model)
    limit = hardware.get(p.accelerator).hbm_bytes
    dp = 1
    while memory.model_state_bytes(n, dp, 3).total > limit:
        dp *= 2
    return dp


def _no_scores(p):
    L, h, a = GPT_SHAPES[p.model]
    return p.s * p.b * h * 34


def _sp_not_applied(p):
    L, h, a = GPT_SHAPES[p.model]
    return p.s * p.b * h * (10 + 24 / p.t)


def _scores_kept(p):
    L, h, a = GPT_SHAPES[p.model]
    return p.s * p.b * h * (34 + 5 * a * p.s / h) / p.t


def _fp32_checkpoints(p):
    return 2 * full_recompute_activations(p)


def _one_layer_only(p):
    return full_recompute_activations(p) / GPT_SHAPES[p.model][0]


def _ratio_not_share(p):
    L, h, a = GPT_SHAPES[p.model]
    return 5 * a * p.s / h / 34


def _kept_share(p):
    return 1 - selective_saving(p)


def _one_third(p):
    return 1 / 3


def _global_batch_activations(p):
    """Activations (and logits) for the whole global batch instead of one micro-batch."""
    m = memory.training_memory(p.model, plan_of(p), p.dp, p.T, flash_attention=True)
    return m.total + (p.dp - 1) * (m["activations"] + m["logits"])


def _no_logits(p):
    m = memory.training_memory(p.model, plan_of(p), p.dp, p.T, flash_attention=True)
    return m.total - m["logits"]


def _zero_shards_only_own_kind(n_params, dp, stage):
    return {0: 16, 1: 4 + 12 / dp, 2: 14 + 2 / dp, 3: 14 + 2 / dp}[stage] * n_params


def _sp_ignored(s, b, h, a, t=1, sp=False):
    return s * b * h * (10 + 24 / t + 5 * a * s / (h * t))


WRONG_METHODS = {
    "6.1": {"no fp32 master copy": _no_master_copy, "16 bytes whatever the recipe": lambda p: 16},
    "6.2": {"8 bytes/param (no master copy)": _zero_8_bytes,
            "stage k shards only its own kind of state": _zero_one_kind_per_stage},
    "6.3": {"HBM in GiB instead of GB": _hbm_in_gib,
            "8 bytes/param whatever the recipe": _eight_bytes_per_param},
    "6.4": {"model states fill all of HBM, not half": _zero3_fill_all_hbm},
    "6.5": {"attention scores forgotten": _no_scores},
    "6.6": {"sequence parallelism not applied to the 10·sbh": _sp_not_applied,
            "scores kept (no selective recomputation)": _scores_kept},
    "6.7": {"checkpoints in fp32 (4 bytes)": _fp32_checkpoints,
            "one layer instead of all L": _one_layer_only},
    "6.8": {"5as/h over 34 (a ratio, not a share)": _ratio_not_share,
            "the share kept instead of removed": _kept_share},
    "6.9": {"exactly one third (output layer recomputed too)": _one_third},
    "6.10": {"activations for the global batch, not the micro-batch": _global_batch_activations,
             "logits forgotten": _no_logits},
    "6.11": {"stage k shards only its own kind of state": _zero_shards_only_own_kind},
    "6.12": {"sequence parallelism ignored": _sp_ignored},
}


def logits_memory(p):
    """Ex 6.13: bytes of the fp32 logits one device keeps (micro-batch p.b, T = p.T, tp = p.tp)."""
    return memory.logits_bytes(p.model, p.b, p.T, p.tp)


WRONG_METHODS["6.13"] = {
    "bf16 logits (2 bytes)": lambda p: logits_memory(p) / 2,
    "vocabulary not split over tp": lambda p: memory.logits_bytes(p.model, p.b, p.T),
    "GiB instead of GB (bytes read as 2^30)": lambda p: logits_memory(p) / 2**30 * 1e9,
}

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '6.1': ('List what training keeps per parameter and the bytes of each.',
            'add the weights, the gradients, a master copy if the recipe keeps one, and each '
            'optimizer state, each at its own precision'),
    '6.2': ('Each ZeRO stage shards one more kind of state over the data-parallel devices.',
            'stage 1 shards the optimizer states, stage 2 also the gradients, stage 3 also the '
            'weights'),
    '6.3': ('Without sharding, every device holds every state of every parameter.',
            "divide the device's HBM by the bytes training keeps per parameter"),
    '6.4': ('ZeRO-3 divides all the states by the device count; how much of HBM may they use?',
            'set the sharded model states equal to the share of HBM the question allows, solve '
            'for the devices and round up to a power of two'),
    '6.5': ('Korthikanti et al. count the activations each layer saves, in bytes.',
            'use their per-layer formula for activations without parallelism or recomputation: '
            "a part linear in s and the attention scores' part"),
    '6.6': ('Which term does selective recomputation remove, and what does sequence parallelism '
            'split?',
            'drop the attention-scores term, then divide what is left by the tensor degree'),
    '6.7': ('With full recomputation, what does each layer still keep?',
            "only the layer's 16-bit input is saved"),
    '6.8': ("What share of a layer's activations is the attention-scores term?",
            "divide the scores' term by the whole per-layer formula"),
    '6.9': ('Recomputation runs part of the work again: compare with the work of a step.',
            'one more forward of the layers, over the forward and backward of the model'),
    '6.10': ('Add the parts one at a time: model states, activations, logits, then buffers.',
             'states sharded as the ZeRO stage says (over dp); one micro-batch of activations per '
             'layer, split over tp by sequence parallelism; two fp32 logit copies over tp; then the '
             'gathered weights, buffers and reserve the question lists'),
    '6.11': ('Each stage shards one more kind of state.',
             'split the bytes into optimizer states, gradients and weights; divide by dp those '
             'the stage shards'),
    '6.12': ('Start from the per-layer formula and ask which parts tensor parallelism divides.',
             'tensor parallelism divides most terms by t; with sequence parallelism the '
             'remaining replicated part is divided too'),
    '6.13': ('How big is the logits tensor, and in which precision?',
             'b·T tokens times V logits each, in fp32, with the vocabulary split over tp'),
}


# ---- More listed mistakes, each with what the student reads (issue 21).

def _zero3_8_bytes(p):
    """ZeRO-3 with 8 bytes per parameter (no fp32 master copy)."""
    n = transformer.n_params(p.model)
    limit = hardware.get(p.accelerator).hbm_bytes / 2
    dp = 1
    while 8 * n / dp > limit:
        dp *= 2
    return dp


WRONG_METHODS["6.4"]["8 bytes per parameter (no master copy)"] = (
    _zero3_8_bytes,
    "mixed-precision Adam keeps 16 bytes per parameter: bf16 weights and gradients, an fp32 "
    "master copy and two fp32 moments")
WRONG_METHODS["6.5"]["fp32 activations (twice the bytes)"] = (
    lambda p: 2 * layer_activations(p),
    "Korthikanti et al.'s formula already counts bytes of 16-bit activations: do not double it")
WRONG_METHODS["6.9"]["a whole extra pass (100%)"] = (
    lambda p: full_recompute_overhead(p) * 3,
    "recomputation runs one more forward of the layers, a third of a training step's work, not a "
    "whole step")
WRONG_METHODS["6.11"]["12 bytes of optimizer state sharded at every stage"] = (
    lambda n_params, dp, stage: 4 * n_params + 12 * n_params / dp,
    "stage 0 shards nothing; each later stage shards one more kind of state: optimizer, then "
    "gradients, then weights")
WRONG_METHODS["6.12"]["the 24 not divided by t"] = (
    lambda s, b, h, a, t=1, sp=False: s * b * h * ((10 / t if sp else 10) + 24
                                                    + 5 * a * s / (h * t)),
    "tensor parallelism splits the attention and MLP activations (the 24·sbh) over t too")

with_messages(WRONG_METHODS, {
    "6.1": {"no fp32 master copy": "mixed precision keeps an fp32 master copy of the weights",
            "16 bytes whatever the recipe": "16 bytes is mixed-precision Adam: this recipe "
            "keeps other states at other precisions"},
    "6.2": {"8 bytes/param (no master copy)":
            "mixed-precision Adam keeps 16 bytes per parameter: the fp32 master copy too",
            "stage k shards only its own kind of state":
            "each stage shards everything the stages below it shard, plus one more kind"},
    "6.3": {"HBM in GiB instead of GB": "the datasheet's GB are 1e9 bytes",
            "8 bytes/param whatever the recipe": "count the bytes this recipe keeps per "
            "parameter: weights, gradients, master copy, optimizer states"},
    "6.4": {"model states fill all of HBM, not half":
            "the question leaves half of HBM for activations and buffers"},
    "6.5": {"attention scores forgotten":
            "without FlashAttention the softmax scores (the 5as/h term) are stored too"},
    "6.6": {"sequence parallelism not applied to the 10·sbh":
            "sequence parallelism splits the norm and dropout activations (the 10·sbh) over t",
            "scores kept (no selective recomputation)":
            "selective recomputation drops the attention scores' term"},
    "6.7": {"checkpoints in fp32 (4 bytes)": "the saved layer inputs are 16-bit, 2 bytes each",
            "one layer instead of all L": "every one of the L layers saves its input"},
    "6.8": {"5as/h over 34 (a ratio, not a share)":
            "divide the scores' term by the whole per-layer total, 34 + 5as/h",
            "the share kept instead of removed": "the question asks for the share saved"},
    "6.9": {"exactly one third (output layer recomputed too)":
            "only the layers' forward runs again, not the output layer's"},
    "6.10": {"activations for the global batch, not the micro-batch":
             "a device holds the activations of one micro-batch at a time",
             "logits forgotten": "the fp32 logits at the loss take memory too"},
    "6.11": {"stage k shards only its own kind of state":
             "each stage shards everything the stages below it shard, plus one more kind"},
    "6.12": {"sequence parallelism ignored":
             "with sequence parallelism the 10·sbh part is split over t as well"},
    "6.13": {"bf16 logits (2 bytes)": "the logits are kept in fp32 at the loss: 4 bytes each",
             "vocabulary not split over tp": "tensor parallelism splits the vocabulary over tp",
             "GiB instead of GB (bytes read as 2^30)": "the answer is in bytes"},
})


# ---- 6.14: gradient traffic with accumulation under ZeRO-2 (issue 24) -------------------------

def _zero2_plan(p):
    return ParallelPlan(dp=p.dp, zero=2)


def accumulation_grad_traffic(p):
    """Ex 6.14: gradient bytes one rank receives per step under ZeRO-2, reduce-scattering after
    each of the m = B/dp micro-batches (parallelism.fsdp.comms, collectives.collective_bytes)."""
    from ... import collectives
    from ...parallelism import fsdp

    return sum(collectives.collective_bytes(c.kind, c.nbytes, c.group_size).received_bytes * c.count
               for c in fsdp.comms(p.model, _zero2_plan(p), p.B, p.T) if c.kind == "reduce-scatter")


WRONG_METHODS["6.14"] = {
    "one reduce-scatter per step (ZeRO-1's count)": (
        lambda p: accumulation_grad_traffic(p) / _zero2_plan(p).n_microbatches(p.B),
        "ZeRO-2 keeps only a shard of the gradient, so each micro-batch's gradient is "
        "reduce-scattered into it: m of them per step"),
    "all-reduce bytes (2(n-1)/n per micro-batch)": (
        lambda p: 2 * accumulation_grad_traffic(p),
        "a reduce-scatter moves half of what an all-reduce does: (n-1)/n of the gradient"),
}
HINTS["6.14"] = ("How many micro-batches does a rank run, and what does each send?",
                 "m = B / dp micro-batches; each reduce-scatters the whole bf16 gradient, of which "
                 "a ring receives (n-1)/n")
