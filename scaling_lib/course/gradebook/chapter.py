"""The chapter a submission is compared with, built from the course's ``solutions/`` notebook.

A :class:`Chapter` holds the solutions notebook, the exercise notebook generated from it (its
locked cells), one :class:`Exercise` per graded cell (locked lines, tolerance, unit, hint, the
names the student's cell defines) and the answer key's aliases; :meth:`Chapter.expected`
recomputes the key's answer for a seed. :class:`Course` finds a checkout's chapters
(:func:`course_root`) and tells which chapter a submission belongs to.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..exercises import BEGIN, END, graded_checks, make_exercise, normalize_solutions

_GRADED = re.compile(r"^%%graded\s+(\S+)")
_CHECK_NAME = re.compile(r"""\bname=["']([^"']+)["']""")
_STEM = re.compile(r"(\d\d_[a-z0-9_]+)")


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
    check_lines: tuple = ()      # the checker call's lines as the exercise shows them (stripped)


@dataclass
class Chapter:
    stem: str                    # "01_rooflines"
    solutions: object            # the solutions notebook (normalized)
    template: object             # the exercise notebook generated from it
    exercises: dict              # name -> Exercise, in notebook order
    checks: dict                 # name -> exercises.GradedCheck
    key_aliases: set
    _base: dict | None = None
    _expected: dict = field(default_factory=dict)
    _params: dict = field(default_factory=dict)

    def params(self, name: str, seed: int):
        """The numbers drawn for exercise ``name`` at ``seed`` (after :meth:`expected_all`)."""
        return self._params.get(seed, {}).get(name)

    def hint(self, name: str) -> str:
        """The exercise's method hint: registered with its key (``HINTS``) when the checker
        reads hints from the keys, else the ``hint=`` of its checker call."""
        try:
            from .. import grading

            hints = grading.tables(name).hints
            if hints:
                return str(hints[-1])
        except Exception:
            pass
        return self.exercises[name].hint if name in self.exercises else ""

    def base(self) -> dict:
        """The solutions' set-up namespace (imports, the key module), built once."""
        if self._base is None:
            from ..exercises import exercise_namespace
            self._base = exercise_namespace(self.solutions, self.stem)
        return self._base

    def expected(self, name: str, seed: int):
        """The key's answer to exercise ``name`` at ``seed`` (check) or the reference and cases
        (check_function), computed here in the grading process; raises what the key raised."""
        got = self.expected_all(seed)[name]
        if isinstance(got, BaseException):
            raise got
        return got

    def expected_all(self, seed: int) -> dict:
        """Every exercise's expected value at ``seed``: the solutions notebook replayed top to
        bottom as a student who did the worked solutions would run it (each graded cell without its checker
        call), so a key sees every name an earlier cell made (``np`` of an earlier exercise).
        An exercise whose key raised maps to the exception."""
        if seed in self._expected:
            return self._expected[seed]
        import contextlib
        import io

        from ..exercises.graded_cells import _code_only

        ns: dict = {"__name__": "__exercise__", "SEED": seed}
        out: dict = {}
        by_cell = {c.cell: c for c in self.checks.values()}
        code = [k for k, c in enumerate(self.solutions.cells) if c.cell_type == "code"]
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            for k in code[1:]:  # the first code cell installs the course: skipped
                src = _code_only(self.solutions.cells[k].source)
                c = by_cell.get(k)
                try:
                    tree = ast.parse(src)
                except SyntaxError as exc:
                    if c is not None:
                        out[c.name] = exc
                    continue
                if c is None:
                    try:
                        exec(compile(tree, f"{self.stem} cell {k}", "exec"), ns)
                        if "SEED" in ns and ns["SEED"] != seed:   # the set-up cell's literal
                            ns["SEED"] = seed
                    except Exception:
                        pass
                    continue
                body = [st for st in tree.body if not (isinstance(st, ast.Expr) and
                        st.lineno == c.call.lineno)]
                try:
                    exec(compile(ast.Module(body, []), c.name, "exec"), ns)
                    if c.kind == "check":
                        out[c.name] = eval(compile(ast.Expression(c.arg(1, "expected")), c.name,
                                                   "eval"), ns)
                        if c.param:
                            self._params.setdefault(seed, {})[c.name] = ns.get(c.param)
                    else:
                        ref = eval(compile(ast.Expression(c.arg(1, "reference")), c.name,
                                           "eval"), ns)
                        cases = eval(compile(ast.Expression(c.arg(2, "cases")), c.name, "eval"),
                                     ns)
                        out[c.name] = (ref, list(cases))
                except Exception as exc:
                    out[c.name] = exc
        self._expected[seed] = out
        return out

    def prelude(self, name: str) -> str:
        """What a fresh process runs before an implement-it exercise's cell: the exercise
        notebook's locked cells before it and the imports of the graded cells before it (magics
        and the install cell left out)."""
        from ..exercises.graded_cells import _code_only

        parts = []
        code = [c for c in self.template.cells if c.cell_type == "code"][1:]
        for cell in code:
            if "graded" in cell.metadata.get("tags", []):
                if _graded_name(cell) == name:
                    break
                try:
                    tree = ast.parse(_code_only(cell.source))
                except SyntaxError:
                    continue
                parts += [ast.unparse(st) for st in tree.body
                          if isinstance(st, (ast.Import, ast.ImportFrom))]
            else:
                parts.append(_code_only(cell.source))
        return "\n".join(parts)


def _call_lines(exercise_source: str, c) -> tuple:
    """The lines of the exercise cell holding its final checker call (stripped), found by parsing
    the exercise's own cell (the ``%%graded`` line and magics blanked)."""
    from ..exercises.graded_cells import _code_only

    src = "\n".join("" if ln.startswith("%%graded") else ln for ln in exercise_source.splitlines())
    try:
        body = ast.parse(_code_only(src)).body
    except SyntaxError:
        return ()
    calls = [st for st in body if isinstance(st, ast.Expr) and isinstance(st.value, ast.Call)]
    if not calls:
        return ()
    last = calls[-1]
    lines = src.splitlines()[last.lineno - 1:last.end_lineno]
    return tuple(ln.rstrip() for ln in lines)


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
    graded_src = {_graded_name(c): c.source for c in template.cells if c.cell_type == "code"
                  and "graded" in c.metadata.get("tags", [])}
    for c in checks:
        target = c.arg(0, "answer" if c.kind == "check" else "fn")
        forget = [target.id] if isinstance(target, ast.Name) else []
        forget += [st.name for st in c.before if isinstance(st, ast.FunctionDef)]
        exercises[c.name] = Exercise(
            c.name, c.kind, ast.unparse(target),
            _locked_segments(sol.cells[c.cell].source, c.name), dict(c.tolerance),
            _literal(c.call, "unit"), _literal(c.call, "hint"), forget=tuple(dict.fromkeys(forget)),
            check_lines=_call_lines(graded_src.get(c.name, ""), c))
    aliases = set()
    for cell in template.cells:
        if cell.cell_type == "code" and "graded" not in cell.metadata.get("tags", []):
            for m in re.finditer(r"from scaling_lib\.course\.keys import \w+ as (\w+)|"
                                 r"import scaling_lib\.course\.keys\.\w+ as (\w+)", cell.source):
                aliases.add(m.group(1) or m.group(2))
    return Chapter(path.stem, sol, template, exercises, {c.name: c for c in checks},
                   aliases or {"key"})


def course_root(root: str | Path | None = None) -> Path:
    """The folder holding ``solutions/``: ``root``, else this repository, else the current one."""
    tries = [Path(root)] if root else [Path(__file__).resolve().parents[3], Path.cwd()]
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
