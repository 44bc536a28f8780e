"""The command line: ``python -m scaling_lib SUBCOMMAND ...``.

Subcommands (each a small function registered in ``SUBCOMMANDS``; ``estimate``, ``plan``,
``optimal``, ``calibrate`` (``scaling_lib.cli_train``) and ``serve`` join ``grade`` as siblings):

    grade SUBMISSIONS_DIR [--out gradebook.csv] [--timeout S] [--json] ...
        grade a folder of submitted exercise notebooks, each in its own jail
        (see ``scaling_lib.course.gradebook``); ``grade --verify gradebook.csv`` checks a report

Bad input prints one line naming the rule and the valid choices and exits with status 2, without a
traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path


class UsageError(Exception):
    """Bad command-line input; the message names the rule and the valid choices."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints the usage too)
        raise UsageError(f"{self.prog}: {message}")


def _positive(what: str):
    def parse(text: str) -> float:
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{what} must be a number of seconds, got {text!r}")
        if not 0 < x < math.inf:
            raise argparse.ArgumentTypeError(f"{what} must be a positive number, got {text!r}")
        return x
    return parse


def _add_grade(sub) -> None:
    g = sub.add_parser("grade", help="grade a folder of submitted exercise notebooks",
                       description="Grade every .ipynb under SUBMISSIONS_DIR (named "
                       "STUDENT/NN_chapter.ipynb or STUDENT_NN_chapter.ipynb): each runs in its "
                       "own jail; verdicts are recomputed from the answer keys by the grader.")
    g.add_argument("submissions", metavar="SUBMISSIONS_DIR", nargs="?")
    g.add_argument("--out", default="gradebook.csv",
                   help="gradebook CSV (default: gradebook.csv); results/, feedback/ and "
                   "pass_rates.png go next to it")
    g.add_argument("--timeout", type=_positive("--timeout"), default=60.0,
                   help="seconds per cell (default: 60)")
    g.add_argument("--notebook-timeout", type=_positive("--notebook-timeout"), default=600.0,
                   help="seconds per notebook (default: 600)")
    g.add_argument("--memory", type=_positive("--memory"), default=4096.0,
                   help="memory limit of a jail in MiB (default: 4096)")
    g.add_argument("--seeds", help="CSV of student,seed: the seed each student was given "
                   "(every student who submitted needs one)")
    g.add_argument("--duplicates", choices=["latest", "earliest", "all"], default="latest",
                   help="which of a student's submissions of one chapter is graded (default: "
                   "the latest by modification time; the others are listed as superseded)")
    g.add_argument("--isolation", choices=["bwrap", "unshare", "portable"],
                   help="isolation mode (default: the strongest this machine offers)")
    g.add_argument("--workers", type=int, default=None,
                   help="notebooks graded at once (default: the CPU count, at most 4)")
    g.add_argument("--resume", action="store_true",
                   help="keep the results already in results/ for unchanged files")
    g.add_argument("--flag-keys", action="store_true",
                   help="flag student code that uses the answer key module or loads modules "
                   "dynamically")
    g.add_argument("--course", help="course repository holding solutions/ (default: this one)")
    g.add_argument("--key-file", help="secret key of the row checksums (default: "
                   "$SCALING_LIB_GRADING_KEY or ~/.config/scaling_lib/grading.key)")
    g.add_argument("--verify", metavar="CSV", help="check the row checksums of a gradebook CSV "
                   "written by grade, print what was changed, exit 1 if anything was")
    g.add_argument("--json", action="store_true", help="print a JSON list, one record per notebook")
    g.set_defaults(run=_grade)


def _grade(args) -> int:
    from .course import gradebook as gb
    from .course import sandbox

    if args.verify:
        key = gb.grading_key(args.key_file)
        if not Path(args.verify).is_file():
            raise UsageError(f"grade: --verify {args.verify!r} is not a file; give the gradebook "
                             "CSV written by grade")
        bad = gb.verify_csv(args.verify, key)
        for line in bad:
            print(line)
        if not bad:
            print(f"{args.verify}: every row's checksum matches")
        return 1 if bad else 0
    if args.submissions is None:
        raise UsageError("grade: give SUBMISSIONS_DIR, the folder of submitted notebooks "
                         "(or --verify CSV)")
    folder = Path(args.submissions)
    if not folder.is_dir():
        raise UsageError(f"grade: SUBMISSIONS_DIR {str(folder)!r} is not a folder; give the "
                         "folder holding the submitted .ipynb notebooks")
    if not gb.find_submissions(folder):
        raise UsageError(f"grade: no .ipynb notebooks under {str(folder)!r}; give the folder "
                         "holding the submitted notebooks")
    out = Path(args.out)
    if out.suffix.lower() != ".csv":
        raise UsageError(f"grade: --out {args.out!r} must name a .csv file, e.g. gradebook.csv")
    if args.workers is not None and not 1 <= args.workers <= 64:
        raise UsageError(f"grade: --workers {args.workers} must be between 1 and 64")
    seeds = gb.read_seeds(args.seeds) if args.seeds else None
    course = gb.Course(args.course)
    iso = sandbox.detect(args.isolation)
    if args.isolation and iso.mode != args.isolation:
        raise UsageError(f"grade: --isolation {args.isolation} does not work on this machine; "
                         f"the strongest that does is {iso.mode}")
    if iso.warning():
        print(f"warning: {iso.warning()}", file=sys.stderr, flush=True)

    def progress(r):
        if not args.json:
            print(f"graded {r.notebook}: {r.passed}/{r.total} in {r.seconds:.1f} s"
                  + ("" if r.status == "graded" else f" ({r.status})"),
                  file=sys.stderr, flush=True)

    out.parent.mkdir(parents=True, exist_ok=True)
    key = gb.grading_key(args.key_file)
    results = gb.grade_folder(folder, course=course, cell_timeout=args.timeout,
                              notebook_timeout=args.notebook_timeout,
                              memory_bytes=int(args.memory * 2**20), seeds=seeds,
                              flag_keys=args.flag_keys, progress=progress,
                              results_dir=out.parent / "results", workers=args.workers,
                              isolation=iso, duplicates=args.duplicates, resume=args.resume)
    gb.write_csv(results, out, key)
    gb.write_feedback(results, out.parent / "feedback")
    gb.plot_pass_rates(results, out.parent / "pass_rates.png")
    if args.json:
        keep = ("notebook", "student", "chapter", "seed", "exercises", "passed", "total", "flags",
                "status", "hints")
        print(json.dumps([{k: r.record()[k] for k in keep} for r in results], indent=2))
    else:
        print(gb.table(results))
        print(f"isolation: {iso.describe()}")
        print(f"wrote {out}, {out.parent / 'feedback'}/, {out.parent / 'pass_rates.png'}")
    return 0


SUBCOMMANDS = [_add_grade]
from .cli_train import COMMANDS as _TRAINING  # noqa: E402  (estimate, plan, optimal)
SUBCOMMANDS += _TRAINING
from .cli_serve import add_serve; SUBCOMMANDS.append(add_serve)  # noqa: E402, E702


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m scaling_lib", description=__doc__,
                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for add in SUBCOMMANDS:
        add(sub)
    return p


def main(argv=None) -> int:
    p = parser()
    try:
        args = p.parse_args(argv)
        if not getattr(args, "command", None):
            choices = ", ".join(p._subparsers._group_actions[0].choices)
            raise UsageError(f"python -m scaling_lib: give a command, one of: {choices}")
        return args.run(args)
    except UsageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # the library's own input checks name the rule and the choices
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader closed the pipe (e.g. `| head`): stop quietly
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


__all__ = ["main", "parser", "SUBCOMMANDS", "UsageError"]
