"""Exercise notebooks are generated from the solutions; they must never drift."""

from pathlib import Path

import nbformat
import pytest

from scaling_lib.course.exercises import MarkupError, build, main, make_exercise, strip_solutions

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))


def test_committed_exercises_match_regenerated():
    stale = build(ROOT, check=True)
    assert stale == [], f"run `python -m scaling_lib.course.exercises build`; stale: {stale}"


def test_every_solution_has_an_exercise_and_back():
    sol = {p.name for p in SOLUTIONS}
    ex = {p.name for p in (ROOT / "exercises").glob("*.ipynb")}
    assert sol and sol == ex


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_solutions_have_enough_graded_exercises(path):
    nb = nbformat.read(path, as_version=4)
    graded = [c for c in nb.cells if "graded" in c.get("metadata", {}).get("tags", [])]
    assert len(graded) >= 8, f"{path.name} has {len(graded)} graded exercises (need >= 8)"
    implement = [c for c in graded if "check_function(" in c.source]
    assert len(implement) >= 2, f"{path.name}: need >= 2 'implement this function' exercises"
    for c in graded:
        assert "check" in c.source.strip().splitlines()[-1] or "check" in c.source, c.source
    ex = make_exercise(nb, path.name)
    text = "\n".join(c.source for c in ex.cells)
    assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text


def test_exercise_keeps_a_figure_cells_alt_text():
    nb = nbformat.v4.new_notebook()
    alt = {"mystnb": {"image": {"alt": "time against size, log-log"}}, "tags": ["hide-input"]}
    nb.cells = [nbformat.v4.new_markdown_cell("# Solutions"),
                nbformat.v4.new_code_cell("fig, ax = plt.subplots()\nplt.show()", metadata=alt)]
    ex = make_exercise(nb, "figure.ipynb")
    assert ex.cells[1].metadata["mystnb"] == {"image": {"alt": "time against size, log-log"}}


def test_strip_solutions_function_body_gets_not_implemented():
    src = "def f(x):\n    # BEGIN SOLUTION\n    return 2 * x\n    # END SOLUTION\n"
    out, found = strip_solutions(src)
    assert found
    assert out == 'def f(x):\n    raise NotImplementedError("write your code here")\n'


@pytest.mark.parametrize("src, msg", [
    ("# BEGIN SOLUTION\nx = 1\n", "without '# END SOLUTION'"),
    ("x = 1\n# END SOLUTION\n", "without '# BEGIN SOLUTION'"),
    ("# BEGIN SOLUTION\nx = 1\n# END SOLUTION\n", "needs a '# STUB"),
])
def test_strip_solutions_malformed(src, msg):
    with pytest.raises(MarkupError, match=msg):
        strip_solutions(src)


def _notebook(path, *sources):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(s) for s in sources]
    nbformat.write(nb, path)
    return path


def test_run_reports_every_notebook_and_fails_at_the_end(tmp_path, capsys):
    """A cell that raises, sys.exit() and a dying kernel are reported; the next notebook runs."""
    raises = _notebook(tmp_path / "a_raises.ipynb", "x = 1", "raise ValueError('boom')")
    exits = _notebook(tmp_path / "b_exits.ipynb", "import sys; sys.exit(3)", "print('never')")
    dies = _notebook(tmp_path / "c_dies.ipynb", "import os; os._exit(1)")
    ok = _notebook(tmp_path / "d_ok.ipynb", "print(6 * 7)")
    missing = tmp_path / "missing.ipynb"
    before = raises.read_text()
    assert main(["run", "--timeout", "60", str(raises), str(exits), str(dies), str(missing),
                 str(ok)]) == 1
    out = capsys.readouterr().out
    assert (f"error  {raises}: cell 2 of 2 (`raise ValueError('boom')`) raised ValueError: boom"
            in out)
    assert f"error  {exits}: cell 1 of 2 (`import sys; sys.exit(3)`) raised SystemExit: 3" in out
    assert f"error  {dies}: cell 1 of 1 (`import os; os._exit(1)`): DeadKernelError" in out
    assert f"error  {missing}: cannot read it: FileNotFoundError" in out
    assert f"ok     {ok}" in out and out.rstrip().endswith("4 of 5 notebooks failed")
    assert "42" in nbformat.read(ok, as_version=4).cells[0].outputs[0]["text"]  # stored
    assert raises.read_text() == before  # a failed notebook is left as it was


# ---- Hints live with the key, not in the cells (issue 21) -----------------------------------------

def _graded_cells(nb):
    return [c for c in nb.cells if "graded" in c.get("metadata", {}).get("tags", [])
            or c.source.startswith("%%graded")]


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_no_hint_in_a_cell_or_before_a_fail(path):
    """No graded cell passes a hint (solutions or the generated exercises), and no stored
    output shows one: a hint appears only after a FAIL, from the key."""
    import re

    for nb in (nbformat.read(path, as_version=4),
               nbformat.read(ROOT / "exercises" / path.name, as_version=4)):
        for c in _graded_cells(nb):
            assert not re.search(r"\bhint\s*=", c.source), f"{path.name}: a hint in\n{c.source}"
            text = "".join(o.get("text", "") for o in c.get("outputs", []))
            assert "FAIL" in text or "hint" not in text, f"{path.name}: {text}"


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_every_exercise_registers_a_nudge_and_a_method(path):
    from scaling_lib.course.exercises import exercise_namespace, graded_checks
    from scaling_lib.course.exercises.audit import key_modules
    from scaling_lib.course.grading import tables

    nb = nbformat.read(path, as_version=4)
    mods = key_modules(exercise_namespace(nb, path.name))
    for c in graded_checks(nb, path.name):
        hints = tables(c.name, mods).hints
        assert len(hints) == 2 and all(isinstance(h, str) and h.strip() for h in hints), (
            f"{path.name} {c.name}: HINTS must hold (nudge, method), got {hints!r}")
        assert hints[0] != hints[1]
