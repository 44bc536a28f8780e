"""Solution notebook -> exercise notebook: strip the solution regions, tag, and ``build``.

The marking rules (``# BEGIN SOLUTION`` / ``# STUB:`` / ``# END SOLUTION`` regions, the
``solution`` and ``graded`` tags, the ``%%graded`` magic added to exercises) are described in the
package docstring, :mod:`scaling_lib.course.exercises`.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

BEGIN = re.compile(r"^(\s*)# BEGIN SOLUTION\s*$")
END = re.compile(r"^\s*# END SOLUTION\s*$")
STUB = re.compile(r"^\s*# STUB: ?(.*)$")
NOT_IMPLEMENTED = 'raise NotImplementedError("write your code here")'
GRADING_IMPORT = "from scaling_lib.course.grading import"
LOAD_EXT = "%load_ext scaling_lib.course.grading"
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
    """Add the tags the solution notebook needs (in place): see the package docstring."""
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
