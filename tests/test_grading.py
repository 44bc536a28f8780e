import datetime
import signal
import sys
import textwrap
import time
from decimal import Decimal
from fractions import Fraction

import nbformat
import numpy as np
import pytest

from scaling_lib.course import grading
from scaling_lib.course.exercises import MarkupError, audit_methods, graded_checks
from scaling_lib.course.grading import (FAIL, NOT_SOLVED, PASS, assess, check, check_function, draw,
                                 run_graded)
from scaling_lib.roofline import matmul_flops


@pytest.fixture(autouse=True)
def fresh_session():
    """Each test starts as a fresh kernel: no draws, tries or hints remembered."""
    from scaling_lib.course.grading import session

    session.reset()
    yield
    session.reset()


def verdict(capsys):
    return capsys.readouterr().out.split(":")[0]


def test_check_pass_fail_not_solved(capsys):
    check(100.0, 101.0, name="x")
    assert verdict(capsys) == PASS
    check(None, 101.0, name="x")
    assert verdict(capsys) == NOT_SOLVED
    check(..., 101.0, name="x")
    assert verdict(capsys) == NOT_SOLVED
    check(50.0, 101.0, name="x", hint="think")
    out = capsys.readouterr().out
    assert out.startswith(FAIL) and "about 2x too small" in out and "hint 1 of 1: think" in out
    assert "101" not in out  # the expected value itself is not revealed


# ---- Feedback: direction and rough factor, never the expected value ----------------------------

WANT = 4321.7


@pytest.mark.parametrize("factor, unit, words", [
    (2, "bytes", "about 2x too large: one-way vs both ways"),
    (1 / 2, "bytes/s", "about 2x too small: one-way vs both ways"),
    (8, "bytes", "about 8x too large: bits vs bytes?"),
    (1 / 8, "bytes/s", "about 8x too small: bits vs bytes?"),
    (2**30 / 1e9, "bytes", "off by ~1.07, too large: GB vs GiB?"),
    (1e9 / 2**30, "bytes", "off by ~1.07, too small: GB vs GiB?"),
    (2**20 / 1e6, "bytes", "off by ~1.05, too large: MB vs MiB?"),
    (1000, "s", "1000x too large: a unit prefix"),
    (1e-3, "s", "1000x too small: a unit prefix"),
    (1024, "bytes", "1024x too large"),
    (1e-12, "FLOPs", "1e12x too small: TFLOP/s vs FLOP/s"),
    (100, "", "100x too large: a percentage instead of a fraction?"),
    (86400, "s", "seconds vs days?"),
    (3, "FLOPs", "about 3x too large: 6 vs 2 FLOPs per parameter"),
    (-1, "s", "the sign is wrong (the size is right)"),
    (-2, "s", "the sign is wrong, and the size is about 2x too large"),
    (1.03, "s", "close, but outside the 2% tolerance: about 3% too large"),
    (0.975, "s", "close, but outside the 2% tolerance: about 3% too small"),
    (1.3, "s", "about 30% too large"),
    (4.4, "s", "about 4.5x too large"),
    (1 / 37, "s", "about 40x too small"),
    (3e5, "s", "about 10^5 times too large"),
])
def test_feedback_names_direction_factor_and_likely_slip(factor, unit, words):
    v, msg = assess(WANT * factor, WANT, unit=unit)
    assert v == FAIL and words in msg and "\n" not in msg, msg
    shown = f"got {grading._fmt(WANT * factor)}{' ' + unit if unit else ''}, "
    assert msg.startswith(shown)
    feedback = msg[len(shown):]  # what follows the reader's own answer
    assert not any(d in feedback for d in ("4322", "4,322", "4.322", "4321")), feedback


@pytest.mark.parametrize("factor, unit, size", [
    (8, "s", "about 8x too small"), (3, "s", "about 3x too large"), (2, "", "about 2x too large"),
    (3, "bytes", "about 3x too large"), (24, "bytes", "about 24x too large"),
    (100, "bytes", "100x too large"), (2**30 / 1e9, "s", "too large")])
def test_a_factor_names_no_cause_the_exercises_unit_cannot_have(factor, unit, size):
    """bits vs bytes needs bytes, 6 vs 2 FLOPs per parameter needs FLOPs: otherwise the size only."""
    v, msg = assess(WANT * (factor if "small" not in size else 1 / factor), WANT, unit=unit)
    assert v == FAIL and size in msg and "?" not in msg, msg


def test_feedback_zero_nan_inf_and_arrays():
    assert assess(0, WANT)[1] == "got 0, but the answer is not zero"
    assert "too large" in assess(3.0, 0.0)[1]
    assert "NaN" in assess(float("nan"), WANT)[1]
    assert "infinite" in assess(float("inf"), WANT)[1]
    v, msg = assess(np.array([1.0, 4.0, 6.0]), np.array([1.0, 2.0, 3.0]))
    assert v == FAIL and "2 of 3 values differ" in msg
    assert "index 1" in msg and "2x too large" in msg
    msg = assess(np.array([0.0, 2.0]), np.array([1.0, 2.0]))[1]
    assert msg == ("got an array of shape (2,): 1 of 2 values differ; the first, at index 0, is "
                   "0, but the answer is not zero"), msg
    assert "expected an array of shape (3,), got shape (2,)" in assess([1, 2], np.ones(3))[1]
    assert "expected one number" in assess([1.0], 1.0)[1]


def test_check_function_feedback_has_case_and_factor(capsys):
    check_function(lambda B, D, F: B * D * F, matmul_flops, [(1, 2, 3)], name="f")
    out = capsys.readouterr().out
    assert out.startswith("FAIL: f: case 1 (1, 2, 3): got 6, about 2x too small"), out


# ---- Tolerance per exercise ----------------------------------------------------------------------

def test_rtol_and_atol_set_the_tolerance(capsys):
    assert assess(103.0, 100.0)[0] == FAIL
    assert assess(103.0, 100.0, rtol=0.05)[0] == PASS
    assert assess(100.001, 100.0, rtol=1e-6)[0] == FAIL
    assert assess(0.4, 0.0, atol=0.5)[0] == PASS
    assert assess(65, 64, rtol=0)[0] == FAIL and assess(64, 64, rtol=0)[0] == PASS
    assert "not exact" in assess(65, 64, rtol=0)[1]
    check(295.0, 295.3, name="1.2", unit="tokens")  # the PASS line of the default tolerance
    assert capsys.readouterr().out == "PASS: 1.2: 295 tokens (expected 295.3 within 2%)\n"
    check(64, 64, name="6.4", rtol=0)
    assert capsys.readouterr().out == "PASS: 6.4: 64 (expected 64 exactly)\n"
    check(7, 7, name="5.2", rtol=1e-12)
    assert capsys.readouterr().out == "PASS: 5.2: 7 (expected 7 within 1e-12 relative)\n"
    check(1.0, 1.004, name="x", rtol=0.005, atol=0.01)
    assert capsys.readouterr().out == "PASS: x: 1 (expected 1.004 within 0.5% or ±0.01)\n"


# ---- What counts as an answer -----------------------------------------------------------------

@pytest.mark.parametrize("good", [3, 3.0, np.int64(3), np.float32(3.0), np.float64(3.0),
                                  Fraction(3, 1), Decimal("3.0"), np.array(3.0)])
def test_numeric_answers_of_every_kind_pass(capsys, good):
    check(good, 3.0, name="x")
    assert verdict(capsys) == PASS


@pytest.mark.parametrize("bad, words", [
    ("three", "got the text 'three'"),
    ("3", "without quotes"),
    (b"3", "got the text"),
    (True, "got the boolean True"),
    (np.bool_(False), "got the boolean False"),
    (3 + 0j, "expected a real number, got the complex number"),
    (np.complex128(3.0), "expected a real number, got the complex number"),
    (np.array([3.0 + 0j]), "complex"),
    (datetime.datetime(2024, 1, 1), "got the date or time"),
    (datetime.timedelta(seconds=3), "timedelta"),
    (np.datetime64("2024-01-01"), "date or time"),
    (10**400, "too large to be a float (about 1e400)"),
    (Fraction(10**400, 3), "too large to be a float"),
    (NotImplemented, "got NotImplemented"),
    ({"a": 1}, "got dict"),
    (float("nan"), "NaN"),
    ([1, 2], "expected one number"),
])
def test_wrong_kinds_of_answer_are_one_fail_line(capsys, bad, words):
    check(bad, 3.0, name="x")
    out = capsys.readouterr().out
    assert out.startswith("FAIL: x: ") and out.count("\n") == 1 and words in out, out


def test_booleans_strings_and_arrays(capsys):
    check(True, True, name="b")
    assert verdict(capsys) == PASS
    check(1, True, name="b")
    assert verdict(capsys) == FAIL
    check("ring", "ring", name="s")
    assert verdict(capsys) == PASS
    check(["ring"], "ring", name="s")
    assert verdict(capsys) == FAIL
    check(np.array([1.0, 2.0]), [1.0, 2.0], name="a")
    assert verdict(capsys) == PASS
    check([Fraction(1), Decimal(2)], [1.0, 2.0], name="a")
    assert verdict(capsys) == PASS
    check(np.array([True, False]), [1.0, 0.0], name="a")
    assert verdict(capsys) == FAIL


def test_a_bad_expected_value_is_the_authors_bug():
    with pytest.raises(ValueError, match="bug in the exercise"):
        assess(1.0, "3" and 1j)


# ---- check_function ----------------------------------------------------------------------------

def test_check_function_reports_exceptions_without_traceback(capsys):
    def broken(B, D, F):
        return B * D * F / 0

    check_function(broken, matmul_flops, [(1, 2, 3)], name="f")
    out = capsys.readouterr().out
    assert out.startswith(FAIL) and "ZeroDivisionError" in out and "Traceback" not in out

    def todo(B, D, F):
        raise NotImplementedError

    check_function(todo, matmul_flops, [(1, 2, 3)], name="f")
    assert verdict(capsys) == NOT_SOLVED

    check_function(lambda B, D, F: float("nan"), matmul_flops, [(1, 2, 3)], name="f")
    assert verdict(capsys) == FAIL

    check_function(lambda B, D, F: B * D * F, matmul_flops, [(1, 2, 3)], name="f")
    assert verdict(capsys) == FAIL

    check_function(42, matmul_flops, [(1, 2, 3)], name="f")
    assert verdict(capsys) == FAIL


def test_check_function_names_the_students_line_not_the_checkers(capsys):
    from scaling_lib import hardware as hw

    def lookup(B, D, F):
        return hw.get("no-such-chip")  # the error is raised deep in the library

    line = lookup.__code__.co_firstlineno + 1
    check_function(lookup, matmul_flops, [(1, 2, 3)], name="f")
    out = capsys.readouterr().out
    assert f"(line {line})" in out and "ValueError" in out, out

    def two_args(B, D):  # wrong arity: the call itself fails, in the checker
        return B * D

    check_function(two_args, matmul_flops, [(1, 2, 3)], name="f")
    out = capsys.readouterr().out
    assert "TypeError" in out and "(line" not in out, out


def endless(B, D, F):
    while True:
        pass


def test_check_function_time_limit_stops_an_endless_loop(capsys):
    start = time.monotonic()
    check_function(endless, matmul_flops, [(1, 2, 3), (4, 5, 6)], name="f", time_limit=0.3)
    out = capsys.readouterr().out
    # the first case may compile and import: it gets FIRST_CASE_FACTOR times the limit
    first = 0.3 * grading.timelimit.FIRST_CASE_FACTOR
    assert out.startswith(f"FAIL: f: case 1 took longer than {first:g} s"), out
    slow_second = lambda B, D, F: endless(B, D, F) if B > 1 else 2 * B * D * F  # noqa: E731
    check_function(slow_second, matmul_flops, [(1, 2, 3), (4, 5, 6)], name="f", time_limit=0.3)
    assert capsys.readouterr().out.startswith("FAIL: f: case 2 took longer than 0.3 s")
    assert time.monotonic() - start < 5
    check_function(lambda B, D, F: 2 * B * D * F, matmul_flops, [(1, 2, 3)], name="f",
                   time_limit=None)
    assert verdict(capsys) == PASS


@pytest.mark.parametrize("bad", [0, -1, float("inf"), "10", True])
def test_time_limit_must_be_positive_seconds_or_none(bad):
    with pytest.raises(ValueError, match="time_limit"):
        check_function(abs, abs, [1], name="f", time_limit=bad)


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="POSIX timers only")
def test_time_limit_puts_an_outer_timer_back(capsys):
    fired = []
    old = signal.signal(signal.SIGALRM, lambda *a: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 30)
        check_function(lambda B, D, F: 2 * B * D * F, matmul_flops, [(1, 2, 3)], name="f",
                       time_limit=1)
        left, _ = signal.getitimer(signal.ITIMER_REAL)
        assert 25 < left <= 30 and signal.getsignal(signal.SIGALRM) is not None and not fired
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert verdict(capsys) == PASS


def test_time_limit_fallback_without_alarm_uses_a_thread(capsys, monkeypatch):
    monkeypatch.setattr(grading.timelimit, "_alarm_available", lambda: False)
    check_function(endless, matmul_flops, [(1, 2, 3)], name="f", time_limit=0.3)
    first = 0.3 * grading.timelimit.FIRST_CASE_FACTOR
    assert capsys.readouterr().out.startswith(f"FAIL: f: case 1 took longer than {first:g} s")
    check_function(lambda B, D, F: 2 * B * D * F, matmul_flops, [(1, 2, 3)], name="f")
    assert verdict(capsys) == PASS
    check_function(lambda B, D, F: 1 / 0, matmul_flops, [(1, 2, 3)], name="f")
    assert "ZeroDivisionError" in capsys.readouterr().out


# ---- %%graded -----------------------------------------------------------------------------------

@pytest.mark.parametrize("body, words", [
    ("x = 1\nexit()", "called exit() or sys.exit() (line 3)"),
    ("quit()", "called exit() or sys.exit() (line 2)"),
    ("import sys\nsys.exit(2)", "called exit() or sys.exit() (line 3)"),
    ("raise SystemExit", "called exit()"),
    ("x = 1\n\nraise KeyboardInterrupt", "interrupted (line 4): does a loop never end?"),
    ("x = 1\ny = undefined_name", "your code raised NameError: name 'undefined_name' is not "
                                  "defined (line 3)"),
    ("x = (", "SyntaxError on line 2"),
])
def test_run_graded_turns_exits_interrupts_and_errors_into_one_fail_line(capsys, body, words):
    ns = {}
    run_graded("1.1", body, ns, first_line=2)
    out = capsys.readouterr().out
    assert out.startswith("FAIL: 1.1: ") and words in out and out.count("\n") == 1, out
    assert "exit" not in ns and "quit" not in ns  # the stand-ins are removed again


def test_run_graded_keeps_the_readers_own_exit_and_results(capsys):
    mine = object()
    ns = {"exit": mine}
    run_graded("1.1", "answer = 42", ns, first_line=2)
    assert ns["exit"] is mine and ns["answer"] == 42 and capsys.readouterr().out == ""


def test_graded_magic_on_a_real_kernel():
    """Line numbers as the reader sees them, exit(), an interrupted loop, a timed-out case."""
    from jupyter_client.manager import start_new_kernel

    km, kc = start_new_kernel(kernel_name="python3")

    def run(code, interrupt_after=None):
        msg_id = kc.execute(code)
        if interrupt_after:
            time.sleep(interrupt_after)
            km.interrupt_kernel()
        out = []
        while True:
            msg = kc.get_iopub_msg(timeout=60)
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            c = msg["content"]
            if msg["msg_type"] == "stream":
                out.append(c["text"])
            elif msg["msg_type"] == "error":
                out.append(f"ERROR {c['ename']}")
            elif msg["msg_type"] == "status" and c["execution_state"] == "idle":
                break
        assert kc.get_shell_msg(timeout=60)["content"]["status"] == "ok"
        return "".join(out)

    try:
        run("%load_ext scaling_lib.course.grading\nfrom scaling_lib.course.grading import check_function")
        out = run("%%graded 1.1\nx = 1\ny = 2\nanswer = x * undefined_name\n")
        assert out == ("FAIL: 1.1: your code raised NameError: name 'undefined_name' is not "
                       "defined (line 4)\n")
        assert "(line 3)" in run("%%graded 1.2\nx = 1\nexit()\n")
        assert "(line 2)" in run("%%graded 1.3\nquit()\n")
        out = run("%%graded 1.4\nwhile True:\n    pass\n", interrupt_after=1.0)
        assert out.startswith("FAIL: 1.4: interrupted (line"), out
        out = run("%%graded 1.5\ndef f(a):\n    while True:\n        pass\n\n"
                  "check_function(f, abs, [1], name='1.5', time_limit=0.5)\n")
        assert out.startswith("FAIL: 1.5: case 1 took longer than "
                              f"{0.5 * grading.timelimit.FIRST_CASE_FACTOR:g} s"), out
        out = run("%%graded 1.6\ndef f(a):\n    b = a\n    return b / 0\n\n"
                  "check_function(f, abs, [1], name='1.6')\n")
        assert "ZeroDivisionError" in out and "(line 4)" in out, out
        assert run("print('alive', type(exit).__name__)") == "alive ZMQExitAutocall\n"
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


# ---- draw ---------------------------------------------------------------------------------------

def test_draw_is_seeded_and_exercise_specific():
    spec = dict(B=(16, 4096), chip=["a", "b", "c"], x=(0.1, 0.9))
    assert draw(3, "e1", **spec) == draw(3, "e1", **spec)
    draws = {tuple(draw(s, "e1", **spec).values()) for s in range(20)}
    assert len(draws) > 5
    p = draw(0, "e1", **spec)
    assert p.B in [2**k for k in range(4, 13)] and p.chip in "abc" and 0.1 <= p.x <= 0.9


def test_draw_rejects_bad_rules():
    with pytest.raises(ValueError, match="seed"):
        draw("zero", "e")
    with pytest.raises(ValueError, match="low <= high"):
        draw(0, "e", B=(64, 8))


# ---- The wrong-method audit, on a synthetic notebook and answer key ------------------------------

SETUP = "raise SystemExit('the set-up cell must be skipped')"
IMPORTS = """\
%matplotlib inline
from scaling_lib.course.grading import check, check_function, draw
import {module} as key

SEED = 0
"""
CELLS = [
    """\
p = draw(SEED, "9.1", x=(10.0, 100.0))
print(p)
# BEGIN SOLUTION
answer = 2 * p.x
# STUB: answer = None
# END SOLUTION
check(answer, key.double(p), name="9.1", rtol=0.01, unit="s")
""",
    """\
# BEGIN SOLUTION
answer = 7
# STUB: answer = None
# END SOLUTION
check(answer, key.seven(), name="9.2", atol=0.5)
""",
    """\
def f(x):
    # BEGIN SOLUTION
    return 2 * x
    # END SOLUTION


check_function(f, key.twice, [(1,), (2,)], name="9.3")
""",
]
KEY = """\
def double(p):
    return 2 * p.x


def seven():
    return 7


def twice(x):
    return 2 * x

"""


def synthetic(tmp_path, monkeypatch, methods: str, cells=CELLS):
    """A solutions notebook and its answer key (with ``methods`` appended) under tmp_path."""
    module = f"synthetic_key_{abs(hash(methods)) % 10**8}"
    (tmp_path / f"{module}.py").write_text(KEY + textwrap.dedent(methods))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, module, raising=False)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Solutions"),
                nbformat.v4.new_code_cell(SETUP, metadata={"tags": ["remove-cell"]}),
                nbformat.v4.new_code_cell(IMPORTS.format(module=module))]
    nb.cells += [nbformat.v4.new_code_cell(src, metadata={"tags": ["graded"]}) for src in cells]
    path = tmp_path / "99_synthetic.ipynb"
    nbformat.write(nb, path)
    return path


def test_graded_checks_parse_draw_call_and_literal_tolerance(tmp_path, monkeypatch):
    path = synthetic(tmp_path, monkeypatch, "")
    checks = graded_checks(nbformat.read(path, as_version=4))
    assert [(c.name, c.kind, c.param, c.tolerance) for c in checks] == [
        ("9.1", "check", "p", {"rtol": 0.01}), ("9.2", "check", None, {"atol": 0.5}),
        ("9.3", "check_function", None, {})]
    bad = CELLS[0].replace("rtol=0.01", "rtol=TOL")
    path = synthetic(tmp_path, monkeypatch, "", cells=[bad])
    with pytest.raises(MarkupError, match="rtol= must be a literal number"):
        graded_checks(nbformat.read(path, as_version=4))


def test_audit_passes_when_wrong_methods_fail_and_accepted_ones_pass(tmp_path, monkeypatch):
    path = synthetic(tmp_path, monkeypatch, """
        WRONG_METHODS = {"9.1": {"forgot the 2": lambda p: p.x,
                                 "2% high": lambda p: 2.04 * p.x,
                                 "right only when x < 15": lambda p: 2 * p.x if p.x < 15 else 0},
                         "9.2": {"one off": lambda: 6},
                         "9.3": {"forgot the 2": lambda x: x}}
        ACCEPTED_METHODS = {"9.1": {"rounded to 0.1": lambda p: round(2 * p.x, 1)},
                            "9.2": {"seven and a bit": lambda p: 7.3},
                            "9.3": {"as a float": lambda x: 2.0 * x}}
        """)
    problems, n = audit_methods(path, range(50))
    assert problems == [] and n == 8


def test_audit_reports_each_kind_of_problem_with_seed_and_numbers(tmp_path, monkeypatch):
    path = synthetic(tmp_path, monkeypatch, """
        WRONG_METHODS = {"9.1": {"half a percent high": lambda p: 2.01 * p.x,
                                 "right unless x > 90": lambda p: 2 * p.x if p.x <= 90 else 0},
                         "9.2": {"seven": lambda: 7.0},
                         "9.3": {"x + x": lambda x: x + x},
                         "9.9": {"typo": lambda p: 0}}
        ACCEPTED_METHODS = {"9.1": {"3% high": lambda p: 2.06 * p.x,
                                    "crashes": lambda p: p.nope},
                            "9.3": {"1% high": lambda x: 2.02 * x}}
        """)
    problems, n = audit_methods(path, range(40))
    text = "\n".join(problems)
    assert "'9.9', which no graded cell checks" in text
    assert "9.3: wrong method 'x + x' matches the reference on every case" in text
    assert ("9.3: accepted method '1% high' does not PASS (default tolerance): the checker says "
            "'FAIL: 9.3: case 1 (1): got 2.02, close, but outside the 1e-06 relative tolerance: "
            "about 1% too large'") in text
    first = draw(0, "9.1", x=(10.0, 100.0))
    assert (f"9.1: wrong method 'half a percent high' does not FAIL in 40 of 40 seeds (rtol=0.01); "
            f"first at seed 0 ({first!r}): it gives {2.01 * first.x!r}, the key "
            f"{2 * first.x!r}; the checker says PASS") in text
    assert "9.1: wrong method 'right unless x > 90' equals the key's answer in" in text
    assert "9.2: wrong method 'seven' equals the key's answer in 1 of 1 seeds" in text
    assert "9.1: accepted method '3% high' does not PASS in 40 of 40 seeds" in text
    assert "close, but outside the 1% tolerance" in text
    assert "accepted method 'crashes' does not PASS" in text and "raised AttributeError" in text
    assert len(problems) == 8, text


def test_audit_reports_a_key_that_fails_its_own_check(tmp_path, monkeypatch):
    path = synthetic(tmp_path, monkeypatch, """
        def double(p):
            return float("nan") if p.x > 50 else 2 * p.x
        """)
    problems, _ = audit_methods(path, range(20))
    assert len(problems) == 1 and "9.1: the key's own answer nan does not pass" in problems[0]


# ---- Listed mistakes named, hints after a try, answers in the student's terms -------------------

class _Key:  # stands in for an answer-key module
    WRONG_METHODS = {"7.1": {"forward only (2N)": (lambda p: 2 * p.n, "that is the forward pass "
                                                   "only: the backward pass does twice its work"),
                             "with recomputation (8N)": lambda p: 8 * p.n},
                     "7.2": {"no factor 2": lambda x: x}}
    HINTS = {"7.1": ("which passes does training run?", "2 FLOPs forward, twice that backward"),
             "7.2": ("a multiply and an add", "count both")}
    SYNONYMS = {"7.3": {"row": ("row-parallel", "row split")}}


@pytest.fixture
def key():
    from scaling_lib.course.grading import session
    from scaling_lib.course.grading.tables import use_keys

    session.reset()
    with use_keys([_Key]):
        yield _Key
    session.reset()


def test_a_listed_mistake_is_named_in_the_students_words(capsys, key):
    p = draw(3, "7.1", n=(1e9, 1e10))
    check(2 * p.n * 1.005, 6 * p.n, name="7.1", unit="FLOPs")
    out = capsys.readouterr().out
    assert out.startswith("FAIL: 7.1: got ") and out.splitlines()[0].endswith(
        "FLOPs: that is the forward pass only: the backward pass does twice its work"), out
    check(8 * p.n, 6 * p.n, name="7.1", unit="FLOPs")
    assert "a common slip: with recomputation (8N)" in capsys.readouterr().out
    check(5 * p.n, 6 * p.n, name="7.1", unit="FLOPs")  # no listed mistake: the size of the miss
    assert "about 20% too small" in capsys.readouterr().out


def test_hints_come_after_a_fail_nudge_first_then_the_method(capsys, key):
    from scaling_lib.course.grading import hints_seen, hints_seen_in

    p = draw(3, "7.1", n=(1e9, 1e10))
    check(None, 6 * p.n, name="7.1")
    assert "hint" not in capsys.readouterr().out  # none before a try
    check(p.n, 6 * p.n, name="7.1")
    first = capsys.readouterr().out
    assert first.splitlines()[1] == "    hint 1 of 2: which passes does training run?", first
    check(p.n, 6 * p.n, name="7.1")
    second = capsys.readouterr().out
    assert second.splitlines()[1] == "    hint 2 of 2: 2 FLOPs forward, twice that backward"
    check(6 * p.n, 6 * p.n, name="7.1")
    passed = capsys.readouterr().out
    assert passed.startswith("PASS: 7.1: ") and passed.rstrip().endswith("[hints seen: 2]")
    assert hints_seen("7.1") == 2 and hints_seen_in(first) == {"7.1": 1}
    assert hints_seen_in(first + passed) == {"7.1": 2}
    check_function(lambda x: x, lambda x: 2 * x, [(3,)], name="7.2")
    out = capsys.readouterr().out
    assert "a common slip: no factor 2" in out and "hint 1 of 2: a multiply and an add" in out


@pytest.mark.parametrize("answer, expected, ok", [
    ("No", "no", True), (" YES ", "yes", True), ("y", "yes", True), ("no", "yes", False),
    ("yes", True, True), ("No", False, True), (" true ", True, True), ("maybe", True, False),
    (False, "no", True), (True, "no", False), ("Row-Parallel", "row", True),
    ("row  split", "row", True), ("column", "row", False), ("RING", "ring", True)])
def test_named_answers_ignore_case_and_spaces_and_take_synonyms(capsys, key, answer, expected, ok):
    check(answer, expected, name="7.3")
    assert verdict(capsys) == (PASS if ok else FAIL)


def test_arrays_that_differ_are_summarised_never_dumped():
    got = np.arange(64.0).reshape(8, 8)
    want = got.copy()
    want[2, 3] = 1.0
    want[5, 5] = 7.0
    v, msg = assess(got, want)
    assert msg.startswith("got an array of shape (8, 8): 2 of 64 values differ; the first, at "
                          "index (2, 3), is 19, about 20x too large"), msg
    assert "[" not in msg and "\n" not in msg


def test_a_jax_sharding_error_becomes_one_sentence_about_the_slip(capsys):
    def forgot_psum(x):
        raise ValueError("shard_map applied to the function 'f' was given out_specs which "
                         "require replication which can't be statically inferred given the "
                         "mesh:\n\nout_specs is P() which implies that the corresponding output "
                         "value is replicated across mesh axis 'dp', but could not infer "
                         "replication over any axes\n\nconsider disabling the check by passing "
                         "the check_vma=False argument to `jax.shard_map`.")
    check_function(forgot_psum, lambda x: x, [(1,)], name="f")
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and "mesh axis 'dp'" in out and "lax.psum" in out
    assert "check_vma" not in out, out


def test_a_bfloat16_answer_from_jax_counts_as_a_number(capsys):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    check(np.array(3.0, dtype=ml_dtypes.bfloat16), 3.0, name="x")
    assert capsys.readouterr().out == "PASS: x: 3 (expected 3 within 2%)\n"
