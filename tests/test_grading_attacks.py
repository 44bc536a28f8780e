"""The known attacks on the grading tool (issue 22), graded as one class, in one run.

The class (tests/fixtures/submissions/craft.py `attack_folder`) is built from the real exercise
notebook of chapter 1 and graded with a copy of the course (the attacks aim at it): each attack
must earn nothing, crash nothing, hang nothing, change no other student's grade and leave no
process or file behind.
"""

import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from scaling_lib.course import gradebook as gb
from scaling_lib.course import sandbox

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "craft", ROOT / "tests" / "fixtures" / "submissions" / "craft.py")
craft = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(craft)

ISO = sandbox.detect()
JAILED = ISO.mode in ("bwrap", "unshare")


def _tree_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file() and not p.is_symlink() and "__pycache__" not in p.parts:
            h.update(p.as_posix().encode() + p.read_bytes())
    return h.hexdigest()


def _jail_leftovers() -> set:
    found = set(Path("/dev/shm").glob("grader-*")) | set(Path(tempfile_dir()).glob("grader-*"))
    return found


def tempfile_dir() -> str:
    import tempfile
    return tempfile.gettempdir()


def _canaries() -> list[int]:
    out = []
    for pid in os.listdir("/proc"):
        try:
            if b"xg-escape-canary" in Path(f"/proc/{pid}/cmdline").read_bytes():
                out.append(int(pid))
        except OSError:
            pass
    return out


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    if not JAILED:
        pytest.skip(f"isolation here is {ISO.mode}: the attack class needs a jail "
                    "(install bubblewrap: apt-get install bubblewrap)")
    top = tmp_path_factory.mktemp("attacks")
    course = top / "course"
    course.mkdir()
    shutil.copytree(ROOT / "scaling_lib", course / "scaling_lib",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "solutions", course / "solutions")
    key_file = top / "grading.key"
    os.environ["SCALING_LIB_GRADING_KEY"] = str(key_file)
    folder = craft.attack_folder(top / "submissions", course, key_file)
    before = {p: p.read_bytes() for p in folder.rglob("*.ipynb")
              if p.is_file() and not p.is_symlink() and p.stat().st_size < 2**20}
    course_before = _tree_hash(course / "scaling_lib")
    leftovers = _jail_leftovers()
    cgroups = _run_cgroups()
    out = top / "out" / "gradebook.csv"
    start = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "scaling_lib", "grade", str(folder), "--course", str(course),
         "--seeds", str(folder.parent / "seeds.csv"), "--flag-keys", "--timeout", "10",
         "--notebook-timeout", "120", "--memory", "1024", "--out", str(out), "--json"],
        capture_output=True, text=True, cwd=course, timeout=900,
        env={**os.environ, "PYTHONPATH": str(course)})
    seconds = time.monotonic() - start
    time.sleep(1.0)   # an escaped process would be editing the CSV by now
    import json
    assert run.returncode == 0, run.stderr[-3000:]
    records = {r["notebook"]: r for r in json.loads(run.stdout)}
    return dict(records=records, folder=folder, out=out, before=before, course=course,
                course_before=course_before, leftovers=leftovers, cgroups=cgroups, seconds=seconds,
                key=key_file.read_bytes().strip(), stderr=run.stderr)


def _verdicts(rec):
    return set(rec["exercises"].values())


def test_honest_and_victims_are_graded_right(attacked):
    r = attacked["records"]
    assert _verdicts(r["alice/01_rooflines.ipynb"]) == {"pass"}
    assert _verdicts(r["zz_01_rooflines.ipynb"]) == {"pass"}      # graded after every attack
    assert r["zz_01_rooflines.ipynb"]["seed"] == 4
    assert _verdicts(r["al_x_01_rooflines.ipynb"]) == {"pass"}
    assert r["al_x_01_rooflines.ipynb"]["seed"] == 6


def test_prefix_sharing_names_are_two_students(attacked):
    r = attacked["records"]
    assert r["al_01_rooflines.ipynb"]["student"] == "al"
    assert r["al_x_01_rooflines.ipynb"]["student"] == "al_x"
    assert r["al_01_rooflines.ipynb"]["seed"] == 5
    assert _verdicts(r["al_01_rooflines.ipynb"]) == {"unanswered"}


def test_a_second_submission_is_flagged_and_the_latest_graded(attacked):
    r = attacked["records"]
    assert r["alice_01_rooflines.ipynb"]["status"] == "superseded"
    assert r["alice_01_rooflines.ipynb"]["total"] == 0
    assert any("2 submissions of 01_rooflines by alice" in f
               for f in r["alice/01_rooflines.ipynb"]["flags"])


@pytest.mark.parametrize("name", ["spy", "magic", "printhook", "bigvals", "escape", "peek",
                                  "nontext"])
def test_attacks_earn_nothing(attacked, name):
    rec = attacked["records"][f"{name}_01_rooflines.ipynb"]
    earned = [n for n, v in rec["exercises"].items() if v == "pass"]
    assert earned == [], rec
    if name == "magic":   # code behind a `%` line or in a cell that does not parse is flagged
        assert any("uses the answer key" in f and "magic" in f for f in rec["flags"])
        assert any("does not parse as Python" in f for f in rec["flags"])
        assert any("runs an IPython magic or shell command: `x = !ls /`" in f
                   for f in rec["flags"])
    assert rec["status"] in ("graded", "unreadable")


def test_reading_the_expected_value_finds_nothing(attacked):
    rec = attacked["records"]["spy_01_rooflines.ipynb"]
    # the profile hook, the wrapped key and the frame walk found no expected value: unanswered
    assert set(rec["exercises"].values()) == {"unanswered"}, rec


def test_the_jail_reaches_nothing(attacked):
    # the notebook's answer is 1000 + the paths and grader processes it could reach
    r = gb.grade_notebook  # noqa: F841 (the message comes from the run above)
    rec = attacked["records"]["peek_01_rooflines.ipynb"]
    assert rec["exercises"]["1.1"] == "fail"
    feedback = (attacked["out"].parent / "feedback" / "peek_01_rooflines.md").read_text()
    assert "got 1,000 s" in feedback, feedback


def test_huge_values_and_a_huge_seed_crash_nothing(attacked):
    r = attacked["records"]
    assert set(r["bigvals_01_rooflines.ipynb"]["exercises"].values()) <= {"fail", "error",
                                                                          "unanswered"}
    huge = r["hugeseed_01_rooflines.ipynb"]
    assert huge["seed"] == 3 and _verdicts(huge) == {"pass"}
    assert any("not in 0 <= SEED < 2**32" in f for f in huge["flags"])


@pytest.mark.parametrize("name, reason", [
    ("eve_01_rooflines.ipynb", "a link"), ("sol_01_rooflines.ipynb", "a link"),
    ("mal", "a link to a folder"), ("zero_01_rooflines.ipynb", "a link"),
    ("fifo_01_rooflines.ipynb", "not a regular file"),
    ("hard_01_rooflines.ipynb", "hard link to one of the course's notebooks"),
    ("huge_01_rooflines.ipynb", "larger than"), ("dir_01_rooflines.ipynb", "not a regular file"),
    ("nontext_01_rooflines.ipynb", "its source is not text"),
])
def test_links_and_special_files_are_refused(attacked, name, reason):
    rec = attacked["records"][name]
    assert rec["status"] == "unreadable" and rec["total"] == 0
    assert any(reason in f for f in rec["flags"]), rec["flags"]


def test_device_files_are_refused(attacked):
    if os.geteuid() != 0:
        pytest.skip("making a device file needs root")
    rec = attacked["records"]["dev_01_rooflines.ipynb"]
    assert rec["status"] == "unreadable" and any("not a regular file" in f for f in rec["flags"])


def test_no_file_of_the_class_or_the_course_was_changed(attacked):
    for p, data in attacked["before"].items():
        assert p.read_bytes() == data, p
    assert _tree_hash(attacked["course"] / "scaling_lib") == attacked["course_before"]


def _run_cgroups():
    """The cgroups of grading runs on this machine (not of single kernels, 'grader-solo-*')."""
    found = set()
    for ctrl in ("memory", "pids", ""):
        base = Path("/sys/fs/cgroup") / ctrl
        if base.is_dir():
            found |= {p for p in base.rglob("grader-*")
                      if not p.name.startswith(("grader-solo-", "grader-probe-"))}
    return found


def test_nothing_is_left_behind(attacked):
    assert _canaries() == []
    assert _jail_leftovers() <= attacked["leftovers"]
    # Another test worker may be grading right now: its cgroups go when its notebooks end, a
    # leaked one never does.
    new, deadline = _run_cgroups() - attacked["cgroups"], time.monotonic() + 180
    while new and time.monotonic() < deadline:
        time.sleep(2)
        new = {p for p in new if p.exists()}
    assert not new, sorted(map(str, new))


def test_the_report_verifies_and_an_edit_is_caught(attacked, tmp_path):
    out, key = attacked["out"], attacked["key"]
    assert gb.verify_csv(out, key) == []
    rows = out.read_text().splitlines()
    edited = tmp_path / "edited.csv"
    edited.write_text("\n".join([rows[0], rows[1].replace(",fail,", ",pass,", 1)
                                 .replace(",unanswered,", ",pass,", 1)] + rows[2:]) + "\n")
    bad = gb.verify_csv(edited, key)
    assert len(bad) == 1 and "line 2" in bad[0]


def test_the_run_stays_within_its_limits(attacked):
    # 12 kernels, a SIGSTOP, a 3 GiB shared mapping and escaping processes: no hang
    assert attacked["seconds"] < 600


def test_each_graded_notebook_has_its_result_file(attacked):
    folder = attacked["folder"]
    todo, _ = gb.plan_folder(folder, gb.Course(attacked["course"]),
                             seeds=gb.read_seeds(folder.parent / "seeds.csv"))
    files = list((attacked["out"].parent / "results").glob("*.json"))
    assert len(files) == len(todo) > 10
