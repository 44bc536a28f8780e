import numpy as np
import pytest

from scaling_lib.grading import FAIL, NOT_SOLVED, PASS, check, check_function, draw
from scaling_lib.roofline import matmul_flops


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
    assert out.startswith(FAIL) and "~1e+2" in out and "hint: think" in out
    assert "101" not in out  # the expected value itself is not revealed


@pytest.mark.parametrize("bad", ["three", [1, 2], float("nan"), {"a": 1}])
def test_check_wrong_types_are_feedback(capsys, bad):
    check(bad, 3.0, name="x")
    assert verdict(capsys) == FAIL


def test_check_booleans_and_arrays(capsys):
    check(True, True, name="b")
    assert verdict(capsys) == PASS
    check(1, True, name="b")
    assert verdict(capsys) == FAIL
    check(np.array([1.0, 2.0]), [1.0, 2.0], name="a")
    assert verdict(capsys) == PASS


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
