"""Answer key for Chapter 6 (Memory for training) exercises."""

from __future__ import annotations

from .. import hardware, memory, models, transformer
from ..parallelism import ParallelPlan

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
    """Ex 6.5: activation bytes of one layer, no parallelism, no recomputation."""
    return memory.activation_bytes(gpt_shape(p), p.b, p.s)


def layer_activations_tp_sp_selective(p):
    """Ex 6.6: the same with tensor parallelism p.t, sequence parallelism, selective recompute."""
    return memory.activation_bytes(gpt_shape(p), p.b, p.s, "selective", p.t, True)


def full_recompute_activations(p):
    """Ex 6.7: checkpoints of all L layers with full recomputation (no sequence parallelism)."""
    cfg = gpt_shape(p)
    return cfg.L * memory.activation_bytes(cfg, p.b, p.s, "full")


def selective_saving(p):
    """Ex 6.8: fraction of a layer's activations that selective recomputation removes."""
    cfg = gpt_shape(p)
    kept = memory.activation_bytes(cfg, 1, p.s, "selective")
    return 1 - kept / memory.activation_bytes(cfg, 1, p.s)


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
    return memory.activation_bytes(models.gpt(1, h, a), b, s, "none", t, sp)
