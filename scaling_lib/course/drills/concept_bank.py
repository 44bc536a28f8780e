"""The concept bank: the questions ML-systems interviews ask, with model answers at three depths
and a rubric an interviewer can score with.

:func:`bank` returns the :class:`Concept` questions (numbers in the answers computed from the
library when it is called, never typed); :data:`SCORES` and :data:`PASS_SCORE` are the scale
and the threshold; :func:`errata` lists the four claims every rubric treats as red flags, each
with its correction and the graded drill that tests it; :func:`page_markdown` writes the book
page (``book/concept_bank.ipynb``).

Depths: 1 is what a new graduate should say (the mechanism), 2 an engineer (the mechanism with
its cost, in numbers), 3 a senior or staff engineer (the trade-offs, where the simple model
breaks, and what to measure).

See: the "Interview preparation" part of the book, "Concept bank and rubrics".
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

# One scale for every question. A red flag that the candidate does not withdraw when the
# follow-up points at it caps the question at 0.
SCORES = {0: "no answer, or a red flag kept after the follow-up",
          1: "weak: a fragment, or the mechanism without its cost",
          2: "pass: every item of the pass list",
          3: "strong: the pass list and at least two items of the strong list"}
PASS_SCORE = 2          # a question is passed at 2 or more
SESSION_PASS_MEAN = 2.0  # a session passes with a mean of at least 2 over its concept questions,
SESSION_MAX_BELOW = 1    # at most one question below 2, and no red flag standing


@dataclass(frozen=True)
class Concept:
    """One conceptual question with its model answers and rubric."""

    key: str
    topic: str
    question: str
    answers: tuple[str, str, str]    # depth 1 (new grad), 2 (engineer), 3 (senior / staff)
    passing: tuple[str, ...]         # what a pass answer contains
    strong: tuple[str, ...]          # what a strong answer adds
    weak: tuple[str, ...]            # what a weak answer looks like
    red_flags: tuple[str, ...]       # claims that fail the question unless withdrawn
    follow_ups: tuple[str, ...]      # the interviewer's next questions
    level: int = 2                   # the mock-interview level that asks it first


TOPICS = ("Parallelism", "Memory of a training step", "Utilisation", "Hardware and networks",
          "Collectives", "Serving", "Mixture of experts", "Long context",
          "Reliability and debugging")


@lru_cache(maxsize=1)
def _numbers() -> dict:
    """Every number the answers quote, from the library."""
    from ... import (collectives, hardware, inference, memory, published, reliability, roofline,
                     serving, transformer)
    from ...parallelism import ParallelPlan, pipeline_bubble_fraction
    from ...serving.parallel import GPT4_CLASS_ASSUMED, H100_NVL_HBM_BYTES

    h = hardware.get("h100")
    cl = hardware.cluster("h100", 16)
    runs = sorted((r for r in published.RUNS.values() if r.name.startswith("llama3-405b")),
                  key=lambda r: (r.n_devices, r.T if hasattr(r, "T") else 0))
    big = max(runs, key=lambda r: (r.n_devices, r.mfu))
    long = next((r for r in runs if getattr(r, "cp", 1) > 1), big)
    m8 = memory.training_memory("llama3-8b", ParallelPlan(), 1, 4096)
    dec = inference.decode_step_parts("llama3-70b", 1, 8192, "h100", 8, tp=8)
    ck = reliability.checkpoint_bytes("llama3-405b")
    gpu_mtbf_h = 50_000  # an assumed per-GPU MTBF (hours), the reliability module's example
    job = reliability.job_mtbf(gpu_mtbf_h * 3600, 16384)
    ck_t = reliability.checkpoint_time(ck, reliability.LLAMA3_STORAGE_BYTES_PER_S)
    return dict(
        h=h, hbm=h.hbm_bytes, usable=h.memory_capacity_bytes, nvl=H100_NVL_HBM_BYTES,
        hbm_bw=h.hbm_bytes_per_s, nvlink=h.link_bytes_per_s, ib=cl.inter_node.bytes_per_s,
        pcie4=float(collectives.pcie_bytes_per_s(4, 16)),
        pcie3=float(collectives.pcie_bytes_per_s(3, 16)),
        pcie5=float(collectives.pcie_bytes_per_s(5, 16)),
        ici=hardware.cluster("tpu-v5p", 64).intra_node.bytes_per_s,
        bstar=float(roofline.critical_batch("h100", "bf16")),
        mixed=float(memory.bytes_per_param("mixed").total),
        bf16=float(memory.bytes_per_param("bf16").total),
        max_dp=float(memory.max_trainable_params("h100")),
        m8=m8, n8=transformer.n_params("llama3-8b"), n70=transformer.n_params("llama3-70b"),
        kv70=float(transformer.kv_cache_bytes("llama3-70b", 1, 1)),
        kv70_8k=float(transformer.kv_cache_bytes("llama3-70b", 1, 8192)),
        kv70_mha=float(transformer.kv_cache_bytes("llama3-70b", 1, 1)) * 64 / 8,
        bubble44=float(pipeline_bubble_fraction(4, 4)),
        bubble_16_64=float(pipeline_bubble_fraction(16, 64)),
        sel=float(memory.selective_recompute_overhead("llama3-70b", 8192)),
        big=big, long=long,
        frontier_days=float(transformer.train_time(published.LLAMA3_405B_TRAIN_FLOPS,
                                                   big.n_devices, big.accelerator, big.mfu)
                            / 86400),
        ar_1gb_node=float(collectives.all_reduce_time(1e9, 8, h.link_bytes_per_s)),
        ar_1gb_ib=float(collectives.hierarchical_time("all-reduce", 1e9,
                                                      hardware.cluster("h100", 64), 64).total),
        dec_mem=float(dec["memory"]), dec_comm=float(dec["communication"]),
        n_ar=inference.tp_decode_all_reduces("llama3-70b"),
        ck=ck, ck_t=ck_t, job_mtbf=job, gpu_mtbf_h=gpu_mtbf_h,
        storage=reliability.LLAMA3_STORAGE_BYTES_PER_S,
        effective=reliability.LLAMA3_EFFECTIVE_TRAINING_TIME,
        mfu_lo=min(r.mfu for r in runs), mfu_hi=max(r.mfu for r in runs),
        yd=reliability.young_daly_interval(ck_t, job),
        llama_mtbf=reliability.mtbf(reliability.LLAMA3_INTERRUPTIONS,
                                    reliability.LLAMA3_SNAPSHOT_DAYS * 86400),
        spec=float(serving.speculative_speedup(0.8, 4, 0.05)),
        spec_tokens=float(serving.engine.expected_tokens_per_step(0.8, 4)),
        experts_b1=float(inference.expected_experts(8, 2, 1)),
        experts_b16=float(inference.expected_experts(8, 2, 16)),
        seqs_8k=float(inference.max_cached_tokens("llama3-70b", "h100", 8)) / 8192,
        seqs_128k=float(inference.max_cached_tokens("llama3-70b", "h100", 8)) / 131072,
        m_10pct=next(m for m in range(1, 1000) if pipeline_bubble_fraction(4, m) < 0.10),
        intensity64=float(inference.decode_intensity("llama3-70b", 64, 8192)),
        gpt4_fp8=serving.min_devices(GPT4_CLASS_ASSUMED, "h100", dtype="fp8"),
        yd_10min=reliability.young_daly_interval(600.0, job),
        gp_10min=reliability.goodput(reliability.young_daly_interval(600.0, job), 600.0, job),
        min70=serving.min_devices("llama3-70b", "h100"),
        min70_fp8=serving.min_devices("llama3-70b", "h100", dtype="fp8"),
    )


def errata() -> list[dict]:
    """The four claims every rubric treats as red flags: the claim, its correction (numbers
    from the library) and the graded drill that tests it."""
    from ...units import fmt_bytes, fmt_bytes_per_s

    n = _numbers()
    return [
        {"claim": "the H100 has 96 GB", "drill": "90.11",
         "correction": f"The H100 SXM has {fmt_bytes(n['hbm'])} of HBM3 (the driver reports "
                       f"{n['usable'] / 2**20:,.0f} MiB); {fmt_bytes(n['nvl'])} is the H100 NVL, a "
                       "PCIe card, and larger figures belong to the GH200 and the H200."},
        {"claim": "PCIe 4.0 x16 is 16 GB/s", "drill": "90.12",
         "correction": f"PCIe 4.0 x16 carries {fmt_bytes_per_s(n['pcie4'])} each way "
                       f"({fmt_bytes_per_s(2 * n['pcie4'])} counting both); "
                       f"{fmt_bytes_per_s(n['pcie3'])} is PCIe 3.0 x16."},
        {"claim": "NVLink pools two GPUs' memory into one", "drill": "90.13",
         "correction": f"NVLink is a link: a GPU reads its neighbour's HBM at "
                       f"{fmt_bytes_per_s(n['nvlink'])} one way (H100), against "
                       f"{fmt_bytes_per_s(n['hbm_bw'])} from its own; models are split "
                       "explicitly (tensor or pipeline parallelism), not placed in a pool."},
        {"claim": "data parallelism needs about 8 bytes per parameter", "drill": "90.14",
         "correction": f"Mixed-precision Adam keeps {n['mixed']:.0f} bytes per parameter (bf16 "
                       "weights and gradients, fp32 master copy and two moments); "
                       f"{n['bf16']:.0f} is pure bf16 Adam without a master copy."},
    ]


_E_H100, _E_PCIE, _E_NVLINK, _E_8B = (f"\"{e}\"" for e in (
    "the H100 has 96 GB", "PCIe 4.0 x16 is 16 GB/s", "NVLink pools two GPUs' memory into one",
    "data parallelism needs about 8 bytes per parameter"))


def bank() -> list[Concept]:  # noqa: PLR0915 (one long table, read top to bottom)
    """Every concept question, numbers computed now from the library."""
    from ...units import fmt_bytes, fmt_bytes_per_s, fmt_seconds

    n = _numbers()
    B, BPS, S = fmt_bytes, fmt_bytes_per_s, fmt_seconds
    big, long = n["big"], n["long"]
    m8 = n["m8"]
    Q = Concept
    return [
        # ---- Parallelism -------------------------------------------------------------------
        Q("parallelism", "Parallelism",
          "Explain data, tensor and pipeline parallelism. When do you need each?",
          ("Data parallelism copies the model and splits the batch; tensor parallelism splits "
           "each matrix multiply over devices; pipeline parallelism gives each device a range "
           "of layers. You need more than data parallelism when the model does not fit.",
           "Data parallelism all-reduces the gradients once per step (or reduce-scatters them "
           "with ZeRO). Tensor parallelism communicates inside every layer (an all-reduce after "
           "attention and after the MLP), so it stays inside the NVLink domain. Pipeline "
           "parallelism sends only activations between neighbours but idles (p-1)/(m+p-1) of "
           f"the step: {n['bubble44']:.0%} with 4 stages and 4 micro-batches. Llama 3 405B on "
           f"{big.n_devices:,} GPUs used TP {big.tp} inside a node, PP {big.pp} and DP "
           f"{big.dp} across.",
           "The order of choice follows the bandwidth each needs: TP first, inside the "
           "scale-up domain, because its collectives sit on the critical path of every layer; "
           "PP next, across nodes, because it sends little but needs many micro-batches per "
           "stage (which a fixed global batch limits as DP grows); DP (with ZeRO/FSDP) for the "
           "rest, because its reduction overlaps the backward pass. The binding constraints are "
           "the global batch (critical batch size of the optimiser), the heads (TP must "
           "divide them) and memory; a planner searches the rest."),
          ("what each splits (batch / matmuls / layers)",
           "the communication of each and how often",
           "TP inside the fast domain, and why"),
          ("the bubble formula with a number", "the global batch as the limit on DP and "
           "micro-batches", "a published layout as an example"),
          ("lists the names without the communication", "says any strategy works anywhere"),
          (_E_NVLINK, "pipeline parallelism has no idle time"),
          ("Why not TP = 64 for a 70B model?", "What limits the number of micro-batches?"),
          level=1),
        Q("tp_vs_pp", "Parallelism",
          "A model does not fit on one node. Would you add tensor or pipeline parallelism "
          "across nodes, and why?",
          ("Pipeline across nodes: it sends less data, only the activations at stage "
           "boundaries.",
           "Tensor parallelism all-reduces the activations twice per layer, forward and "
           "backward, and each layer waits for them; across nodes they run at the NIC's "
           f"{BPS(n['ib'])} per GPU instead of NVLink's {BPS(n['nvlink'])}. Pipeline stages send "
           "one activation per micro-batch per boundary and overlap it, at the price of a "
           "bubble that more micro-batches shrink.",
           "Pipeline across nodes, unless the global batch cannot give each stage enough "
           "micro-batches (the bubble then costs more than TP's exposed all-reduces) or the "
           "stages cannot balance (the embedding and the output layer on the end stages: "
           "Llama 3 gave them fewer layers). Interleaved schedules divide the bubble by the "
           "virtual stages at the cost of more sends; zero-bubble schedules split the backward. "
           "Check with the estimator, then with one step on the real cluster."),
          ("pipeline across nodes", "tensor parallelism's per-layer all-reduces on the "
           "critical path", "the bubble as pipeline's cost"),
          ("NVLink against NIC bandwidth in numbers", "interleaving or zero-bubble schedules",
           "uneven stages at the ends"),
          ("chooses without a reason", "ignores the bubble"),
          (_E_NVLINK,),
          (f"How many micro-batches make the bubble under 10% with 4 stages? ({n['m_10pct']}.)",
           "What do interleaved stages cost?"),
          level=2),
        Q("context_parallelism", "Parallelism",
          "What does context parallelism split, and how does attention still see the whole "
          "sequence?",
          ("It splits the sequence over devices; each device holds a chunk of the tokens and "
           "exchanges keys and values for attention.",
           "Each device keeps its chunk's queries and either all-gathers K and V (Llama 3's "
           "choice) or passes them around a ring, computing attention block by block (ring "
           "attention) while the next block arrives. Everything outside attention is "
           "token-wise, so it needs no communication; the weights' gradients are reduced like "
           "data parallelism's.",
           "Causal masking unbalances the chunks (the last chunk attends to everything, the "
           "first to itself), fixed by giving each device two chunks from opposite ends "
           "(zig-zag). Ring attention hides the exchange behind attention only while the chunk "
           "is long enough; Ulysses (all-to-all over heads) needs the heads to divide cp and "
           "replicates kv heads under GQA. Llama 3 405B trained its 128K phase with CP "
           f"{long.cp if hasattr(long, 'cp') else 16}."),
          ("splits the sequence", "K and V exchanged (all-gather or ring)", "why only "
           "attention needs it"),
          ("causal load balance and the zig-zag split", "Ulysses against ring", "when the "
           "exchange stops hiding"),
          ("confuses it with sequence parallelism of TP", "thinks each device sees only its "
           "chunk"),
          ("context parallelism splits the heads",),
          ("How big must a chunk be for the ring to hide?", "How does GQA change the "
           "exchange?"),
          level=3),
        Q("expert_parallelism", "Parallelism",
          "What is expert parallelism, and what does it cost?",
          ("Each device holds some of the experts of a mixture-of-experts layer, and tokens "
           "are sent to the device of the experts they are routed to.",
           "Two all-to-alls per MoE layer forward (dispatch and combine) and two backward, of "
           "the routed tokens' activations (k copies each). It avoids splitting each expert's "
           "matmuls (TP) and keeps the experts' weights and optimizer state sharded, so it "
           "scales the parameter count at roughly constant compute per token.",
           "The all-to-all is bandwidth-bound and its size grows with the top-k; across nodes "
           "it can dominate the step, so EP usually stays inside a node or a rack, and "
           "routing is made node-limited (DeepSeek-V3 sends a token to at most 4 nodes). Load "
           "imbalance makes the slowest expert set the pace; capacity factors drop tokens, "
           "auxiliary or bias-based balancing keeps the load even."),
          ("experts over devices", "tokens moved by all-to-all", "scales parameters at fixed "
           "compute per token"),
          ("the all-to-all's size (tokens x k x D)", "load imbalance and capacity factor",
           "node-limited routing"),
          ("says EP needs all-reduces", "ignores load balance"),
          ("every token visits every expert",),
          ("What happens when one expert gets twice its share?", "EP across nodes or inside?"),
          level=3),
        Q("choose_layout", "Parallelism",
          "You have 1,024 H100s and a 70B model to train. How do you choose the degrees of "
          "parallelism?",
          ("Fit the model first (shard it with ZeRO or split it with TP/PP), then use data "
           "parallelism for the rest.",
           "Memory first: 16 bytes per parameter of model states "
           f"({B(n['mixed'] * n['n70'])} for 70B) must be sharded; then TP at most 8 (one "
           "node), PP only if needed, DP for the rest, with the global batch fixed by the "
           "optimiser. Estimate each candidate's step time and memory; keep the fastest that "
           "fits.",
           "Let a planner enumerate every valid plan (TP dividing the heads, PP the layers, "
           "micro-batches the batch) with a step-time model that charges every collective, "
           "then validate the top few on the cluster: the model misses kernel efficiency, "
           "stragglers and the network's real behaviour. The best plan often surprises "
           "(FSDP with a small TP beats 3D layouts when the batch per GPU is large). The "
           "design answers of level 3 show the planner's ranking."),
          ("memory first", "TP inside the node", "DP for the rest under a batch limit"),
          ("a planner over every valid plan", "validate on the cluster", "a number for the "
           "states"),
          ("a fixed recipe without reasons",),
          (_E_8B,),
          ("What would make you choose pipeline parallelism?", "How would you validate the "
           "choice in one day?"),
          level=2),
        # ---- Memory ------------------------------------------------------------------------
        Q("step_memory", "Memory of a training step",
          "What is in GPU memory during a training step of an 8B model on one GPU, and how "
          "big is each part?",
          ("The weights, the gradients, the optimizer state and the activations saved for the "
           "backward pass.",
           f"Mixed-precision Adam: {n['mixed']:.0f} bytes per parameter, "
           f"{B(n['mixed'] * n['n8'])} for {n['n8'] / 1e9:.1f}B parameters, before any "
           f"activation: more than an {B(n['hbm'])} H100. The library's breakdown for one "
           f"4,096-token sequence: parameters {B(m8['parameters'])}, gradients "
           f"{B(m8['gradients'])}, optimizer {B(m8['optimizer'])}, activations "
           f"{B(m8['activations'])}, logits {B(m8['logits'])}.",
           "Beyond the textbook tensors: the fp32 logits at the loss (vocabulary x tokens x 4 "
           "bytes, twice), communication buffers, the CUDA context and NCCL's reserve, and "
           "allocator fragmentation. Activations scale with micro-batch x sequence and layers; "
           "recomputation trades them for FLOPs, ZeRO shards the states, and the peak comes "
           "early in the backward pass, while every activation is still stored and the first "
           "gradients are being allocated."),
          ("the four parts", "16 bytes per parameter with its split",
           "activations scale with tokens in flight"),
          ("logits and buffers", "where the peak is", "what reduces each part"),
          ("weights only", "forgets the optimizer state"),
          (_E_8B, _E_H100),
          ("What changes with ZeRO-3 on 8 GPUs?", "Why are the logits big for Llama 3?"),
          level=1),
        Q("zero_stages", "Memory of a training step",
          "What do ZeRO stages 1, 2 and 3 shard, and what do they cost in communication?",
          ("They shard the optimizer state (1), then also the gradients (2), then also the "
           "weights (3) over the data-parallel ranks.",
           "Per device, for Ψ parameters over dp ranks in mixed precision: stage 0 keeps "
           "16Ψ, stage 1 4Ψ + 12Ψ/dp, stage 2 2Ψ + 14Ψ/dp, stage 3 16Ψ/dp. Stages 1 and 2 cost the same traffic as plain DP (a "
           "reduce-scatter plus an all-gather is an all-reduce); stage 3 all-gathers the "
           "weights in the forward and again in the backward: about 1.5x DP's traffic.",
           "Stage 3's all-gathers must be prefetched to overlap (FSDP's units); with many "
           "micro-batches (gradient accumulation) ZeRO-2/3 either keeps an unsharded "
           "accumulator or reduce-scatters after each micro-batch. HSDP shards inside a node "
           "and replicates across, trading memory for cheaper traffic. Offloading states to "
           f"the host runs at PCIe speed: {BPS(n['pcie4'])} each way on PCIe 4.0 x16."),
          ("what each stage shards", "stage 3 adds weight all-gathers",
           "memory per device in a formula"),
          ("1.5x traffic at stage 3", "prefetch and gradient accumulation", "HSDP"),
          ("stages named without their memory",),
          (_E_8B, _E_PCIE),
          ("When does ZeRO-3's traffic stop hiding?", "What does offloading cost per step?"),
          level=2),
        Q("recompute", "Memory of a training step",
          "What is activation recomputation, and what does it cost?",
          ("Instead of storing every activation for the backward pass, store a few and "
           "recompute the rest during the backward.",
           "Full recomputation keeps only each layer's input and reruns the forward in the "
           "backward: the step does 8N instead of 6N FLOPs per token, a third more work, so "
           "MFU (model FLOPs) drops by a quarter while HFU (hardware FLOPs) does not. Selective recomputation recomputes only "
           "the attention's big, cheap intermediates: "
           f"{n['sel']:.1%} more FLOPs for Llama 3 70B at 8K tokens, most of the memory saved.",
           "With FlashAttention the attention scores are never stored, so selective "
           "recomputation saves less than the paper's numbers; the choice is per layer "
           "(checkpoint every k-th layer), and it trades against pipeline depth and micro-batch "
           "size. Report both MFU and HFU, or a recomputing run looks better than it is."),
          ("what is stored and what recomputed", "the FLOP cost", "memory saved"),
          ("selective vs full with numbers", "MFU vs HFU", "interaction with FlashAttention"),
          ("says it is free",),
          (),
          ("How do you choose which layers to checkpoint?", "What does it do to MFU?"),
          level=2),
        Q("dp_bottleneck", "Memory of a training step",
          "Where is the bottleneck of data parallelism?",
          ("Every replica holds the whole model, and the gradients are averaged across "
           "replicas every step.",
           f"Memory: {n['mixed']:.0f} bytes per parameter in mixed precision, so an "
           f"{B(n['hbm'])} GPU holds at most {n['max_dp'] / 1e9:.0f}B parameters before any "
           "activation. Communication: the all-reduce moves about twice the gradient bytes "
           "per device per step whatever the batch, over the slow inter-node network.",
           "It is hidden only while the backward pass per device is longer than the "
           "all-reduce: as DP grows at a fixed global batch, the per-device batch shrinks and "
           "the reduction stops hiding. The global batch itself is capped by the optimiser "
           "(critical batch size), which caps DP; ZeRO/FSDP remove the memory limit, not "
           "this one."),
          ("model-state memory per replica", "all-reduce volume independent of batch",
           "overlap with backward"),
          ("when overlap stops", "the batch-size limit", "ZeRO fixes memory, not this"),
          ("only memory, or only communication",),
          (_E_8B, _E_H100),
          ("What is the largest model plain DP trains on this GPU?", "How does the critical "
           "batch size enter?"),
          level=1),
        Q("mixed_precision", "Memory of a training step",
          "Why train in bf16 with an fp32 master copy, and what changes with fp8?",
          ("bf16 halves memory and doubles speed; the fp32 copy keeps small updates from "
           "being lost.",
           "An update of size 1e-4 relative to a weight vanishes in bf16's 8 bits of precision, so "
           "the optimizer updates an fp32 copy; bf16 keeps fp32's exponent range, so unlike "
           "fp16 it needs no loss scaling. fp8 matmuls double the peak again "
           f"({n['h'].peak_flops_per_s('fp8') / 1e12:,.0f} against "
           f"{n['h'].peak_flops_per_s('bf16') / 1e12:,.0f} TFLOP/s dense on an H100) with "
           "per-tensor or per-block scales.",
           "fp8 training keeps master weights, optimizer state and sensitive ops (norms, "
           "softmax, the output layer) in higher precision and scales each tensor (delayed "
           "or current scaling, or fine-grained blocks as DeepSeek-V3 did); the gain is "
           "smaller than 2x because only the matmuls speed up and the casts cost bandwidth."),
          ("bf16 range vs fp16", "fp32 master copy and why", "fp8 doubles the peak"),
          ("scaling for fp8", "what stays in high precision", "why the real gain is < 2x"),
          ("says bf16 needs loss scaling",),
          (_E_8B,),
          ("What breaks first in fp8?", "Why not keep Adam moments in bf16?"),
          level=2),
        # ---- Utilisation -------------------------------------------------------------------
        Q("mfu", "Utilisation",
          "What is MFU, how do you compute it, and how does it differ from HFU?",
          ("The share of the hardware's peak FLOP/s spent on the model's own FLOPs.",
           "MFU = (model FLOPs per token x tokens per second) / (devices x dense peak), with "
           "6N plus attention per token for training. HFU counts the FLOPs the hardware "
           "actually does, recomputation included, so HFU >= MFU.",
           "Use the dense peak (the 'with sparsity' figure is twice it), count attention "
           "(it matters at long context), and compare runs by MFU, not HFU, because "
           "recomputation inflates HFU. Llama 3 405B's published runs reached "
           f"{n['mfu_lo']:.0%} to {n['mfu_hi']:.0%} on H100s ({big.mfu:.0%} on "
           f"{big.n_devices:,} GPUs)."),
          ("definition with the dense peak", "6N (plus attention)", "HFU includes "
           "recomputation"),
          ("sparsity trap", "attention at long context", "a published figure"),
          ("uses the sparsity peak",),
          (),
          ("Your MFU is 60% on 8 GPUs and 30% on 1,024: what changed?",),
          level=1),
        Q("mfu_at_scale", "Utilisation",
          "Why does MFU drop as a run scales to more GPUs?",
          ("Communication grows and the work per GPU shrinks.",
           "At a fixed global batch, more GPUs mean fewer tokens per GPU per step: the "
           "gradient reduction and the ZeRO all-gathers stop hiding behind compute, pipelines "
           "get fewer micro-batches per stage (a larger bubble), and matmuls get smaller "
           "(lower kernel efficiency). Collectives over more nodes also cost more latency.",
           "Add the effects a model misses: stragglers (the step waits for the slowest GPU), "
           "network congestion between jobs, failures and restarts (goodput, not MFU), and "
           "the critical batch size that forbids simply raising the batch. The fixes are "
           "structural: more TP/PP per replica, overlap, larger batch where the optimiser "
           "allows, and hierarchical collectives."),
          ("fewer tokens per GPU", "exposed communication", "bubble or smaller kernels"),
          ("stragglers and congestion", "batch-size limit", "goodput vs MFU"),
          ("blames only the network",),
          (),
          ("How would you tell exposed communication from stragglers in a profile?",),
          level=2),
        Q("frontier_time", "Utilisation",
          "How long does a frontier pre-training run take?",
          ("Months: the compute alone takes weeks on thousands of GPUs, and failures and "
           "restarts add to it.",
           f"Llama 3 405B: its training FLOPs on {big.n_devices:,} H100s at {big.mfu:.0%} MFU "
           f"is {n['frontier_days']:.0f} days of pure compute (t = FLOPs / (n x C x MFU)); the "
           "real run took longer with failures and restarts.",
           "Runs are sized to end in a few months: longer and the hardware and the ideas are "
           "outdated, shorter needs a cluster that does not exist or a batch beyond the "
           "critical size. Goodput (the share of wall-clock time that makes progress) is the "
           f"other factor: Llama 3 reported over {n['effective']:.0%} effective training time."),
          ("order of magnitude", "t = FLOPs / (n C MFU)", "failures add time"),
          ("why not longer or shorter", "goodput"),
          ("off by 10x",),
          (),
          ("What sets the number of GPUs?",),
          level=1),
        # ---- Hardware ----------------------------------------------------------------------
        Q("nvlink", "Hardware and networks",
          "What are NVLink and NVSwitch, and why do they matter for training?",
          ("NVLink is NVIDIA's fast GPU-to-GPU link; NVSwitch connects all the GPUs of a "
           "node so any pair talks at full speed.",
           f"On H100, 18 NVLink links give {BPS(n['nvlink'])} each way "
           f"({BPS(2 * n['nvlink'])} counting both directions, the datasheet's figure). Between "
           f"nodes traffic goes over InfiniBand at {BPS(n['ib'])} per GPU: "
           f"{n['nvlink'] / n['ib']:.0f}x slower, which is why TP stays inside the node.",
           "NVSwitch also reduces in the switch (NVLS / SHARP), which makes small all-reduces "
           "cheaper; NVL72 racks extend the domain to 72 GPUs, which changes where TP and EP "
           "can go. NVLink does not make the memory one pool: a peer's HBM is "
           f"{n['hbm_bw'] / n['nvlink']:.0f}x slower to read than one's own."),
          ("link vs switch", "one-way vs both directions", "an order of magnitude over IB"),
          ("in-switch reduction", "NVL72", "peer memory is not local memory"),
          ("bandwidth off by 2x without saying which direction",),
          (_E_NVLINK, _E_PCIE),
          (f"How long does an all-reduce of 1 GB take inside a node? (About "
           f"{S(n['ar_1gb_node'])} on a ring at NVLink's one-way bandwidth.)",),
          level=1),
        Q("networks", "Hardware and networks",
          "Compare NVLink, InfiniBand and TPU ICI: topology, bandwidth, what runs on each.",
          ("NVLink connects GPUs inside a node, InfiniBand connects nodes, ICI connects TPU "
           "chips directly in a torus.",
           f"Per device, one way: NVLink {BPS(n['nvlink'])} (H100), InfiniBand "
           f"{BPS(n['ib'])} per GPU (one {n['ib'] * 8 / 1e9:.0f} Gb/s NIC each), TPU v5p ICI {BPS(n['ici'])} over "
           "6 links of a 3D torus. Switched networks give any pair full bandwidth; a torus "
           "gives neighbours full bandwidth and collectives that follow the rings.",
           "A TPU slice has no separate scale-up and scale-out tiers up to thousands of chips, "
           "so TP-like sharding can span more chips, but collectives on a strided sub-torus "
           "and without wraparound cost more; GPU clusters build rail-optimised fat trees so "
           f"that GPU i of every node shares a switch. Host links are slower still: PCIe 5.0 "
           f"x16 is {BPS(n['pcie5'])} each way."),
          ("which connects what", "numbers per device, one way", "switch vs torus"),
          ("rails", "wraparound and strided groups", "PCIe as the host link"),
          ("bits and bytes mixed",),
          (_E_PCIE, _E_NVLINK),
          ("Why does a 2D torus all-reduce use both directions?",),
          level=2),
        Q("roofline", "Hardware and networks",
          "When is a matrix multiply compute-bound, and what is the critical batch?",
          ("When it does more FLOPs per byte it reads than the chip's FLOP/s per byte of "
           "memory bandwidth.",
           "A [B, D] x [D, F] bf16 matmul does 2BDF FLOPs on about 2DF bytes of weights: B "
           "FLOPs per byte. It is compute-bound above B* = peak / bandwidth: "
           f"{n['bstar']:.0f} tokens on an H100.",
           "Decode at batch 1 runs at intensity ~1, hundreds of times under the ridge: hence "
           "batching, quantisation and speculative decoding. Kernels reach the ridge later "
           "than the ideal (tiles, waves), and fp8 doubles the peak but halves the bytes, so "
           "the critical batch stays about the same."),
          ("intensity vs ridge", "B* = C / W", "a number"),
          ("decode as the example", "fp8's effect", "kernel efficiency"),
          ("confuses FLOPs and FLOP/s",),
          (),
          (f"What is the intensity of a Llama 3 70B decode step at batch 64 and 8K context? "
           f"(About {n['intensity64']:.0f} FLOPs per byte: the cache reads dilute the weights'.)",),
          level=1),
        # ---- Collectives -------------------------------------------------------------------
        Q("collectives", "Collectives",
          "What do all-reduce, all-gather, reduce-scatter and all-to-all do, and what do "
          "they cost?",
          ("All-reduce sums an array over devices and gives everyone the result; all-gather "
           "concatenates shards; reduce-scatter sums and leaves each device one shard; "
           "all-to-all sends each device a different piece.",
           "On a ring with one-way bandwidth W: all-gather and reduce-scatter take "
           "(n-1)/n x V/W, all-reduce twice that (it is a reduce-scatter then an all-gather). "
           f"1 GB over 8 H100s on NVLink: {S(n['ar_1gb_node'])}.",
           "Add the latency term (2(n-1) steps of a ring all-reduce; about log n for trees), which dominates small "
           "messages: libraries switch algorithms by size (one-shot, two-shot, NVLS in the "
           "switch, tree across nodes). All-to-all's cost depends on the topology's bisection; "
           f"across 8 nodes the same 1 GB all-reduce takes {S(n['ar_1gb_ib'])} hierarchically."),
          ("what each does", "2(n-1)/n V/W for all-reduce", "all-reduce = RS + AG"),
          ("latency term and algorithm choice", "hierarchical", "all-to-all and bisection"),
          ("all-reduce costs n V/W",),
          (_E_NVLINK,),
          ("Why is a ring all-reduce bandwidth-optimal?", "When does a tree win?"),
          level=1),
        Q("hierarchical", "Collectives",
          "How does an all-reduce over many nodes work, and which link sets its time?",
          ("Reduce inside each node first, then across nodes, then share the result inside "
           "each node again.",
           "Reduce-scatter on NVLink (each GPU ends with 1/8 of the sum), all-reduce across "
           "nodes of that 1/8 over each GPU's own NIC in parallel, all-gather on NVLink. Only "
           "1/8 of the data crosses the network per GPU, but at a bandwidth "
           f"{n['nvlink'] / n['ib']:.0f}x lower, so the inter-node phase dominates.",
           "Rail-optimised networks make the 8 inter-node all-reduces independent; NCCL uses "
           "rings or trees (or SHARP in the switches) for that phase by message size, and the "
           "latency of thousands of nodes favours trees. Overlap with compute hides it only "
           "while the backward pass is longer."),
          ("three phases", "1/8 crosses the network", "the network phase dominates"),
          ("rails", "trees vs rings at scale", "in-network reduction"),
          ("a flat ring at NVLink speed",),
          (),
          ("What if the nodes had 4 NICs instead of 8?",),
          level=2),
        # ---- Serving -----------------------------------------------------------------------
        Q("kv_sizing", "Serving",
          "How big is the KV cache, and how many sequences fit on a server?",
          ("Each layer stores a key and a value vector per token; it grows with batch and "
           "context.",
           f"2 x L x K x H x bytes per token: {B(n['kv70'])} per token for Llama 3 70B in bf16 "
           f"(K = 8 kv heads), {B(n['kv70_8k'])} per 8K-token sequence. What fits is the HBM "
           "left after every weight, over the bytes per sequence.",
           "Grouped-query attention divided it by N/K "
           f"(multi-head would be {B(n['kv70_mha'])} per token); MLA caches a compressed "
           "latent; fp8 KV halves it again. Beyond tp = K the kv heads are copied, so the "
           "cache per GPU stops shrinking; real servers also lose memory to fragmentation "
           "(paged attention) and the framework's reserve."),
          ("2 L K H bytes per token", "times batch and context", "memory left after weights"),
          ("GQA/MLA/fp8", "replication beyond K", "reserve and fragmentation"),
          ("uses N instead of K", "forgets V"),
          (_E_H100,),
          (f"How many 8K sequences fit beside Llama 3 70B on 8 H100s? (About "
           f"{n['seqs_8k']:.0f}, by the datasheet's HBM and nothing else.)",),
          level=1),
        Q("batching", "Serving",
          "Why batch at inference, and what is continuous batching?",
          ("Decode reads every weight for each step; batching lets many sequences share "
           "that read.",
           "Decode is memory-bound: a step costs about the weight bytes over the bandwidth "
           "whatever B is, until B nears the critical batch. Tokens/s grows almost linearly "
           "with B while latency per token barely moves. Continuous batching admits new "
           "requests at every step instead of waiting for a whole batch to finish.",
           "The limits: KV cache memory (batch x context), the time per output token budget, "
           "and prefill interference (chunked prefill mixes prompt chunks into decode steps). "
           "Past the knee, more batch raises latency and little else; the operating point "
           "comes from the SLO, not from the roofline alone."),
          ("shared weight reads", "memory-bound decode", "continuous batching defined"),
          ("KV memory limit", "chunked prefill", "SLO-driven operating point"),
          ("thinks batching speeds up a single request",),
          (),
          ("Where is the knee for Llama 3 70B on 8 H100s?",),
          level=1),
        Q("paged_attention", "Serving",
          "What problem does paged attention solve?",
          ("Fragmentation of the KV cache memory when sequences have different lengths.",
           "Reserving the maximum length per sequence wastes most of the cache; paged "
           "attention stores the cache in fixed-size blocks (16 tokens in vLLM) found through "
           "a block table, so a sequence wastes at most one partly filled block, and blocks "
           "can be shared between sequences with a common prefix.",
           "The kernel pays an indirection; block size trades waste against kernel "
           "efficiency; prefix caching and copy-on-write for beam search come with it; "
           "preemption (swap or recompute) handles running out of blocks."),
          ("fragmentation", "blocks and a block table", "waste at most one block"),
          ("prefix sharing", "preemption", "block-size trade-off"),
          ("confuses it with OS paging to disk",),
          (),
          ("What happens when the blocks run out?",),
          level=2),
        Q("speculative", "Serving",
          "How does speculative decoding speed up generation without changing the output?",
          ("A small draft model guesses several tokens; the big model checks them all in one "
           "step and keeps the ones it agrees with.",
           "With acceptance rate a and g drafted tokens, a target step yields "
           "(1 - a^(g+1))/(1 - a) tokens: "
           f"{n['spec_tokens']:.2f} at a = 0.8, g = 4; with a draft step costing 5% of a target "
           f"step, a speed-up of {n['spec']:.2f}x. Rejection sampling keeps the target's "
           "distribution exactly.",
           "It works because decode is memory-bound: verifying g + 1 tokens costs about one "
           "step. At large batch the target step turns compute-bound and the gain vanishes; "
           "self-drafting (Medusa, EAGLE, n-gram lookup) avoids a second model."),
          ("draft then verify", "expected tokens formula", "output unchanged"),
          ("why it needs memory-bound decode", "batch-size effect", "draft variants"),
          ("says the output is approximate",),
          (),
          ("What acceptance rate does a draft need to pay?",),
          level=2),
        Q("quantisation", "Serving",
          "What does quantising the weights to 8 or 4 bits buy at inference?",
          ("Fewer bytes per weight: less memory and faster memory-bound decode.",
           "Decode time is about weight bytes over bandwidth, so int4 weights make it nearly "
           f"4x faster than bf16 at small batch; Llama 3 70B needs {n['min70']} H100s for bf16 "
           f"weights and {n['min70_fp8']} for fp8. Weight-only int4 dequantises before the "
           "matmul (bf16 compute); fp8 on H100 also doubles the matmul peak.",
           "Accuracy: per-group scales (GPTQ, AWQ) keep int4 close; activations have outliers "
           "that make int8 activations harder (SmoothQuant). At large batch decode turns "
           "compute-bound and weight-only quantisation stops helping; KV-cache quantisation "
           "helps long contexts instead."),
          ("bytes, memory-bound decode", "memory saved", "weight-only vs compute precision"),
          ("outliers and scales", "batch-size effect", "KV quantisation"),
          ("says int4 makes the matmuls 4x faster on the tensor cores",),
          (),
          ("Why might fp8 prefill be faster but int4 decode not?",),
          level=2),
        Q("disaggregation", "Serving",
          "Why separate prefill and decode onto different GPUs?",
          ("Prefill is compute-bound and decode memory-bound; separating them lets each run "
           "at its best.",
           "Mixed on one GPU, a long prefill stalls every sequence's next token (TTFT vs TPOT "
           "interference); chunked prefill softens it. Disaggregation runs prefill on one "
           "pool, ships the KV cache to a decode pool, and sizes the two pools by their "
           "rates.",
           "The cost is moving the cache (prompt tokens x bytes per token over the network) "
           "and two pools to balance as traffic changes; it pays at large scale with strict "
           "TTFT and TPOT SLOs (DistServe, Splitwise, Mooncake)."),
          ("compute vs memory bound", "interference", "pools sized by rates"),
          ("KV transfer cost", "chunked prefill as the alternative", "SLO goodput"),
          ("thinks decode is compute-bound",),
          (),
          ("How many prefill GPUs per decode GPU?",),
          level=3),
        Q("ttft_tpot", "Serving",
          "What are TTFT and TPOT, and what sets each?",
          ("Time to first token and time per output token: the prompt phase and the "
           "generation phase.",
           "TTFT is the prefill: prompt FLOPs over the delivered FLOP/s (compute-bound) plus "
           "queueing. TPOT is one decode step: weight and cache bytes over HBM bandwidth "
           "(memory-bound) plus, with tensor parallelism, the all-reduces.",
           "Percentiles matter more than means (p99 under load); chunked prefill trades TTFT "
           "against TPOT; goodput counts the requests meeting both SLOs, which is the number "
           "to maximise per dollar."),
          ("definitions", "prefill compute-bound", "decode memory-bound"),
          ("all-reduces in TPOT", "percentiles", "goodput"),
          ("swaps the bounds",),
          (),
          ("What raises p99 TTFT under load?",),
          level=1),
        Q("tp_decode", "Serving",
          "Why does tensor-parallel decode stop getting faster as you add GPUs?",
          ("Each layer's all-reduces add a fixed cost that does not shrink with more GPUs.",
           f"A decode step of Llama 3 70B at batch 1 over 8 H100s reads {S(n['dec_mem'])} of "
           f"weights and cache per GPU but also waits for {n['n_ar']} all-reduces (2L + 1: "
           f"after each attention and MLP, and the embedding): {S(n['dec_comm'])}. Doubling "
           "tp halves the reads, not the all-reduces.",
           "Small all-reduces are latency-bound (microseconds each, one after the other); "
           "beyond the node they cross the network. Engines fuse them with the next op, use "
           "one-shot or in-switch algorithms, or overlap them; beyond the knee, replicas "
           "raise throughput better than more TP."),
          ("per-layer all-reduces", "fixed latency cost", "reads shrink, all-reduces don't"),
          ("2L + 1 count", "one-shot/NVLS", "replicas vs TP"),
          ("assumes linear speed-up",),
          (),
          ("At what tp does decode turn communication-bound?",),
          level=3),
        # ---- MoE ---------------------------------------------------------------------------
        Q("moe_routing", "Mixture of experts",
          "How does routing in a mixture of experts work, and why does load balance matter?",
          ("A router picks the top-k experts for each token; only those experts run on it.",
           "The router is a linear layer plus softmax; each token goes to k of E experts and "
           "their outputs are summed with the router's weights. If one expert gets most "
           "tokens, its device is the bottleneck and others idle; an auxiliary loss (or a "
           "per-expert bias, DeepSeek-V3) pushes the load to be even, and a capacity factor "
           "caps tokens per expert.",
           "Dropped tokens hurt quality; too strong an auxiliary loss hurts it too. "
           "Fine-grained experts with shared experts (DeepSeek) and node-limited routing keep "
           "the all-to-all cheap; routing collapse early in training is the failure to "
           "watch."),
          ("top-k router", "imbalance idles devices", "aux loss or capacity"),
          ("bias-based balancing", "dropped tokens", "shared / fine-grained experts"),
          ("every expert sees every token",),
          (),
          ("What does a capacity factor of 1.25 mean?",),
          level=2),
        Q("moe_serving", "Mixture of experts",
          "Why is a mixture of experts cheap to train per token but hard to serve?",
          ("Each token uses only k experts, but all experts must be in memory.",
           "Compute per token follows the active parameters, memory the total. At batch 1 a "
           f"decode step reads k of E experts per layer ({n['experts_b1']:.0f} of 8 for "
           f"Mixtral); at batch 16, under uniform routing, {n['experts_b16']:.1f}: all of them. "
           "So large batches lose the MoE's bandwidth advantage.",
           "Serving uses expert parallelism across many GPUs so each holds few experts, "
           "batches large for the all-to-all to pay, and balances hot experts by replication; "
           "memory per GPU, not FLOPs, sets the deployment size."),
          ("active vs total", "all experts resident", "batch touches all experts"),
          ("expected experts formula", "EP for serving", "hot-expert replication"),
          ("sizes memory by active parameters",),
          (_E_NVLINK,),
          (f"How many H100s does the GPT-4-class MoE estimate need for its fp8 weights alone? "
           f"({n['gpt4_fp8']}, before any cache.)",),
          level=3),
        # ---- Long context ------------------------------------------------------------------
        Q("long_context", "Long context",
          "What changes when you train or serve at 128K tokens of context?",
          ("Attention's cost grows with the square of the length and the KV cache with the "
           "length.",
           "Training: attention FLOPs grow as T^2 and dominate beyond a few tens of thousands "
           "of tokens; activations per sequence no longer fit, so context parallelism splits "
           "the sequence. Serving: the KV cache per sequence grows linearly "
           f"({B(n['kv70'] * 131072)} for one 128K sequence of Llama 3 70B) and limits the "
           "batch; prefill turns quadratic.",
           "Models reach long context by a late phase of training with RoPE scaling and "
           f"context parallelism (Llama 3 405B: CP {long.cp if hasattr(long, 'cp') else 16}, "
           f"{long.mfu:.0%} MFU at 128K); serving uses GQA/MLA, sliding windows, KV "
           "quantisation or offload, and prefix caching."),
          ("T^2 attention", "KV cache linear in T", "context parallelism"),
          ("RoPE scaling phase", "cache-shrinking techniques", "a published number"),
          ("says everything scales linearly",),
          (_E_H100,),
          (f"How many 128K sequences fit on 8 H100s beside Llama 3 70B? (About "
           f"{n['seqs_128k']:.0f}.)",),
          level=2),
        # ---- Reliability and debugging -----------------------------------------------------
        Q("failures", "Reliability and debugging",
          "A run on 16,384 GPUs: how often does it fail, and how often should it checkpoint?",
          ("Often, because any of thousands of parts can fail; checkpoint regularly and "
           "restart from the last one.",
           f"The job's MTBF is the GPU's over n: at {n['gpu_mtbf_h']:,} hours per GPU, "
           f"{n['job_mtbf'] / 3600:.1f} hours for 16,384 (Llama 3 saw one interruption every "
           f"{n['llama_mtbf'] / 3600:.1f} hours). Checkpoint every sqrt(2 x checkpoint time x "
           f"MTBF): with a {B(n['ck'])} checkpoint of 405B written at {BPS(n['storage'])} "
           f"({S(n['ck_t'])}), every {S(n['yd'])}.",
           "Asynchronous checkpoints copy to host memory and write in the background, "
           "shrinking the stall; restart time (scheduling, loading, NCCL init) often costs "
           "more than the lost work; spare nodes and automated detection of slow or faulty "
           f"GPUs kept Llama 3's effective training time above {n['effective']:.0%}."),
          ("MTBF / n", "Young's interval", "restart from checkpoint"),
          ("async checkpoints", "restart time", "goodput"),
          ("checkpoints once a day at this scale",),
          (),
          (f"What if a checkpoint stalled training for 10 minutes? (Checkpoint every "
           f"{S(n['yd_10min'])}; goodput falls to about {n['gp_10min']:.0%} before restarts.)",),
          level=3),
        Q("sync_sgd", "Reliability and debugging",
          "Why do large runs use synchronous SGD rather than asynchronous updates?",
          ("Synchronous training computes the exact gradient of the whole batch, so it "
           "behaves like one big device.",
           "Asynchronous updates apply stale gradients computed on old weights, which hurts "
           "convergence at scale and makes runs hard to reproduce. Synchrony's cost, waiting "
           "for the slowest worker and the all-reduce, is hidden by overlapping communication "
           "with the backward pass.",
           "Stragglers are the real cost of synchrony at thousands of GPUs: detect and "
           "replace slow nodes rather than tolerate staleness; local-SGD / DiLoCo-style "
           "methods sync every few hundred steps for training across datacenters."),
          ("exact large-batch gradient", "staleness", "overlap hides the cost"),
          ("stragglers", "local SGD / DiLoCo"),
          ("says async is faster so better",),
          (),
          ("When would you consider infrequent synchronisation?",),
          level=1),
        Q("slow_run", "Reliability and debugging",
          "A run is 30% slower than your estimate. How do you find out why?",
          ("Profile a step and see where the time goes.",
           "Compare the step's parts with the estimate: compute kernels (MFU per matmul), "
           "exposed communication (NCCL kernels not overlapped), pipeline bubble, data "
           "loading and host overhead (gaps between kernels). Then change one thing and "
           "re-measure.",
           "Check across ranks: one slow GPU or link (a straggler) slows everyone in a "
           "synchronous job; look at per-rank step times, NCCL tests between node pairs, "
           "thermal throttling, and the network's congestion from other jobs. Calibrate the "
           "model's constants on the measured steps so the next estimate is honest."),
          ("profile", "compare parts with the estimate", "one change at a time"),
          ("stragglers across ranks", "NCCL tests", "calibration"),
          ("guesses without measuring",),
          (),
          ("The profile shows long gaps between kernels: what now?",),
          level=2),
        Q("diverging_run", "Reliability and debugging",
          "The loss spikes and diverges at step 40,000. What do you do?",
          ("Restart from a checkpoint before the spike, perhaps with a lower learning rate.",
           "Roll back to a checkpoint before the spike and skip the batches that preceded it; "
           "check gradient norms, the learning-rate schedule and the data around the step. "
           "Common causes: bad data, a learning rate too high for the batch, attention-logit "
           "growth, numerical overflow.",
           "Mitigations seen in large runs: gradient clipping, QK-norm or logit soft-capping, "
           "z-loss on the output, a lower Adam β2 or a smaller ε; a spike that recurs after skipping data points to optimisation, not data. "
           "Silent data corruption from a faulty GPU can also look like divergence: compare "
           "replicas."),
          ("rollback and skip", "inspect grad norm / lr / data", "name two causes"),
          ("logit growth fixes", "silent data corruption", "recurring vs one-off"),
          ("keeps training and hopes",),
          (),
          ("How would you tell a data problem from an optimiser problem?",),
          level=3),
    ]


def by_key() -> dict[str, Concept]:
    """The bank keyed by question key."""
    return {c.key: c for c in bank()}


def rubric_markdown(c: Concept) -> str:
    """The rubric of one question, as Markdown lists."""
    def items(xs):
        return "\n".join(f"- {x}" for x in xs) if xs else "- (none)"
    flags = c.red_flags + ("a number off by a factor the candidate cannot explain",)
    return (f"**Pass** (score 2) contains:\n{items(c.passing)}\n\n"
            f"**Strong** (score 3) adds at least two of:\n{items(c.strong)}\n\n"
            f"**Weak** (score 1):\n{items(c.weak)}\n\n"
            f"**Red flags** (score 0 unless withdrawn after a follow-up):\n{items(flags)}\n\n"
            f"**Follow-ups:**\n{items(c.follow_ups)}")


def intro_markdown() -> str:
    """The book page's introduction: how to use the bank, the scale and threshold, the errata."""
    cs = bank()
    scale = "\n".join(f"- **{k}**: {v}" for k, v in SCORES.items())
    head = (f"The bank holds {len(cs)} questions in {len(TOPICS)} topics. Each has a model "
            "answer at three depths (1: new graduate, the mechanism; 2: engineer, the "
            "mechanism with its cost in numbers; 3: senior or staff, the trade-offs and where "
            "the simple model breaks) and a rubric. Ask the question, listen, then open the "
            "rubric.\n\n**Scale** (one per question):\n\n" + scale +
            f"\n\nA question passes at {PASS_SCORE}. A session passes with a mean of at least "
            f"{SESSION_PASS_MEAN:g} over its concept questions, at most {SESSION_MAX_BELOW} "
            "below 2, and no red flag standing. Every number below is computed by "
            "`scaling_lib` when the page is built.\n\n")
    err = "\n".join(f"- \"{e['claim']}\": {e['correction']} (drill {e['drill']})"
                    for e in errata())
    return head + ("**The four errata** are red flags in every rubric where they apply; each "
                   "has a graded drill in the numbers drill (its errata section):\n\n" + err)


def topic_markdown(topic: str) -> str:
    """The questions of one topic (numbered as in the whole bank), their three answers and their
    rubrics, collapsed."""
    if topic not in TOPICS:
        raise ValueError(f"topic={topic!r}; valid choices: {', '.join(TOPICS)}")
    ordered = [c for t in TOPICS for c in bank() if c.topic == t]
    out = []
    for k, c in enumerate(ordered, 1):
        if c.topic != topic:
            continue
        out.append(f"**Q{k}. {c.question}** *(asked first at level {c.level}; key "
                   f"`{c.key}`)*\n\n"
                   ":::{admonition} Model answers\n:class: dropdown\n"
                   f"**Depth 1.** {c.answers[0]}\n\n**Depth 2.** {c.answers[1]}\n\n"
                   f"**Depth 3.** {c.answers[2]}\n:::\n\n"
                   ":::{admonition} Rubric\n:class: dropdown\n"
                   f"{rubric_markdown(c)}\n:::\n")
    return "\n".join(out)


def page_markdown() -> str:
    """The whole book page as one Markdown text: the introduction, then each topic."""
    return intro_markdown() + "\n\n" + "\n".join(
        f"## {t}\n\n{topic_markdown(t)}" for t in TOPICS)
