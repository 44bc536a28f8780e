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
