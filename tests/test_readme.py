"""The README's command-line examples print what the README says they print.

Every fenced block of README.md whose lines start with ``$ scaling-lib`` or
``$ python -m scaling_lib`` is run in-process (``scaling_lib.cli.main``); where the README shows
output under a command, the command's output must equal it line for line, so the examples cannot
go stale when the models change. Commands shown without output must still succeed. They run in
order in one scratch folder holding the repository's ``examples/``, as a reader's shell would
(``calibrate ... --out cal.json`` writes the file a later ``--calibration cal.json`` reads).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from scaling_lib import cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PREFIXES = ("scaling-lib ", "python -m scaling_lib ")
TIMING = re.compile(r"\bin [0-9.]+ m?s\b")  # how long a search took varies from run to run


def _lines(text):
    return [TIMING.sub("in <time>", x.rstrip()) for x in text.splitlines()]


def examples():
    out = []
    for block in re.findall(r"^```[^\n]*\n(.*?)^```", README.read_text(), re.S | re.M):
        lines = block.splitlines()
        i = 0
        while i < len(lines):
            line = lines[i]
            if line.startswith("$ ") and line[2:].startswith(PREFIXES):
                cmd = line[2:]
                while cmd.endswith("\\"):
                    i += 1
                    cmd = cmd[:-1] + " " + lines[i].strip()
                i += 1
                shown = []
                while i < len(lines) and not lines[i].startswith("$ "):
                    shown.append(lines[i])
                    i += 1
                out.append((cmd, "\n".join(shown).rstrip()))
            else:
                i += 1
    return out


EXAMPLES = examples()


def test_the_readme_has_examples_of_every_figure_printing_command():
    commands = {shlex.split(c)[1 if c.startswith("scaling-lib") else 3] for c, _ in EXAMPLES}
    assert {"estimate", "plan", "optimal", "serve", "calibrate"} <= commands


@pytest.fixture(scope="module")
def shell(tmp_path_factory):
    """The scratch folder the examples run in, with the repository's examples/ in it."""
    d = tmp_path_factory.mktemp("readme")
    (d / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    return d


@pytest.mark.parametrize("cmd, shown", EXAMPLES, ids=[c[:60] for c, _ in EXAMPLES])
def test_readme_example_prints_what_it_shows(cmd, shown, capsys, shell, monkeypatch):
    monkeypatch.chdir(shell)
    argv = shlex.split(cmd)
    argv = argv[1:] if argv[0] == "scaling-lib" else argv[3:]
    if argv[0] == "grade":
        pytest.skip("grade needs a folder of submissions (tests/test_gradebook.py runs it)")
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out.rstrip()
    if shown:
        assert _lines(printed) == _lines(shown)
