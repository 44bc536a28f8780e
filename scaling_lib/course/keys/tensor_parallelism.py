"""Answer key for Chapter 11 (Tensor and sequence parallelism) exercises.

The implement-it references run on the simulated devices: the notebook asks for 8 CPU devices
(``simulate.use_cpu_devices(8)``) before it calls this module's JAX-using functions.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ... import hardware, memory, models, simulate
from ...parallelism import ParallelPlan, collectives, split, steptime, tensor
from ..grading.tables import with_messages

LLAMA3 = ["llama3-8b", "llama3-70b", "llama3-405b"]
# Ex 11.2's systems: (accelerator, the W of tensor.tp_limit: one-way bytes/s per device)
SYSTEMS = {
    "H100, NVLink inside a node": ("h100", hardware.cluster("h100", 8).intra_node.bytes_per_s),
    "H100, across nodes (one 400 Gb/s NIC per GPU)":
        ("h100", hardware.cluster("h100", 16).inter_node.bytes_per_s),
    "TPU v5p, one ICI torus axis (two links)":
        ("tpu-v5p", 2 * hardware.get_cluster("tpu-v5p-pod").intra_node.per_link_bytes_per_s),
}


def activation_all_reduce_bytes(p):
    """Ex 11.1: V · count of one step's activation AllReduces (no SP, loss left out), bf16."""
    c = models.get(p.model)
    plan = ParallelPlan(tp=8, micro_batch=p.b)
    return sum(x.nbytes * x.count for x in collectives(c, plan, p.b, p.T)
               if x.kind == "all-reduce" and x.nbytes == 2 * p.b * p.T * c.D)


def largest_tp(p):
    """Ex 11.2: the largest integer tp whose forward AllReduces hide behind the matmuls."""
    acc, W = SYSTEMS[p.system]
    return math.floor(tensor.tp_limit(p.model, acc, W))


def kv_weight_bytes(p):
    """Ex 11.3: bf16 bytes of one layer's W_K and W_V on one tp rank (kv heads replicated)."""
    c = models.get(p.model)
    heads = c.K * tensor.kv_replication(c, p.tp) / p.tp
    return 2 * c.D * heads * c.H * 2


def sp_saving(p):
    """Ex 11.4: bytes of one layer's activations sequence parallelism saves per device."""
    kw = dict(recompute="selective", tp=p.tp, flash_attention=True)
    return (memory.activation_bytes(p.model, 1, p.T, **kw)
            - memory.activation_bytes(p.model, 1, p.T, sequence_parallel=True, **kw))


def _tp_comm_time(p, sp):
    c = models.get(p.model)
    node = hardware.cluster("h100", 8)
    plan = ParallelPlan(tp=8, micro_batch=p.b, sequence_parallel=sp)
    return sum(sum(steptime.comm_time(x, node, plan).values())
               for x in collectives(c, plan, p.b, p.T) if not x.overlappable)


def tp_comm_time(p):
    """Ex 11.5: seconds of one step's critical-path tp collectives (SP) on a DGX H100."""
    return _tp_comm_time(p, True)


@functools.lru_cache(maxsize=None)
def _best_tp(model, B, T):
    return split.best_split(model, hardware.cluster("h100", 64), B, T).plan.tp


def best_tp(p):
    """Ex 11.6: tp of the fastest FSDP x TP split of 64 H100s that fits."""
    return _best_tp(p.model, p.B, p.T)


def comm_to_math(p):
    """Ex 11.7: T_comm / T_math of one layer's forward on tp H100s over NVLink."""
    t_math, t_comm = tensor.layer_times(p.model, p.tp, 4096, "h100", 450e9)
    return t_comm / t_math


def backward_all_reduce_operator():
    """Ex 11.11: the Megatron operator that is an AllReduce in the backward pass."""
    return "f"


# ---- wrong methods (tests/test_wrong_methods.py: each must FAIL at the cell's tolerance) ---------

def _largest_tp_mlp_only(p):
    acc, W = SYSTEMS[p.system]
    c = models.get(p.model)
    f = 2 * 3 * c.D * c.F
    return math.floor(1 + f * W / (4 * 2 * c.D * hardware.get(acc).peak_flops_per_s()))


def _comm_to_math_mlp_only(p):
    c = models.get(p.model)
    return comm_to_math(p) * tensor.layer_flops_per_token(c) / (2 * 3 * c.D * c.F)


WRONG_METHODS = {
    "11.8": {"no g (partial sums returned)": lambda *a: _wrong_mlp_no_sum(*a),
             "gather the weights instead": lambda *a: _wrong_mlp_gather_weights(*a)},
    "11.9": {"f backward = identity": lambda seed: _wrong_f_identity(seed)},
    "11.10": {"AllReduce then slice": lambda *a: _wrong_sp_all_reduce(*a)},
    "11.1": {"forward pass only": lambda p: activation_all_reduce_bytes(p) / 2,
             "fp32 activations": lambda p: 2 * activation_all_reduce_bytes(p),
             "a shard of the activations (V / tp)": lambda p: activation_all_reduce_bytes(p) / 8},
    "11.2": {"no (tp - 1) / tp factor": lambda p: largest_tp(p) - 1,
             "both directions' bandwidth": lambda p: math.floor(
                 1 + 2 * (tensor.tp_limit(p.model, *SYSTEMS[p.system]) - 1)),
             "the MLP's matmuls only": _largest_tp_mlp_only},
    "11.3": {"no replication (K / tp heads)":
             lambda p: kv_weight_bytes(p) / tensor.kv_replication(p.model, p.tp),
             "W_K only": lambda p: kv_weight_bytes(p) / 2},
    "11.4": {"every activation divided by tp": lambda p: memory.activation_bytes(
        p.model, 1, p.T, recompute="selective", flash_attention=True) * (1 - 1 / p.tp),
             "fp32 activations": lambda p: 2 * sp_saving(p),
             "the replicated arrays freed entirely": lambda p: sp_saving(p) / (1 - 1 / p.tp)},
    "11.5": {"forward pass only": lambda p: tp_comm_time(p) / 2,
             "fp32 activations": lambda p: 2 * tp_comm_time(p)},
    "11.6": {"tp = 8, a whole node": lambda p: 8,
             "pure FSDP (tp = 1)": lambda p: 1},
    "11.11": {"g, the forward AllReduce": lambda: "g"},
    "11.7": {"no (tp - 1) / tp factor": lambda p: comm_to_math(p) * p.tp / (p.tp - 1),
             "the MLP's matmuls only": _comm_to_math_mlp_only},
}



def _wrong_mlp_no_sum(B, D, F, seed):
    """11.8 wrong method: the row-parallel partial sums returned without g."""
    jax = _jax()
    return on_devices(lambda x, w1, w2: jax.nn.gelu(x @ w1) @ w2)(B, D, F, seed)


def _wrong_mlp_gather_weights(B, D, F, seed):
    """11.8 wrong method: gather both weights and compute the whole MLP on every device."""
    jax = _jax()

    def local(x, w1, w2):
        w1 = jax.lax.all_gather(w1, "tp", axis=1, tiled=True)
        w2 = jax.lax.all_gather(w2, "tp", axis=0, tiled=True)
        return jax.nn.gelu(x @ w1) @ w2
    return on_devices(local)(B, D, F, seed)


def _wrong_sp_all_reduce(B, D, F, seed):
    """11.10 wrong method: AllGather in, AllReduce out, then keep my rows."""
    jax = _jax()

    def local(x, w1, w2):
        x = jax.lax.all_gather(x, "tp", axis=0, tiled=True)
        y = jax.lax.psum(jax.nn.gelu(x @ w1) @ w2, "tp")
        rows = y.shape[0] // 8
        return jax.lax.dynamic_slice_in_dim(y, jax.lax.axis_index("tp") * rows, rows, 0)
    return on_devices(local, "sequence")(B, D, F, seed)


def _wrong_f_identity(seed):
    """11.9 wrong method: f's backward passes the partial cotangent through."""
    return checked_two_block_grads(lambda _, ct: (ct,))(seed)


# ---- implement-it references (run on the 8 simulated devices) ------------------------------------


def _jax():
    import jax

    return jax


def mlp_inputs(B, D, F, seed):
    """x[B, D], W1[D, F], W2[F, D] in float32, drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((B, D)).astype(np.float32),
            (rng.standard_normal((D, F)) / np.sqrt(D)).astype(np.float32),
            (rng.standard_normal((F, D)) / np.sqrt(F)).astype(np.float32))


def mlp_reference(B, D, F, seed):
    """Ex 11.8 / 11.10 reference: gelu(x W1) W2 on one device (JAX's tanh GELU), in float32."""
    jax = _jax()
    x, w1, w2 = mlp_inputs(B, D, F, seed)
    return np.asarray(jax.nn.gelu(x @ w1) @ w2)


def _mesh():
    return simulate.make_mesh((8,), ("tp",))


def on_devices(local, layout="megatron"):
    """Wrap a student's per-device ``local(x, w1, w2)`` as ``run(B, D, F, seed) -> y`` on 8
    devices, the inputs drawn by :func:`mlp_inputs`.

    ``layout`` "megatron": x[B, D] replicated, W1[D, F_tp] column-split, W2[F_tp, D] row-split,
    y[B, D] replicated: exactly one all-reduce of y allowed. "sequence": x[S_tp, D] and y[S_tp, D]
    split by rows (sequence parallelism): exactly one all-gather of x and one reduce-scatter of
    y allowed. Raises ValueError (which the checker reports as a FAIL line) when the compiled
    collectives differ.
    """
    jax = _jax()
    P = jax.sharding.PartitionSpec
    if layout not in ("megatron", "sequence"):
        raise ValueError(f"layout={layout!r}; valid choices: megatron, sequence")
    row = P("tp", None) if layout == "sequence" else P()

    def run(B, D, F, seed):
        fn = jax.jit(jax.shard_map(local, mesh=_mesh(), in_specs=(row, P(None, "tp"), P("tp", None)),
                                   out_specs=row))
        x, w1, w2 = mlp_inputs(B, D, F, seed)
        out = np.asarray(fn(x, w1, w2))
        got = simulate.emitted_totals(simulate.collectives_in(fn, x, w1, w2))
        V = float(x.nbytes)
        want = ({("all-reduce", 8): V} if layout == "megatron"
                else {("all-gather", 8): V, ("reduce-scatter", 8): V})
        if got != want:
            raise ValueError(f"compiled collectives {got or 'none'} (bytes per kind, group); "
                             f"expected {want}")
        return out

    return run


def _two_block_params(seed, B=8, D=16, F=64):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((B, D)).astype(np.float32)
    ws = [(rng.standard_normal((D, F)).astype(np.float32) / np.sqrt(D),
           rng.standard_normal((F, D)).astype(np.float32) / np.sqrt(F)) for _ in range(2)]
    return x, ws


def two_block_loss(x, ws, f=None, g=None):
    """Two residual MLP blocks and a squared loss: h += g(gelu(f(h) W1) W2), sum(h^2) / 2."""
    jax = _jax()
    f = f or (lambda v: v)
    g = g or (lambda v: v)
    h = x
    for w1, w2 in ws:
        h = h + g(jax.nn.gelu(f(h) @ w1) @ w2)
    return 0.5 * jax.numpy.sum(h * h)


def two_block_grads_reference(seed):
    """Ex 11.9 reference: one device's gradients (x, then each W1, W2), flattened."""
    jax = _jax()
    x, ws = _two_block_params(seed)
    gx, gws = jax.grad(two_block_loss, argnums=(0, 1))(x, ws)
    return np.concatenate([np.ravel(gx)] + [np.ravel(w) for pair in gws for w in pair])


def tp_two_block(f_backward, *, check_vma=False):
    """(grads(seed), collectives(seed)) of the two blocks on 8 devices with Megatron's f and g.

    f is the identity forward and ``f_backward(residual, ct) -> (ct_in,)`` backward; g is an
    AllReduce forward and the identity backward. Both are ``jax.custom_vjp``, inside one
    ``shard_map`` with ``check_vma=False`` (so JAX inserts nothing: the collectives are the
    ones written here).
    """
    jax = _jax()
    lax, P = jax.lax, jax.sharding.PartitionSpec

    @jax.custom_vjp
    def f(x):
        return x

    f.defvjp(lambda x: (x, None), f_backward)

    @jax.custom_vjp
    def g(y):
        return lax.psum(y, "tp")

    g.defvjp(lambda y: (lax.psum(y, "tp"), None), lambda _, ct: (ct,))

    def local(x, ws):
        loss, (gx, gws) = jax.value_and_grad(two_block_loss, argnums=(0, 1))(x, ws, f, g)
        return loss, gx, gws

    wspec = [(P(None, "tp"), P("tp", None))] * 2
    fn = jax.jit(jax.shard_map(local, mesh=_mesh(), in_specs=(P(), wspec),
                               out_specs=(P(), P(), wspec), check_vma=check_vma))

    def grads(seed):
        x, ws = _two_block_params(seed)
        loss, gx, gws = fn(x, ws)
        return np.concatenate([np.ravel(gx)] + [np.ravel(w) for pair in gws for w in pair])

    def emitted(seed=0):
        x, ws = _two_block_params(seed)
        return simulate.emitted_totals(simulate.collectives_in(fn, x, ws))

    def loss(seed=0):
        x, ws = _two_block_params(seed)
        return float(fn(x, ws)[0])

    return grads, emitted, loss


def checked_two_block_grads(f_backward):
    """Ex 11.9: the student's f backward in the two blocks, checked: 4 AllReduces of x's size
    (g twice forward, f twice backward) and nothing else. Returns ``grads(seed)``."""
    grads, emitted, _ = tp_two_block(f_backward)

    def run(seed):
        out = grads(seed)
        x, _ = _two_block_params(seed)
        want = {("all-reduce", 8): 4.0 * x.nbytes}
        got = emitted(seed)
        if got != want:
            raise ValueError(f"compiled collectives {got or 'none'}; expected {want} (g's "
                             "AllReduce forward and f's backward, in each of the two blocks)")
        return out

    return run

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '11.1': ('How many AllReduces does a TP layer do, and how big is each?',
             'each moves the activations a·b·T·D; count two per layer forward and two backward, '
             "plus the embedding's"),
    '11.2': ('Compute shrinks with t; the AllReduce bytes do not.',
             'write the math time and the AllReduce time per device in terms of t; the batch '
             'cancels; solve for t'),
    '11.3': ('With more ranks than kv heads, each rank still needs a whole kv head.',
             'count how many ranks share each kv head'),
    '11.4': ('Which activations does TP leave replicated?',
             'count the bytes of the arrays TP leaves replicated; sequence parallelism leaves each '
             'rank 1/tp of them'),
    '11.5': ('With sequence parallelism each AllReduce becomes two collectives.',
             "an AllGather and a ReduceScatter per block, forward and backward, plus the loss's "
             'sums'),
    '11.6': ('Try every split and keep the best that fits.',
             'for tp = 1, 2, 4, ..., 64 with fsdp = 64/tp, estimate each plan, drop those that '
             'do not fit, take the fastest'),
    '11.7': ('Communication over compute for one layer: what cancels?',
             'write both per token; the token count cancels and leaves the chip, the link and t'),
    '11.8': ('The first matmul is column-split: is gelu safe on your columns alone?',
             'apply gelu to your column shard, multiply by your row shard, then sum the partial '
             'outputs over the axis'),
    '11.9': ('Which gradient contracts over the dimension that is split?',
             'dX contracts over the split F: each device holds only a partial sum'),
    '11.10': ('Sequence-parallel layers receive split rows; the matmuls need all of them.',
              'gather the rows before the column-parallel matmul and reduce-scatter after the '
              'row-parallel one'),
    '11.11': ("Which operator's backward has to add contributions from every device?",
              "look at the identity that feeds every device's column shard: its backward is a sum"),
}


# ---- More listed mistakes, each with what the student reads (issue 21).

def _wrong_f_pmean(seed):
    """11.9 wrong method: f's backward averages the partial cotangents."""
    jax = _jax()
    return checked_two_block_grads(lambda _, ct: (jax.lax.pmean(ct, "tp"),))(seed)


def _wrong_sp_no_scatter(B, D, F, seed):
    """11.10 wrong method: gather in, then keep my rows of the unreduced partial output."""
    jax = _jax()

    def local(x, w1, w2):
        x = jax.lax.all_gather(x, "tp", axis=0, tiled=True)
        y = jax.nn.gelu(x @ w1) @ w2
        rows = y.shape[0] // 8
        return jax.lax.dynamic_slice_in_dim(y, jax.lax.axis_index("tp") * rows, rows, 0)
    return on_devices(local, "sequence")(B, D, F, seed)


WRONG_METHODS["11.8"]["no g (partial sums returned)"] = (
    WRONG_METHODS["11.8"]["no g (partial sums returned)"],
    "each device's output is a partial sum over its slice of F: add them over 'tp' (the g "
    "operator, lax.psum) before returning")
WRONG_METHODS["11.8"]["gather the weights instead"] = (
    WRONG_METHODS["11.8"]["gather the weights instead"],
    "gathering the weights moves far more bytes than the one AllReduce of the output the "
    "Megatron split needs: keep the weights split and psum the output")
WRONG_METHODS["11.9"]["f backward = identity"] = (
    WRONG_METHODS["11.9"]["f backward = identity"],
    "f's backward must add the partial gradients of x from every device (an AllReduce): "
    "passing them through leaves each device with its own part only")
WRONG_METHODS["11.9"]["pmean instead of psum"] = (
    _wrong_f_pmean,
    "the partial gradients of x add up to the gradient: sum them (psum), do not average them")
WRONG_METHODS["11.10"]["no reduce-scatter"] = (
    _wrong_sp_no_scatter,
    "after the row-parallel matmul each device holds a partial sum of every row: "
    "reduce-scatter it over 'tp' so each keeps its own rows, summed")
SYNONYMS = {"11.11": {"f": ("the f operator", "f operator", "operator f", "f (identity)")}}

with_messages(WRONG_METHODS, {
    "11.10": {"AllReduce then slice":
              "an AllReduce followed by keeping your rows moves twice the bytes: reduce-scatter "
              "the rows instead"},
    "11.1": {"forward pass only": "the backward all-reduces as often as the forward",
             "fp32 activations": "the activations are bf16, 2 bytes each",
             "a shard of the activations (V / tp)": "each AllReduce moves the whole activation"},
    "11.2": {"no (tp - 1) / tp factor": "a ring AllReduce sends 2(t-1)/t of the array",
             "both directions' bandwidth": "use the one-way bandwidth",
             "the MLP's matmuls only": "count the attention's matmuls too"},
    "11.3": {"no replication (K / tp heads)": "with t > K each device holds a whole kv head",
             "W_K only": "count W_K and W_V"},
    "11.4": {"every activation divided by tp":
             "tensor parallelism already splits most activations: sequence parallelism saves "
             "only the replicated rest",
             "fp32 activations": "the activations are bf16, 2 bytes each",
             "the replicated arrays freed entirely":
             "sequence parallelism does not free those arrays: each rank still keeps its 1/tp of "
             "them, so it saves (1 - 1/tp) of the replicated part"},
    "11.5": {"forward pass only": "the backward communicates as much as the forward",
             "fp32 activations": "the activations are bf16, 2 bytes each"},
    "11.6": {"tp = 8, a whole node": "estimate every split and take the fastest that fits",
             "pure FSDP (tp = 1)": "estimate every split and take the fastest that fits"},
    "11.7": {"no (tp - 1) / tp factor": "a ring AllReduce sends 2(t-1)/t of the array",
             "the MLP's matmuls only": "count the attention's matmuls too"},
    "11.11": {"g, the forward AllReduce":
              "g all-reduces in the forward; its backward is the identity. The operator whose "
              "backward sums is f"},
})
