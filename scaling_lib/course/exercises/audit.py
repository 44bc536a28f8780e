"""Auditing tolerances: do the listed wrong methods FAIL and the accepted ones PASS?

The protocol (``tests/test_wrong_methods.py`` enforces it): the tolerance of an exercise is the
literal ``rtol=``/``atol=`` of its ``check(...)`` call in the solutions notebook; the notebook's
answer-key module may define::

    WRONG_METHODS = {"3.7": {"padding on D only": (fn, "message for the student"), ...}, ...}
    ACCEPTED_METHODS = {"7.12": {"the chapter's 4/3 rule": fn}}
    HINTS = {"3.7": ("a nudge", "the method")}

where ``fn(p)`` takes the drawn parameters ``p`` of the exercise (``fn()`` for an exercise that
draws none); a WRONG_METHODS value may be the function alone (its label is then its message).
:func:`audit_methods` evaluates each graded call over many seeds: each wrong method must FAIL
and be named (its own message in the FAIL), each accepted one PASS.
"""

from __future__ import annotations

import ast
from pathlib import Path

from .graded_cells import GradedCheck, exercise_namespace, graded_checks


def key_modules(ns: dict) -> list:
    """The answer-key modules imported in ``ns`` (modules defining any of the key's tables)."""
    import types

    return [m for m in ns.values() if isinstance(m, types.ModuleType) and any(
        hasattr(m, t) for t in ("WRONG_METHODS", "ACCEPTED_METHODS", "HINTS", "SYNONYMS"))]


def _methods(ns: dict) -> tuple[dict, dict]:
    """WRONG_METHODS and ACCEPTED_METHODS of the modules imported in ``ns`` (the answer key);
    each wrong method as a function (a ``(fn, message)`` entry gives its function)."""
    from ..grading.tables import mistake

    wrong, accepted = {}, {}
    for mod in key_modules(ns):
        for ex, listed in getattr(mod, "WRONG_METHODS", {}).items():
            wrong.setdefault(ex, {}).update({k: mistake(k, v).fn for k, v in listed.items()})
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
    from ..grading import FAIL, PASS, assess, named_mistakes
    from ..grading.tables import tables

    mistakes = tables(c.name, key_modules(base)).mistakes
    by_label = {m.label: m for m in mistakes}

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
        values = {}
        for kind, label, fn in methods:
            st = stats[label]
            try:
                got = _apply(fn, p, c.draw is not None)
            except Exception as exc:
                st["bad"] += 1
                st["first"] = st["first"] or (seed, p, f"raised {type(exc).__name__}: {exc}")
                continue
            if kind == "wrong":
                values[label] = got
            if kind == "wrong" and assess(got, want, rtol=1e-12)[0] == PASS:
                st["same"] += 1
                continue
            verdict, msg = assess(got, want, **c.tolerance)
            if verdict != (FAIL if kind == "wrong" else PASS):
                st["bad"] += 1
                st["first"] = st["first"] or (seed, p, f"gives {got!r}, the key {want!r}; "
                                              f"the checker says {verdict}: {msg}")
                continue
            if kind == "wrong":
                st.setdefault("answers", []).append(got)
        for label, m in by_label.items():  # each mistake made is named, by its own message
            st = stats.get(label)
            for got in (st or {}).pop("answers", []) if st else []:
                named = named_mistakes(got, want, mistakes, p, values=values, **c.tolerance)
                if m not in named:
                    st["unnamed"] = st.get("unnamed", 0) + 1
                    st["first_unnamed"] = st.get("first_unnamed") or (
                        seed, p, "is not named" if not named else
                        f"is named as {named[0].label!r}")
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
        if kind == "wrong" and st.get("unnamed"):
            seed, p, what = st["first_unnamed"]
            problems.append(f"{head} FAILs but {what} in {st['unnamed']} of {n} seeds; first at "
                            f"seed {seed} ({p!r}): two listed mistakes give the same answer "
                            "within the tolerance there")
        if kind == "wrong" and st["same"] > max_same * n:
            problems.append(f"{head} equals the key's answer in {st['same']} of {n} seeds: "
                            "the exercise cannot tell it apart from the right method")
    return problems


def _imports_before(nb, cell: int) -> list:
    """The import statements of the graded cells before ``cell`` (a later cell may rely on them)."""
    from .graded_cells import _code_only

    out = []
    for k, c in enumerate(nb.cells[:cell]):
        if c.cell_type == "code" and "graded" in c.get("metadata", {}).get("tags", []):
            out += [st for st in ast.parse(_code_only(c.source)).body
                    if isinstance(st, (ast.Import, ast.ImportFrom))]
    return out


def _audit_function(c: GradedCheck, base: dict, methods: list, where: str,
                    imports=()) -> list[str]:
    """Problems of one ``check_function(...)`` exercise: each method stands in for the student's
    function and is run by the real ``check_function`` on the cell's cases."""
    import contextlib
    import io

    from ..grading import FAIL, PASS, check_function
    from ..grading.checks import _say
    from ..grading.tables import tables

    said = {m.label: _say(m) for m in tables(c.name, key_modules(base)).mistakes}

    label_of = f"{where} {c.name}"
    ns = dict(base)
    try:
        exec(compile(ast.Module(list(imports) + list(c.before), []), label_of, "exec"), ns)
        reference = eval(compile(ast.Expression(c.arg(1, "reference")), label_of, "eval"), ns)
        cases = eval(compile(ast.Expression(c.arg(2, "cases")), label_of, "eval"), ns)
    except Exception as exc:
        return [f"{label_of}: the cell's reference or cases raised {type(exc).__name__}: {exc}"]

    from ..grading.tables import use_keys

    def verdict(fn, **tol) -> tuple[str, str]:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), use_keys(key_modules(base)):
            check_function(fn, reference, cases, name=c.name, time_limit=None, **tol)
        line = buf.getvalue().strip().splitlines()[0]
        return line.split(":")[0], line

    problems = []
    tol_text = ", ".join(f"{k}={v:g}" for k, v in c.tolerance.items()) or "default tolerance"
    lines = {}
    for kind, label, fn in methods:
        head = f"{label_of}: {kind} method {label!r}"
        if kind == "wrong" and verdict(fn, rtol=1e-12, atol=0.0)[0] == PASS:
            problems.append(f"{head} matches the reference on every case: the cases cannot tell "
                            "it apart from the right method")
            continue
        got, line = verdict(fn, **c.tolerance)
        lines[label] = line
        should = FAIL if kind == "wrong" else PASS
        if got != should:
            problems.append(f"{head} does not {should} ({tol_text}): the checker says {line!r}")
    for label, line in lines.items():
        if label not in said or said[label] in line:
            continue
        # mistakes the cases cannot tell apart (same verdict line) may share one message
        twins = [k for k, other in lines.items() if k != label and other == line]
        if not any(said.get(k, "\0") in line for k in twins):
            problems.append(f"{label_of}: wrong method {label!r} FAILs but is not named: the "
                            f"checker says {line!r}")
    return problems


def audit_methods(path: Path, seeds=range(200), max_same: float = 0.5) -> tuple[list[str], int]:
    """Check a solutions notebook's tolerances against its listed methods, over many seeds.

    For each graded ``check`` exercise and each seed: the key's own answer must PASS; each
    ``WRONG_METHODS`` entry must FAIL (seeds where it equals the key's answer within 1e-12 are
    skipped, but coinciding in more than ``max_same`` of the seeds, half by default, is itself a
    problem: the exercise cannot tell the method apart); each ``ACCEPTED_METHODS`` entry must PASS. The verdicts come from
    :func:`scaling_lib.course.grading.assess`, the comparison ``check`` prints. An exercise that draws
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
            problems += _audit_function(c, base, methods, path.name, _imports_before(nb, c.cell))
    return problems, n_methods
