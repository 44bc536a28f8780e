"""The value codec: how an answer travels from the student's kernel to the grader.

Tagged JSON, never pickle: numbers, booleans, text, None, lists/tuples/dicts and numpy arrays
round-trip; anything else becomes ``{"t": "other"}`` with its type name, which the checker
refuses as "not a number". :data:`CODEC` is source text: the grader ``exec``s it here to get
:func:`encode`, :func:`decode` and :func:`split_case`, and ships the same text inside every probe
cell so the kernel encodes with exactly the code the grader decodes with.
"""

from __future__ import annotations

# The value codec, run both in the grader and (as source) in the student's kernel. Tagged JSON:
# numbers, booleans, text, None, lists/tuples/dicts, numpy arrays; anything else becomes
# {"t": "other"} with its type name, which the checker refuses as "not a number".
CODEC = r'''
def _enc(x, depth=0):
    import numbers
    tn = type(x).__name__
    if depth > 6:
        return {"t": "other", "type": tn}
    if x is None:
        return {"t": "none"}
    if x is Ellipsis:
        return {"t": "ellipsis"}
    if isinstance(x, bool) or tn == "bool_":
        return {"t": "bool", "v": bool(x)}
    if isinstance(x, str):
        return {"t": "str", "v": str(x)[:10000]}
    if isinstance(x, int):
        return {"t": "int", "v": str(int(x))}
    if isinstance(x, float):
        return {"t": "float", "v": repr(float(x))}
    if isinstance(x, complex):
        return {"t": "complex", "v": [repr(x.real), repr(x.imag)]}
    if isinstance(x, (list, tuple)):
        if len(x) > 100000:
            return {"t": "other", "type": tn}
        return {"t": "tuple" if isinstance(x, tuple) else "list",
                "v": [_enc(v, depth + 1) for v in x]}
    if isinstance(x, dict):
        return {"t": "dict", "v": [[str(k), _enc(v, depth + 1)] for k, v in list(x.items())[:1000]]}
    if hasattr(x, "__array__") or hasattr(x, "dtype"):
        try:
            import numpy as np
            a = np.asarray(x)
            kind = a.dtype.kind
            if a.size <= 1000000 and kind in "iub":
                return {"t": "array", "kind": kind, "shape": list(a.shape), "dtype": a.dtype.name,
                        "v": [str(int(v)) if kind != "b" else bool(v) for v in a.ravel().tolist()]}
            if a.size <= 1000000 and kind in "f" or (a.dtype.names is None and kind == "V"):
                return {"t": "array", "kind": "f", "shape": list(a.shape), "dtype": a.dtype.name,
                        "v": [repr(float(v)) for v in a.astype(float).ravel().tolist()]}
            return {"t": "other", "type": f"{tn} of dtype {a.dtype}"}
        except Exception:
            return {"t": "other", "type": tn}
    if isinstance(x, numbers.Real) or tn == "Decimal":
        try:
            return {"t": "float", "v": repr(float(x))}
        except Exception:
            return {"t": "other", "type": tn}
    return {"t": "other", "type": tn}


def _dec(e):
    t = e["t"]
    if t == "none":
        return None
    if t == "ellipsis":
        return Ellipsis
    if t in ("bool", "str"):
        return e["v"]
    if t == "int":
        return int(e["v"])
    if t == "float":
        return float(e["v"])
    if t == "complex":
        return complex(float(e["v"][0]), float(e["v"][1]))
    if t == "list":
        return [_dec(v) for v in e["v"]]
    if t == "tuple":
        return tuple(_dec(v) for v in e["v"])
    if t == "dict":
        return {str(k): _dec(v) for k, v in e["v"]}
    if t == "array":
        import numpy as np
        kind = e["kind"]
        vals = [float(v) for v in e["v"]] if kind == "f" else (
            [bool(v) for v in e["v"]] if kind == "b" else [int(v) for v in e["v"]])
        dtype = {"f": float, "b": bool}.get(kind, object if any(abs(v) >= 2**63 for v in vals)
                                              else np.int64)
        if str(e.get("dtype")) in ("float16", "float32", "float64", "int8", "int16", "int32",
                                   "int64", "uint8", "uint16", "uint32", "uint64"):
            dtype = str(e["dtype"])
        return np.array(vals, dtype=dtype).reshape(tuple(int(n) for n in e["shape"]))
    name = "".join(c if c.isalnum() else "_" for c in str(e.get("type", "object")))[:60] or "object"
    return type(name, (), {"__repr__": lambda self: f"<{name}>"})()


def _split_case(case):
    args, kwargs = case if (isinstance(case, tuple) and len(case) == 2 and
                            isinstance(case[1], dict)) else (case, {})
    if not isinstance(args, tuple):
        args = (args,)
    return args, dict(kwargs)
'''
_codec: dict = {}
exec(compile(CODEC, "<gradebook codec>", "exec"), _codec)
encode, decode, split_case = _codec["_enc"], _codec["_dec"], _codec["_split_case"]
