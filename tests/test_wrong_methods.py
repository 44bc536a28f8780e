"""Each exercise's tolerance tells the common wrong methods from the right one.

The protocol, for every graded ``check(...)`` exercise of ``solutions/*.ipynb``:

- its tolerance is the literal ``rtol=``/``atol=`` of its ``check(...)`` call (default 2%);
- the chapter's answer-key module (``scaling_lib/course/keys/<chapter>.py``) may define
  ``WRONG_METHODS = {"3.7": {"padding on D only": fn, ...}}`` and
  ``ACCEPTED_METHODS = {"7.12": {"the chapter's 4/3 rule": fn}}``, each ``fn(p)`` taking the
  exercise's drawn parameters ``p`` (``fn()`` for an exercise that draws none) and returning the
  answer that method gives;
- for seeds 0..199 (every 8th in `make test`) the key's own answer PASSes, every wrong method
  FAILs (seeds where it equals the key's answer are skipped, unless that happens in more than half of them) and every accepted
  method PASSes, as judged by ``scaling_lib.course.grading.assess``, the comparison ``check`` prints;
- for a ``check_function`` exercise a method takes the arguments of the student's function and the
  real ``check_function`` runs it on the cell's cases: a wrong one must FAIL (and must not match
  the reference on every case), an accepted one must PASS.

The machinery (``scaling_lib.course.exercises.audit_methods``) is tested on a synthetic notebook in
``tests/test_grading.py``.
"""

from pathlib import Path

import pytest

from scaling_lib.course.exercises import audit_methods, listed_methods

ROOT = Path(__file__).resolve().parents[1]
SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
SEEDS = range(200)
QUICK_SEEDS = range(0, 200, 8)   # `make test`: every 8th seed; `make test-all` adds all 200
# A wrong method may equal the key's answer in at most this share of the seeds. Many pitfalls
# belong to some of the drawn choices only (v6e's 256-wide MXU, wraparound on full axes, a
# yes/no verdict far from the ridge), so they coincide on the others; one that coincides in
# more than 90% of draws is not a pitfall the exercise tests, and should not be listed.
MAX_SAME = 0.9


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_wrong_methods_fail_and_accepted_methods_pass(path):
    problems, _ = audit_methods(path, QUICK_SEEDS, MAX_SAME)
    assert not problems, "\n".join(problems)


@pytest.mark.slow
@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_wrong_methods_fail_and_accepted_methods_pass_at_every_seed(path):
    problems, _ = audit_methods(path, SEEDS, MAX_SAME)
    assert not problems, "\n".join(problems)


def test_some_answer_key_lists_wrong_methods():
    counts = {p.name: sum(map(len, listed_methods(p)[0].values())) for p in SOLUTIONS}
    assert any(counts.values()), (
        "no answer key in scaling_lib/course/keys/ defines WRONG_METHODS, so "
        "test_wrong_methods_fail_and_accepted_methods_pass checks nothing but the keys themselves; "
        "list each exercise's common wrong methods (see this module's docstring)")


# Exercises with fewer than two listed mistakes, and why. A yes/no question or a choice of two
# has one wrong answer for all its slips (its message names them); the drills' "write it"
# questions are kept free of wrong methods by tests/test_drills.py; in 13.4 the cases let only
# one slip through that is not the right method.
FEWER_THAN_TWO = {"7.9": "yes/no", "8.9": "yes/no", "11.11": "f or g", "13.9": "yes/no",
                  "13.4": "one distinguishable slip",
                  **{n: "drill 'write it'" for n in ("90.9", "90.10", "91.7", "91.8", "92.7",
                                                     "92.8", "93.7", "93.8")}}


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.name)
def test_every_exercise_lists_its_two_most_common_mistakes_with_messages(path):
    import nbformat

    from scaling_lib.course.exercises import exercise_namespace, graded_checks
    from scaling_lib.course.exercises.audit import key_modules
    from scaling_lib.course.grading import tables

    nb = nbformat.read(path, as_version=4)
    mods = key_modules(exercise_namespace(nb, path.name))
    for c in graded_checks(nb, path.name):
        mistakes = tables(c.name, mods).mistakes
        need = 0 if FEWER_THAN_TWO.get(c.name) == "drill 'write it'" else (
            1 if c.name in FEWER_THAN_TWO else 2)
        assert len(mistakes) >= need, f"{path.name} {c.name} lists {len(mistakes)} mistakes"
        for m in mistakes:
            assert m.message.strip(), f"{path.name} {c.name}: {m.label!r} has no message"
