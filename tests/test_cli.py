"""The command line: subcommands, one-line errors with exit status 2, grade --json records."""

import json
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from scaling_lib import cli

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("argv, needle", [
    ([], "give a command, one of: grade"),
    (["frobnicate"], "invalid choice"),
    (["grade"], "SUBMISSIONS_DIR"),
    (["grade", "/no/such/folder"], "is not a folder"),
    (["grade", ".", "--timeout", "-1"], "--timeout must be a positive number"),
    (["grade", ".", "--timeout", "soon"], "--timeout must be a number"),
    (["grade", "."], "no .ipynb notebooks"),
])
def test_bad_input_is_one_line_exit_2(argv, needle, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err


def test_out_must_be_csv(capsys, tmp_path):
    (tmp_path / "a.ipynb").write_text("{}")
    assert cli.main(["grade", str(tmp_path), "--out", str(tmp_path / "gb.txt")]) == 2
    assert ".csv" in capsys.readouterr().err


def test_module_entry_point_exit_status():
    run = subprocess.run([sys.executable, "-m", "scaling_lib", "grade", "/no/such/folder"],
                         capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 2 and run.stderr.startswith("error: ") and run.stdout == ""


def test_grade_json_records(tmp_path):
    folder = tmp_path / "subs"
    (folder / "ann").mkdir(parents=True)
    sol = nbformat.read(ROOT / "exercises" / "01_rooflines.ipynb", as_version=4)
    nbformat.write(sol, folder / "ann" / "01_rooflines.ipynb")     # unanswered, as handed out
    (folder / "zed_01_rooflines.ipynb").write_text("not json")
    run = subprocess.run([sys.executable, "-m", "scaling_lib", "grade", str(folder), "--json",
                          "--out", str(tmp_path / "out" / "gb.csv"), "--timeout", "20"],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stderr
    records = json.loads(run.stdout)
    assert [r["notebook"] for r in records] == ["ann/01_rooflines.ipynb", "zed_01_rooflines.ipynb"]
    ann, zed = records
    assert set(ann) >= {"notebook", "chapter", "seed", "exercises", "passed", "total", "flags"}
    assert ann["chapter"] == "01_rooflines" and ann["seed"] == 0
    assert set(ann["exercises"].values()) == {"unanswered"} and ann["total"] == 9
    assert ann["passed"] == 0 and ann["flags"] == []
    assert zed["total"] == 0 and zed["flags"]
    assert (tmp_path / "out" / "gb.csv").exists() and (tmp_path / "out" / "pass_rates.png").exists()
    assert len(list((tmp_path / "out" / "feedback").glob("*.md"))) == 2
