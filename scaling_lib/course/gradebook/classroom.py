"""A class: who is who and which seed (:func:`plan_folder`), and grading every notebook of a
folder (:func:`grade_folder`), each by its own worker process (:mod:`.worker`) watched by a deadline,
a few at a time; each result is written to its own file, atomically, as soon as it is known, and
the function returns only after every process of every jail is gone.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from .chapter import Course
from .files import PATTERN, find_submissions
from .grade import _scratch_root, snapshot_course
from .probe import function_timeout
from .submission import seed_value
from .verdicts import Result

DUPLICATES = ("latest", "earliest", "all")


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
    import secrets

    from ..sandbox import RUN_ENV, descendants, remove_run_cgroups

    run_id = secrets.token_hex(6)
    course_digest = _course_digest(course.root)
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
                       "note": entry.note, "run": run_id}
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
        stuck = remove_run_cgroups(run_id)
        remove_tree(Path(base))
        if tmp_results:
            remove_tree(Path(tmp_results))
    if stuck:
        raise RuntimeError(f"cgroups {stuck[:3]} still hold processes that could not be killed")
    if _course_digest(course.root) != course_digest:   # only possible without a file jail
        for r in results:
            r.flags.append("the course's files changed while the class was graded (a notebook "
                           "may have written to them): restore the checkout and grade again")
    return sorted(results, key=lambda r: r.notebook)


def _course_digest(root: Path) -> str:
    """One hash of the course's library and solutions (what the keys are computed from)."""
    h = hashlib.sha256()
    for sub in ("scaling_lib", "solutions"):
        for p in sorted(Path(root, sub).rglob("*")):
            if p.is_file() and p.suffix in (".py", ".ipynb", ".json", ".csv"):
                try:
                    h.update(p.as_posix().encode() + p.read_bytes())
                except OSError:
                    pass
    return h.hexdigest()


def _n_functions(course: Course, stem: str) -> int:
    try:
        return sum(ex.kind == "check_function" for ex in course.chapter(stem).exercises.values())
    except Exception:
        return 4


def _start_worker(job: dict, entry):
    from ..sandbox import RUN_ENV

    proc = subprocess.Popen([sys.executable, "-m", "scaling_lib.course.gradebook.worker"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True,
                            cwd=job["base"], env={**os.environ, "PYTHONPATH": job["course"],
                                                  RUN_ENV: job["run"]})
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
