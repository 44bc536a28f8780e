"""Profiling JAX programs: what XLA compiled, what it costs on paper, and where the time went.

Three views of one jitted function, each in the library's units (seconds, FLOPs, bytes):

- the compiled program: :func:`hlo_ops` reads the optimised HLO text into one record per top-level
  instruction (its opcode, shape, named scope, and the FLOPs and bytes it implies);
  :func:`cost_analysis` and :func:`memory_analysis` wrap XLA's own estimates;
- the trace: :func:`profile` runs the function under ``jax.profiler.trace`` and
  :func:`read_trace` reads back the ``*.trace.json.gz`` file the installed JAX writes next to its
  ``xplane.pb`` (plain gzip + JSON: no TensorBoard or XProf needed), one :class:`OpEvent` per
  executed HLO operation; :func:`op_table` aggregates them per operation;
- the roofline: :func:`roofline_time` and :func:`op_roofline` put a measured time next to
  max(F / C, N / W) on an accelerator (a preset, or one measured with ``scaling_lib.measure``).

JAX is imported only inside the functions that need it; ``import scaling_lib.profile`` is instant.

The FLOPs counted per HLO instruction follow XLA's cost model: a dot is 2 x (output elements) x
(contracted elements); an elementwise or reduce op is one FLOP per element; transcendentals (exp,
tanh, ...) are not FLOPs. Bytes are the operands read plus the result written, each once.

See: Chapter "Profiling JAX programs".
"""

from __future__ import annotations

import glob
import gzip
import json
import math
import os
import re
import tempfile
import time
from dataclasses import dataclass

from . import hardware
from .roofline import t_comms, t_math
from .simulate import hlo_shape_bytes

# Elementwise HLO opcodes XLA's cost model charges one FLOP per output element.
ELEMENTWISE_OPCODES = frozenset({
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "negate", "abs", "compare",
    "select", "clamp", "remainder", "sign", "floor", "ceil", "round-nearest-even",
    "round-nearest-afz", "and", "or", "xor", "not",
})
# Transcendental opcodes: counted separately by cost_analysis ("transcendentals"), not as FLOPs.
TRANSCENDENTAL_OPCODES = frozenset({
    "exponential", "exponential-minus-one", "log", "log-plus-one", "tanh", "logistic", "rsqrt",
    "sqrt", "cbrt", "power", "sine", "cosine", "tan", "atan2", "erf",
})


def _jax():
    try:
        import jax
    except ImportError:  # pragma: no cover - depends on the environment
        raise ImportError("scaling_lib.profile needs JAX: pip install 'scaling_lib[jax]'") from None
    return jax


# ---- the compiled program ------------------------------------------------------------------------


@dataclass(frozen=True)
class HloOp:
    """One top-level instruction of a compiled HLO module (per device).

    ``scope`` is the JAX name stack from the op's metadata (``jax.named_scope`` labels appear in
    it); ``fused`` lists the opcodes inside a fusion; ``flops`` and ``nbytes`` follow the module
    docstring's cost model.
    """

    name: str
    opcode: str
    shape: str
    scope: str
    flops: float
    nbytes: float
    fused: tuple = ()


_HEADER = re.compile(r"^\s*(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$")
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.+?)\s+([a-z][\w\-]*)\((.*)$")


def _split_call(rest: str) -> tuple[str, str]:
    depth = 1
    for i, ch in enumerate(rest):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return rest[:i], rest[i + 1:]
    return rest, ""


def _dims(shape: str) -> list[int]:
    m = re.search(r"\[([0-9,]*)\]", shape)
    return [int(d) for d in m.group(1).split(",") if d] if m else []


def _elements(shape: str) -> int:
    return sum(math.prod(int(d) for d in dims.split(",") if d)
               for dims in re.findall(r"[a-z][a-z0-9]*\[([0-9,]*)\]", shape))


def _parse_computations(text: str) -> tuple[dict, str | None]:
    text = re.sub(r"/\*.*?\*/", "", text)
    comps: dict[str, list] = {}
    entry, comp = None, None
    for line in text.splitlines():
        h = _HEADER.match(line)
        if h:
            comp = h.group(2)
            comps[comp] = []
            entry = comp if h.group(1) else entry
            continue
        ins = _INSTR.match(line)
        if ins and comp is not None:
            name, shape, opcode, rest = ins.groups()
            operands, attrs = _split_call(rest)
            comps[comp].append((name, shape, opcode, re.findall(r"%([\w.\-]+)", operands), attrs))
    return comps, entry


def _instr_flops(shape, opcode, operand_shapes, attrs, comps, depth=0) -> float:
    if opcode in ("dot", "convolution"):
        lhs = _dims(operand_shapes[0]) if operand_shapes else []
        m = re.search(r"lhs_contracting_dims=\{([\d,]*)\}", attrs)
        k = math.prod(lhs[int(i)] for i in m.group(1).split(",") if i) if m else 1
        return 2.0 * _elements(shape) * k
    if opcode in ELEMENTWISE_OPCODES:
        return float(_elements(shape))
    if opcode in ("reduce", "reduce-window", "all-reduce", "reduce-scatter"):
        return float(sum(_elements(s) for s in operand_shapes[:max(1, len(operand_shapes) // 2)]))
    if opcode == "fusion" and depth < 4:
        m = re.search(r"calls=%?([\w.\-]+)", attrs)
        return _computation_flops(comps, m.group(1), depth + 1) if m else 0.0
    return 0.0


def _computation_flops(comps, name, depth) -> float:
    body = comps.get(name, [])
    shapes = {n: s for n, s, *_ in body}
    return sum(_instr_flops(s, op, [shapes.get(o, "") for o in ops], attrs, comps, depth)
               for _, s, op, ops, attrs in body)


_SKIP = ("parameter", "constant", "get-tuple-element", "tuple", "bitcast", "after-all")


def hlo_ops(text: str) -> dict[str, HloOp]:
    """The top-level instructions of an optimised HLO module (``compiled.as_text()``), by name.

    These names are the ``hlo_op`` names the profiler records, so a trace can be joined with what
    each op computes. Parameters, constants, tuples and bitcasts (no work) are left out.

    >>> hlo = '''HloModule m
    ... ENTRY %main (a: f32[8,16], b: f32[16,4]) -> f32[8,4] {
    ...   %a = f32[8,16]{1,0} parameter(0)
    ...   %b = f32[16,4]{1,0} parameter(1)
    ...   ROOT %dot.1 = f32[8,4]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/mm/dot_general"}
    ... }'''
    >>> op = hlo_ops(hlo)["dot.1"]
    >>> op.opcode, op.flops, op.nbytes, op.scope
    ('dot', 1024.0, 896.0, 'jit(f)/mm/dot_general')
    """
    comps, entry = _parse_computations(text)
    if entry is None:
        raise ValueError("no ENTRY computation found: pass the text of compiled.as_text()")
    body = comps[entry]
    shapes = {n: s for n, s, *_ in body}
    out = {}
    for name, shape, opcode, ops, attrs in body:
        if opcode in _SKIP:
            continue
        operand_shapes = [shapes.get(o, "") for o in ops]
        m = re.search(r'op_name="([^"]*)"', attrs)
        called = re.search(r"calls=%?([\w.\-]+)", attrs)
        fused = tuple(op for _, _, op, _, _ in comps.get(called.group(1), [])
                      if op not in _SKIP) if (opcode == "fusion" and called) else ()
        out[name] = HloOp(
            name=name, opcode=opcode, shape=shape, scope=m.group(1) if m else "",
            flops=_instr_flops(shape, opcode, operand_shapes, attrs, comps),
            nbytes=sum(hlo_shape_bytes(s) for s in operand_shapes) + hlo_shape_bytes(shape),
            fused=fused)
    return out


def compile_fn(fn, *args, **kwargs):
    """``jax.jit(fn).lower(*args).compile()`` (an already jitted ``fn`` is used as is).

    Arguments may be arrays or ``jax.ShapeDtypeStruct``s; nothing is executed.
    """
    jax = _jax()
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    return jitted.lower(*args, **kwargs).compile()


@dataclass(frozen=True)
class Cost:
    """XLA's cost estimate of a compiled program, per device: FLOPs, transcendentals, bytes."""

    flops: float
    transcendentals: float
    bytes_accessed: float

    @property
    def intensity(self) -> float:
        """FLOPs per byte accessed."""
        return self.flops / self.bytes_accessed if self.bytes_accessed else float("inf")


def cost_analysis(compiled) -> Cost:
    """``compiled.cost_analysis()`` in the library's units (one device's share).

    XLA counts each instruction once: a loop body (``lax.scan``, ``fori_loop``) is counted once,
    not once per iteration; for a sharded program the numbers are per device.
    """
    raw = compiled.cost_analysis()
    if isinstance(raw, (list, tuple)):  # older JAX: one dict per program
        raw = raw[0] if raw else {}
    raw = raw or {}
    return Cost(float(raw.get("flops", 0.0)), float(raw.get("transcendentals", 0.0)),
                float(raw.get("bytes accessed", 0.0)))


@dataclass(frozen=True)
class Memory:
    """``compiled.memory_analysis()`` per device, in bytes.

    ``peak_bytes`` = arguments + outputs + temporaries - aliased (donated buffers reused as
    outputs): what the program needs on the device while it runs (generated code aside).
    """

    argument_bytes: float
    output_bytes: float
    temp_bytes: float
    alias_bytes: float
    generated_code_bytes: float

    @property
    def peak_bytes(self) -> float:
        return self.argument_bytes + self.output_bytes + self.temp_bytes - self.alias_bytes


def memory_analysis(compiled) -> Memory:
    """``compiled.memory_analysis()`` as a :class:`Memory` (bytes per device)."""
    m = compiled.memory_analysis()
    get = lambda k: float(getattr(m, k, 0) or 0)  # noqa: E731
    return Memory(get("argument_size_in_bytes"), get("output_size_in_bytes"),
                  get("temp_size_in_bytes"), get("alias_size_in_bytes"),
                  get("generated_code_size_in_bytes"))


# ---- the trace -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpEvent:
    """One execution of one HLO operation on one device, from a profiler trace (seconds)."""

    op: str
    module: str
    device: str
    start: float
    duration: float


def _trace_file(logdir: str) -> str:
    files = glob.glob(os.path.join(logdir, "**", "*.trace.json.gz"), recursive=True)
    files = files or glob.glob(os.path.join(logdir, "**", "perfetto_trace.json.gz"),
                               recursive=True)
    if not files:
        raise ValueError(f"no *.trace.json.gz under logdir={logdir!r}; run jax.profiler.trace("
                         f"{logdir!r}) around the code first")
    return max(files, key=os.path.getmtime)


def parse_trace_events(events) -> list[OpEvent]:
    """:class:`OpEvent` s from Chrome-trace-format events (the ``traceEvents`` list).

    An event is an HLO operation when its args carry ``hlo_op`` (and ``hlo_module``): XLA:CPU
    records one per executed thunk with ``device_ordinal``; on a GPU or TPU they sit under a
    ``/device:...`` process. Where a device process has an "XLA Ops" line, only that line is read
    (the kernels under it would count the same time twice). A device trace with no ``hlo_op``
    annotations falls back to its kernel events, named as recorded (they then may not match the
    HLO names). Times in seconds, starting at 0.

    >>> ev = [{"ph": "X", "pid": 1, "tid": 2, "ts": 10.0, "dur": 5.0, "name": "dot.1",
    ...        "args": {"hlo_op": "dot.1", "hlo_module": "jit_f", "device_ordinal": "0"}}]
    >>> parse_trace_events(ev)
    [OpEvent(op='dot.1', module='jit_f', device='0', start=0.0, duration=5e-06)]
    """
    procs, threads = {}, {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            procs[e.get("pid")] = e.get("args", {}).get("name", "")
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[(e.get("pid"), e.get("tid"))] = e.get("args", {}).get("name", "")
    xla_ops_lines = {k for k, v in threads.items() if v == "XLA Ops"}
    with_lines = {pid for pid, _ in xla_ops_lines}
    picked = []
    for e in events:
        if e.get("ph") != "X":
            continue
        args = e.get("args") or {}
        key = (e.get("pid"), e.get("tid"))
        if e.get("pid") in with_lines:
            if key not in xla_ops_lines:
                continue
        elif "hlo_op" not in args or threads.get(key) == "XLA Modules":
            continue
        picked.append(e)
    on_device = [e for e in picked if procs.get(e.get("pid"), "").startswith("/device")]
    picked = on_device or picked
    if not picked:  # a device trace without hlo_op annotations: its kernels, named as recorded
        picked = [e for e in events if e.get("ph") == "X"
                  and procs.get(e.get("pid"), "").startswith("/device")
                  and threads.get((e.get("pid"), e.get("tid"))) not in ("XLA Modules", "Steps")]
    if not picked:
        return []
    t0 = min(float(e["ts"]) for e in picked)
    out = []
    for e in picked:
        args = e.get("args") or {}
        device = str(args.get("device_ordinal", procs.get(e.get("pid"), str(e.get("pid")))))
        out.append(OpEvent(op=str(args.get("hlo_op", e.get("name", ""))),
                           module=str(args.get("hlo_module", "")), device=device,
                           start=(float(e["ts"]) - t0) / 1e6,
                           duration=float(e.get("dur", 0.0)) / 1e6))
    return sorted(out, key=lambda ev: (ev.start, ev.device))


def read_trace(logdir: str) -> list[OpEvent]:
    """The HLO operations recorded in the newest trace under ``logdir`` (see
    :func:`parse_trace_events`)."""
    with gzip.open(_trace_file(logdir), "rt") as f:
        data = json.load(f)
    events = data["traceEvents"] if isinstance(data, dict) else data
    return parse_trace_events(events)


@dataclass(frozen=True)
class Profile:
    """A function profiled on its device: the events of its module, the compiled program, and
    the wall-clock time per call (mean over ``n_calls``, including dispatch)."""

    events: tuple
    wall_time: float
    n_calls: int
    module: str
    hlo_text: str
    logdir: str

    @property
    def devices(self) -> tuple:
        return tuple(sorted({e.device for e in self.events}, key=str))

    def ops(self) -> dict[str, HloOp]:
        return hlo_ops(self.hlo_text)

    def table(self) -> list[dict]:
        """:func:`op_table` of the events, joined with the compiled program."""
        return op_table(self.events, self.n_calls, self.ops())

    def device_time(self) -> float:
        """Seconds of operations per call on the busiest device."""
        per = {}
        for e in self.events:
            per[e.device] = per.get(e.device, 0.0) + e.duration
        return max(per.values()) / self.n_calls if per else 0.0


def profile(fn, *args, n_calls: int = 3, logdir: str | None = None) -> Profile:
    """Run ``jax.jit(fn)(*args)`` ``n_calls`` times under ``jax.profiler.trace`` and read the trace.

    The function is compiled and run once before tracing (so compilation is not in the trace).
    Only events of this function's HLO module are kept. Works on whatever devices the arguments
    live on (CPU, GPU or TPU).
    """
    jax = _jax()
    if isinstance(n_calls, bool) or not isinstance(n_calls, int) or n_calls < 1:
        raise ValueError(f"n_calls={n_calls!r} must be a whole number >= 1")
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    compiled = jitted.lower(*args).compile()
    text = compiled.as_text()
    m = re.match(r"\s*HloModule\s+([\w.\-]+)", text)
    module = m.group(1) if m else ""
    jax.block_until_ready(jitted(*args))  # warm-up
    logdir = logdir or tempfile.mkdtemp(prefix="jax_trace_")
    with jax.profiler.trace(logdir):
        t0 = time.perf_counter()
        for _ in range(n_calls):
            jax.block_until_ready(jitted(*args))
        wall = (time.perf_counter() - t0) / n_calls
    events = [e for e in read_trace(logdir) if not module or e.module == module]
    return Profile(tuple(events), wall, n_calls, module, text, logdir)


def op_table(events, n_calls: int = 1, ops: dict | None = None) -> list[dict]:
    """Events aggregated per operation, slowest first.

    Each row: ``op``, ``opcode`` and ``scope`` (from ``ops``, the :func:`hlo_ops` of the program,
    when given), ``count`` (executions, all devices), ``time`` (seconds per call on one device:
    total / (n_calls x devices)), ``mean`` (seconds per execution) and ``share`` of the total.

    >>> ev = [OpEvent("a", "m", "0", 0.0, 1.0), OpEvent("b", "m", "0", 1.0, 3.0)]
    >>> [(r["op"], r["time"], r["share"]) for r in op_table(ev)]
    [('b', 3.0, 0.75), ('a', 1.0, 0.25)]
    """
    if isinstance(n_calls, bool) or not isinstance(n_calls, int) or n_calls < 1:
        raise ValueError(f"n_calls={n_calls!r} must be a whole number >= 1")
    events = list(events)
    n_dev = max(1, len({e.device for e in events}))
    agg: dict[str, list] = {}
    for e in events:
        a = agg.setdefault(e.op, [0, 0.0])
        a[0] += 1
        a[1] += e.duration
    total = sum(t for _, t in agg.values()) or 1.0
    rows = []
    for op, (count, t) in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        info = (ops or {}).get(op)
        rows.append({"op": op, "opcode": info.opcode if info else "",
                     "scope": info.scope if info else "", "count": count,
                     "time": t / (n_calls * n_dev), "mean": t / count, "share": t / total})
    return rows


def slowest_op(events) -> str:
    """The operation with the largest total time (not the longest single execution)."""
    rows = op_table(events)
    if not rows:
        raise ValueError("no events: profile something first")
    return rows[0]["op"]


# ---- against the roofline ------------------------------------------------------------------------


def roofline_time(flops, nbytes, accelerator, dtype="bf16"):
    """Roofline lower bound on the time of work of ``flops`` moving ``nbytes`` on one chip:
    max(F / C, N / W_hbm) in seconds.

    >>> roofline_time(989.4e12, 1.0, "h100")
    1.0
    """
    acc = hardware.get(accelerator)
    return max(t_math(flops, acc.peak_flops_per_s(dtype)), t_comms(nbytes, acc.hbm_bytes_per_s))


def bound(flops, nbytes, accelerator, dtype="bf16") -> str:
    """"compute" when F / C >= N / W on ``accelerator``, else "memory".

    >>> bound(2 * 4096**3, 3 * 2 * 4096**2, "h100"), bound(1e6, 4e6, "h100")
    ('compute', 'memory')
    """
    acc = hardware.get(accelerator)
    tm = t_math(flops, acc.peak_flops_per_s(dtype))
    return "compute" if tm >= t_comms(nbytes, acc.hbm_bytes_per_s) else "memory"


def op_roofline(rows, ops: dict, accelerator, dtype="bf16") -> list[dict]:
    """Each measured op of :func:`op_table` beside its roofline time on ``accelerator``.

    Adds ``flops``, ``bytes``, ``roofline`` (seconds, :func:`roofline_time`), ``bound`` and
    ``efficiency`` = roofline / measured (1 = at the roofline; the rest is overhead or a slower
    path than the roofline assumes). The measured time is the row's ``time`` (per call, one
    device): a top-level op runs once per call, though a GPU may split it into several kernels
    (several events). Ops unknown to ``ops`` or with no work are skipped.
    """
    out = []
    for r in rows:
        info = ops.get(r["op"])
        if info is None or (info.flops == 0 and info.nbytes == 0):
            continue
        t_roof = roofline_time(info.flops, info.nbytes, accelerator, dtype)
        out.append({**r, "flops": info.flops, "bytes": info.nbytes, "roofline": t_roof,
                    "bound": bound(info.flops, info.nbytes, accelerator, dtype),
                    "efficiency": t_roof / r["time"] if r["time"] > 0 else float("nan")})
    return out


__all__ = ["Cost", "ELEMENTWISE_OPCODES", "HloOp", "Memory", "OpEvent", "Profile",
           "TRANSCENDENTAL_OPCODES", "bound", "compile_fn", "cost_analysis", "hlo_ops",
           "memory_analysis", "op_roofline", "op_table", "parse_trace_events", "profile",
           "read_trace", "roofline_time", "slowest_op"]
