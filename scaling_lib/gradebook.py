"""Grade a folder of submitted exercise notebooks: ``python -m scaling_lib grade SUBMISSIONS_DIR``.

How a verdict is reached (nothing the student's code prints, defines or patches decides it):

1. The submission is matched to its chapter (by file name, else by its ``%%graded`` names) and
   compared with the exercise notebook generated from ``solutions/`` (the locked cells and the
   locked lines of each graded cell); edits are flagged. Its seed is the ``SEED = n`` literal of
   its locked set-up cell (or the instructor's assigned seed, ``--seeds``).
2. A copy runs in a fresh kernel (``sandbox``: own process session, memory limit, per-cell and
   per-notebook time limits). Before each graded cell the grader removes the student's answer
   name; after it, a probe cell sends back the *value* of the checker call's first argument
   (``answer``) or, for "implement" exercises, what the student's function returns on the
   exercise's cases (computed in the grader, run in the kernel with a per-case time limit). Values
   travel as tagged JSON, never pickle. A crash or a hang costs that exercise; the kernel is
   restarted, the locked set-up cells re-run, and grading goes on.
3. The grading process recomputes the expected value from the answer key (``scaling_lib.keys``)
   for the notebook's seed, with the draw and tolerance of the solutions notebook, and decides with
   :func:`scaling_lib.grading.assess`, the comparison the notebooks print.

So printing "PASS", redefining ``check``, patching numpy or the checker inside the kernel, editing
the locked lines or changing ``SEED`` earns nothing. What the tool cannot prevent: the keys are
public, so a student can compute an answer with ``key.some_exercise(p)`` (or import the key
module); ``flag_keys=True`` flags any use of the key module, ``__import__``, ``importlib`` or
``sys.modules`` in the student's own code. Such a scan is a heuristic (code can be obfuscated);
it catches the direct ways.
"""

from __future__ import annotations

import ast
import csv
import json
import re
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .exercises import BEGIN, END, STUB, graded_checks, make_exercise, normalize_solutions

VERDICTS = ("pass", "fail", "unanswered", "error")
SYMBOL = {"pass": "P", "fail": "F", "unanswered": "-", "error": "E"}
CASE_TIME_LIMIT = 10.0
_GRADED = re.compile(r"^%%graded\s+(\S+)")
_CHECK_NAME = re.compile(r"""\bname=["']([^"']+)["']""")
_SEED_LINE = re.compile(r"^(\s*SEED\s*=\s*)(-?\d+)", re.M)
_STEM = re.compile(r"(\d\d_[a-z0-9_]+)")

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

# The probe cells (kernel side). {nonce} prefixes the one line the grader reads.
_PROBE_VALUE = r'''
def _probe(g):
    import json
    try:
        v = eval({expr!r}, g)
    except BaseException as exc:
        return {{"missing": f"{{type(exc).__name__}}: {{str(exc)[:200]}}"}}
    return {{"value": _enc(v)}}
print({nonce!r} + __import__("json").dumps(_probe(__g)))
'''
_PROBE_FUNCTION = r'''
class _Late(BaseException):
    pass

def _probe(g):
    import json, signal
    try:
        fn = eval({expr!r}, g)
    except BaseException as exc:
        return {{"missing": f"{{type(exc).__name__}}: {{str(exc)[:200]}}"}}
    if not callable(fn):
        return {{"value": _enc(fn), "not_callable": True}}
    out = []
    def late(signum, frame):
        raise _Late
    for case in _dec(json.loads({cases!r})):
        args, kwargs = _split_case(case)
        signal.signal(signal.SIGALRM, late)
        signal.setitimer(signal.ITIMER_REAL, {limit!r})
        try:
            out.append({{"ok": _enc(fn(*args, **kwargs))}})
        except _Late:
            out.append({{"late": True}})
        except BaseException as exc:
            out.append({{"raised": type(exc).__name__, "text": str(exc)[:200]}})
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    return {{"cases": out}}
print({nonce!r} + __import__("json").dumps(_probe(__g)))
'''


def _probe_cell(template: str, **fields) -> str:
    """Wrap a probe so its helper names stay out of the student's namespace."""
    src = CODEC + template.format(**fields)
    return f"exec({src!r}, {{'__g': globals(), '__builtins__': __builtins__}})"


def _forget(name: str) -> str:
    return f"globals().pop({name!r}, None)"


# ---- The chapter: what a submission is compared with ------------------------------------------

@dataclass
class Exercise:
    name: str
    kind: str                    # "check" or "check_function"
    target: str                  # the checker call's first argument (`answer`, the function)
    locked: list                 # locked segments: lists of stripped lines, in order
    tolerance: dict
    unit: str = ""
    hint: str = ""
    forget: tuple = ()           # names the student's cell defines: removed before it runs


@dataclass
class Chapter:
    stem: str                    # "01_rooflines"
    solutions: object            # the solutions notebook (normalized)
    template: object             # the exercise notebook generated from it
    exercises: dict              # name -> Exercise, in notebook order
    checks: dict                 # name -> exercises.GradedCheck
    key_aliases: set
    _base: dict | None = None

    def base(self) -> dict:
        """The solutions' set-up namespace (imports, the key module), built once."""
        if self._base is None:
            from .exercises import exercise_namespace
            self._base = exercise_namespace(self.solutions, self.stem)
        return self._base

    def expected(self, name: str, seed: int):
        """The key's answer to exercise ``name`` at ``seed`` (check) or the reference and cases
        (check_function), computed here in the grading process."""
        c = self.checks[name]
        ns = dict(self.base(), SEED=seed)
        if c.kind == "check":
            if c.draw is not None:
                exec(compile(ast.Module([c.draw], []), name, "exec"), ns)
            return eval(compile(ast.Expression(c.arg(1, "expected")), name, "eval"), ns)
        exec(compile(ast.Module(list(c.before), []), name, "exec"), ns)
        ref = eval(compile(ast.Expression(c.arg(1, "reference")), name, "eval"), ns)
        cases = eval(compile(ast.Expression(c.arg(2, "cases")), name, "eval"), ns)
        return ref, list(cases)


def _lines(text: str) -> list[str]:
    out = [ln.rstrip() for ln in text.splitlines()]
    while out and not out[-1]:
        out.pop()
    return out


def _locked_segments(source: str, name: str) -> list[list[str]]:
    """The lines of a solutions graded cell outside its solution regions, as the exercise shows
    them (with the ``%%graded`` line first), split where a student region sits."""
    segs, cur, inside = [], [f"%%graded {name}"], False
    for ln in source.splitlines():
        if BEGIN.match(ln):
            segs.append(cur)
            cur, inside = [], True
        elif END.match(ln):
            inside = False
        elif not inside:
            cur.append(ln.rstrip())
    segs.append(cur)
    return segs


def _literal(call, key, default=""):
    for w in call.keywords:
        if w.arg == key:
            try:
                return ast.literal_eval(w.value)
            except ValueError:
                return default
    return default


def load_chapter(path: Path) -> Chapter:
    import nbformat

    sol = nbformat.read(path, as_version=4)
    normalize_solutions(sol)
    template = make_exercise(sol, path.name)
    checks = graded_checks(sol, path.name)
    exercises = {}
    for c in checks:
        target = c.arg(0, "answer" if c.kind == "check" else "fn")
        forget = [target.id] if isinstance(target, ast.Name) else []
        forget += [st.name for st in c.before if isinstance(st, ast.FunctionDef)]
        exercises[c.name] = Exercise(
            c.name, c.kind, ast.unparse(target),
            _locked_segments(sol.cells[c.cell].source, c.name), dict(c.tolerance),
            _literal(c.call, "unit"), _literal(c.call, "hint"), forget=tuple(dict.fromkeys(forget)))
    aliases = set()
    for cell in template.cells:
        if cell.cell_type == "code" and "graded" not in cell.metadata.get("tags", []):
            for m in re.finditer(r"from scaling_lib\.keys import \w+ as (\w+)|"
                                 r"import scaling_lib\.keys\.\w+ as (\w+)", cell.source):
                aliases.add(m.group(1) or m.group(2))
    return Chapter(path.stem, sol, template, exercises, {c.name: c for c in checks},
                   aliases or {"key"})


def course_root(root: str | Path | None = None) -> Path:
    """The folder holding ``solutions/``: ``root``, else this repository, else the current one."""
    tries = [Path(root)] if root else [Path(__file__).resolve().parent.parent, Path.cwd()]
    for r in tries:
        if (r / "solutions").is_dir() and list((r / "solutions").glob("*.ipynb")):
            return r
    raise ValueError(f"no solutions/*.ipynb under {', '.join(map(str, tries))}: the grader "
                     "recomputes answers from the course's solutions notebooks; give --course "
                     "ROOT, the folder of the course repository")


class Course:
    """The chapters of a course checkout, loaded on first use."""

    def __init__(self, root=None):
        self.root = course_root(root)
        self.paths = {p.stem: p for p in sorted((self.root / "solutions").glob("*.ipynb"))}
        self._loaded: dict = {}

    def chapter(self, stem: str) -> Chapter:
        if stem not in self._loaded:
            self._loaded[stem] = load_chapter(self.paths[stem])
        return self._loaded[stem]

    def identify(self, path: Path, cells) -> str | None:
        """The chapter of a submission: a chapter stem in its file name, else its graded names."""
        for m in _STEM.finditer(path.name.lower()):
            for stem in self.paths:
                if m.group(1).startswith(stem):
                    return stem
        names = {_graded_name(c) for c in cells} - {None}
        prefixes = {n.split(".")[0] for n in names}
        for stem in self.paths:
            if stem.split("_")[0].lstrip("0") in prefixes:
                return stem
        return None


# ---- Reading a submission ---------------------------------------------------------------------

def _graded_name(cell) -> str | None:
    if cell.get("cell_type") != "code":
        return None
    src = cell.get("source", "")
    m = _GRADED.match(src)
    if m:
        return m.group(1)
    names = _CHECK_NAME.findall(src)
    if names and re.search(r"\bcheck(_function)?\(", src):
        return names[-1]
    return None


def _normal(source: str) -> list[str]:
    return _lines(_SEED_LINE.sub(lambda m: m.group(1) + "<seed>", source))


def _match_segments(lines: list[str], segs: list[list[str]]) -> tuple[bool, set]:
    """Whether ``lines`` keep every locked segment in order (first at the top, last at the
    bottom); and the numbers (1-based) of the lines that are not locked: the student's."""
    segs = [_lines("\n".join(s)) if i == len(segs) - 1 else s for i, s in enumerate(segs)]
    locked, pos, ok = set(), 0, True
    for i, seg in enumerate(segs):
        n = len(seg)
        if not n:
            continue
        if i == 0:
            at = 0 if lines[:n] == seg else -1
        elif i == len(segs) - 1:
            at = len(lines) - n if len(lines) - n >= pos and lines[len(lines) - n:] == seg else -1
        else:
            at = next((j for j in range(pos, len(lines) - n + 1) if lines[j:j + n] == seg), -1)
        if at < 0:
            ok = False
            continue
        locked.update(range(at, at + n))
        pos = at + n
    return ok, {j + 1 for j in range(len(lines)) if j not in locked}


@dataclass
class Plan:
    """A submission read and compared with its chapter: what to run, what to flag."""

    cells: list    # [(kind, source, exercise name)]; kind "locked", "graded" or "added"
    seed: int | None
    flags: list
    student_code: dict            # where -> (source, set of line numbers that are the student's)
    missing: list                 # exercises without a graded cell


def plan_submission(nb, chapter: Chapter) -> Plan:
    flags: list = []
    tmpl = [c for c in chapter.template.cells if c.cell_type == "code"
            and "graded" not in c.metadata.get("tags", [])]
    wanted = [(_normal(c.source), c.source) for c in tmpl]
    cells, student_code, seen, seed_cells, loose_seeds = [], {}, set(), [], []
    ti = 0
    for number, c in enumerate(nb.cells, start=1):
        if c.get("cell_type") != "code":
            continue
        src = c.get("source", "")
        name = _graded_name(c)
        if name in chapter.exercises and name not in seen:
            seen.add(name)
            ex = chapter.exercises[name]
            ok, mine = _match_segments(_lines(src), ex.locked)
            if not ok:
                flags.append(f"{name}: locked lines of the graded cell were edited")
            cells.append(("graded", src, name))
            student_code[name] = (src, mine)
            continue
        norm = _normal(src)
        hit = next((j for j in range(ti, len(wanted)) if wanted[j][0] == norm), None)
        if hit is not None:
            for j in range(ti, hit):
                flags.append(f"locked cell edited or removed: `{_first(wanted[j][1])}`")
            ti = hit + 1
            cells.append(("locked", src, None))
            if _SEED_LINE.search(src):
                seed_cells.append(src)
        else:
            cells.append(("added", src, None))
            student_code[f"cell {number} (not in the exercise)"] = (
                src, set(range(1, len(_lines(src)) + 1)))
            if not seen and _SEED_LINE.search(src):
                loose_seeds.append(src)
    for j in range(ti, len(wanted)):
        flags.append(f"locked cell edited or removed: `{_first(wanted[j][1])}`")
    missing = [n for n in chapter.exercises if n not in seen]
    for n in missing:
        flags.append(f"{n}: its graded cell is missing")
    seed = None
    if seed_cells:
        seed = int(_SEED_LINE.search(seed_cells[0]).group(2))
    elif loose_seeds:  # the set-up cell was edited: take its SEED line, and say so
        seed = int(_SEED_LINE.search(loose_seeds[0]).group(2))
        flags.append(f"SEED = {seed} read from an edited set-up cell")
    else:
        flags.append("no `SEED = <integer>` line before the first exercise: the seed is unknown")
    return Plan(cells, seed, flags, student_code, missing)


def _first(src: str) -> str:
    lines = [ln for ln in src.splitlines() if ln.strip() and not ln.startswith("#")]
    text = lines[0].strip() if lines else src.strip()[:40]
    return text if len(text) <= 60 else text[:57] + "..."


# ---- Scanning the student's own code (always: tampering; on request: the answer key) ----------

_CHECKER_NAMES = {"check", "check_function", "draw", "assess", "run_graded", "print", "SEED"}
_MODULE_NAMES = {"np", "numpy", "math", "builtins", "sys", "grading", "scaling_lib", "hw", "rl",
                 "key", "keys", "IPython", "get_ipython"}


def _nodes_on(tree, lines: set):
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in lines:
            yield node


def scan(src: str, lines: set, key_aliases: set, flag_keys: bool) -> list[str]:
    """Suspicious things in the student's lines of a cell (set of 1-based line numbers)."""
    body = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in src.splitlines())
    found: list[str] = []
    try:
        tree = ast.parse(body)
        modules = _MODULE_NAMES | key_aliases | {
            (a.asname or a.name).split(".")[0] for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names}
    except SyntaxError:
        text = "\n".join(ln for i, ln in enumerate(body.splitlines(), 1) if i in lines)
        if "PASS" in text:
            found.append("writes the verdict marker PASS itself")
        if flag_keys and re.search(r"\b(" + "|".join(map(re.escape, key_aliases)) +
                                   r")\.|scaling_lib\.keys|__import__|importlib", text):
            found.append("uses the answer key (or imports modules dynamically)")
        return found
    for node in _nodes_on(tree, lines):
        targets = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if node.name in _CHECKER_NAMES:
                found.append(f"redefines `{node.name}`")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for a in node.names:
                if (a.asname or a.name) in _CHECKER_NAMES - {"SEED"}:
                    found.append(f"rebinds `{a.asname or a.name}` by an import")
            mod = node.module if isinstance(node, ast.ImportFrom) else None
            mods = [mod] if mod else [a.name for a in node.names]
            names = [a.name for a in node.names]
            if flag_keys and (any(m and m.startswith("scaling_lib.keys") for m in mods) or
                              (mod == "scaling_lib" and "keys" in names) or
                              any(m and m.startswith("importlib") for m in mods)):
                found.append("imports the answer keys (or importlib)")
            if any(m in ("scaling_lib.grading", "scaling_lib.exercises") for m in mods):
                found.append("imports the checker's module")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id in ("setattr", "delattr"):
                found.append(f"calls `{node.func.id}` (patching an object?)")
            if flag_keys and node.func.id in ("__import__", "exec", "eval"):
                found.append(f"calls `{node.func.id}` (may load the answer key)")
        elif (isinstance(node, ast.Constant) and isinstance(node.value, str)
              and "PASS" in node.value):
            found.append("writes the verdict marker PASS itself")
        elif flag_keys and isinstance(node, ast.Name) and node.id in key_aliases:
            found.append(f"uses the answer key module (`{node.id}`)")
        elif flag_keys and isinstance(node, ast.Attribute) and node.attr in ("keys", "modules") \
                and isinstance(node.value, ast.Name) and node.value.id in ("scaling_lib", "sys"):
            found.append(f"reaches `{node.value.id}.{node.attr}` (may load the answer key)")
        for t in targets:
            if isinstance(t, ast.Name) and t.id in _CHECKER_NAMES:
                found.append("reassigns `SEED`" if t.id == "SEED" else f"redefines `{t.id}`")
            elif isinstance(t, ast.Attribute):
                base = t.value
                while isinstance(base, ast.Attribute):
                    base = base.value
                if isinstance(base, ast.Name) and base.id in modules:
                    found.append(f"patches `{ast.unparse(t)}`")
    return list(dict.fromkeys(found))


# ---- Grading one notebook ---------------------------------------------------------------------

@dataclass
class Result:
    notebook: str
    student: str
    chapter: str | None
    seed: int | None
    exercises: dict = field(default_factory=dict)    # name -> verdict
    messages: dict = field(default_factory=dict)     # name -> (message, hint)
    flags: list = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> int:
        return sum(v == "pass" for v in self.exercises.values())

    @property
    def total(self) -> int:
        return len(self.exercises)

    def record(self) -> dict:
        return {"notebook": self.notebook, "student": self.student, "chapter": self.chapter,
                "seed": self.seed, "exercises": dict(self.exercises), "passed": self.passed,
                "total": self.total, "flags": list(self.flags),
                "seconds": round(self.seconds, 2)}


def _payload(text: str, nonce: str):
    for line in reversed(text.splitlines()):
        if line.startswith(nonce):
            try:
                return json.loads(line[len(nonce):])
            except ValueError:
                return None
    return None


def verdict_value(ex: Exercise, payload, expected) -> tuple[str, str]:
    """(verdict, message) for a ``check`` exercise from the probe's payload."""
    from .grading import FAIL, NOT_SOLVED, assess

    if not payload or "value" not in payload:
        why = (payload or {}).get("missing", "no answer came back")
        return "error", f"no `{ex.target}` after the cell ran ({why})"
    try:
        answer = decode(payload["value"])
    except Exception as exc:
        return "error", f"the answer could not be read back ({type(exc).__name__})"
    v, msg = assess(answer, expected, unit=ex.unit, **ex.tolerance)
    return {NOT_SOLVED: "unanswered", FAIL: "fail"}.get(v, "pass"), msg


def verdict_function(ex: Exercise, payload, reference, cases) -> tuple[str, str]:
    """(verdict, message) for a ``check_function`` exercise, as ``check_function`` decides it."""
    from .grading import FAIL, NOT_SOLVED, assess

    if not payload or "cases" not in payload and "not_callable" not in payload:
        why = (payload or {}).get("missing", "no results came back")
        return "error", f"no function `{ex.target}` after the cell ran ({why})"
    if payload.get("not_callable"):
        return "fail", f"expected a function, got {payload['value'].get('t')}"
    tol = {"rtol": ex.tolerance.get("rtol", 1e-6), "atol": ex.tolerance.get("atol", 0.0)}
    got_cases = payload["cases"]
    if len(got_cases) != len(cases):
        return "error", "the function's results did not all come back"
    for i, (case, got) in enumerate(zip(cases, got_cases), start=1):
        args, kwargs = split_case(case)
        if "late" in got:
            return "fail", (f"case {i} took longer than {CASE_TIME_LIMIT:g} s: does a loop "
                            "never end?")
        if "raised" in got:
            if got["raised"] == "NotImplementedError":
                return "unanswered", "replace the `raise NotImplementedError` line with your code"
            return "fail", f"case {i}: your function raised {got['raised']}: {got['text']}"
        try:
            value = decode(got["ok"])
        except Exception as exc:
            return "error", f"case {i}: the result could not be read back ({type(exc).__name__})"
        if value is None:
            return "unanswered", "the function returned None; return your result"
        v, msg = assess(value, reference(*args, **kwargs), **tol)
        if v == NOT_SOLVED:
            return "unanswered", msg
        if v == FAIL:
            return "fail", f"case {i}: {msg}"
    return "pass", f"{len(cases)} of {len(cases)} cases match"


def grade_notebook(path: Path, rel: str, course: Course, *, cell_timeout: float = 60.0,
                   notebook_timeout: float = 600.0, memory_bytes: int | None = 4 * 2**30,
                   assigned_seed: int | None = None, flag_keys: bool = False) -> Result:
    """Grade one submitted notebook (a copy runs; ``path`` is only read)."""
    import nbformat

    from .sandbox import Kernel

    start = time.monotonic()
    res = Result(rel, student_of(rel), None, None)
    try:
        nb = nbformat.reads(path.read_text(encoding="utf-8", errors="replace"), as_version=4)
    except Exception as exc:
        res.flags.append(f"unreadable notebook ({type(exc).__name__}): nothing graded")
        res.seconds = time.monotonic() - start
        return res
    stem = course.identify(path, nb.cells)
    if stem is None:
        res.flags.append("cannot tell which chapter this is (no chapter name in the file name, "
                         "no %%graded cells): nothing graded")
        res.seconds = time.monotonic() - start
        return res
    chapter = course.chapter(stem)
    res.chapter = stem
    plan = plan_submission(nb, chapter)
    res.flags += plan.flags
    seed = plan.seed
    if assigned_seed is not None:
        if seed != assigned_seed:
            res.flags.append(f"seed {seed} differs from the assigned seed {assigned_seed}: "
                             "graded at the assigned seed")
        seed = assigned_seed
    res.seed = seed
    for where, (src, lines) in plan.student_code.items():
        for what in scan(src, lines, chapter.key_aliases, flag_keys):
            res.flags.append(f"{where}: {what}")
    for n in chapter.exercises:
        res.exercises[n] = "unanswered" if n in plan.missing else "error"
        res.messages[n] = ("the graded cell is missing" if n in plan.missing else
                           "the cell did not run", chapter.exercises[n].hint)
    if seed is None:
        res.seconds = time.monotonic() - start
        return res

    deadline = start + notebook_timeout
    with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
        shutil.copy(path, Path(tmp) / "submission.ipynb")
        kernel = Kernel(tmp, memory_bytes=memory_bytes, env_path=str(course.root))
        try:
            kernel.start()
            prelude: list[str] = []
            for kind, src, name in plan.cells:
                left = deadline - time.monotonic()
                if left <= 0:
                    res.flags.append("the notebook ran past its time limit "
                                     f"({notebook_timeout:g} s): the rest was not graded")
                    break
                if kind != "graded":
                    out = kernel.run(src, min(cell_timeout, left))
                    if kind == "locked":
                        prelude.append(src)
                    if out.died or out.timed_out:
                        label = "a locked cell" if kind == "locked" else "an added cell"
                        what = ("ran past the cell time limit" if out.timed_out else
                                "crashed the kernel")
                        res.flags.append(f"{label} {what}")
                        if out.died:
                            _revive(kernel, prelude, cell_timeout, res)
                    continue
                ex = chapter.exercises[name]
                for gone in ex.forget:
                    kernel.run(_forget(gone), cell_timeout)
                out = kernel.run(src, min(cell_timeout, left))
                if out.died or (out.timed_out and out.notes):
                    res.exercises[name] = "error"
                    why = ("ran past the cell time limit and ignored the interrupt"
                           if out.timed_out else "stopped the kernel (exit, crash or memory)")
                    res.messages[name] = (f"the cell {why}", ex.hint)
                    res.flags.append(f"{name}: the cell {why}; the kernel was restarted")
                    _revive(kernel, prelude, cell_timeout, res)
                    continue
                if out.timed_out:
                    res.flags.append(f"{name}: the cell ran past the {cell_timeout:g} s limit "
                                     "and was interrupted")
                res.exercises[name], msg = _probe(kernel, ex, chapter, seed, cell_timeout)
                if out.timed_out and res.exercises[name] == "error":
                    msg = f"the cell ran past the {cell_timeout:g} s limit (interrupted)"
                res.messages[name] = (msg, ex.hint)
                if not kernel.alive():
                    _revive(kernel, prelude, cell_timeout, res)
        except RuntimeError as exc:
            res.flags.append(str(exc))
        finally:
            kernel.stop()
    res.seconds = time.monotonic() - start
    return res


def _revive(kernel, prelude: list[str], timeout: float, res: Result) -> None:
    """A fresh kernel with the locked set-up cells run again, so later exercises can go on."""
    kernel.restart()
    for src in prelude:
        kernel.run(src, timeout)


def _probe(kernel, ex: Exercise, chapter: Chapter, seed: int, timeout: float):
    nonce = "@@grader-" + secrets.token_hex(8) + "@@"
    try:
        expected = chapter.expected(ex.name, seed)
    except Exception as exc:  # the key itself failed: the course's bug, not the student's
        return "error", f"the answer key raised {type(exc).__name__}: {exc}"
    if ex.kind == "check":
        out = kernel.run(_probe_cell(_PROBE_VALUE, expr=ex.target, nonce=nonce), timeout)
        return verdict_value(ex, _payload(out.text, nonce), expected)
    reference, cases = expected
    cases_json = json.dumps(encode(cases))
    budget = CASE_TIME_LIMIT * len(cases) + timeout
    out = kernel.run(_probe_cell(_PROBE_FUNCTION, expr=ex.target, nonce=nonce, cases=cases_json,
                                 limit=CASE_TIME_LIMIT), budget)
    if out.died:
        return "error", "the function stopped the kernel (exit, crash or memory)"
    return verdict_function(ex, _payload(out.text, nonce), reference, cases)


# ---- A folder of submissions, and the reports ---------------------------------------------------

def read_seeds(path) -> dict:
    """``student,seed`` rows (a header row is allowed) -> {student: seed}."""
    seeds = {}
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if len(row) < 2 or not row[0].strip() or row[0].strip().lower() == "student":
                continue
            try:
                seeds[row[0].strip()] = int(row[1])
            except ValueError:
                raise ValueError(f"{path}: seed {row[1]!r} of {row[0]!r} is not an integer; "
                                 "write rows as student,seed") from None
    return seeds


def student_of(rel: str) -> str:
    """The student a submission belongs to: its first folder (``alice/07_mfu.ipynb``), else its
    file name without the chapter (``bob_07_mfu.ipynb`` -> ``bob``), else the whole name.

    >>> student_of("alice/07_mfu.ipynb"), student_of("bob_07_mfu.ipynb"), student_of("07_mfu.ipynb")
    ('alice', 'bob', '07_mfu')
    """
    parts = Path(rel).parts
    if len(parts) > 1:
        return parts[0]
    stem = Path(rel).stem
    return re.sub(r"[_\-. ]*\d\d_[A-Za-z0-9_]*$", "", stem) or stem


def find_submissions(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.ipynb")
                  if ".ipynb_checkpoints" not in p.parts and not p.name.startswith("."))


def grade_folder(folder, *, course=None, cell_timeout=60.0, notebook_timeout=600.0,
                 memory_bytes=4 * 2**30, seeds=None, flag_keys=False, progress=None) -> list:
    """Grade every ``*.ipynb`` under ``folder`` (sorted); returns one :class:`Result` each."""
    folder = Path(folder)
    course = course if isinstance(course, Course) else Course(course)
    results = []
    for path in find_submissions(folder):
        rel = path.relative_to(folder).as_posix()
        student = student_of(rel)
        r = grade_notebook(path, rel, course, cell_timeout=cell_timeout,
                           notebook_timeout=notebook_timeout, memory_bytes=memory_bytes,
                           assigned_seed=(seeds or {}).get(student), flag_keys=flag_keys)
        results.append(r)
        if progress:
            progress(r)
    return results


def _order(name: str):
    return tuple(int(x) if x.isdigit() else x for x in re.split(r"[.]", name))


def exercise_names(results) -> list[str]:
    return sorted({n for r in results for n in r.exercises}, key=_order)


def write_csv(results, path) -> None:
    names = exercise_names(results)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["student", "notebook", "chapter", "seed", *names, "passed", "total",
                    "seconds", "flags"])
        for r in results:
            w.writerow([r.student, r.notebook, r.chapter or "", "" if r.seed is None else r.seed,
                        *[r.exercises.get(n, "") for n in names], r.passed, r.total,
                        f"{r.seconds:.1f}", "; ".join(r.flags)])


def table(results) -> str:
    """The printed gradebook: one row per notebook, one letter per exercise."""
    head = ["student", "chapter", "seed", "exercises", "score", "time", "flags"]
    rows = [head]
    for r in results:
        marks = " ".join(f"{n}:{SYMBOL[v]}" for n, v in r.exercises.items())
        rows.append([r.student, r.chapter or "?", "" if r.seed is None else str(r.seed),
                     marks or "(nothing graded)", f"{r.passed}/{r.total}", f"{r.seconds:.1f} s",
                     str(len(r.flags))])
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("P pass, F fail, - unanswered, E error")
    flagged = [(r.student, r.notebook, f) for r in results for f in r.flags]
    if flagged:
        lines.append("flags:")
        lines += [f"  {nb}: {f}" for _, nb, f in flagged]
    return "\n".join(lines)


def write_feedback(results, folder) -> list[Path]:
    """One Markdown file per notebook: each exercise's verdict, the checker's message and hint."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for r in results:
        name = re.sub(r"[^A-Za-z0-9_.-]", "_", r.notebook.removesuffix(".ipynb").replace("/", "__"))
        lines = [f"# Feedback: {r.notebook}", "",
                 f"Chapter {r.chapter or '?'}, seed {r.seed}: {r.passed} of {r.total} passed.", ""]
        for n, v in r.exercises.items():
            msg, hint = r.messages.get(n, ("", ""))
            lines.append(f"- **{n}** {v.upper()}: {msg}")
            if hint and v != "pass":
                lines.append(f"  - hint: {hint}")
        if r.flags:
            lines += ["", "Notes from the grader:"] + [f"- {f}" for f in r.flags]
        p = folder / f"{name}.md"
        p.write_text("\n".join(lines) + "\n")
        written.append(p)
    return written


def plot_pass_rates(results, path) -> None:
    """A bar chart of the share of notebooks passing each exercise (PNG)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = exercise_names(results)
    rates = []
    for n in names:
        graded = [r.exercises[n] for r in results if n in r.exercises]
        rates.append(sum(v == "pass" for v in graded) / len(graded) if graded else 0.0)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.45 * len(names) + 1.5), 3.2))
    ax.bar(range(len(names)), [100 * x for x in rates], color="tab:blue")
    ax.set_xticks(range(len(names)), names, rotation=90 if len(names) > 20 else 0)
    ax.set_ylim(0, 100)
    ax.set_ylabel("notebooks passing (%)")
    ax.set_xlabel("exercise")
    ax.set_title(f"Pass rate per exercise ({sum(bool(r.exercises) for r in results)} notebooks)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


__all__ = ["Course", "Chapter", "Exercise", "Result", "grade_notebook", "grade_folder",
           "plan_submission", "scan", "write_csv", "write_feedback", "table", "plot_pass_rates",
           "read_seeds", "find_submissions", "student_of", "exercise_names", "VERDICTS", "CODEC"]


def catalog(root=None) -> list[dict]:
    """What each chapter's exercises test: one row per graded exercise of ``solutions/``.

    Columns: chapter, exercise, title (the heading above the cell), kind ("number" or
    "function"), parametric (draws from the seed), tolerance, and the wrong methods the answer
    key lists (the slips the tolerance is chosen to catch).
    """
    import types

    course = Course(root)
    rows = []
    for stem in course.paths:
        ch = course.chapter(stem)
        wrong = {}
        for mod in ch.base().values():  # the answer key's listed wrong methods
            if isinstance(mod, types.ModuleType):
                wrong.update(getattr(mod, "WRONG_METHODS", {}))
        titles, last = {}, ""
        for cell in ch.solutions.cells:
            if cell.cell_type == "markdown" and cell.source.startswith("#"):
                last = cell.source.splitlines()[0].lstrip("#").strip()
            elif cell.cell_type == "code" and "graded" in cell.metadata.get("tags", []):
                name = _graded_name({"cell_type": "code", "source": cell.source})
                titles[name] = last
        for name, ex in ch.exercises.items():
            tol = ", ".join(f"{k}={v:g}" for k, v in ex.tolerance.items()) or "default"
            rows.append({"chapter": stem, "exercise": name,
                         "title": titles.get(name, "").removeprefix(name).strip(),
                         "kind": "number" if ex.kind == "check" else "function",
                         "parametric": "yes" if ch.checks[name].draw is not None else "no",
                         "tolerance": tol,
                         "wrong methods caught": "; ".join(wrong.get(name, {})) or "-"})
    return rows
