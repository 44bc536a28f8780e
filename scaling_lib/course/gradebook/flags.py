"""Flags: tampering and, on request, use of the answer key in the student's own lines.

:func:`scan` reads the student's lines of a cell with ``ast`` and lists suspicious things:
redefining or rebinding the checker, patching attributes of numpy/the checker/the key, writing
the verdict marker ``PASS``, ``setattr``; with ``flag_keys`` also any use of the key module,
``__import__``, ``importlib``, ``exec``/``eval`` or ``sys.modules``. Flags never change a
verdict (verdicts are decided outside the kernel); they are notes for the instructor. The scan is
a heuristic: obfuscated code can evade it; it catches the direct ways.
"""

from __future__ import annotations

import ast
import re

_CHECKER_NAMES = {"check", "check_function", "draw", "assess", "run_graded", "print", "SEED"}
_MODULE_NAMES = {"np", "numpy", "math", "builtins", "sys", "grading", "scaling_lib", "hw", "rl",
                 "key", "keys", "IPython", "get_ipython"}


def _nodes_on(tree, lines: set):
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in lines:
            yield node


def _python(src: str) -> str:
    """The cell as the kernel runs it: IPython's own translation of ``%`` and ``!`` lines into
    calls (``get_ipython().run_line_magic(...)``), so code behind a magic is scanned too; the
    ``%%graded`` line is blanked (line numbers kept)."""
    lines = src.splitlines()
    if lines and lines[0].startswith("%%graded"):
        lines[0] = "pass"  # not blank: IPython drops leading blank lines, shifting the numbers
    text = "\n".join(lines)
    try:
        from IPython.core.inputtransformer2 import TransformerManager

        out = TransformerManager().transform_cell(text)
        if out.count("\n") + 1 >= len(lines):
            return out
    except Exception:
        pass
    return "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in lines)


def scan(src: str, lines: set, key_aliases: set, flag_keys: bool) -> list[str]:
    """Suspicious things in the student's lines of a cell (set of 1-based line numbers)."""
    found: list[str] = []
    raw = src.splitlines()
    for i in sorted(lines):
        ln = raw[i - 1].lstrip() if 0 < i <= len(raw) else ""
        if ln.startswith(("%", "!")) or re.match(r"^\w+\s*=\s*[!%]", ln):
            shown = ln if len(ln) <= 60 else ln[:57] + "..."
            found.append(f"runs an IPython magic or shell command: `{shown}`")
            if flag_keys and re.search(r"\b(" + "|".join(map(re.escape, key_aliases)) +
                                       r")\.|keys|__import__|importlib", ln):
                found.append("uses the answer key (or imports modules dynamically) in a magic")
    body = _python(src)
    try:
        tree = ast.parse(body)
        modules = _MODULE_NAMES | key_aliases | {
            (a.asname or a.name).split(".")[0] for node in ast.walk(tree)
            if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names}
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        where = f", line {exc.lineno}" if getattr(exc, "lineno", None) else ""
        found.append(f"does not parse as Python ({type(exc).__name__}{where}): it runs "
                     "nothing, and only its text was scanned")
        text = "\n".join(ln for i, ln in enumerate(src.splitlines(), 1) if i in lines)
        if "PASS" in text:
            found.append("writes the verdict marker PASS itself")
        if flag_keys and re.search(r"\b(" + "|".join(map(re.escape, key_aliases)) +
                                   r")\.|scaling_lib\.course\.keys|__import__|importlib", text):
            found.append("uses the answer key (or imports modules dynamically)")
        return list(dict.fromkeys(found))
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
            if flag_keys and (any(m and m.startswith("scaling_lib.course.keys") for m in mods) or
                              (mod == "scaling_lib" and "keys" in names) or
                              any(m and m.startswith("importlib") for m in mods)):
                found.append("imports the answer keys (or importlib)")
            if any(m in ("scaling_lib.course.grading", "scaling_lib.course.exercises")
                   for m in mods):
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
