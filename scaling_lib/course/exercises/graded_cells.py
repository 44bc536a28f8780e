"""The graded cells of a solutions notebook, parsed: each cell's draw and final checker call.

:func:`graded_checks` reads them with ``ast`` (nothing is run); :func:`exercise_namespace` runs the
cells before the first graded one, giving the names (the answer key, ``SEED``) a graded cell sees.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .transform import MarkupError


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
