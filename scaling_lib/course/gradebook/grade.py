"""Grading: one submitted notebook in a sandboxed kernel, or a whole folder of them.

:func:`grade_notebook` plans the submission (:mod:`.submission`), scans the student's code
(:mod:`.flags`), runs a copy cell by cell in a fresh limited kernel (``scaling_lib.course.sandbox``),
forgetting the answer name before each graded cell and probing it after (:mod:`.probe`); a crash
or hang costs only that exercise (the kernel is restarted and the locked cells re-run).
:func:`grade_folder` does this for every notebook under a folder, with seeds from
:func:`read_seeds` and students from :func:`student_of`.
"""

from __future__ import annotations

import csv
import re
import shutil
import tempfile
import time
from pathlib import Path

from .chapter import Course
from .flags import scan
from .probe import _forget, _probe, _revive
from .submission import plan_submission
from .verdicts import Result

def grade_notebook(path: Path, rel: str, course: Course, *, cell_timeout: float = 60.0,
                   notebook_timeout: float = 600.0, memory_bytes: int | None = 4 * 2**30,
                   assigned_seed: int | None = None, flag_keys: bool = False) -> Result:
    """Grade one submitted notebook (a copy runs; ``path`` is only read)."""
    import nbformat

    from ..sandbox import Kernel

    start = time.monotonic()
    res = Result(rel, student_of(rel), None, None)
    try:
        nb = nbformat.reads(path.read_text(encoding="utf-8", errors="replace"), as_version=4)
    except Exception as exc:
        res.flags.append(f"unreadable notebook ({type(exc).__name__}): nothing graded")
        res.seconds = time.monotonic() - start
        return res
    stem = course.identify(path, nb.cells)
    if stem is None:
        res.flags.append("cannot tell which chapter this is (no chapter name in the file name, "
                         "no %%graded cells): nothing graded")
        res.seconds = time.monotonic() - start
        return res
    chapter = course.chapter(stem)
    res.chapter = stem
    plan = plan_submission(nb, chapter)
    res.flags += plan.flags
    seed = plan.seed
    if assigned_seed is not None:
        if seed != assigned_seed:
            res.flags.append(f"seed {seed} differs from the assigned seed {assigned_seed}: "
                             "graded at the assigned seed")
        seed = assigned_seed
    res.seed = seed
    for where, (src, lines) in plan.student_code.items():
        for what in scan(src, lines, chapter.key_aliases, flag_keys):
            res.flags.append(f"{where}: {what}")
    for n in chapter.exercises:
        res.exercises[n] = "unanswered" if n in plan.missing else "error"
        res.messages[n] = ("the graded cell is missing" if n in plan.missing else
                           "the cell did not run", chapter.exercises[n].hint)
    if seed is None:
        res.seconds = time.monotonic() - start
        return res

    deadline = start + notebook_timeout
    with tempfile.TemporaryDirectory(prefix="grade-") as tmp:
        shutil.copy(path, Path(tmp) / "submission.ipynb")
        kernel = Kernel(tmp, memory_bytes=memory_bytes, env_path=str(course.root))
        try:
            kernel.start()
            prelude: list[str] = []
            for kind, src, name in plan.cells:
                left = deadline - time.monotonic()
                if left <= 0:
                    res.flags.append("the notebook ran past its time limit "
                                     f"({notebook_timeout:g} s): the rest was not graded")
                    break
                if kind != "graded":
                    out = kernel.run(src, min(cell_timeout, left))
                    if kind == "locked":
                        prelude.append(src)
                    if out.died or out.timed_out:
                        label = "a locked cell" if kind == "locked" else "an added cell"
                        what = ("ran past the cell time limit" if out.timed_out else
                                "crashed the kernel")
                        res.flags.append(f"{label} {what}")
                        if out.died:
                            _revive(kernel, prelude, cell_timeout, res)
                    continue
                ex = chapter.exercises[name]
                for gone in ex.forget:
                    kernel.run(_forget(gone), cell_timeout)
                out = kernel.run(src, min(cell_timeout, left))
                if out.died or (out.timed_out and out.notes):
                    res.exercises[name] = "error"
                    why = ("ran past the cell time limit and ignored the interrupt"
                           if out.timed_out else "stopped the kernel (exit, crash or memory)")
                    res.messages[name] = (f"the cell {why}", ex.hint)
                    res.flags.append(f"{name}: the cell {why}; the kernel was restarted")
                    _revive(kernel, prelude, cell_timeout, res)
                    continue
                if out.timed_out:
                    res.flags.append(f"{name}: the cell ran past the {cell_timeout:g} s limit "
                                     "and was interrupted")
                res.exercises[name], msg = _probe(kernel, ex, chapter, seed, cell_timeout)
                if out.timed_out and res.exercises[name] == "error":
                    msg = f"the cell ran past the {cell_timeout:g} s limit (interrupted)"
                res.messages[name] = (msg, ex.hint)
                if not kernel.alive():
                    _revive(kernel, prelude, cell_timeout, res)
        except RuntimeError as exc:
            res.flags.append(str(exc))
        finally:
            kernel.stop()
    res.seconds = time.monotonic() - start
    return res


def read_seeds(path) -> dict:
    """``student,seed`` rows (a header row is allowed) -> {student: seed}."""
    seeds = {}
    with open(path, newline="") as f:
        for row in csv.reader(f):
            if len(row) < 2 or not row[0].strip() or row[0].strip().lower() == "student":
                continue
            try:
                seeds[row[0].strip()] = int(row[1])
            except ValueError:
                raise ValueError(f"{path}: seed {row[1]!r} of {row[0]!r} is not an integer; "
                                 "write rows as student,seed") from None
    return seeds


def student_of(rel: str) -> str:
    """The student a submission belongs to: its first folder (``alice/07_mfu.ipynb``), else its
    file name without the chapter (``bob_07_mfu.ipynb`` -> ``bob``), else the whole name.

    >>> student_of("alice/07_mfu.ipynb"), student_of("bob_07_mfu.ipynb"), student_of("07_mfu.ipynb")
    ('alice', 'bob', '07_mfu')
    """
    parts = Path(rel).parts
    if len(parts) > 1:
        return parts[0]
    stem = Path(rel).stem
    return re.sub(r"[_\-. ]*\d\d_[A-Za-z0-9_]*$", "", stem) or stem


def find_submissions(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.ipynb")
                  if ".ipynb_checkpoints" not in p.parts and not p.name.startswith("."))


def grade_folder(folder, *, course=None, cell_timeout=60.0, notebook_timeout=600.0,
                 memory_bytes=4 * 2**30, seeds=None, flag_keys=False, progress=None) -> list:
    """Grade every ``*.ipynb`` under ``folder`` (sorted); returns one :class:`Result` each."""
    folder = Path(folder)
    course = course if isinstance(course, Course) else Course(course)
    results = []
    for path in find_submissions(folder):
        rel = path.relative_to(folder).as_posix()
        student = student_of(rel)
        r = grade_notebook(path, rel, course, cell_timeout=cell_timeout,
                           notebook_timeout=notebook_timeout, memory_bytes=memory_bytes,
                           assigned_seed=(seeds or {}).get(student), flag_keys=flag_keys)
        results.append(r)
        if progress:
            progress(r)
    return results
