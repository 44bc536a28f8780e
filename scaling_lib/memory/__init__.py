"""Memory for training: model states, activations, and one device of a parallel plan.

- :mod:`.states`: bytes per parameter by recipe and optimizer, ZeRO sharding, CPU offload.
- :mod:`.activations`: what a layer keeps for the backward pass (Korthikanti et al. 2022,
  generalised), the fp32 logits, the cost of selective recomputation.
- :mod:`.layout`: what a pipeline stage holds and how many micro-batches its schedule keeps.
- :mod:`.training`: the model of record for one device of a plan, vectorised over many plans
  (:func:`training_memory_arrays`, which ``parallelism.estimate`` and the planner call) and for
  one (:func:`training_memory`), with the terms people forget, each sourced.
- :mod:`.timeline`: memory over the phases of one step (:func:`memory_timeline`).

See: Chapter 6, "Memory for training".
"""

from .activations import (_activation_terms, _check_flag, _check_tp, activation_breakdown,
                          activation_bytes, checkpointed_activation_bytes, logits_bytes,
                          selective_recompute_overhead, tp_choices)
from .states import (OPTIMIZERS, RECIPES, _recipe, bytes_per_param, max_trainable_params,
                     model_state_bytes, offload_transfer_time, offloaded_state_bytes)
from .layout import (PLAN_COLUMNS, _check_plan, in_flight_microbatches, plan_columns,
                     stage_params)
from .training import (ALLOCATOR_FRAGMENTATION, PARTS, _first_stage_params, check_fit,
                       training_memory, training_memory_arrays)
from .timeline import memory_timeline

__all__ = ["ALLOCATOR_FRAGMENTATION", "OPTIMIZERS", "PARTS", "PLAN_COLUMNS", "RECIPES",
           "activation_breakdown",
           "activation_bytes", "bytes_per_param", "check_fit", "checkpointed_activation_bytes",
           "in_flight_microbatches", "logits_bytes", "max_trainable_params", "memory_timeline",
           "model_state_bytes", "offload_transfer_time", "offloaded_state_bytes", "plan_columns",
           "selective_recompute_overhead", "stage_params", "tp_choices", "training_memory",
           "training_memory_arrays"]
