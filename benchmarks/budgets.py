"""Print the course's time budgets, measured (not asserted): run with `make bench`.

Budgets (issue 2): `make test` <= 10 min and `make book` <= 15 min from cold on a 2-core machine;
each chapter executes in <= 60 s (<= 90 s for the hardware and parallelism chapters). Pass --cold
to time the install too, in a throw-away clone.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(cmd, cwd, env=None) -> tuple[float, int]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0, proc.returncode


def chapter_times() -> list[tuple[str, float]]:
    import nbformat
    from nbclient import NotebookClient

    out = []
    for path in sorted((ROOT / "chapters").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        t0 = time.perf_counter()
        NotebookClient(nb, timeout=600, kernel_name="python3",
                       resources={"metadata": {"path": str(path.parent)}}).execute()
        out.append((path.name, time.perf_counter() - t0))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--cold", action="store_true",
                    help="clone into a temp dir and time `make test` and `make book` from cold")
    args = ap.parse_args()
    if args.cold:
        with tempfile.TemporaryDirectory() as tmp:
            clone = Path(tmp) / "clone"
            subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
            for target in ("test", "book"):
                secs, rc = timed(["make", target], clone)
                print(f"make {target} (cold clone{' , venv reused' if target == 'book' else ''}):"
                      f" {secs:7.1f} s  exit {rc}")
    for name, secs in chapter_times():
        print(f"chapter {name:32s} {secs:6.1f} s")
    with tempfile.TemporaryDirectory() as tmp:
        jb = Path(sys.executable).with_name("jupyter-book")
        secs, rc = timed([str(jb), "build", str(ROOT), "--toc", "book/_toc.yml",
                          "--path-output", tmp, "-W", "--keep-going"], ROOT, dict(os.environ))
        print(f"book build (venv warm):           {secs:6.1f} s  exit {rc}")
    shutil.rmtree(ROOT / ".pytest_cache", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
