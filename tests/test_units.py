import numpy as np
import pytest

from scaling_lib import units as u
from scaling_lib.breakdown import Breakdown


def test_dtype_bytes_and_aliases():
    assert u.dtype_bytes("bf16") == 2.0
    assert u.dtype_bytes("bfloat16") == 2.0
    assert u.dtype_bytes(np.dtype("float32")) == 4.0
    assert u.dtype_bytes("int4") == 0.5


def test_unknown_dtype_names_choices():
    with pytest.raises(ValueError, match="valid choices: fp64, fp32"):
        u.dtype_bytes("fp7")


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), [1, 0]])
def test_check_positive_rejects(bad):
    with pytest.raises(ValueError, match="must be finite and > 0"):
        u.check_positive("B", bad)


def test_check_positive_rejects_strings():
    with pytest.raises(ValueError, match="must be a number"):
        u.check_positive("B", "eight")


def test_formatters():
    assert u.fmt_bytes(80e9) == "80 GB"
    assert u.fmt_bytes(16 * u.GiB, binary=True) == "16 GiB"
    assert u.fmt_seconds(1.5e-3) == "1.5 ms"
    assert u.fmt_seconds(90) == "1.5 min"
    assert u.fmt_flops_per_s(2.25e15) == "2.25 PFLOP/s"
    assert u.fmt_percent(0.462) == "46.2%"


def test_breakdown_parts_sum_and_read_only():
    b = Breakdown({"a": 3, "b": 4}, unit="bytes")
    assert b.total == 7 and isinstance(b.total, int)
    assert b.fractions() == {"a": 3 / 7, "b": 4 / 7}
    assert b.scaled(2).total == 14
    with pytest.raises(AttributeError):
        b.unit = "s"
    with pytest.raises(TypeError):
        b["a"] = 1
    assert "<table>" in b._repr_html_()


# ---- the shared validators ------------------------------------------------------------------------
BAD_NUMBERS = [True, np.bool_(False), "8", b"8", 1 + 2j, np.complex128(1), None, [1, None],
               object(), {"a": 1}]


@pytest.mark.parametrize("bad", BAD_NUMBERS)
@pytest.mark.parametrize("check", [u.check_positive, u.check_count, u.check_int,
                                   u.check_fraction, u.check_real])
def test_validators_refuse_non_numbers(check, bad):
    with pytest.raises(ValueError, match="^x="):
        check("x", bad)


def test_huge_integers_are_value_errors_not_overflow():
    for check in (u.check_positive, u.check_count, u.check_int, u.check_fraction):
        with pytest.raises(ValueError, match=r"x=100000\.\.\.\(401 digits\) is too large"):
            check("x", 10**400)
    with pytest.raises(ValueError, match="too large"):
        u.check_count("dp", 2**63)
    assert u.check_count("n", 2**53) == 2.0**53


@pytest.mark.parametrize("value", [0.5, 2.5, 4096.5, 0, -1, float("nan"), float("inf")])
def test_check_count_refuses_fractions_and_non_positive(value):
    with pytest.raises(ValueError, match="must be a whole number >= 1"):
        u.check_count("T", value)


def test_check_count_accepts_integers_of_any_kind_and_arrays():
    assert u.check_count("B", np.int32(8)) == 8.0
    assert u.check_count("B", 8.0) == 8.0
    assert u.check_count("S", 0, minimum=0) == 0.0
    assert list(u.check_count("T", [1, 2, 4])) == [1.0, 2.0, 4.0]
    with pytest.raises(ValueError, match=r"T=\[2\.5\]"):
        u.check_count("T", [1, 2.5])
    # a sweep (an array for a figure) may be continuous; a single value may not
    assert list(u.check_count("T", np.array([512.0, 724.1]), sweep=True)) == [512.0, 724.1]
    with pytest.raises(ValueError):
        u.check_count("T", 724.1, sweep=True)


def test_check_int_is_exact_and_strict():
    assert u.check_int("tp", np.int64(8)) == 8 and type(u.check_int("tp", np.int64(8))) is int
    assert u.check_int("n", 2**53 + 1, maximum=2**60) == 2**53 + 1  # no float rounding
    for bad in (8.0, np.float64(8), np.array([8])):
        with pytest.raises(ValueError, match="must be an integer"):
            u.check_int("tp", bad)


def test_check_fraction():
    assert u.check_fraction("mfu", 1) == 1.0
    assert u.check_fraction("bubble", 0, allow_zero=True) == 0.0
    for bad in (0, 6502, 40, -0.1, 1.0000001):
        with pytest.raises(ValueError, match=r"mfu must be in \(0, 1\]"):
            u.check_fraction("mfu", bad)
    with pytest.raises(ValueError, match=r"in \[0, 1\)"):
        u.check_fraction("p", 1, allow_zero=True, allow_one=False)


def test_check_choice():
    assert u.check_choice("zero", np.int64(3), (0, 1, 2, 3)) == 3
    for bad in (True, 4, "3", np.array([3]), None, 3.5):
        with pytest.raises(ValueError, match="valid choices: 0, 1, 2, 3"):
            u.check_choice("zero", bad, (0, 1, 2, 3))
    with pytest.raises(ValueError, match="choices=5"):
        u.check_choice("x", 1, 5)


def test_divisors():
    assert u.divisors(36) == [1, 2, 3, 4, 6, 9, 12, 18, 36]
    assert u.divisors(97) == [1, 97]
    assert u.divisors(2**24)[-3:] == [2**22, 2**23, 2**24]
    with pytest.raises(ValueError, match="too large"):
        u.divisors(2**63)


@pytest.mark.parametrize("fmt", [u.fmt_bytes, u.fmt_flops, u.fmt_seconds, u.fmt_percent,
                                 u.fmt_flops_per_s, u.fmt_bytes_per_s])
def test_formatters_refuse_bad_input(fmt):
    for bad in (None, "1e9", 10**400, np.array([1.0, 2.0]), 1j):
        with pytest.raises(ValueError):
            fmt(bad)
    with pytest.raises(ValueError, match="digits"):
        fmt(1.0, digits=2.5)


def test_breakdown_refuses_bad_parts():
    for bad in (3, "ab", [("a", 1)]):
        with pytest.raises(ValueError, match="mapping"):
            Breakdown(bad)
    with pytest.raises(ValueError, match="part 'a'"):
        Breakdown({"a": "1"})
    with pytest.raises(ValueError, match="part name"):
        Breakdown({1: 1.0})
    with pytest.raises(ValueError, match="factor"):
        Breakdown({"a": 1.0}).scaled("x")
