"""Serving layouts: tensor parallelism inside the scale-up domain, pipeline stages across nodes,
replicas for throughput, and what each puts on a device.

A deployment of n devices runs ``replicas`` copies of the model, each split tp ways by tensor
parallelism (Megatron: heads and MLP columns, 2L + 1 all-reduces per step, best kept inside one
NVLink node or ICI slice) and pp ways by pipeline stages (L/pp layers each, one send per stage
boundary and token, the natural split across nodes: vLLM's guide runs a model that does not fit
one node with tp = GPUs per node and pp = nodes, "Distributed inference and serving").
n = tp · pp · replicas. Per device:

    weights  = n_params · w / (tp · pp)
    KV cache = kv_cache(B_r, S) · r / (tp · pp),   r = kv copies (tp/K when tp > K; tp for MLA)

with B_r the sequences one replica holds. The degree rules (tp divides the N query heads and
the MLP width, and divides or is a multiple of the K kv heads) come from the training model's
rules table (:func:`tp_choices`).

See: Chapter "Serving at scale", "Layouts".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import hardware, inference, models, transformer
from ..units import _brief, check_count, check_int

__all__ = ["Layout", "tp_choices", "check_tp", "scale_up_domain", "layouts",
           "kv_cache_bytes_per_device"]


@dataclass(frozen=True)
class Layout:
    """tp-way tensor parallel x pp pipeline stages, ``replicas`` copies: tp·pp·replicas devices."""

    tp: int = 1
    pp: int = 1
    replicas: int = 1

    @property
    def n_devices(self) -> int:
        return self.tp * self.pp * self.replicas

    def __str__(self) -> str:
        return f"tp={self.tp} pp={self.pp} replicas={self.replicas}"


def tp_choices(cfg) -> list[int]:
    """Tensor-parallel degrees the model allows, from the training model's rules table
    (``parallelism.rules.tp_choices`` where it exists, else ``memory.tp_choices``): tp divides
    the N query heads and F, and divides or is a multiple of the K kv heads.

    >>> tp_choices("llama3-70b")
    [1, 2, 4, 8, 16, 32, 64]
    """
    c = models.get(cfg)
    try:
        from ..parallelism import rules
        return list(rules.tp_choices(c))
    except (ImportError, AttributeError):
        from ..memory import tp_choices as _choices
        return list(_choices(c))


def check_tp(cfg, tp) -> int:
    """``tp`` as an int when the model allows it, else ValueError naming the rule and choices.

    >>> check_tp("llama3-70b", 8)
    8
    >>> check_tp("llama3-70b", 3)
    Traceback (most recent call last):
    ...
    ValueError: tp=3 does not divide N=64 query heads (or F=28672, or K=8 kv heads and is not a multiple of K); choose tp in [1, 2, 4, 8, 16, 32, 64]
    """
    c = models.get(cfg)
    ok = tp_choices(c)
    try:
        t = check_int("tp", tp, maximum=2**24)
    except ValueError:
        raise ValueError(f"tp={_brief(tp)} must be a whole number of devices; choose tp in "
                         f"{ok}") from None
    if t not in ok:
        raise ValueError(f"tp={t} does not divide N={c.N} query heads (or F={c.F}, or K={c.K} "
                         f"kv heads and is not a multiple of K); choose tp in {ok}")
    return t


def scale_up_domain(accelerator) -> int:
    """Devices in one scale-up domain (an NVLink node, a TPU pod's ICI slice); 1 for a chip
    without a default cluster.

    >>> scale_up_domain("h100"), scale_up_domain("tpu-v5e"), scale_up_domain("gb200")
    (8, 256, 72)
    """
    acc = hardware.get(accelerator)
    try:
        return hardware.cluster(acc, 2**16).devices_per_node
    except ValueError:
        return 1


def _check_pp(c, pp) -> int:
    p = check_int("pp", pp, maximum=2**20)
    if p > c.L:
        raise ValueError(f"pp={p} exceeds L={c.L} layers: each stage needs a layer; choose pp "
                         f"in 1..{c.L}")
    return p


def layouts(cfg, accelerator, n_devices, *, tp=None, pp=None, replicas=None) -> list[Layout]:
    """Every layout of ``n_devices`` the model and the machine allow, tp·pp·replicas = n.

    Left free, tp ranges over :func:`tp_choices` up to the scale-up domain (all-reduces stay on
    NVLink / ICI) and pp over 1..L; a given tp, pp or replicas is checked (ValueError with the
    valid choices) and fixed. A tp beyond the domain is allowed when asked for: its all-reduces
    cross the network.

    >>> [str(x) for x in layouts("llama3-405b", "h100", 16, replicas=1)]
    ['tp=1 pp=16 replicas=1', 'tp=2 pp=8 replicas=1', 'tp=4 pp=4 replicas=1', 'tp=8 pp=2 replicas=1']
    >>> layouts("llama3-70b", "h100", 8, tp=3)
    Traceback (most recent call last):
    ...
    ValueError: tp=3 does not divide N=64 query heads (or F=28672, or K=8 kv heads and is not a multiple of K); choose tp in [1, 2, 4, 8, 16, 32, 64]
    """
    c = models.get(cfg)
    n = check_int("n_devices", n_devices, maximum=2**24)
    domain = scale_up_domain(accelerator)
    if tp is not None:
        t = check_tp(c, tp)
        if n % t:
            raise ValueError(f"tp={t} does not divide n_devices={n}; choose tp in "
                             f"{[x for x in tp_choices(c) if n % x == 0]}")
        tps = [t]
    else:
        tps = [t for t in tp_choices(c) if n % t == 0 and t <= max(domain, 1)]
    if pp is not None:
        p = _check_pp(c, pp)
        fit = [t for t in tps if (n // t) % p == 0]
        if not fit:
            rest = n // tps[0]
            raise ValueError(f"pp={p} does not divide n_devices / tp = {rest}; choose pp in "
                             f"{[d for d in range(1, rest + 1) if rest % d == 0 and d <= c.L]}")
        tps = fit
    if replicas is not None:
        r = check_int("replicas", replicas, maximum=2**24)
        if n % r:
            raise ValueError(f"replicas={r} does not divide n_devices={n}")
    out = []
    for t in tps:
        rest = n // t
        for p in ([pp] if pp is not None else range(1, min(rest, c.L) + 1)):
            if rest % p:
                continue
            r = rest // p
            if replicas is not None and r != replicas:
                continue
            out.append(Layout(t, int(p), r))
    if not out:
        raise ValueError(f"no layout of n_devices={n} with tp={tp}, pp={pp}, replicas={replicas}"
                         f"; tp in {tp_choices(c)} (at most {domain} per scale-up domain unless "
                         "given), pp <= L, tp·pp·replicas = n_devices")
    return out


def kv_cache_bytes_per_device(cfg, tp, B, S, kv_dtype="bf16", *, pp=1):
    """KV cache bytes one device holds: kv_cache(B, S) · r / (tp · pp).

    The one home of the cache per device. Split by kv heads first (tp <= K: K/tp heads per
    device), each kv head copied on the tp/K ranks whose query heads read it once tp > K
    (r = :func:`scaling_lib.inference.kv_replication`; the whole latent on every rank with MLA),
    and by layers over the pp stages. Broadcasts over B and S.

    >>> kv_cache_bytes_per_device("llama3-70b", 8, 1, 1000) / 1e6   # one kv head of 8 per device
    40.96
    >>> kv_cache_bytes_per_device("llama3-70b", 16, 1, 1000) / 1e6  # tp > K: still one head
    40.96
    >>> kv_cache_bytes_per_device("llama3-405b", 8, 1, 1000, pp=2) / 1e6  # half the layers
    32.256
    """
    c = models.get(cfg)
    t = check_tp(c, tp)
    p = _check_pp(c, pp)
    r = inference.kv_replication(c, t)
    return transformer.kv_cache_bytes(c, B, S, kv_dtype) * r / (t * p)


def weight_bytes_per_device(cfg, tp, pp=1, dtype="bf16") -> float:
    """Weights one device holds: n_params · w / (tp · pp) (even split, embedding included).

    >>> round(weight_bytes_per_device("llama3-405b", 8, 2) / 1e9, 1)
    50.7
    """
    c = models.get(cfg)
    t = check_int("tp", tp, maximum=2**24)
    p = check_int("pp", pp, maximum=2**24)
    return float(transformer.n_params(c) * _w(dtype) / (t * p))


def _w(dtype):
    from ..units import dtype_bytes
    return dtype_bytes(dtype)


__all__ += ["weight_bytes_per_device"]
