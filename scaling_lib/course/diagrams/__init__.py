"""The diagram toolkit: the book's mechanisms drawn from library objects (matplotlib only).

A picture changes when the model does: every size, step count, collective and schedule in a
diagram comes from ``scaling_lib`` (sharding, collectives, memory, parallelism, hardware,
serving). Each function takes ``ax=None`` (draws a new figure when None) and returns the Axes it
drew on (a list of Axes for multi-panel diagrams); each sets ``ax.alt_text`` and
``fig.alt_text``, a sentence saying what the figure shows, which a chapter copies into its figure
cell's metadata (``"mystnb": {"image": {"alt": ...}}``); :func:`alt_text` reads it back.
Diagrams are drawn on an opaque white figure, which the book keeps white in its dark theme.

| mechanism | function |
| --- | --- |
| sharded matmuls on a mesh | :func:`sharded_matmul`, :func:`matmul_cases` |
| collectives step by step | :func:`ring_all_gather`, :func:`tree_all_reduce`, |
|                          | :func:`one_shot_all_reduce`, :func:`hierarchical` |
| ZeRO stages | :func:`zero_stages` |
| DDP, FSDP, pipelines | :func:`ddp_buckets`, :func:`fsdp_prefetch`, :func:`pipeline_schedule` |
| tensor and sequence splits of a layer | :func:`tensor_parallel_mlp` |
| context parallelism | :func:`context_chunks`, :func:`ring_attention`, :func:`ulysses_all_to_all` |
| pipeline stages; DP under a pipeline; split backward | :func:`pipeline_stages`, :func:`pipeline_dp_overlap`, :func:`split_backward` |
| router balance (aux loss, bias) | :func:`router_balance` |
| the groups of a 4-axis mesh | :func:`mesh_axes` |
| expert dispatch and combine | :func:`expert_dispatch` |
| inside a chip | :func:`gpu_sm`, :func:`systolic_array`, :func:`memory_hierarchy` |
| network topologies | :func:`nvswitch_node`, :func:`fat_tree`, :func:`torus` |
| rooflines and a TensorCore | :func:`roofline_ridge`, :func:`overlap_bounds`, :func:`vpu_layout` |
| paged KV cache | :func:`paged_kv_cache` |
| Part II: backward pass, FlashAttention | :func:`backward_matmuls`, :func:`flash_attention_tiles` |
| Part II: accumulation, MFU, decode reads | :func:`grad_accumulation`, :func:`mfu_ledger`, |
|   | :func:`batched_decode_reads` |
| collective matmul, AllToAll resharding, async collectives | :func:`collective_matmul`, |
|                                                          | :func:`all_to_all_reshard`, :func:`async_trace` |
| serving: decode reads, chunked prefill, layouts, | :func:`decode_reads`, |
| disaggregated prefill and decode | :func:`chunked_prefill_timeline`, :func:`serving_layout`, |
|  | :func:`disaggregated` |

Importing this package imports matplotlib (not pyplot until a figure is made); ``import
scaling_lib`` never imports it.
"""

from __future__ import annotations

import importlib

_WHERE = {
    "sharded_matmul": "mesh", "matmul_cases": "mesh",
    "ring_all_gather": "collectives", "tree_all_reduce": "collectives",
    "one_shot_all_reduce": "collectives", "hierarchical": "collectives",
    "zero_stages": "zero",
    "ddp_buckets": "timelines", "fsdp_prefetch": "timelines", "pipeline_schedule": "timelines",
    "tensor_parallel_mlp": "layers",
    "context_chunks": "context", "ring_attention": "context",
    "expert_dispatch": "expert",
    "gpu_sm": "hardware", "systolic_array": "hardware", "memory_hierarchy": "hardware",
    "nvswitch_node": "topology", "fat_tree": "topology", "torus": "topology",
    "paged_kv_cache": "kvcache",
    "roofline_ridge": "part1", "overlap_bounds": "part1", "vpu_layout": "part1",
    "backward_matmuls": "part2", "flash_attention_tiles": "part2", "grad_accumulation": "part2",
    "mfu_ledger": "part2", "batched_decode_reads": "part2",
    "collective_matmul": "part3", "all_to_all_reshard": "part3", "async_trace": "part3",
    "pipeline_stages": "part4", "pipeline_dp_overlap": "part4", "ulysses_all_to_all": "part4",
    "router_balance": "part4", "mesh_axes": "part4", "split_backward": "part4",
    "layer_chunks": "part5", "planning_procedure": "part5", "search_funnel": "part5",
    "holdout_split": "part5", "calibrate_flow": "part5", "checkpoint_timeline": "part5",
    "marginal_gain": "part5", "share_or_srpt": "part5",
    "decode_reads": "part6", "chunked_prefill_timeline": "part6", "serving_layout": "part6",
    "disaggregated": "part6",
    "alt_text": "_style",
}
__all__ = sorted(_WHERE)


def __getattr__(name):
    """Load the module that defines ``name`` on first use."""
    if name not in _WHERE:
        raise AttributeError(f"scaling_lib.course.diagrams has no {name!r}; diagrams: "
                             f"{', '.join(__all__)}")
    value = getattr(importlib.import_module(f".{_WHERE[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(__all__))
