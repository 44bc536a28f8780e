"""Tensor-parallel decode: what a sharded decode step communicates and where its KV cache lives.

A decode step runs one new token per sequence through the model. Sharded Megatron-style over tp
devices (column-parallel wq, wk, wv, w_gate, w_up and output layer; row-parallel wo and w_down),
each device holds 1/tp of every weight matrix and the KV cache of its own heads, and the step
needs one all-reduce of the B new tokens' activations per block:

    all-reduce of B·D·a bytes, 2L times per step (+ 1 with a vocabulary-parallel embedding)

with a the bytes per activation element. Nothing else: attention over the cache is local to a
device because the cache is split by heads like the query heads that read it, and the logits
stay split over the vocabulary (sampling reads them where they are, or gathers B·V values, which
this count leaves out). With grouped-query attention and tp > K, each kv head is copied to the
tp/K devices whose query heads read it (:func:`scaling_lib.parallelism.tensor.kv_replication`):
more cache per device, no more communication.

:func:`scaling_lib.simulate.decode_step` runs this step on simulated devices, and the tests
check that its compiled collectives equal :func:`decode_collectives`.

See: Chapter "Case study: serving Llama 3", "A real sharded decode step".
"""

from __future__ import annotations

import numpy as np

from . import models, transformer
from .parallelism.comms import Comm, element_bytes
from .parallelism.tensor import kv_replication
from .units import _brief, check_count, check_int

__all__ = ["decode_collectives", "decode_comm_bytes", "kv_cache_bytes_per_device",
           "check_decode_tp"]


def check_decode_tp(cfg, tp) -> int:
    """tp as an int if every split of a decode step works over it, else ValueError naming why.

    tp must divide the N query heads, divide or be a multiple of the K kv heads, and divide F
    and V (the MLP and the output layer are split by columns).

    >>> check_decode_tp("llama3-70b", 8)
    8
    >>> check_decode_tp("llama3-70b", 3)
    Traceback (most recent call last):
    ...
    ValueError: tp=3 must divide N=64 query heads and divide or be a multiple of K=8 kv heads; choose tp in [1, 2, 4, 8, 16, 32, 64]
    """
    c = models.get(cfg)
    tp = check_int("tp", tp, maximum=2**24)
    kv_replication(c, tp)  # raises with the valid choices
    if c.is_moe:
        raise ValueError(f"{c.name or 'cfg'} is an MoE model (E={c.E}); the tensor-parallel "
                         "decode here covers dense models")
    for name, dim in (("F", c.F), ("V", c.V)):
        if dim % tp:
            raise ValueError(f"tp={tp} does not divide {name}={dim} (the {name} dimension is "
                             "split by columns); choose a tp that divides it")
    return tp


def decode_collectives(cfg, tp, B, dtype="bf16", *, vocab_parallel_embedding=True) -> list[Comm]:
    """The collectives one device takes part in during a tensor-parallel decode step.

    One all-reduce of the B new tokens' activations (V = B·D·a bytes) after each layer's
    attention and MLP, 2L in all, plus one after a vocabulary-parallel embedding lookup (each
    device holds V/tp rows and contributes the rows it owns). None when tp = 1. The count does
    not depend on the context length: the KV cache never moves.

    Args: cfg (preset name or TransformerConfig), tp (devices), B (sequences), dtype (of the
    activations: "bf16", "f32", ...), vocab_parallel_embedding (False: the table replicated).

    >>> [(c.kind, c.group_size, c.nbytes, c.count) for c in decode_collectives("llama3-70b", 8, 4)]
    [('all-reduce', 8, 65536.0, 161)]

    See: Chapter "Case study: serving Llama 3", "A real sharded decode step".
    """
    c = models.get(cfg)
    tp = check_decode_tp(c, tp)
    B = check_count("B", B)
    if np.ndim(B):
        raise ValueError(f"B={_brief(B)} must be a single number of sequences")
    if tp == 1:
        return []
    n = 2 * c.L + (1 if vocab_parallel_embedding else 0)
    return [Comm("all-reduce", "tp", tp, float(B * c.D * element_bytes(dtype)), n, "forward",
                 False)]


def decode_comm_bytes(cfg, tp, B, dtype="bf16", *, vocab_parallel_embedding=True) -> float:
    """Total V·count of :func:`decode_collectives`: the all-reduced bytes of one decode step.

    >>> decode_comm_bytes("llama3-70b", 8, 1) / 1e6  # 161 x 16 KiB
    2.637824
    """
    return float(sum(x.nbytes * x.count for x in decode_collectives(
        cfg, tp, B, dtype, vocab_parallel_embedding=vocab_parallel_embedding)))


def kv_cache_bytes_per_device(cfg, tp, B, S, kv_dtype="bf16") -> float:
    """KV cache bytes one device holds: the cache of B sequences of S tokens / tp, times the
    copies of each kv head when tp > K (:func:`~scaling_lib.parallelism.tensor.kv_replication`).

    Per device: 2·L·(K/tp)·H·B·S·a bytes while tp <= K, and one kv head, 2·L·H·B·S·a, once
    tp >= K.

    >>> kv_cache_bytes_per_device("llama3-70b", 8, 1, 1000) / 1e6   # one kv head of 8 per device
    40.96
    >>> kv_cache_bytes_per_device("llama3-70b", 16, 1, 1000) / 1e6  # tp > K: still one head
    40.96
    """
    c = models.get(cfg)
    tp = check_decode_tp(c, tp)
    r = kv_replication(c, tp)
    return float(np.asarray(transformer.kv_cache_bytes(c, B, S, kv_dtype)) * r / tp)
