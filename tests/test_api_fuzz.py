"""Fuzz the public API: any input gives a result or a ValueError naming the rule, quickly.

Every public function and class of the numpy modules (found by introspection, minus the
commented exclusions below) is called with arguments drawn from a mix of valid values (model,
chip and cluster names, plans, dtypes, sensible numbers) and bad ones (fractions, huge and
negative integers, NaN, infinities, bools, strings, bytes, complex numbers, None, numpy scalars,
arrays). The contract (house style: "Errors teach"):

- a call returns, or raises ValueError with a non-empty message; never TypeError,
  OverflowError, AttributeError, ZeroDivisionError, ...;
- a call takes under ``TIME_LIMIT`` seconds (a SIGALRM guard turns a hang into a failure);
- a numeric result holds no NaN (silent nonsense such as a negative size is caught where a
  function's own tests pin its values; this test only asks for clean refusals).

Hypothesis runs derandomized, so a failure reproduces; the whole file runs in well under a minute
on one core.
"""

from __future__ import annotations

import inspect
import math
import os
import resource
import signal
import threading
import time
from collections.abc import Mapping

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from scaling_lib import (breakdown, collectives, hardware, inference, memory, models,
                         parallelism, published, roofline, scheduling, serving, serving_engine,
                         serving_parallel, serving_sim, sharding, transformer, units)
import scaling_lib.parallelism.mesh  # noqa: F401  (parallelism.mesh in MODULES)
from scaling_lib.parallelism import split as _split, steptime as _steptime, timeline as _timeline
from scaling_lib.breakdown import Breakdown
from scaling_lib.parallelism import ParallelPlan

MODULES = (units, breakdown, hardware, roofline, collectives, models, transformer, memory,
           inference, parallelism, parallelism.context, parallelism.data, parallelism.fsdp,
           parallelism.tensor, parallelism.pipeline, parallelism.expert, parallelism.mesh,
           published, sharding, _steptime, _timeline, _split, serving, serving_sim,
           serving_engine, serving_parallel, scheduling)

# Public callables that are not fuzzed, and why.
EXCLUDED = {
    # a dataclasses.replace wrapper: its **changes are fuzzed through Accelerator itself
    "scaling_lib.hardware.chips.with_changes",
    # plain records of whitepaper figures, built only from the presets' literal numbers; their
    # consumers (get, cluster, ...) are fuzzed with the presets
    "scaling_lib.hardware.internals.GPUInternals",
    "scaling_lib.hardware.internals.TPUInternals",
    "scaling_lib.hardware.internals.MemoryLevel",
    "scaling_lib.collectives.traffic.CollectiveBytes",  # NamedTuples: result types
    "scaling_lib.collectives.multirail.RingTerms",
    "scaling_lib.published.TimeEstimate",  # a record of one paper's printed figures
    # NamedTuple: the result type of sharding.sharded_matmul (its consumers are fuzzed with
    # real results, see "m" below)
    "scaling_lib.sharding.ShardedMatmul",
    # runs the planner's full search once per allocation (seconds); its inputs are validated by
    # Job and exercised in tests/test_scheduling_planner.py
    "scaling_lib.scheduling.scaling_curve",
}

# Pass-throughs that may return NaN when given NaN (every other result must be NaN-free).
NAN_IN_NAN_OUT = {"scaling_lib.units.scalar_or_array",
                  # documented: NaN where n = 1 (a one-device collective sends nothing), so a
                  # sweep over n can include 1
                  "scaling_lib.collectives.costs.latency_bound_bytes"}

TIME_LIMIT = 1.0  # seconds per call
ALARM = 5  # seconds before SIGALRM fails a call that hangs
MEMORY_LIMIT = 2 * 2**30  # bytes a call may add to the address space (MemoryError beyond)
MAX_EXAMPLES = 40     # draws per function in `make test-all`
QUICK_EXAMPLES = 12   # in `make test`


def _public_callables():
    """(qualified name, callable) of every public function and class, each object once."""
    seen, out = set(), []
    for mod in MODULES:
        names = getattr(mod, "__all__", None) or [n for n in vars(mod) if not n.startswith("_")]
        for name in names:
            obj = getattr(mod, name)
            if not callable(obj) or id(obj) in seen:
                continue
            owner = getattr(obj, "__module__", "") or ""
            if not owner.startswith("scaling_lib") or isinstance(obj, Mapping):
                continue  # re-exported stdlib/numpy helpers, registries
            seen.add(id(obj))
            qual = f"{owner}.{obj.__name__}"
            if qual not in EXCLUDED:
                out.append((qual, obj))
    return out


# Methods with arguments, bound to a preset instance.
_H100 = hardware.get("h100")
_BOUND = [
    ("Accelerator.peak_flops_per_s", _H100.peak_flops_per_s),
    ("Accelerator.critical_intensity", _H100.critical_intensity),
    ("Accelerator.supports", _H100.supports),
    ("GPUInternals.level", _H100.internals.level),
    ("TPUInternals.implied_clock_hz", hardware.get("tpu-v5e").internals.implied_clock_hz),
    ("Breakdown.scaled", Breakdown({"a": 1.0, "b": 2.0}).scaled),
    ("ParallelPlan.n_microbatches", ParallelPlan(dp=2, micro_batch=2).n_microbatches),
    ("ParallelPlan.with_changes", ParallelPlan(dp=2).with_changes),
    ("TransformerConfig.with_changes", models.get("llama3-8b").with_changes),
]
CALLABLES = dict(_public_callables() + _BOUND)

# ---- argument strategies -------------------------------------------------------------------------
_TINY = models.TransformerConfig(L=2, D=64, F=128, N=4, K=2, H=16, V=100)
_MOE = models.TransformerConfig(L=2, D=64, F=128, N=4, K=4, H=16, V=100, E=4, k=2)
_MODEL_NAMES = list(models.names())
_CHIPS = list(hardware.names())
_CLUSTERS = list(hardware.cluster_names())
_RUNS = list(published.names())
_NAMES = _MODEL_NAMES + _CHIPS + _CLUSTERS + _RUNS + ["tpu-v5e-4x8", "bogus", ""]

BAD = st.sampled_from([
    0, -1, -7, 2, 3, 7, 8, 64, 4096, 2**31, 2**53 + 1, 2**63, 10**400, -10**400,
    0.0, -0.0, 0.5, 2.5, 4096.5, 1e-300, 1e308, math.nan, math.inf, -math.inf,
    True, False, None, 1 + 2j, np.complex128(3), "", "8", "abc", b"8",
    "h100", "llama3-8b", "dgx-h100", "bf16",
    np.int64(8), np.int32(4), np.uint8(3), np.float64(2.5), np.float32(16.0), np.bool_(True),
    np.array([1, 2, 4]), np.array([0.5, 2.0]), np.array([]), [1, 2], (4, 4), {"a": 1}, object(),
])
NUMBER = st.one_of(st.integers(-3, 10**6), st.floats(allow_nan=True, allow_infinity=True),
                   st.sampled_from([1, 2, 4, 8, 16, 128, 2048, 4096, 1e9, 1e12]))

_CURVE = scheduling.ScalingCurve([8, 16, 32], [1e5, 1.6e5, 1.8e5], 6e9, 312e12)
_JOBS = [scheduling.Job("a", "llama3-8b", 1e9), scheduling.Job("b", _TINY, 1e8, arrival=10.0)]

_BY_NAME = {
    "curve": st.sampled_from([_CURVE, "curve", None]),
    "curves": st.sampled_from([{"a": _CURVE, "b": _CURVE}, {"a": _CURVE}, {"a": 1}, {}]),
    "jobs": st.sampled_from([_JOBS, _JOBS[:1], [], ["a"], _JOBS + _JOBS]),
    "alloc": st.sampled_from([{"a": 8}, {"a": 8, "b": 16}, {"a": -8}, {"c": 8}, {}]),
    "weights": st.sampled_from([None, {"a": 1.0, "b": 2.0}, {"a": -1.0}, {"a": math.nan}]),
    "cfg": st.sampled_from(_MODEL_NAMES + [_TINY, _MOE]),
    "model": st.sampled_from([_TINY, _MOE, models.get("llama3-8b")]),
    "accelerator": st.sampled_from(_CHIPS + [_H100]),
    "cluster": st.sampled_from([hardware.cluster("h100", 16), hardware.cluster("tpu-v5e", 64),
                                "dgx-h100"]),
    "plan": st.sampled_from([ParallelPlan(), ParallelPlan(dp=2, tp=2), ParallelPlan(tp=7),
                             ParallelPlan(pp=4, dp=2), ParallelPlan(dp=4, ep=4, zero=3)]),
    "memory": st.sampled_from([Breakdown({"parameters": 1e9, "activations": 2e9})]),
    "peak_flops": st.sampled_from([{"bf16": 1e15}, {"fp7": 1e15}, {}, {"bf16": -1}]),
    "intra_node": st.sampled_from([hardware.Link("NVLink", 450e9)]),
    "inter_node": st.sampled_from([hardware.Link("IB", 50e9, 5e-6)]),
    "dtype": st.sampled_from(["bf16", "fp8", "fp32", "int4", "float16", "fp7"]),
    "kv_dtype": st.sampled_from(["bf16", "fp8", None]),
    "weight_dtype": st.sampled_from(["bf16", "int8", None]),
    "topology": st.sampled_from(list(hardware.TOPOLOGIES) + ["mesh"]),
    "collective": st.sampled_from(list(collectives.KINDS) + ["psum", "all_reduce", "bogus"]),
    "kind": st.sampled_from(list(collectives.KINDS) + ["gpu", "tpu"]),
    "recompute": st.sampled_from(["none", "selective", "full", "half", ("full",),
                                  ("none", "full"), ("some",)]),  # tuples: split_table's
    "schedule": st.sampled_from(list(parallelism.SCHEDULES) + ["zb"]),
    "name": st.sampled_from(_NAMES),
    "run": st.sampled_from(_RUNS + [published.get(_RUNS[0])]),
    "estimate": st.sampled_from(list(published.TIME_ESTIMATES)),
    "shape": st.sampled_from([(4, 4), (16, 16), (4, 4, 8), (2, 2, 4), (8, 16), (0, 4)]),
    "wrap": st.sampled_from([None, (True, True), (False, True)]),
    "spec": st.sampled_from(["bd,df->bf", "btnh,bsnh->bnts", "ab->", "bd,df"]),
    "groups": st.sampled_from([(4, 2), (8,), (8, 4, 2), (0, 2)]),
    "parts": st.sampled_from([{"a": 1.0, "b": 2}, {}]),
    "mla": st.sampled_from([None, models.MLA(0, 16, 16, 8, 16)]),
    "norm": st.sampled_from(list(models.NORMS)),
    "n_params": st.sampled_from([8e9, 70e9, 1, 1e9]),
    "flops": st.sampled_from([1e12, 3.8e25, 0.0]),
    "nbytes": st.sampled_from([1e6, 1e9, 0.0]),
    "bytes_per_s": st.sampled_from([50e9, 450e9]),
    "mfu": st.sampled_from([0.4, 0.55, 1.0]),
    "every": st.sampled_from([1, 2, 4]),
    # sharding: specs of A[I, J] and B[J, K], a mesh, and plans sharded_matmul returns
    "a_spec": st.sampled_from([("X", None), (None, "X"), (None, None), ("X", "X"), ("Z", None),
                               ("X",)]),
    "b_spec": st.sampled_from([("X", None), (None, "Y"), (None, "X"), (None, None), (3, None)]),
    "mesh_shape": st.sampled_from([{"X": 8}, {"X": 4, "Y": 2}, {"X": 0}, {"X": 2.5}, {1: 2}]),
    "m": st.sampled_from([sharding.sharded_matmul(64, 32, 16, *specs, {"X": 8, "Y": 2})
                          for specs in ((("X", None), (None, "Y")), (("X", None), ("X", None)),
                                        ((None, "X"), ("X", None)), (("X", None), (None, "X")))]),
    **dict.fromkeys("IJK", st.sampled_from([8, 64, 4096, 2])),  # matmul dims (2: indivisible)
    "reduce": st.sampled_from(list(sharding.REDUCTIONS) + ["psum"]),
    "t_math": st.sampled_from([0.0, 1e-3, 8.0]),
    "t_comm": st.sampled_from([0.0, 2e-3, 14.0]),
    "flops_per_s": st.sampled_from([989e12, 197e12]),
    # parallelism.steptime / timeline / split
    "comm": st.sampled_from([parallelism.Comm("all-reduce", "dp", 8, 2e9),
                             parallelism.Comm("all-gather", "dp", 4, 1e8, count=2),
                             parallelism.Comm("all-reduce", "tp", 2, 1e6, phase="forward",
                                              overlappable=False)]),
    "efficiency": st.sampled_from([1.0, 0.5, 1.5]),
    "tokens_per_device": st.sampled_from([2048, 8192]),
    "bucket_bytes": st.sampled_from([25e6, 1e9]),
    "n_layers": st.sampled_from([None, 1, 2, 4, 40]),
    "sequence_parallel": st.sampled_from([True, False]),
    # serving
    "prefill_mfu": st.sampled_from([0.4, 0.6, 1.0]),
    "price_per_device_hour": st.sampled_from([None, 2.0, 10.0]),
    "alpha": st.sampled_from([0.0, 0.5, 0.8, 1.0, np.array([0.6, 0.9])]),
    "gamma": st.sampled_from([0, 1, 4, 8]),
    "draft_cost": st.sampled_from([0.0, 0.05, 0.5]),
    "prefill_time": st.sampled_from([1e-3, 0.1, 2.0]),
    "decode_step_time": st.sampled_from([5e-3, 0.02]),
    "kv_bytes": st.sampled_from([0.0, 1e9, 1e12]),
    # serving_sim
    "kv_budget_tokens": st.sampled_from([4096, 100_000, 10]),
    "t0": st.sampled_from([0.0, 0.01]),
    "t1": st.sampled_from([0.0, 1e-4]),
    "rate": st.sampled_from([None, 0.5, 100.0]),
    "arrival_times": st.sampled_from([None, [0.0], np.arange(10.0), [1.0, 0.0]]),
    "n_requests": st.sampled_from([None, 1, 10, 200]),
    "seed": st.sampled_from([0, 1]),
    "context": st.sampled_from([1, 2048, 8192]),
    "max_devices": st.sampled_from([1, 8, 4096]),
    # "latency" is also the per-hop latency of the collectives: scalars for them, lists for
    # serving.pareto_mask
    "latency": st.sampled_from([0.0, 2e-6, 1e-3, [1.0, 2.0, 3.0], np.array([0.01, 0.02])]),
    "throughput": st.sampled_from([[10.0, 30.0, 20.0], np.array([5.0, 1.0])]),
}
_COUNT_NAMES = {"B", "T", "S", "n", "n_devices", "dp", "tp", "pp", "cp", "ep", "L", "D", "F",
                "N", "K", "H", "V", "E", "k", "micro_batch", "virtual_stages", "n_microbatches",
                "global_batch", "batch", "ndim", "n_tiles", "n_units", "dim", "multiple", "gen",
                "lanes", "zero", "digits", "prompt_len", "gen_len"}
COUNT = st.sampled_from([1, 2, 4, 8, 16, 64, 128, 2048, 4096])


def _strategy(name: str):
    """Valid values for a parameter called ``name`` (when known), mixed with bad ones."""
    valid = _BY_NAME.get(name)
    if valid is None and name in _COUNT_NAMES:
        valid = COUNT
    if valid is None:
        valid = NUMBER
    return st.one_of(valid, valid, BAD)


def _draw_call(data, fn):
    """Draw positional and keyword arguments for ``fn`` from its signature."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return (), {}
    args, kwargs = [], {}
    for p in sig.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            args += data.draw(st.lists(_strategy(p.name), max_size=3), label=f"*{p.name}")
        elif p.kind is p.VAR_KEYWORD:
            # an extra keyword: a field the function forwards, or an unknown one (the names of
            # its own parameters would be a Python-level TypeError, not bad input)
            keys = [k for k in ("devices_per_node", "topology", "torus_shape", "wraparound",
                                "L", "tp", "zero", "sliding_window", "bogus")
                    if k not in sig.parameters]
            if data.draw(st.booleans(), label=f"**{p.name}?"):
                key = data.draw(st.sampled_from(keys))
                kwargs[key] = data.draw(_strategy(key), label=key)
        elif p.default is p.empty or data.draw(st.booleans(), label=f"{p.name}?"):
            value = data.draw(_strategy(p.name), label=p.name)
            if p.kind is p.KEYWORD_ONLY:
                kwargs[p.name] = value
            elif p.kind is p.POSITIONAL_ONLY or not kwargs:
                args.append(value)
            else:
                kwargs[p.name] = value
        elif p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            # a skipped optional positional: later ones must go by keyword
            kwargs.setdefault("__skip__", True)
    kwargs.pop("__skip__", None)
    return tuple(args), kwargs


class Hang(Exception):
    """Raised by the SIGALRM guard."""


def _alarm(signum, frame):
    raise Hang(f"call did not return within {ALARM} s")


class _Guard:
    """During one call: SIGALRM after ALARM seconds, and (on Linux) an address-space cap of
    MEMORY_LIMIT bytes above what the process already uses, so a runaway allocation raises
    MemoryError instead of exhausting a shared machine. Both only where they can be set (the
    main thread of a POSIX process)."""

    def __enter__(self):
        self.alarm = hasattr(signal, "SIGALRM") and \
            threading.current_thread() is threading.main_thread()
        if self.alarm:
            self.old = signal.signal(signal.SIGALRM, _alarm)
            signal.alarm(ALARM)
        self.limits = None
        if os.path.exists("/proc/self/statm"):
            soft, hard = resource.getrlimit(resource.RLIMIT_AS)
            with open("/proc/self/statm") as f:  # address space in use, in pages
                in_use = int(f.read().split()[0]) * resource.getpagesize()
            cap = in_use + MEMORY_LIMIT
            if hard != resource.RLIM_INFINITY:
                cap = min(cap, hard)
            resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
            self.limits = (soft, hard)
        return self

    def __exit__(self, *exc):
        if self.alarm:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, self.old)
        if self.limits:
            resource.setrlimit(resource.RLIMIT_AS, self.limits)
        return False


def _numbers(result):
    """Every float-like leaf of a result (for the NaN check)."""
    if isinstance(result, Mapping):
        for v in result.values():
            yield from _numbers(v)
    elif isinstance(result, (tuple, list)):
        for v in result:
            yield from _numbers(v)
    elif isinstance(result, (float, np.floating, np.ndarray)) and not isinstance(result, bool):
        arr = np.asarray(result)
        if arr.dtype.kind == "f":
            yield arr


@pytest.mark.parametrize("qualname", sorted(CALLABLES))
@settings(max_examples=QUICK_EXAMPLES, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_any_input_returns_or_raises_value_error(qualname, data):
    _fuzz_once(qualname, data)


@pytest.mark.slow
@pytest.mark.parametrize("qualname", sorted(CALLABLES))
@settings(max_examples=MAX_EXAMPLES, derandomize=True, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_any_input_returns_or_raises_value_error_many_draws(qualname, data):
    _fuzz_once(qualname, data)


def _fuzz_once(qualname, data):
    fn = CALLABLES[qualname]
    args, kwargs = _draw_call(data, fn)
    guard = _Guard()
    start = time.perf_counter()
    try:
        with guard, np.errstate(all="ignore"):
            result = fn(*args, **kwargs)
    except ValueError as e:
        assert str(e).strip(), f"{qualname}: ValueError without a message"
        result = None
    elapsed = time.perf_counter() - start
    assert elapsed < TIME_LIMIT, f"{qualname} took {elapsed:.2f} s"
    for arr in _numbers(result):
        assert qualname in NAN_IN_NAN_OUT or not np.any(np.isnan(arr)), \
            f"{qualname} returned NaN"


def test_every_module_is_fuzzed():
    """The introspection finds the public API (a guard against an empty parametrisation)."""
    modules = {q.rsplit(".", 1)[0] for q in CALLABLES}
    for mod in ("scaling_lib.units", "scaling_lib.roofline", "scaling_lib.transformer",
                "scaling_lib.memory", "scaling_lib.inference", "scaling_lib.collectives",
                "scaling_lib.models", "scaling_lib.published", "scaling_lib.hardware.clusters",
                "scaling_lib.plan", "scaling_lib.sharding",
                "scaling_lib.parallelism.steptime", "scaling_lib.parallelism.timeline",
                "scaling_lib.parallelism.split", "scaling_lib.serving",
                "scaling_lib.serving.sim"):
        # a package (collectives, hardware) counts through any of its submodules
        assert any(m == mod or m.startswith(mod + ".") for m in modules), mod
    assert len(CALLABLES) > 60


# ---- the cases issue 7 named, each refused with its rule ----------------------------------------
_TINY_28 = models.TransformerConfig(L=2, D=448, F=1792, N=28, K=4, H=16, V=1000)
ISSUE_CASES = [
    (lambda: hardware.torus_shape(40_000_000, 3), "n=40000000 is too large"),
    (lambda: hardware.torus_shape(2**63, 2), "too large"),
    (lambda: memory.model_state_bytes(8e9, dp=0.5), "dp=0.5 is not allowed"),
    (lambda: transformer.mfu("llama3-8b", 1e6, 2.5, "h100", 4096), "n_devices=2.5"),
    (lambda: memory.training_memory("llama3-8b", ParallelPlan(), 1, 4096.5), "T=4096.5"),
    (lambda: hardware.cluster("h100", True), "n_devices=True"),
    (lambda: transformer.forward_flops("llama3-8b", "8", 4096), "B='8'"),
    (lambda: transformer.kv_cache_bytes("llama3-8b", 1 + 0j, 4096), "B=0j|B=\\(1\\+0j\\)"),
    (lambda: transformer.forward_flops("llama3-8b", 10**400, 4096), "too large"),
    (lambda: roofline.network_critical_dim("h100", 0.5), "n=0.5 chips is not allowed"),
    (lambda: transformer.train_time(1e24, 8, "h100", 6502), r"mfu=6502 is not a fraction"),
    (lambda: transformer.mfu("llama3-8b", 1e9, 8, "h100", 4096), r"MFU=\d+ > 1"),
    (lambda: memory.training_memory(_TINY_28, ParallelPlan(tp=7), 1, 128),
     r"tp_kv_heads: .*tp=7.*K=4.*choose tp in \[1, 2, 4, 28\]"),
    (lambda: memory.activation_bytes("llama3-8b", 1, 1024, tp=3), r"tp=3 must divide N=32"),
    (lambda: models.from_hf_config({"hidden_size": 4096, "intermediate_size": 1,
                                    "num_hidden_layers": 1, "num_attention_heads": 0,
                                    "vocab_size": 10}), "num_attention_heads=0"),
]


@pytest.mark.parametrize("call, msg", ISSUE_CASES)
def test_issue_examples_raise_value_error_naming_the_rule(call, msg):
    with pytest.raises(ValueError, match=msg):
        call()


def test_numpy_integers_are_accepted_where_python_ones_are():
    cfg = models.TransformerConfig(L=np.int64(2), D=np.int32(64), F=128, N=np.int64(4),
                                   K=np.int64(2), H=16, V=100)
    plan = ParallelPlan(dp=np.int64(2), tp=np.int64(2))
    mem = memory.training_memory(cfg, plan, np.int64(4), np.int64(128))
    assert mem == memory.training_memory(_TINY, ParallelPlan(dp=2, tp=2), 4, 128)
    assert hardware.cluster("h100", np.int64(16)).n_devices == 16
