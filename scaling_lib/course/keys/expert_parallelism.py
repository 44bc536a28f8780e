"""Answer key for Chapter 15 (Expert parallelism and mixtures of experts) exercises.

The implement-it exercise 15.6 runs on the simulated devices: the notebook asks for 8 CPU
devices (``simulate.use_cpu_devices(8)``) before it calls :func:`on_devices`.
"""

from __future__ import annotations

import numpy as np

from ... import hardware, models, simulate, transformer
from ...parallelism import ParallelPlan, expert
from ..grading.tables import with_messages

MOE_MODELS = ["mixtral-8x7b", "deepseek-v3"]
# Ex 15.8's links: one-way bytes/s per device (the hardware module's DGX H100 cluster)
LINKS = {"NVLink inside a node": hardware.cluster("h100", 8).intra_node.bytes_per_s,
         "400 Gb/s InfiniBand across nodes": hardware.cluster("h100", 16).inter_node.bytes_per_s}
EP_DEVICES = 4  # Ex 15.6 runs on 4 of the simulated devices


def loads(p):
    """Tokens routed to each expert (before capacity) in Ex 15.1 / 15.5."""
    return expert.expert_loads(expert.toy_router(p.n, p.E, p.k, skew=p.skew, seed=p.draw_id),
                                p.E)


def dropped(p):
    """Ex 15.1: assignments beyond capacity ⌈cf·k·n/E⌉."""
    return expert.dropped_tokens(loads(p), expert.capacity(p.n, p.E, p.k, p.cf))


def a2a_bytes_sent(p):
    """Ex 15.2: bytes one device sends to other devices in one MoE layer's forward and
    backward (4 AllToAlls, dropless, balanced, bf16): 4 · (ep - 1)/ep · a·k·n·D."""
    c = models.get(p.model)
    V = expert.all_to_all_bytes(c, p.tokens, p.ep)
    return 4 * V * (p.ep - 1) / p.ep ** 2


def min_tokens_per_device(p):
    """Ex 15.3: tokens per device (per micro-batch and layer) that keep every expert
    compute-bound under balanced routing: n·ep·k/E >= critical batch."""
    c = models.get(p.model)
    return expert.critical_tokens_per_expert(p.accelerator) * c.E / (c.k * p.ep)


def active_params(p):
    """Ex 15.4: parameters used per token."""
    return transformer.n_params(p.model, active=True)


def device_loads(p):
    """Tokens each of the ep devices' experts receive (experts e·E/ep ... held by device e)."""
    return loads(p).reshape(p.ep, -1).sum(axis=1)


def imbalance_slowdown(p):
    """Ex 15.5: the expert compute of the layer relative to perfect balance: busiest device's
    tokens over the mean device's."""
    return expert.imbalance(device_loads(p))


def alltoall_count(p):
    """Ex 15.9: AllToAlls in one training step: 4 per MoE layer and micro-batch."""
    c = models.get(p.model)
    return 4 * c.n_moe_layers * p.m


def comm_to_math(p):
    """Ex 15.8: T_comm / T_math of one MoE layer's forward (dispatch + combine vs the routed
    experts' matmuls) on ep H100s over the drawn link."""
    t_math, t_comm = expert.layer_times(p.model, 4096, p.ep, "h100", LINKS[p.link])
    return t_comm / t_math


def expert_state_bytes(p):
    """Ex 15.10: bytes of expert parameters, gradients and Adam state per device (mixed
    precision, 16 bytes per parameter), plain DP (no ZeRO), experts over ep."""
    plan = ParallelPlan(dp=p.ep, ep=p.ep)
    return expert.memory(p.model, plan, p.ep, 4096).total


# ---- implement-it references ------------------------------------------------------------------

def slot_reference(experts, E, C):
    """Ex 15.7 reference: top-1 assignments [n] -> each token's slot in its expert's buffer,
    C for a dropped token (each expert keeps its first C tokens)."""
    experts = np.asarray(experts)
    position = np.array([np.sum(experts[:i] == e) for i, e in enumerate(experts)], dtype=int)
    keep = expert.keep_mask(experts[:, None], E, C)[:, 0]
    assert np.array_equal(keep, position < C)  # the library's rule, for top-1
    return np.where(keep, position, C)


def keep_cases():
    rng = np.random.default_rng(7)
    return [(rng.integers(0, E, n), E, C) for n, E, C in ((12, 4, 2), (64, 8, 9), (100, 5, 30),
                                                         (5, 8, 1))]


def moe_inputs(n, D, E, C, seed):
    """Per device (EP_DEVICES of them): tokens x [n, D], top-1 expert [n], slot in that expert's
    buffer [n] (C for a dropped token); the experts' weights W [E, D, D]. float32."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((EP_DEVICES, n, D)).astype(np.float32)
    skewed = rng.standard_normal((EP_DEVICES * n, E)) + rng.standard_normal(E)
    top1 = expert.route(skewed, 1)[0][:, 0].reshape(EP_DEVICES, n)
    slot = np.full((EP_DEVICES, n), C)
    for d in range(EP_DEVICES):
        for e in range(E):
            mine = np.flatnonzero(top1[d] == e)[:C]
            slot[d, mine] = np.arange(mine.size)
    w = (rng.standard_normal((E, D, D)) / np.sqrt(D)).astype(np.float32)
    return x, top1.astype(np.int32), slot.astype(np.int32), w


def moe_reference(n, D, E, C, seed):
    """Ex 15.6 reference: y = x W[e] for each kept token, 0 for a dropped one; [devices, n, D]."""
    x, top1, slot, w = moe_inputs(n, D, E, C, seed)
    y = np.einsum("pnd,pndf->pnf", x, w[top1])
    return np.where((slot < C)[..., None], y, 0.0)


def on_devices(local):
    """Wrap a student's per-device ``local(x, chosen, slot, w, C)`` as ``run(n, D, E, C, seed)``
    on EP_DEVICES simulated devices: x [n, D], chosen (each token's expert) and slot [n] (this
    device's tokens), w [E/ep, D, D] (this device's experts); mesh axis "ep"."""
    def run(n, D, E, C, seed):
        import jax
        from jax.sharding import PartitionSpec as P

        x, top1, slot, w = moe_inputs(n, D, E, C, seed)
        mesh = simulate.make_mesh((EP_DEVICES,), ("ep",))
        fn = jax.shard_map(lambda x, e, s, w: local(x[0], e[0], s[0], w, C)[None],
                           mesh=mesh, in_specs=(P("ep"), P("ep"), P("ep"), P("ep")),
                           out_specs=P("ep"))
        return np.asarray(jax.jit(fn)(x, top1, slot, w))
    return run


def dispatch_combine(x, e, slot, w, C):
    """Ex 15.6 worked answer (also the wrong-method base): dispatch, experts, combine."""
    import jax
    import jax.numpy as jnp

    E = w.shape[0] * jax.lax.axis_size("ep")
    buf = jnp.zeros((E, C, x.shape[1]), x.dtype).at[e, slot].set(x, mode="drop")
    buf = jax.lax.all_to_all(buf, "ep", split_axis=0, concat_axis=1, tiled=True)
    y = jnp.einsum("ecd,edf->ecf", buf, w)
    y = jax.lax.all_to_all(y, "ep", split_axis=1, concat_axis=0, tiled=True)
    return jnp.where((slot < C)[:, None], y[e, jnp.minimum(slot, C - 1)], 0.0)


# ---- wrong methods (tests/test_wrong_methods.py: each must FAIL at the cell's tolerance) ------

def _dropped_capacity_without_k(p):
    return expert.dropped_tokens(loads(p), expert.capacity(p.n, p.E, 1, p.cf))


def _slots_last(experts, E, C):
    """15.7 wrong method: each expert keeps its last C tokens."""
    experts = np.asarray(experts)
    later = np.array([np.sum(experts[i + 1:] == e) for i, e in enumerate(experts)], dtype=int)
    return np.where(later < C, slot_reference(experts, E, len(experts)), C)


def _min_tokens_whole_group(p):
    return min_tokens_per_device(p) * p.ep


def _wrong_no_combine(n, D, E, C, seed):
    """15.6 wrong method: compute the experts but skip the combine AllToAll (results stay on
    the experts' devices, read back as if they were this device's)."""
    import jax
    import jax.numpy as jnp

    def local(x, e, slot, w, C):
        E_ = w.shape[0] * jax.lax.axis_size("ep")
        buf = jnp.zeros((E_, C, x.shape[1]), x.dtype).at[e, slot].set(x, mode="drop")
        buf = jax.lax.all_to_all(buf, "ep", split_axis=0, concat_axis=1, tiled=True)
        y = jnp.einsum("ecd,edf->ecf", buf, w).reshape(E_, C, -1)
        return jnp.where((slot < C)[:, None], y[e, jnp.minimum(slot, C - 1)], 0.0)
    return on_devices(local)(n, D, E, C, seed)


def _wrong_local_experts_only(n, D, E, C, seed):
    """15.6 wrong method: no AllToAll; each token uses the local expert of the same index mod
    E/ep (the weights a device happens to hold)."""
    import jax.numpy as jnp

    def local(x, e, slot, w, C):
        y = jnp.einsum("nd,ndf->nf", x, w[e % w.shape[0]])
        return jnp.where((slot < C)[:, None], y, 0.0)
    return on_devices(local)(n, D, E, C, seed)


WRONG_METHODS = {
    "15.1": {"capacity without k (cf·n/E)": _dropped_capacity_without_k,
             "dropped tokens counted as a fraction": lambda p: dropped(p) / (p.k * p.n)},
    "15.2": {"forward pass only": lambda p: a2a_bytes_sent(p) / 2,
             "the full V of each AllToAll": lambda p: a2a_bytes_sent(p) * p.ep ** 2 / (p.ep - 1),
             "one expert per token (k = 1)":
                 lambda p: a2a_bytes_sent(p) / models.get(p.model).k},
    "15.3": {"tokens over the whole ep group": _min_tokens_whole_group,
             "without k": lambda p: min_tokens_per_device(p) * models.get(p.model).k},
    "15.4": {"total parameters": lambda p: transformer.n_params(p.model),
             "routed experts only, k of E": lambda p: transformer.param_count(p.model)["experts"]
             * models.get(p.model).k / models.get(p.model).E},
    "15.5": {"busiest expert over the mean expert": lambda p: expert.imbalance(loads(p))},
    "15.6": {"no combine AllToAll": _wrong_no_combine,
             "local experts only, no AllToAll": _wrong_local_experts_only},
    "15.7": {"keep the last C": lambda experts, E, C: _slots_last(experts, E, C),
             "dropped tokens keep their position": lambda experts, E, C: slot_reference(
                 experts, E, len(experts))},
    "15.8": {"forward dispatch only": lambda p: comm_to_math(p) / 2,
             "all k·tokens·D bytes leave the device (no (ep-1)/ep)":
                 lambda p: comm_to_math(p) * p.ep / (p.ep - 1)},
    "15.9": {"forward pass only": lambda p: alltoall_count(p) / 2,
             "every layer an MoE layer": lambda p: 4 * models.get(p.model).L * p.m},
    "15.10": {"experts not split over ep": lambda p: expert_state_bytes(p) * p.ep,
              "parameters only (2 bytes each)": lambda p: expert_state_bytes(p) / 8},
}

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '15.1': ('Each expert has a capacity; the tokens beyond it are dropped.',
             "compute the capacity from the capacity factor, then sum each expert's overflow"),
    '15.2': ("Each AllToAll moves every routed token's vector; some stays local.",
             'the k·tokens·D buffer per AllToAll, 1/ep of which stays on the device; two '
             'forward, two backward'),
    '15.3': ("When is an expert's matmul compute-bound?",
             'count the tokens an expert receives from all ep devices and set it equal to the '
             "chip's critical intensity"),
    '15.4': ('Which parameters does a token skip?',
             'start from the total and remove the routed experts each MoE layer does not use'),
    '15.5': ('The step waits for the busiest device.',
             "sum the loads of each device's experts, take the maximum, and compare with the mean"),
    '15.6': ("Dispatch sends each expert's slots to its device; combine brings them back.",
             'all_to_all splitting the expert axis and concatenating the source axis, then the '
             'inverse'),
    '15.7': ("A token's place in its expert's queue decides whether it is kept.",
             'count the earlier tokens that chose the same expert; keep those within the capacity'),
    '15.8': ('Both the AllToAll and the expert matmul scale with the routed tokens.',
             'write both per routed token; the tokens cancel, leaving the chip, the link and '
             'the expert width'),
    '15.9': ('Count the AllToAlls per MoE layer, forward and backward.',
             'two per MoE layer forward and their transposes backward; not every layer is an '
             'MoE layer'),
    '15.10': ("Each device holds a share of each MoE layer's experts.",
              "the routed experts' parameters times the bytes per parameter, over ep"),
}


# ---- More listed mistakes, each with what the student reads (issue 21).

WRONG_METHODS["15.5"]["busiest expert over the mean expert"] = (
    WRONG_METHODS["15.5"]["busiest expert over the mean expert"],
    "a device runs all of its experts: add the loads of each device's experts before taking "
    "the busiest")
WRONG_METHODS["15.5"]["busiest device over the least busy"] = (
    lambda p: float(device_loads(p).max() / device_loads(p).min()),
    "the slowdown is relative to perfect balance: compare the busiest device with the mean, "
    "not with the least busy")

with_messages(WRONG_METHODS, {
    "15.1": {"capacity without k (cf·n/E)": "each token makes k assignments: cf·k·n/E",
             "dropped tokens counted as a fraction": "the question asks for the tokens dropped"},
    "15.2": {"forward pass only": "the backward runs two AllToAlls as well",
             "the full V of each AllToAll": "1/ep of the buffer stays on the device",
             "one expert per token (k = 1)": "each token goes to k experts"},
    "15.3": {"tokens over the whole ep group": "count the tokens one expert receives",
             "without k": "each token makes k assignments"},
    "15.4": {"total parameters": "a token uses only k of the E routed experts",
             "routed experts only, k of E": "shared experts and the dense parts count too"},
    "15.6": {"no combine AllToAll": "the expert outputs must go back to their tokens",
             "local experts only, no AllToAll": "tokens must reach experts on other devices"},
    "15.7": {"keep the last C": "an expert keeps the first C tokens that chose it",
             "dropped tokens keep their position": "a dropped token takes no slot"},
    "15.8": {"forward dispatch only": "count the combine and the backward's AllToAlls",
             "all k·tokens·D bytes leave the device (no (ep-1)/ep)":
             "1/ep of the buffer stays on the device"},
    "15.9": {"forward pass only": "the backward runs the AllToAlls' transposes",
             "every layer an MoE layer": "the first layers of DeepSeek-V3 are dense"},
    "15.10": {"experts not split over ep": "each device holds E/ep of the experts",
              "parameters only (2 bytes each)": "training keeps 16 bytes per parameter"},
})


# ---- Ex 15.11: Switch's auxiliary loss (implement) ----------------------------------------------

def aux_loss_reference(logits, k):
    """Ex 15.11 reference: E·Σ f_i·P_i (α = 1) of router logits [n, E] routed top-k."""
    return expert.load_balance_loss(logits, k, alpha=1.0)


def aux_loss_cases():
    rng = np.random.default_rng(11)
    return [(rng.standard_normal((n, E)) + skew * rng.standard_normal(E), k)
            for n, E, k, skew in ((32, 4, 1, 1.0), (64, 8, 2, 2.0), (16, 6, 3, 0.5),
                                  (128, 16, 2, 1.5))]


def _aux_per_token_f(logits, k):
    """f counted per token over k (each token's k choices as k whole tokens): k times the loss."""
    return k * aux_loss_reference(logits, k)


def _aux_without_E(logits, k):
    return aux_loss_reference(logits, k) / np.asarray(logits).shape[1]


WRONG_METHODS["15.11"] = {
    "f over tokens, not assignments": (
        _aux_per_token_f, "f_i is the share of the k·n assignments: divide the counts by k·n, "
                          "so that the f_i sum to 1"),
    "without the factor E": (
        _aux_without_E, "Switch multiplies by E, so that a balanced router scores 1 whatever E "
                        "is"),
}
HINTS["15.11"] = ("Two factors per expert: how many assignments it got, and how much probability "
                  "the router gave it on average.",
                  "route top-k to count each expert's assignments (over k·n), take the softmax "
                  "over all E experts and average it over the tokens; multiply by E and sum")
