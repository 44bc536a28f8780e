"""Generate the exercise notebooks from the solution notebooks (the one source of truth).

    python -m scaling_lib.course.exercises build          # write exercises/ from solutions/
    python -m scaling_lib.course.exercises build --check  # exit 1 if exercises/ is stale
    python -m scaling_lib.course.exercises run solutions/*.ipynb  # re-execute each, store outputs;
                                                           # exit 1 if any notebook failed

Marking a solution notebook:

- In a code cell, the lines between ``# BEGIN SOLUTION`` and ``# END SOLUTION`` are the solution.
  In the exercise they are replaced by the region's ``# STUB: <code>`` lines (uncommented), or,
  when there are none and the region is indented (a function body), by
  ``raise NotImplementedError``. A top-level region must give its stub (``# STUB: answer = None``).
- A markdown cell tagged ``solution`` (the worked answer) is left out of the exercise.
- A cell that calls the checker is tagged ``graded``. In the solutions the build adds
  ``nbval-check-output`` (nbval compares its stored PASS lines) and ``hide-input`` to cells with a
  solution region (the book shows them collapsed).
- In the first markdown cell, "Solutions" becomes "Exercises".
- In the exercise, each graded cell starts with ``%%graded NAME`` (NAME from its checker call's
  ``name=``) and the cell importing ``scaling_lib.course.grading`` also loads that extension, so an
  exception in the student's code is reported as a FAIL line and "Run all" keeps going.

Tolerances: :func:`audit_methods` evaluates each graded ``check(...)`` of a solutions notebook over
many seeds and checks that the answer key's ``WRONG_METHODS`` FAIL and its ``ACCEPTED_METHODS``
PASS at the tolerance the call sets (``tests/test_wrong_methods.py`` runs it on every notebook).

Needs ``nbformat`` (and ``nbclient`` for ``run``), imported lazily.

One concept per module: :mod:`.transform` (solution notebook -> exercise notebook, ``build``),
:mod:`.execute` (``run``), :mod:`.graded_cells` (the graded cells of a notebook, parsed),
:mod:`.audit` (the wrong-method audit), :mod:`.cli` (the command line; ``__main__``).
"""

from .audit import audit_methods, listed_methods
from .cli import main
from .execute import run
from .graded_cells import GradedCheck, exercise_namespace, graded_checks
from .transform import (BEGIN, CHECK_NAME, END, GRADING_IMPORT, LOAD_EXT, NOT_IMPLEMENTED, STUB,
                        MarkupError, build, make_exercise, normalize_solutions, strip_solutions)

__all__ = ["build", "make_exercise", "normalize_solutions", "strip_solutions", "run", "main",
           "MarkupError", "GradedCheck", "graded_checks", "exercise_namespace", "listed_methods",
           "audit_methods"]
