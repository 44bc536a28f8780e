"""The grading tool on crafted submissions: correct, wrong, unanswered, attacks, a hang, a crash.

The folder is generated from solutions/01_rooflines.ipynb (tests/fixtures/submissions/craft.py)
and graded once per session with short limits; every verdict and flag is compared with the
expected one.
"""

import hashlib
import importlib.util
from pathlib import Path

import nbformat
import numpy as np
import pytest

from scaling_lib.course import gradebook as gb

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location(
    "craft", ROOT / "tests" / "fixtures" / "submissions" / "craft.py")
craft = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(craft)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = craft.write(tmp_path_factory.mktemp("grading") / "submissions")
    before = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*.ipynb")}
    results = gb.grade_folder(folder, course=ROOT, cell_timeout=5.0, notebook_timeout=90.0,
                              memory_bytes=2**30, seeds=gb.read_seeds(folder.parent / "seeds.csv"),
                              flag_keys=True)
    after = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*.ipynb")}
    return folder, {r.notebook: r for r in results}, before, after


def test_every_crafted_notebook_is_graded(graded):
    _, results, _, _ = graded
    assert set(results) == set(craft.EXPECTED)


@pytest.mark.parametrize("notebook", [k for k, v in craft.EXPECTED.items() if v is not None])
def test_verdicts(graded, notebook):
    _, results, _, _ = graded
    r = results[notebook]
    want = dict(zip(craft.NAMES, craft.EXPECTED[notebook]))
    assert r.exercises == want, (r.exercises, r.flags, r.messages)
    assert r.passed == sum(v == "pass" for v in want.values())
    assert r.total == len(want)


def test_the_assigned_seed_is_applied(graded):
    # the notebook says SEED = 4; the instructor assigned 2: it runs and is graded at seed 2, so
    # answers computed from the drawn numbers pass, and the difference is flagged
    _, results, _, _ = graded
    r = results["swap_01_rooflines.ipynb"]
    assert r.seed == 2
    assert set(r.exercises.values()) == {"pass"}, r.messages


@pytest.mark.parametrize("notebook", list(craft.EXPECTED_FLAGS))
def test_flags(graded, notebook):
    _, results, _, _ = graded
    flags = results[notebook].flags
    for piece in craft.EXPECTED_FLAGS[notebook]:
        assert any(piece in f for f in flags), (piece, flags)


def test_clean_submission_has_no_flags(graded):
    _, results, _, _ = graded
    assert results["alice/01_rooflines.ipynb"].flags == []
    assert results["alice/01_rooflines.ipynb"].student == "alice"


def test_originals_untouched(graded):
    _, _, before, after = graded
    assert before == after


def test_limits_bound_the_time(graded):
    _, results, _, _ = graded
    # the hang notebook: two 5 s cell limits and one 3 s grace, not the 90 s notebook limit
    assert results["hang_01_rooflines.ipynb"].seconds < 60


def test_reports(graded, tmp_path):
    _, results, _, _ = graded
    rs = list(results.values())
    gb.write_csv(rs, tmp_path / "gb.csv")
    rows = (tmp_path / "gb.csv").read_text().splitlines()
    assert rows[0].startswith("student,notebook,chapter,seed,1.1,")
    assert len(rows) == 1 + len(rs)
    files = gb.write_feedback(rs, tmp_path / "feedback")
    bob = next(p for p in files if p.name.startswith("bob"))
    text = bob.read_text()
    assert "8x too large" in text and "hint:" in text
    gb.plot_pass_rates(rs, tmp_path / "rates.png")
    assert (tmp_path / "rates.png").read_bytes()[:4] == b"\x89PNG"
    shown = gb.table(rs)
    assert "1.1:P" in shown and "P pass, F fail" in shown


# ---- fast unit tests --------------------------------------------------------------------------

@pytest.mark.parametrize("value", [None, True, 3, 2**70, 1.5, float("nan"), "x", (1, 2.0),
                                   [1, [2, 3]], {"a": 1}, 1 + 2j])
def test_codec_round_trip(value):
    got = gb.decode(gb.encode(value))
    if isinstance(value, float) and np.isnan(value):
        assert np.isnan(got)
    else:
        assert got == value and type(got) is type(value)


def test_codec_arrays_and_strangers():
    a = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(gb.decode(gb.encode(a)), a)
    assert gb.decode(gb.encode(np.int64(7))).dtype.kind == "i"
    odd = gb.decode(gb.encode(object()))
    from scaling_lib.course.grading import assess
    verdict, msg = assess(odd, 1.0)
    assert verdict == "FAIL" and "object" in msg


def test_verdict_value_uses_the_key_not_the_kernel():
    ex = gb.Exercise("x", "check", "answer", [], {}, "s")
    assert gb.verdict_value(ex, {"value": gb.encode(8.0)}, 1.0)[0] == "fail"
    assert gb.verdict_value(ex, {"value": gb.encode(1.0)}, 1.0)[0] == "pass"
    assert gb.verdict_value(ex, {"value": gb.encode(None)}, 1.0)[0] == "unanswered"
    assert gb.verdict_value(ex, {"missing": "NameError"}, 1.0)[0] == "error"
    assert gb.verdict_value(ex, None, 1.0)[0] == "error"


def test_scan_flags_tampering_and_keys():
    src = "import numpy as np\nnp.isclose = 1\ndef check(*a):\n    print('PASS')\nanswer = key.f(p)"
    lines = set(range(1, 6))
    plain = gb.scan(src, lines, {"key"}, flag_keys=False)
    assert "patches `np.isclose`" in plain and "redefines `check`" in plain
    assert not any("answer key" in f for f in plain)
    assert any("answer key" in f for f in gb.scan(src, lines, {"key"}, flag_keys=True))
    assert gb.scan(src, {5}, {"key"}, flag_keys=False) == []   # locked lines are not scanned


def test_plan_flags_an_edited_locked_cell():
    chapter = gb.Course(ROOT).chapter("01_rooflines")
    nb = craft.submission(5)
    plan = gb.plan_submission(nb, chapter)
    assert plan.flags == [] and plan.seed == 5
    nb.cells[2].source = nb.cells[2].source.replace("as key", "as key  # mine")
    plan = gb.plan_submission(nb, chapter)
    assert any("locked cell edited" in f for f in plan.flags)
    assert plan.seed == 5 and any("edited set-up cell" in f for f in plan.flags)


def test_read_seeds(tmp_path):
    (tmp_path / "s.csv").write_text("student,seed\nann,4\n")
    assert gb.read_seeds(tmp_path / "s.csv") == {"ann": 4}
    (tmp_path / "s.csv").write_text("ann,four\n")
    with pytest.raises(ValueError, match="not an integer"):
        gb.read_seeds(tmp_path / "s.csv")


def test_course_root_error_names_the_fix(tmp_path):
    with pytest.raises(ValueError, match="--course"):
        gb.course_root(tmp_path)


def test_codec_keeps_array_dtypes():
    a = np.ones((2, 2), dtype=np.float32)
    assert gb.decode(gb.encode(a)).dtype == np.float32
    assert gb.decode(gb.encode(np.arange(3, dtype=np.int32))).dtype == np.int32


def test_kernel_memory_limit_holds_for_children(tmp_path):
    from scaling_lib.course.sandbox import Kernel

    with Kernel(str(tmp_path), memory_bytes=512 * 2**20) as k:
        out = k.run("x = bytearray(1024 * 2**20)", 30)
        # per process (RLIMIT_DATA): MemoryError; per jail (cgroup): the kernel is killed
        assert "MemoryError" in out.error or out.died
        if out.died:
            k.restart()
        assert k.run("print(6 * 7)", 30).text.strip() == "42"   # the kernel goes on
        out = k.run("import subprocess, sys\n"
                    "r = subprocess.run([sys.executable, '-c', 'x = bytearray(1024 * 2**20)'])\n"
                    "print(r.returncode)", 60)
        assert out.died or out.text.strip() not in ("", "0")   # a child is limited too
        if out.died:
            k.restart()
        assert k.run("import os; os._exit(3)", 30).died
    assert not list(tmp_path.iterdir())   # the jail's folder is gone


# ---- who is who, reading safely, the checker call removed, checksums (fast) -------------------

def test_file_names_follow_the_pattern():
    ch = ["01_rooflines", "02_gpus"]
    assert gb.parse_name("alice/01_rooflines.ipynb", ch) == ("alice", "01_rooflines")
    assert gb.parse_name("al_01_rooflines.ipynb", ch) == ("al", "01_rooflines")
    assert gb.parse_name("al_x_01_rooflines.ipynb", ch) == ("al_x", "01_rooflines")
    for bad in ("01_rooflines.ipynb", "al_01_rooflines_v2.ipynb", "a/b/01_rooflines.ipynb",
                "al_03_tpus.ipynb", "../x_01_rooflines.ipynb", "al 01_rooflines.ipynb"):
        assert gb.parse_name(bad, ch) == (None, None), bad


def test_links_and_special_files_are_refused_without_reading_them(tmp_path):
    import os

    (tmp_path / "ann_01_rooflines.ipynb").write_text("{}")
    (tmp_path / "eve_01_rooflines.ipynb").symlink_to(tmp_path / "ann_01_rooflines.ipynb")
    (tmp_path / "zed_01_rooflines.ipynb").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "pipe_01_rooflines.ipynb")
    (tmp_path / "odd_name.ipynb").write_text("{}")
    found = {e.rel: e for e in gb.find_submissions(tmp_path, ["01_rooflines"])}
    assert found["ann_01_rooflines.ipynb"].refused == ""
    assert "link" in found["eve_01_rooflines.ipynb"].refused
    assert "link" in found["zed_01_rooflines.ipynb"].refused
    assert "not a regular file" in found["pipe_01_rooflines.ipynb"].refused
    assert "does not follow" in found["odd_name.ipynb"].refused
    assert gb.read_notebook(tmp_path / "pipe_01_rooflines.ipynb")[0] is None   # never blocks
    assert gb.read_notebook(tmp_path / "eve_01_rooflines.ipynb")[0] is None


@pytest.mark.parametrize("source, why", [(42, "not text"), ({"a": 1}, "not text"),
                                         (["a", 3], "not text")])
def test_cells_whose_source_is_not_text_are_unreadable(tmp_path, source, why):
    import json

    nb = json.loads(nbformat.writes(craft.submission(3)))
    nb["cells"][3]["source"] = source
    (tmp_path / "x.ipynb").write_text(json.dumps(nb))
    got, reason = gb.read_notebook(tmp_path / "x.ipynb")
    assert got is None and why in reason


def test_the_checker_call_is_removed_with_or_without_hint():
    from scaling_lib.course.gradebook.submission import runnable

    ex = gb.Course(ROOT).chapter("01_rooflines").exercises["1.1"]
    nb = craft.submission(3)
    cell = next(c.source for c in nb.cells if c.source.startswith("%%graded 1.1"))
    run, exact = runnable(cell, ex)
    assert exact and "check(" not in run and "key." not in run
    assert run.count("\n") == cell.rstrip().count("\n")   # line numbers kept
    edited = cell.replace("check(answer, key.", "check(answer,  key.")   # an edited call
    run, exact = runnable(edited, ex)
    assert not exact and "check(" not in run
    plain = "%%graded 1.1\nanswer = 1\ncheck(answer, key.t_math_matmul(p), name='1.1')"
    assert "check(" not in runnable(plain, ex)[0]


def test_seeds_apply_or_fail_with_one_line(tmp_path):
    from scaling_lib.course.gradebook.submission import seed_value

    assert seed_value("7") == 7 and seed_value("9" * 5000) is None and seed_value("-1") is None
    assert seed_value(str(2**32)) is None
    (tmp_path / "s.csv").write_text("al,1\n")
    folder = tmp_path / "class"
    folder.mkdir()
    for name in ("al_01_rooflines.ipynb", "al_x_01_rooflines.ipynb"):
        (folder / name).write_text(nbformat.writes(craft.submission(3)))
    course = gb.Course(ROOT)
    with pytest.raises(ValueError, match="no seed for al_x") as err:
        gb.plan_folder(folder, course, seeds=gb.read_seeds(tmp_path / "s.csv"))
    assert "\n" not in str(err.value)
    (tmp_path / "s.csv").write_text("al,1\nal_x,2\n")
    todo, skipped = gb.plan_folder(folder, course, seeds=gb.read_seeds(tmp_path / "s.csv"))
    assert sorted((e.student, s) for e, s in todo) == [("al", 1), ("al_x", 2)] and skipped == []
    (tmp_path / "s.csv").write_text("al," + "9" * 5000 + "\n")
    with pytest.raises(ValueError, match="0 <= seed < 2"):
        gb.read_seeds(tmp_path / "s.csv")


def test_a_second_submission_is_superseded(tmp_path):
    import os

    (tmp_path / "ann").mkdir()
    (tmp_path / "ann" / "01_rooflines.ipynb").write_text("{}")
    (tmp_path / "ann_01_rooflines.ipynb").write_text("{}")
    os.utime(tmp_path / "ann" / "01_rooflines.ipynb", (1e9, 1e9))
    todo, skipped = gb.plan_folder(tmp_path, gb.Course(ROOT))
    assert [e.rel for e, _ in todo] == ["ann_01_rooflines.ipynb"]
    assert skipped[0].status == "superseded" and "ann_01_rooflines.ipynb" in skipped[0].flags[0]
    todo, _ = gb.plan_folder(tmp_path, gb.Course(ROOT), duplicates="earliest")
    assert [e.rel for e, _ in todo] == ["ann/01_rooflines.ipynb"]


def test_hostile_answers_never_raise():
    ex = gb.Exercise("x", "check", "answer", [], {}, "s")
    assert gb.verdict_value(ex, {"value": gb.encode(1e308)}, 1.0)[0] == "fail"
    assert gb.verdict_value(ex, {"value": {"t": "int", "v": "9" * 5000}}, 1.0)[0] == "error"
    assert gb.verdict_value(ex, {"value": {"t": "list", "v": 3}}, 1.0)[0] == "error"
    assert gb.verdict_value(ex, ["not", "a", "dict"], 1.0)[0] == "error"
    fx = gb.Exercise("f", "check_function", "fn", [], {}, "")
    assert gb.verdict_function(fx, {"cases": [3]}, abs, [(1,)])[0] == "error"
    assert gb.verdict_function(fx, {"missing": "NotImplementedError: x"}, abs, [(1,)])[0] == \
        "unanswered"


def test_checksums_catch_an_edited_row(tmp_path):
    r = gb.Result("ann_01_rooflines.ipynb", "ann", "01_rooflines", 3, {"1.1": "fail"})
    gb.write_csv([r], tmp_path / "gb.csv", key=b"k")
    assert gb.verify_csv(tmp_path / "gb.csv", b"k") == []
    text = (tmp_path / "gb.csv").read_text()
    (tmp_path / "gb.csv").write_text(text.replace(",fail,", ",pass,"))
    assert len(gb.verify_csv(tmp_path / "gb.csv", b"k")) == 1
    assert gb.verify_csv(tmp_path / "gb.csv", b"other")   # another key: nothing verifies


@pytest.mark.parametrize("mode", ["portable", "best"])
def test_a_jail_kills_what_escapes_it(tmp_path, mode):
    import subprocess
    import sys

    from scaling_lib.course import sandbox

    iso = sandbox.detect(None if mode == "best" else mode)
    token = f"xg-jail-test-{mode}"
    code = ("import subprocess, sys, os\n"
            f"subprocess.Popen(['setsid', 'sleep', '300'], start_new_session=True)\n"
            "if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            f"        os.execv('/bin/sleep', ['sleep', '301'])\n    os._exit(0)\n")
    jail = sandbox.Jail(iso, tmp_path, memory_bytes=2**30)
    proc = jail.popen([sys.executable, "-c", code, token])
    proc.wait(timeout=60)
    assert jail.close()
    left = subprocess.run(["pgrep", "-f", "sleep 30[01]$"], capture_output=True, text=True)
    mine = [p for p in left.stdout.split() if sandbox._has_marker(int(p), jail.token)]
    assert mine == [] and not any(tmp_path.iterdir())


@pytest.mark.parametrize("mode", ["bwrap", "unshare", "portable"])
def test_a_kernel_in_every_mode(tmp_path, mode):
    import subprocess

    from scaling_lib.course import sandbox

    iso = sandbox.detect(mode)
    if iso.mode != mode:
        pytest.skip(f"{mode} does not work on this machine")
    assert (iso.warning() == "") == (mode == "bwrap" and iso.cgroup is not None)
    with sandbox.Kernel(str(tmp_path), memory_bytes=2**30, isolation=iso) as k:
        assert k.run("print(6 * 7)", 60).text.strip() == "42"
        k.run("import subprocess; subprocess.Popen(['setsid', 'sleep', '302'])", 60)
        out = k.run("while True:\n    pass", 2)
        assert out.timed_out and not out.died                      # interrupted, alive
        assert k.run("print(1)", 30).text.strip() == "1"
        if mode != "portable":   # a PID namespace: only the jail's own processes are visible
            n = k.run("import os; print(sum(p.isdigit() for p in os.listdir('/proc')))", 30)
            assert int(n.text) < 10
        token = k.jail.token
    left = subprocess.run(["pgrep", "-f", "sleep 302$"], capture_output=True, text=True)
    assert not [p for p in left.stdout.split() if sandbox._has_marker(int(p), token)]
    assert not any(tmp_path.iterdir())


def test_hints_seen_are_read_from_the_saved_outputs(tmp_path):
    from scaling_lib.course import grading
    from scaling_lib.course.gradebook.grade import hints_seen

    if not hasattr(grading, "hints_seen_in"):
        pytest.skip("this checker does not report the hints it showed")
    nb = craft.submission(3)
    cell = next(c for c in nb.cells if c.source.startswith("%%graded 1.1"))
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=(
        "FAIL: 1.1: got 2 s, about 2x too large\n    hint 1 of 2: count the FLOPs\n"
        "FAIL: 1.1: got 3 s, about 3x too large\n    hint 2 of 2: 2·B·D·F / peak\n"
        "PASS: 1.1: 1 s (expected 1 s within 2%) [hints seen: 2]\n"))]
    nbformat.write(nb, tmp_path / "ann_01_rooflines.ipynb")
    read, why = gb.read_notebook(tmp_path / "ann_01_rooflines.ipynb")
    assert why == "" and hints_seen(read) == {"1.1": 2}


def test_a_stopped_worker_costs_its_notebook_only_and_results_survive(tmp_path):
    # portable mode, where a kernel can see its worker: it stops it (SIGSTOP); the watchdog
    # kills that worker and everything below it; the classmate is graded; a second run with
    # resume keeps both results without grading again
    from scaling_lib.course import sandbox

    folder = tmp_path / "class"
    folder.mkdir()
    stop = "import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\nanswer = None"
    nbformat.write(craft.submission(3, {"1.1": stop}, default=craft.STUBBED),
                   folder / "stopper_01_rooflines.ipynb")
    nbformat.write(craft.submission(3), folder / "ann_01_rooflines.ipynb")
    results = tmp_path / "results"
    kw = dict(course=ROOT, cell_timeout=20, notebook_timeout=60, memory_bytes=2**30,
              results_dir=results, workers=2, isolation=sandbox.detect("portable"),
              worker_timeout=45)
    got = {r.notebook: r for r in gb.grade_folder(folder, **kw)}
    stopped = got["stopper_01_rooflines.ipynb"]
    assert stopped.status == "error" and set(stopped.exercises.values()) == {"error"}
    assert any("stopped after its time limit" in f for f in stopped.flags)
    assert set(got["ann_01_rooflines.ipynb"].exercises.values()) == {"pass"}
    assert len(list(results.glob("*.json"))) == 2           # one result file per notebook
    for ctrl in ("memory", "pids"):   # the killed worker's jail: its cgroups removed too
        base = Path("/sys/fs/cgroup") / ctrl
        assert not (base.is_dir() and list(base.rglob("grader-*"))), ctrl
    written = {p: p.stat().st_mtime_ns for p in results.glob("*.json")}
    again = gb.grade_folder(folder, resume=True, **kw)
    assert [r.to_json() for r in again] == [got[r.notebook].to_json() for r in again]
    assert {p: p.stat().st_mtime_ns for p in results.glob("*.json")} == written   # not regraded


def test_cli_verify_and_seeds_fail_with_one_line(tmp_path, capsys):
    from scaling_lib import cli

    key = tmp_path / "k.key"
    key.write_text("secret")
    r = gb.Result("ann_01_rooflines.ipynb", "ann", "01_rooflines", 3, {"1.1": "fail"})
    gb.write_csv([r], tmp_path / "gb.csv", key=b"secret")
    assert cli.main(["grade", "--verify", str(tmp_path / "gb.csv"), "--key-file", str(key)]) == 0
    (tmp_path / "gb.csv").write_text((tmp_path / "gb.csv").read_text().replace(",fail,", ",pass,"))
    assert cli.main(["grade", "--verify", str(tmp_path / "gb.csv"), "--key-file", str(key)]) == 1
    assert "line 2 (ann_01_rooflines.ipynb)" in capsys.readouterr().out
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "ann_01_rooflines.ipynb").write_text("{}")
    (tmp_path / "seeds.csv").write_text("bob,1\n")
    code = cli.main(["grade", str(tmp_path / "class"), "--seeds", str(tmp_path / "seeds.csv"),
                     "--out", str(tmp_path / "out" / "gb.csv"), "--key-file", str(key)])
    err = capsys.readouterr().err
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "no seed for ann" in errors[0]
    assert "Traceback" not in err
