"""Pipeline parallelism inside :func:`~scaling_lib.simulate.train_step`: GPipe, 1F1B and
interleaved 1F1B.

The devices form a mesh ("dp", "pp", "tp") (axes of size 1 left out). Stage s holds layers
s·L/p ... (s+1)·L/p - 1 (with v virtual stages, v chunks of L/(p·v) layers: see
:func:`placement`): the per-layer weights are stacked into [L, ...] arrays split over "pp".
Activations go forward and their gradients backward with ``lax.ppermute`` along the stage chain
(a ring with v > 1: the last device feeds device 0's next chunk), a collective-permute in the
compiled program.

Every device runs the same program (SPMD), so the program is written in *ticks*: in each tick
every stage runs its stage function on whatever it holds, and a table says which micro-batch
that is and whether the result counts. This is how JAX pipelines are written; it differs from
a real pipeline in two ways the tests account for:

- the embedding, final norm and output layer are held by every stage (only stage 0 uses the
  embedding, only the last stage the output layer, and only their gradients are nonzero); the
  gradient all-reduce over dp therefore also carries the final norm and output layer, which
  ``parallelism`` gives to the last stage only (it reports the first stage);
- in a bubble tick a stage computes on zeros instead of idling (no effect on the results).

``gpipe``: the forward ticks are written out (micro-batch t - s on stage s at tick t) and
``jax.grad`` derives the backward pass, which runs all forwards then all backwards, each
ppermute transposed into the reverse one. ``1f1b``: the forward and backward operations are
written by hand, one per tick per stage, in the order of
:func:`scaling_lib.parallelism.pipeline.schedule` (unit times), so a stage holds at most p
micro-batches' stage inputs (buffers of p slots, indexed by micro-batch mod p); the backward of
a stage rebuilds its forward from the saved input with ``jax.vjp`` (the stage's activations
are recomputed, as with full recomputation). A ppermute is emitted only in the ticks in which
some stage sends, so with p = 2 the program sends exactly m activations and m gradients.
``interleaved``: the same hand-written program over v chunks per device, in Megatron-LM's
order, its buffers indexed by (chunk, micro-batch).
"""

from __future__ import annotations

import functools

import numpy as np

from ..parallelism import pipeline as _pipeline
from . import model as _model
from .devices import _jax, make_mesh
from .hlo import parse_hlo_collectives

ENDS = ("embed", "final_norm", "unembed")
OWNER = {"embed": 0, "final_norm": -1, "unembed": -1}  # the stage whose copy is the real one


def unsupported(cfg, plan) -> list[str]:
    """What of a pp > 1 plan this module does not simulate."""
    bad = []
    if plan.pp == 1:
        return bad
    if plan.virtual_stages > 1 and cfg.L % (plan.pp * plan.virtual_stages):
        bad.append(f"L={cfg.L} layers not divisible by pp·virtual_stages = "
                   f"{plan.pp * plan.virtual_stages}")
    if plan.zero:
        bad.append(f"zero={plan.zero} with pp > 1")
    if plan.cp > 1:
        bad.append(f"cp={plan.cp} with pp > 1")
    if plan.sequence_parallel:
        bad.append("sequence_parallel with pp > 1")
    if cfg.L % plan.pp:
        bad.append(f"L={cfg.L} layers not divisible by pp={plan.pp}")
    return bad


def _axes(plan):
    sizes = {"dp": plan.dp, "pp": plan.pp, "tp": plan.tp}
    return {k: v for k, v in sizes.items() if v > 1}


class _Tables:
    """The hand-written schedule's static tables, from ``parallelism.pipeline.schedule`` with
    unit times (one tick per operation; a chunk's operation with v chunks takes one tick too).

    Per tick t and device s: ``op`` (0 idle, 1 forward, 2 backward), ``chunk`` and ``slot``
    (where the operation's micro-batch lives in the device's buffers: micro-batch mod p for
    1F1B, which never holds more than p; chunk·m + micro-batch when interleaved);
    ``recv_f``/``recv_b`` whether s receives an activation / a gradient at the end of tick t,
    and ``slot_f``/``slot_b`` where it goes. Virtual stage k = chunk·p + device.
    """

    def __init__(self, p, m, v, kind):
        ev = _pipeline.schedule(p, m, v=v, kind=kind, t_fwd=float(v), t_bwd=float(v))
        n = int(round(ev["end"].max()))
        self.n, self.p, self.m, self.v = n, p, m, v
        shape = (n, p)
        self.op, self.mb, self.chunk, self.slot = (np.zeros(shape, np.int32) for _ in range(4))
        self.recv_f, self.recv_b = np.zeros(shape, bool), np.zeros(shape, bool)
        self.slot_f, self.slot_b = np.zeros(shape, np.int32), np.zeros(shape, np.int32)
        self.size = p if v == 1 else v * m
        for e in ev:
            t, d, c, i = int(round(e["start"])), int(e["stage"]), int(e["chunk"]), int(e["micro"])
            k = c * p + d
            self.op[t, d] = 1 if e["op"] == "F" else 2
            self.mb[t, d], self.chunk[t, d], self.slot[t, d] = i, c, self._slot(c, i)
            if e["op"] == "F" and k < p * v - 1:  # the next virtual stage receives it
                r, rc = (k + 1) % p, (k + 1) // p
                self.recv_f[t, r], self.slot_f[t, r] = True, self._slot(rc, i)
            if e["op"] == "B" and k > 0:  # the previous virtual stage receives the gradient
                r, rc = (k - 1) % p, (k - 1) // p
                self.recv_b[t, r], self.slot_b[t, r] = True, self._slot(rc, i)

    def _slot(self, c, i):
        return i % self.p if self.v == 1 else c * self.m + i


def _tables(p, m, kind, v=1):
    return _Tables(p, m, v, kind)


def send_ticks(p, m, kind, v=1) -> tuple[int, int]:
    """Ticks of the SPMD program with a forward / backward ppermute: m + p - 2 each for GPipe
    (every tick but the last sends, bubble ticks included); for 1F1B and interleaved, the ticks
    in which some stage sends (m each for 1F1B when p = 2)."""
    if kind == "gpipe":
        return m + p - 2, m + p - 2
    tab = _tables(p, m, kind, v)
    return int(tab.recv_f.any(axis=1).sum()), int(tab.recv_b.any(axis=1).sum())


def as_spmd_compiles(comms, cfg, plan, B, T, *, dtype="f32"):
    """``parallelism.collectives`` (one real pipeline stage, the first) turned into what the
    SPMD program of this module runs on every device, each difference named:

    - pp: a ppermute in each of :func:`send_ticks` ticks (the per-stage model counts the m
      micro-batches a middle stage sends; with p = 2 the two agree);
    - dp: every stage also all-reduces the final norm's and the output layer's gradient (it holds
      them; a real pipeline keeps them on the last stage);
    - tp, GPipe: the stage runs in all m + p - 1 ticks (p - 1 of them on the bubble's zeros),
      and the output layer (its f backward) and the loss (3 all-reduces) run on every stage;
    - tp, 1F1B: in each of the n = 2(m + p - 1) ticks every device rebuilds and
      back-propagates its stage (the backward op, with the output layer and the loss) and runs
      its forward op only in the ticks whose output is sent (XLA drops the unused ones).
    """
    from ..parallelism.comms import Comm, element_bytes

    p, m, v = plan.pp, plan.n_microbatches(B), plan.virtual_stages
    fwd_sends, bwd_sends = send_ticks(p, m, plan.schedule, v)
    out = []
    for c in comms:
        if c.axis == "pp":
            c = Comm(c.kind, c.axis, c.group_size, c.nbytes,
                     fwd_sends if c.phase == "forward" else bwd_sends, c.phase, c.overlappable)
        out.append(c)
    a = element_bytes(dtype)
    if plan.dp > 1:
        ends = a * (cfg.D + cfg.D * cfg.V / plan.tp)
        out.append(Comm("all-reduce", "dp", plan.dp, ends, 1, "backward", True))
    if plan.tp > 1:
        b = B // (plan.dp * m)
        act, loss = a * b * T * cfg.D, 4.0 * b * T
        l2 = 2 * (cfg.L // p)  # per device; a chunk's is l2 / v
        if plan.schedule == "gpipe":
            fwd, bwd, n_loss = l2 * (p - 1), l2 * (p - 1) + m, 3 * m
        else:
            n = _tables(p, m, plan.schedule, v).n
            lc = l2 // v
            fwd = lc * fwd_sends + lc * n - l2 * m
            bwd = lc * n + n - l2 * m
            n_loss = 3 * n
        out += [Comm("all-reduce", "tp", plan.tp, act, fwd, "forward", False),
                Comm("all-reduce", "tp", plan.tp, act, bwd, "backward", False),
                Comm("all-reduce", "tp", plan.tp, loss, n_loss, "forward", False)]
    return out


def build(cfg, plan, B, T, dtype, step_mod):
    """(shard-mapped step, argument shapes, mesh) of a pipelined step (see the module doc).

    Arguments: stacked layer weights {name: [L, ...]}, the ends {embed, final_norm, unembed},
    tokens, targets. Returns the loss per (dp, pp) rank, the gradients (layers stacked, the
    ends one copy per stage) and the updated parameters (same layout).
    """
    jax = _jax()
    jnp, lax, P = jax.numpy, jax.lax, jax.sharding.PartitionSpec
    sizes = _axes(plan)
    p, m = plan.pp, plan.n_microbatches(B)
    Lp = cfg.L // p
    tp = "tp" if "tp" in sizes else None
    ops = step_mod.Ops(jax, cfg, plan, {"tp": tp} if tp else {})
    lay = _model.layout(cfg)
    v = plan.virtual_stages
    Lc = cfg.L // (p * v)  # layers per chunk
    fwd_chain = [(s, s + 1) for s in range(p - 1)]
    bwd_chain = [(s + 1, s) for s in range(p - 1)]
    # with chunks, the last device hands chunk c's output to device 0's chunk c + 1: a ring
    fwd_perm = fwd_chain if v == 1 else [(s, (s + 1) % p) for s in range(p)]
    bwd_perm = bwd_chain if v == 1 else [((s + 1) % p, s) for s in range(p)]
    dp_axes = ("dp",) if "dp" in sizes else ()
    kind = plan.schedule

    def tp_spec(name, lead=()):
        shape, tp_dim, _ = lay[name]
        out = [None] * len(shape)
        if tp_dim is not None and tp:
            out[tp_dim] = "tp"
        return P(*lead, *out)

    def stage_fn(w, x):
        for j in range(Lp):
            x = _model.layer(jax, jnp, ops, cfg, x, {k: w[k][j] for k in _model.LAYER_PARAMS})
        return x

    def chunk_fn(w, x, c):
        """Chunk c (0 with v = 1) of this device's layers: its local rows c·Lc ... ."""
        if v == 1:
            return stage_fn(w, x)
        for j in range(Lc):
            x = _model.layer(jax, jnp, ops, cfg, x,
                             {k: lax.dynamic_index_in_dim(w[k], c * Lc + j, keepdims=False)
                              for k in _model.LAYER_PARAMS})
        return x

    def head_loss(norm, unembed, x, tgt):
        h = ops.enter(_model.rms_norm(jnp, x, norm))
        return ops.cross_entropy_sum((h @ unembed).astype(jnp.float32), tgt)

    def step(stack, ends, tokens, targets):
        s = lax.axis_index("pp")
        is_first, is_last = s == 0, s == p - 1
        b = tokens.shape[0] // m
        tok = tokens.reshape(m, b, T)
        tgt = targets.reshape(m, b, T)
        scale = 1.0 / (B * T)
        # every stage's copy is its own: no automatic sum over pp or dp in the backward pass
        # (the dp all-reduce is asked for explicitly below)
        w_stack = {k: lax.pcast(v, dp_axes, to="varying") if dp_axes else v
                   for k, v in stack.items()}
        w_ends = {k: lax.pcast(v, ("pp",) + dp_axes, to="varying") for k, v in ends.items()}
        if kind == "gpipe":
            loss, grads = _gpipe(w_stack, w_ends, tok, tgt, is_first, is_last, b, scale)
        else:
            loss, grads = _one_f_one_b(w_stack, w_ends, tok, tgt, s, is_first, is_last, b,
                                       scale)
        if dp_axes:  # data parallelism: one all-reduce of every gradient
            grads = jax.tree.map(lambda g: lax.psum(g, dp_axes), grads)
        g_stack, g_ends = grads
        new_stack = {k: step_mod._update(jnp, stack[k], g_stack[k], step_mod._optimizer)
                     for k in stack}
        new_ends = {k: step_mod._update(jnp, ends[k], g_ends[k], step_mod._optimizer)
                    for k in ends}
        one = {k: v[None] for k, v in g_ends.items()}
        new_one = {k: v[None] for k, v in new_ends.items()}
        return jnp.reshape(loss, (1,)), (g_stack, one), (new_stack, new_one)

    def _gpipe(stack, ends, tok, tgt, is_first, is_last, b, scale):
        def loss_fn(stack, ends):
            emb = ops.embed(ends["embed"], tok.reshape(m * b, T)).reshape(m, b, T, cfg.D)
            state = jnp.zeros_like(emb[0])
            outs = []
            for t in range(m + p - 1):
                x = jnp.where(is_first, emb[min(t, m - 1)], state)
                y = stage_fn(stack, x)
                if t >= p - 1:
                    outs.append(y)
                if t < m + p - 2:  # hand the output to the next stage
                    state = lax.ppermute(y, "pp", fwd_chain)
            h = jnp.stack(outs).reshape(m * b, T, cfg.D)
            total = head_loss(ends["final_norm"], ends["unembed"], h, tgt.reshape(m * b, T))
            return jnp.where(is_last, total, 0.0) * scale

        loss, (g_stack, g_ends) = jax.value_and_grad(loss_fn, argnums=(0, 1))(stack, ends)
        return loss, (g_stack, g_ends)

    def _one_f_one_b(stack, ends, tok, tgt, s, is_first, is_last, b, scale):
        tab = _tables(p, m, kind, v)
        op, mb, chunk, slot_of, recv_f, slot_f, recv_b, slot_b = (
            jnp.asarray(getattr(tab, a)) for a in ("op", "mb", "chunk", "slot", "recv_f",
                                                    "slot_f", "recv_b", "slot_b"))
        emb, embed_vjp = jax.vjp(
            lambda table: ops.embed(table, tok.reshape(m * b, T)).reshape(m, b, T, cfg.D),
            ends["embed"])
        zero_act = jnp.zeros_like(emb[0])
        xin = jnp.zeros((tab.size,) + zero_act.shape, zero_act.dtype)  # saved chunk inputs
        inbox_f = jnp.zeros_like(xin)                                  # activations received
        inbox_b = jnp.zeros_like(xin)                                  # gradients received
        g_emb = jnp.zeros_like(emb)                                    # d loss / d embeddings
        g_stack = jax.tree.map(jnp.zeros_like, stack)
        g_norm = jnp.zeros_like(ends["final_norm"])
        g_unembed = jnp.zeros_like(ends["unembed"])
        loss = jnp.zeros((), jnp.float32)

        def chunk_and_head(w, norm, unembed, x, t_mb, c):
            y = chunk_fn(w, x, c)
            return y, head_loss(norm, unembed, y, t_mb)

        for t in range(tab.n):
            o, i, c, slot = op[t, s], mb[t, s], chunk[t, s], slot_of[t, s]
            first = is_first & (c == 0)          # virtual stage 0: its input is the embedding
            last = is_last & (c == v - 1)        # the last virtual stage: the loss follows
            # forward: the chunk's input is the embedding or what arrived
            x = jnp.where(first, emb[i], inbox_f[slot])
            y = chunk_fn(stack, x, c)
            is_f = o == 1
            xin = jnp.where(is_f, xin.at[slot].set(x), xin)
            # backward: rebuild the chunk from its saved input, then its vjp
            (_, lval), vjp = jax.vjp(lambda w, n_, u_, x_: chunk_and_head(w, n_, u_, x_, tgt[i], c),
                                     stack, ends["final_norm"], ends["unembed"], xin[slot])
            is_b = o == 2
            g_y = jnp.where(last, jnp.zeros_like(zero_act), inbox_b[slot])
            g_l = jnp.where(last, scale, 0.0) * jnp.ones_like(lval)
            gw, gn, gu, gx = vjp((g_y, g_l))
            keep = lambda acc, g: acc + jnp.where(is_b, g, jnp.zeros_like(g))  # noqa: E731
            g_stack = jax.tree.map(keep, g_stack, gw)
            g_norm, g_unembed = keep(g_norm, gn), keep(g_unembed, gu)
            loss = loss + jnp.where(is_b & last, lval * scale, 0.0)
            g_emb = jnp.where(is_b & first, g_emb.at[i].set(gx), g_emb)
            # the sends of this tick (only in ticks where some device sends)
            if tab.recv_f[t].any():
                got = lax.ppermute(y, "pp", fwd_perm)
                inbox_f = jnp.where(recv_f[t, s], inbox_f.at[slot_f[t, s]].set(got), inbox_f)
            if tab.recv_b[t].any():
                got = lax.ppermute(gx, "pp", bwd_perm)
                inbox_b = jnp.where(recv_b[t, s], inbox_b.at[slot_b[t, s]].set(got), inbox_b)
        (g_table,) = embed_vjp(g_emb)
        g_ends = {"embed": g_table, "final_norm": g_norm, "unembed": g_unembed}
        return loss, (g_stack, g_ends)

    dt = jnp.dtype(step_mod.DTYPES[dtype])
    stack_shapes = {k: jax.ShapeDtypeStruct((cfg.L,) + lay[f"layers.0.{k}"][0], dt)
                    for k in _model.LAYER_PARAMS}
    end_shapes = {k: jax.ShapeDtypeStruct(lay[k][0], dt) for k in ENDS}
    shapes = (stack_shapes, end_shapes, jax.ShapeDtypeStruct((B, T), jnp.int32),
              jax.ShapeDtypeStruct((B, T), jnp.int32))
    mesh = make_mesh(tuple(sizes.values()), tuple(sizes))
    stack_spec = {k: tp_spec(f"layers.0.{k}", ("pp",)) for k in _model.LAYER_PARAMS}
    end_spec = {k: tp_spec(k) for k in ENDS}
    end_out = {k: tp_spec(k, ("pp",)) for k in ENDS}  # one copy per stage, stacked
    bspec = P(dp_axes or None, None)
    fn = jax.shard_map(step, mesh=mesh, in_specs=(stack_spec, end_spec, bspec, bspec),
                       out_specs=(P(dp_axes + ("pp",)), (stack_spec, end_out),
                                  (stack_spec, end_out)))
    return fn, shapes, mesh


@functools.lru_cache(maxsize=16)
def _compiled(cfg, plan, B, T, dtype, optimizer):
    from . import step as step_mod

    jax = _jax()
    mod = _StepModule(step_mod, optimizer)
    fn, shapes, mesh = build(cfg, plan, B, T, dtype, mod)
    return jax.jit(fn).lower(*shapes).compile(step_mod.FAST_CODEGEN), mesh


class _StepModule:
    """step.py's pieces (Ops, _update, DTYPES) with the optimizer bound."""

    def __init__(self, step_mod, optimizer):
        self.Ops, self.DTYPES = step_mod.Ops, step_mod.DTYPES
        self._optimizer = optimizer
        self._update = step_mod._update


def placement(L, p, v=1) -> list[int]:
    """The layer in each row of the stacked weights: device s holds rows s·L/p ... as v
    chunks of L/(p·v) layers, chunk c of device s being virtual stage c·p + s.

    >>> placement(8, 2, 2)  # device 0: layers 0-1 and 4-5; device 1: 2-3 and 6-7
    [0, 1, 4, 5, 2, 3, 6, 7]
    """
    per_dev, per_chunk = L // p, L // (p * v)
    out = []
    for g in range(L):
        s, r = divmod(g, per_dev)
        c, j = divmod(r, per_chunk)
        out.append((c * p + s) * per_chunk + j)
    return out


def stack(params, cfg, p=1, v=1):
    """{name: [L, ...]} of the per-layer weights (rows in :func:`placement` order), and the
    ends, from train_step's flat dict."""
    rows = placement(cfg.L, p, v)
    layers = {k: np.stack([params[f"layers.{i}.{k}"] for i in rows])
              for k in _model.LAYER_PARAMS}
    return layers, {k: params[k] for k in ENDS}


def unstack(layers, ends, cfg, p, v=1):
    """train_step's flat dict from stacked layers and per-stage copies of the ends (the copy
    of the stage that owns each: the embedding's on stage 0, the output layer's on the last)."""
    out = {"embed": ends["embed"][OWNER["embed"]]}
    where = {layer: g for g, layer in enumerate(placement(cfg.L, p, v))}
    for i in range(cfg.L):
        out.update({f"layers.{i}.{k}": layers[k][where[i]] for k in _model.LAYER_PARAMS})
    out["final_norm"] = ends["final_norm"][OWNER["final_norm"]]
    out["unembed"] = ends["unembed"][OWNER["unembed"]]
    return out


def train_step(cfg, plan, B, T, seed, dtype, optimizer, result_cls):
    """:func:`~scaling_lib.simulate.train_step` for pp > 1 (checked by the caller)."""
    from . import step as step_mod

    jax = _jax()
    compiled, mesh = _compiled(cfg, plan, B, T, dtype, optimizer)
    dt = step_mod.DTYPES[dtype]
    params = {k: np.asarray(jax.numpy.asarray(v, dt)) for k, v in
              _model.init_params(cfg, seed).items()}
    layers, ends = stack(params, cfg, plan.pp, plan.virtual_stages)
    tokens, targets = _model.batch(cfg, B, T, seed)
    ins = compiled.input_shardings[0]
    args = [jax.device_put(a, sh) for a, sh in zip((layers, ends, tokens, targets), ins)]
    loss, grads, new = compiled(*args)

    def host(tree):
        return {k: np.asarray(v, dtype=np.float64) for k, v in tree.items()}

    def flat(pair):
        return unstack(host(pair[0]), host(pair[1]), cfg, plan.pp, plan.virtual_stages)

    return result_cls(loss=float(np.sum(np.asarray(loss, np.float64))),
                      params={k: np.asarray(v, np.float64) for k, v in params.items()},
                      grads=flat(grads), collectives=parse_hlo_collectives(compiled.as_text()),
                      updated_params=flat(new))
