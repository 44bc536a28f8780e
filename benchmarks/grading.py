"""Print how long the grading tool takes for a class: 30 notebooks of one chapter, in jails.

Run: `python benchmarks/grading.py [--students 30] [--chapter 01_rooflines] [--workers 2]`.
The class is made from the chapter's solutions the way students make it from the exercise
(tests/fixtures/submissions/craft.py): a third worked solutions, a third wrong answers, a third
handed back unanswered, each with its own seed. Numbers are measured, not asserted; the machine's
load average is printed with them (a shared machine inflates the figure).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _craft():
    spec = importlib.util.spec_from_file_location(
        "craft", ROOT / "tests" / "fixtures" / "submissions" / "craft.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> int:
    import nbformat

    from scaling_lib.course import gradebook as gb
    from scaling_lib.course import sandbox

    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--students", type=int, default=30)
    ap.add_argument("--chapter", default="01_rooflines")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    craft = _craft()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "class"
        folder.mkdir()
        seeds = {}
        for i in range(args.students):
            name = f"student{i:02d}"
            seeds[name] = 100 + i
            kind = i % 3
            regions = craft.WRONG if (kind == 1 and args.chapter == craft.CHAPTER) else None
            nb = craft.submission(seeds[name], regions,
                                  default=craft.STUBBED if kind == 2 else craft.KEEP,
                                  chapter=args.chapter)
            nbformat.write(nb, folder / f"{name}_{args.chapter}.ipynb")
        iso = sandbox.detect()
        t0 = time.perf_counter()
        results = gb.grade_folder(folder, course=ROOT, seeds=seeds, workers=args.workers,
                                  cell_timeout=60, isolation=iso)
        seconds = time.perf_counter() - t0
    verdicts = [v for r in results for v in r.exercises.values()]
    print(f"chapter {args.chapter}: {len(results)} notebooks, {len(verdicts)} exercises graded "
          f"in {seconds:.0f} s with {args.workers} workers ({seconds / len(results):.1f} s per "
          f"notebook); isolation {iso.describe()}; {os.cpu_count()} CPUs, load average "
          f"{os.getloadavg()[0]:.1f}")
    print("verdicts: " + ", ".join(f"{v} {verdicts.count(v)}" for v in gb.VERDICTS))
    errors = [r.notebook for r in results if r.status != "graded"]
    if errors:
        print(f"not graded: {errors}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
