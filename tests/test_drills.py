"""Interview drills: the bank, its notebooks, the quiz, the worked design answers, the concepts."""

from pathlib import Path

import nbformat
import pytest

from scaling_lib import hardware
from scaling_lib.course import drills
from scaling_lib.course.drills_build import notebook
from scaling_lib.course.grading import FAIL, PASS, Params, assess
from scaling_lib.course.keys import drills as key

ROOT = Path(__file__).resolve().parents[1]


def test_bank_names_keys_and_shape():
    names = [q.name for qs in drills.QUESTIONS.values() for q in qs]
    assert len(names) == len(set(names))
    for stem, qs in drills.QUESTIONS.items():
        assert stem in drills.LEVELS and stem in drills.MINUTES
        assert len(qs) >= 8 and sum(bool(q.signature) for q in qs) >= 2
        for q in qs:
            assert q.name.split(".")[0] == stem[:2]
            assert callable(getattr(key, q.key)), q.key
            if q.name in key.WRONG_METHODS_ALL:
                assert not q.signature


@pytest.mark.parametrize("stem", list(drills.QUESTIONS))
def test_committed_notebooks_match_the_bank(stem):
    setup = next(c for c in nbformat.read(ROOT / "solutions" / "01_rooflines.ipynb", as_version=4)
                 .cells if c.cell_type == "code").source
    made = [c.source for c in notebook(stem, setup).cells if c.cell_type == "code"]
    have = [c.source for c in nbformat.read(ROOT / "solutions" / f"{stem}.ipynb", as_version=4)
            .cells if c.cell_type == "code"]
    assert made == have, "run `python -m scaling_lib.course.drills_build` and re-run the notebooks"


def test_a_changed_constant_changes_the_drill_and_its_answer(monkeypatch):
    real = hardware.get
    faster = hardware.with_changes(real("h100"), hbm_bytes_per_s=5e12)
    monkeypatch.setattr(hardware, "get", lambda n: faster if n == "h100" else real(n))
    p = Params({"accelerator": "h100"})
    assert key.hbm_bytes_per_s(p) == 5e12
    assert any(r["HBM bandwidth"] == "5 TB/s" for r in drills.chip_rows(["h100"]))
    assert key.critical_batch(p) == pytest.approx(faster.peak_flops_per_s() / 5e12)


def test_quiz_is_seeded_and_its_distractors_fail():
    a, b = drills.quiz(3, n=4), drills.quiz(3, n=4)
    assert [q["name"] for q in a] == [q["name"] for q in b] and len(a) == 4
    for q in a:
        assert q["options"][q["correct"]] == q["answer"]
        assert len(set(q["options"])) == len(q["options"]) >= 2
        want = getattr(key, next(x.key for x in drills.QUESTIONS["90_numbers"]
                                 if x.name == q["name"]))(q["params"])
        for i, o in enumerate(q["options"]):
            assert assess(o, want)[0] == (PASS if i == q["correct"] else FAIL)
    for level in drills.QUESTIONS:
        assert drills.quiz(0, level, n=2)
    with pytest.raises(ValueError, match="valid choices"):
        drills.quiz(0, "level-9")


def test_design_training_worked_answer():
    d = drills.design_training()
    assert d["plan"].world_size == 1024 and d["fits"] is True
    assert d["tokens"] == pytest.approx(d["flops"] / (6 * d["n_params"]), rel=1e-9)
    assert d["unsharded_states"] == 16 * d["n_params"]
    with pytest.raises(ValueError, match="world_size"):
        drills.design_training(n=512, plan=drills.ParallelPlan(dp=8))
    assert "planner" in drills.training_answer()


def test_design_serving_worked_answer():
    d = drills.design_serving(tpot=0.050)
    best = d["best"]
    assert best["fits"] and best["step"] <= 0.050
    assert all(not r["meets"] for r in d["rows"] if r["chips"] < best["chips"])
    assert best["chips"] >= d["min_for_memory"]
    assert drills.design_serving(tpot=1e-6)["best"] is None


def test_concepts_have_answers_and_rubrics():
    table = drills.concepts()
    assert {"parallelism", "nvlink", "sync_sgd", "dp_bottleneck", "frontier_time"} <= set(table)
    for question, answer, rubric in table.values():
        assert question.endswith("?") and len(answer) > 100 and len(rubric) >= 3
    shown = drills.reveal("nvlink").data
    assert shown.startswith("<details>") and "Score yourself" in shown
    with pytest.raises(ValueError, match="valid choices"):
        drills.reveal("nope")
