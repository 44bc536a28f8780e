"""Grading one notebook in its jail: :func:`grade_notebook`.

:func:`grade_notebook` reads the submission safely (:mod:`.files`), plans it against its chapter
(:mod:`.submission`), computes every expected value in the grading process first
(:meth:`Chapter.expected_all`, before any student code runs), then runs the notebook in a
jailed kernel (``scaling_lib.course.sandbox``) with each checker call removed, probing answers
(:mod:`.probe`); implement-it exercises run again in a fresh jail each. A crash or hang costs only
that exercise (the kernel is restarted and the locked cells re-run).

A whole class: :mod:`.classroom`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from pathlib import Path

from .chapter import Course
from .files import PATTERN, parse_name, read_notebook
from .flags import scan
from .probe import forget, function_timeout, new_nonce, payload, probe_cell, run_function
from .submission import plan_submission, with_seed
from .verdicts import Result, verdict_function, verdict_value


def _code_only(src: str) -> str:
    lines = src.splitlines()
    if lines and lines[0].startswith("%%graded"):
        lines[0] = ""
    return "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in lines)


def snapshot_course(root: Path, dest: Path) -> Path:
    """A read-only copy of the course's ``scaling_lib`` under ``dest`` (what jails import)."""
    src = Path(root) / "scaling_lib"
    target = Path(dest) / "scaling_lib"
    shutil.copytree(src, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                    symlinks=False)
    for d, dirs, files in os.walk(dest):
        os.chmod(d, 0o555)
        for f in files:
            os.chmod(os.path.join(d, f), 0o444)
    return Path(dest)


def grade_notebook(path: Path, rel: str, course: Course, *, cell_timeout: float = 60.0,
                   notebook_timeout: float = 600.0, memory_bytes: int | None = 4 * 2**30,
                   assigned_seed: int | None = None, flag_keys: bool = False,
                   student: str | None = None, chapter: str | None = None,
                   isolation=None, base: str | None = None,
                   course_path: str | None = None) -> Result:
    """Grade one submitted notebook (``path`` is only read; the kernel never sees it).

    ``isolation``: a :class:`~scaling_lib.course.sandbox.Isolation` (default: detected);
    ``base``: the folder jails are made in; ``course_path``: the read-only course snapshot the
    jails import (made here when None).
    """
    from ..sandbox import Jail, Kernel, detect, remove_tree

    start = time.monotonic()
    iso = isolation or detect()
    res = Result(rel, student or parse_name(rel, course.paths)[0] or Path(rel).stem, None, None)
    nb, why = read_notebook(path)
    try:
        res.sha256 = hashlib.sha256(Path(path).read_bytes()).hexdigest() if nb is not None else ""
    except OSError:
        pass
    if nb is None:
        res.status = "unreadable"
        res.flags.append(f"unreadable: {why}: nothing graded")
        res.seconds = time.monotonic() - start
        return res
    stem = chapter or course.identify(Path(path), nb.cells)
    if stem is None:
        res.status = "unreadable"
        res.flags.append(f"unreadable: cannot tell which chapter this is (name it {PATTERN}): "
                         "nothing graded")
        res.seconds = time.monotonic() - start
        return res
    ch = course.chapter(stem)
    res.chapter = stem
    plan = plan_submission(nb, ch)
    res.flags += plan.flags
    seed = plan.seed
    if assigned_seed is not None:
        if seed != assigned_seed:
            res.flags.append(f"seed {seed} differs from the assigned seed {assigned_seed}: "
                             "graded at the assigned seed")
        seed = assigned_seed
    res.seed = seed
    for where, (src, lines) in plan.student_code.items():
        for what in scan(src, lines, ch.key_aliases, flag_keys):
            res.flags.append(f"{where}: {what}")
    for n in ch.exercises:
        res.exercises[n] = "unanswered" if n in plan.missing else "error"
        res.messages[n] = ("the graded cell is missing" if n in plan.missing else
                           "the cell did not run", ch.hint(n))
    res.hints = hints_seen(nb)
    if seed is None:
        res.status = "error"
        res.seconds = time.monotonic() - start
        return res
    expected = ch.expected_all(seed)   # here, before any student code runs anywhere

    own_base = None
    if base is None:
        own_base = base = tempfile.mkdtemp(prefix="grader-", dir=_scratch_root())
        os.chmod(base, 0o711)
    try:
        if course_path is None:
            course_path = str(snapshot_course(course.root, Path(base) / "course"))
        kernel = Kernel(memory_bytes=memory_bytes, env_path=course_path, isolation=iso,
                        base=base)
        functions = _run_kernel(kernel, plan, ch, seed, expected, res, cell_timeout,
                                start + notebook_timeout)
        env = {"PYTHONPATH": course_path}
        for name, cell in functions:
            ex = ch.exercises[name]
            exp = expected.get(name)
            if isinstance(exp, BaseException) or exp is None:
                res.exercises[name] = "error"
                res.messages[name] = (f"the answer key raised {type(exp).__name__}: {exp}",
                                      ch.hint(name))
                continue
            reference, cases = exp
            prelude = with_seed(ch.prelude(name), seed)
            got, problem = run_function(
                lambda: Jail(iso, base, memory_bytes=memory_bytes, ro=(course_path,)), ex,
                prelude, _code_only(cell), cases,
                timeout=function_timeout(len(cases), cell_timeout), env=env)
            if problem:
                res.exercises[name] = "error"
                res.messages[name] = (f"the function {problem}", ch.hint(name))
                res.flags.append(f"{name}: the function {problem}")
                continue
            res.exercises[name], msg = verdict_function(ex, got, reference, cases)
            res.messages[name] = (msg, ch.hint(name))
    except Exception as exc:  # the tool's own failure on this notebook: that notebook's error
        res.status = "error"
        res.flags.append(f"error: the grader failed on this notebook ({type(exc).__name__}: "
                         f"{str(exc)[:200]})")
    finally:
        if own_base:
            remove_tree(Path(own_base))
    res.seconds = time.monotonic() - start
    return res


def hints_seen(nb) -> dict:
    """{exercise: hints the student saw}, read from the notebook's saved outputs (the checker
    prints them) where the checker reports hints (``grading.hints_seen_in``); the outputs are
    the student's file, so this is information for the instructor, not proof."""
    try:
        from ..grading import hints_seen_in
    except ImportError:
        return {}
    text = []
    for c in nb.cells:
        if c.get("cell_type") == "code":
            for o in c.get("outputs", []):
                if o.get("output_type") == "stream":
                    text.append(str(o.get("text", "")))
    try:
        found = hints_seen_in("\n".join(text))
        return {str(k): int(v) for k, v in dict(found).items()}
    except Exception:
        return {}


def _run_kernel(kernel, plan, ch, seed, expected, res, cell_timeout, deadline) -> list:
    """Run the notebook's cells in ``kernel``; probe value exercises; return the implement-it
    exercises' cells ``[(name, source)]`` (evaluated afterwards in fresh jails)."""
    functions = []
    prelude: list[str] = []
    try:
        kernel.start()
        for kind, src, name in plan.cells:
            left = deadline - time.monotonic()
            if left <= 0:
                res.flags.append("the notebook ran past its time limit: the rest was not graded")
                break
            if kind == "locked":
                src = with_seed(src, seed)
            if kind != "graded":
                out = kernel.run(src, min(cell_timeout, left))
                if kind == "locked":
                    prelude.append(src)
                if out.died or out.timed_out:
                    label = "a locked cell" if kind == "locked" else "an added cell"
                    res.flags.append(f"{label} " + ("ran past the cell time limit"
                                                   if out.timed_out else "crashed the kernel"))
                    if out.died:
                        _revive(kernel, prelude, cell_timeout)
                continue
            ex = ch.exercises[name]
            for gone in ex.forget:
                kernel.run(forget(gone), cell_timeout)
            out = kernel.run(src, min(cell_timeout, left))
            if ex.kind == "check_function":
                functions.append((name, src))
                if out.died:
                    res.flags.append(f"{name}: the cell stopped the kernel; the kernel was "
                                     "restarted")
                    _revive(kernel, prelude, cell_timeout)
                continue
            if out.died or (out.timed_out and out.notes):
                res.exercises[name] = "error"
                why = ("ran past the cell time limit and ignored the interrupt"
                       if out.timed_out else "stopped the kernel (exit, crash or memory)")
                res.messages[name] = (f"the cell {why}", ch.hint(name))
                res.flags.append(f"{name}: the cell {why}; the kernel was restarted")
                _revive(kernel, prelude, cell_timeout)
                continue
            if out.timed_out:
                res.flags.append(f"{name}: the cell ran past the {cell_timeout:g} s limit "
                                 "and was interrupted")
            exp = expected.get(name)
            if isinstance(exp, BaseException):
                res.exercises[name] = "error"
                res.messages[name] = (f"the answer key raised {type(exp).__name__}: {exp}",
                                      ch.hint(name))
                continue
            nonce = new_nonce()
            got = kernel.run(probe_cell(ex.target, nonce), cell_timeout)
            res.exercises[name], msg = verdict_value(ex, payload(got.text, nonce), exp,
                                                     ch.params(name, seed))
            if out.timed_out and res.exercises[name] == "error":
                msg = f"the cell ran past the {cell_timeout:g} s limit (interrupted)"
            res.messages[name] = (msg, ch.hint(name))
            if not kernel.alive():
                _revive(kernel, prelude, cell_timeout)
    except RuntimeError as exc:
        res.flags.append(str(exc))
    finally:
        if not kernel.stop():
            res.flags.append("error: some of its processes could not be killed")
            res.status = "error"
    return functions


def _revive(kernel, prelude: list[str], timeout: float) -> None:
    """A fresh kernel (and jail) with the locked cells run again, so later exercises go on."""
    kernel.restart()
    for src in prelude:
        kernel.run(src, timeout)


def _scratch_root() -> str | None:
    """Where jails live: /dev/shm when usable (a tmpfs: what a jail writes counts as its memory,
    and never fills the disk), else the system's temporary folder."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


