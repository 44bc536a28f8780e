"""``decode_step``: one real decode step of the library's transformer, tensor-parallel over tp
simulated devices, with the KV cache split by heads.

The model is :mod:`scaling_lib.simulate.model`'s (the one ``train_step`` trains). A prefill on
one device runs the S prompt tokens of each of B sequences through it and keeps every layer's
keys and values, the KV cache [L, B, S, K, H]. The decode step then takes the next token of each
sequence, appends its key and value to the cache and returns the logits [B, V] and the cache of
S + 1 tokens. Sharded over tp devices with ``jax.shard_map`` (Megatron's split, as in
``train_step``): wq, wk, wv, w_gate, w_up and the output layer by columns, wo and w_down by
rows, the embedding by vocabulary rows (or replicated), the cache by kv heads; each block ends
with one all-reduce (``lax.psum``) of the B new activations. With grouped-query attention and
tp > K, each kv head (its wk and wv columns and its cache) is copied to the tp/K devices whose
query heads read it (:func:`scaling_lib.parallelism.tensor.kv_replication`).

The logits leave the program split over the vocabulary (``out_specs``), so no collective
gathers them; the cache of S + 1 tokens is a new array (a real server writes into a
preallocated cache in place: same arithmetic, same collectives).

:func:`scaling_lib.serving_parallel.decode_collectives` predicts the collectives; the tests
check the compiled ones against it and the sharded step against the one-device step.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ..models import TransformerConfig
from . import model as _model
from . import tensor as _tensor
from .devices import _jax, make_mesh
from .hlo import Collective, parse_hlo_collectives
from .step import DTYPES, FAST_CODEGEN

MAX_DEVICES = 8


@dataclass(frozen=True)
class DecodeResult:
    """One decode step: logits [B, V] of the next token, the cache before and after
    ([L, B, S, K, H] and [L, B, S + 1, K, H], float64 host arrays, one copy of each kv head),
    the tokens (prompt [B, S] and new [B]), what XLA compiled, and how far apart the copies of
    a replicated kv head ended up (0.0 without replication)."""

    logits: np.ndarray
    k_cache: np.ndarray
    v_cache: np.ndarray
    new_k_cache: np.ndarray
    new_v_cache: np.ndarray
    prompt: np.ndarray
    tokens: np.ndarray
    collectives: list[Collective]
    tp: int
    kv_copies: int
    copy_spread: float


def check_decode_supported(cfg, tp, B, S, dtype, vocab_parallel_embedding=True) -> int:
    """Raise ValueError naming every part of the settings decode_step does not simulate;
    returns kv_replication(cfg, tp) (copies of each kv head)."""
    from ..parallelism.tensor import kv_replication
    from ..serving_parallel import check_decode_tp

    if not isinstance(cfg, TransformerConfig):
        raise ValueError(f"cfg must be a TransformerConfig, got {cfg!r}")
    bad = []
    for field, ok in (("E", 1), ("mla", None), ("bias", False), ("norm", "rmsnorm"),
                      ("learned_positions", 0), ("tied_embeddings", False), ("glu", True),
                      ("sliding_window", None)):
        if getattr(cfg, field) != ok:
            bad.append(f"cfg.{field}={getattr(cfg, field)!r}")
    if bad:
        raise ValueError(f"decode_step does not simulate {', '.join(bad)}; it runs a dense "
                         "RMSNorm/SwiGLU model without biases, tied embeddings or windows")
    tp = check_decode_tp(cfg, tp)
    if tp > MAX_DEVICES:
        raise ValueError(f"tp={tp} > {MAX_DEVICES} simulated devices; choose tp in "
                         f"{[t for t in (1, 2, 4, 8) if cfg.N % t == 0]}")
    if vocab_parallel_embedding not in (True, False):
        raise ValueError(f"vocab_parallel_embedding={vocab_parallel_embedding!r} must be True "
                         "or False")
    for name, v in (("B", B), ("S", S)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name}={v!r} must be a whole number >= 1")
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r}; valid choices: {', '.join(DTYPES)}")
    return kv_replication(cfg, tp)


class _OneDevice:
    """The model's ops on one device: every tensor-parallel op is the identity."""

    def enter(self, x):
        return x

    def leave(self, y):
        return y

    def attention(self, jax, jnp, q, k, v, H):
        return _model.attention(jax, jnp, q, k, v, H)


def _prefill_fn(cfg):
    """(params, tokens [B, T]) -> (last logits [B, V], k [L, B, T, K, H], v ...): the model's
    own forward pass (:func:`scaling_lib.simulate.model.layer`), keeping each layer's keys and
    values."""
    jax = _jax()
    jnp = jax.numpy
    ops = _OneDevice()

    def run(params, tokens):
        x = params["embed"][tokens]                                       # [B, T, D]
        b, T, _ = x.shape
        ks, vs = [], []
        for i in range(cfg.L):
            w = {k: params[f"layers.{i}.{k}"] for k in _model.LAYER_PARAMS}
            h = _model.rms_norm(jnp, x, w["attn_norm"])
            ks.append((h @ w["wk"]).reshape(b, T, cfg.K, cfg.H))
            vs.append((h @ w["wv"]).reshape(b, T, cfg.K, cfg.H))
            x = _model.layer(jax, jnp, ops, cfg, x, w)
        h = _model.rms_norm(jnp, x[:, -1], params["final_norm"])
        return h @ params["unembed"], jnp.stack(ks), jnp.stack(vs)

    return run


@functools.lru_cache(maxsize=16)
def _compiled_prefill(cfg, B, T):
    jax = _jax()
    f32 = jax.numpy.float32
    shapes = ({k: jax.ShapeDtypeStruct(v[0], f32) for k, v in _model.layout(cfg).items()},
              jax.ShapeDtypeStruct((B, T), jax.numpy.int32))
    return jax.jit(_prefill_fn(cfg)).lower(*shapes).compile(FAST_CODEGEN)


def prefill(cfg, params, tokens):
    """The model's forward pass over ``tokens`` [B, T] on one device, in float32: the logits of
    the last position [B, V] and the KV cache (k, v), each [L, B, T, K, H], as float64 arrays."""
    jax = _jax()
    B, T = np.shape(tokens)
    p = {k: jax.numpy.asarray(v, "float32") for k, v in params.items()}
    out = _compiled_prefill(cfg, B, T)(p, jax.numpy.asarray(tokens, "int32"))
    return tuple(np.asarray(a, np.float64) for a in out)


def _attend(jax, jnp, q, k, v, H):
    """The new token's attention over the whole cache (it may see every earlier token).

    q [B, 1, n·H]; k, v [B, S + 1, m, H] with n/m query heads per kv head, grouped as in
    :func:`scaling_lib.simulate.model.attention`."""
    b, _, m, _ = k.shape
    q = q.reshape(b, 1, m, -1, H)
    s = jnp.einsum("btmgh,bsmh->bmgts", q, k) / math.sqrt(H)
    p = jax.nn.softmax(s, axis=-1)
    return jnp.einsum("bmgts,bsmh->btmgh", p, v).reshape(b, 1, -1)


def _build(cfg, tp, B, S, dtype, vocab_parallel_embedding, r):
    """(step function, argument shapes, mesh or None)."""
    jax = _jax()
    jnp, lax, P = jax.numpy, jax.lax, jax.sharding.PartitionSpec
    axis = "tp" if tp > 1 else None
    lay = _model.layout(cfg)
    Kr = cfg.K * r  # kv heads, counting copies

    def step(params, k_cache, v_cache, tokens):                   # tokens [B]
        if vocab_parallel_embedding:
            x = _tensor.embed(lax, jnp, params["embed"], tokens[:, None], axis, False)
        else:
            x = params["embed"][tokens[:, None]]                       # [B, 1, D]
        new_k, new_v = [], []
        for i in range(cfg.L):
            w = {k: params[f"layers.{i}.{k}"] for k in _model.LAYER_PARAMS}
            h = _model.rms_norm(jnp, x, w["attn_norm"])
            m = w["wk"].shape[1] // cfg.H                              # this device's kv heads
            kc = jnp.concatenate([k_cache[i], (h @ w["wk"]).reshape(B, 1, m, cfg.H)], axis=1)
            vc = jnp.concatenate([v_cache[i], (h @ w["wv"]).reshape(B, 1, m, cfg.H)], axis=1)
            a = _attend(jax, jnp, h @ w["wq"], kc, vc, cfg.H)         # [B, 1, N/tp·H]
            x = x + _tensor.leave(lax, a @ w["wo"], axis, False)       # all-reduce of [B, 1, D]
            h = _model.rms_norm(jnp, x, w["mlp_norm"])
            y = (jax.nn.silu(h @ w["w_gate"]) * (h @ w["w_up"])) @ w["w_down"]
            x = x + _tensor.leave(lax, y, axis, False)                 # all-reduce of [B, 1, D]
            new_k.append(kc)
            new_v.append(vc)
        h = _model.rms_norm(jnp, x[:, 0], params["final_norm"])
        return h @ params["unembed"], jnp.stack(new_k), jnp.stack(new_v)  # [B, V/tp], caches

    dt = jnp.dtype(DTYPES[dtype])

    def shape_of(name):
        shape = lay[name][0]
        if name.endswith((".wk", ".wv")):
            shape = (shape[0], Kr * cfg.H)
        return jax.ShapeDtypeStruct(shape, dt)

    cache = jax.ShapeDtypeStruct((cfg.L, B, S, Kr, cfg.H), dt)
    shapes = ({k: shape_of(k) for k in lay}, cache, cache,
              jax.ShapeDtypeStruct((B,), jnp.int32))
    if tp == 1:
        return step, shapes, None
    mesh = make_mesh((tp,), ("tp",))

    def spec(name):
        shape, tp_dim, _ = lay[name]
        out = [None] * len(shape)
        if tp_dim is not None and (name != "embed" or vocab_parallel_embedding):
            out[tp_dim] = "tp"
        return P(*out)

    pspec = {k: spec(k) for k in lay}
    cspec = P(None, None, None, "tp", None)
    fn = jax.shard_map(step, mesh=mesh, in_specs=(pspec, cspec, cspec, P()),
                       out_specs=(P(None, "tp"), cspec, cspec))
    return fn, shapes, mesh


@functools.lru_cache(maxsize=32)
def _compiled(cfg, tp, B, S, dtype, vocab_parallel_embedding, r):
    fn, shapes, mesh = _build(cfg, tp, B, S, dtype, vocab_parallel_embedding, r)
    return _jax().jit(fn).lower(*shapes).compile(FAST_CODEGEN), mesh


def _copy_heads(a, axis, r, H=None):
    """Repeat each kv head r times along ``axis`` (heads of H columns when H is given)."""
    if r == 1:
        return a
    if H is None:
        return np.repeat(a, r, axis=axis)
    D = a.shape[0]
    return np.repeat(a.reshape(D, -1, H), r, axis=1).reshape(D, -1)


def decode_step(cfg, tp: int = 1, *, B: int, S: int, seed: int = 0, dtype: str = "f32",
                vocab_parallel_embedding: bool = True) -> DecodeResult:
    """One decode step of ``cfg`` for B sequences with S cached tokens, over tp simulated devices.

    Parameters and tokens are drawn from ``seed`` (:func:`scaling_lib.simulate.model.init_params`
    and ``batch``): S prompt tokens per sequence, whose cache a one-device float32 prefill
    builds, then one new token each. tp = 1 is the reference every tp must reproduce. Needs
    ``use_cpu_devices(n)`` with n >= tp before JAX starts. Raises ValueError for anything it
    does not simulate (MoE, biases, tp that does not split the heads, tp > 8, ...).

    See: Chapter "Case study: serving Llama 3", "A real sharded decode step".
    """
    r = check_decode_supported(cfg, tp, B, S, dtype, vocab_parallel_embedding)
    tp = int(tp)
    jax = _jax()
    params = _model.init_params(cfg, seed)
    ids, _ = _model.batch(cfg, B, S + 1, seed)
    prompt, tokens = ids[:, :S], ids[:, S]
    _, k_cache, v_cache = prefill(cfg, params, prompt)
    compiled, mesh = _compiled(cfg, tp, B, S, dtype, bool(vocab_parallel_embedding), r)
    dt = DTYPES[dtype]
    feed = {k: _copy_heads(v, 1, r, cfg.H) if k.endswith((".wk", ".wv")) else v
            for k, v in params.items()}
    args = ({k: jax.numpy.asarray(v, dt) for k, v in feed.items()},
            jax.numpy.asarray(_copy_heads(k_cache, 3, r), dt),
            jax.numpy.asarray(_copy_heads(v_cache, 3, r), dt),
            jax.numpy.asarray(tokens, "int32"))
    if mesh is not None:
        args = jax.device_put(args, compiled.input_shardings[0])
    logits, new_k, new_v = (np.asarray(a, np.float64) for a in compiled(*args))
    spread = 0.0
    if r > 1:
        for a in (new_k, new_v):
            heads = a.reshape(a.shape[:3] + (cfg.K, r, cfg.H))
            spread = max(spread, float(np.max(np.abs(heads - heads[..., :1, :]))))
        new_k, new_v = new_k[:, :, :, ::r], new_v[:, :, :, ::r]
    return DecodeResult(logits=logits, k_cache=k_cache, v_cache=v_cache, new_k_cache=new_k,
                        new_v_cache=new_v, prompt=prompt, tokens=tokens,
                        collectives=parse_hlo_collectives(compiled.as_text()), tp=tp,
                        kv_copies=r, copy_spread=spread)
