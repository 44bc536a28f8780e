"""The command line: ``python -m scaling_lib.course.exercises build [--check]`` and ``run PATHS``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .execute import run
from .transform import MarkupError, build


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scaling_lib.course.exercises", description=_usage(),
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="write exercises/ from solutions/")
    b.add_argument("--check", action="store_true", help="only report stale files (exit 1)")
    b.add_argument("--root", default=".", help="project root (default: current directory)")
    r = sub.add_parser("run", help="execute notebooks in place, storing their outputs")
    r.add_argument("paths", nargs="+", type=Path)
    r.add_argument("--timeout", type=int, default=600, help="seconds per cell (default: 600)")
    args = parser.parse_args(argv)
    if args.cmd == "run":
        return 1 if run(args.paths, timeout=args.timeout) else 0
    try:
        stale = build(Path(args.root), check=args.check)
    except MarkupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.check and stale:
        print("stale (run `python -m scaling_lib.course.exercises build`):\n  " + "\n  ".join(stale))
        return 1
    print("\n".join(f"wrote {s}" for s in stale) if stale else "exercises up to date")
    return 0


def _usage() -> str:
    from . import __doc__ as usage

    return usage
