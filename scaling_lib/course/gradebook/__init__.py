"""Grade a folder of submitted exercise notebooks: ``python -m scaling_lib grade SUBMISSIONS_DIR``.

How a verdict is reached (nothing the student's code prints, defines, patches or reads decides it):

1. Who is who: ``STUDENT/NN_chapter.ipynb`` or ``STUDENT_NN_chapter.ipynb`` (:data:`PATTERN`);
   links, special, huge and malformed files are refused with a reason (:mod:`.files`); a second
   submission of a chapter by a student is flagged and the latest graded.
2. The submission is compared with the exercise notebook generated from ``solutions/`` (the locked
   cells and the locked lines of each graded cell); edits are flagged, and the exercise's own
   locked cells are what runs. Its seed is the instructor's (``--seeds``), else the ``SEED = n``
   literal of its set-up cell (0 <= n < 2**32).
3. The grader computes every expected value first, in its own process, by replaying the solutions
   notebook at that seed (:meth:`Chapter.expected_all`).
4. The notebook runs in a jailed kernel (``scaling_lib.course.sandbox``: one jail per notebook,
   the strongest isolation the machine offers) with every checker call removed: the expected
   value never exists where student code runs. A probe sends back the *value* of ``answer`` as
   tagged JSON, never pickle. An implement-it exercise runs again in a fresh jail (the locked
   cells, the student's cell, then the function on the grader's cases). A crash or a hang costs
   that exercise; the kernel is restarted and the locked cells re-run.
5. Verdicts: :func:`scaling_lib.course.grading.assess`, the comparison the notebooks print.
6. Each notebook is graded by its own worker process with a deadline; its result is written at
   once, atomically; the reports (CSV rows with keyed checksums, :func:`verify_csv`) are written
   after every jailed process is gone.

What the tool cannot prevent: the keys are public, so a student can compute an answer with
``key.some_exercise(p)``; ``flag_keys=True`` flags any use of the key module, ``__import__``,
``importlib`` or ``sys.modules`` in the student's own code (behind ``%`` lines too). Such a scan is
a heuristic (code can be obfuscated); it catches the direct ways.

The package, one concept per module:

- :mod:`.files`: file names, and reading a submission safely;
- :mod:`.codec`: the tagged-JSON value codec shared by the grader and the kernel;
- :mod:`.chapter`: the chapter a submission is compared with (:class:`Course`, :class:`Chapter`,
  :class:`Exercise`), built from ``solutions/``, and its expected values;
- :mod:`.submission`: reading a submission against its chapter (:func:`plan_submission`);
- :mod:`.flags`: tampering and key-use flags (:func:`scan`);
- :mod:`.probe`: the probe cell, and the fresh process for functions;
- :mod:`.verdicts`: verdicts from what came back (:class:`Result`);
- :mod:`.grade`: grading a notebook in its jail (:func:`grade_notebook`);
- :mod:`.classroom`: who is who, seeds, duplicates, and grading a folder (:func:`grade_folder`);
- :mod:`.worker`: one notebook in its own process;
- :mod:`.reports`: CSV (with checksums), table, feedback, pass-rate plot and the exercise
  :func:`catalog`.
"""

from .chapter import Chapter, Course, Exercise, course_root, load_chapter
from .codec import CODEC, decode, encode, split_case
from .files import MAX_BYTES, PATTERN, Entry, find_submissions, parse_name, read_notebook
from .flags import scan
from .classroom import DUPLICATES, grade_folder, plan_folder, read_seeds, student_of
from .grade import grade_notebook
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
