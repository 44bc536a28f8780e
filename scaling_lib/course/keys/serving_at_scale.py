"""Answer key for Chapter 21 (Serving at scale) exercises."""

from __future__ import annotations

import math

import numpy as np

from ... import hardware, inference, models, serving, serving_engine, serving_sim, transformer
from ..grading.tables import with_messages


def min_chips(p):
    """Ex 21.1: fewest p.accelerator devices whose HBM holds p.model's weights in p.dtype."""
    return serving.min_devices(p.model, p.accelerator, dtype=p.dtype)


def _context(p):
    return p.P + p.G // 2


def step_time(p):
    """Ex 21.2: TPOT of p.model tensor-parallel over p.n devices at batch p.B (mean context)."""
    return float(inference.decode_step_time(p.model, p.B, _context(p), p.accelerator, p.n,
                                            tp=p.n))


def best_batch(p):
    """Ex 21.3: batch with the most tokens/s within the TPOT budget p.budget that fits."""
    return serving.best_batch(p.model, p.accelerator, p.n, tpot_budget=p.budget,
                              prompt_len=p.P, gen_len=p.G, tp=p.n)


def pd_ratio(p):
    """Ex 21.4: prefill servers per decode server."""
    return serving.prefill_decode_ratio(p.prefill_time, p.step_time, p.B, p.G)


def spec_speedup(p):
    """Ex 21.5: speculative decoding's expected speed-up."""
    return serving.speculative_speedup(p.alpha, p.gamma, p.cost)


def spec_break_even(p):
    """Ex 21.6: the draft cost (in target steps) at which speculation stops paying."""
    return serving_engine.speculative_break_even_cost(p.alpha, p.gamma)


def kv_tokens(p):
    """Ex 21.7: tokens of KV cache (in p.kv_dtype) that fit next to the p.dtype weights."""
    return float(inference.max_cached_tokens(p.model, p.accelerator, p.n, p.dtype, p.kv_dtype))


def lengths_of(p):
    """The request lengths of Ex 21.8: geometrically spaced from p.shortest to p.max_len."""
    return np.geomspace(p.shortest, p.max_len, p.n).round()


def prealloc_waste(p):
    """Ex 21.8: share of the KV memory reserved by preallocating p.max_len that holds no token."""
    return serving_engine.kv_waste(lengths_of(p), max_len=p.max_len)


def allocate(lengths, block_size, n_blocks):
    """Ex 21.9 reference: requests admitted first come, first served from a pool of blocks."""
    return serving_engine.allocate_kv_blocks(lengths, block_size, n_blocks)


def schedule_step(left, waiting, max_batch, gen_len):
    """Ex 21.10 reference: tokens left per running request after one iteration."""
    return serving_sim.schedule_step(left, waiting, max_batch, gen_len)[0]


def mp_limit(p):
    """Ex 21.11: model-parallel degree past which a decode matmul is ICI-bound, F / (B·β)."""
    beta = serving_engine.hbm_ici_ratio(p.accelerator)
    return serving_engine.model_parallel_limit(models.get(p.model).F, p.B, beta)


def cost_per_million(p):
    """Ex 21.12: dollars per million output tokens at p.price per device-hour."""
    return float(serving.estimate(p.model, p.accelerator, p.n, batch=p.B, prompt_len=p.P,
                                  gen_len=p.G, price_per_device_hour=p.price, tp=p.n,
                                  prefill="static").cost_per_million_tokens)


def ridge_chunk(p):
    """Ex 21.13: the prefill chunk at which a mixed iteration's compute equals its memory time."""
    return serving_engine.ridge_chunk_tokens(p.model, "h100", p.n, batch=p.B, context=p.S,
                                             prompt_len=p.P)


def _ridge_parts(p):
    from ...serving.estimator import mixed_step_parts
    kw = dict(decode_batch=p.B, context=p.S, prompt_len=p.P)
    p0 = mixed_step_parts(p.model, "h100", p.n, prefill_tokens=0, **kw)
    p1 = mixed_step_parts(p.model, "h100", p.n, prefill_tokens=1, **kw)
    return p0, p1


def _ridge_no_decode_compute(p):
    p0, p1 = _ridge_parts(p)
    slope = float(p1["compute"] - p0["compute"]) - float(p1["memory"] - p0["memory"])
    return float(p0["memory"]) / slope


# ---- common wrong methods (tests/test_wrong_methods.py checks that each one FAILs) -------------
def _bf16_always(p):
    return serving.min_devices(p.model, p.accelerator, dtype="bf16")


def _rounded_down(p):
    c = models.get(p.model)
    return max(1, math.floor(transformer.n_params(c) * {"bf16": 2, "int8": 1, "int4": 0.5}[p.dtype]
                             / hardware.get(p.accelerator).hbm_bytes))


def _no_allreduce(p):
    return float(inference.decode_step_time(p.model, p.B, _context(p), p.accelerator, p.n))


def _one_device_bandwidth(p):
    return float(inference.decode_step_time(p.model, p.B, _context(p), p.accelerator, 1))


def _largest_that_fits(p):
    return serving.best_batch(p.model, p.accelerator, p.n, tpot_budget=1e9, prompt_len=p.P,
                              gen_len=p.G, tp=p.n)


def _budget_without_comm(p):
    B = np.arange(1, 4097)
    e = serving.estimate(p.model, p.accelerator, p.n, batch=B, prompt_len=p.P, gen_len=p.G,
                         tp=p.n)
    t = inference.decode_step_time(p.model, B, _context(p), p.accelerator, p.n)
    ok = np.asarray(e.fits) & (np.asarray(t) <= p.budget)
    return int(B[ok].max()) if ok.any() else 0


def _spec_linear(p):
    return (1 + p.alpha * p.gamma) / (1 + p.gamma * p.cost)


WRONG_METHODS = {
    "21.1": {"bf16 bytes whatever the precision": _bf16_always,
             "rounded down instead of up": _rounded_down},
    "21.2": {"all-reduces left out": _no_allreduce,
             "one device's bandwidth (n forgotten)": _one_device_bandwidth},
    "21.3": {"largest batch that fits (budget ignored)": _largest_that_fits,
             "budget on the roofline step, all-reduces left out": _budget_without_comm},
    "21.4": {"generated length forgotten (one token per sequence)": lambda p: pd_ratio(p) * p.G,
             "batch forgotten (one sequence per decode server)": lambda p: pd_ratio(p) / p.B},
    "21.5": {"draft cost ignored (tokens per target step)":
             lambda p: serving_engine.expected_tokens_per_step(p.alpha, p.gamma),
             "1 + α·γ tokens (a rejection does not end the round)": _spec_linear},
    "21.6": {"E / γ (the target's own token not subtracted)":
             lambda p: serving_engine.expected_tokens_per_step(p.alpha, p.gamma) / p.gamma},
    "21.7": {"cache in the weights' precision":
             lambda p: float(inference.max_cached_tokens(p.model, p.accelerator, p.n, p.dtype)),
             "weights forgotten": lambda p: p.n * hardware.get(p.accelerator).hbm_bytes
             / transformer.kv_cache_bytes(p.model, 1, 1, p.kv_dtype)},
    "21.8": {"share used, not wasted": lambda p: 1 - prealloc_waste(p),
             "paged with 16-token blocks":
             lambda p: serving_engine.kv_waste(lengths_of(p), block_size=16)},
    "21.9": {"tokens, not blocks (no rounding up)":
             lambda lengths, b, n: int(np.searchsorted(np.cumsum(np.asarray(lengths) / b), n,
                                                       side="right")),
             "skips past a request that does not fit": lambda lengths, b, n: _skip_ahead(
                 lengths, b, n)},
    "21.10": {"new requests keep gen_len tokens (prefill's token not counted)":
              lambda left, w, m, g: _no_first_token(left, w, m, g)},
    "21.11": {"β forgotten (F / B)": lambda p: models.get(p.model).F / p.B,
              "D instead of F": lambda p: models.get(p.model).D / p.B
              / serving_engine.hbm_ici_ratio(p.accelerator)},
    "21.13": {"peak FLOP/s (the prefill's 40% ignored)": (
                  lambda p: serving_engine.ridge_chunk_tokens(
                      p.model, "h100", p.n, batch=p.B, context=p.S, prompt_len=p.P,
                      prefill_mfu=1.0),
                  "the prompt's FLOPs run at 40% of peak: each token takes 2.5 times its "
                  "peak-rate time"),
              "decode FLOPs not subtracted": (
                  _ridge_no_decode_compute,
                  "the decode tokens' own FLOPs already use part of the memory time: the chunk "
                  "fills only the gap, memory minus compute")},
    "21.12": {"price of one device (n forgotten)": lambda p: cost_per_million(p) / p.n,
              "per hour, not per second (3600 forgotten)": lambda p: cost_per_million(p) * 3600},
}


def _skip_ahead(lengths, block_size, n_blocks):
    free, admitted = n_blocks, 0
    for need in np.ceil(np.asarray(lengths) / block_size):
        if need <= free:
            free -= need
            admitted += 1
    return admitted


def _no_first_token(left, waiting, max_batch, gen_len):
    new = min(waiting, max_batch - len(left))
    after = [x - 1 for x in left] + [gen_len] * new
    return [x for x in after if x > 0]

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '21.1': ('The weights must fit.',
             'the weight bytes over HBM per device, rounded up'),
    '21.2': ("A decode step is a roofline step plus TP's all-reduces.",
             'the larger of math and memory time across the chips, plus two all-reduces per layer '
             'and one for the vocabulary-parallel embedding'),
    '21.3': ('Try every batch.',
             'keep the batches that fit and meet the budget, take the one with the most throughput'),
    '21.4': ('Match the rate sequences leave decode with the rate prefill fills them.',
             'a decode server frees B slots every G steps; one prefill server fills one per '
             'prefill time'),
    '21.5': ("Tokens gained per round over the round's cost.",
             'expected tokens per round from the acceptance rate, over 1 + γ·c target steps'),
    '21.6': ('Speculation stops paying when the speed-up falls to 1.',
             "set tokens per round over the round's cost equal to 1 and solve for c"),
    '21.7': ('What is left of HBM after the weights, in tokens?',
             'the free bytes over the cache bytes per token'),
    '21.8': ('Preallocation reserves max_len per slot.',
             'one minus the tokens actually held over the tokens reserved'),
    '21.9': ('A sequence needs whole blocks.',
             'round each length up to blocks; allocate in order and stop at the first that does '
             'not fit'),
    '21.10': ('A step admits what fits, advances the rest, and drops the finished.',
              'admit min(waiting, free slots), decrement the others, drop those at zero'),
    '21.11': ('When does the ICI time exceed the HBM time?',
              'write both per step and solve for the model-parallel degree'),
    '21.13': ('Below c*, the chip waits on HBM; write the compute and the memory term as '
              'functions of the chunk c.',
              'each is its decode value plus c times a per-token cost (FLOPs at 40% of peak; the '
              "token's KV write): set them equal and solve for c"),
    '21.12': ('Cost per token: dollars per second over tokens per second.',
              "the server's dollars per second over its output tokens per second, scaled to a "
              'million'),
}


# ---- More listed mistakes, each with what the student reads (issue 21).

WRONG_METHODS["21.6"]["E (the expected tokens per round)"] = (
    lambda p: serving_engine.expected_tokens_per_step(p.alpha, p.gamma),
    "speculation pays while the tokens per round exceed the round's cost 1 + γ·c: solve that "
    "for c")
WRONG_METHODS["21.10"]["finished requests kept"] = (
    lambda left, waiting, max_batch, gen_len: [x - 1 for x in left] + [gen_len - 1] * min(
        waiting, max_batch - len(left)),
    "a request whose last token was produced leaves the batch: drop the zeros")

with_messages(WRONG_METHODS, {
    "21.1": {"bf16 bytes whatever the precision": "use the bytes of the drawn precision",
             "rounded down instead of up": "a fraction of a chip does not exist: round up"},
    "21.2": {"all-reduces left out": "tensor parallelism adds two all-reduces per layer",
             "one device's bandwidth (n forgotten)": "the n devices read in parallel"},
    "21.3": {"largest batch that fits (budget ignored)": "the batch must meet the budget",
             "budget on the roofline step, all-reduces left out":
             "the step time includes the all-reduces"},
    "21.4": {"generated length forgotten (one token per sequence)":
             "a sequence occupies its slot for G decode steps",
             "batch forgotten (one sequence per decode server)": "a decode server runs B at once"},
    "21.5": {"draft cost ignored (tokens per target step)": "each round also runs γ draft steps",
             "1 + α·γ tokens (a rejection does not end the round)":
             "the first rejection ends the round"},
    "21.6": {"E / γ (the target's own token not subtracted)":
             "set tokens per round over the round's cost equal to 1 and solve for c"},
    "21.7": {"cache in the weights' precision": "the cache has its own precision",
             "weights forgotten": "the weights take their share of HBM first"},
    "21.8": {"share used, not wasted": "the question asks for the share wasted",
             "paged with 16-token blocks": "the question preallocates max_len per request"},
    "21.9": {"tokens, not blocks (no rounding up)": "a request needs whole blocks: round up",
             "skips past a request that does not fit": "stop at the first that does not fit"},
    "21.10": {"new requests keep gen_len tokens (prefill's token not counted)":
              "prefill produces a request's first token: gen_len - 1 are left"},
    "21.11": {"β forgotten (F / B)": "include the chip's HBM to ICI bandwidth ratio β",
              "D instead of F": "the MLP's matmul splits F over the chips"},
    "21.12": {"price of one device (n forgotten)": "the server's n devices are all paid for",
              "per hour, not per second (3600 forgotten)": "an hour is 3,600 seconds"},
})
