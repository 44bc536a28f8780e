"""The checker behind every graded exercise cell.

A graded cell ends with one call to :func:`check` (a number) or :func:`check_function` (a function
the student wrote). The checker prints one clear verdict line, and never lets a raw traceback
escape: an unanswered exercise, a wrong type, NaN, or an exception inside the student's function
all become feedback, and the notebook keeps running.

Verdict lines start with a fixed marker so a grading tool can read a folder of notebooks:

    PASS  ·  NOT SOLVED YET  ·  FAIL

A wrong answer that matches one of the exercise's listed mistakes (its answer key's
``WRONG_METHODS``, within the exercise's tolerance) is named in the student's words ("that is the
forward pass only: the backward pass does twice its work"). Any other wrong number is answered
with its direction and rough size, never with the expected value: "about 2x too large", "about
8x too small: bits vs bytes?", "close, but outside the tolerance: about 3% too small"; a factor's
usual slip (unit prefixes, binary vs decimal units, bits vs bytes) is named only where the
exercise's unit allows it.

Hints live in the answer key (``HINTS``), not in the cell: none before a try, the first (a nudge)
after the first FAIL, the second (the method) after a later one. The hints a student saw are
written in the output (``hint k of n:`` lines, ``[hints seen: k]`` after a PASS), which
:func:`hints_seen_in` reads back for a grading tool.

Each exercise sets its own tolerance with ``check(..., rtol=, atol=)``; the default is 2%
relative. :func:`assess` is the comparison itself (a verdict and its message, printed by
:func:`check`); ``tests/test_wrong_methods.py`` calls it to show that each exercise's listed wrong
methods FAIL and its accepted approximations PASS.

Parametric exercises draw their numbers with :func:`draw` from a seed, so the question changes
when the seed does and the expected answer (computed by ``scaling_lib``) follows.

In exercise notebooks each graded cell starts with the ``%%graded NAME`` cell magic (loaded with
``%load_ext scaling_lib.course.grading``): an exception, ``exit()`` or an interrupted endless loop in the
student's own lines then becomes one FAIL line naming the error and the line of the cell, instead
of a traceback that stops "Run all".

One concept per module:

- :mod:`.feedback`: the verdict markers, the verdict line, and how a miss is described;
- :mod:`.answers`: which answers are accepted or refused, and the comparison itself;
- :mod:`.checks`: :func:`assess` and :func:`check` (a number);
- :mod:`.functions` and :mod:`.timelimit`: :func:`check_function` (a function), each case under
  a time limit;
- :mod:`.parametric`: :func:`draw` and :class:`Params`;
- :mod:`.tables`: what the answer keys list per exercise (mistakes, hints, synonyms);
- :mod:`.session`: what one kernel remembers (the draws, the tries and hints shown);
- :mod:`.magic`: the ``%%graded`` cell magic and :func:`load_ipython_extension`.

See: "How to use this book", section "Exercises".
"""

from .checks import assess, check, named_mistake, named_mistakes
from .feedback import DEFAULT_RTOL, FAIL, NOT_SOLVED, PASS, _fmt
from .functions import check_function
from .magic import load_ipython_extension, run_graded
from .parametric import Params, draw
from .session import hints_seen, hints_seen_in
from .tables import Mistake, Tables, tables
from .timelimit import CASE_TIME_LIMIT
