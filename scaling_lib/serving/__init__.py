"""Serving: one home per serving quantity, one module per concern.

- :mod:`.estimator`: latency, throughput, memory and cost of a deployment (:func:`estimate`),
  and one chunked-prefill iteration (:func:`mixed_step_parts`);
- :mod:`.sizing`: the smallest device count, the best batch, the decode step's parts, where
  tensor parallelism turns communication-bound, the prefill:decode ratio, speculative speed-up,
  the Pareto mask;
- :mod:`.layout`: layouts (tp inside the scale-up domain, pp across nodes, replicas), the valid
  tp degrees, the KV cache and weights per device;
- :mod:`.engine`: what an engine changes: paged KV blocks, speculative tokens per step, chunked
  prefill, model-parallel limits, 2D weight-stationary sharding;
- :mod:`.parallel`: a sharded decode step's collectives, topologies, the smallest topology and
  the latency-throughput front over layouts;
- :mod:`.sim`: the request-level simulator (continuous batching, tail latencies, goodput,
  preemption, prefix caching, disaggregated prefill and decode).

Every public name of the old modules (``scaling_lib.serving``, ``serving_engine``,
``serving_parallel``, ``serving_sim``) is importable from here or from its old module.

See: Chapters "Serving at scale" and "Case study: serving Llama 3".
"""

from . import engine, estimator, layout, parallel, sim, sizing  # noqa: F401
from .estimator import *  # noqa: F401,F403
from .estimator import __all__ as _est_all
from .sizing import *  # noqa: F401,F403
from .sizing import __all__ as _sizing_all
from .layout import (Layout, check_tp, kv_cache_bytes_per_device, layouts, scale_up_domain,
                     tp_choices, weight_bytes_per_device)
from .parallel import (check_decode_tp, decode_collectives, decode_comm_bytes, front,
                       memory_per_device, smallest_topology, topologies)

__all__ = list(_est_all) + list(_sizing_all) + ["Layout", "check_tp", "kv_cache_bytes_per_device", "layouts",
                            "scale_up_domain", "tp_choices", "weight_bytes_per_device",
                            "check_decode_tp", "decode_collectives", "decode_comm_bytes",
                            "front", "memory_per_device", "smallest_topology", "topologies",
                            "engine", "estimator", "layout", "parallel", "sim", "sizing"]
