"""``train_step``: one real training step of the library's transformer on simulated devices.

The program is written with ``jax.shard_map``: every collective in it is one the code asks for
(or its transpose, which ``jax.grad`` derives), so the compiled program shows which run. The
devices form a mesh with axes ``dpr`` (dp / S replicas), ``dps`` (the ZeRO shard group of S
ranks; all of dp when zero = 0), ``cp`` (context parallelism, see ``context``) and ``tp``; an
axis of size 1 is left out.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ..models import TransformerConfig
from ..parallelism.plan import ParallelPlan
from . import context as _context
from . import data as _data
from . import fsdp as _fsdp
from . import model as _model
from . import moe as _moe
from . import tensor as _tensor
from .devices import _jax, make_mesh
from .hlo import Collective, parse_hlo_collectives

DTYPES = {"f32": "float32", "bf16": "bfloat16"}
OPTIMIZERS = ("sgd", "adam")
LR, BETAS, EPS = 0.1, (0.9, 0.999), 1e-8
# Compile faster: these options only tune LLVM's code generation for the CPU, after XLA's HLO
# passes have fixed which collectives run (the programs are tiny; speed is not measured).
FAST_CODEGEN = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


@dataclass(frozen=True)
class StepResult:
    """One training step: the loss, the parameters it started from, their gradients and the
    parameters after the optimizer step.

    ``params``, ``grads`` and ``updated_params`` are unsharded float64 host arrays with the same
    keys for every plan; ``collectives`` is what XLA compiled for the step, as
    :func:`~scaling_lib.simulate.collectives_in` returns them.
    """

    loss: float
    params: dict
    grads: dict
    collectives: list[Collective]
    updated_params: dict


def check_supported(cfg, plan: ParallelPlan, B: int, T: int, dtype: str, optimizer: str):
    """Raise ValueError naming every part of (cfg, plan) that train_step does not simulate."""
    from ..parallelism import comms as _comms  # the strategies' own constraints

    if not isinstance(cfg, TransformerConfig):
        raise ValueError(f"cfg must be a TransformerConfig, got {cfg!r}")
    if not isinstance(plan, ParallelPlan):
        raise ValueError(f"plan must be a ParallelPlan, got {plan!r}")
    from . import pipeline as _pipeline

    bad = []
    if plan.cp > 1 and (plan.zero or plan.shard_group is not None):
        bad.append(f"cp={plan.cp} with zero={plan.zero}")
    if plan.cp > 1 and cfg.is_moe:
        bad.append(f"cp={plan.cp} with an MoE model (cfg.E={cfg.E})")
    if plan.pp > 1 and cfg.is_moe:
        bad.append(f"pp={plan.pp} with an MoE model (cfg.E={cfg.E})")
    bad += _pipeline.unsupported(cfg, plan)
    if plan.recompute != "none":
        bad.append(f"recompute={plan.recompute!r}")
    if cfg.is_moe and (plan.zero or plan.sequence_parallel):
        bad.append(f"zero={plan.zero}, sequence_parallel={plan.sequence_parallel} with an MoE "
                   f"model (cfg.E={cfg.E}; MoE runs with zero=0, no sequence parallelism)")
    for field, ok in (("mla", None), ("bias", False), ("norm", "rmsnorm"),
                      ("learned_positions", 0), ("dropout", False), ("tied_embeddings", False),
                      ("glu", True)):
        if getattr(cfg, field) != ok:
            bad.append(f"cfg.{field}={getattr(cfg, field)!r}")
    if plan.world_size > 8:
        bad.append(f"world_size={plan.world_size} > 8 devices")
    if bad:
        raise ValueError(f"train_step does not simulate {', '.join(bad)}; it runs dp, tp, "
                         "zero 0-3, shard_group, sequence_parallel, cp (with zero=0) and pp "
                         "(gpipe, 1f1b, interleaved) for dense models, and ep (MoE models, "
                         "zero=0) on up to 8 devices, for an "
                         "RMSNorm/SwiGLU model without biases or tied embeddings")
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r}; valid choices: {', '.join(DTYPES)}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer={optimizer!r}; valid choices: {', '.join(OPTIMIZERS)}")
    reasons = _comms.constraints(cfg, plan, B, T)
    if plan.tp > 1 and cfg.K % plan.tp:
        reasons.append(f"K={cfg.K} kv heads are not divisible by tp={plan.tp} (replicating kv "
                       "heads is not simulated)")
    if plan.tp > 1 and cfg.V % plan.tp:
        reasons.append(f"V={cfg.V} is not divisible by tp={plan.tp} (the simulated model does "
                       "not pad the vocabulary as Megatron-LM does)")
    kv = cfg.K // plan.tp if cfg.K % plan.tp == 0 else 1
    if plan.cp > 1 and plan.cp_variant == "ulysses" and kv % plan.cp and plan.cp % kv:
        reasons.append(f"ulysses with {kv} kv heads per tensor rank and cp={plan.cp}: the "
                       "simulated step replicates kv heads only when one count divides the other")
    S = plan.zero_group if plan.zero else 1
    for name, (shape, tp_dim, z_dim) in _model.layout(cfg).items():
        if plan.zero and shape[z_dim] % S:
            reasons.append(f"{name} dimension {shape[z_dim]} is not divisible by the ZeRO "
                           f"shard group S={S}")
    if reasons:
        raise ValueError("; ".join(dict.fromkeys(reasons)))


class Ops:
    """The parallel operations the model's forward pass asks for (see ``model``)."""

    def __init__(self, jax, cfg, plan, axes, T=None):
        self.jax, self.lax, self.jnp = jax, jax.lax, jax.numpy
        self.cp, self.cp_variant, self.T = axes.get("cp"), plan.cp_variant, T
        self.cp_size = plan.cp
        self.tp = axes.get("tp")
        self.sp = bool(plan.sequence_parallel) and self.tp is not None
        self.shard = axes.get("dps") if plan.zero == 3 else None
        self.ep = axes.get(_moe.EP_AXIS)
        self.layout = _model.layout(cfg)

    def fetch(self, name, w):
        if self.shard is None:
            return w
        return _fsdp.fetch(self.jax, self.lax, w, self.layout[name][2], self.shard)

    def remat(self, fn):
        return fn if self.shard is None else _fsdp.remat(self.jax, fn)

    def attention(self, jax, jnp, q, k, v, H):
        if self.cp is None:
            return _model.attention(jax, jnp, q, k, v, H)
        return _context.attention(jax, self.cp_variant, q, k, v, H, self.cp, self.T,
                                  self.cp_size)

    def enter(self, x):
        return _tensor.enter(self.lax, x, self.tp, self.sp)

    def leave(self, y):
        return _tensor.leave(self.lax, y, self.tp, self.sp)

    def dispatch(self, x):
        return _moe.dispatch(self.lax, x, self.ep)

    def combine(self, y):
        return _moe.combine(self.lax, y, self.ep)

    def embed(self, table, tokens):
        return _tensor.embed(self.lax, self.jnp, table, tokens, self.tp, self.sp)

    def cross_entropy_sum(self, logits, targets):
        return _tensor.cross_entropy_sum(self.jax, self.lax, self.jnp, logits, targets, self.tp)


def _update(jnp, p, g, optimizer):
    """One optimizer step from a fresh state: SGD, or Adam's first step (m = (1-b1)g, ...)."""
    if optimizer == "sgd":
        return p - LR * g
    m = (1 - BETAS[0]) * g / (1 - BETAS[0])
    v = (1 - BETAS[1]) * g * g / (1 - BETAS[1])
    return p - LR * m / (jnp.sqrt(v) + EPS)


def _mesh_axes(plan):
    """{axis name: size} for the mesh axes of size > 1 (dpr, dps, tp; with expert parallelism
    dpr, ep, tp: the ep ranks are data-parallel ranks too), in mesh order."""
    S = plan.zero_group if plan.zero else plan.dp
    sizes = {"dpr": plan.dp // S, "dps": S, "cp": plan.cp, "tp": plan.tp}
    if plan.ep > 1:  # zero = 0 (check_supported)
        sizes = {"dpr": plan.dp // plan.ep, _moe.EP_AXIS: plan.ep, "cp": plan.cp, "tp": plan.tp}
    return {k: v for k, v in sizes.items() if v > 1}


def _build(cfg, plan, B, T, dtype, optimizer):
    """(step function, argument shapes, mesh or None) for these settings."""
    jax = _jax()
    jnp, lax, P = jax.numpy, jax.lax, jax.sharding.PartitionSpec
    sizes = _mesh_axes(plan)
    axes = {k: k for k in sizes}
    # the gradient's replicas (the ep ranks are data-parallel ranks too), and the batch's axes
    dp_axes = tuple(a for a in ("dpr", "dps", _moe.EP_AXIS, "cp") if a in axes)
    batch_axes = tuple(a for a in ("dpr", "dps", _moe.EP_AXIS) if a in axes)

    def replica_axes(name):  # the dp axes over which parameter ``name`` is replicated
        return tuple(a for a in dp_axes if not (a == _moe.EP_AXIS and _moe.is_expert(name)))
    ops = Ops(jax, cfg, plan, axes, T)
    lay = ops.layout
    n_micro = plan.n_microbatches(B)
    S = sizes.get("dps", 1) if plan.zero else 1

    def spec(name, sharded):
        shape, tp_dim, z_dim = lay[name]
        out = [None] * len(shape)
        if tp_dim is not None and ops.tp:
            out[tp_dim] = "tp"
        if sharded and "dps" in axes:
            out[z_dim] = "dps"
        if _moe.EP_AXIS in axes and _moe.is_expert(name):
            out[0] = _moe.EP_AXIS
        return P(*out)

    def step(params, tokens, targets):
        local = {k: lax.pcast(w, tuple(a for a in replica_axes(k)
                                       if not (plan.zero == 3 and a == "dps")),
                              to="varying") if replica_axes(k) else w for k, w in params.items()}

        def loss_fn(w, tok, tgt):
            return _model.loss_sum(jax, jnp, ops, cfg, w, tok, tgt) / (B * T)

        grad_fn = jax.value_and_grad(loss_fn)
        stage2 = plan.zero == 2 and "dps" in axes  # stage 2 keeps only its gradient shard

        def micro(carry, batch):
            w = local
            if plan.zero == 3:  # pin the gathers inside the micro-batch (no hoisting)
                w = {k: lax.optimization_barrier((v, batch[0]))[0] for k, v in local.items()}
            value, g = grad_fn(w, *batch)
            if stage2:
                g = {k: _fsdp.reduce_scatter(lax, v, lay[k][2], "dps") for k, v in g.items()}
            if carry is None:
                return value, g
            return (carry[0] + value, {k: carry[1][k] + g[k] for k in g}), None

        if n_micro == 1:
            loss, acc = micro(None, (tokens, targets))
        else:  # gradient accumulation: a loop over micro-batches
            t = tokens.shape[-1]  # T / cp tokens on this rank
            split = (tokens.reshape(n_micro, -1, t), targets.reshape(n_micro, -1, t))
            zeros = {k: jnp.zeros_like(v) for k, v in local.items()}
            if stage2:
                zeros = {k: _fsdp.my_shard(lax, v, lay[k][2], "dps", S) for k, v in zeros.items()}
            zero_loss = lax.pcast(jnp.zeros((), jnp.float32), dp_axes, to="varying")
            (loss, acc), _ = lax.scan(micro, (zero_loss, zeros), split)
        if plan.zero == 0:
            grads = {k: _data.all_reduce(lax, v, replica_axes(k)) for k, v in acc.items()}
            new = {k: _update(jnp, params[k], grads[k], optimizer) for k in params}
        else:
            if plan.zero == 1 and "dps" in axes:
                acc = {k: _fsdp.reduce_scatter(lax, v, lay[k][2], "dps") for k, v in acc.items()}
            grads = {k: _data.all_reduce(lax, v, ("dpr",) if "dpr" in axes else ())
                     for k, v in acc.items()}
            if plan.zero == 3 or "dps" not in axes:
                new = {k: _update(jnp, params[k], grads[k], optimizer) for k in params}
            else:
                new = {}
                for k, p in params.items():
                    z = lay[k][2]
                    mine = _update(jnp, _fsdp.my_shard(lax, p, z, "dps", S), grads[k], optimizer)
                    new[k] = _fsdp.all_gather(lax, mine, z, "dps")
        return jnp.reshape(loss, (1,)), grads, new

    dt = jnp.dtype(DTYPES[dtype])
    shapes = (
        {k: jax.ShapeDtypeStruct(v[0], dt) for k, v in lay.items()},
        jax.ShapeDtypeStruct((B, T), jnp.int32), jax.ShapeDtypeStruct((B, T), jnp.int32))
    if not sizes:  # the one-device reference: no mesh, no collectives
        return step, shapes, None
    mesh = make_mesh(tuple(sizes.values()), tuple(sizes))
    pspec = {k: spec(k, plan.zero == 3) for k in lay}
    gspec = {k: spec(k, plan.zero >= 1) for k in lay}
    bspec = P(batch_axes or None, "cp" if "cp" in axes else None)
    fn = jax.shard_map(step, mesh=mesh, in_specs=(pspec, bspec, bspec),
                       out_specs=(P(dp_axes or None), gspec, pspec))
    return fn, shapes, mesh


@functools.lru_cache(maxsize=64)
def _compiled(cfg, plan, B, T, dtype, optimizer):
    """(compiled step, mesh or None) for these settings; compiled once per process."""
    fn, shapes, mesh = _build(cfg, plan, B, T, dtype, optimizer)
    return _jax().jit(fn).lower(*shapes).compile(FAST_CODEGEN), mesh


def traced(cfg, plan, B, T, *, dtype="f32", optimizer="sgd"):
    """The step's jaxpr: the collectives the program asks for, before XLA rewrites any."""
    check_supported(cfg, plan, B, T, dtype, optimizer)
    fn, shapes, _ = _build(cfg, plan, B, T, dtype, optimizer)
    return _jax().make_jaxpr(fn)(*shapes)


def train_step(cfg, plan: ParallelPlan | None = None, *, B: int, T: int, seed: int = 0,
               dtype: str = "f32", optimizer: str = "sgd") -> StepResult:
    """One training step of ``cfg`` on ``plan.world_size`` simulated devices, as ``plan`` says.

    B sequences of T random tokens (and parameters) drawn from ``seed``; the loss is the mean
    next-token cross-entropy over the B·T tokens; the optimizer is SGD (lr 0.1) or the first
    step of Adam. ``ParallelPlan()`` runs on one device and is the reference every plan must
    reproduce. Needs ``use_cpu_devices(n)`` with n >= plan.world_size before JAX starts.
    Supported: dp, zero 0-3, shard_group (HSDP), tp, sequence_parallel, cp (each
    ``cp_variant``, with zero=0), pp (gpipe, 1f1b) and their combinations for dense models;
    dp, tp and ep (expert parallelism, see ``moe``) for MoE models; anything else raises
    ValueError naming it.
    """
    plan = ParallelPlan() if plan is None else plan
    check_supported(cfg, plan, B, T, dtype, optimizer)
    if plan.pp > 1:  # the pipelined step lives in its own module
        from . import pipeline as _pipeline

        return _pipeline.train_step(cfg, plan, B, T, seed, dtype, optimizer, StepResult)
    jax = _jax()
    compiled, mesh = _compiled(cfg, plan, B, T, dtype, optimizer)
    dt = DTYPES[dtype]
    params = {k: jax.numpy.asarray(v, dt) for k, v in _model.init_params(cfg, seed).items()}
    tokens, targets = _model.batch(cfg, B, T, seed)
    if plan.cp > 1:  # lay each sequence out in the load-balanced chunk order (the loss is a sum)
        from ..parallelism.context import token_order

        order = token_order(T, plan.cp)
        tokens, targets = tokens[:, order], targets[:, order]
    if mesh is not None:
        ins = compiled.input_shardings[0]
        params = jax.device_put(params, ins[0])
        tokens = jax.device_put(tokens, ins[1])
        targets = jax.device_put(targets, ins[2])
    loss, grads, new = compiled(params, tokens, targets)

    def host(tree):
        return {k: np.asarray(v, dtype=np.float64) for k, v in tree.items()}

    return StepResult(loss=float(np.sum(np.asarray(loss, np.float64))), params=host(params),
                      grads=host(grads), collectives=parse_hlo_collectives(compiled.as_text()),
                      updated_params=host(new))
