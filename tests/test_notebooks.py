"""Notebook-level promises. (Chapters and solutions are also executed by nbval: see pyproject.)"""

import re
from pathlib import Path

import nbformat
import pytest
import yaml
from nbclient import NotebookClient

from scaling_lib.course.grading import NOT_SOLVED

ROOT = Path(__file__).resolve().parents[1]
ALL = sorted(p for d in ("chapters", "solutions", "exercises") for p in (ROOT / d).glob("*.ipynb"))
BOOK_NOTEBOOKS = sorted(p for d in ("chapters", "book", "solutions")
                        for p in (ROOT / d).glob("*.ipynb"))
# A cell that draws a static figure with matplotlib (the widget explorers draw from their saved
# state and are exempt, like in the browser test).
DRAWS = re.compile(r"\bplt\.(show|subplots|subplot|figure|plot|imshow)\(|\.savefig\(")
EXERCISES = sorted((ROOT / "exercises").glob("*.ipynb"))


def _toc_files():
    toc = yaml.safe_load((ROOT / "book" / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(node):
        if isinstance(node, dict):
            if "file" in node:
                files.append(node["file"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(toc.get("parts", []))
    return files


def test_every_notebook_is_in_the_toc_and_every_toc_file_exists():
    toc = set(_toc_files())
    for path in ALL:
        assert str(path.relative_to(ROOT).with_suffix("")) in toc, f"{path} missing from _toc.yml"
    for f in toc:
        assert list(ROOT.glob(f + ".*")), f"_toc.yml lists {f}, which does not exist"


def test_every_notebook_has_exactly_the_generated_setup_cell():
    """One set-up cell, generated from tools/setup_cell.tmpl and _config.yml's repository URL by
    `python tools/setup_cells.py` (run it after changing either, or after copying a notebook)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("setup_cells", ROOT / "tools" / "setup_cells.py")
    setup_cells = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(setup_cells)
    repo = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    want = setup_cells.cell_source(ROOT)
    assert f'REPOSITORY = "{repo}"' in want
    paths = setup_cells.notebooks(ROOT)
    assert {p.parent.name for p in paths} == {"chapters", "solutions", "exercises", "book"}
    stale = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        setup = [c for c in nb.cells if setup_cells.is_setup_cell(c)]
        first = next(c for c in nb.cells if c.cell_type == "code")
        if len(setup) != 1 or first.source != want or first.outputs:
            stale.append(str(path.relative_to(ROOT)))
    assert not stale, f"run `python tools/setup_cells.py`: {stale}"


def test_chapters_link_their_exercises():
    for path in sorted((ROOT / "chapters").glob("*.ipynb")):
        if not (ROOT / "solutions" / path.name).exists():
            continue
        text = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells)
        assert f"exercises/{path.name}" in text, f"{path.name} must link its exercise notebook"


def test_every_figure_has_alt_text():
    """MyST-NB's default alt text is the image's file path: every cell that draws a figure says what
    it shows in its metadata, ``"mystnb": {"image": {"alt": "..."}}``."""
    missing, n = [], 0
    for path in BOOK_NOTEBOOKS:
        for k, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type != "code" or not DRAWS.search(cell.source):
                continue
            n += 1
            alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt", "")
            if len(alt.split()) < 8 or alt.strip().endswith((".png", ".svg")):
                missing.append(f"{path.relative_to(ROOT)} cell {k} ({cell.get('id')}): {alt!r}")
    assert n, "no figure cells found: has the way chapters draw figures changed?"
    assert not missing, ('figure cells need metadata "mystnb": {"image": {"alt": "<what the figure '
                         'shows: axes, quantity, takeaway>"}}:\n' + "\n".join(missing))


@pytest.mark.parametrize("path", EXERCISES, ids=lambda p: p.name)
def test_exercise_notebook_reports_not_solved_yet(path):
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    graded = [c for c in nb.cells if "graded" in c.get("metadata", {}).get("tags", [])]
    assert graded
    for cell in graded:
        text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        errors = [o for o in cell.outputs if o.output_type == "error"]
        assert not errors, f"{path.name}: graded cell raised {errors[0]['ename']}"
        verdicts = re.findall(r"^(PASS|FAIL|NOT SOLVED YET):", text, flags=re.M)
        assert verdicts == [NOT_SOLVED], f"{path.name}: {cell.source[:60]!r} printed {text!r}"


def test_student_error_becomes_feedback_and_run_all_goes_on():
    path = ROOT / "exercises" / "01_rooflines.ipynb"
    nb = nbformat.read(path, as_version=4)
    graded = [c for c in nb.cells if "graded" in c.get("metadata", {}).get("tags", [])]
    first, rest = graded[0], graded[1:]
    assert first.source.startswith("%%graded 1.1")
    first.source = first.source.replace("answer = None", "answer = p.B * undefined_name")
    NotebookClient(nb, timeout=300, kernel_name="python3",  # raises if any cell errors
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    out = "".join(o.get("text", "") for o in first.outputs if o.output_type == "stream")
    assert "FAIL: 1.1: your code raised NameError" in out and "(line 4)" in out, out
    assert "Traceback" not in out
    later = "".join(o.get("text", "") for c in rest for o in c.outputs)
    assert later.count(NOT_SOLVED) == len(rest)
