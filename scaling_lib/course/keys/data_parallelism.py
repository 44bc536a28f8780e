"""Answer key for Chapter 10 (Data parallelism, ZeRO/FSDP and HSDP) exercises.

The implement-it exercises (10.11, 10.12) run the student's per-device function with
``jax.shard_map`` on 8 simulated devices (``simulate.use_cpu_devices(8)`` first) and return one
vector: the numbers the step computes, then what XLA compiled (collective counts and bytes), so
one comparison grades both the result against one device and the communication.
"""

from __future__ import annotations

import numpy as np

from ... import hardware, memory, transformer
from ...parallelism import ParallelPlan, collectives, steptime, timeline, totals
from ...parallelism.comms import Comm
from ..grading.tables import with_messages
from .sharding import _run_explained


# ---- numeric exercises ---------------------------------------------------------------------------

def gradient_scale(p):
    """Ex 10.1: factor on the psum of per-rank gradients of each rank's *local mean* loss
    (over its B/dp sequences) that gives the gradient of the global mean: 1/dp."""
    return 1.0 / p.dp


def shortcut_undercount(p):
    """Ex 10.2: model-state bytes/param of mixed precision with p.optimizer over the 8-byte
    shortcut."""
    return memory.bytes_per_param("mixed", p.optimizer).total / 8.0


def largest_dp_model(p):
    """Ex 10.3: largest Ψ plain DP holds with p.reserve_gb GB kept for activations and buffers."""
    return memory.max_trainable_params(p.accelerator, reserve_bytes=p.reserve_gb * 1e9)


PSI = 8e9  # parameters of the abstract model of 10.4, 10.5, 10.9, 10.10 (it cancels out)


def _dp_critical(cluster, n, psi=PSI):
    """Tokens per device above which DP's bf16 gradient AllReduce (2Ψ bytes, hierarchical over
    the cluster, its slowest network level: the levels work at once, bucket after bucket) hides
    under the backward pass (4Ψ FLOPs per token at peak)."""
    ar = max(steptime.comm_time(Comm("all-reduce", "dp", n, 2.0 * psi), cluster,
                                ParallelPlan(dp=n)).values())
    per_token = 4.0 * psi / cluster.accelerator.peak_flops_per_s("bf16")
    return ar / per_token


def dp_critical_in_node(p):
    """Ex 10.4: critical tokens per device, DP over p.n GPUs of one node."""
    return _dp_critical(hardware.cluster(p.accelerator, p.n), p.n)


def dp_critical_across_nodes(p):
    """Ex 10.5: the same over p.nodes nodes of 8 GPUs, hierarchical AllReduce."""
    n = 8 * p.nodes
    return _dp_critical(hardware.cluster(p.accelerator, n), n)


def fsdp_traffic(p):
    """Ex 10.6: Σ V·count of one device's collectives per FSDP step (bf16), p.m micro-batches."""
    plan = ParallelPlan(dp=p.dp, zero=3, micro_batch=1)
    return sum(totals(collectives(p.model, plan, p.dp * p.m, 4096, dtype="bf16")).values())


def _inter_node_time(model, plan, n):
    comms = collectives(model, plan, n, 4096, dtype="bf16")
    c = hardware.cluster("h100", n)
    return sum(steptime.comm_time(x, c, plan).get("inter-node", 0.0) for x in comms)


def fsdp_over_hsdp_inter_node(p):
    """Ex 10.7: inter-node communication time per step, FSDP over all GPUs / HSDP (shard 8)."""
    n = 8 * p.nodes
    fsdp = _inter_node_time(p.model, ParallelPlan(dp=n, zero=3), n)
    hsdp = _inter_node_time(p.model, ParallelPlan(dp=n, zero=3, shard_group=8), n)
    return fsdp / hsdp


def fsdp_device_states(p):
    """Ex 10.8: FSDP model states per device plus two layers' gathered bf16 weights (the layer
    computing and the one prefetched)."""
    n = transformer.n_params(p.model)
    return memory.model_state_bytes(n, p.dp, 3).total + 2 * 2.0 * timeline.layer_params(p.model)


def dp_comm_bound_devices(p):
    """Ex 10.9: smallest power of two n >= 8 of H100s at which plain DP with p.tokens tokens
    per step is communication-bound (tokens per device below the critical batch)."""
    n = 8
    while p.tokens / n >= _dp_critical(hardware.cluster(p.accelerator, n), n):
        n *= 2
    return n


def tpu_critical(p):
    """Ex 10.10: critical tokens per chip for DP over a TPU v5p slice of p.n chips."""
    return _dp_critical(hardware.cluster("tpu-v5p", p.n), p.n)


# Wrong methods (see HELPERS.md's checker protocol): each takes the drawn p.
def _c_over_w(acc, bw):
    return hardware.get(acc).peak_flops_per_s("bf16") / bw


WRONG_METHODS = {
    "10.1": {"plain sum (no scaling)": lambda p: 1.0,
             "divide by the sequences of the batch": lambda p: 1.0 / (p.dp * p.b)},
    "10.2": {"inverse ratio": lambda p: 8.0 / memory.bytes_per_param("mixed", p.optimizer).total,
             "weights and gradients only (4 bytes)":
                 lambda p: 4.0 / 8.0},
    "10.3": {"8 bytes per parameter": lambda p: (hardware.get(p.accelerator).hbm_bytes
                                                 - p.reserve_gb * 1e9) / 8,
             "reserve ignored": lambda p: memory.max_trainable_params(p.accelerator)},
    "10.4": {"C/W without (n-1)/n": lambda p: _c_over_w(
                 p.accelerator, hardware.get(p.accelerator).link_bytes_per_s),
             "forward and backward (6Ψ) hide it": lambda p: dp_critical_in_node(p) * 2 / 3,
             "fp32 gradients": lambda p: 2 * dp_critical_in_node(p)},
    "10.5": {"flat ring over the NICs": lambda p: 2 * (8 * p.nodes - 1) / (8 * p.nodes) * 2 * PSI
             / hardware.cluster(p.accelerator, 8).inter_node.bytes_per_s
             / (4 * PSI / hardware.get(p.accelerator).peak_flops_per_s("bf16")),
             "inside the node only": lambda p: _dp_critical(hardware.cluster(p.accelerator, 8),
                                                            8),
             "NVLink and NIC phases one after the other": lambda p: sum(steptime.comm_time(
                 Comm("all-reduce", "dp", 8 * p.nodes, 2.0 * PSI),
                 hardware.cluster(p.accelerator, 8 * p.nodes), ParallelPlan(dp=8 * p.nodes)
             ).values()) / (4 * PSI / hardware.get(p.accelerator).peak_flops_per_s("bf16"))},
    "10.6": {"no backward re-gather": lambda p: fsdp_traffic(p) - p.m * 2 * (
                 transformer.n_params(p.model) - transformer.param_count(p.model)["embedding"]),
             "once per step, not per micro-batch": lambda p: fsdp_traffic(p) / p.m,
             "plain DP's AllReduce": lambda p: 2.0 * transformer.n_params(p.model)},
    "10.7": {"3 collectives vs 1": lambda p: 3.0,
             "3 vs an AllReduce's 2, embedding re-gathered too": lambda p: 1.5,
             "the same": lambda p: 1.0},
    "10.8": {"no gathered buffers": lambda p: memory.model_state_bytes(
                 transformer.n_params(p.model), p.dp, 3).total,
             "one gathered layer": lambda p: fsdp_device_states(p)
             - 2.0 * timeline.layer_params(p.model)},
    "10.10": {"C/W of one link": lambda p: _c_over_w(
                  "tpu-v5p", hardware.cluster("tpu-v5p", p.n).intra_node.per_link_bytes_per_s)},
    "10.11": {
        "no psum (this device's gradient)": (
            lambda seed: run_dp(_dp_grad_unreduced)(seed),
            "each device's gradient covers only its own rows: add the devices' gradients over "
            "'dp' (lax.psum) so that every device holds the whole batch's"),
        "psum of local means (8x)": (
            lambda seed: run_dp(_dp_grad_local_mean)(seed),
            "that is 8 times the gradient: each device's mean over its own B/8 rows, summed over "
            "8 devices, counts the batch 8 times; scale by the global B·D"),
        "pmean of the global-mean gradient (1/8)": (
            lambda seed: run_dp(_dp_grad_averaged)(seed),
            "that is 1/8 of the gradient: the local gradients of the global mean are parts of "
            "one sum, so add them (psum) rather than average them (pmean)")},
    "10.12": {
        "loss not summed over devices": (
            lambda seed: run_zero3(_zero3_local_loss)(seed),
            "the loss is each device's share only: sum it over 'dp' (lax.psum) before dividing "
            "by the global B·D, so every device returns the same loss"),
        "the shard used without gathering": (
            lambda seed: run_zero3(_zero3_no_gather)(seed),
            "each device holds only D/8 rows of each layer's weight (W_shard[l] is [D/8, D]): "
            "all-gather it over 'dp' along its first axis (tiled) before multiplying"),
        "all layers gathered up front": (
            lambda seed: run_zero3(_zero3_gather_all)(seed),
            "the numbers are right but the whole model was gathered at once: gather each "
            "layer's weights inside the loop, just before that layer uses them")},
}


# ---- implement-it exercises on simulated devices ----------------------------------------------

L, D, B, LR = 3, 16, 32, 0.1  # the tiny MLP of 10.11 and 10.12: L layers of tanh(h @ W[l])


def problem(seed):
    """(W [L, D, D], x [B, D], y [B, D]) float32 arrays drawn from ``seed``."""
    rng = np.random.default_rng([seed, 10])
    W = (rng.standard_normal((L, D, D)) / np.sqrt(D)).astype(np.float32)
    x = rng.standard_normal((B, D)).astype(np.float32)
    y = rng.standard_normal((B, D)).astype(np.float32)
    return W, x, y


def layer(h, w):
    """One layer of the MLP: tanh(h @ w)."""
    import jax.numpy as jnp

    return jnp.tanh(h @ w)


def loss_sum(W, x, y):
    """Σ (MLP(x) - y)² over the rows of x: divide by B·D for the mean over the global batch."""
    import jax.numpy as jnp

    h = x
    for i in range(W.shape[0]):
        h = layer(h, W[i])
    return jnp.sum((h - y) ** 2)


def _mesh():
    from ... import simulate

    return simulate.make_mesh((8,), ("dp",))


def _summary(numbers, colls, kinds, counts=True):
    """numbers, then (ops, bytes) per kind of collective over 8 devices as XLA compiled them
    (bytes only with ``counts=False``)."""
    from ... import simulate

    tot = simulate.emitted_totals(colls)
    extra = []
    for k in kinds:
        if counts:
            extra.append(sum(c.count for c in colls if c.kind == k and c.group_size == 8))
        extra.append(tot.get((k, 8), 0.0))
    return np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in numbers]
                          + [np.asarray(extra, np.float64)])


def _single_device_step(seed):
    import jax

    W, x, y = problem(seed)
    loss, g = jax.value_and_grad(lambda w: loss_sum(w, x, y) / (B * D))(W)
    return loss, g, W - LR * g


def run_dp(dp_grad):
    """Runs ``dp_grad(W, x, y) -> gradient of the global mean loss`` per device (W replicated,
    x, y split over "dp", the gradient replicated): returns the function of ``seed`` that 10.11
    grades (the gradient, then the all-reduce and all-gather bytes XLA compiled). Without the
    replication check (``check_vma=False``) ``jax.grad`` gives each device the gradient of its own
    rows, as in a hand-written DP step: the psum is the student's to write."""
    def run(seed):
        import jax
        from jax.sharding import PartitionSpec as P

        from ... import simulate

        W, x, y = problem(seed)
        fn = jax.jit(jax.shard_map(dp_grad, mesh=_mesh(), in_specs=(P(), P("dp"), P("dp")),
                                   out_specs=P(), check_vma=False))
        g = _run_explained(fn, (W, x, y), "dp", "W is [L, D, D], x and y are [B/8, D]")
        colls = simulate.collectives_in(fn, W, x, y)
        return _summary([g], colls, ("all-reduce", "all-gather"), counts=False)
    return run


def _dp_grad_unreduced(W, x, y):
    """10.11 without the AllReduce: this device's part of the gradient."""
    import jax

    return jax.grad(loss_sum)(W, x, y) / (B * D)


def _dp_grad_local_mean(W, x, y):
    """10.11 with each device's mean over its own rows, then summed: 8x the gradient."""
    import jax
    from jax import lax

    return lax.psum(jax.grad(loss_sum)(W, x, y) / (x.shape[0] * D), "dp")


def _dp_grad_averaged(W, x, y):
    """10.11 with the parts of the global mean averaged (pmean) instead of added."""
    import jax
    from jax import lax

    return lax.pmean(jax.grad(loss_sum)(W, x, y) / (B * D), "dp")


def _zero3_local_loss(W_shard, x, y):
    """10.12 without the psum of the loss."""
    import jax.numpy as jnp
    from jax import lax

    h = x
    for i in range(W_shard.shape[0]):
        h = layer(h, lax.all_gather(W_shard[i], "dp", axis=0, tiled=True))
    return jnp.sum((h - y) ** 2) / (B * D)


def _zero3_no_gather(W_shard, x, y):
    """10.12 with each layer's shard used as if it were the whole weight."""
    import jax.numpy as jnp
    from jax import lax

    h = x
    for i in range(W_shard.shape[0]):
        h = layer(h, W_shard[i])
    return lax.psum(jnp.sum((h - y) ** 2), "dp") / (B * D)


def _zero3_gather_all(W_shard, x, y):
    """10.12 with the whole model gathered before the loop."""
    import jax.numpy as jnp
    from jax import lax

    W = lax.all_gather(W_shard, "dp", axis=1, tiled=True)
    h = x
    for i in range(W.shape[0]):
        h = layer(h, W[i])
    return lax.psum(jnp.sum((h - y) ** 2), "dp") / (B * D)


def dp_reference(seed):
    """10.11's expected vector: the single-device gradient of the mean loss; the all-reduce bytes
    of the gradient (L·D·D float32; op counts are left out: XLA:CPU combines all-reduces) and no
    all-gather."""
    _, g, _ = _single_device_step(seed)
    return np.concatenate([np.ravel(np.asarray(g, np.float64)), [4.0 * L * D * D, 0.0]])


def run_zero3(zero3_loss):
    """Runs ``zero3_loss(W_shard, x, y) -> mean loss`` per device (W sharded W[L, D_X, D],
    x and y split over "dp") under jax.value_and_grad: returns the function of ``seed`` that
    10.12 grades (loss, gradient, then all-gather and reduce-scatter ops and bytes)."""
    def run(seed):
        import jax
        from jax.sharding import PartitionSpec as P

        from ... import simulate

        W, x, y = problem(seed)
        mesh = _mesh()
        fn = jax.jit(jax.shard_map(jax.value_and_grad(zero3_loss), mesh=mesh,
                                   in_specs=(P(None, "dp"), P("dp"), P("dp")),
                                   out_specs=(P(), P(None, "dp"))))
        Ws = simulate.shard(W, mesh, (None, "dp", None))
        loss, g = _run_explained(fn, (Ws, x, y), "dp",
                                 "W_shard is [L, D/8, D], x and y are [B/8, D]")
        colls = simulate.collectives_in(fn, Ws, x, y)
        return _summary([loss, g], colls, ("all-gather", "reduce-scatter"))
    return run


def zero3_reference(seed):
    """10.12's expected vector: the single-device loss and gradient; L all-gathers of one layer
    (D·D float32 each) and L reduce-scatters of its gradient."""
    loss, g, _ = _single_device_step(seed)
    V = 4.0 * D * D
    return np.concatenate([[float(loss)], np.ravel(np.asarray(g, np.float64)),
                           [L, L * V, L, L * V]])

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '10.1': ("Each device's mean is over an equal share of the batch.",
             'the global mean is the mean of the local means when the shares are equal'),
    '10.2': ('Where does the 8 come from? List the bytes per parameter of mixed-precision Adam.',
             'add weights, gradients, master copy and two optimizer states, and compare with 8'),
    '10.3': ('Plain DP keeps every state of every parameter on every device.',
             'the usable HBM over the bytes per parameter'),
    '10.4': ("Compute-bound means the backward's math outlasts the gradient AllReduce.",
             "per device: the math time of the batch's backward against the AllReduce time of "
             'the bf16 gradients on NVLink; solve for the batch'),
    '10.5': ('Across nodes the AllReduce is hierarchical: which phase is slowest?',
             'time the NVLink phases and the NIC phase of the AllReduce of the gradients, take '
             'the slowest, and compare with the backward per token'),
    '10.6': ('FSDP gathers the weights for the forward and again for the backward.',
             'per micro-batch: an AllGather for the forward, another for the backward (the '
             'embedding kept), a ReduceScatter of the gradients'),
    '10.7': ('Which collectives cross the NICs in each scheme?',
             'FSDP: its gathers and reduce-scatter across nodes; HSDP: one AllReduce of the '
             'shard across nodes'),
    '10.8': ('The sharded states, plus what is gathered at a time.',
             'the model states divided by dp, plus the bf16 buffers of the layers gathered at once'),
    '10.9': ('The critical batch changes when the job leaves the node.',
             'test each power of two: the critical batch inside a node, then across nodes'),
    '10.10': ("On a torus, an AllReduce uses all the chip's links at once.",
              "the AllReduce of the bf16 gradients over the chip's total ICI bandwidth, against "
              'the backward per token'),
    '10.11': ('Each device sees only its rows: its gradient is a partial sum.',
              'take the gradient of the summed loss over your rows, scale it to the global '
              "mean, and add it over 'dp' with lax.psum"),
    '10.12': ("Each layer's weight is sharded: gather it just before it is used.",
              "inside the layer loop all-gather the layer's shard over 'dp' (tiled), compute, "
              'and psum the loss'),
}


# ---- More listed mistakes, each with what the student reads (issue 21).

def _comm_bound_in_node_only(p):
    n = 8
    while p.tokens / n >= _dp_critical(hardware.cluster(p.accelerator, 8), 8):
        n *= 2
    return n


WRONG_METHODS["10.9"] = {
    "the in-node critical batch at every size": (
        _comm_bound_in_node_only,
        "beyond 8 GPUs the AllReduce crosses the network: the critical batch jumps, so test "
        "each size with its own cluster"),
    "the last compute-bound size": (
        lambda p: dp_comm_bound_devices(p) // 2,
        "that is the last size still compute-bound: the question asks for the first that is "
        "communication-bound"),
}
WRONG_METHODS["10.10"]["fp32 gradients"] = (
    lambda p: 2 * tpu_critical(p),
    "the gradients are all-reduced in bf16, 2 bytes per parameter")

with_messages(WRONG_METHODS, {
    "10.1": {"plain sum (no scaling)": "the mean of equal-sized local means is the global mean",
             "divide by the sequences of the batch": "each local mean already divides by its rows"},
    "10.2": {"inverse ratio": "compare the true bytes per parameter with the shortcut's 8",
             "weights and gradients only (4 bytes)":
             "Adam's master copy and two moments count too"},
    "10.3": {"8 bytes per parameter": "mixed-precision Adam keeps 16 bytes per parameter",
             "reserve ignored": "subtract the memory the question reserves"},
    "10.4": {"C/W without (n-1)/n": "a ring AllReduce sends 2(n-1)/n of the array",
             "forward and backward (6Ψ) hide it":
             "the AllReduce overlaps the backward only, 4Ψ FLOPs per token",
             "fp32 gradients": "the gradients are all-reduced in bf16"},
    "10.5": {"flat ring over the NICs": "the AllReduce is hierarchical: NVLink, then the NICs",
             "inside the node only": "across nodes the NIC phase is the slowest",
             "NVLink and NIC phases one after the other":
             "the phases pipeline: the slowest phase decides"},
    "10.6": {"no backward re-gather": "FSDP gathers the weights again for the backward",
             "once per step, not per micro-batch": "each micro-batch gathers the weights again",
             "plain DP's AllReduce": "FSDP gathers and reduce-scatters instead of all-reducing"},
    "10.7": {"3 collectives vs 1": "compare the bytes crossing the NICs, not the collectives",
             "3 vs an AllReduce's 2, embedding re-gathered too":
             "the backward re-gather keeps the embedding",
             "the same": "FSDP sends more across the nodes than HSDP"},
    "10.8": {"no gathered buffers": "the gathered layers' bf16 weights take memory too",
             "one gathered layer": "two layers are gathered at once (prefetch)"},
    "10.10": {"C/W of one link": "an AllReduce on the torus uses all the chip's links"},
})
