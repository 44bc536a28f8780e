"""Grading one notebook in its jail (:func:`grade_notebook`), and a class (:func:`grade_folder`).

:func:`grade_notebook` reads the submission safely (:mod:`.files`), plans it against its chapter
(:mod:`.submission`), computes every expected value in the grading process first
(:meth:`Chapter.expected_all`, before any student code runs), then runs the notebook in a
jailed kernel (``scaling_lib.course.sandbox``) with each checker call removed, probing answers
(:mod:`.probe`); implement-it exercises run again in a fresh jail each. A crash or hang costs only
that exercise (the kernel is restarted and the locked cells re-run).

:func:`grade_folder` grades every submission of a folder, each in its own worker process
(:mod:`.worker`) watched by a deadline, a few at a time; each result is written to its own file,
atomically, as soon as it is known; the final report is written only after every process of
every jail is gone.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .chapter import Course
from .files import PATTERN, find_submissions, parse_name, read_notebook
from .flags import scan
from .probe import (CASE_TIME_LIMIT, forget, function_timeout, new_nonce, payload, probe_cell,
                    run_function)
from .submission import plan_submission, seed_value, with_seed
from .verdicts import Result, verdict_function, verdict_value

DUPLICATES = ("latest", "earliest", "all")


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


# ---- seeds, students, the folder -------------------------------------------------------------

def read_seeds(path) -> dict:
    """``student,seed`` rows (a header row is allowed) -> {student: seed}; one-line ValueError
    for a seed that is not an integer in 0 <= seed < 2**32 or a student named twice."""
    seeds = {}
    try:
        f = open(path, newline="", encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ValueError(f"--seeds {str(path)!r} cannot be read ({exc.strerror}); give a CSV "
                         "of student,seed rows") from None
    with f:
        for row in csv.reader(f):
            if len(row) < 2 or not row[0].strip() or row[0].strip().lower() == "student":
                continue
            name, text = row[0].strip(), row[1].strip()
            seed = seed_value(text)
            if seed is None:
                shown = text if len(text) <= 20 else text[:12] + "..."
                raise ValueError(f"{path}: seed {shown!r} of {name!r} is not an integer in "
                                 "0 <= seed < 2**32; write rows as student,seed")
            if name in seeds and seeds[name] != seed:
                raise ValueError(f"{path}: student {name!r} has two seeds ({seeds[name]} and "
                                 f"{seed}); give one row per student")
            seeds[name] = seed
    return seeds


def student_of(rel: str) -> str:
    """The student of a submission by the file-name pattern (any chapter-like ``NN_name``).

    >>> student_of("alice/07_mfu.ipynb"), student_of("bob_07_mfu.ipynb")
    ('alice', 'bob')
    """
    parts = Path(rel).parts
    if len(parts) > 1:
        return parts[0]
    stem = Path(rel).stem
    return re.sub(r"_\d\d_[a-z0-9_]*$", "", stem) or stem


def plan_folder(folder, course: Course, *, seeds: dict | None = None,
                duplicates: str = "latest") -> tuple[list, list[Result]]:
    """The submissions to grade ``[(entry, assigned seed)]`` and the results of those that are
    not graded (refused names or files, superseded second submissions). Raises ValueError (one
    line) when ``seeds`` lacks a student who submitted."""
    if duplicates not in DUPLICATES:
        raise ValueError(f"duplicates={duplicates!r}: choose one of {', '.join(DUPLICATES)}")
    entries = find_submissions(folder, list(course.paths), course.root)
    skipped, ok = [], []
    for e in entries:
        if e.refused:
            r = Result(e.rel, e.student or student_of(e.rel), e.chapter, None)
            r.status = "unreadable"
            r.flags.append(f"unreadable: {e.refused}: nothing graded")
            skipped.append(r)
        else:
            ok.append(e)
    if seeds is not None:
        missing = sorted({e.student for e in ok} - set(seeds))
        if missing:
            shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5
                                              else "")
            raise ValueError(f"--seeds has no seed for {shown}: add a student,seed row for each "
                             f"student who submitted (names as in {PATTERN})")
    groups: dict = {}
    for e in ok:
        groups.setdefault((e.student, e.chapter), []).append(e)
    todo = []
    for (student, chapter), es in groups.items():
        es.sort(key=lambda e: (e.mtime, e.rel))
        keep = es if duplicates == "all" else [es[-1] if duplicates == "latest" else es[0]]
        for e in es:
            if e in keep:
                todo.append((e, None if seeds is None else seeds[student]))
                if len(es) > 1:
                    others = ", ".join(x.rel for x in es if x is not e)
                    e.note = "; ".join(filter(None, [e.note, f"{len(es)} submissions of "
                                                     f"{chapter} by {student} (also {others})"]))
            else:
                r = Result(e.rel, student, chapter, None)
                r.status = "superseded"
                r.flags.append(f"superseded: another submission of {chapter} by {student} is "
                               f"graded ({keep[0].rel}; --duplicates {duplicates})")
                skipped.append(r)
    todo.sort(key=lambda t: t[0].rel)
    return todo, skipped


def grade_folder(folder, *, course=None, cell_timeout=60.0, notebook_timeout=600.0,
                 memory_bytes=4 * 2**30, seeds=None, flag_keys=False, progress=None,
                 results_dir=None, workers: int | None = None, isolation=None,
                 duplicates: str = "latest", resume: bool = False,
                 worker_timeout: float | None = None) -> list:
    """Grade every submission under ``folder``; returns one :class:`Result` per ``*.ipynb``.

    Each notebook is graded by its own worker process (``workers`` at a time, default: the CPU
    count, at most 4) with a deadline; its result is written to ``results_dir`` (default: a
    temporary folder) as soon as it is known, atomically. ``resume`` keeps results already there
    for unchanged files. A worker still running after ``worker_timeout`` seconds (default: the
    notebook limit plus the fresh processes of its implement-it exercises plus a minute) is
    killed with everything below it: that notebook's result is an error. Returns after every
    process of every jail is gone.
    """
    from ..sandbox import become_subreaper, detect, remove_tree

    folder = Path(folder)
    course = course if isinstance(course, Course) else Course(course)
    iso = isolation or detect()
    todo, results = plan_folder(folder, course, seeds=seeds, duplicates=duplicates)
    for r in results:
        if progress:
            progress(r)
    tmp_results = None
    if results_dir is None:
        tmp_results = results_dir = tempfile.mkdtemp(prefix="grader-results-")
    results_dir = Path(results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    from ..sandbox import descendants

    become_subreaper()
    spare = frozenset(descendants(os.getpid()))   # the host program's own children
    base = tempfile.mkdtemp(prefix="grader-", dir=_scratch_root())
    os.chmod(base, 0o711)
    n_workers = max(1, min(workers or os.cpu_count() or 1, 4))
    try:
        course_path = str(snapshot_course(course.root, Path(base) / "course"))
        running: list = []
        queue_ = list(todo)
        while queue_ or running:
            while queue_ and len(running) < n_workers:
                entry, seed = queue_.pop(0)
                out = results_dir / (_safe(entry.rel) + ".json")
                digest = _sha(entry.path)
                if resume and out.exists():
                    old = _load(out)
                    if old is not None and old.sha256 == digest and (seed is None or
                                                                      old.seed == seed):
                        results.append(old)
                        if progress:
                            progress(old)
                        continue
                job = {"path": str(entry.path), "rel": entry.rel, "student": entry.student,
                       "chapter": entry.chapter, "course": str(course.root),
                       "course_path": course_path, "base": base, "cell_timeout": cell_timeout,
                       "notebook_timeout": notebook_timeout, "memory_bytes": memory_bytes,
                       "seed": seed, "flag_keys": flag_keys, "out": str(out),
                       "isolation": [iso.mode, iso.cgroup, iso.separate_user],
                       "note": entry.note}
                running.append(_start_worker(job, entry))
            time.sleep(0.05)
            for w in list(running):
                proc, job, entry, started = w
                limit = worker_timeout or (notebook_timeout + 60 + _n_functions(
                    course, entry.chapter) * function_timeout(8, cell_timeout))
                done = proc.poll() is not None
                if not done and time.monotonic() - started > limit:
                    _kill_tree(proc.pid)
                    proc.wait()
                    done = True
                if not done:
                    continue
                running.remove(w)
                r = _load(Path(job["out"]))
                if r is None:
                    r = _failed(job, course, proc.returncode, time.monotonic() - started)
                    _write(Path(job["out"]), r)
                results.append(r)
                if progress:
                    progress(r)
    finally:
        _kill_everything_below_us(spare)
        remove_tree(Path(base))
        if tmp_results:
            remove_tree(Path(tmp_results))
    return sorted(results, key=lambda r: r.notebook)


def _n_functions(course: Course, stem: str) -> int:
    try:
        return sum(ex.kind == "check_function" for ex in course.chapter(stem).exercises.values())
    except Exception:
        return 4


def _start_worker(job: dict, entry):
    proc = subprocess.Popen([sys.executable, "-m", "scaling_lib.course.gradebook.worker"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True,
                            cwd=job["base"], env={**os.environ, "PYTHONPATH": job["course"]})
    try:
        proc.stdin.write(json.dumps(job).encode())
        proc.stdin.close()
    except OSError:
        pass
    return proc, job, entry, time.monotonic()


def _failed(job: dict, course: Course, code, seconds: float) -> Result:
    r = Result(job["rel"], job["student"], job["chapter"], job["seed"])
    r.status = "error"
    r.sha256 = _sha(Path(job["path"]))
    try:
        for n in course.chapter(job["chapter"]).exercises:
            r.exercises[n] = "error"
            r.messages[n] = ("the grader could not finish this notebook", "")
    except Exception:
        pass
    how = ("was stopped after its time limit (a hang, or a signal from the notebook's code)"
           if code in (-signal.SIGKILL, None) else f"ended with status {code}")
    r.flags.append(f"error: the grader's worker for this notebook {how}")
    r.seconds = seconds
    return r


def _kill_tree(pid: int) -> None:
    from ..sandbox import descendants

    for _ in range(3):
        for p in [pid, *descendants(pid)]:
            try:
                os.kill(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)


def _kill_everything_below_us(spare: frozenset = frozenset()) -> None:
    """Kill every descendant of this process except ``spare`` (those that were there before the
    grading started): orphans of jails were adopted by it (a subreaper); until none is left;
    then the report may be written."""
    from ..sandbox import descendants, reap

    me = os.getpid()
    deadline = time.monotonic() + 30
    while True:
        found = descendants(me) - spare
        reap(found)
        left = [p for p in found if _is_grader_child(p)]
        if not left:
            return
        for p in left:
            try:
                os.kill(p, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"processes {left[:10]} of the jails could not be killed; the "
                               "report was not written (the per-notebook results are kept)")
        time.sleep(0.05)


def _is_grader_child(pid: int) -> bool:
    """Not a zombie (an exited process waiting to be reaped is gone already)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rfind(")") + 2:].split()[0] != "Z"


def _safe(rel: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", rel.replace("/", "__"))
    return name[:150] + "-" + hashlib.sha256(rel.encode()).hexdigest()[:8]


def _sha(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        h = hashlib.sha256()
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                return h.hexdigest()
            h.update(b)
    except OSError:
        return ""
    finally:
        os.close(fd)


def _write(path: Path, r: Result) -> None:
    """Write ``r`` to ``path`` atomically (a temporary file, then a rename)."""
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(r.to_json()))
    os.replace(tmp, path)


def _load(path: Path) -> Result | None:
    try:
        return Result.from_json(json.loads(path.read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None
