"""The ``%%graded NAME`` cell magic: the student's errors in a graded cell become one FAIL line.

In exercise notebooks each graded cell starts with ``%%graded NAME`` (loaded with
``%load_ext scaling_lib.course.grading``): an exception, ``exit()`` or an interrupted endless loop in the
student's own lines then becomes one FAIL line naming the error and the line of the cell, instead
of a traceback that stops "Run all".
"""

from __future__ import annotations

import traceback

from .feedback import FAIL, _emit


_CELL = "<exercise cell>"
_MISSING = object()


def _refuse_exit(*args, **kwargs):
    """Stands in for ``exit``/``quit`` while a graded cell runs: stop the cell, not the kernel."""
    raise SystemExit(*args[:1])


def _cell_line(tb) -> str:
    frames = [f for f in traceback.extract_tb(tb) if f.filename == _CELL]
    return f" (line {frames[-1].lineno})" if frames else ""


def run_graded(name: str, source: str, namespace: dict, *, first_line: int = 1) -> None:
    """Run a graded cell's ``source`` in ``namespace``; report the student's errors as a FAIL line.

    ``first_line`` is the line number the reader sees for the first line of ``source`` (2 under
    ``%%graded``, whose own line is line 1), so reported lines match the cell on screen. An
    exception, ``exit()``/``quit()``/``sys.exit()`` (SystemExit) and an interrupt
    (KeyboardInterrupt, e.g. the reader stopping an endless loop) each become one FAIL line, and
    "Run all" goes on.

    >>> ns = {}
    >>> run_graded("1.1", "answer = 1 / 0", ns)
    FAIL: 1.1: your code raised ZeroDivisionError: division by zero (line 1)
    >>> run_graded("1.1", "answer = 2\\nexit()", ns, first_line=2); ns["answer"]
    FAIL: 1.1: your code called exit() or sys.exit() (line 3): remove that line
    2
    """
    name = name.strip() or "exercise"
    try:
        code = compile("\n" * (first_line - 1) + source, _CELL, "exec")
    except SyntaxError as exc:
        _emit(FAIL, name, f"SyntaxError on line {exc.lineno}: {exc.msg}")
        return
    saved = {k: namespace.get(k, _MISSING) for k in ("exit", "quit")}
    namespace.update(exit=_refuse_exit, quit=_refuse_exit)
    try:
        exec(code, namespace)
    except SystemExit as exc:
        _emit(FAIL, name, f"your code called exit() or sys.exit(){_cell_line(exc.__traceback__)}: "
              "remove that line")
    except KeyboardInterrupt as exc:
        _emit(FAIL, name, f"interrupted{_cell_line(exc.__traceback__)}: does a loop never end?")
    except Exception as exc:  # student code: report, never crash the notebook
        _emit(FAIL, name, f"your code raised {type(exc).__name__}: {exc}"
              f"{_cell_line(exc.__traceback__)}")
    finally:
        for k, old in saved.items():
            if namespace.get(k) is _refuse_exit:
                if old is _MISSING:
                    del namespace[k]
                else:
                    namespace[k] = old


def load_ipython_extension(ipython) -> None:
    """``%load_ext scaling_lib.course.grading`` registers the ``%%graded NAME`` cell magic."""

    def graded(line, cell):
        run_graded(line, cell, ipython.user_ns, first_line=2)

    ipython.register_magic_function(graded, magic_kind="cell", magic_name="graded")
