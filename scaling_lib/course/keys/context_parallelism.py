"""Answer key for Chapter 14 (Context parallelism) exercises.

The implement-it references run on the simulated devices: the notebook asks for 8 CPU devices
(``simulate.use_cpu_devices(8)``) before it calls this module's JAX-using functions.
"""

from __future__ import annotations

import math

import numpy as np

from ... import hardware, memory, models, simulate
from ...parallelism import ParallelPlan
from ...parallelism import context as cx
from ...units import divisors
from ..grading.tables import with_messages

LLAMA3 = ["llama3-8b", "llama3-70b", "llama3-405b"]
# Ex 14.5's starting plan: Llama 3 405B's tensor and pipeline split, full recomputation
LONG_BASE = ParallelPlan(tp=8, pp=16, recompute="full")
CP_RING = 4  # devices of the implement-it exercises


def second_chunk_start(p):
    """Ex 14.1: position of the first token of rank ``rank``'s second chunk."""
    lo, hi = cx.chunk_assignment(p.cp)[p.rank]
    return hi * p.T // (2 * p.cp)


def contiguous_imbalance(p):
    """Ex 14.2: busiest rank's causal work over the average, contiguous shards."""
    return cx.imbalance(p.T, p.cp, balanced=False)


def bytes_per_layer(p):
    """Ex 14.3: bytes one device sends in one layer's forward pass (bf16, one sequence)."""
    return cx.layer_bytes(p.model, p.variant, p.cp, p.T, tp=p.tp)


def ulysses_crossover(p):
    """Ex 14.4: the smallest cp at which Ulysses sends fewer bytes per layer than the
    all-gather (tp = 1, heads' divisibility ignored)."""
    cp = 2
    while cx.layer_bytes(p.model, "ulysses", cp, 8192) >= cx.layer_bytes(p.model, "allgather",
                                                                         cp, 8192):
        cp += 1
    return cp


def cp_needed(p):
    """Ex 14.5: the smallest power-of-two cp that fits one sequence of T tokens on H100s."""
    return cx.cp_for_context("llama3-405b", p.T, "h100", LONG_BASE)


def exposed_share(p):
    """Ex 14.6: the K/V all-gather's time over the attention's, one layer forward, Llama 3 405B
    at tp 8, cp 16."""
    t = cx.layer_times("llama3-405b", "allgather", 16, p.T, "h100", p.W, tp=8)
    return t.comm / t.attention


def allgather_bytes(p):
    """Ex 14.9: V of one layer's K/V all-gather, one sequence, bf16."""
    c = models.get(p.model)
    n, k = cx.heads_per_rank(c, p.tp)
    return 2 * 2 * p.T * k * c.H


def ulysses_max_cp(p):
    """Ex 14.10: the largest cp Ulysses can use at tensor degree p.tp: the library's rules (cp
    divides the query heads per tensor rank; the kv heads split over cp or are replicated)."""
    n, _ = cx.heads_per_rank(p.model, p.tp)
    T = int(n) * 4096  # divisible by every candidate cp: only the heads decide
    return max(d for d in divisors(int(n)) if not cx.constraints(
        p.model, ParallelPlan(cp=d, tp=p.tp, cp_variant="ulysses"), 1, T))


# ---- implement-it exercises (14.7 ring attention, 14.8 Ulysses) ----------------------------------

def _jax():
    import jax

    return jax


def attention_inputs(S, H, seed, heads=None):
    """q, k, v [S, H] (or [S, heads, H]) float32, from ``seed``."""
    rng = np.random.default_rng([seed, 14])
    shape = (S, H) if heads is None else (S, heads, H)
    return tuple(rng.standard_normal(shape).astype(np.float32) for _ in range(3))


def _softmax_attention(q, k, v):
    s = q @ k.T / math.sqrt(q.shape[-1])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v


def attention_reference(S, H, seed):
    """Ex 14.7: full (non-causal) softmax attention of one head on one device, float64."""
    q, k, v = (x.astype(np.float64) for x in attention_inputs(S, H, seed))
    return _softmax_attention(q, k, v)


def multihead_reference(S, heads, H, seed):
    """Ex 14.8: full attention of every head on one device, [S, heads, H]."""
    q, k, v = (x.astype(np.float64) for x in attention_inputs(S, H, seed, heads))
    return np.stack([_softmax_attention(q[:, h], k[:, h], v[:, h]) for h in range(heads)],
                    axis=1)


def _mesh():
    import numpy as _np

    jax = _jax()
    return jax.sharding.Mesh(_np.array(jax.devices()[:CP_RING]), ("cp",))


def _run(local, args, want):
    jax = _jax()
    P = jax.sharding.PartitionSpec
    spec = P("cp", *([None] * (args[0].ndim - 1)))
    fn = jax.jit(jax.shard_map(local, mesh=_mesh(), in_specs=(spec,) * 3, out_specs=spec))
    out = np.asarray(fn(*args))
    got = simulate.emitted_totals(simulate.collectives_in(fn, *args))
    if got != want:
        raise ValueError(f"compiled collectives {got or 'none'} (bytes per kind, group); "
                         f"expected {want}")
    return out


def on_ring(local):
    """Wrap a student's per-device ``local(q, k, v)`` (each [S/4, H]) as ``run(S, H, seed)``
    on a ring of 4 devices: exactly 3 collective-permutes of K and V allowed."""
    def run(S, H, seed):
        args = attention_inputs(S, H, seed)
        block = 2 * args[0].nbytes / CP_RING  # K and V blocks each device sends, per step
        return _run(local, args, {("collective-permute", CP_RING): (CP_RING - 1) * block})

    return run


def on_ulysses(local):
    """Wrap a student's ``local(q, k, v)`` (each [S/4, heads, H]) as ``run(S, heads, H, seed)``
    on 4 devices: AllToAlls of q, k, v and the output (4 arrays of [S, heads, H]) only."""
    def run(S, heads, H, seed):
        args = attention_inputs(S, H, seed, heads)
        return _run(local, args, {("all-to-all", CP_RING): 4 * args[0].nbytes})

    return run


# ---- wrong methods (tests/test_wrong_methods.py: each must FAIL at the cell's tolerance) ---------

def _blocks(S, H, seed):
    q, k, v = (x.astype(np.float64) for x in attention_inputs(S, H, seed))
    n = S // CP_RING
    return q, [(k[i * n:(i + 1) * n], v[i * n:(i + 1) * n]) for i in range(CP_RING)], n


def _wrong_local_block_only(S, H, seed):
    q, blocks, n = _blocks(S, H, seed)
    return np.concatenate([_softmax_attention(q[i * n:(i + 1) * n], *blocks[i])
                           for i in range(CP_RING)])


def _wrong_average_of_blocks(S, H, seed):
    q, blocks, _ = _blocks(S, H, seed)
    return sum(_softmax_attention(q, kb, vb) for kb, vb in blocks) / CP_RING


def _wrong_ulysses_local(S, heads, H, seed):
    q, k, v = (x.astype(np.float64) for x in attention_inputs(S, H, seed, heads))
    n = S // CP_RING
    out = np.zeros_like(q)
    for r in range(CP_RING):
        sl = slice(r * n, (r + 1) * n)
        for h in range(heads):
            out[sl, h] = _softmax_attention(q[sl, h], k[sl, h], v[sl, h])
    return out


def _contiguous_second(p):
    return (p.cp + p.rank) * p.T // (2 * p.cp)


def _crossover_without_k(p):
    c = models.get(p.model)
    return c.N // c.K + 1


def _crossover_at_equality(p):
    c = models.get(p.model)
    return (c.N + c.K) // c.K


def _cp_activations_only(p):
    cp, hbm = 1, float(hardware.get("h100").hbm_bytes)
    while True:
        m = memory.training_memory("llama3-405b", LONG_BASE.with_changes(cp=cp), 1, p.T)
        if m["activations"] + m["logits"] <= hbm:
            return cp
        cp *= 2


WRONG_METHODS = {
    "14.1": {"chunk cp + rank": _contiguous_second,
             "chunk 2·cp - rank (off by one)": lambda p: (2 * p.cp - p.rank) * p.T // (2 * p.cp)},
    "14.2": {"the large-cp limit 2": lambda p: 2.0,
             "the last rank does all the work": lambda p: float(p.cp)},
    "14.3": {"V, the full array": lambda p: bytes_per_layer(p) * (
        p.cp / (p.cp - 1) * (p.cp if p.variant == "ulysses" else 1)),
             "kv heads not split by tp": lambda p: cx.layer_bytes(p.model, p.variant, p.cp,
                                                                  p.T)},
    "14.4": {"N/K + 1 (query heads only)": _crossover_without_k,
             "equal bytes, not fewer": _crossover_at_equality},
    "14.5": {"activations only (model states left out)": _cp_activations_only,
             "Llama 3's cp 16 scaled with T": lambda p: 16 * p.T // 131072},
    "14.6": {"full (non-causal) attention": lambda p: exposed_share(p) / 2,
             "kv heads not split by tp": lambda p: exposed_share(p) * 8},
    "14.7": {"each device's own block only": _wrong_local_block_only,
             "average of the blocks' softmaxes": _wrong_average_of_blocks},
    "14.8": {"attention within each device's tokens": _wrong_ulysses_local},
    "14.9": {"kv heads not split by tp": lambda p: 2 * 2 * p.T * models.get(p.model).K
             * models.get(p.model).H,
             "K only": lambda p: allgather_bytes(p) / 2},
    "14.10": {"the kv heads per rank must divide it too": (
                  lambda p: max(d for d in divisors(int(cx.heads_per_rank(p.model, p.tp)[1]))
                                if cx.heads_per_rank(p.model, p.tp)[0] % d == 0),
                  "with fewer kv heads than c Ulysses replicates each kv head c/k times: only the "
                  "query heads per tensor rank must split over c"),
              "N, ignoring tp": (
                  lambda p: models.get(p.model).N,
                  "tensor parallelism has already split the heads: c divides the N/t query heads "
                  "of one tensor rank")},
}

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '14.1': ('Load balancing pairs an early chunk with a late one.',
             'the sequence is cut into 2c chunks; rank i takes chunk i and its mirror from the end'),
    '14.2': ("With contiguous shards, the last rank's queries see the most keys.",
             "compare the keys the busiest rank's queries attend to with the average rank's"),
    '14.3': ('What does each variant move per layer?',
             'K and V of the sequence for the all-gather; for the AllToAll, the share a device '
             'keeps is 1/c'),
    '14.4': ("Write both variants' bytes and divide; mind what happens when c exceeds K.",
             'Ulysses moves Q, K, V and the output; the all-gather K and V only; the ratio '
             'depends on N, K and c'),
    '14.5': ('Which parts of memory does CP divide, and which does it not?',
             'the weights, gradients and optimizer state stay; the activations divide by cp; '
             'find the smallest that fits'),
    '14.6': ("How do attention's compute and the K/V traffic grow with T?",
             'compute grows as T², traffic as T: their ratio falls as 1/T'),
    '14.7': ('Online softmax rescales what it has when a larger maximum appears.',
             'take the new running max; rescale the old sum and output by the exponent of the '
             "max's change and add the new block's"),
    '14.8': ('Ulysses trades a split sequence for split heads, and back.',
             'the first AllToAll splits the heads axis and gathers the sequence axis; the '
             'second does the reverse'),
    '14.9': ('What does each rank gather?',
             'K and V of the whole sequence, for the kv heads this tensor rank holds'),
    '14.10': ('Ulysses splits the heads over c: which heads must split evenly?',
              'c must divide the query heads left per tensor rank; the kv heads either split '
              'over c or are replicated'),
}


# ---- More listed mistakes, each with what the student reads (issue 21).

def _wrong_ulysses_unscaled(S, heads, H, seed):
    """14.8 wrong method: scores not divided by sqrt(H)."""
    q, k, v = (x.astype(np.float64) for x in attention_inputs(S, H, seed, heads))
    out = []
    for h in range(heads):
        s = q[:, h] @ k[:, h].T
        w = np.exp(s - s.max(axis=-1, keepdims=True))
        out.append((w / w.sum(axis=-1, keepdims=True)) @ v[:, h])
    return np.stack(out, axis=1)


WRONG_METHODS["14.8"]["attention within each device's tokens"] = (
    _wrong_ulysses_local,
    "each device attended only over its own S/4 tokens: the first AllToAll must gather the "
    "whole sequence (split the heads axis, concatenate the sequence axis)")
WRONG_METHODS["14.8"]["scores not scaled by 1/sqrt(H)"] = (
    _wrong_ulysses_unscaled,
    "divide the scores by the square root of the head dimension before the softmax")

_KV_TP = "tensor parallelism splits the kv heads too: count those of one tensor rank"
with_messages(WRONG_METHODS, {
    "14.1": {"chunk cp + rank": "rank i's second chunk mirrors its first from the end",
             "chunk 2·cp - rank (off by one)": "chunks count from 0: the mirror of i is 2c - 1 - i"},
    "14.2": {"the large-cp limit 2": "compute it at the drawn cp, not its limit",
             "the last rank does all the work": "compare the busiest rank with the average one"},
    "14.3": {"V, the full array": "each device keeps its own share and receives the rest",
             "kv heads not split by tp": _KV_TP},
    "14.4": {"N/K + 1 (query heads only)": "Ulysses also moves the kv heads and the output",
             "equal bytes, not fewer": "the question asks where Ulysses sends fewer bytes"},
    "14.5": {"activations only (model states left out)": "the model states take memory too",
             "Llama 3's cp 16 scaled with T": "compute what fits, do not scale Llama 3's plan"},
    "14.6": {"full (non-causal) attention": "causal attention does half the square",
             "kv heads not split by tp": _KV_TP},
    "14.7": {"each device's own block only": "merge every block that arrives around the ring",
             "average of the blocks' softmaxes":
             "softmaxes of blocks do not average: rescale by the running max and sum"},
    "14.9": {"kv heads not split by tp": _KV_TP,
             "K only": "the all-gather brings K and V"},
})
