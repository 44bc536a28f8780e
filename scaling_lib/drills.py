"""Interview drills: the numbers sheet, timed question sets, system design and conceptual answers.

Every question is generated from the answer keys the chapters use (``scaling_lib.keys.drills``,
which calls the library and the chapters' keys), so a changed constant changes a drill and its
answer together. The question bank (:data:`QUESTIONS`) writes the drill notebooks
``solutions/90_numbers.ipynb`` ... ``solutions/93_interview_senior.ipynb``
(``scaling_lib.drills_build``),
which then follow the solutions/exercises pattern: ``python -m scaling_lib.exercises build`` makes
the student versions and the grading tool grades them like any chapter.

:func:`quiz` draws a multiple-choice round from a seed without a notebook: each numeric question
with its right answer and the common wrong answers (``WRONG_METHODS``) as distractors.

See: the "Interview preparation" part of the book.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import collectives, hardware, inference, memory, models, transformer
from .parallelism import ParallelPlan
from .units import DAY, fmt_bytes, fmt_bytes_per_s, fmt_flops, fmt_flops_per_s, fmt_seconds

CHIPS = ("a100-80gb", "h100", "h200", "b200", "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e")
MODELS = ("llama3-8b", "llama2-13b", "llama3-70b", "llama3-405b", "gpt3-175b")
LEVELS = {"90_numbers": "Numbers every LLM engineer should know",
          "91_interview_junior": "Mock interview, level 1 (new grad)",
          "92_interview_mid": "Mock interview, level 2 (engineer)",
          "93_interview_senior": "Mock interview, level 3 (senior / staff)"}
MINUTES = {"90_numbers": 15, "91_interview_junior": 25, "92_interview_mid": 35,
           "93_interview_senior": 45}


# ---- The sheet --------------------------------------------------------------------------------

def chip_rows(names=CHIPS) -> list[dict]:
    """One row per chip: dense bf16 peak, HBM, HBM bandwidth, one-way scale-up link, B*."""
    from . import roofline

    rows = []
    for n in names:
        a = hardware.get(n)
        rows.append({"chip": n, "bf16 dense": fmt_flops_per_s(a.peak_flops_per_s("bf16")),
                     "HBM": fmt_bytes(a.hbm_bytes),
                     "HBM bandwidth": fmt_bytes_per_s(a.hbm_bytes_per_s),
                     "scale-up link (one-way)": fmt_bytes_per_s(a.link_bytes_per_s),
                     "critical batch B*": round(roofline.critical_batch(n, "bf16"))})
    return rows


def recipe_rows() -> list[dict]:
    """Training bytes per parameter by precision recipe (Adam)."""
    return [{"recipe": r, **{k: v for k, v in memory.bytes_per_param(r).items()},
             "total": memory.bytes_per_param(r).total} for r in memory.RECIPES]


def model_rows(names=MODELS) -> list[dict]:
    """Parameters, bf16 weights, KV cache per token and per 8K context, 6·N FLOPs per token."""
    rows = []
    for n in names:
        cfg = models.get(n)
        n_params = transformer.n_params(cfg)
        rows.append({"model": n, "parameters": f"{n_params / 1e9:.1f}B",
                     "bf16 weights": fmt_bytes(inference.weight_bytes_read(cfg)),
                     "KV per token": fmt_bytes(transformer.kv_cache_bytes(cfg, 1, 1)),
                     "KV per 8K context": fmt_bytes(transformer.kv_cache_bytes(cfg, 1, 8192)),
                     "train FLOPs/token (6N)": fmt_flops(transformer.six_n_flops(n_params, 1))})
    return rows


def collective_rows(nbytes=1e9) -> list[dict]:
    """AllReduce / AllGather of ``nbytes`` on a few systems (one-way link bandwidths)."""
    rows = []
    for label, n, acc in (("8 H100, NVLink", 8, "h100"), ("64 H100, 8 nodes, IB", 64, "h100"),
                          ("1,024 H100, 128 nodes, IB", 1024, "h100")):
        c = hardware.cluster(acc, n)

        def t(kind):
            return fmt_seconds(collectives.hierarchical_time(kind, nbytes, c, n).total)
        rows.append({"system": label, "AllReduce": t("all-reduce"), "AllGather": t("all-gather")})
    return rows


# ---- The question bank ------------------------------------------------------------------------

@dataclass(frozen=True)
class Question:
    """One graded drill: a number (``check``) or a function to write (``check_function``)."""

    name: str          # "91.3"
    title: str
    prompt: str        # Markdown; the drawn numbers are printed by the cell
    key: str           # function of scaling_lib.keys.drills
    draw: str = ""     # keyword arguments of draw(...), literal
    solution: str = ""  # the worked answer's code (assigns `answer`, or the function body)
    unit: str = ""
    tol: str = ""      # ", rtol=..." as written in the check call
    hint: str = ""
    worked: str = ""   # Markdown of the worked answer
    signature: str = ""  # for functions: "def f(a, b):"
    cases: str = ""    # for functions: literal cases
    topic: str = ""


def _q(*args, **kw) -> Question:
    return Question(*args, **kw)


_CH = f"accelerator={list(CHIPS)!r}"
QUESTIONS: dict[str, list[Question]] = {
    "90_numbers": [
        _q("90.1", "Peak FLOP/s", "What is the dense bf16 peak of the chip below, in FLOP/s?",
           "peak_flops", _CH, "answer = hw.get(p.accelerator).peak_flops_per_s('bf16')", "FLOP/s",
           hint="the dense figure, not the 'with sparsity' one; FLOP/s, not TFLOP/s",
           worked="Datasheets print a sparsity figure twice the dense one; training uses dense.",
           topic="Ch 2-3"),
        _q("90.2", "HBM capacity", "How many bytes of HBM does the chip below have?",
           "hbm_bytes", _CH, "answer = hw.get(p.accelerator).hbm_bytes", "bytes", ", rtol=0.01",
           hint="GB (1e9) or GiB (2^30)? TPU v4's 32 GiB is 34.4 GB",
           worked="GPU datasheets give GB; TPU v4 gives 32 GiB. The two differ by 7.4%.",
           topic="Ch 2-3"),
        _q("90.3", "HBM bandwidth", "What is the chip's HBM bandwidth, in bytes/s?",
           "hbm_bytes_per_s", _CH, "answer = hw.get(p.accelerator).hbm_bytes_per_s", "bytes/s",
           hint="bytes per second, not bits; TB/s is 1e12 bytes/s",
           worked="HBM bandwidth is quoted in bytes/s; network links are often in bits/s.",
           topic="Ch 1-3"),
        _q("90.4", "Scale-up link", "What is the chip's scale-up (NVLink or ICI) bandwidth, one way, "
           "all links together, in bytes/s?", "link_bytes_per_s", _CH,
           "answer = hw.get(p.accelerator).link_bytes_per_s", "bytes/s",
           hint="NVIDIA's '900 GB/s' for H100 counts both directions",
           worked="Marketing figures for NVLink add both directions; a ring sends one way.",
           topic="Ch 2-4"),
        _q("90.5", "Bytes per parameter", "Training with Adam in the recipe below, how many bytes "
           "does each parameter cost (weights, gradients, optimizer state)?", "bytes_per_param",
           "recipe=['mixed', 'bf16', 'fp32']", "answer = mem.bytes_per_param(p.recipe).total",
           "bytes", ", rtol=0", hint="mixed: bf16 weights and grads, fp32 master and two moments",
           worked="Mixed precision: 2 + 2 + (4 + 4 + 4) = 16; pure bf16 without a master copy: 8; "
           "fp32: 4 + 4 + 8 = 16.", topic="Ch 6"),
        _q("90.6", "Critical batch", "Above how many tokens per batch is a bf16 matmul with large "
           "D and F compute-bound on the chip below?", "critical_batch",
           "accelerator=['h100', 'a100-80gb', 'b200', 'tpu-v5e', 'tpu-v5p', 'tpu-v6e']",
           "answer = rl.critical_batch(p.accelerator, 'bf16')", "tokens",
           hint="C / W_hbm with the dense peak", worked="B* = C / W_hbm (bf16: 2 bytes per value "
           "cancels the 2 FLOPs per multiply-add).", topic="Ch 1"),
        _q("90.7", "KV cache per token", "How many bytes of bf16 KV cache does one token take in "
           "the model below?", "kv_bytes_per_token", f"model={list(MODELS)!r}",
           "answer = tf.kv_cache_bytes(p.model, 1, 1, 'bf16')", "bytes",
           hint="2 (K and V) · L · K kv heads · H · 2 bytes",
           worked="Grouped-query attention caches K (not N) heads per layer, for keys and values.",
           topic="Ch 8"),
        _q("90.8", "AllReduce time", "A ring AllReduce of the array below (GB = 1e9 bytes) over n "
           "devices whose links carry link_gbps GB/s one way: how many seconds (no latency)?",
           "all_reduce_time", "gbytes=[0.5, 1.0, 2.0, 4.0], n=(4, 64), link_gbps=[25.0, 50.0, 100.0, 450.0]",
           "answer = 2 * (p.n - 1) / p.n * p.gbytes * 1e9 / (p.link_gbps * 1e9)", "s",
           hint="2(n-1)/n · V / W", worked="A ReduceScatter and an AllGather, each (n-1)/n · V / W.",
           topic="Ch 4"),
        _q("90.9", "Write it: KV bytes per token", "Write the KV cache bytes per token of a model "
           "with L layers, K kv heads of dimension H and `bytes_per_value` bytes per value.",
           "kv_cache_reference", solution="return 2 * L * K * H * bytes_per_value",
           signature="def kv_bytes(L, K, H, bytes_per_value):",
           cases="[(32, 8, 128, 2), (80, 8, 128, 2), (40, 40, 128, 2), (126, 8, 128, 1)]",
           hint="a key and a value per kv head per layer", topic="Ch 8"),
        _q("90.10", "Write it: ring AllReduce", "Write the time of a ring AllReduce of `nbytes` "
           "over `n` devices with one-way link bandwidth `bytes_per_s` (no latency).",
           "ring_all_reduce_reference", solution="return 2 * (n - 1) / n * nbytes / bytes_per_s",
           signature="def ring_all_reduce(nbytes, n, bytes_per_s):",
           cases="[(1e9, 8, 450e9), (4e9, 64, 50e9), (1e6, 2, 1e9)]",
           hint="two passes around the ring, each (n-1)/n of the array", topic="Ch 4"),
    ],
    "91_interview_junior": [
        _q("91.1", "Matmul time", "How long does the bf16 matmul [B, D] x [D, F] take at the "
           "chip's dense peak (seconds)?", "t_math_matmul",
           "accelerator=['h100', 'a100-80gb', 'b200', 'tpu-v5e', 'tpu-v5p', 'tpu-v6e'], B=(256, "
           "8192), D=(1024, 16384), F=(1024, 65536)",
           "answer = 2 * p.B * p.D * p.F / hw.get(p.accelerator).peak_flops_per_s('bf16')", "s",
           hint="2·B·D·F FLOPs over the dense peak", worked="As exercise 1.1.", topic="Ch 1"),
        _q("91.2", "Training FLOPs", "How many FLOPs does training a dense model of n_params "
           "parameters on n_tokens tokens take (the 6ND rule)?", "train_flops_6nd",
           "n_params=[1e9, 8e9, 70e9, 405e9], n_tokens=[1e12, 2e12, 15e12]",
           "answer = 6 * p.n_params * p.n_tokens", "FLOPs",
           hint="2 FLOPs per parameter per token forward, 4 backward",
           worked="Forward 2N per token, backward 4N: 6ND.", topic="Ch 5"),
        _q("91.3", "Training memory", "Bytes of weights, gradients and Adam state in mixed "
           "precision for n_params parameters on one device (no sharding)?", "model_state_bytes",
           "n_params=[1e9, 3e9, 7e9, 13e9]", "answer = 16 * p.n_params", "bytes",
           hint="16 bytes per parameter", worked="2 + 2 + 12 = 16 bytes per parameter.",
           topic="Ch 6"),
        _q("91.4", "KV cache", "Bytes of bf16 KV cache for B sequences of S tokens of the model "
           "below?", "kv_cache_total", f"model={list(MODELS)!r}, B=(1, 64), S=(1024, 32768)",
           "answer = tf.kv_cache_bytes(p.model, p.B, p.S, 'bf16')", "bytes",
           hint="per-token bytes times B·S", worked="2·L·K·H·2 bytes per token, times B·S.",
           topic="Ch 8"),
        _q("91.5", "Weight read time", "A decode step reads every bf16 weight once. How long does "
           "that take for the model below split over n chips (seconds)?", "weight_read_time",
           "model=['llama3-8b', 'llama3-70b', 'llama3-405b'], accelerator=['h100', 'h200', "
           "'b200', 'tpu-v5p'], n=(1, 16)",
           "answer = 2 * tf.n_params(p.model) / (p.n * hw.get(p.accelerator).hbm_bytes_per_s)", "s",
           hint="2 bytes per parameter over n·W_hbm", worked="N·2 bytes / (n · W_hbm).",
           topic="Ch 8"),
        _q("91.6", "Pipeline bubble", "With pp stages and m micro-batches in 1F1B, what share of "
           "the step is idle (a fraction)?", "bubble", "pp=(2, 32), m=(4, 16)",
           "answer = (p.pp - 1) / (p.m + p.pp - 1)", "", ", rtol=1e-4", hint="(p-1)/(m+p-1) of the step",
           worked="p-1 ramp and drain slots in m+p-1; Megatron's (p-1)/m measures against compute.",
           topic="Parallelism"),
        _q("91.7", "Write it: matmul FLOPs", "Write the FLOPs of [B, D] x [D, F].",
           "matmul_flops_reference", solution="return 2 * B * D * F",
           signature="def matmul_flops(B, D, F):",
           cases="[(1, 2, 3), (4096, 8192, 28672), (8, 16, 32)]",
           hint="a multiply and an add per term", topic="Ch 1"),
        _q("91.8", "Write it: 6ND", "Write the training FLOPs of n_params parameters on n_tokens "
           "tokens.", "six_nd_reference", solution="return 6 * n_params * n_tokens",
           signature="def train_flops(n_params, n_tokens):",
           cases="[(8e9, 15e12), (70e9, 2e12), (1e6, 1e6)]", hint="6ND", topic="Ch 5"),
    ],
    "92_interview_mid": [
        _q("92.1", "MFU", "The model below trains at tokens_per_s tokens/s on n chips (T = 4096). "
           "What is its MFU (a fraction)?", "mfu",
           "model=['llama3-8b', 'llama3-70b'], accelerator=['h100', 'a100-80gb'], n=(64, 1024), "
           "tokens_per_s=(2e5, 2e6)",
           "answer = tf.mfu(p.model, p.tokens_per_s, p.n, p.accelerator, 4096)", "",
           hint="model FLOPs per token (6N plus attention) times tokens/s over n·C",
           worked="MFU = FLOPs per token · tokens/s / (n · dense peak).", topic="Ch 7"),
        _q("92.2", "Training days", "How many days does training n_params parameters on n_tokens "
           "tokens take on n chips at the MFU below (6ND)?", "train_days",
           "n_params=[8e9, 70e9, 405e9], n_tokens=[2e12, 15e12], accelerator=['h100', 'b200'], "
           "n=[1024, 4096, 16384], mfu=[0.3, 0.4, 0.5]",
           "answer = 6 * p.n_params * p.n_tokens / (p.n * "
           "hw.get(p.accelerator).peak_flops_per_s('bf16') * p.mfu) / 86400",
           "days", hint="6ND / (n · C · MFU), then seconds to days",
           worked="t = 6ND / (n · C · MFU): the dense peak, and the MFU you can defend.",
           topic="Ch 7"),
        _q("92.3", "ZeRO", "Model-state bytes per device for n_params parameters, mixed precision "
           "Adam, data parallelism over dp ranks with ZeRO stage zero?", "zero_bytes",
           "n_params=[7e9, 13e9, 70e9], dp=(8, 512), zero=[1, 2, 3]",
           "answer = mem.model_state_bytes(p.n_params, p.dp, p.zero).total", "bytes",
           hint="stage 1 shards the optimizer, 2 also gradients, 3 also weights",
           worked="(2 + 2 + 12)Ψ with the sharded parts divided by dp.", topic="Ch 6"),
        _q("92.4", "Gradient AllReduce", "Data parallelism over dp GPUs: how long does the ring "
           "AllReduce of n_params bf16 gradients take at link_gbps GB/s one way (seconds)?",
           "grad_all_reduce_time", "n_params=[1e9, 8e9, 70e9], dp=(8, 1024), link_gbps=[50.0, 450.0]",
           "answer = 2 * (p.dp - 1) / p.dp * 2 * p.n_params / (p.link_gbps * 1e9)", "s",
           hint="2(n-1)/n · 2 bytes · N / W", worked="The DP bottleneck: it grows with N, not "
           "with the batch; it overlaps with the backward pass.", topic="Parallelism"),
        _q("92.5", "Decode step", "Roofline lower bound of one decode step (seconds) of the model "
           "below, batch B, context S, split over n chips?", "decode_step",
           "model=['llama3-8b', 'llama3-70b'], B=(1, 256), S=(1024, 16384), accelerator=['h100', "
           "'h200'], n=[1, 2, 4, 8]",
           "answer = inf.decode_step_time(p.model, p.B, p.S, p.accelerator, p.n)", "s",
           hint="max(FLOPs / n·C, (weights + KV) bytes / n·W_hbm)",
           worked="Small batches are memory-bound: the weights and the KV cache dominate.",
           topic="Ch 8"),
        _q("92.6", "KV capacity", "How many tokens of bf16 KV cache fit beside the model's bf16 "
           "weights on n chips?", "cached_tokens",
           "model=['llama3-8b', 'llama3-70b'], accelerator=['h100', 'h200'], n=[2, 4, 8]",
           "answer = inf.max_cached_tokens(p.model, p.accelerator, p.n)", "tokens",
           hint="(n·HBM - weights) / KV bytes per token",
           worked="What is left after the weights, over the per-token KV bytes.", topic="Ch 8"),
        _q("92.7", "Write it: ZeRO", "Write the model-state bytes per device (mixed precision "
           "Adam, 16 bytes/param) for ZeRO stage `zero` over `dp` ranks.", "zero_reference",
           solution="p, g, o = 2 * n_params, 2 * n_params, 12 * n_params\n"
           "return (p / dp if zero >= 3 else p) + (g / dp if zero >= 2 else g) + (o / dp if zero "
           ">= 1 else o)",
           signature="def zero_bytes(n_params, dp, zero):",
           cases="[(7e9, 8, 0), (7e9, 8, 1), (7e9, 64, 2), (70e9, 512, 3)]",
           hint="optimizer (12), gradients (2), weights (2) sharded by stage", topic="Ch 6"),
        _q("92.8", "Write it: bubble", "Write the idle share of a 1F1B step with pp stages and m "
           "micro-batches.", "bubble_reference", solution="return (pp - 1) / (m + pp - 1)",
           signature="def bubble(pp, m):", cases="[(4, 4), (8, 32), (16, 128), (1, 8)]",
           hint="(p-1)/(m+p-1)", topic="Parallelism"),
    ],
    "93_interview_senior": [
        _q("93.1", "Chips to serve", "Fewest chips whose HBM holds the model's bf16 weights plus "
           "the bf16 KV cache of B sequences of S tokens (no other overhead)?", "chips_for_weights",
           "model=['llama3-70b', 'llama3-405b'], accelerator=['h100', 'h200', 'b200', "
           "'tpu-v5p'], B=(1, 64), S=(2048, 32768)",
           "answer = math.ceil((inf.weight_bytes_read(p.model) + tf.kv_cache_bytes(p.model, p.B, "
           "p.S)) / hw.get(p.accelerator).hbm_bytes)",
           "chips", ", rtol=0", hint="round up (weights + KV) / HBM per chip",
           worked="Then round up to a shape the parallelism allows (a power of two for TP).",
           topic="Ch 8"),
        _q("93.2", "Serving throughput", "Roofline output tokens/s of an n-chip server decoding "
           "batch B at context S?", "decode_tokens_per_s",
           "model=['llama3-70b'], accelerator=['h100', 'h200'], n=[4, 8], B=(1, 256), S=(2048, "
           "16384)",
           "answer = p.B / inf.decode_step_time(p.model, p.B, p.S, p.accelerator, p.n)", "tokens/s",
           hint="B tokens per decode step", worked="B / step time; the step is memory-bound until "
           "B approaches the critical batch.", topic="Ch 8"),
        _q("93.3", "Hierarchical AllReduce", "AllReduce of gbytes GB over n H100s in nodes of 8 "
           "(NVLink inside, the default NIC per GPU of hw.cluster outside): seconds, with the "
           "library's "
           "hierarchical schedule?", "hierarchical_all_reduce",
           "gbytes=[1.0, 4.0, 16.0], n=[16, 64, 256, 1024]",
           "answer = co.hierarchical_time('all-reduce', p.gbytes * 1e9, hw.cluster('h100', p.n), "
           "p.n).total",
           "s", hint="ReduceScatter in the node, AllReduce across nodes on 1/8 of the data, "
           "AllGather in the node", worked="The inter-node phase dominates: 50 GB/s per GPU "
           "against 450 GB/s of NVLink.", topic="Ch 4"),
        _q("93.4", "MFU ceiling of a pipeline", "A plan reaches MFU mfu without pipelining. With "
           "pp stages, m micro-batches and v virtual stages (interleaved 1F1B), what is its MFU "
           "ceiling?", "pp_mfu_ceiling", "mfu=[0.4, 0.5, 0.6], pp=(2, 16), m=(4, 16), v=[1, 2, 4]",
           "answer = p.mfu * (1 - (p.pp - 1) / (p.v * p.m + p.pp - 1))", "", ", rtol=1e-4",
           hint="1 - (p-1)/(v·m + p-1) of the step does work",
           worked="Interleaving divides the bubble by v, at the cost of v times more sends.",
           topic="Parallelism"),
        _q("93.5", "Throughput target", "What cluster tokens/s trains on n_tokens tokens in the "
           "days below?", "tokens_per_s_needed", "n_tokens=[2e12, 15e12], days=[30, 60, 90]",
           "answer = p.n_tokens / (p.days * 86400)", "tokens/s", hint="tokens over seconds",
           worked="Tokens over seconds; then divide by the tokens/s one chip sustains to size "
           "the cluster.", topic="Ch 7"),
        _q("93.6", "Cluster size", "How many chips at MFU mfu train n_params parameters on "
           "n_tokens tokens (6ND) in the days below?", "chips_needed",
           "n_params=[70e9, 405e9], n_tokens=[15e12], accelerator=['h100', 'b200'], mfu=[0.35, "
           "0.45], days=[30, 90]",
           "answer = 6 * p.n_params * p.n_tokens / "
           "(hw.get(p.accelerator).peak_flops_per_s('bf16') * p.mfu * p.days * 86400)",
           "chips", hint="6ND / (C · MFU · seconds)",
           worked="Dense peak only; a real plan rounds up to the parallelism's shape.",
           topic="Ch 7"),
        _q("93.7", "Write it: decode step", "Write the roofline decode-step time of a bf16 model of "
           "n_params parameters at batch B (KV cache left out).", "decode_step_reference",
           solution="return max(2 * n_params * B / flops_per_s, 2 * n_params / bytes_per_s)",
           signature="def decode_step(n_params, B, bytes_per_s, flops_per_s):",
           cases="[(70e9, 1, 3.35e12, 989.4e12), (8e9, 512, 3.35e12, 989.4e12), (405e9, 64, 4.8e12, 989.4e12)]",
           hint="max of compute (2NB FLOPs) and weight reads (2N bytes)", topic="Ch 8"),
        _q("93.8", "Write it: MFU", "Write the MFU (6N FLOPs per token) of a model of n_params "
           "parameters at tokens_per_s on n_devices chips of peak flops_per_s.", "mfu_reference",
           solution="return 6 * n_params * tokens_per_s / (n_devices * flops_per_s)",
           signature="def mfu(n_params, tokens_per_s, n_devices, flops_per_s):",
           cases="[(70e9, 1e6, 1024, 989.4e12), (8e9, 5e5, 64, 312e12)]",
           hint="model FLOPs per second over the cluster's dense peak", topic="Ch 7"),
    ],
}


# ---- System design: worked answers from the library --------------------------------------------

def design_training(model="llama3-70b", accelerator="h100", n=1024, days=30, mfu=0.40,
                    plan=None, T=8192, global_batch=512) -> dict:
    """A worked answer to "train ``model`` on ``n`` chips in ``days`` days": budget, memory, plan.

    The MFU is an assumption (Llama 3 405B reported 38-43% on H100s); the library's planner
    (``scaling_lib.planner.search``) is not written yet, so one hand-picked plan is checked for fit.
    """
    cfg = models.get(model)
    n_params = transformer.n_params(cfg)
    plan = plan or ParallelPlan(dp=n // 32, tp=8, pp=4, zero=1, recompute="selective",
                                sequence_parallel=True, micro_batch=1)
    if plan.world_size != n:
        raise ValueError(f"plan.world_size={plan.world_size} must equal n={n}")
    seconds = days * DAY
    flops = n * hardware.get(accelerator).peak_flops_per_s("bf16") * mfu * seconds
    tokens = flops / transformer.six_n_flops(n_params, 1)
    mem = memory.training_memory(cfg, plan, global_batch, T)
    fits, why = memory.check_fit(mem, accelerator)
    return {"n_params": n_params, "flops": flops, "tokens": tokens,
            "tokens_per_param": tokens / n_params, "tokens_per_s": tokens / seconds,
            "plan": plan, "memory": mem, "fits": fits, "why": why,
            "unsharded_states": memory.model_state_bytes(n_params).total}


def design_serving(model="llama3-70b", accelerator="h100", tpot=0.050, batch=32, context=8192,
                   sizes=(1, 2, 4, 8, 16, 32)) -> dict:
    """A worked answer to "serve ``model`` at ``tpot`` seconds per output token": chips and speed.

    The smallest n in ``sizes`` whose HBM holds the bf16 weights and the batch's KV cache and
    whose roofline decode step is within ``tpot``; the step bound ignores communication (a real
    server runs slower), and the serving estimator (``scaling_lib.serving``) is not written yet.
    """
    cfg = models.get(model)
    acc = hardware.get(accelerator)
    need = inference.weight_bytes_read(cfg) + transformer.kv_cache_bytes(cfg, batch, context)
    rows = []
    for n in sizes:
        step = inference.decode_step_time(cfg, batch, context, accelerator, n)
        rows.append({"chips": n, "fits": bool(need <= n * acc.hbm_bytes), "step": step,
                     "meets": bool(step <= tpot and need <= n * acc.hbm_bytes)})
    best = next((r for r in rows if r["meets"]), None)
    return {"need_bytes": need, "rows": rows, "best": best, "min_for_memory":
            math.ceil(need / acc.hbm_bytes)}


# ---- Conceptual questions: model answers and rubrics -------------------------------------------

def _llama3_mfus() -> str:
    from . import published
    mfus = sorted(r.mfu for r in published.RUNS.values() if r.name.startswith("llama3-405b"))
    return f"{mfus[0]:.0%} to {mfus[-1]:.0%}"


def _run_16k():
    """Llama 3 405B's largest published run (Table 4 of the Llama 3 paper)."""
    from . import published
    return max((r for r in published.RUNS.values() if r.name.startswith("llama3-405b")),
               key=lambda r: (r.n_devices, r.mfu))


def _frontier_days() -> float:
    """Llama 3 405B's training FLOPs on its 16K-GPU run at that run's MFU: days of compute."""
    from . import published
    run = _run_16k()
    return float(transformer.train_time(published.LLAMA3_405B_TRAIN_FLOPS, run.n_devices,
                                        run.accelerator, run.mfu) / DAY)


def concepts() -> dict:
    """{key: (question, model answer, rubric)}; numbers in the answers come from the library."""
    from . import published

    h = hardware.get("h100")
    ib = hardware.cluster("h100", 16).inter_node.bytes_per_s
    run = next(r for r in published.RUNS.values() if r.name.startswith("llama3-405b"))
    return {
        "parallelism": (
            "Explain data, model (tensor) and pipeline parallelism. When do you need each?",
            "Data parallelism copies the model and splits the batch; it needs the model states "
            "to fit (or ZeRO/FSDP to shard them) and an AllReduce of the gradients every step. "
            "Tensor parallelism splits each matmul over devices; it communicates inside every "
            "layer, so it stays within the fast scale-up domain (a node of 8 GPUs, a TPU slice). "
            "Pipeline parallelism splits the layers into stages; it sends only activations "
            "between neighbours but leaves a bubble of (p-1)/(m+p-1) of the step idle. Large runs "
            f"combine all three (Llama 3 405B on {run.n_devices:,} GPUs: TP {run.tp} inside a node, "
            f"PP {run.pp}, DP {run.dp} across; {run.source}).",
            ["states what is split in each (batch / matmuls / layers)",
             "names the communication of each (AllReduce of grads / per-layer collectives / "
             "point-to-point activations)", "places TP inside the scale-up domain and says why",
             "mentions the pipeline bubble and micro-batches",
             "mentions ZeRO/FSDP as the memory fix for DP"]),
        "nvlink": (
            "What are NVLink and NVSwitch, and why do they matter for training?",
            f"NVLink is NVIDIA's GPU-to-GPU link: on H100, 18 links give "
            f"{fmt_bytes_per_s(h.link_bytes_per_s)} each way ({fmt_bytes_per_s(2 * h.link_bytes_per_s)}"
            " counting both directions, the datasheet's figure). NVSwitch chips connect every GPU "
            "of a node (8 in an HGX/DGX box, 72 in an NVL72 rack) at full bandwidth, so any pair "
            "talks at full speed and collectives inside the node are fast. Between nodes, "
            f"traffic goes over InfiniBand or Ethernet NICs, {fmt_bytes_per_s(ib)} per GPU: "
            f"{h.link_bytes_per_s / ib:.0f}x slower, which is why tensor parallelism stays inside "
            "the node.",
            ["NVLink = point-to-point GPU link; NVSwitch = the switch joining all GPUs of a node",
             "gives bandwidth one-way vs both ways correctly",
             "compares with the inter-node network (an order of magnitude slower)",
             "links this to where TP vs DP/PP go"]),
        "sync_sgd": (
            "Why do large runs use synchronous SGD rather than asynchronous updates?",
            "Synchronous data parallelism computes exactly the gradient of the global batch, so "
            "training behaves like one big device: the same hyper-parameters and convergence, "
            "reproducible. Asynchronous updates apply stale gradients (computed on old weights), "
            "which hurts convergence at scale and makes results hard to reproduce. The cost of "
            "synchrony (waiting for the slowest worker and for the AllReduce) is hidden by "
            "overlapping communication with the backward pass and by reliable hardware.",
            ["equivalence to a single large batch", "staleness of async gradients",
             "straggler/communication cost and how it is hidden (overlap)"]),
        "dp_bottleneck": (
            "Where is the bottleneck of data parallelism?",
            "Two places. Memory: every replica holds the full model states, 16 bytes per "
            f"parameter in mixed precision, so an {fmt_bytes(h.hbm_bytes)} GPU holds at most "
            f"{memory.max_trainable_params('h100') / 1e9:.0f}B parameters before any activation "
            "(ZeRO/FSDP shard them). Communication: the gradient AllReduce moves about 2x the "
            "gradient bytes per device per step whatever the batch, and over the slow inter-node "
            "network; it is hidden only while the per-device batch is large enough for the "
            "backward pass to cover it. The global batch cannot grow forever (critical batch "
            "size of the optimisation), which caps DP.",
            ["model-state memory per replica (16 B/param)", "gradient AllReduce volume independent "
             "of batch", "overlap with backward and when it stops hiding",
             "global batch size limit"]),
        "frontier_time": (
            "How long does a frontier pre-training run take?",
            f"Months. Llama 3 405B: {published.LLAMA3_405B_TRAIN_FLOPS:.2g} FLOPs on "
            f"{_run_16k().n_devices:,} H100s at {_run_16k().mfu:.0%} MFU is "
            f"{_frontier_days():.0f} days of pure compute (t = FLOPs / (n · C · MFU)); the real "
            "run took longer with failures and restarts. Runs are sized so training ends in a "
            "few months: longer and the hardware and the ideas are outdated.",
            ["order of magnitude: one to a few months", "derives it from FLOPs / (n · C · MFU)",
             "mentions failures/restarts and why runs are not longer"]),
    }


def reveal(key: str):
    """The model answer and rubric of conceptual question ``key``, folded (shown when opened)."""
    from IPython.display import Markdown

    table = concepts()
    if key not in table:
        raise ValueError(f"unknown question {key!r}; valid choices: {', '.join(table)}")
    _, answer, rubric = table[key]
    items = "\n".join(f"- [ ] {r}" for r in rubric)
    return Markdown(f"<details><summary>Model answer and rubric (open after answering)</summary>"
                    f"\n\n{answer}\n\n**Score yourself:** one point per item.\n\n{items}\n\n"
                    "</details>")


# ---- Quick multiple-choice rounds --------------------------------------------------------------

def quiz(seed: int, level: str = "90_numbers", n: int = 5) -> list[dict]:
    """A multiple-choice round: ``n`` numeric questions of ``level`` drawn from ``seed``, each with
    its right answer and the common wrong ones (the answer key's WRONG_METHODS) shuffled.

    >>> q = quiz(0)[0]
    >>> q["options"][q["correct"]] == q["answer"]
    True
    """
    from .grading import draw
    from .keys import drills as key

    if level not in QUESTIONS:
        raise ValueError(f"level={level!r}; valid choices: {', '.join(QUESTIONS)}")
    bank = [q for q in QUESTIONS[level] if not q.signature and q.name in key.WRONG_METHODS_ALL]
    rng = np.random.default_rng(seed)
    out = []
    for q in [bank[i] for i in rng.permutation(len(bank))[:n]]:
        p = eval(f"draw(seed, {q.name!r}, {q.draw})", {"draw": draw, "seed": seed})
        right = getattr(key, q.key)(p)
        options = [right] + [fn(p) for fn in key.WRONG_METHODS_ALL[q.name].values()]
        options = list(dict.fromkeys(float(o) for o in options))
        order = rng.permutation(len(options))
        shuffled = [options[i] for i in order]
        out.append({"name": q.name, "question": q.prompt, "params": p, "answer": float(right),
                    "options": shuffled, "correct": shuffled.index(float(right)), "unit": q.unit})
    return out


__all__ = ["QUESTIONS", "Question", "LEVELS", "MINUTES", "CHIPS", "MODELS", "chip_rows",
           "recipe_rows", "model_rows", "collective_rows", "design_training", "design_serving",
           "concepts", "reveal", "quiz"]


# ---- Worked answers as Markdown (computed, for the notebooks) ----------------------------------

def training_answer(**kw) -> str:
    """The worked answer of "train a 70B model on 1,024 H100s in 30 days", as Markdown."""
    d = design_training(**kw)
    p, mem = d["plan"], d["memory"]
    parts = ", ".join(f"{k} {fmt_bytes(float(v))}" for k, v in mem.items())
    return (f"**Budget.** {kw.get('n', 1024):,} chips × dense peak × MFU "
            f"{kw.get('mfu', 0.40):.0%} × {kw.get('days', 30)} days = {fmt_flops(d['flops'])}. "
            f"At 6N = {fmt_flops(transformer.six_n_flops(d['n_params'], 1))} per token that trains "
            f"on {d['tokens'] / 1e12:.1f}T tokens ({d['tokens_per_param']:.0f} tokens per "
            f"parameter; Hoffmann et al. 2022 find about 20 compute-optimal), i.e. {d['tokens_per_s'] / 1e6:.2f}M "
            "tokens/s for the whole cluster.\n\n"
            f"**Memory.** Unsharded, the model states alone are "
            f"{fmt_bytes(d['unsharded_states'])} (16 bytes per parameter): no single GPU holds "
            f"them. The plan dp={p.dp}, tp={p.tp}, pp={p.pp}, ZeRO-{p.zero}, selective "
            f"recomputation, sequence parallelism needs per GPU: {parts}; total "
            f"{fmt_bytes(float(mem.total))}. {'It fits' if d['fits'] else 'It does not fit'}: "
            f"{d['why']}.\n\n"
            f"**MFU.** {kw.get('mfu', 0.40):.0%} is an assumption taken from published runs of "
            f"this size (Llama 3 405B reported {_llama3_mfus()} on H100s); the library's step estimator and planner are not written "
            "yet, so this page does not search plans or predict the MFU. Say in the interview "
            "which overheads eat the rest: the pipeline bubble, exposed DP and TP communication, "
            "recomputation, and kernels below peak.")


def serving_answer(**kw) -> str:
    """The worked answer of "serve Llama 3 70B at 50 ms per token: how many chips?", as Markdown."""
    d = design_serving(**kw)
    rows = [{"chips": r["chips"], "HBM holds it": "yes" if r["fits"] else "no",
             "decode step (roofline)": fmt_seconds(r["step"]),
             "meets the target": "yes" if r["meets"] else "no"} for r in d["rows"]]
    from .nbtools import table

    best = d["best"]
    tpot = kw.get("tpot", 0.050)
    end = (f"The smallest that meets {fmt_seconds(tpot)} per token is **{best['chips']} chips** "
           f"({best['chips'] and kw.get('batch', 32) / best['step']:.0f} tokens/s for the server)"
           if best else "None of these sizes meets the target.")
    return (f"Weights plus the KV cache of {kw.get('batch', 32)} sequences of "
            f"{kw.get('context', 8192):,} tokens need {fmt_bytes(d['need_bytes'])}: at least "
            f"{d['min_for_memory']} chips for memory alone.\n\n" + table(rows) + "\n\n" + end +
            ". The bound leaves out the tensor-parallel AllReduce of every layer and the "
            "scheduler's overhead, so a real server needs margin; a power of two for TP.")
