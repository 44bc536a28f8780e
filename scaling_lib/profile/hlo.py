"""Reading a compiled HLO module: one record per top-level instruction, with its FLOPs and bytes.

:func:`hlo_ops` parses ``compiled.as_text()`` into :class:`HloOp` records named as the profiler
names them. The cost model follows XLA's: a dot is 2 x (output elements) x (contracted
elements); an elementwise (:data:`ELEMENTWISE_OPCODES`) or reduce op is one FLOP per element;
transcendentals (:data:`TRANSCENDENTAL_OPCODES`) are not FLOPs; a fusion costs what its body
costs. Bytes are the operands read plus the result written, each once. Pure text: no JAX needed.

See: Chapter "Profiling JAX programs".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..simulate import hlo_shape_bytes
# one HLO grammar for the whole library: the instruction and computation-header patterns and the
# call splitter that reads collectives also read every other instruction here
from ..simulate.hlo import _HEADER, _INSTR, _split_call

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
