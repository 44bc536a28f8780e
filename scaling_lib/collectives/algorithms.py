"""The algorithms a collective library picks from, by message size and group, on a switch.

A ring is bandwidth-optimal but takes 2(n - 1) steps for an AllReduce; for small messages the
steps are the cost, and libraries switch to algorithms with fewer steps. Each algorithm is an
alpha-beta pair (s steps, b bytes on the busiest link per array byte), T = s alpha + b V / W,
in the same terms as :func:`scaling_lib.collectives.cost_terms` (W one-way per device):

    ring      AllReduce s = 2(n - 1),  b = 2(n - 1)/n   (NCCL's ring; the large-message default)
    one_shot  AllReduce s = 3,         b = n - 1        (every GPU reads the whole array from
                                                         each peer and reduces it itself)
    two_shot  AllReduce s = 5,         b = 2(n - 1)/n   (reduce-scatter then all-gather, each
                                                         one direct step through the switch)
    nvls      AllReduce s = 3,         b = (n + 1)/n * 1.2  (NVLink SHARP: each GPU sends its
                                                         array into the switch, which adds and
                                                         multicasts the sum back; H100/H200/B200)
    tree      AllReduce s = 2 ceil(log2 n), b = 2       (NCCL's double binary tree, across nodes)

The step counts of the direct algorithms count synchronisations: a flag written to every peer
and polled (one hop) before data moves, the data steps, and one after so the buffers can be
reused (TensorRT-LLM's and vLLM's custom all-reduce kernels work this way; NVLS's reduce and
multicast are one step). :func:`best_algorithm` takes the fastest available one, which is how
NCCL's tuner chooses (predicted time = latency + bytes / bandwidth per algorithm, the minimum
wins: NVIDIA/nccl src/graph/tuning.cc). With 2 us per step on 8 H100s this gives one-shot or
NVLS below about 250 kB and NVLS or the ring above, as vLLM's switch point (256 kB at 8 GPUs)
and measurements show: a bf16 all-reduce on 8 H100s takes 5.9 us at 16 kB, 6.6 us at 128 kB,
10 us at 1 MiB with MSCCL++'s NVLink SHARP kernels under nccl-tests (microsoft/mscclpp pull
request #646, 2025), and TensorRT-LLM's one-shot kernel 5.7 us at 4 kB and 7.8 us at 32 kB
(sgl-project/sglang pull request #2904), against 15 us for NCCL's own LL ring by its tuning
model and about 21 us measured through torch.distributed (tests/test_comm_consistency.py).

Leaves out: protocols (NCCL's LL/LL128/Simple), channels and SM counts, and NVLS across nodes.

See: Chapter "Networks and collectives", "Small messages".
"""

from __future__ import annotations

import numpy as np

from ..units import scalar_or_array as _out
from .costs import _flat_terms
from .names import canonical_kind
from .validation import _check_n, _positive

ALGORITHMS = ("ring", "one_shot", "two_shot", "nvls", "tree")
# Steps (synchronisations) of the direct all-reduce kernels; see the module docstring.
ONE_SHOT_STEPS = 3
TWO_SHOT_STEPS = 5
NVLS_STEPS = 3
# NVLink SHARP against the ring at large messages on 8 H100s: bus bandwidth about 480 GB/s with
# NVLS against 370 GB/s for the ring (S. Jeaugey, NCCL lead, NVIDIA/nccl-tests issue #212, 2024;
# also hardware.nccl_on_nvlink). NVLS moves (n + 1)/n V per GPU each way, against the ring's
# 2(n - 1)/n V, at a lower share of the line rate: the factor that makes n = 8 match the
# measured ratio, 2 (7/8) (370/480) / (9/8) = 1.2. Taken for B200 too (no published figure here).
NVLS_SPEEDUP = 480 / 370
NVLS_OVERHEAD = 2 * 7 / 8 / NVLS_SPEEDUP / (9 / 8)
# Accelerators whose NVSwitch reduces in the switch (NVLink SHARP, third-generation NVSwitch:
# NVIDIA H100 Tensor Core GPU Architecture whitepaper, 2022; NCCL 2.17+ "NVLS").
NVLS_ACCELERATORS = ("h100", "h200", "b200", "gb200")
# The direct kernels work in a registered buffer of fixed size: vLLM's custom all-reduce
# defaults to 8 MiB (vllm/distributed/device_communicators/custom_all_reduce.py, max_size);
# larger messages go to NCCL.
DIRECT_MAX_BYTES = 8 * 2**20


def algorithm_terms(collective, n, algorithm="ring"):
    """(s steps, b busiest-link bytes per array byte) of a collective run by ``algorithm``.

    T = s * alpha + b * V / W with W the device's one-way bandwidth into the switch. All-gather,
    reduce-scatter, all-to-all know only "ring" (the switch terms of :func:`cost_terms`); the
    all-reduce knows every name in :data:`ALGORITHMS` (formulas in the module docstring).
    Broadcasts over ``n``.

    >>> algorithm_terms("all_reduce", 8, "ring"), algorithm_terms("all_reduce", 8, "one_shot")
    ((14.0, 1.75), (3.0, 7.0))
    >>> algorithm_terms("all_reduce", 16, "tree")
    (8.0, 2.0)

    See: Chapter "Networks and collectives", "Small messages".
    """
    kind = canonical_kind(collective)
    n = _check_n(n)
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm={algorithm!r}; valid choices: {', '.join(ALGORITHMS)}")
    if kind == "collective-permute":
        raise ValueError("a collective-permute is a send/recv: use send_recv_time")
    if algorithm != "ring" and kind != "all-reduce":
        raise ValueError(f"algorithm={algorithm!r} runs an all-reduce; a {kind} runs 'ring'")
    s, b = _terms(kind, n, algorithm)
    return _out(s), _out(b)


def _terms(kind, n, algorithm):
    """(s, b) for checked inputs: n floats >= 1, a valid kind and algorithm pair."""
    if algorithm == "ring":
        return _flat_terms(kind, n, "switch")
    one = n > 1
    if algorithm == "one_shot":
        s, b = ONE_SHOT_STEPS * one, n - 1
    elif algorithm == "two_shot":
        s, b = TWO_SHOT_STEPS * one, 2 * (n - 1) / n
    elif algorithm == "nvls":
        s, b = NVLS_STEPS * one, (n + 1) / n * NVLS_OVERHEAD * one
    else:  # tree
        s, b = 2 * np.ceil(np.log2(n)), 2.0 * one
    return s, b


def available(collective, accelerator_name, *, nodes=1, algorithms=None) -> tuple:
    """The algorithms a collective can use on a switch: ring always; for an all-reduce inside one
    node one_shot and two_shot (size-capped, see :func:`algorithm_times`) and nvls where the
    switch reduces (:data:`NVLS_ACCELERATORS`); across nodes ring and tree. ``algorithms``
    narrows the set (None: all of them).

    >>> available("all-reduce", "h100"), available("all-reduce", "a100-80gb", nodes=4)
    (('ring', 'one_shot', 'two_shot', 'nvls'), ('ring', 'tree'))
    """
    kind = canonical_kind(collective)
    if kind != "all-reduce":
        names = ("ring",)
    elif nodes > 1:
        names = ("ring", "tree")
    else:
        names = ("ring", "one_shot", "two_shot") + (
            ("nvls",) if accelerator_name in NVLS_ACCELERATORS else ())
    if algorithms is None:
        return names
    if isinstance(algorithms, str):
        algorithms = (algorithms,)
    if not isinstance(algorithms, (tuple, list, set, frozenset)):
        raise ValueError(f"algorithms={algorithms!r} must be None or names from "
                         f"{', '.join(ALGORITHMS)}")
    bad = [a for a in algorithms if a not in ALGORITHMS]
    if bad:
        raise ValueError(f"algorithms={tuple(algorithms)!r}: {bad[0]!r} is not one of "
                         f"{', '.join(ALGORITHMS)}")
    return tuple(a for a in names if a in algorithms) or ("ring",)


def algorithm_times(collective, nbytes, n, bytes_per_s, latency, names) -> dict:
    """Seconds of each algorithm in ``names`` (T = s latency + b V / W); inf where it cannot run
    (a direct kernel above :data:`DIRECT_MAX_BYTES`). Broadcasts over nbytes and n, which the
    caller has checked (whole numbers >= 1)."""
    kind = canonical_kind(collective)
    V = np.asarray(nbytes, dtype=float)
    n = np.asarray(n, dtype=float)
    out = {}
    for name in names:
        s, b = _terms(kind, n, name)
        t = np.asarray(s) * latency + np.asarray(b) * V / bytes_per_s
        if name in ("one_shot", "two_shot"):
            t = np.where(V <= DIRECT_MAX_BYTES, t, np.inf)
        out[name] = t
    return out


def best_algorithm(collective, nbytes, n, bytes_per_s, *, latency=0.0, accelerator="h100",
                   nodes=1, algorithms=None):
    """(time, name) of the fastest available algorithm, as NCCL's tuner picks it.

    ``bytes_per_s`` one-way per device into the switch; ``latency`` seconds per step.

    >>> t, name = best_algorithm("all_reduce", 16e3, 8, 450e9, latency=2e-6)
    >>> round(t * 1e6, 2), name
    (6.05, 'nvls')
    >>> t, name = best_algorithm("all_reduce", 16e3, 8, 300e9, latency=2e-6, accelerator="a100-80gb")
    >>> round(t * 1e6, 2), name
    (6.37, 'one_shot')

    See: Chapter "Networks and collectives", "Small messages".
    """
    if isinstance(nodes, bool) or not isinstance(nodes, (int, np.integer)) or nodes < 1:
        raise ValueError(f"nodes={nodes!r} must be a whole number of nodes >= 1")
    if not isinstance(accelerator, str):
        raise ValueError(f"accelerator={accelerator!r} must be an accelerator name, e.g. 'h100'")
    names = available(collective, accelerator, nodes=nodes, algorithms=algorithms)
    times = algorithm_times(collective, _positive("nbytes", nbytes, allow_zero=True),
                            _check_n(n), _positive("bytes_per_s", bytes_per_s),
                            _positive("latency", latency, allow_zero=True), names)
    stack = np.stack(np.broadcast_arrays(*times.values()))
    i = np.argmin(stack, axis=0)
    t = np.take_along_axis(stack, i[None], axis=0)[0]
    label = np.asarray(names, dtype=object)[i]
    return _out(t), (label if np.ndim(label) else str(label))
