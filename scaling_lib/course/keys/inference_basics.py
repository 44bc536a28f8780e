"""Answer key for Chapter 8 (Inference basics) exercises."""

from __future__ import annotations

import math

from ... import hardware, inference, models, transformer
from ..grading.tables import with_messages

_DTYPE_OF_BYTES = {4: "fp32", 2: "bf16", 1: "fp8"}


def kv_bytes_per_token(p):
    """Ex 8.1: KV cache bytes per token of p.model with the cache in p.dtype."""
    return transformer.kv_cache_bytes(p.model, 1, 1, p.dtype)


def kv_cache_for_context(p):
    """Ex 8.2: bf16 KV cache bytes of p.B sequences holding p.S tokens each."""
    return transformer.kv_cache_bytes(p.model, p.B, p.S)


def cache_share(p):
    """Ex 8.3: share of a decode step's HBM bytes that is KV cache (p.B sequences, p.S tokens)."""
    return inference.decode_bytes(p.model, p.B, p.S).fractions()["kv cache"]


def mha_cache_ratio(p):
    """Ex 8.4: how many times larger the cache would be with K = N (multi-head attention)."""
    cfg = models.get(p.model)
    return (transformer.kv_cache_bytes(cfg.with_changes(K=cfg.N), 1, 1)
            / transformer.kv_cache_bytes(cfg, 1, 1))


def weights_read_per_step(p):
    """Ex 8.5: bytes of weights one decode step reads, weights stored in p.dtype."""
    return inference.weight_bytes_read(p.model, p.dtype)


def batch1_step_time(p):
    """Ex 8.6: roofline lower bound (s) of a batch-1 decode step with p.S cached tokens."""
    return inference.decode_step_time(p.model, 1, p.S, p.accelerator, p.n_devices)


def decode_tokens_per_s(p):
    """Ex 8.7: tokens/s of the whole system decoding p.B sequences at p.S cached tokens."""
    return p.B / inference.decode_step_time(p.model, p.B, p.S, p.accelerator, p.n_devices)


def step_intensity(p):
    """Ex 8.8: FLOPs per byte of one decode step (bf16 weights and cache)."""
    return inference.decode_intensity(p.model, p.B, p.S)


def is_compute_bound(p):
    """Ex 8.9: whether the decode step's intensity exceeds p.accelerator's critical intensity."""
    return bool(inference.decode_intensity(p.model, p.B, p.S)
                > hardware.get(p.accelerator).critical_intensity("bf16"))


def attention_intensity(p):
    """Ex 8.10: FLOPs per byte of cache read in the attention part of a decode step."""
    return (inference.decode_flops(p.model, 1, 1024)["attention"]
            / inference.decode_bytes(p.model, 1, 1024)["kv cache"])


def kv_cache_bytes(L, K, H, B, S, bytes_per_element):
    """Ex 8.11 reference: KV cache bytes of B sequences of S tokens (L layers, K kv heads of H)."""
    cfg = models.TransformerConfig(L=L, D=K * H, F=1, N=K, K=K, H=H, V=1)
    return transformer.kv_cache_bytes(cfg, B, S, _DTYPE_OF_BYTES[bytes_per_element])


def max_sequences(model, accelerator, n_devices, S):
    """Ex 8.12 reference: whole sequences of S tokens that fit next to the bf16 weights."""
    return inference.max_batch(model, S, accelerator, n_devices)


# ---- common wrong methods (tests/test_wrong_methods.py checks that each one FAILs) -------------
def _n_heads_not_k(p):
    """The cache sized with the N query heads instead of the K key/value heads."""
    cfg = models.get(p.model)
    return transformer.kv_cache_bytes(cfg.with_changes(K=cfg.N), 1, 1, p.dtype)


def _no_factor_two(p):
    return kv_bytes_per_token(p) / 2


def _bits_not_bytes(p):
    return kv_bytes_per_token(p) * 8


def _n_heads_for_context(p):
    cfg = models.get(p.model)
    return transformer.kv_cache_bytes(cfg.with_changes(K=cfg.N), p.B, p.S)


def _gib_not_gb(p):
    return kv_cache_for_context(p) / 2**30 * 1e9


def _embedding_included(p):
    return transformer.n_params(p.model) * {"bf16": 2, "int8": 1}[p.dtype]


def _int8_as_two_bytes(p):
    return inference.weight_bytes_read(p.model, "bf16")


def _one_device(p):
    return inference.decode_step_time(p.model, 1, p.S, p.accelerator, 1)


def _per_sequence_rate(p):
    return decode_tokens_per_s(p) / p.B


def _k_over_n(p):
    return 1 / mha_cache_ratio(p)


def _attention_n_as_k(p):
    return 1.0


def _attention_fp32_cache(p):
    return attention_intensity(p) / 2


def _kv_forgot_two(L, K, H, B, S, bytes_per_element):
    return L * K * H * B * S * bytes_per_element


def _sequences_no_weights(model, accelerator, n_devices, S):
    return math.floor(n_devices * hardware.get(accelerator).hbm_bytes
                      / transformer.kv_cache_bytes(model, 1, S))


WRONG_METHODS = {
    "8.1": {"N query heads instead of K kv heads": _n_heads_not_k,
            "keys only (no factor 2 for values)": _no_factor_two,
            "bits instead of bytes": _bits_not_bytes},
    "8.2": {"N query heads instead of K kv heads": _n_heads_for_context,
            "GiB instead of GB (bytes read as 2^30)": _gib_not_gb},
    "8.4": {"K/N instead of N/K": _k_over_n},
    "8.5": {"input embedding counted": _embedding_included,
            "int8 counted as 2 bytes": _int8_as_two_bytes},
    "8.6": {"one device's bandwidth (n_devices forgotten)": _one_device},
    "8.7": {"tokens/s of one sequence (1 / step time)": _per_sequence_rate},
    "8.10": {"one FLOP per byte (N/K group forgotten, 4·K·H over 4·K·H)": _attention_n_as_k,
             "fp32 cache (4 bytes per element)": _attention_fp32_cache},
    "8.11": {"keys only (no factor 2 for values)": _kv_forgot_two},
    "8.12": {"weights forgotten": _sequences_no_weights},
}


def moe_weights_read(p):
    """Ex 8.13: bf16 weight bytes a decode step of p.B tokens reads from p.model (uniform routing)."""
    return inference.weight_bytes_read(p.model, "bf16", p.B)


WRONG_METHODS["8.13"] = {
    "every expert read": lambda p: inference.weight_bytes_read(p.model),
    "B·k experts, no overlap": lambda p: _no_overlap(p),
}


def _no_overlap(p):
    cfg = models.get(p.model)
    touched = min(p.B * cfg.k, cfg.E)
    every = inference.weight_bytes_read(cfg)
    routed = 2 * transformer.param_count(cfg)["experts"]
    return every - routed + routed * touched / cfg.E

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '8.1': ('What does each layer cache for each token?',
            "a key and a value for every kv head, H numbers each, in the cache's dtype"),
    '8.2': ('Per-token bytes, then how many tokens are cached?',
            'multiply the bytes per token by the batch and the context length'),
    '8.3': ('A decode step reads two things: the weights and the cache.',
            'weights: every parameter but the input embedding at 2 bytes; cache: every cached '
            "token's bytes; compare"),
    '8.4': ('The cache is proportional to the number of kv heads.',
            'compare the cache with K kv heads to the one with N'),
    '8.5': ('Which weights does a decode step read?',
            "every weight except the embedding table (a lookup), at the weights' bytes"),
    '8.6': ('A step takes the longer of its math and its memory reads.',
            'compute both times for the chips together; at batch 1 see which wins'),
    '8.7': ('How many tokens does one step produce?',
            'one token per sequence per step: divide by the step time'),
    '8.8': ('Intensity: FLOPs of the step over its bytes.',
            'count the decode FLOPs (2 per weight per sequence plus attention) and the bytes '
            '(weights plus cache)'),
    '8.9': ("Compare two intensities: the step's and the chip's.",
            "the step's FLOPs over bytes against peak FLOP/s over HBM bytes/s"),
    '8.10': ('Look at one cached token of one layer: FLOPs against bytes.',
             'QKᵀ and AV over N query heads against the key and value of the K kv heads, 2 '
             'bytes each'),
    '8.11': ('Per token, what does each layer store?',
             'a key and a value per kv head, H numbers each, times the bytes per number'),
    '8.12': ('First what is free after the weights, then how big is one sequence?',
             "the HBM left after the bf16 weights, divided by one sequence's cache bytes, "
             'rounded down'),
    '8.13': ('With a batch of B tokens, how many distinct experts are hit per layer?',
             'the chance an expert is missed by all B tokens; the expected number hit scales '
             "the routed experts' bytes"),
}


# ---- More listed mistakes, each with what the student reads (issue 21).

def _mha_cache(p):
    cfg = models.get(p.model)
    return transformer.kv_cache_bytes(cfg.with_changes(K=cfg.N), p.B, p.S)


def _decode_parts(p, B=None):
    B = p.B if B is None else B
    return inference.decode_flops(p.model, B, p.S), inference.decode_bytes(p.model, B, p.S)


WRONG_METHODS["8.3"] = {
    "one sequence's cache": (
        lambda p: _decode_parts(p, 1)[1]["kv cache"] / (_decode_parts(p, 1)[1].total),
        "the step reads the cache of every sequence in the batch: B of them"),
    "the weights' share": (
        lambda p: 1 - cache_share(p),
        "that is the weights' share of the bytes: the question asks for the cache's"),
}
WRONG_METHODS["8.4"]["the saving, 1 - K/N"] = (
    lambda p: 1 - 1 / mha_cache_ratio(p),
    "that is the share grouped-query attention saves: the question asks how many times larger "
    "the multi-head cache is")
WRONG_METHODS["8.6"]["the math time"] = (
    lambda p: inference.decode_flops(p.model, 1, p.S).total / (
        p.n_devices * hardware.get(p.accelerator).peak_flops_per_s("bf16")),
    "that is the math time: at batch 1 a decode step waits for its reads of the weights and the "
    "cache")
WRONG_METHODS["8.7"]["per device"] = (
    lambda p: decode_tokens_per_s(p) / p.n_devices,
    "the question asks for the whole system's tokens per second, all devices together")
WRONG_METHODS["8.8"] = {
    "fp32 bytes (4 per value)": (
        lambda p: step_intensity(p) / 2,
        "weights and cache are bf16 here, 2 bytes per value"),
    "batch 1": (
        lambda p: step_intensity(p.with_changes(B=1)) if hasattr(p, "with_changes") else
        inference.decode_intensity(p.model, 1, p.S),
        "each weight read serves all B sequences of the batch: count the FLOPs of the whole "
        "batch"),
}
WRONG_METHODS["8.9"] = {
    "the weights' bytes only": (
        lambda p: bool(_decode_parts(p)[0].total / _decode_parts(p)[1]["weights"]
                       > hardware.get(p.accelerator).critical_intensity("bf16")),
        "a decode step also reads the KV cache: with the cache counted, its intensity is well "
        "below the batch size"),
}
WRONG_METHODS["8.11"]["bytes per element forgotten"] = (
    lambda L, K, H, B, S, bytes_per_element: 2 * L * K * H * B * S + 0 * bytes_per_element,
    "that counts elements: multiply by the bytes per element")
WRONG_METHODS["8.12"]["one device's HBM"] = (
    lambda model, accelerator, n_devices, S: max(0, math.floor(
        (hardware.get(accelerator).hbm_bytes - 2 * transformer.n_params(model))
        / transformer.kv_cache_bytes(model, 1, S))),
    "the weights and the cache spread over all n devices: use their HBM together")

with_messages(WRONG_METHODS, {
    "8.1": {"N query heads instead of K kv heads":
            "the cache holds keys and values for the K kv heads, not the N query heads",
            "keys only (no factor 2 for values)": "each layer caches a key and a value",
            "bits instead of bytes": "the answer is in bytes: a bf16 number is 2 bytes"},
    "8.2": {"N query heads instead of K kv heads":
            "the cache holds keys and values for the K kv heads, not the N query heads",
            "GiB instead of GB (bytes read as 2^30)": "the answer is in bytes"},
    "8.4": {"K/N instead of N/K": "the multi-head cache is the larger: N/K times the GQA one"},
    "8.5": {"input embedding counted":
            "a decode step looks up one row of the embedding table, not the whole table",
            "int8 counted as 2 bytes": "an int8 weight is 1 byte"},
    "8.6": {"one device's bandwidth (n_devices forgotten)":
            "the weights are split over all n devices, which read them in parallel"},
    "8.7": {"tokens/s of one sequence (1 / step time)":
            "each step produces a token for every sequence of the batch"},
    "8.10": {"one FLOP per byte (N/K group forgotten, 4·K·H over 4·K·H)":
             "each cached key and value serves N/K query heads: count the FLOPs of all N",
             "fp32 cache (4 bytes per element)": "the cache is bf16, 2 bytes per element"},
    "8.11": {"keys only (no factor 2 for values)": "each layer caches a key and a value"},
    "8.12": {"weights forgotten": "the weights take their share of HBM first"},
    "8.13": {"every expert read": "only the experts some token of the batch chose are read",
             "B·k experts, no overlap": "tokens of a batch often choose the same experts: "
             "count the distinct experts expected"},
})
