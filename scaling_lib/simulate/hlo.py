"""Reading compiled programs: the collectives XLA emitted, with groups, bytes and counts.

See the package docstring for the rewrites XLA:CPU makes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from .devices import _jax

COLLECTIVE_OPCODES = ("all-gather", "all-reduce", "reduce-scatter", "all-to-all",
                      "collective-permute")

# Bytes per element of HLO element types.
HLO_TYPE_BYTES = {
    "pred": 1, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2,
    "s32": 4, "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16,
    "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3": 1, "f8e4m3fnuz": 1, "f8e5m2fnuz": 1, "f8e4m3b11fnuz": 1,
    "token": 0, "opaque": 0,
}
# XLA:CPU has no bf16 or fp8 collectives: it converts them to the wider type around the
# collective (measured: a bf16 psum compiles to convert -> f32 all-reduce -> convert).
CPU_PROMOTED = {"bf16": "f32", "f8e4m3fn": "f16", "f8e5m2": "f16"}


@dataclass(frozen=True)
class Collective:
    """One collective in a compiled program, with per-device buffer sizes.

    ``count`` is how many times it runs per call (loop trip counts multiplied in);
    ``n_operands`` > 1 for tuple forms (a combined all-reduce, XLA:CPU's all-to-all).
    """

    kind: str
    group_size: int
    replica_groups: tuple
    operand_bytes: float
    result_bytes: float
    count: int = 1
    dtype: str = ""
    n_operands: int = 1
    name: str = ""


def hlo_shape_bytes(shape: str) -> float:
    """Bytes of an HLO shape string, tuples summed.

    >>> hlo_shape_bytes("f32[8,4]{1,0}"), hlo_shape_bytes("(bf16[2], s32[])")
    (128.0, 8.0)
    """
    total = 0.0
    for etype, dims in re.findall(r"([a-z][a-z0-9]*)\[([0-9,]*)\]", shape):
        if etype not in HLO_TYPE_BYTES:
            raise ValueError(f"unknown HLO element type {etype!r} in {shape!r}")
        total += HLO_TYPE_BYTES[etype] * math.prod(int(d) for d in dims.split(",") if d)
    return float(total)


def parse_replica_groups(text: str, n_devices: int | None = None) -> tuple:
    """Replica groups from any of XLA's spellings, as a tuple of tuples of device ids.

    >>> parse_replica_groups("{{0,1},{2,3}}")
    ((0, 1), (2, 3))
    >>> parse_replica_groups("[2,2]<=[2,2]T(1,0)")
    ((0, 2), (1, 3))
    >>> parse_replica_groups("mesh['X'=2,'Y'=2] {'X'}")
    ((0, 2), (1, 3))
    """
    text = text.strip()
    m = re.fullmatch(r"\[([\d,]+)\]<=\[([\d,]+)\](?:T\(([\d,]+)\))?", text)
    if m:
        out_shape = [int(v) for v in m.group(1).split(",")]
        ids = np.arange(math.prod(out_shape)).reshape([int(v) for v in m.group(2).split(",")])
        if m.group(3):
            ids = ids.transpose([int(v) for v in m.group(3).split(",")])
        return tuple(tuple(int(i) for i in row) for row in ids.reshape(out_shape[0], -1))
    m = re.fullmatch(r"mesh\[(.*?)\]\s*\{(.*?)\}", text)
    if m:
        axes = re.findall(r"'?([\w]+)'?\s*=\s*(\d+)", m.group(1))
        names = [a for a, _ in axes]
        sizes = [int(s) for _, s in axes]
        chosen = [names.index(a) for a in re.findall(r"'?([\w]+)'?", m.group(2))]
        rest = [i for i in range(len(names)) if i not in chosen]
        ids = np.arange(math.prod(sizes)).reshape(sizes).transpose(rest + chosen)
        return tuple(tuple(int(i) for i in row)
                     for row in ids.reshape(-1, math.prod(sizes[i] for i in chosen)))
    groups = tuple(tuple(int(v) for v in g.split(",") if v.strip())
                   for g in re.findall(r"\{([\d,\s]*)\}", text[1:-1] if text.startswith("{{")
                                       else text))
    groups = tuple(g for g in groups if g)
    if not groups and n_devices:
        return (tuple(range(n_devices)),)
    return groups


def _components(pairs) -> tuple:
    """Connected groups of devices in a collective-permute's source-target pairs."""
    parent: dict = {}

    def find(a):
        while parent.setdefault(a, a) != a:
            a = parent[a]
        return a

    for s, t in pairs:
        parent[find(s)] = find(t)
    groups: dict = {}
    for d in sorted(parent):
        groups.setdefault(find(d), []).append(d)
    return tuple(tuple(g) for g in sorted(groups.values()))


_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.+?)\s+([a-z][\w\-]*)\((.*)$")
_HEADER = re.compile(r"^\s*(ENTRY\s+)?%?([\w.\-]+)\s*\(.*->.*\{\s*$")
_CALLS = re.compile(r"\b(body|condition|to_apply|calls|true_computation|false_computation)="
                    r"%?([\w.\-]+)")


def _split_call(rest: str) -> tuple[str, str]:
    depth = 1
    for i, ch in enumerate(rest):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return rest[:i], rest[i + 1:]
    return rest, ""


def parse_hlo_collectives(text: str) -> list[Collective]:
    """Every collective in an optimised HLO module's text (``compiled.as_text()``).

    Operand shapes are looked up by name; loop bodies are multiplied by their
    ``known_trip_count``; async ``-start``/``-done`` pairs count once.

    >>> hlo = '''HloModule m, num_partitions=4
    ... ENTRY %main (p: f32[2,8]) -> f32[8,8] {
    ...   %p = f32[2,8]{1,0} parameter(0)
    ...   ROOT %ag = f32[8,8]{1,0} all-gather(%p), replica_groups=[1,4]<=[4], dimensions={0}
    ... }'''
    >>> parse_hlo_collectives(hlo)[0]
    Collective(kind='all-gather', group_size=4, replica_groups=((0, 1, 2, 3),), operand_bytes=64.0, result_bytes=256.0, count=1, dtype='f32', n_operands=1, name='ag')
    """
    text = re.sub(r"/\*.*?\*/", "", text)
    m = re.search(r"num_partitions=(\d+)", text)
    n_devices = int(m.group(1)) if m else None
    shapes: dict[str, str] = {}
    found = []  # (computation, name, opcode, shape, operand names, attributes)
    edges: list[tuple[str, str, int]] = []  # caller, callee, multiplier
    entry, comp = None, None
    for line in text.splitlines():
        h = _HEADER.match(line)
        if h:
            comp = h.group(2)
            entry = comp if h.group(1) else entry
            continue
        ins = _INSTR.match(line)
        if not ins or comp is None:
            continue
        name, shape, opcode, rest = ins.groups()
        shapes[name] = shape
        operands, attrs = _split_call(rest)
        trip = re.search(r'"known_trip_count":\{"n":"(\d+)"\}', attrs)
        for key, callee in _CALLS.findall(attrs):
            edges.append((comp, callee, int(trip.group(1)) if (trip and key == "body") else 1))
        b = re.search(r"branch_computations=\{([^}]*)\}", attrs)
        for callee in re.findall(r"%?([\w.\-]+)", b.group(1)) if b else ():
            edges.append((comp, callee, 1))
        base = opcode[:-6] if opcode.endswith("-start") else opcode
        if base in COLLECTIVE_OPCODES or opcode.endswith("-done"):
            found.append((comp, name, opcode, shape, re.findall(r"%([\w.\-]+)", operands), attrs))
    counts = {entry: 1}
    for _ in range(len(edges) + 1):  # relax along call edges (programs are small DAGs)
        new = {entry: 1}
        for caller, callee, mult in edges:
            if caller in counts:
                new[callee] = new.get(callee, 0) + counts[caller] * mult
        if new == counts:
            break
        counts = new
    done_shape = {ops[0]: shape for _, _, opcode, shape, ops, _ in found
                  if opcode.endswith("-done") and ops}
    out = []
    for comp, name, opcode, shape, ops, attrs in found:
        if opcode.endswith("-done"):
            continue
        kind = opcode[:-6] if opcode.endswith("-start") else opcode
        result = done_shape.get(name, shape) if opcode.endswith("-start") else shape
        pairs = re.search(r"source_target_pairs=(\{\{.*?\}\})", attrs)
        if pairs:
            groups = _components(parse_replica_groups(pairs.group(1)))
        else:
            rg = re.search(r"replica_groups=(\{\{.*?\}\}|\{\}|\[[\d,]+\]<=\[[\d,]+\](?:T\([\d,]+\))?"
                           r"|mesh\[.*?\]\s*\{.*?\})", attrs)
            groups = parse_replica_groups(rg.group(1), n_devices) if rg else (
                (tuple(range(n_devices)),) if n_devices else ())
        dtypes = re.findall(r"([a-z][a-z0-9]*)\[", result)
        out.append(Collective(
            kind=kind,
            group_size=len(groups[0]) if groups else 1,
            replica_groups=groups,
            operand_bytes=sum(hlo_shape_bytes(shapes.get(o, "")) for o in ops),
            result_bytes=hlo_shape_bytes(result),
            count=counts.get(comp, 0),
            dtype=dtypes[-1] if dtypes else "",
            n_operands=len(ops),
            name=name,
        ))
    return out


def compiled_text(fn, *args, **kwargs) -> str:
    """The optimised per-device HLO of ``jax.jit(fn)`` for these arguments (no execution).

    Arguments may be arrays or ``jax.ShapeDtypeStruct``s (compile without allocating).
    """
    jax = _jax()
    jitted = fn if hasattr(fn, "lower") else jax.jit(fn)
    return jitted.lower(*args, **kwargs).compile().as_text()


def collectives_in(fn, *args, **kwargs) -> list[Collective]:
    """The collectives XLA emitted for ``fn(*args)``: kind, groups, per-device bytes, count.

    Compiles ``jax.jit(fn)`` (an already jitted function is used as is) and reads the optimised
    HLO; nothing is executed. See the module docstring for the rewrites XLA:CPU makes.
    """
    return parse_hlo_collectives(compiled_text(fn, *args, **kwargs))


def cpu_collective_dtype(hlo_type: str) -> str:
    """The element type XLA:CPU actually moves for a collective on ``hlo_type``.

    >>> cpu_collective_dtype("bf16"), cpu_collective_dtype("f32")
    ('f32', 'f32')
    """
    return CPU_PROMOTED.get(hlo_type, hlo_type)


def hlo_type(dtype) -> str:
    """The HLO element type of a numpy/JAX dtype ("bfloat16" -> "bf16", "float32" -> "f32").

    >>> hlo_type("float32"), hlo_type("int8"), hlo_type("bool")
    ('f32', 's8', 'pred')
    """
    name = str(getattr(dtype, "name", dtype))
    if name == "bool":
        return "pred"
    if name.startswith("float8_"):
        return "f8" + name[len("float8_"):]
    m = re.fullmatch(r"(bfloat|float|int|uint|complex)(\d+)", name)
    if not m:
        raise ValueError(f"dtype={dtype!r} has no known HLO element type")
    prefix = {"bfloat": "bf", "float": "f", "int": "s", "uint": "u", "complex": "c"}[m.group(1)]
    return f"{prefix}{m.group(2)}"


def full_array_bytes(c: Collective) -> float:
    """V of a compiled collective, the full array as the cost model states it (per device
    buffers: an all-gather's result, an all-reduce's or reduce-scatter's operand, n times an
    all-to-all's operand; a collective-permute's operand, the bytes each device sends).

    >>> full_array_bytes(Collective("all-gather", 4, ((0, 1, 2, 3),), 64.0, 256.0))
    256.0
    """
    if c.kind == "all-gather":
        return c.result_bytes
    if c.kind == "all-to-all":
        return c.operand_bytes * c.group_size
    return c.operand_bytes


def emitted_totals(collectives) -> dict:
    """Bytes per (kind, group_size) that a compiled program moves: sum of V · count, the form
    of :func:`scaling_lib.parallelism.totals` (groups of one left out).

    >>> emitted_totals([Collective("all-reduce", 2, ((0, 1),), 8.0, 8.0, count=3)])
    {('all-reduce', 2): 24.0}
    """
    out: dict = {}
    for c in collectives:
        if c.group_size > 1 and c.count:
            key = (c.kind, c.group_size)
            out[key] = out.get(key, 0.0) + full_array_bytes(c) * c.count
    return out
