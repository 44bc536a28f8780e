"""Honest work gets full marks in every chapter, graded as a student's notebook is graded.

One student per chapter hands in the exercise notebook with the worked solutions filled in
(tests/fixtures/submissions/craft.py builds it from solutions/ the way a student fills in the
exercise); the class is graded once, in jails, as `python -m scaling_lib grade` does. A key that
depends on a name an earlier cell made (exercise 2.10 once needed the `np` of 2.9) fails here.
"""

import importlib.util
from pathlib import Path

import nbformat
import pytest

from scaling_lib.course import gradebook as gb

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "craft", ROOT / "tests" / "fixtures" / "submissions" / "craft.py")
craft = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(craft)

CHAPTERS = sorted(p.stem for p in (ROOT / "solutions").glob("*.ipynb"))
SEED = 11


@pytest.mark.parametrize("chapter", CHAPTERS)
@pytest.mark.parametrize("seed", [0, 12345])
def test_every_expected_value_is_computable(chapter, seed):
    # the grader's own replay of the solutions: no key raises, at any seed
    got = gb.Course(ROOT).chapter(chapter).expected_all(seed)
    failed = {k: repr(v) for k, v in got.items() if isinstance(v, BaseException)}
    assert failed == {}
    assert set(got) == set(gb.Course(ROOT).chapter(chapter).exercises)


def _chapters_selected(session):
    """The chapters whose full-marks test runs in this session (`make test` keeps a few)."""
    return sorted({item.callspec.params["chapter"] for item in session.items
                   if item.originalname == "test_worked_solutions_get_full_marks"})


@pytest.fixture(scope="module")
def honest(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp("honest") / "submissions"
    folder.mkdir()
    for stem in _chapters_selected(request.session):
        nbformat.write(craft.submission(SEED, chapter=stem), folder / f"honest_{stem}.ipynb")
    results = gb.grade_folder(folder, course=ROOT, cell_timeout=300, notebook_timeout=900,
                              seeds={"honest": SEED}, workers=2, duplicates="all")
    return {r.chapter: r for r in results}


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_worked_solutions_get_full_marks(honest, chapter):
    r = honest[chapter]
    assert r.status == "graded" and r.seed == SEED
    assert r.total == len(gb.Course(ROOT).chapter(chapter).exercises) > 0
    assert r.passed == r.total, {n: r.messages[n][0] for n, v in r.exercises.items()
                                 if v != "pass"}
    assert [f for f in r.flags if "submissions of" not in f] == []
