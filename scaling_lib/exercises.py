"""Generate the exercise notebooks from the solution notebooks (the one source of truth).

    python -m scaling_lib.exercises build          # write exercises/ from solutions/
    python -m scaling_lib.exercises build --check  # exit 1 if exercises/ is stale
    python -m scaling_lib.exercises run solutions/*.ipynb  # re-execute each, store outputs;
                                                           # exit 1 if any notebook failed

Marking a solution notebook:

- In a code cell, the lines between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` are the solution.
  In the exercise they are replaced by the region's ``# STUB: <code>`` lines (uncommented), or,
  when there are none and the region is indented (a function body), by
  ``raise NotImplementedError``. A top-level region must give its stub (``# STUB: answer = None``).
- A markdown cell tagged ``solution`` (the worked answer) is left out of the exercise.
- A cell that calls the checker is tagged ``graded``. In the solutions the build adds
  ``nbval-check-output`` (nbval compares its stored PASS lines) and ``hide-input`` to cells with a
  solution region (the book shows them collapsed).
- In the first markdown cell, "Solutions" becomes "Exercises".
- In the exercise, each graded cell starts with ``%%graded NAME`` (NAME from its checker call's
  ``name=``) and the cell importing ``scaling_lib.grading`` also loads that extension, so an
  exception in the student's code is reported as a FAIL line and "Run all" keeps going.

Tolerances: :func:`audit_methods` evaluates each graded ``check(...)`` of a solutions notebook over
many seeds and checks that the answer key's ``WRONG_METHODS`` FAIL and its ``ACCEPTED_METHODS``
PASS at the tolerance the call sets (``tests/test_wrong_methods.py`` runs it on every notebook).

Needs ``nbformat`` (and ``nbclient`` for ``run``), imported lazily.
"""

from __future__ import annotations

import argparse
import ast
import copy
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

BEGIN = re.compile(r"^(\s*)# BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*# END SOLUTION\s*$")
STUB = re.compile(r"^\s*# STUB: ?(.*)$")
NOT_IMPLEMENTED = 'raise NotImplementedError("write your code here")'
GRADING_IMPORT = "from scaling_lib.grading import"
LOAD_EXT = "%load_ext scaling_lib.grading"
CHECK_NAME = re.compile(r"""\bname=["']([^"']+)["']""")


class MarkupError(ValueError):
    """A solution notebook's markers are malformed."""


def strip_solutions(source: str, where: str = "cell") -> tuple[str, bool]:
    """Replace every solution region in ``source``; return (new source, had a region).

    >>> src = "x = 3\\n# BEGIN SOLUTION\\nanswer = x * 2\\n# STUB: answer = None\\n# END SOLUTION\\n"
    >>> print(strip_solutions(src)[0])
    x = 3
    answer = None
    <BLANKLINE>
    """
    out: list[str] = []
    lines = source.splitlines(keepends=True)
    i, found = 0, False
    while i < len(lines):
        m = BEGIN.match(lines[i].rstrip("\n"))
        if not m:
            if END.match(lines[i].rstrip("\n")):
                raise MarkupError(f"{where}: '# END SOLUTION' without '# BEGIN SOLUTION'")
            out.append(lines[i])
            i += 1
            continue
        found, indent = True, m.group(1)
        stubs, j = [], i + 1
        while j < len(lines) and not END.match(lines[j].rstrip("\n")):
            s = STUB.match(lines[j].rstrip("\n"))
            if s:
                stubs.append(indent + s.group(1) + "\n")
            j += 1
        if j == len(lines):
            raise MarkupError(f"{where}: '# BEGIN SOLUTION' without '# END SOLUTION'")
        if not stubs:
            if not indent:
                raise MarkupError(f"{where}: a top-level solution region needs a '# STUB: ...' "
                                  "line (for example '# STUB: answer = None')")
            stubs = [indent + NOT_IMPLEMENTED + "\n"]
        out.extend(stubs)
        i = j + 1
    return "".join(out), found


def _tags(cell) -> list:
    return cell.setdefault("metadata", {}).setdefault("tags", [])


def _set_tag(cell, tag: str, on: bool):
    tags = _tags(cell)
    if on and tag not in tags:
        tags.append(tag)
    if not on and tag in tags:
        tags.remove(tag)
    if not tags:
        cell["metadata"].pop("tags")


def normalize_solutions(nb) -> None:
    """Add the tags the solution notebook needs (in place): see the module docstring."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        _, has_region = strip_solutions(cell.source)
        graded = "graded" in cell.get("metadata", {}).get("tags", [])
        _set_tag(cell, "nbval-check-output", graded)
        _set_tag(cell, "hide-input", has_region)


def make_exercise(nb, name: str = "notebook"):
    """The exercise notebook for solution notebook ``nb`` (a new notebook; ``nb`` is unchanged)."""
    ex = copy.deepcopy(nb)
    cells = []
    first_md = True
    for k, cell in enumerate(ex.cells):
        tags = cell.get("metadata", {}).get("tags", [])
        if cell.cell_type == "markdown":
            if "solution" in tags:
                continue
            if first_md:
                cell.source = cell.source.replace("Solutions", "Exercises")
                first_md = False
        if cell.cell_type == "code":
            cell.source, _ = strip_solutions(cell.source, f"{name} cell {k}")
            if "graded" in tags:
                names = CHECK_NAME.findall(cell.source)  # the checker call is last
                cell.source = f"%%graded {names[-1] if names else 'exercise'}\n" + cell.source
            elif GRADING_IMPORT in cell.source and LOAD_EXT not in cell.source:
                cell.source = LOAD_EXT + "\n" + cell.source
            cell.outputs = []
            cell.execution_count = None
            for tag in ("nbval-check-output", "hide-input", "hide-output"):
                _set_tag(cell, tag, False)
        cell.get("metadata", {}).pop("execution", None)
        cells.append(cell)
    ex.cells = cells
    ex.metadata.pop("widgets", None)
    return ex


def _dumps(nb) -> str:
    import nbformat

    return nbformat.writes(nb) + "\n"


def build(root: Path, check: bool = False) -> list[str]:
    """Regenerate exercises/ from solutions/ under ``root``; return the stale files' names."""
    import nbformat

    stale = []
    (root / "exercises").mkdir(exist_ok=True)
    for src in sorted((root / "solutions").glob("*.ipynb")):
        nb = nbformat.read(src, as_version=4)
        before = _dumps(nb)
        normalize_solutions(nb)
        sol_text = _dumps(nb)
        ex_text = _dumps(make_exercise(nb, src.name))
        dst = root / "exercises" / src.name
        for path, text, old in ((src, sol_text, before),
                                (dst, ex_text, dst.read_text() if dst.exists() else None)):
            if text != old:
                stale.append(str(path.relative_to(root)))
                if not check:
                    path.write_text(text)
    return stale


def _first_line(cell) -> str:
    lines = [ln for ln in cell.source.splitlines() if ln.strip()]
    text = lines[0].strip() if lines else ""
    return text if len(text) <= 60 else text[:57] + "..."


def _execute(path: Path, timeout: int) -> str | None:
    """Execute one notebook in place; None when every cell ran, else what went wrong and where."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    try:
        nb = nbformat.read(path, as_version=4)
    except Exception as exc:  # a missing or unreadable file is reported like any other failure
        return f"cannot read it: {type(exc).__name__}: {exc}"
    at: dict = {}

    def where() -> str:
        if "index" not in at:
            return "before the first cell"
        k = at["index"]
        return f"cell {k + 1} of {len(nb.cells)} (`{_first_line(nb.cells[k])}`)"

    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(path.parent)}},
                            on_cell_start=lambda cell, cell_index: at.update(index=cell_index))
    try:
        client.execute()
    except CellExecutionError as exc:
        return f"{where()} raised {exc.ename}: {exc.evalue}"
    except Exception as exc:  # a dead kernel (exit()), a timeout, a kernel that would not start
        first = (str(exc).strip().splitlines() or [""])[0]
        return f"{where()}: {type(exc).__name__}: {first}"
    for cell in nb.cells:
        cell.get("metadata", {}).pop("execution", None)
    path.write_text(_dumps(nb))
    return None


def run(paths: list[Path], timeout: int = 600) -> list[str]:
    """Execute notebooks in place (fresh kernel, cwd = the notebook's folder), storing outputs.

    Every notebook is run, whatever happened to the ones before it, and reported on one line:
    ``ok`` or ``error`` with the cell and the exception. A notebook that fails is left as it was.
    Returns one message per failed notebook (empty when all ran).
    """
    import time

    failures = []
    for path in map(Path, paths):
        start = time.monotonic()
        error = _execute(path, timeout)
        if error:
            failures.append(f"{path}: {error}")
            print(f"error  {path}: {error}", flush=True)
        else:
            print(f"ok     {path} ({time.monotonic() - start:.0f} s)", flush=True)
    if failures:
        print(f"{len(failures)} of {len(paths)} notebooks failed", flush=True)
    return failures


# ---- Auditing tolerances: do the listed wrong methods FAIL and the accepted ones PASS? ---------
#
# The protocol (tests/test_wrong_methods.py enforces it): the tolerance of an exercise is the
# literal rtol=/atol= of its check(...) call in the solutions notebook; the notebook's answer-key
# module may define
#   WRONG_METHODS = {"3.7": {"padding on D only": fn, ...}, ...}
#   ACCEPTED_METHODS = {"7.12": {"the chapter's 4/3 rule": fn}}
# where fn(p) takes the drawn parameters p of the exercise (fn() for an exercise that draws none).


@dataclass(frozen=True)
class GradedCheck:
    """One graded cell of a solutions notebook, parsed: its draw and its final checker call."""

    name: str                      # the checker call's name=
    cell: int                      # index of the cell in the notebook
    kind: str                      # "check" or "check_function"
    call: ast.Call                 # the checker call itself
    before: tuple = ()             # the cell's statements before the call (check_function cells)
    draw: ast.stmt | None = None   # the `p = draw(SEED, ...)` statement, if any
    param: str | None = None       # the name it assigns (p)
    tolerance: dict = field(default_factory=dict)   # the literal rtol=/atol= given

    def arg(self, i: int, keyword: str) -> ast.expr:
        """The call's ``i``-th positional argument, or its ``keyword=`` argument."""
        if len(self.call.args) > i:
            return self.call.args[i]
        return next(w.value for w in self.call.keywords if w.arg == keyword)


def _code_only(source: str) -> str:
    """``source`` with IPython magics and shell lines blanked (line numbers kept)."""
    return "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln
                     for ln in source.splitlines())


def _is_call_to(node, names: tuple[str, ...]) -> bool:
    return (isinstance(node, ast.Call) and
            ((isinstance(node.func, ast.Name) and node.func.id in names) or
             (isinstance(node.func, ast.Attribute) and node.func.attr in names)))


def graded_checks(nb, where: str = "notebook") -> list[GradedCheck]:
    """Every graded cell's draw and final ``check``/``check_function`` call, parsed with ``ast``.

    Raises MarkupError for a graded cell without a checker call, a call without its expected
    value (reference function and cases), or a tolerance that is not a literal number.
    """
    out = []
    for k, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or "graded" not in cell.get("metadata", {}).get("tags", []):
            continue
        body = ast.parse(_code_only(cell.source)).body
        calls = [i for i, st in enumerate(body) if isinstance(st, ast.Expr) and
                 _is_call_to(st.value, ("check", "check_function"))]
        if not calls:
            raise MarkupError(f"{where} cell {k}: a graded cell must end with check(...) or "
                              "check_function(...)")
        call = body[calls[-1]].value
        kw = {w.arg: w.value for w in call.keywords if w.arg}
        try:
            name = ast.literal_eval(kw["name"])
        except (KeyError, ValueError):
            raise MarkupError(f"{where} cell {k}: the checker call needs a literal name=") from None
        kind = call.func.id if isinstance(call.func, ast.Name) else call.func.attr
        tol = {}
        for key in ("rtol", "atol"):
            if key in kw:
                try:
                    tol[key] = ast.literal_eval(kw[key])
                except ValueError:
                    tol[key] = None
                if isinstance(tol[key], bool) or not isinstance(tol[key], (int, float)):
                    raise MarkupError(f"{where} {name}: {key}= must be a literal number, got "
                                      f"`{ast.unparse(kw[key])}`")
        needed = (("answer", "expected") if kind == "check" else
                  ("fn", "reference", "cases"))
        if len(call.args) + len(set(needed[len(call.args):]) & set(kw)) < len(needed):
            raise MarkupError(f"{where} {name}: {kind}({', '.join(needed)}, ...) needs all of "
                              "its arguments")
        draws = [st for st in body[:calls[-1]] if isinstance(st, ast.Assign)
                 and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name)
                 and _is_call_to(st.value, ("draw",))]
        draw = draws[-1] if draws else None
        out.append(GradedCheck(name, k, kind, call,
                               tuple(body[:calls[-1]]) if kind == "check_function" else (),
                               draw, draw.targets[0].id if draw else None, tol))
    return out


def exercise_namespace(nb, where: str = "notebook") -> dict:
    """The names a graded cell sees: the code cells before the first graded one, run in order.

    The first code cell (the shared set-up cell that installs the course) and IPython magics are
    skipped.
    """
    ns: dict = {"__name__": "__exercise__"}
    code = [k for k, c in enumerate(nb.cells) if c.cell_type == "code"]
    for k in code[1:]:
        cell = nb.cells[k]
        if "graded" in cell.get("metadata", {}).get("tags", []):
            break
        exec(compile(_code_only(cell.source), f"{where} cell {k}", "exec"), ns)
    return ns


def _methods(ns: dict) -> tuple[dict, dict]:
    """WRONG_METHODS and ACCEPTED_METHODS of the modules imported in ``ns`` (the answer key)."""
    import types

    wrong, accepted = {}, {}
    for mod in ns.values():
        if isinstance(mod, types.ModuleType):
            wrong.update(getattr(mod, "WRONG_METHODS", {}))
            accepted.update(getattr(mod, "ACCEPTED_METHODS", {}))
    return wrong, accepted


def listed_methods(path: Path) -> tuple[dict, dict]:
    """(WRONG_METHODS, ACCEPTED_METHODS) of the answer key that solutions notebook ``path`` uses."""
    import nbformat

    return _methods(exercise_namespace(nbformat.read(path, as_version=4), Path(path).name))


def _apply(fn, p, drawn: bool):
    """A method's answer: fn(p), or fn() for an exercise that draws nothing (when fn takes none)."""
    import inspect

    if not drawn:
        try:
            inspect.signature(fn).bind()
        except (TypeError, ValueError):  # it wants an argument (or hides its signature)
            pass
        else:
            return fn()
    return fn(p)


def _audit_check(c: GradedCheck, base: dict, methods: list, seeds, where: str,
                 max_same: float) -> list[str]:
    """Problems of one ``check(...)`` exercise: its key and its methods over ``seeds``."""
    from .grading import FAIL, PASS, assess

    label_of = f"{where} {c.name}"
    draw_code = compile(ast.Module([c.draw], []), label_of, "exec") if c.draw else None
    want_code = compile(ast.Expression(c.arg(1, "expected")), label_of, "eval")
    stats = {label: {"bad": 0, "same": 0, "first": None} for _, label, _ in methods}
    problems, key_problem = [], None
    runs = list(seeds) if draw_code else [None]
    for seed in runs:
        ns = dict(base, SEED=seed)
        try:
            if draw_code:
                exec(draw_code, ns)
            p = ns[c.param] if c.param else None
            want = eval(want_code, ns)
            verdict, msg = assess(want, want, **c.tolerance)
        except Exception as exc:
            key_problem = key_problem or (f"{label_of}: the key raised {type(exc).__name__}: "
                                          f"{exc} at seed {seed}")
            continue
        if verdict != PASS:
            key_problem = key_problem or (f"{label_of}: the key's own answer {want!r} does not "
                                          f"pass at seed {seed}: {msg}")
        for kind, label, fn in methods:
            st = stats[label]
            try:
                got = _apply(fn, p, c.draw is not None)
            except Exception as exc:
                st["bad"] += 1
                st["first"] = st["first"] or (seed, p, f"raised {type(exc).__name__}: {exc}")
                continue
            if kind == "wrong" and assess(got, want, rtol=1e-12)[0] == PASS:
                st["same"] += 1
                continue
            verdict, msg = assess(got, want, **c.tolerance)
            if verdict != (FAIL if kind == "wrong" else PASS):
                st["bad"] += 1
                st["first"] = st["first"] or (seed, p, f"gives {got!r}, the key {want!r}; "
                                              f"the checker says {verdict}: {msg}")
    if key_problem:
        problems.append(key_problem)
    tol_text = ", ".join(f"{k}={v:g}" for k, v in c.tolerance.items()) or "default tolerance"
    for kind, label, _ in methods:
        st, n = stats[label], len(runs)
        head = f"{label_of}: {kind} method {label!r}"
        if st["bad"]:
            seed, p, what = st["first"]
            should = "FAIL" if kind == "wrong" else "PASS"
            problems.append(f"{head} does not {should} in {st['bad']} of {n} seeds "
                            f"({tol_text}); first at seed {seed} ({p!r}): it {what}")
        if kind == "wrong" and st["same"] > max_same * n:
            problems.append(f"{head} equals the key's answer in {st['same']} of {n} seeds: "
                            "the exercise cannot tell it apart from the right method")
    return problems


def _audit_function(c: GradedCheck, base: dict, methods: list, where: str) -> list[str]:
    """Problems of one ``check_function(...)`` exercise: each method stands in for the student's
    function and is run by the real ``check_function`` on the cell's cases."""
    import contextlib
    import io

    from .grading import FAIL, PASS, check_function

    label_of = f"{where} {c.name}"
    ns = dict(base)
    try:
        exec(compile(ast.Module(list(c.before), []), label_of, "exec"), ns)
        reference = eval(compile(ast.Expression(c.arg(1, "reference")), label_of, "eval"), ns)
        cases = eval(compile(ast.Expression(c.arg(2, "cases")), label_of, "eval"), ns)
    except Exception as exc:
        return [f"{label_of}: the cell's reference or cases raised {type(exc).__name__}: {exc}"]

    def verdict(fn, **tol) -> tuple[str, str]:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            check_function(fn, reference, cases, name=c.name, **tol)
        line = buf.getvalue().strip().splitlines()[0]
        return line.split(":")[0], line

    problems = []
    tol_text = ", ".join(f"{k}={v:g}" for k, v in c.tolerance.items()) or "default tolerance"
    for kind, label, fn in methods:
        head = f"{label_of}: {kind} method {label!r}"
        if kind == "wrong" and verdict(fn, rtol=1e-12, atol=0.0)[0] == PASS:
            problems.append(f"{head} matches the reference on every case: the cases cannot tell "
                            "it apart from the right method")
            continue
        got, line = verdict(fn, **c.tolerance)
        should = FAIL if kind == "wrong" else PASS
        if got != should:
            problems.append(f"{head} does not {should} ({tol_text}): the checker says {line!r}")
    return problems


def audit_methods(path: Path, seeds=range(200), max_same: float = 0.5) -> tuple[list[str], int]:
    """Check a solutions notebook's tolerances against its listed methods, over many seeds.

    For each graded ``check`` exercise and each seed: the key's own answer must PASS; each
    ``WRONG_METHODS`` entry must FAIL (seeds where it equals the key's answer within 1e-12 are
    skipped, but coinciding in more than ``max_same`` of the seeds, half by default, is itself a
    problem: the exercise cannot tell the method apart); each ``ACCEPTED_METHODS`` entry must PASS. The verdicts come from
    :func:`scaling_lib.grading.assess`, the comparison ``check`` prints. An exercise that draws
    nothing is evaluated once.

    For a ``check_function`` exercise a method takes the student's function's arguments; the real
    ``check_function`` runs it on the cell's cases (the cell's own definitions and imports run
    first): a wrong method must FAIL (and must not match the reference on every case), an
    accepted one PASS.

    Returns (problems, number of methods checked); each problem names the exercise, the method,
    the first failing seed with its parameters, and the numbers involved.
    """
    import nbformat

    path = Path(path)
    nb = nbformat.read(path, as_version=4)
    checks = graded_checks(nb, path.name)
    base = exercise_namespace(nb, path.name)
    wrong, accepted = _methods(base)
    names = [c.name for c in checks]
    problems = [f"{path.name}: {table} lists {ex!r}, which no graded cell checks (graded: "
                f"{', '.join(names)})"
                for table, listed in (("WRONG_METHODS", wrong), ("ACCEPTED_METHODS", accepted))
                for ex in listed if ex not in names]
    n_methods = 0
    for c in checks:
        methods = [("wrong", label, fn) for label, fn in wrong.get(c.name, {}).items()]
        methods += [("accepted", label, fn) for label, fn in accepted.get(c.name, {}).items()]
        n_methods += len(methods)
        if c.kind == "check":
            problems += _audit_check(c, base, methods, seeds, path.name, max_same)
        elif methods:
            problems += _audit_function(c, base, methods, path.name)
    return problems, n_methods


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scaling_lib.exercises", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="write exercises/ from solutions/")
    b.add_argument("--check", action="store_true", help="only report stale files (exit 1)")
    b.add_argument("--root", default=".", help="project root (default: current directory)")
    r = sub.add_parser("run", help="execute notebooks in place, storing their outputs")
    r.add_argument("paths", nargs="+", type=Path)
    r.add_argument("--timeout", type=int, default=600, help="seconds per cell (default: 600)")
    args = parser.parse_args(argv)
    if args.cmd == "run":
        return 1 if run(args.paths, timeout=args.timeout) else 0
    try:
        stale = build(Path(args.root), check=args.check)
    except MarkupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.check and stale:
        print("stale (run `python -m scaling_lib.exercises build`):\n  " + "\n  ".join(stale))
        return 1
    print("\n".join(f"wrote {s}" for s in stale) if stale else "exercises up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())

__all__ = ["build", "make_exercise", "normalize_solutions", "strip_solutions", "run", "main",
           "MarkupError", "GradedCheck", "graded_checks", "exercise_namespace", "listed_methods",
           "audit_methods"]
