"""Grade a folder of submitted exercise notebooks: ``python -m scaling_lib grade SUBMISSIONS_DIR``.

How a verdict is reached (nothing the student's code prints, defines or patches decides it):

1. The submission is matched to its chapter (by file name, else by its ``%%graded`` names) and
   compared with the exercise notebook generated from ``solutions/`` (the locked cells and the
   locked lines of each graded cell); edits are flagged. Its seed is the ``SEED = n`` literal of
   its locked set-up cell (or the instructor's assigned seed, ``--seeds``).
2. A copy runs in a fresh kernel (``sandbox``: own process session, memory limit, per-cell and
   per-notebook time limits). Before each graded cell the grader removes the student's answer
   name; after it, a probe cell sends back the *value* of the checker call's first argument
   (``answer``) or, for "implement" exercises, what the student's function returns on the
   exercise's cases (computed in the grader, run in the kernel with a per-case time limit). Values
   travel as tagged JSON, never pickle. A crash or a hang costs that exercise; the kernel is
   restarted, the locked set-up cells re-run, and grading goes on.
3. The grading process recomputes the expected value from the answer key (``scaling_lib.course.keys``)
   for the notebook's seed, with the draw and tolerance of the solutions notebook, and decides with
   :func:`scaling_lib.course.grading.assess`, the comparison the notebooks print.

So printing "PASS", redefining ``check``, patching numpy or the checker inside the kernel, editing
the locked lines or changing ``SEED`` earns nothing. What the tool cannot prevent: the keys are
public, so a student can compute an answer with ``key.some_exercise(p)`` (or import the key
module); ``flag_keys=True`` flags any use of the key module, ``__import__``, ``importlib`` or
``sys.modules`` in the student's own code. Such a scan is a heuristic (code can be obfuscated);
it catches the direct ways.

The package, one concept per module:

- :mod:`.codec`: the tagged-JSON value codec shared by the grader and the kernel;
- :mod:`.chapter`: the chapter a submission is compared with (:class:`Course`, :class:`Chapter`,
  :class:`Exercise`), built from ``solutions/``;
- :mod:`.submission`: reading a submission against its chapter (:func:`plan_submission`);
- :mod:`.flags`: tampering and key-use flags (:func:`scan`);
- :mod:`.probe`: the probe cells that bring answers back from the kernel;
- :mod:`.verdicts`: verdicts from the probe's payload (:class:`Result`);
- :mod:`.grade`: grading a notebook or a folder (:func:`grade_notebook`, :func:`grade_folder`);
- :mod:`.reports`: CSV, table, feedback, pass-rate plot and the exercise :func:`catalog`.
"""

from .chapter import Chapter, Course, Exercise, course_root, load_chapter
from .codec import CODEC, decode, encode, split_case
from .files import MAX_BYTES, PATTERN, Entry, find_submissions, parse_name, read_notebook
from .flags import scan
from .grade import DUPLICATES, grade_folder, grade_notebook, plan_folder, read_seeds, student_of
from .reports import (
    SYMBOL,
    catalog,
    exercise_names,
    grading_key,
    plot_pass_rates,
    row_checksum,
    table,
    verify_csv,
    write_csv,
    write_feedback,
)
from .submission import Plan, plan_submission
from .verdicts import CASE_TIME_LIMIT, VERDICTS, Result, verdict_function, verdict_value

__all__ = ["Course", "Chapter", "Exercise", "Result", "grade_notebook", "grade_folder",
           "plan_submission", "scan", "write_csv", "write_feedback", "table", "plot_pass_rates",
           "read_seeds", "find_submissions", "student_of", "exercise_names", "VERDICTS", "CODEC",
           "verify_csv", "grading_key", "row_checksum", "PATTERN", "parse_name", "read_notebook",
           "plan_folder", "DUPLICATES", "MAX_BYTES", "Entry"]
