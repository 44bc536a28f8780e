"""The chapter 9-12 keys' translation of raw JAX errors into the slip a student made (issue 25)."""

from scaling_lib.course.keys import profiling
from scaling_lib.course.keys.sharding import EITHER, SYNONYMS, explain_jax_error


def test_raw_errors_become_named_slips():
    blocks = "a is [I, J/8] and b is [J/8, K]"
    axis = explain_jax_error(AssertionError(""), "X", blocks)
    assert "'X'" in str(axis) and "does not exist" in str(axis)
    shapes = explain_jax_error(TypeError("dot_general requires contracting dimensions to have "
                                         "the same shape, got (64,) and (8,)."), "X", blocks)
    assert "64 and 8" in str(shapes) and blocks in str(shapes)
    assert explain_jax_error(RuntimeError("something else"), "X", blocks) is None


def test_either_collective_is_accepted_where_both_programs_are_right():
    assert set(SYNONYMS["9.1"][EITHER]) >= {"all-gather", "all-reduce"}


def test_device_groups_compare_as_sets():
    assert profiling.device_set([5, 1]) == profiling.device_set((1, 5)) == "{1, 5}"
    assert profiling.device_set(None) is None
    assert profiling.device_set("0,1").startswith("not a list")
