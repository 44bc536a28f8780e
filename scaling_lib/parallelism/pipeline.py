"""Pipeline parallelism: the layers split into pp stages, micro-batches flowing through them.

Each stage holds about L/pp layers; stage s sends its output activations to stage s + 1 in the
forward pass and receives their gradient back in the backward pass (a collective-permute on the
"pp" axis: one send per micro-batch per stage boundary in each direction). With v virtual
stages per device (interleaved 1F1B) every device holds v chunks of L/(pp·v) layers, and a
micro-batch crosses v times as many boundaries.

The schedule decides the order in which each stage runs its forward (F) and backward (B)
passes. :func:`schedule` builds the timeline of every operation by simulating the dependencies
(F of a micro-batch on chunk k needs F on chunk k - 1; B on chunk k needs B on chunk k + 1 and
F on chunk k) with each device running its operations one at a time in its schedule's order
(:func:`order`). From the timeline come the bubble (:func:`bubble_fraction`, which equals
:func:`~scaling_lib.parallelism.pipeline_bubble_fraction`: (p-1)/(v·m + p-1) of the step, or
Megatron's (p-1)/(v·m) against the ideal compute time) and the activations each stage holds
(:func:`peak_in_flight`: GPipe all m micro-batches, 1F1B at most p).

Schedules (Huang et al. 2019 GPipe; Narayanan et al. 2021 PipeDream-Flush/1F1B and the
interleaved schedule):

- ``gpipe``: every forward, then every backward.
- ``1f1b``: stage s runs p - s - 1 warm-up forwards, then alternates one forward and one
  backward, then drains the remaining backwards.
- ``interleaved``: 1F1B over v chunks per device, micro-batches taken in groups of p
  (Megatron-LM's order; needs m a multiple of p). Any v > 1 uses this order; with v = 1 it is
  1F1B.

See: the chapter "Pipeline parallelism".
"""

from __future__ import annotations

import math

import numpy as np

from .. import memory as _memory
from .. import models
from ..breakdown import Breakdown
from ..units import _brief, check_choice, check_count, check_positive, scalar_or_array as _out
from .comms import Comm, element_bytes
from . import rules
from .plan import SCHEDULES, ParallelPlan, check_step_args

#: One row per operation of a pipeline timeline.
EVENT_DTYPE = np.dtype([("stage", np.int64), ("micro", np.int64), ("chunk", np.int64),
                        ("op", "U1"), ("start", np.float64), ("end", np.float64)])


MAX_OPERATIONS = 20_000  # a schedule simulates 2·pp·m·v operations in Python


def _check_time(name, value, allow_zero=False):
    x = check_positive(name, value, allow_zero=allow_zero)
    if np.ndim(x) or not np.isfinite(x):
        raise ValueError(f"{name}={_brief(value)} must be one finite number of time units")
    return x


def _stage_times(name, value, p) -> np.ndarray:
    """One positive finite time, or one per stage (p of them), as an array of p floats."""
    if isinstance(value, (list, tuple, np.ndarray)) and np.ndim(value) == 1:
        if len(value) != p:
            raise ValueError(f"{name} has {len(value)} times; give one number or one per stage "
                             f"(pp={p})")
        x = check_positive(name, np.asarray(value))
        if not np.all(np.isfinite(x)) or not np.all(x > 0):
            raise ValueError(f"{name}={_brief(value)} must hold positive finite times")
        return np.asarray(x, dtype=float)
    return np.full(p, float(_check_time(name, value)))


def _one_count(name, value, minimum=1) -> int:
    x = check_count(name, value, minimum=minimum)
    if np.ndim(x):
        raise ValueError(f"{name}={_brief(value)} must be one whole number, not an array")
    return int(x)


def _check_schedule_args(pp, m, v, kind):
    p = check_count("pp", pp)
    m = check_count("m", m)
    v = check_count("v", v)
    for name, x in (("pp", p), ("m", m), ("v", v)):
        if np.ndim(x):
            raise ValueError(f"{name}={_brief(x)} must be one whole number, not an array")
    check_choice("kind", kind, SCHEDULES)
    p, m, v = int(p), int(m), int(v)
    if kind == "gpipe" and v != 1:
        raise ValueError(f"v={v}: GPipe has no virtual stages; use kind='interleaved' or v=1")
    if v > 1 and m % p:  # v chunks per device: the interleaved order, whatever kind says
        raise ValueError(f"m={m} micro-batches must be a multiple of pp={p} with v={v} virtual "
                         f"stages (Megatron-LM's interleaved order takes them in groups of pp); "
                         f"choose m in {[p * k for k in range(1, 5)]}, ...")
    if p * m * v > MAX_OPERATIONS // 2:
        raise ValueError(f"pp·m·v = {p * m * v:,} is too many to simulate (2·pp·m·v "
                         f"operations, at most {MAX_OPERATIONS:,})")
    return p, m, v


def order(pp, m, stage, *, v=1, kind="1f1b") -> list[tuple[str, int, int]]:
    """The operations one stage (device) runs, in its order: ("F" or "B", micro-batch, chunk).

    >>> order(3, 3, 0)  # 2 warm-up forwards, then one forward one backward, then drain
    [('F', 0, 0), ('F', 1, 0), ('F', 2, 0), ('B', 0, 0), ('B', 1, 0), ('B', 2, 0)]
    >>> order(3, 3, 2)  # the last stage alternates from the start
    [('F', 0, 0), ('B', 0, 0), ('F', 1, 0), ('B', 1, 0), ('F', 2, 0), ('B', 2, 0)]
    """
    p, m, v = _check_schedule_args(pp, m, v, kind)
    s = check_count("stage", stage, minimum=0)
    if np.ndim(s) or not 0 <= s < p:
        raise ValueError(f"stage={_brief(stage)} must be one of 0..{p - 1}")
    return _order(p, m, int(s), v, kind)


def _order(p, m, s, v, kind):
    if kind == "gpipe":
        return [("F", i, 0) for i in range(m)] + [("B", i, 0) for i in range(m)]
    if v == 1:  # 1F1B (and "interleaved" with one chunk, which is 1F1B)
        fwd = [("F", i, 0) for i in range(m)]
        bwd = [("B", i, 0) for i in range(m)]
        warm = min(p - s - 1, m)
    else:  # Megatron-LM's interleaved order: groups of p micro-batches, chunk by chunk
        total = m * v

        def fwd_at(k):
            return ("F", (k // (p * v)) * p + k % p, (k // p) % v)

        def bwd_at(k):
            return ("B", (k // (p * v)) * p + k % p, v - 1 - (k // p) % v)

        fwd = [fwd_at(k) for k in range(total)]
        bwd = [bwd_at(k) for k in range(total)]
        warm = min((p - s - 1) * 2 + (v - 1) * p, total)
    out = fwd[:warm]
    for j in range(len(fwd) - warm):
        out += [fwd[warm + j], bwd[j]]
    return out + bwd[len(fwd) - warm:]


def schedule(pp, m, *, v=1, kind="1f1b", t_fwd=1.0, t_bwd=2.0, t_p2p=0.0) -> np.ndarray:
    """The timeline of one pipelined step: every (stage, micro, chunk, op, start, end).

    Simulated, not derived: each device runs :func:`order`'s operations one at a time, each as
    soon as the device is free and its inputs have arrived (``t_p2p`` after the operation it
    depends on ended on another device). ``t_fwd`` and ``t_bwd`` are one micro-batch's forward
    and backward time through one device's layers (a chunk takes 1/v of it): one number, or one
    per device for uneven stages (e.g. proportional to :func:`stage_costs`' FLOPs). Chunk c of
    device s is virtual stage c·pp + s. Returns a numpy structured array (:data:`EVENT_DTYPE`)
    sorted by start time, then stage.

    >>> ev = schedule(4, 4, kind="gpipe", t_fwd=1, t_bwd=2)
    >>> float(ev["end"].max())  # (m + p - 1)·(t_fwd + t_bwd)
    21.0
    >>> slow_last = schedule(4, 4, t_fwd=[1, 1, 1, 1.5], t_bwd=[2, 2, 2, 3])
    >>> float(slow_last["end"].max())  # the slowest stage sets the pace
    27.0
    """
    p, m, v = _check_schedule_args(pp, m, v, kind)
    tf = _stage_times("t_fwd", t_fwd, p) / v
    tb = _stage_times("t_bwd", t_bwd, p) / v
    tc = float(_check_time("t_p2p", t_p2p, allow_zero=True))
    queues = [_order(p, m, s, v, kind) for s in range(p)]
    return _simulate(queues, p, v, {"F": tf, "B": tb}, tc, f"the {kind} order")


def _simulate(queues, p, v, times, tc, what):
    """Run each device's queue of (op, micro, chunk) one at a time, each op as soon as the device
    is free and its inputs are done: F needs F on the previous virtual stage; B needs this
    stage's F and the next virtual stage's B; W (a weight gradient) needs this stage's B."""
    n_virtual = p * v
    pos = [0] * p
    free = [0.0] * p
    done: dict = {}  # (op, micro, virtual stage) -> (device, end)
    rows = []
    todo = list(range(p))  # devices whose next operation may have become ready
    while todo:
        s = todo.pop()
        while pos[s] < len(queues[s]):
            op, i, c = queues[s][pos[s]]
            k = c * p + s
            deps = []
            if op == "F" and k > 0:
                deps.append(("F", i, k - 1))
            if op == "B":
                deps.append(("F", i, k))
                if k < n_virtual - 1:
                    deps.append(("B", i, k + 1))
            if op == "W":
                deps.append(("B", i, k))
            if any(d not in done for d in deps):
                break  # woken again when the missing input is done
            ready = max([free[s]] + [done[d][1] + (tc if done[d][0] != s else 0.0)
                                     for d in deps])
            end = ready + times[op][s]
            rows.append((s, i, c, op, ready, end))
            done[(op, i, k)] = (s, end)
            free[s] = end
            pos[s] += 1
            # the devices that may wait on this: the next virtual stage's forward, the
            # previous one's backward
            if op == "F" and k < n_virtual - 1:
                todo.append((k + 1) % p)
            if op == "B" and k > 0:
                todo.append((k - 1) % p)
    if len(rows) != sum(len(q) for q in queues):  # cannot happen for the orders here
        raise ValueError(f"{what} deadlocks for pp={p}, v={v}")
    ev = np.array(rows, dtype=EVENT_DTYPE)
    return ev[np.lexsort((ev["stage"], ev["start"]))]


def split_backward_schedule(pp, m, *, t_fwd=1.0, t_input_grad=1.0, t_weight_grad=1.0,
                            t_p2p=0.0) -> np.ndarray:
    """A 1F1B timeline with each backward split into B (the input's gradient, which the previous
    stage waits for) and W (the weights' gradient, which nobody waits for), after Qi et al.
    2023's ZB-H1: stage s runs 1F1B's order of F and B, and delays each W by s backward passes
    (all of them to the end in the drain), so the B's travel back up the pipeline without waiting
    for W's and the W's fill the gaps. Each stage holds no more micro-batches than under 1F1B
    (p - s on stage s; W is what frees them). A static order: it recovers most of ZB-H1's saving, not all
    (the paper's bubble is (p-1)(t_F + t_B - t_W); its scheduler also places W's by timing).

    >>> ev = split_backward_schedule(4, 8)
    >>> sorted(set(ev["op"].tolist())), peak_in_flight(ev).tolist()
    (['B', 'F', 'W'], [4.0, 3.0, 2.0, 1.0])
    """
    p, m, _ = _check_schedule_args(pp, m, 1, "1f1b")
    times = {"F": _stage_times("t_fwd", t_fwd, p),
             "B": _stage_times("t_input_grad", t_input_grad, p),
             "W": _stage_times("t_weight_grad", t_weight_grad, p)}
    tc = float(_check_time("t_p2p", t_p2p, allow_zero=True))
    queues = []
    for s in range(p):
        warm = min(p - s - 1, m)
        q, pending = [("F", i, 0) for i in range(warm)], []
        for j in range(m - warm):
            q += [("F", warm + j, 0), ("B", j, 0)]
            pending.append(j)
            if len(pending) > s:  # W of the micro-batch s backward passes ago
                q.append(("W", pending.pop(0), 0))
        q += [("B", j, 0) for j in range(m - warm, m)]
        q += [("W", j, 0) for j in pending + list(range(m - warm, m))]
        queues.append(q)
    return _simulate(queues, p, 1, times, tc, "the split-backward order")


def _check_events(events):
    if not isinstance(events, np.ndarray) or events.dtype != EVENT_DTYPE or not events.size:
        raise ValueError(f"events={_brief(events)} must be a timeline from schedule()")
    return events


def makespan(events) -> float:
    """Duration of the step: the last operation's end (the first starts at 0)."""
    return float(_check_events(events)["end"].max())


def bubble_fraction(events, *, relative_to="step") -> float:
    """Idle share of a timeline: idle device-time over p · step time (``relative_to="step"``),
    or over the busy time (``"compute"``: Megatron-LM's (p-1)/(v·m)).

    >>> float(bubble_fraction(schedule(4, 4)))  # 3/7: the 57% ceiling of 4 stages x 4
    0.42857142857142855
    >>> float(bubble_fraction(schedule(4, 4), relative_to="compute"))
    0.75
    """
    ev = _check_events(events)
    check_choice("relative_to", relative_to, ("step", "compute"))
    p = int(ev["stage"].max()) + 1
    busy = float(np.sum(ev["end"] - ev["start"]))
    idle = p * makespan(ev) - busy
    return idle / (p * makespan(ev)) if relative_to == "step" else idle / busy


def in_flight(events) -> tuple[np.ndarray, np.ndarray]:
    """(times, held) where held[s, j] is the micro-batches whose activations stage s keeps
    just after times[j]: forwards ended minus backwards ended, a chunk counting 1/v (with a split
    backward, :func:`split_backward_schedule`, the weight gradient W is what frees them)."""
    ev = _check_events(events)
    p = int(ev["stage"].max()) + 1
    v = int(ev["chunk"].max()) + 1
    times = np.unique(np.concatenate([ev["start"], ev["end"]]))
    if p * times.size > 4_000_000:
        raise ValueError(f"{p} stages x {times.size:,} instants is too large a table; use "
                         "peak_in_flight")
    held = np.zeros((p, times.size))
    for s in range(p):
        e = ev[ev["stage"] == s]
        f_end = np.sort(e["end"][e["op"] == "F"])
        last = "W" if (e["op"] == "W").any() else "B"  # the activations live until W
        b_end = np.sort(e["end"][e["op"] == last])
        held[s] = (np.searchsorted(f_end, times, side="right")
                   - np.searchsorted(b_end, times, side="right")) / v
    return times, held


def peak_in_flight(events) -> np.ndarray:
    """Per stage, the most micro-batches' activations it holds at once (a chunk counts 1/v).

    >>> peak_in_flight(schedule(4, 8, kind="gpipe")).tolist()
    [8.0, 8.0, 8.0, 8.0]
    >>> peak_in_flight(schedule(4, 8)).tolist()  # 1F1B: p - s on stage s
    [4.0, 3.0, 2.0, 1.0]
    """
    ev = _check_events(events)
    p = int(ev["stage"].max()) + 1
    v = int(ev["chunk"].max()) + 1
    e = ev[np.lexsort((ev["end"], ev["stage"]))]  # by stage, then in time order
    delta = np.where(e["op"] == "F", 1.0, -1.0)
    bounds = np.searchsorted(e["stage"], np.arange(p + 1))
    # a stage runs one operation at a time: forwards ended minus backwards ended, at its peak
    return np.array([np.max(np.cumsum(delta[a:b])) for a, b in zip(bounds[:-1], bounds[1:])]) / v


# ---- uneven stages ----------------------------------------------------------------------------

def layer_split(L, pp, *, fewer_on_ends=0) -> list[int]:
    """Layers per stage: as even as possible, with ``fewer_on_ends`` layers fewer on the first
    and the last stage (Llama 3 405B: 126 layers on 16 stages, one fewer on each end; Dubey et
    al. 2024, section 3.3.2), the rest spread over the middle stages.

    >>> layer_split(32, 4)
    [8, 8, 8, 8]
    >>> layer_split(126, 16, fewer_on_ends=1)[:3], sum(layer_split(126, 16, fewer_on_ends=1))
    ([7, 8, 8], 126)
    """
    L, p = _one_count("L", L), _one_count("pp", pp)
    f = _one_count("fewer_on_ends", fewer_on_ends, minimum=0)
    if p > L:
        raise ValueError(f"pp={p} stages exceed L={L} layers; choose pp <= {L}")
    if p == 1 or not f:
        q, r = divmod(L, p)
        return [q + (1 if s < r else 0) for s in range(p)]
    if p == 2:
        raise ValueError("fewer_on_ends needs pp >= 3 (a middle stage to take the layers)")
    mid = p - 2
    # the ends get e layers each and the middle stages at least e + f: the largest such e
    e = int((L - mid * f) // (mid + 2))
    if e < 1:
        raise ValueError(f"L={L} layers cannot give the end stages {int(f)} layer(s) fewer than "
                         f"the others on pp={p} stages")
    q, r = divmod(L - 2 * e, mid)
    return [e] + [q + (1 if j < r else 0) for j in range(mid)] + [e]


def stage_costs(cfg, layers) -> dict:
    """Per stage: forward FLOPs per token and parameters, for a split ``layers`` (a list of
    layers per stage, e.g. :func:`layer_split`). The first stage also holds the embedding (a
    look-up: parameters, no FLOPs); the last the final norm and the output layer (2·D·V
    FLOPs per token, V·D parameters). The step runs at the pace of the slowest stage: times
    proportional to ``flops`` as :func:`schedule`'s per-stage ``t_fwd`` give its timeline.

    >>> c = models.get("llama3-405b")
    >>> even = stage_costs(c, layer_split(126, 16))["params"]  # [8] * 14 + [7, 7]
    >>> fixed = stage_costs(c, layer_split(126, 16, fewer_on_ends=1))["params"]
    >>> round(float(even.max() / even.mean()), 3), round(float(fixed.max() / fixed.mean()), 3)
    (1.088, 1.005)
    """
    from ..transformer import _attention_weights, _layer_norms, _mlp_weights, _norm_params

    c = models.get(cfg)
    if c.is_moe or c.mla is not None:
        raise ValueError(f"{c.name or 'cfg'} is an MoE or MLA model; stage_costs covers dense "
                         "layers with standard attention only")
    if isinstance(layers, (str, bytes)) or not isinstance(layers, (list, tuple, np.ndarray)) \
            or np.ndim(layers) != 1 or not len(layers):
        raise ValueError(f"layers={_brief(layers)} must be a list of layers per stage, e.g. "
                         "layer_split(L, pp)")
    layers = [int(check_count("layers", n, minimum=0)) for n in layers]
    if sum(layers) != c.L:
        raise ValueError(f"layers={layers} add up to {sum(layers)}, not L={c.L}")
    per_layer = _attention_weights(c) + _mlp_weights(c, c.F)
    flops = np.array([2.0 * n * per_layer for n in layers])
    params = np.array([float(n * (per_layer + _layer_norms(c))) for n in layers])
    params[0] += c.V * c.D
    flops[-1] += 2.0 * c.D * c.V
    params[-1] += (0 if c.tied_embeddings else c.V * c.D) + _norm_params(c, c.D)
    return {"layers": np.array(layers), "flops": flops, "params": params}


# ---- the strategy module's functions ----------------------------------------------------------

# Megatron-LM's scatter-gather optimisation of pipeline sends (on by default since Narayanan et
# al. 2021, section 4.1): with tp > 1 and no sequence parallelism every tp rank holds the whole
# activation, so each sends a 1/tp slice and the receivers all-gather it over NVLink.
SCATTER_GATHER = True


def send_bytes(D, b, T, cp=1, tp=1, *, dtype="bf16", sequence_parallel=False,
               scatter_gather=SCATTER_GATHER):
    """Bytes one device sends across a stage boundary for one micro-batch: the one home of
    this quantity (``estimate`` and :func:`comms` call it). The activation is a·b·(T/cp)·D;
    each tp rank sends /tp of it with sequence parallelism (it holds only that) or with
    Megatron-LM's scatter-gather (``scatter_gather``, :data:`SCATTER_GATHER`); otherwise the
    whole (what XLA compiles for a replicated activation). Broadcasts over b, T, cp and tp.

    >>> send_bytes(4096, 1, 4096, tp=8), send_bytes(4096, 1, 4096, tp=8, scatter_gather=False)
    (4194304.0, 33554432.0)
    """
    D, b, T, cp, tp = (check_count(k, v) for k, v in (("D", D), ("b", b), ("T", T), ("cp", cp),
                                                       ("tp", tp)))
    for k, v in (("sequence_parallel", sequence_parallel), ("scatter_gather", scatter_gather)):
        if not isinstance(v, (bool, np.bool_, np.ndarray)) or (
                isinstance(v, np.ndarray) and v.dtype != bool):
            raise ValueError(f"{k}={_brief(v)} must be True or False (or an array of them)")
    act = element_bytes(dtype) * np.asarray(b, dtype=float) * T / np.asarray(cp) * D
    split = np.logical_or(sequence_parallel, scatter_gather)
    return _out(np.where(split, act / np.asarray(tp), act))


def activation_bytes(cfg, plan: ParallelPlan, B, T, *, dtype="bf16",
                     scatter_gather=False) -> float:
    """:func:`send_bytes` of ``plan``'s micro-batch (B sequences in the global batch).
    ``scatter_gather`` defaults to False here: the compiled program of
    ``simulate.train_step`` sends the whole replicated activation, which :func:`comms` lists."""
    check_step_args(plan, B, T)
    c = models.get(cfg)
    m = plan.n_microbatches(B)
    b = B // (plan.dp * m)
    return float(send_bytes(c.D, b, T, plan.cp, plan.tp, dtype=dtype,
                            sequence_parallel=plan.sequence_parallel,
                            scatter_gather=scatter_gather))


def comms(cfg, plan: ParallelPlan, B, T, *, dtype="bf16", scatter_gather=False) -> list[Comm]:
    """The point-to-point sends of one step, per device (a middle stage's view): the output
    activations forward and their gradient backward, once per micro-batch per chunk (v·m each
    way), V = :func:`send_bytes`. Collective-permutes on the critical path of the
    schedule (``t_p2p`` in :func:`schedule`): not overlappable here. With ``scatter_gather``
    (Megatron-LM's, and the estimate's) and tp > 1 without sequence parallelism, each send is
    1/tp of the activation and the receiving stage all-gathers it over the tp group.

    >>> c = models.TransformerConfig(L=4, D=32, F=64, N=4, K=2, H=8, V=64)
    >>> [(x.kind, x.nbytes, x.count, x.phase) for x in comms(c, ParallelPlan(pp=2), 8, 16)]
    [('collective-permute', 1024.0, 8, 'forward'), ('collective-permute', 1024.0, 8, 'backward')]
    """
    check_step_args(plan, B, T)
    if plan.pp == 1:
        return []
    act = activation_bytes(cfg, plan, B, T, dtype=dtype, scatter_gather=scatter_gather)
    n = plan.n_microbatches(B) * plan.virtual_stages
    out = [Comm("collective-permute", "pp", plan.pp, act, n, "forward", False),
           Comm("collective-permute", "pp", plan.pp, act, n, "backward", False)]
    if scatter_gather and plan.tp > 1 and not plan.sequence_parallel:
        full = act * plan.tp
        out += [Comm("all-gather", "tp", plan.tp, full, n, "forward", False),
                Comm("all-gather", "tp", plan.tp, full, n, "backward", False)]
    return out


def memory(cfg, plan: ParallelPlan, B, T, **options):
    """What the pipeline changes on one device (the first stage): its share of the model
    states (its ⌈L/p⌉ layers and the embedding) and the activations of the micro-batches in
    flight (:func:`scaling_lib.memory.in_flight_microbatches`), from
    :func:`scaling_lib.memory.training_memory`.
    """
    check_step_args(plan, B, T, options)
    full = _memory.training_memory(cfg, plan, B, T, **options)
    return Breakdown({k: full[k] for k in ("parameters", "gradients", "optimizer",
                                           "activations")}, unit="bytes")


# The pipeline's rules in the one table: an uneven split (pp_split) is left to the planner and
# ``estimate``'s ``rules_broken``: its traffic is well defined (the library's schedules run it).
PIPELINE_RULES = ("pp_layers", "interleaved_m", "zero2_pp")


def constraints(cfg, plan: ParallelPlan, B, T) -> list[str]:
    """The pipeline's rules of :mod:`scaling_lib.parallelism.rules` that ``plan`` breaks, as
    sentences: stages need layers, the interleaved schedule takes micro-batches in groups of
    pp, no ZeRO-2 with stages.

    >>> c = models.TransformerConfig(L=4, D=32, F=64, N=4, K=2, H=8, V=64)
    >>> constraints(c, ParallelPlan(pp=2, virtual_stages=4, schedule="interleaved"), 8, 16)
    ['pp · virtual_stages must not exceed the L layers (each chunk needs a layer)']
    """
    check_step_args(plan, B, T)
    return [rules.BY_NAME[n].message for n in rules.broken(cfg, plan, B, T)
            if n in PIPELINE_RULES]


def step_time(pp, m, *, v=1, kind="1f1b", t_fwd=1.0, t_bwd=2.0, t_p2p=0.0) -> float:
    """Duration of a pipelined step: :func:`makespan` of :func:`schedule` (same arguments).

    >>> step_time(8, 1), step_time(8, 1) / (1.0 + 2.0)  # one micro-batch: p times its compute
    (24.0, 8.0)
    """
    return makespan(schedule(pp, m, v=v, kind=kind, t_fwd=t_fwd, t_bwd=t_bwd, t_p2p=t_p2p))


def min_microbatches(pp, utilisation, *, v=1) -> int:
    """The fewest micro-batches whose utilisation ceiling v·m/(v·m + p - 1) reaches the target.

    >>> min_microbatches(8, 0.9)  # m/(m+7) >= 0.9
    63
    """
    p, v = _one_count("pp", pp), _one_count("v", v)
    u = check_positive("utilisation", utilisation)
    if np.ndim(u):
        raise ValueError(f"utilisation={_brief(utilisation)} must be one number, not an array")
    u = float(u)
    if not u < 1:
        raise ValueError(f"utilisation={u} must be below 1 (a pipeline with p > 1 has a bubble)")
    if p == 1:
        return 1
    return max(1, math.ceil(u * (p - 1) / ((1 - u) * v) - 1e-9))
