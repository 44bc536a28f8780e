"""One notebook, graded in its own process: ``python -m scaling_lib.course.gradebook.worker``.

Reads a job (JSON, from :func:`~.classroom.grade_folder`) on stdin, grades the notebook
(:func:`~.grade.grade_notebook`), writes the result atomically to the job's ``out`` file, and
kills every process left below it (it is a child subreaper: orphans of its jails come back to
it) before it exits. The parent watches it with a deadline, so a notebook that stops or hangs
the worker costs only itself.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> int:
    from ..sandbox import Isolation, become_subreaper
    from .chapter import Course
    from .classroom import _kill_everything_below_us, _write
    from .grade import grade_notebook

    become_subreaper()
    job = json.loads(sys.stdin.read())
    mode, cgroup, separate = job["isolation"]
    r = grade_notebook(Path(job["path"]), job["rel"], Course(job["course"]),
                       cell_timeout=job["cell_timeout"], notebook_timeout=job["notebook_timeout"],
                       memory_bytes=job["memory_bytes"], assigned_seed=job["seed"],
                       flag_keys=job["flag_keys"], student=job["student"], chapter=job["chapter"],
                       isolation=Isolation(mode, cgroup, separate), base=job["base"],
                       course_path=job["course_path"])
    if job.get("note"):
        r.flags.append(job["note"])
    _kill_everything_below_us()
    _write(Path(job["out"]), r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
