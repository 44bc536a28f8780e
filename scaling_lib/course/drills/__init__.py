"""Interview drills: the numbers sheet, timed question sets, system design and conceptual answers.

Every question is generated from the answer keys the chapters use (``scaling_lib.course.keys.drills``,
which calls the library and the chapters' keys), so a changed constant changes a drill and its
answer together. The question bank (:data:`QUESTIONS`) writes the drill notebooks
``solutions/90_numbers.ipynb`` ... ``solutions/93_interview_senior.ipynb``
(``scaling_lib.course.drills_build``),
which then follow the solutions/exercises pattern: ``python -m scaling_lib.course.exercises build`` makes
the student versions and the grading tool grades them like any chapter.

:func:`quiz` draws a multiple-choice round from a seed without a notebook: each numeric question
with its right answer and the common wrong answers (``WRONG_METHODS``) as distractors.

See: the "Interview preparation" part of the book.

The package, one concept per module (every name is also importable from here):
:mod:`.sheet` (the numbers sheet), :mod:`.bank` (the question bank), :mod:`.design` (system
design answers from the planner and the estimators), :mod:`.concept_bank` (conceptual questions
with answers at three depths and rubrics), :mod:`.conceptual` (their views for the drill pages),
:mod:`.mock` (the 45-minute mock interview and its score sheet) and :mod:`.quizzes`
(multiple-choice rounds).
"""

from ...parallelism import ParallelPlan
from .bank import _CH, LEVELS, MINUTES, QUESTIONS, Question, _q
from .conceptual import _frontier_days, _run_16k, concepts, reveal
from .design import (design_gpt4_serving, design_long_context, design_low_mfu, design_serving,
                     design_training, gpt4_serving_answer, long_context_answer, low_mfu_answer,
                     serving_answer, training_answer)
from .quizzes import quiz
from .sheet import CHIPS, MODELS, chip_rows, collective_rows, model_rows, recipe_rows

__all__ = ["QUESTIONS", "Question", "LEVELS", "MINUTES", "CHIPS", "MODELS", "chip_rows",
           "recipe_rows", "model_rows", "collective_rows", "design_training", "design_serving",
           "design_gpt4_serving", "design_low_mfu", "design_long_context", "training_answer",
           "serving_answer", "gpt4_serving_answer", "low_mfu_answer", "long_context_answer",
           "concepts", "reveal", "quiz"]
