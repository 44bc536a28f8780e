"""Answer key for Chapter 22 (Case study: serving Llama 3 70B and 405B) exercises."""

from __future__ import annotations

import math

import numpy as np

from ... import collectives, hardware, inference, models, serving, serving_parallel, transformer
from ...units import dtype_bytes
from ..grading.tables import with_messages

PROMPT, GEN = 2048, 512  # the request shape of the chapter (prompt and output tokens)
SERVER = {"h100": 8, "tpu-v5e": 16}  # Ex 22.4: one H100 node, a v5e 4x4 slice


def _cfg(name):
    return serving_parallel.GPT4_CLASS_ASSUMED if name == "gpt4-class" else models.get(name)


def min_chips(p):
    """Ex 22.1: fewest p.accelerator chips whose HBM holds p.model's weights in p.dtype."""
    return serving.min_devices(p.model, p.accelerator, dtype=p.dtype)


def smallest_topology(p):
    """Ex 22.2: the smallest slice / node size (and valid tp) that holds the weights."""
    return serving_parallel.smallest_topology(p.model, p.accelerator, dtype=p.dtype)


def tpot(p):
    """Ex 22.3: time per output token of p.model on p.n chips at batch p.B (the chapter's
    estimate: roofline at the mean context plus the tensor-parallel all-reduces)."""
    return serving.estimate(p.model, p.accelerator, p.n, batch=p.B, prompt_len=PROMPT,
                            gen_len=GEN, dtype=p.dtype, tp=p.n).tpot


def best_batch(p):
    """Ex 22.4: the batch (1 to 4096) with the most tokens/s within p.budget s per token."""
    return serving.best_batch("llama3-70b", p.accelerator, SERVER[p.accelerator],
                              tpot_budget=p.budget, prompt_len=PROMPT, gen_len=GEN,
                              dtype=p.dtype, max_batch=4096, tp=SERVER[p.accelerator])


def prefill_decode_ratio(p):
    """Ex 22.5: prefill servers per decode server."""
    return serving.prefill_decode_ratio(p.ttft, p.tpot, p.B, p.G)


def cost_per_million(p):
    """Ex 22.6: dollars per million output tokens of p.n chips at p.price per chip-hour
    producing p.tokens_per_s output tokens/s."""
    return float(serving.dollars_per_million_tokens(p.price, p.n, p.tokens_per_s))


def kv_tokens_that_fit(p):
    """Ex 22.7: tokens of bf16 KV cache that fit next to p.dtype weights on p.n H100s, with a
    fraction p.usable of each GPU's HBM available."""
    free = p.usable * p.n * hardware.get("h100").hbm_bytes - \
        transformer.n_params(p.model) * dtype_bytes(p.dtype)
    return math.floor(free / transformer.kv_cache_bytes(p.model, 1, 1, "bf16"))


def decode_comm_bytes(p):
    """Ex 22.8: all-reduced bytes of one bf16 decode step of p.model over p.tp devices at batch
    p.B (vocabulary-parallel embedding)."""
    return serving_parallel.decode_comm_bytes(p.model, p.tp, p.B, "bf16")


def prefill_time(p):
    """Ex 22.9: compute time of prefilling one prompt of p.P tokens on p.n chips at p.mfu."""
    acc = hardware.get(p.accelerator)
    return transformer.forward_flops(p.model, 1, p.P, causal=True) / (
        p.n * acc.peak_flops_per_s("bf16") * p.mfu)


def gpt4_class_chips(p):
    """Ex 22.10: fewest p.accelerator chips whose HBM holds the assumed GPT-4-class model."""
    return serving.min_devices(serving_parallel.GPT4_CLASS_ASSUMED, p.accelerator, dtype=p.dtype)


def pcie_one_way(p):
    """Ex 22.11: one-way bandwidth of a PCIe link of p.gen and p.lanes (bytes/s)."""
    return collectives.pcie_bytes_per_s(p.gen, p.lanes)


def peer_read_time(p):
    """Ex 22.12: seconds per decode step when one A100-80GB holds as much as fits of the bf16
    weights a step reads (``inference.weight_bytes_read``: the embedding table, of which a step
    looks up only B rows, is not read and lives on the neighbour) and reads the rest from the
    neighbour over NVLink 3 (one way)."""
    a = hardware.get("a100-80gb")
    w = inference.weight_bytes_read(p.model, "bf16")
    local = min(w, a.hbm_bytes)
    return local / a.hbm_bytes_per_s + (w - local) / a.link_bytes_per_s


def decode_allreduce_bytes(L, B, D, bytes_per_element, vocab_parallel):
    """Ex 22.13 reference: all-reduced bytes of one tensor-parallel decode step."""
    return (2 * L + (1 if vocab_parallel else 0)) * B * D * bytes_per_element


def smallest_slice(weight_bytes, hbm_bytes, sizes):
    """Ex 22.14 reference: the smallest of ``sizes`` whose chips hold ``weight_bytes``."""
    return min(n for n in sizes if weight_bytes <= n * hbm_bytes)


# ---- common wrong methods (tests/test_wrong_methods.py checks that each one FAILs) -------------
def _floor_not_ceil(p):
    need = transformer.n_params(p.model) * dtype_bytes(p.dtype)
    return max(1, math.floor(need / hardware.get(p.accelerator).hbm_bytes))


def _no_comm(p):
    return inference.decode_step_time(p.model, p.B, PROMPT + GEN / 2, p.accelerator, p.n,
                                      p.dtype)


def _one_chip(p):
    return inference.decode_step_time(p.model, p.B, PROMPT + GEN / 2, p.accelerator, 1,
                                      p.dtype)


def _largest_fitting(p):
    batches = np.arange(1, 4097)
    e = serving.estimate("llama3-70b", p.accelerator, SERVER[p.accelerator], batch=batches,
                         prompt_len=PROMPT, gen_len=GEN, dtype=p.dtype, tp=SERVER[p.accelerator])
    return int(batches[np.asarray(e.fits)].max())


def _full_hbm(p):
    free = p.n * hardware.get("h100").hbm_bytes - \
        transformer.n_params(p.model) * dtype_bytes(p.dtype)
    return math.floor(free / transformer.kv_cache_bytes(p.model, 1, 1, "bf16"))


def _n_heads(p):
    cfg = models.get(p.model)
    free = p.usable * p.n * hardware.get("h100").hbm_bytes - \
        transformer.n_params(cfg) * dtype_bytes(p.dtype)
    return math.floor(free / transformer.kv_cache_bytes(cfg.with_changes(K=cfg.N), 1, 1))


def _two_n_only(p):
    return 2 * transformer.n_params(p.model) * p.P / (
        p.n * hardware.get(p.accelerator).peak_flops_per_s("bf16") * p.mfu)


WRONG_METHODS = {
    "22.1": {"rounded down": _floor_not_ceil},
    "22.2": {"the floor, not rounded up to a topology": min_chips},
    "22.3": {"all-reduces left out": _no_comm,
             "one chip's bandwidth": _one_chip},
    "22.4": {"largest batch that fits, budget ignored": _largest_fitting},
    "22.5": {"G forgotten (one token per sequence)": lambda p: p.B * p.ttft / p.tpot,
             "batch forgotten": lambda p: p.ttft / (p.G * p.tpot)},
    "22.6": {"price of one chip (n forgotten)": lambda p: cost_per_million(p) / p.n,
             "hours and seconds mixed up": lambda p: cost_per_million(p) * 3600},
    "22.7": {"all HBM usable": _full_hbm,
             "N query heads instead of K kv heads": _n_heads},
    "22.8": {"fp32 activations": lambda p: 2 * decode_comm_bytes(p),
             "tp times the bytes": lambda p: p.tp * decode_comm_bytes(p)},
    "22.9": {"MFU ignored (peak FLOP/s)": lambda p: prefill_time(p) * p.mfu},
    "22.10": {"active parameters only": lambda p: serving.min_devices(
        serving_parallel.GPT4_CLASS_ASSUMED.with_changes(E=2), p.accelerator, dtype=p.dtype)},
    "22.11": {"both directions added": lambda p: 2 * pcie_one_way(p),
              "bits not bytes": lambda p: 8 * pcie_one_way(p)},
    "22.12": {"NVLink 3 taken as 600 GB/s one way": lambda p: _peer_600(p),
              "the neighbour's memory read at HBM speed": lambda p: _pooled(p)},
}

ACCEPTED_METHODS = {
    "22.9": {"2·n_params·P FLOPs (attention left out)": _two_n_only},
}


def _peer_600(p):
    a = hardware.get("a100-80gb")
    w = inference.weight_bytes_read(p.model, "bf16")
    local = min(w, a.hbm_bytes)
    return local / a.hbm_bytes_per_s + (w - local) / (2 * a.link_bytes_per_s)


def _pooled(p):
    a = hardware.get("a100-80gb")
    return inference.weight_bytes_read(p.model, "bf16") / a.hbm_bytes_per_s

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '22.1': ('The weights at this precision must fit in HBM.',
             "the weight bytes over one chip's HBM, rounded up; check the chip's HBM"),
    '22.2': ('Walk the topologies from the smallest.',
             'skip those whose HBM does not hold the weights'),
    '22.3': ("A roofline step at the mean context, plus TP's all-reduces.",
             'use the mean context over a generation; add two all-reduces per layer of the '
             "batch's activations, and one for the vocabulary-parallel embedding"),
    '22.4': ('Keep the batches within the budget.',
             'of those that fit and meet it, take the one with the most tokens/s'),
    '22.5': ("Match decode's demand for prefills with prefill's supply.",
             'a decode server finishes B sequences every G·tpot seconds; each needs one prefill'),
    '22.6': ('Dollars per second over tokens per second.',
             "the whole system's dollars per second over its tokens per second, times a million"),
    '22.7': ('HBM left after the weights, in tokens of cache.',
             'the usable bytes minus the weights, over the cache bytes per token'),
    '22.8': ('Count the all-reduces of a decode step and their size.',
             'one after each attention and MLP block and one after the embedding, each of the '
             "batch's activations"),
    '22.9': ('Prefill is compute-bound: FLOPs over the delivered rate.',
             "the prompt's FLOPs over (chips × peak × MFU)"),
    '22.10': ('Do idle experts occupy HBM?',
              'count all the parameters, not the active ones'),
    '22.11': ('Lanes, transfer rate, encoding, bits to bytes.',
              "lanes times transfers per second times the encoding's efficiency, divided by 8"),
    '22.12': ('Compare the link with local HBM.',
              "NVLink's one-way bandwidth against HBM's"),
    '22.13': ('How many all-reduces per step, and how big?',
              "two per layer and one for the embedding, each of the batch's activations"),
    '22.14': ('Keep the sizes that hold the weights.',
              'take the smallest of them'),
}


# ---- More listed mistakes, each with what the student reads (issue 21).

WRONG_METHODS["22.1"]["bf16 bytes whatever the precision"] = (
    lambda p: serving.min_devices(p.model, p.accelerator, dtype="bf16"),
    "the weights are stored in the precision the question names: bytes per weight change")
WRONG_METHODS["22.2"]["bf16 bytes whatever the precision"] = (
    lambda p: serving_parallel.smallest_topology(p.model, p.accelerator, dtype="bf16"),
    "the weights are stored in the precision the question names: bytes per weight change")
WRONG_METHODS["22.4"]["the smallest batch"] = (
    lambda p: 1,
    "batch 1 meets any budget the others meet, but gives the fewest tokens/s: take the largest "
    "throughput within the budget")
WRONG_METHODS["22.9"]["MFU ignored (peak FLOP/s)"] = (
    WRONG_METHODS["22.9"]["MFU ignored (peak FLOP/s)"],
    "the chips deliver only a share MFU of their peak: divide by it")
WRONG_METHODS["22.10"]["bf16 bytes whatever the precision"] = (
    lambda p: serving.min_devices(serving_parallel.GPT4_CLASS_ASSUMED, p.accelerator,
                                  dtype="bf16"),
    "the weights are stored in the precision the question names: bytes per weight change")
WRONG_METHODS["22.13"] = {
    "the embedding's all-reduce always added": (
        lambda L, B, D, bytes_per_element, vocab_parallel: (2 * L + 1) * B * D
        * bytes_per_element,
        "only a vocabulary-parallel embedding needs an all-reduce of its output"),
    "one all-reduce per layer": (
        lambda L, B, D, bytes_per_element, vocab_parallel: (
            L + (1 if vocab_parallel else 0)) * B * D * bytes_per_element,
        "each layer all-reduces twice: after attention and after the MLP"),
}
WRONG_METHODS["22.14"] = {
    "the first size listed that fits": (
        lambda weight_bytes, hbm_bytes, sizes: next(
            n for n in sizes if weight_bytes <= n * hbm_bytes),
        "the sizes are not in order: take the smallest that holds the weights"),
    "the largest size": (
        lambda weight_bytes, hbm_bytes, sizes: max(sizes),
        "the largest slice holds the weights too, but the question asks for the smallest"),
}
WRONG_METHODS["22.9"]["one chip (n forgotten)"] = (
    lambda p: prefill_time(p) * p.n,
    "the prompt's FLOPs are split over all n chips")

with_messages(WRONG_METHODS, {
    "22.1": {"rounded down": "a fraction of a chip does not exist: round up"},
    "22.2": {"the floor, not rounded up to a topology": "round up to a topology that exists"},
    "22.3": {"all-reduces left out": "tensor parallelism adds two all-reduces per layer",
             "one chip's bandwidth": "the n chips read in parallel"},
    "22.4": {"largest batch that fits, budget ignored": "the batch must meet the budget"},
    "22.5": {"G forgotten (one token per sequence)": "a sequence decodes G tokens",
             "batch forgotten": "a decode server runs B sequences at once"},
    "22.6": {"price of one chip (n forgotten)": "all n chips are paid for",
             "hours and seconds mixed up": "the price is per hour, the rate per second"},
    "22.7": {"all HBM usable": "only the usable share of HBM holds weights and cache",
             "N query heads instead of K kv heads": "the cache holds the K kv heads"},
    "22.8": {"fp32 activations": "the activations are bf16",
             "tp times the bytes": "count the bytes of each all-reduce once"},
    "22.10": {"active parameters only": "idle experts still occupy HBM"},
    "22.11": {"both directions added": "the question asks for one way",
              "bits not bytes": "8 bits make a byte"},
    "22.12": {"NVLink 3 taken as 600 GB/s one way": "NVLink 3 is 300 GB/s each way",
              "the neighbour's memory read at HBM speed": "a neighbour's HBM is read over NVLink"},
})
