"""Rewrite the output under README.md's command-line examples with what the commands print now.

    python tools/readme_examples.py [COMMAND ...]

Runs every ``$ scaling-lib ...`` example of README.md whose subcommand is among COMMANDS
(default: estimate plan optimal calibrate), in order, in one scratch folder holding the
repository's ``examples/`` (as tests/test_readme.py runs them), and puts each command's output
under it. Examples shown without output stay without. tests/test_readme.py checks the result.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREFIXES = ("scaling-lib ", "python -m scaling_lib ")


def main(commands) -> int:
    sys.path.insert(0, str(ROOT))
    from scaling_lib import cli

    readme = ROOT / "README.md"
    lines = readme.read_text().splitlines()
    out, i, fence = [], 0, False
    with tempfile.TemporaryDirectory() as d:
        os.symlink(ROOT / "examples", Path(d) / "examples")
        cwd = os.getcwd()
        os.chdir(d)
        try:
            while i < len(lines):
                line = lines[i]
                out.append(line)
                i += 1
                if line.startswith("```"):
                    fence = not fence
                    continue
                if not (fence and line.startswith("$ ") and line[2:].startswith(PREFIXES)):
                    continue
                cmd = line[2:]
                while cmd.endswith("\\"):
                    out.append(lines[i])
                    cmd = cmd[:-1] + " " + lines[i].strip()
                    i += 1
                argv = shlex.split(cmd)
                argv = argv[1:] if argv[0] == "scaling-lib" else argv[3:]
                shown_start = i
                while i < len(lines) and not lines[i].startswith(("$ ", "```")):
                    i += 1
                if argv[0] not in commands or i == shown_start:  # not ours, or no output shown
                    out.extend(lines[shown_start:i])
                    continue
                buf = io.StringIO()
                with contextlib.redirect_stdout(buf):
                    code = cli.main(argv)
                if code:
                    raise SystemExit(f"{cmd!r} exited with {code}")
                out.extend(x.rstrip() for x in buf.getvalue().rstrip().splitlines())
        finally:
            os.chdir(cwd)
    readme.write_text("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(set(sys.argv[1:]) or {"estimate", "plan", "optimal", "calibrate"}))
