"""Answer keys of the interview drills (solutions/90-93): thin calls into the library.

Where a drill asks what a chapter's exercise asks, it calls that chapter's key, so a changed
constant changes the chapter, its exercises and the drill together. ``WRONG_METHODS`` are the
common wrong answers (bytes vs bits, GB vs GiB, one-way vs both ways, 8 vs 16 bytes per parameter,
the sparsity FLOP/s): the drills show them as distractors and tests/test_wrong_methods.py checks
that each one FAILs.
"""

from __future__ import annotations

import math

from ... import collectives, hardware, inference, memory, models, roofline, serving, transformer
from ...parallelism import pipeline_bubble_fraction
from ...units import DAY
from ..grading.tables import with_messages
from . import rooflines

_GIB_PER_GB = 2**30 / 1e9

# ---- 90: numbers every LLM engineer should know -----------------------------------------------


def peak_flops(p):
    """90.1: dense bf16 peak FLOP/s of p.accelerator."""
    return hardware.get(p.accelerator).peak_flops_per_s("bf16")


def hbm_bytes(p):
    """90.2: HBM capacity of p.accelerator, bytes."""
    return hardware.get(p.accelerator).hbm_bytes


def hbm_bytes_per_s(p):
    """90.3: HBM bandwidth of p.accelerator, bytes/s."""
    return hardware.get(p.accelerator).hbm_bytes_per_s


def link_bytes_per_s(p):
    """90.4: scale-up (NVLink / ICI) bandwidth of p.accelerator, one-way, all links, bytes/s."""
    return hardware.get(p.accelerator).link_bytes_per_s


def bytes_per_param(p):
    """90.5: training bytes per parameter (weights, gradients, optimizer) of p.recipe with Adam."""
    return memory.bytes_per_param(p.recipe, "adam").total


critical_batch = rooflines.critical_batch          # 90.6, as exercise 1.3


def kv_bytes_per_token(p):
    """90.7: bf16 KV cache bytes per token of p.model."""
    return transformer.kv_cache_bytes(p.model, 1, 1, "bf16")


def all_reduce_time(p):
    """90.8: ring AllReduce of p.gbytes GB over p.n devices at p.link_gbytes_per_s GB/s one-way each."""
    return collectives.all_reduce_time(p.gbytes * 1e9, p.n, p.link_gbytes_per_s * 1e9, topology="ring")


def kv_cache_reference(L, K, H, bytes_per_value):
    """90.9 reference: KV bytes per token of a model with L layers, K kv heads of dim H."""
    cfg = models.TransformerConfig(L=L, D=K * H, F=4 * K * H, N=K, K=K, H=H, V=32000)
    return transformer.kv_cache_bytes(cfg, 1, 1, {1: "int8", 2: "bf16", 4: "fp32"}[bytes_per_value])


def ring_all_reduce_reference(nbytes, n, bytes_per_s):
    """90.10 reference: ring AllReduce time, one-way per-device bandwidth, no latency."""
    return collectives.all_reduce_time(nbytes, n, bytes_per_s, topology="ring")


# ---- 91: mock interview, level 1 -------------------------------------------------------------

t_math_matmul = rooflines.t_math_matmul            # 91.1, as exercise 1.1


def train_flops_6nd(p):
    """91.2: training FLOPs of p.n_params parameters on p.n_tokens tokens (6·N·D)."""
    return transformer.six_n_flops(p.n_params, p.n_tokens)


def model_state_bytes(p):
    """91.3: bytes of weights, gradients and Adam state (mixed precision) of p.n_params, unsharded."""
    return memory.model_state_bytes(p.n_params).total


def kv_cache_total(p):
    """91.4: bf16 KV cache bytes of p.model for p.B sequences of p.S tokens."""
    return transformer.kv_cache_bytes(p.model, p.B, p.S, "bf16")


def weight_read_time(p):
    """91.5: seconds to read p.model's bf16 weights once from HBM over p.n chips."""
    return inference.weight_read_time(transformer.n_params(p.model), p.accelerator, p.n)


def bubble(p):
    """91.6: idle share of a 1F1B step with p.pp stages and p.m micro-batches."""
    return pipeline_bubble_fraction(p.pp, p.m)


def matmul_flops_reference(B, D, F):
    """91.7 reference."""
    return roofline.matmul_flops(B, D, F)


def six_nd_reference(n_params, n_tokens):
    """91.8 reference."""
    return transformer.six_n_flops(n_params, n_tokens)


# ---- 92: mock interview, level 2 -------------------------------------------------------------

def mfu(p):
    """92.1: MFU of p.model at p.tokens_per_chip tokens/s per chip on p.n chips, T = 4096."""
    return transformer.mfu(p.model, p.tokens_per_chip * p.n, p.n, p.accelerator, 4096)


def train_days(p):
    """92.2: days to train p.n_params on p.n_tokens (6ND) on p.n chips at MFU p.mfu."""
    flops = transformer.six_n_flops(p.n_params, p.n_tokens)
    return transformer.train_time(flops, p.n, p.accelerator, p.mfu) / DAY


def zero_bytes(p):
    """92.3: model-state bytes per device, p.n_params, dp = p.dp, ZeRO stage p.zero."""
    return memory.model_state_bytes(p.n_params, p.dp, p.zero).total


def grad_all_reduce_time(p):
    """92.4: ring AllReduce of p.n_params bf16 gradients over p.dp GPUs at p.link_gbytes_per_s GB/s."""
    return collectives.all_reduce_time(2 * p.n_params, p.dp, p.link_gbytes_per_s * 1e9)


def decode_step(p):
    """92.5: one decode step of p.model, batch p.B, context p.S, tensor parallel over p.n chips.

    The model of record of the time per output token (Chapter 21, exercise 21.2): the roofline
    of the split step plus the 2L + 1 all-reduces of tensor parallelism."""
    return float(inference.decode_step_time(p.model, p.B, p.S, p.accelerator, p.n, tp=p.n))


def _roofline_decode_step(p):
    """92.5's step without its all-reduces: Chapter 8's roofline bound (a listed mistake)."""
    return float(inference.decode_step_time(p.model, p.B, p.S, p.accelerator, p.n))


def cached_tokens(p):
    """92.6: tokens of bf16 KV cache that fit beside p.model's weights on p.n chips."""
    return inference.max_cached_tokens(p.model, p.accelerator, p.n)


def zero_reference(n_params, dp, zero):
    """92.7 reference."""
    return memory.model_state_bytes(n_params, dp, zero).total


def bubble_reference(pp, m):
    """92.8 reference."""
    return pipeline_bubble_fraction(pp, m)


# ---- 93: mock interview, level 3 -------------------------------------------------------------

def _usable(accelerator):
    """The chip with its HBM set to what a run can fill (``memory_capacity_bytes``: the
    driver-reported total where measured), so that ``serving.min_devices`` compares with it."""
    acc = hardware.get(accelerator)
    return hardware.with_changes(acc, hbm_bytes=acc.memory_capacity_bytes)


def chips_for_weights(p):
    """93.1: fewest chips of p.accelerator whose usable memory holds every bf16 weight of p.model
    (the input embedding too: it must be resident) and the bf16 KV cache of p.B x p.S tokens.

    ``serving.min_devices`` (every parameter, weights plus cache) on the chip's
    ``memory_capacity_bytes``. Not ``inference.weight_bytes_read``: that counts the bytes a
    decode step reads, which leaves the embedding table out."""
    kv = transformer.kv_cache_bytes(p.model, p.B, p.S, "bf16")
    return serving.min_devices(p.model, _usable(p.accelerator), dtype="bf16", kv_bytes=kv)


def decode_tokens_per_s(p):
    """93.2: output tokens/s of a p.n-chip tensor-parallel server decoding batch p.B at context
    p.S: B over the decode step of the model of record (all-reduces included, Chapter 21)."""
    return p.B / decode_step(p)


def hierarchical_all_reduce(p):
    """93.3: AllReduce of p.gbytes GB over p.n H100s (nodes of 8, NVLink then InfiniBand)."""
    c = hardware.cluster("h100", p.n)
    return collectives.hierarchical_time("all-reduce", p.gbytes * 1e9, c, p.n).total


def pp_mfu_ceiling(p):
    """93.4: MFU ceiling p.mfu·(1 - bubble) with p.pp stages, p.m micro-batches, v = p.v."""
    return p.mfu * (1 - pipeline_bubble_fraction(p.pp, p.m, p.v))


def tokens_per_s_needed(p):
    """93.5: cluster tokens/s to train on p.n_tokens tokens in p.days days."""
    return p.n_tokens / (p.days * DAY)


def chips_needed(p):
    """93.6: chips of p.accelerator at MFU p.mfu to train p.n_params on p.n_tokens in p.days."""
    flops = transformer.six_n_flops(p.n_params, p.n_tokens)
    per_chip = transformer.train_time(flops, 1, p.accelerator, p.mfu)
    return per_chip / (p.days * DAY)


def goodput_reference(interval, ckpt_time, mtbf, restart_time):
    """93.7 reference: share of wall-clock time that makes progress, checkpointing every
    ``interval`` seconds of work (first order, clipped at 0): ``reliability.goodput``."""
    from ... import reliability
    return reliability.goodput(interval, ckpt_time, mtbf, restart_time=restart_time)


def pd_ratio_reference(prefill_time, decode_step, batch, gen_len):
    """93.8 reference: prefill servers per decode server so that neither waits."""
    return float(serving.prefill_decode_ratio(prefill_time, decode_step, batch, gen_len))


# ---- 90.11-90.14: the errata drills (claims heard in interviews, and their correction) -------

def kv_tokens_on_h100(p):
    """90.11: tokens of bf16 KV cache beside p.model's bf16 weights on p.n H100 SXM (datasheet HBM)."""
    return float(inference.max_cached_tokens(p.model, "h100", p.n))


def pcie_copy_time(p):
    """90.12: seconds to copy p.gbytes GB host-to-GPU over a PCIe gen p.gen x16 link, one way."""
    return p.gbytes * 1e9 / float(collectives.pcie_bytes_per_s(p.gen, 16))


def peer_weight_read_time(p):
    """90.13: decode step (weights only) of p.model on one A100-80GB that reads what does not fit
    from its NVLink neighbour: exercise 22.12's key."""
    from . import case_serving_llama3
    return float(case_serving_llama3.peer_read_time(p))


def dp_max_params(p):
    """90.14: largest model plain data parallelism trains on one p.accelerator (mixed-precision
    Adam, model states only, the datasheet's HBM)."""
    return float(memory.max_trainable_params(p.accelerator))


# ---- 93.9-93.11: level 3 --------------------------------------------------------------------

def checkpoint_interval(p):
    """93.9: Young's checkpoint interval for a job of p.n GPUs of MTBF p.mtbf_hours each and a
    checkpoint that stalls p.ckpt_s seconds."""
    from ... import reliability
    return reliability.young_daly_interval(p.ckpt_s, reliability.job_mtbf(p.mtbf_hours * 3600,
                                                                          p.n))


def speculative(p):
    """93.10: expected speed-up of speculative decoding (alpha, gamma, draft cost)."""
    return float(serving.speculative_speedup(p.alpha, p.gamma, p.draft_cost))


def experts_touched(p):
    """93.12: expected distinct experts B tokens read in one MoE layer (uniform routing)."""
    return float(inference.expected_experts(p.E, p.k, p.B))


def kv_per_gpu(p):
    """93.11: bf16 KV cache bytes per GPU of p.model tensor parallel over p.tp, p.B x p.S tokens."""
    return float(serving.kv_cache_bytes_per_device(p.model, p.tp, p.B, p.S, "bf16"))


# ---- The common wrong answers (distractors) ---------------------------------------------------

def _acc(p):
    return hardware.get(p.accelerator)


WRONG_METHODS_ALL = {
    "90.1": {"the sparsity figure (2x dense)": lambda p: 2 * peak_flops(p),
             "TFLOP/s written as FLOP/s": lambda p: peak_flops(p) / 1e12},
    "90.2": {"GiB read as GB": lambda p: hbm_bytes(p) * _GIB_PER_GB,
             "GB read as GiB": lambda p: hbm_bytes(p) / _GIB_PER_GB},
    "90.3": {"bits instead of bytes": lambda p: 8 * hbm_bytes_per_s(p),
             "TB/s written as bytes/s": lambda p: hbm_bytes_per_s(p) / 1e12},
    "90.4": {"both directions added": lambda p: 2 * link_bytes_per_s(p),
             "bits instead of bytes": lambda p: 8 * link_bytes_per_s(p)},
    "90.5": {"8 bytes per parameter (bf16 Adam, no fp32 master)": lambda p: 8 if p.recipe != "bf16" else 16,
             "weights only (2 bytes)": lambda p: 2},
    "90.6": {"the sparsity peak": lambda p: 2 * critical_batch(p)},
    "90.7": {"K only, no V": lambda p: kv_bytes_per_token(p) / 2,
             "N query heads instead of K kv heads":
             lambda p: kv_bytes_per_token(p) * models.get(p.model).N / models.get(p.model).K},
    "90.8": {"both directions of the link": lambda p: all_reduce_time(p) / 2,
             "an AllGather only": lambda p: all_reduce_time(p) / 2,
             "V/W, no 2(n-1)/n": lambda p: p.gbytes / p.link_gbytes_per_s},
    "91.2": {"forward only (2ND)": lambda p: train_flops_6nd(p) / 3},
    "91.3": {"8 bytes per parameter": lambda p: 8 * p.n_params,
             "weights only": lambda p: 2 * p.n_params},
    "91.4": {"GiB vs GB": lambda p: kv_cache_total(p) * _GIB_PER_GB,
             "K only, no V": lambda p: kv_cache_total(p) / 2},
    "91.5": {"fp32 weights": lambda p: 2 * weight_read_time(p),
             "one chip": lambda p: weight_read_time(p) * p.n},
    "91.6": {"Megatron's (p-1)/m": lambda p: (p.pp - 1) / p.m},
    "92.1": {"2 FLOPs per parameter (forward only)": lambda p: mfu(p) / 3,
             "the sparsity peak": lambda p: mfu(p) / 2},
    "92.2": {"MFU left out (100%)": lambda p: train_days(p) * p.mfu,
             "2ND": lambda p: train_days(p) / 3},
    "92.3": {"no ZeRO sharding": lambda p: memory.model_state_bytes(p.n_params).total,
             "every part sharded, whatever the stage": lambda p: memory.model_state_bytes(
                 p.n_params, p.dp, 3).total},
    "92.4": {"both directions of the link": lambda p: grad_all_reduce_time(p) / 2,
             "fp32 gradients": lambda p: 2 * grad_all_reduce_time(p)},
    "92.5": {"weights in fp32": lambda p: inference.decode_step_time(
                 p.model, p.B, p.S, p.accelerator, p.n, dtype="fp32", tp=p.n),
             "one chip": lambda p: inference.decode_step_time(p.model, p.B, p.S, p.accelerator),
             "all-reduces left out (Chapter 8's roofline bound)": _roofline_decode_step},
    "92.6": {"K only, no V": lambda p: 2 * cached_tokens(p)},
    "93.2": {"one chip's bandwidth": lambda p: decode_tokens_per_s(p) / p.n,
             "all-reduces left out (Chapter 8's roofline bound)":
             lambda p: p.B / _roofline_decode_step(p)},
    "93.3": {"flat ring at NVLink speed": lambda p: collectives.all_reduce_time(
                 p.gbytes * 1e9, p.n, hardware.get("h100").link_bytes_per_s)},
    "93.4": {"Megatron's (p-1)/(v·m)": lambda p: p.mfu * (1 - pipeline_bubble_fraction(
                 p.pp, p.m, p.v, relative_to="compute"))},
    "93.6": {"the sparsity peak": lambda p: chips_needed(p) / 2,
             "MFU left out": lambda p: chips_needed(p) * p.mfu},
}


def wrong_methods(notebook: str) -> dict:
    """The WRONG_METHODS of one drill notebook ("90" ... "93"): its exercises only."""
    return {k: v for k, v in WRONG_METHODS_ALL.items() if k.split(".")[0] == notebook}

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS_ALL = {
    '90.1': ("Which of the datasheet's figures is the dense one, and in which unit?",
             "the dense bf16 figure (not the 'with sparsity' one), in FLOP/s"),
    '90.2': ("Is the datasheet's capacity in GB or GiB?",
             'convert to bytes with the unit the vendor uses: GB is 1e9, GiB is 2^30'),
    '90.3': ('Bytes or bits, and which prefix?',
             'bytes per second; TB/s is 1e12 bytes/s'),
    '90.4': ('Does the datasheet count one direction or both?',
             'halve a figure that counts both directions'),
    '90.5': ('List the states mixed-precision Adam keeps per parameter.',
             'bf16 weights and gradients, an fp32 master copy and two fp32 moments'),
    '90.6': ('The ridge of the roofline, in tokens.',
             'the dense bf16 peak over the HBM bandwidth'),
    '90.7': ('What does each layer cache per token?',
             'a key and a value per kv head and layer, H numbers each, 2 bytes per number'),
    '90.8': ('A ring AllReduce is two passes around the ring.',
             "each pass moves (n-1)/n of the array through every device's link"),
    '90.9': ('A key and a value per kv head per layer.',
             'multiply the layers, the kv heads, the head size, the two of K and V, and the bytes'),
    '90.10': ('Two passes around the ring.',
              'a ReduceScatter then an AllGather, each (n-1)/n of the array over the link'),
    '91.1': ("FLOPs of the matmul over the chip's dense peak.",
             'a multiply and an add per product of B·D·F'),
    '91.2': ('Which passes does training run, and what do they cost per parameter?',
             "count the forward pass's FLOPs per parameter and token (a multiply and an add), "
             'then the backward relative to it'),
    '91.3': ('What does mixed-precision Adam keep per parameter?',
             'weights, gradients, master copy and two moments, each at its precision'),
    '91.4': ('Bytes per token, then how many tokens are cached?',
             'per-token bytes times the batch and the context'),
    '91.5': ('Each weight is read once per step.',
             "the bf16 weight bytes over the chips' total HBM bandwidth"),
    '91.6': ('How much of the step is ramp-up and drain?',
             'the idle slots over all the slots of the step'),
    '91.7': ('How many operations per term of the sum?',
             'a multiply and an add per product'),
    '91.8': ('FLOPs per parameter per token, forward and backward.',
             'multiply that by the parameters and the tokens'),
    '92.1': ('MFU: model FLOPs per second over the peak.',
             "model FLOPs per token (weights and attention) times tokens/s over the cluster's "
             'dense peak'),
    '92.2': ('Work over the delivered rate.',
             'training FLOPs over (chips × peak × MFU), then seconds to days'),
    '92.3': ('Each stage shards one more kind of state.',
             'stage 1 shards the optimizer, stage 2 also the gradients, stage 3 also the weights'),
    '92.4': ('A ring AllReduce of the bf16 gradients.',
             'two passes of (n-1)/n of the gradient bytes over the one-way link'),
    '92.5': ('The slower of math and memory decides the split step; what else does a '
             'tensor-parallel step wait for?',
             "FLOPs over the chips' peak against weights plus cache bytes over their HBM "
             "bandwidth, then the all-reduces of each block, costed on the group's links"),
    '92.6': ('HBM left after the weights, in tokens.',
             'the free bytes over the cache bytes per token'),
    '92.7': ('Which states does each stage divide by the data-parallel degree?',
             'optimizer (12 bytes), gradients (2) and weights (2), sharded by stage'),
    '92.8': ('Idle slots over all the slots.',
             'count the ramp-up and drain slots of the schedule'),
    '93.1': ('What must stay resident, and how much of a chip can a run fill?',
             "every parameter's bytes plus the cache, over the memory the driver reports per "
             'chip, rounded up'),
    '93.2': ('How many tokens does a decode step produce, and how long is a tensor-parallel step?',
             'one per sequence of the batch, over the step time with its all-reduces'),
    '93.3': ('Three phases: in the node, across nodes, in the node.',
             "ReduceScatter in the node, AllReduce across nodes on the node's share, AllGather "
             'in the node'),
    '93.4': ("A pipeline's bubble caps the MFU.",
             'the busy share of the step with interleaving, times the MFU'),
    '93.5': ('Throughput: tokens over seconds.',
             'divide the tokens by the time available'),
    '93.6': ('Work over what one chip delivers in the time.',
             'training FLOPs over (dense peak × MFU × seconds)'),
    '93.7': ('What does one checkpoint cost, and what does one failure cost?',
             'per second of work: the stall per interval, plus the restart and the half '
             'interval of lost work per mean time between failures'),
    '93.8': ('How often does a decode server free a slot, and how often does a prefill server '
             'fill one?',
             'a decode server finishes a sequence every gen_len decode steps per batch slot; '
             'balance that rate against one prefill per prefill_time'),
}


def hints(notebook: str) -> dict:
    """The HINTS of one drill notebook ("90" ... "93"): its exercises only."""
    return {k: v for k, v in HINTS_ALL.items() if k.split(".")[0] == notebook}


# ---- More listed mistakes, each with what the student reads (issue 21). The drills' "write it"
# questions (check_function) list none: tests/test_drills.py keeps them free of wrong methods.

WRONG_METHODS_ALL["90.6"]["GB/s read as GiB/s"] = (
    rooflines._crit_gib,
    "HBM bandwidth is quoted in GB/s (1e9 bytes/s), not GiB/s")
WRONG_METHODS_ALL["91.1"] = {
    "the sparsity peak (2x dense)": (
        rooflines._t_math_sparse,
        "the 'with sparsity' figure is twice the dense peak a dense matmul reaches"),
    "one FLOP per multiply-add": (
        rooflines._t_math_one_flop_per_mac,
        "a multiply-add is 2 FLOPs: the matmul does 2·B·D·F"),
}
WRONG_METHODS_ALL["91.2"]["with recomputation (8ND)"] = (
    lambda p: train_flops_6nd(p) * 4 / 3,
    "the 6ND rule counts the model's FLOPs, without recomputation: 2 forward and 4 backward "
    "per parameter per token")
WRONG_METHODS_ALL["91.6"]["the busy share"] = (
    lambda p: 1 - bubble(p),
    "that is the share of the step spent working: the bubble is the idle share")
WRONG_METHODS_ALL["92.6"]["one chip's HBM"] = (
    lambda p: inference.max_cached_tokens(p.model, p.accelerator, p.n) / p.n
    - (p.n - 1) / p.n * inference.weight_bytes_read(p.model)
    / transformer.kv_cache_bytes(p.model, 1, 1),
    "the weights and the cache spread over all n chips: use their HBM together")
# (Leaving out the input embedding, i.e. using ``inference.weight_bytes_read``, the bytes a step
# reads, is the slip this drill was fixed for: at SEED 131, Llama 3 70B on H200s, it gives 1 chip
# instead of 2. The embedding is about 1.5% of the weights, so the chip count changes in too few
# draws for the audit to let it be a listed mistake; the hints and the worked answer name it.)
WRONG_METHODS_ALL["93.1"] = {
    "weights only (cache forgotten)": (
        lambda p: serving.min_devices(p.model, _usable(p.accelerator)),
        "the KV cache of B sequences of S tokens must fit too"),
    "rounded down": (
        lambda p: math.floor((transformer.n_params(p.model) * 2
                              + transformer.kv_cache_bytes(p.model, p.B, p.S))
                             / hardware.get(p.accelerator).memory_capacity_bytes),
        "one chip too few: round up (a fraction of a chip does not exist), and count every "
        "weight, the input embedding too (it stays resident though a step does not read it)"),
}
WRONG_METHODS_ALL["93.2"]["per sequence"] = (
    lambda p: decode_tokens_per_s(p) / p.B,
    "that is one sequence's tokens/s: the server produces B tokens per step")
WRONG_METHODS_ALL["93.3"]["a flat ring at the network's speed"] = (
    lambda p: collectives.all_reduce_time(
        p.gbytes * 1e9, p.n, hardware.cluster("h100", p.n).inter_node.bytes_per_s),
    "a hierarchical AllReduce keeps most of the traffic on NVLink inside each node: only 1/8 "
    "of the data crosses the network")
WRONG_METHODS_ALL["93.4"]["the bubble's complement, MFU forgotten"] = (
    lambda p: 1 - pipeline_bubble_fraction(p.pp, p.m, p.v),
    "the pipeline can at best keep the MFU the plan reaches without it: multiply by mfu")
WRONG_METHODS_ALL["93.5"] = {
    "tokens per day": (
        lambda p: p.n_tokens / p.days,
        "that is per day: a day is 86,400 seconds"),
    "tokens per hour": (
        lambda p: p.n_tokens / (p.days * 24),
        "that is per hour: the answer is in tokens per second"),
}

_SPARSE = "the datasheet's \"with sparsity\" figure is twice the dense peak"
_BOTH = "the figure counts both directions: a transfer goes one way"
_ALL_REDUCES = ("that is the roofline bound alone: a tensor-parallel step also waits for 2L + 1 "
                "all-reduces of the batch's activations (after each attention and MLP block, and "
                "after the embedding), one after the other")
_KV = "each layer caches a key and a value for each of the K kv heads"
with_messages(WRONG_METHODS_ALL, {
    "90.1": {"the sparsity figure (2x dense)": _SPARSE,
             "TFLOP/s written as FLOP/s": "the answer is in FLOP/s: 1 TFLOP/s is 1e12 FLOP/s"},
    "90.2": {"GiB read as GB": "this chip's capacity is in GiB (2^30 bytes)",
             "GB read as GiB": "this chip's capacity is in GB (1e9 bytes)"},
    "90.3": {"bits instead of bytes": "HBM bandwidth is quoted in bytes per second",
             "TB/s written as bytes/s": "the answer is in bytes/s: 1 TB/s is 1e12 bytes/s"},
    "90.4": {"both directions added": _BOTH,
             "bits instead of bytes": "the answer is in bytes per second"},
    "90.5": {"8 bytes per parameter (bf16 Adam, no fp32 master)":
             "this recipe's bytes: mixed precision keeps an fp32 master copy",
             "weights only (2 bytes)": "count gradients and optimizer states too"},
    "90.6": {"the sparsity peak": _SPARSE},
    "90.7": {"K only, no V": _KV, "N query heads instead of K kv heads": _KV},
    "90.8": {"both directions of the link": _BOTH,
             "an AllGather only": "an AllReduce is a ReduceScatter and an AllGather",
             "V/W, no 2(n-1)/n": "a ring AllReduce sends 2(n-1)/n of the array"},
    "91.2": {"forward only (2ND)": "training runs the backward too: 6 FLOPs per parameter-token"},
    "91.3": {"8 bytes per parameter": "mixed-precision Adam keeps 16 bytes per parameter",
             "weights only": "count gradients and optimizer states too"},
    "91.4": {"GiB vs GB": "the answer is in bytes", "K only, no V": _KV},
    "91.5": {"fp32 weights": "the weights are bf16, 2 bytes each",
             "one chip": "the n chips read their shares in parallel"},
    "91.6": {"Megatron's (p-1)/m": "the bubble's share of the step is (p-1)/(m+p-1)"},
    "92.1": {"2 FLOPs per parameter (forward only)": "training runs forward and backward",
             "the sparsity peak": _SPARSE},
    "92.2": {"MFU left out (100%)": "the chips deliver only the MFU's share of their peak",
             "2ND": "training costs 6 FLOPs per parameter-token"},
    "92.3": {"no ZeRO sharding": "the stage shards some states over dp",
             "every part sharded, whatever the stage": "each stage shards one more kind of state"},
    "92.4": {"both directions of the link": _BOTH,
             "fp32 gradients": "the gradients are bf16"},
    "92.5": {"weights in fp32": "the weights are bf16, 2 bytes each",
             "one chip": "the n chips read in parallel",
             "all-reduces left out (Chapter 8's roofline bound)": _ALL_REDUCES},
    "92.6": {"K only, no V": _KV},
    "93.2": {"one chip's bandwidth": "the n chips read in parallel",
             "all-reduces left out (Chapter 8's roofline bound)": _ALL_REDUCES},
    "93.3": {"flat ring at NVLink speed": "the inter-node phase runs at the network's speed"},
    "93.4": {"Megatron's (p-1)/(v·m)": "the bubble's share of the step is (p-1)/(v·m + p-1)"},
    "93.6": {"the sparsity peak": _SPARSE,
             "MFU left out": "the chips deliver only the MFU's share of their peak"},
})


# ---- The errata drills' mistakes: each erratum is the first listed mistake of its drill --------
_H100 = hardware.get("h100")
ERRATA = {
    "90.11": "the H100 has 96 GB",
    "90.12": "PCIe 4.0 x16 is 16 GB/s",
    "90.13": "NVLink pools two GPUs' memory into one",
    "90.14": "data parallelism needs about 8 bytes per parameter",
}


def _nvl_gb():
    from ...serving.parallel import H100_NVL_HBM_BYTES
    return H100_NVL_HBM_BYTES / 1e9


WRONG_METHODS_ALL["90.11"] = {
    "the H100 has 96 GB": (
        lambda p: float(inference.max_cached_tokens(
            p.model, hardware.with_changes(_H100, hbm_bytes=96e9), p.n)),
        f"no H100 has 96 GB: the SXM part has {_H100.hbm_bytes / 1e9:.0f} GB (the datasheet), "
        f"the PCIe NVL card {_nvl_gb():.0f} GB"),
    "K only, no V": (lambda p: 2 * kv_tokens_on_h100(p), _KV),
}
WRONG_METHODS_ALL["90.12"] = {
    "PCIe 4.0 x16 is 16 GB/s": (
        lambda p: 2 * pcie_copy_time(p),
        "that is one generation too slow: 16 GB/s one way is PCIe 3.0 x16, and each generation "
        "doubles the transfer rate per lane"),
    "both directions counted": (lambda p: pcie_copy_time(p) / 2, _BOTH),
    "bits instead of bytes": (lambda p: pcie_copy_time(p) / 8,
                              "the transfer rate is in bits per lane: divide by 8 for bytes"),
}
WRONG_METHODS_ALL["90.13"] = {
    "NVLink pools two GPUs' memory into one": (
        lambda p: float(inference.weight_bytes_read(p.model))
        / hardware.get("a100-80gb").hbm_bytes_per_s,
        "NVLink links two memories, it does not merge them: the bytes that live on the "
        "neighbour arrive at NVLink's bandwidth, several times slower than local HBM"),
    "both directions of NVLink": (
        lambda p: (min(float(inference.weight_bytes_read(p.model)),
                       hardware.get("a100-80gb").hbm_bytes)
                   / hardware.get("a100-80gb").hbm_bytes_per_s
                   + max(float(inference.weight_bytes_read(p.model))
                         - hardware.get("a100-80gb").hbm_bytes, 0.0)
                   / (2 * hardware.get("a100-80gb").link_bytes_per_s)),
        _BOTH),
}
WRONG_METHODS_ALL["90.14"] = {
    "data parallelism needs about 8 bytes per parameter": (
        lambda p: 2 * dp_max_params(p),
        "8 bytes is bf16 Adam without an fp32 master copy; mixed precision keeps bf16 weights "
        "and gradients, an fp32 master copy and two fp32 moments: 16 bytes per parameter"),
    "weights only (2 bytes)": (lambda p: 8 * dp_max_params(p),
                               "count gradients and optimizer states too"),
}
WRONG_METHODS_ALL["93.9"] = {
    "one GPU's MTBF, not the job's": (
        lambda p: checkpoint_interval(p) * math.sqrt(p.n),
        "the job stops when any of its n GPUs fails: its MTBF is the GPU's over n"),
    "sqrt(δ·M), the 2 left out": (
        lambda p: checkpoint_interval(p) / math.sqrt(2),
        "a failure loses half an interval on average: minimising δ/τ + τ/(2M) gives sqrt(2δM)"),
}
WRONG_METHODS_ALL["93.10"] = {
    "the draft's cost left out": (
        lambda p: float(serving.engine.expected_tokens_per_step(p.alpha, p.gamma)),
        "each round also runs gamma draft steps: divide by 1 + gamma times the draft's cost"),
    "1 + γα tokens per round (acceptances independent of order)": (
        lambda p: (1 + p.gamma * p.alpha) / (1 + p.gamma * p.draft_cost),
        "the first rejected token ends the round: token i is kept only if all before it were, "
        "with probability alpha^i"),
}
WRONG_METHODS_ALL["93.11"] = {
    "divided by tp beyond K": (
        lambda p: float(transformer.kv_cache_bytes(p.model, p.B, p.S, "bf16")) / p.tp,
        "there are only K kv heads: beyond tp = K each GPU still holds at least one whole kv "
        "head, copied on the tp/K GPUs whose query heads read it"),
    "not split at all": (
        lambda p: float(transformer.kv_cache_bytes(p.model, p.B, p.S, "bf16")),
        "tensor parallelism splits the kv heads over the GPUs (up to K ways)"),
}
HINTS_ALL.update({
    "90.11": ("Which H100 is it, and what does its datasheet say?",
              "HBM of the n GPUs minus every bf16 weight, over the cache bytes per token"),
    "90.12": ("What is one lane's transfer rate in this generation, and how many bits make a byte?",
              "lanes times transfers per second times the 128b/130b encoding, over 8, one way"),
    "90.13": ("Where do the bytes that do not fit live, and over what do they arrive?",
              "local bytes over local HBM bandwidth plus the rest over NVLink's one-way "
              "bandwidth"),
    "90.14": ("List the states mixed-precision Adam keeps per parameter.",
              "the chip's HBM over the bytes of weights, gradients, master copy and moments"),
    "93.9": ("What is the job's mean time between failures, and what does a failure cost?",
             "minimise the time saving checkpoints plus the work lost (half an interval) per "
             "failure"),
    "93.10": ("When does a round end, and what does it cost?",
              "expected tokens per target step over the cost of one target and gamma draft "
              "steps"),
    "93.11": ("How many kv heads are there to split?",
              "the cache over tp while tp divides K; beyond K, copies of each kv head"),
})
WRONG_METHODS_ALL["93.12"] = {
    "k·B, as if no two tokens shared an expert": (
        lambda p: float(min(p.k * p.B, p.E)),
        "tokens pick experts independently, so they collide: an expert is missed by all B "
        "tokens with probability (1 - k/E)^B"),
    "k, the batch-1 answer": (
        lambda p: float(p.k),
        "each of the B tokens picks its own k experts: more tokens touch more experts"),
}
HINTS_ALL["93.12"] = ("What is the chance that one expert is missed by every token?",
                      "E times the probability an expert is touched at least once")
