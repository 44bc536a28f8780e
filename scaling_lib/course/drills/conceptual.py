"""Conceptual interview questions: model answers and self-scoring rubrics.

:func:`concepts` returns {key: (question, model answer, rubric)} with every number in the answers
computed from the library and the published runs; :func:`reveal` shows one folded, for a reader
to open after answering.

See: the "Interview preparation" part of the book.
"""

from __future__ import annotations

from ... import hardware, memory, transformer
from ...units import DAY, fmt_bytes, fmt_bytes_per_s

def _run_16k():
    """Llama 3 405B's largest published run (Table 4 of the Llama 3 paper)."""
    from ... import published
    return max((r for r in published.RUNS.values() if r.name.startswith("llama3-405b")),
               key=lambda r: (r.n_devices, r.mfu))


def _frontier_days() -> float:
    """Llama 3 405B's training FLOPs on its 16K-GPU run at that run's MFU: days of compute."""
    from ... import published
    run = _run_16k()
    return float(transformer.train_time(published.LLAMA3_405B_TRAIN_FLOPS, run.n_devices,
                                        run.accelerator, run.mfu) / DAY)


def concepts() -> dict:
    """{key: (question, model answer, rubric)}; numbers in the answers come from the library."""
    from ... import published

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
