"""Accelerators, links and clusters: the "on what" of every estimate.

Peak FLOP/s are dense (never the 2:4 sparsity figure vendors print first). Bandwidths are one-way
per device in bytes/s unless a name says otherwise. Each preset cites its source next to it.

- ``chips``: ``Accelerator`` and its presets (``get``, ``names``), dtype helpers;
- ``internals``: what is inside a chip (memory levels, SMs, MXUs) and tile quantization;
- ``clusters``: ``Link``, ``Cluster``, ``cluster()``, TPU slices and named cluster presets.

See: Chapter 1 (rooflines) and the hardware chapters (GPUs, TPUs, networks).
"""

from .internals import (  # noqa: F401
    GPUInternals,
    MemoryLevel,
    TPUInternals,
    chip_flops_per_s,
    padding_efficiency,
    systolic_clocks,
    wave_efficiency,
)
from .chips import (  # noqa: F401
    ACCELERATORS,
    Accelerator,
    GPU_TIMELINE,
    KINDS,
    get,
    names,
    tensor_core_speedup,
    training_dtype,
    with_changes,
)
from .clusters import (  # noqa: F401
    Cluster,
    LLAMA3_N_GPUS,
    LLAMA3_OVERSUBSCRIPTION,
    LLAMA3_POD_GPUS,
    Link,
    TOPOLOGIES,
    TPU_2D_FULL_AXIS,
    TPU_CUBE_SIDE,
    cluster,
    cluster_names,
    get_cluster,
    ici_max_hops,
    torus_shape,
    tpu_slice,
    wraparound,
)

__all__ = ['ACCELERATORS', 'Accelerator', 'Cluster', 'GPUInternals', 'GPU_TIMELINE', 'KINDS', 'LLAMA3_N_GPUS', 'LLAMA3_OVERSUBSCRIPTION', 'LLAMA3_POD_GPUS', 'Link', 'MemoryLevel', 'TOPOLOGIES', 'TPUInternals', 'TPU_2D_FULL_AXIS', 'TPU_CUBE_SIDE', 'chip_flops_per_s', 'cluster', 'cluster_names', 'get', 'get_cluster', 'ici_max_hops', 'names', 'padding_efficiency', 'systolic_clocks', 'tensor_core_speedup', 'torus_shape', 'tpu_slice', 'training_dtype', 'wave_efficiency', 'with_changes', 'wraparound']
