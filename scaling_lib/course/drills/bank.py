"""The question bank: every timed drill as a :class:`Question`, by level.

:data:`QUESTIONS` maps a drill notebook (:data:`LEVELS`, with its time budget in
:data:`MINUTES`) to its questions. Each names the function of ``scaling_lib.course.keys.drills`` that
answers it and the ``draw(...)`` arguments of its parameters; ``scaling_lib.course.drills_build`` writes
the notebooks from it.

See: the "Interview preparation" part of the book.
"""

from __future__ import annotations

from dataclasses import dataclass

from .sheet import CHIPS, MODELS

LEVELS = {"90_numbers": "Numbers every LLM engineer should know",
          "91_interview_junior": "Mock interview, level 1 (new grad)",
          "92_interview_mid": "Mock interview, level 2 (engineer)",
          "93_interview_senior": "Mock interview, level 3 (senior / staff)"}
MINUTES = {"90_numbers": 15, "91_interview_junior": 25, "92_interview_mid": 35,
           "93_interview_senior": 45}


@dataclass(frozen=True)
class Question:
    """One graded drill: a number (``check``) or a function to write (``check_function``)."""

    name: str          # "91.3"
    title: str
    prompt: str        # Markdown; the drawn numbers are printed by the cell
    key: str           # function of scaling_lib.course.keys.drills
    draw: str = ""     # keyword arguments of draw(...), literal
    solution: str = ""  # the worked answer's code (assigns `answer`, or the function body)
    unit: str = ""
    tol: str = ""      # ", rtol=..." as written in the check call
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
           worked="Datasheets print a sparsity figure twice the dense one; training uses dense.",
           topic="Ch 2-3"),
        _q("90.2", "HBM capacity", "How many bytes of HBM does the chip below have?",
           "hbm_bytes", _CH, "answer = hw.get(p.accelerator).hbm_bytes", "bytes", ", rtol=0.01",
           worked="GPU datasheets give GB; TPU v4 gives 32 GiB. The two differ by 7.4%.",
           topic="Ch 2-3"),
        _q("90.3", "HBM bandwidth", "What is the chip's HBM bandwidth, in bytes/s?",
           "hbm_bytes_per_s", _CH, "answer = hw.get(p.accelerator).hbm_bytes_per_s", "bytes/s",
           worked="HBM bandwidth is quoted in bytes/s; network links are often in bits/s.",
           topic="Ch 1-3"),
        _q("90.4", "Scale-up link", "What is the chip's scale-up (NVLink or ICI) bandwidth, one way, "
           "all links together, in bytes/s?", "link_bytes_per_s", _CH,
           "answer = hw.get(p.accelerator).link_bytes_per_s", "bytes/s",
           worked="Marketing figures for NVLink add both directions; a ring sends one way.",
           topic="Ch 2-4"),
        _q("90.5", "Bytes per parameter", "Training with Adam in the recipe below, how many bytes "
           "does each parameter cost (weights, gradients, optimizer state)?", "bytes_per_param",
           "recipe=['mixed', 'bf16', 'fp32']", "answer = mem.bytes_per_param(p.recipe).total",
           "bytes", ", rtol=0",
           worked="Mixed precision: 2 + 2 + (4 + 4 + 4) = 16; pure bf16 without a master copy: 8; "
           "fp32: 4 + 4 + 8 = 16.", topic="Ch 6"),
        _q("90.6", "Critical batch", "Above how many tokens per batch is a bf16 matmul with large "
           "D and F compute-bound on the chip below?", "critical_batch",
           "accelerator=['h100', 'a100-80gb', 'b200', 'tpu-v5e', 'tpu-v5p', 'tpu-v6e']",
           "answer = rl.critical_batch(p.accelerator, 'bf16')", "tokens",
           worked="B* = C / W_hbm (bf16: 2 bytes per value "
           "cancels the 2 FLOPs per multiply-add).", topic="Ch 1"),
        _q("90.7", "KV cache per token", "How many bytes of bf16 KV cache does one token take in "
           "the model below?", "kv_bytes_per_token", f"model={list(MODELS)!r}",
           "answer = tf.kv_cache_bytes(p.model, 1, 1, 'bf16')", "bytes",
           worked="Grouped-query attention caches K (not N) heads per layer, for keys and values.",
           topic="Ch 8"),
        _q("90.8", "AllReduce time", "A ring AllReduce of the array below (GB = 1e9 bytes) over n "
           "devices whose links carry `link_gbytes_per_s` gigabytes per second (GB/s, bytes, not "
           "bits) one way: how many seconds (no latency)?",
           "all_reduce_time",
           "gbytes=[0.5, 1.0, 2.0, 4.0], n=(4, 64), link_gbytes_per_s=[25.0, 50.0, 100.0, 450.0]",
           "answer = 2 * (p.n - 1) / p.n * p.gbytes * 1e9 / (p.link_gbytes_per_s * 1e9)", "s",
           worked="A ReduceScatter and an AllGather, each (n-1)/n · V / W.",
           topic="Ch 4"),
        _q("90.9", "Write it: KV bytes per token", "Write the KV cache bytes per token of a model "
           "with L layers, K kv heads of dimension H and `bytes_per_value` bytes per value.",
           "kv_cache_reference", solution="return 2 * L * K * H * bytes_per_value",
           signature="def kv_bytes(L, K, H, bytes_per_value):",
           cases="[(32, 8, 128, 2), (80, 8, 128, 2), (40, 40, 128, 2), (126, 8, 128, 1)]",
           topic="Ch 8"),
        _q("90.10", "Write it: ring AllReduce", "Write the time of a ring AllReduce of `nbytes` "
           "over `n` devices with one-way link bandwidth `bytes_per_s` (no latency).",
           "ring_all_reduce_reference", solution="return 2 * (n - 1) / n * nbytes / bytes_per_s",
           signature="def ring_all_reduce(nbytes, n, bytes_per_s):",
           cases="[(1e9, 8, 450e9), (4e9, 64, 50e9), (1e6, 2, 1e9)]",
           topic="Ch 4"),
        _q("90.11", "Erratum: \"the H100 has 96 GB\"", "How many tokens of bf16 KV cache fit "
           "beside every bf16 weight of the model below on n H100 SXM GPUs, counting the "
           "datasheet's HBM and nothing else (no activations, no reserve)?", "kv_tokens_on_h100",
           "model=['llama3-8b', 'llama2-13b', 'llama3-70b'], n=[2, 4, 8]",
           "answer = (p.n * hw.get('h100').hbm_bytes - 2 * tf.n_params(p.model)) "
           "/ tf.kv_cache_bytes(p.model, 1, 1)",
           "tokens", worked="Free memory over the cache bytes per token. The H100 SXM's "
           "datasheet gives its HBM in GB; the larger figures people quote belong to other "
           "parts (the H100 NVL PCIe card, the GH200), and the driver of an SXM reports a little more than the datasheet "
           "(`memory_capacity_bytes`).", topic="Errata, Ch 2, 8"),
        _q("90.12", "Erratum: \"PCIe 4.0 x16 is 16 GB/s\"", "How many seconds does copying "
           "gbytes GB (1e9 bytes) from host memory to one GPU take over a PCIe link of the "
           "generation below with 16 lanes, one way (gen 3: 8, gen 4: 16, gen 5: 32 GT/s per "
           "lane, 128b/130b encoding; nothing else)?", "pcie_copy_time",
           "gen=[3, 4, 5], gbytes=[1.0, 4.0, 16.0, 141.0]",
           "answer = p.gbytes * 1e9 / (16 * {3: 8e9, 4: 16e9, 5: 32e9}[p.gen] * 128 / 130 / 8)",
           "s", worked="Lanes × transfer rate × 128/130 ÷ 8 bits per byte, one way. The "
           "\"16 GB/s\" figure is PCIe 3.0 x16; every generation doubles it.",
           topic="Errata, Ch 4, 22"),
        _q("90.13", "Erratum: \"NVLink pools two GPUs' memory into one\"", "The bf16 weights of "
           "the model below do not fit in one A100-80GB. It keeps as much as its HBM holds "
           "and reads the rest from its NVLink neighbour's HBM every decode step (NVLink 3, "
           "one way). Seconds per decode step counting the weight reads only (every weight "
           "but the input embedding is read; expert models read all experts)?",
           "peer_weight_read_time", "model=['llama3-70b', 'mixtral-8x7b']",
           "a = hw.get('a100-80gb')\nw = inf.weight_bytes_read(p.model)\n"
           "answer = a.hbm_bytes / a.hbm_bytes_per_s + (w - a.hbm_bytes) / a.link_bytes_per_s",
           "s", worked="Two reads one after the other: the local part at HBM bandwidth, the "
           "rest at NVLink's one-way bandwidth, several times slower. NVLink joins two "
           "memories with a link; it does not make one memory of them, which is why models are "
           "split explicitly (tensor or pipeline parallelism) instead.",
           topic="Errata, Ch 2, 22"),
        _q("90.14", "Erratum: \"data parallelism needs about 8 bytes per parameter\"",
           "Largest model (parameters) that plain data parallelism (no ZeRO) can train on one "
           "GPU of the kind below with mixed-precision Adam, counting only the model states "
           "against the datasheet's HBM (no activations)?", "dp_max_params",
           "accelerator=['a100-40gb', 'a100-80gb', 'h100', 'h200', 'b200']",
           "answer = hw.get(p.accelerator).hbm_bytes / (2 + 2 + 4 + 4 + 4)", "parameters",
           worked="bf16 weights (2) and gradients (2), an fp32 master copy (4) and two fp32 Adam "
           "moments (4 + 4): 16 bytes per parameter. Eight bytes is pure bf16 Adam without a "
           "master copy, which few large runs use.", topic="Errata, Ch 6"),
    ],
    "91_interview_junior": [
        _q("91.1", "Matmul time", "How long does the bf16 matmul [B, D] x [D, F] take at the "
           "chip's dense peak (seconds)?", "t_math_matmul",
           "accelerator=['h100', 'a100-80gb', 'b200', 'tpu-v5e', 'tpu-v5p', 'tpu-v6e'], B=(256, "
           "8192), D=(1024, 16384), F=(1024, 65536)",
           "answer = 2 * p.B * p.D * p.F / hw.get(p.accelerator).peak_flops_per_s('bf16')", "s",
           worked="As exercise 1.1.", topic="Ch 1"),
        _q("91.2", "Training FLOPs", "How many FLOPs does training a dense model of n_params "
           "parameters on n_tokens tokens take (the 6ND rule)?", "train_flops_6nd",
           "n_params=[1e9, 8e9, 70e9, 405e9], n_tokens=[1e12, 2e12, 15e12]",
           "answer = 6 * p.n_params * p.n_tokens", "FLOPs",
           worked="Forward 2N per token, backward 4N: 6ND.", topic="Ch 5"),
        _q("91.3", "Training memory", "Bytes of weights, gradients and Adam state in mixed "
           "precision for n_params parameters on one device (no sharding)?", "model_state_bytes",
           "n_params=[1e9, 3e9, 7e9, 13e9]", "answer = 16 * p.n_params", "bytes",
           worked="2 + 2 + 12 = 16 bytes per parameter.",
           topic="Ch 6"),
        _q("91.4", "KV cache", "Bytes of bf16 KV cache for B sequences of S tokens of the model "
           "below?", "kv_cache_total", f"model={list(MODELS)!r}, B=(1, 64), S=(1024, 32768)",
           "answer = tf.kv_cache_bytes(p.model, p.B, p.S, 'bf16')", "bytes",
           worked="2·L·K·H·2 bytes per token, times B·S.",
           topic="Ch 8"),
        _q("91.5", "Weight read time", "A decode step reads every bf16 weight once. How long does "
           "that take for the model below split over n chips (seconds)?", "weight_read_time",
           "model=['llama3-8b', 'llama3-70b', 'llama3-405b'], accelerator=['h100', 'h200', "
           "'b200', 'tpu-v5p'], n=(1, 16)",
           "answer = 2 * tf.n_params(p.model) / (p.n * hw.get(p.accelerator).hbm_bytes_per_s)", "s",
           worked="N·2 bytes / (n · W_hbm).",
           topic="Ch 8"),
        _q("91.6", "Pipeline bubble", "With pp stages and m micro-batches in 1F1B, what share of "
           "the step is idle (a fraction)?", "bubble", "pp=(2, 32), m=(4, 16)",
           "answer = (p.pp - 1) / (p.m + p.pp - 1)", "", ", rtol=1e-4",
           worked="p-1 ramp and drain slots in m+p-1; Megatron's (p-1)/m measures against compute.",
           topic="Parallelism"),
        _q("91.7", "Write it: matmul FLOPs", "Write the FLOPs of [B, D] x [D, F].",
           "matmul_flops_reference", solution="return 2 * B * D * F",
           signature="def matmul_flops(B, D, F):",
           cases="[(1, 2, 3), (4096, 8192, 28672), (8, 16, 32)]",
           topic="Ch 1"),
        _q("91.8", "Write it: 6ND", "Write the training FLOPs of n_params parameters on n_tokens "
           "tokens.", "six_nd_reference", solution="return 6 * n_params * n_tokens",
           signature="def train_flops(n_params, n_tokens):",
           cases="[(8e9, 15e12), (70e9, 2e12), (1e6, 1e6)]", topic="Ch 5"),
    ],
    "92_interview_mid": [
        _q("92.1", "MFU", "Llama 3 70B trains on n chips of the kind below at tokens_per_chip "
           "tokens/s per chip (T = 4096). What is its MFU (a fraction)?", "mfu",
           # per-chip rates chosen so every draw is a real run (MFU about 0.2-0.55), not one
           # faster than the chip's peak
           "model=['llama3-70b'], accelerator=['h100', 'h200'], n=(64, 1024), "
           "tokens_per_chip=(500.0, 1150.0)",
           "answer = tf.mfu(p.model, p.tokens_per_chip * p.n, p.n, p.accelerator, 4096)", "",
           worked="MFU = FLOPs per token · tokens/s / (n · dense peak).", topic="Ch 7"),
        _q("92.2", "Training days", "How many days does training n_params parameters on n_tokens "
           "tokens take on n chips at the MFU below (6ND)?", "train_days",
           "n_params=[8e9, 70e9, 405e9], n_tokens=[2e12, 15e12], accelerator=['h100', 'b200'], "
           "n=[1024, 4096, 16384], mfu=[0.3, 0.4, 0.5]",
           "answer = 6 * p.n_params * p.n_tokens / (p.n * "
           "hw.get(p.accelerator).peak_flops_per_s('bf16') * p.mfu) / 86400",
           "days", worked="t = 6ND / (n · C · MFU): the dense peak, and the MFU you can defend.",
           topic="Ch 7"),
        _q("92.3", "ZeRO", "Model-state bytes per device for n_params parameters, mixed precision "
           "Adam, data parallelism over dp ranks with ZeRO stage zero?", "zero_bytes",
           "n_params=[7e9, 13e9, 70e9], dp=(8, 512), zero=[1, 2, 3]",
           "answer = mem.model_state_bytes(p.n_params, p.dp, p.zero).total", "bytes",
           worked="(2 + 2 + 12)Ψ with the sharded parts divided by dp.", topic="Ch 6"),
        _q("92.4", "Gradient AllReduce", "Data parallelism over dp GPUs: how long does the ring "
           "AllReduce of n_params bf16 gradients take at `link_gbytes_per_s` gigabytes per second "
           "one way (seconds)?",
           "grad_all_reduce_time",
           "n_params=[1e9, 8e9, 70e9], dp=(8, 1024), link_gbytes_per_s=[50.0, 450.0]",
           "answer = 2 * (p.dp - 1) / p.dp * 2 * p.n_params / (p.link_gbytes_per_s * 1e9)", "s",
           worked="The DP bottleneck: it grows with N, not "
           "with the batch; it overlaps with the backward pass.", topic="Parallelism"),
        _q("92.5", "Decode step", "Time of one decode step (seconds) of the bf16 model below, "
           "batch B, context S, tensor parallel over n chips of one node: the roofline of the "
           "split step plus the tensor-parallel all-reduces (Chapter 21's model; bf16 "
           "activations, each all-reduce costed by `scaling_lib.collectives` on the node's "
           "links).", "decode_step",
           "model=['llama3-8b', 'llama3-70b'], B=(1, 64), S=(1024, 8192), accelerator=['h100', "
           "'h200'], n=[4, 8]",
           "answer = inf.decode_step_time(p.model, p.B, p.S, p.accelerator, p.n, tp=p.n)", "s",
           worked="Small batches are memory-bound: the weights and the KV cache dominate the "
           "split step, max(FLOPs / (n·C), bytes / (n·W_hbm)). Tensor parallelism then adds "
           "2L + 1 all-reduces of B·D·2 bytes (one after each attention and MLP block, one "
           "after the vocabulary-parallel embedding), one after the other on the critical path: "
           "at small B each is latency-bound, so together they cost milliseconds.",
           topic="Ch 8, 21"),
        _q("92.6", "KV capacity", "How many tokens of bf16 KV cache fit beside the model's bf16 "
           "weights on n chips?", "cached_tokens",
           "model=['llama3-8b', 'llama3-70b'], accelerator=['h100', 'h200'], n=[2, 4, 8]",
           "answer = inf.max_cached_tokens(p.model, p.accelerator, p.n)", "tokens",
           worked="What is left after the weights, over the per-token KV bytes.", topic="Ch 8"),
        _q("92.7", "Write it: ZeRO", "Write the model-state bytes per device (mixed precision "
           "Adam, 16 bytes/param) for ZeRO stage `zero` over `dp` ranks.", "zero_reference",
           solution="p, g, o = 2 * n_params, 2 * n_params, 12 * n_params\n"
           "return (p / dp if zero >= 3 else p) + (g / dp if zero >= 2 else g) + (o / dp if zero "
           ">= 1 else o)",
           signature="def zero_bytes(n_params, dp, zero):",
           cases="[(7e9, 8, 0), (7e9, 8, 1), (7e9, 64, 2), (70e9, 512, 3)]",
           topic="Ch 6"),
        _q("92.8", "Write it: bubble", "Write the idle share of a 1F1B step with pp stages and m "
           "micro-batches.", "bubble_reference", solution="return (pp - 1) / (m + pp - 1)",
           signature="def bubble(pp, m):", cases="[(4, 4), (8, 32), (16, 128), (1, 8)]",
           topic="Parallelism"),
    ],
    "93_interview_senior": [
        _q("93.1", "Chips to serve", "Fewest chips whose usable memory holds every bf16 weight "
           "of the model (the input embedding too) plus the bf16 KV cache of B sequences of S "
           "tokens (no other overhead)? Usable memory is what the driver reports "
           "(`hw.get(name).memory_capacity_bytes`; the datasheet's figure where nothing was "
           "measured).", "chips_for_weights",
           "model=['llama3-70b', 'llama3-405b'], accelerator=['h100', 'h200', 'b200', "
           "'tpu-v5p'], B=(1, 64), S=(2048, 32768)",
           "answer = math.ceil((2 * tf.n_params(p.model) + tf.kv_cache_bytes(p.model, p.B, p.S))"
           "\n                   / hw.get(p.accelerator).memory_capacity_bytes)",
           "chips", ", rtol=0",
           worked="Every parameter must be resident: the embedding table is looked up, not "
           "streamed, but it still occupies memory (a decode step *reads* every weight but the "
           "input embedding, a different question). Llama 3 70B's bf16 weights alone are a little "
           "more than one H200's 141 GB, so it needs two before any cache. Then round up to a "
           "shape the parallelism allows (a tensor-parallel degree that divides the heads).",
           topic="Ch 8, 21"),
        _q("93.2", "Serving throughput", "Output tokens/s of an n-chip tensor-parallel server "
           "decoding batch B at context S, with the decode step of Chapter 21 (roofline of the "
           "split step plus its all-reduces)?", "decode_tokens_per_s",
           "model=['llama3-70b'], accelerator=['h100', 'h200'], n=[4, 8], B=(1, 256), S=(2048, "
           "16384)",
           "answer = p.B / inf.decode_step_time(p.model, p.B, p.S, p.accelerator, p.n, tp=p.n)",
           "tokens/s",
           worked="B tokens per step over the step time. The step is memory-bound until B "
           "approaches the critical batch, and the 2L + 1 all-reduces of the batch's "
           "activations come on top, one after the other: leaving them out (Chapter 8's bound "
           "alone) overstates the throughput, and the checker names that slip.", topic="Ch 8, 21"),
        _q("93.3", "Hierarchical AllReduce", "AllReduce of gbytes GB over n H100s in nodes of 8 "
           "(NVLink inside, the default NIC per GPU of hw.cluster outside): seconds, with the "
           "library's "
           "hierarchical schedule?", "hierarchical_all_reduce",
           "gbytes=[1.0, 4.0, 16.0], n=[16, 64, 256, 1024]",
           "answer = co.hierarchical_time('all-reduce', p.gbytes * 1e9, hw.cluster('h100', p.n), "
           "p.n).total",
           "s", worked="ReduceScatter inside each node on NVLink, an AllReduce "
           "of each GPU's 1/8 across nodes on its own NIC, AllGather inside the node. The "
           "inter-node phase dominates: a GPU's NIC carries about a tenth of its NVLink "
           "bandwidth, so only 1/8 of the data crossing it still costs the most.", topic="Ch 4"),
        _q("93.4", "MFU ceiling of a pipeline", "A plan reaches MFU mfu without pipelining. With "
           "pp stages, m micro-batches and v virtual stages (interleaved 1F1B), what is its MFU "
           "ceiling?", "pp_mfu_ceiling", "mfu=[0.4, 0.5, 0.6], pp=(2, 16), m=(4, 16), v=[1, 2, 4]",
           "answer = p.mfu * (1 - (p.pp - 1) / (p.v * p.m + p.pp - 1))", "", ", rtol=1e-4",
           worked="Interleaving divides the bubble by v, at the cost of v times more sends.",
           topic="Parallelism"),
        _q("93.5", "Throughput target", "What cluster tokens/s trains on n_tokens tokens in the "
           "days below?", "tokens_per_s_needed", "n_tokens=[2e12, 15e12], days=[30, 60, 90]",
           "answer = p.n_tokens / (p.days * 86400)", "tokens/s",
           worked="Tokens over seconds; then divide by the tokens/s one chip sustains to size "
           "the cluster.", topic="Ch 7"),
        _q("93.6", "Cluster size", "How many chips at MFU mfu train n_params parameters on "
           "n_tokens tokens (6ND) in the days below?", "chips_needed",
           "n_params=[70e9, 405e9], n_tokens=[15e12], accelerator=['h100', 'b200'], mfu=[0.35, "
           "0.45], days=[30, 90]",
           "answer = 6 * p.n_params * p.n_tokens / "
           "(hw.get(p.accelerator).peak_flops_per_s('bf16') * p.mfu * p.days * 86400)",
           "chips", worked="Dense peak only; a real plan rounds up to the parallelism's shape.",
           topic="Ch 7"),
        _q("93.7", "Write it: goodput", "Write the share of wall-clock time a run makes progress "
           "when it checkpoints every `interval` seconds of work, each checkpoint stalls it "
           "`ckpt_time` seconds, failures come every `mtbf` seconds on average, and each costs "
           "`restart_time` seconds plus the work since the last checkpoint (to first order; "
           "never below 0).", "goodput_reference",
           solution="lost = ckpt_time / interval + (restart_time + interval / 2) / mtbf\n"
           "return max(0.0, 1 - lost)",
           signature="def goodput(interval, ckpt_time, mtbf, restart_time):",
           cases="[(1138.0, 60.0, 10800.0, 600.0), (250.0, 3.0, 11000.0, 0.0), "
           "(3600.0, 600.0, 3600.0, 1200.0), (600.0, 10.0, 36000.0, 300.0)]",
           topic="Reliability"),
        _q("93.8", "Write it: prefill servers per decode server", "Disaggregated serving: a "
           "decode server runs `batch` sequences, one token each per `decode_step` seconds, "
           "for `gen_len` tokens each; a prefill server prepares one prompt every "
           "`prefill_time` seconds. Write how many prefill servers each decode server needs so "
           "that neither waits.", "pd_ratio_reference",
           solution="return batch * prefill_time / (gen_len * decode_step)",
           signature="def pd_ratio(prefill_time, decode_step, batch, gen_len):",
           cases="[(0.1, 0.02, 64, 500), (0.5, 0.03, 128, 256), (2.0, 0.015, 32, 1000)]",
           topic="Ch 21"),
        _q("93.9", "Checkpoint interval", "A job runs on n GPUs, each failing independently "
           "on average once every mtbf_hours hours; writing a checkpoint stalls training for "
           "ckpt_s seconds. Every failure costs the work since the last checkpoint. Which "
           "interval between checkpoints (seconds of work) wastes least, to first order?",
           "checkpoint_interval",
           "n=[1024, 4096, 16384], mtbf_hours=[20000.0, 50000.0, 100000.0], "
           "ckpt_s=[10.0, 30.0, 60.0, 120.0]",
           "M = p.mtbf_hours * 3600 / p.n\nanswer = math.sqrt(2 * p.ckpt_s * M)", "s",
           worked="The job's MTBF is the GPU's over n. Per second of work, saving costs δ/τ and "
           "failures cost about τ/(2M) (half an interval lost each); the sum is smallest at "
           "τ* = sqrt(2δM) (Young 1974). Then ask what shrinks δ (asynchronous checkpoints to "
           "host memory) and what the restart time adds to the waste.",
           topic="Reliability"),
        _q("93.10", "Speculative decoding", "A draft model proposes gamma tokens per round; the "
           "target checks them in one step, each drafted token is accepted independently with "
           "probability alpha until the first rejection, and the target always adds one token "
           "of its own. A draft step costs draft_cost target steps. Expected speed-up over "
           "plain decoding?", "speculative",
           "alpha=[0.5, 0.6, 0.7, 0.8, 0.9], gamma=[2, 3, 4, 5, 6, 8], "
           "draft_cost=[0.02, 0.05, 0.1]",
           "tokens = (1 - p.alpha ** (p.gamma + 1)) / (1 - p.alpha)\n"
           "answer = tokens / (1 + p.gamma * p.draft_cost)", "",
           worked="Token i of the draft survives only if all before it did: probability α^i. "
           "The expected tokens per round are 1 + α + ... + α^γ = (1 - α^(γ+1))/(1 - α) "
           "(Leviathan et al. 2023), and a round costs 1 + γc target steps. Follow-ups: why "
           "the speed-up shrinks at large batch (the target step stops being memory-bound) and "
           "what acceptance a draft needs to pay at all.", topic="Ch 21"),
        _q("93.11", "KV cache per GPU beyond K", "The model below is tensor parallel over tp "
           "GPUs (tp may exceed its K kv heads). Bytes of bf16 KV cache per GPU for B "
           "sequences of S tokens?", "kv_per_gpu",
           "model=['llama3-8b', 'llama3-70b', 'llama3-405b'], tp=[2, 4, 8, 16, 32], B=(1, 64), "
           "S=(1024, 32768)",
           "K = models.get(p.model).K\n"
           "answer = tf.kv_cache_bytes(p.model, p.B, p.S) / min(p.tp, K)", "bytes",
           worked="Each GPU holds the kv heads its query heads read. Up to tp = K the K heads "
           "split evenly; beyond it every GPU still holds one whole kv head (copied tp/K "
           "times), so the cache per GPU stops shrinking: one more reason tensor parallelism "
           "beyond K buys little for serving with grouped-query attention.",
           topic="Ch 8, 21"),
        _q("93.12", "Experts a decode step reads", "A mixture-of-experts layer has E experts; "
           "each of the B tokens of a decode step is routed to k of them, uniformly at random and "
           "independently of the other tokens. How many distinct experts does the step read, "
           "in expectation (per layer)?", "experts_touched",
           "E=[64, 128, 256], k=[2, 4], B=[8, 16, 32]",
           "answer = p.E * (1 - (1 - p.k / p.E) ** p.B)", "experts",
           worked="An expert is missed by one token with probability 1 - k/E and by all B with "
           "(1 - k/E)^B, so the step reads E·(1 - (1 - k/E)^B) experts. It reaches almost all "
           "of them at a batch of a few E/k: the reason a mixture of experts loses its "
           "bandwidth advantage at serving batch sizes (real routers are not uniform, and "
           "touch fewer).", topic="Ch 8, 15"),
    ],
}
