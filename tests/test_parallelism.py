"""Tests for scaling_lib.parallelism.plan: ParallelPlan and the pipeline bubble."""

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from scaling_lib.parallelism import ParallelPlan, pipeline_bubble_fraction


def test_defaults_and_world_size():
    p = ParallelPlan()
    assert (p.dp, p.tp, p.pp, p.cp, p.ep, p.zero, p.micro_batch, p.virtual_stages) == \
        (1, 1, 1, 1, 1, 0, 1, 1)
    assert (p.schedule, p.recompute, p.sequence_parallel) == ("1f1b", "none", False)
    # Llama 3 405B, Table 4: TP 8, CP 1, PP 16, DP 64 on 8,192 GPUs; with CP 16, DP 8: 16,384.
    assert ParallelPlan(dp=64, tp=8, pp=16).world_size == 8192
    assert ParallelPlan(dp=8, tp=8, pp=16, cp=16).world_size == 16384
    # experts live inside the data-parallel ranks
    assert ParallelPlan(dp=8, ep=8).world_size == 8


def test_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        ParallelPlan().dp = 2


@pytest.mark.parametrize("kw, msg", [
    (dict(dp=0), "dp=0 must be a positive integer"),
    (dict(tp=2.5), "tp=2.5 must be a positive integer"),
    (dict(zero=4), "zero=4 is not a ZeRO stage"),
    (dict(zero=True), "zero=True is not a ZeRO stage"),
    (dict(schedule="zb"), "schedule='zb'; valid choices: 1f1b, gpipe, interleaved"),
    (dict(schedule="gpipe", virtual_stages=2), "virtual_stages=2 needs an interleaved"),
    (dict(recompute="half"), "recompute='half'"),
    (dict(dp=6, ep=4), r"ep=4 must divide dp \* cp = 6.*\[1, 2, 3, 6\]"),
    (dict(dp=8, shard_group=3), "shard_group=3 must divide dp"),
])
def test_validation(kw, msg):
    with pytest.raises(ValueError, match=msg):
        ParallelPlan(**kw)


def test_zero_group_and_hsdp():
    assert ParallelPlan(dp=16, cp=2).zero_group == 32
    assert ParallelPlan(dp=16, zero=3, shard_group=8).zero_group == 8


def test_n_microbatches_and_with_changes():
    p = ParallelPlan(dp=4, micro_batch=2)
    assert p.n_microbatches(64) == 8
    with pytest.raises(ValueError, match="multiple of dp \\* micro_batch = 8"):
        p.n_microbatches(12)
    q = p.with_changes(tp=2)
    assert (q.tp, q.dp) == (2, 4)
    with pytest.raises(ValueError):
        p.with_changes(tp=0)


def test_bubble_golden():
    # (p-1)/(v·m + p-1): 4 stages, 4 micro-batches -> 3/7 idle, a 57% ceiling.
    assert pipeline_bubble_fraction(4, 4) == 3 / 7
    assert round(1 - pipeline_bubble_fraction(4, 4), 2) == 0.57
    # Narayanan et al. 2021, section 2.2: (p-1)/m against the ideal compute time, and
    # interleaving with v chunks divides it by v.
    assert pipeline_bubble_fraction(8, 32, relative_to="compute") == 7 / 32
    assert pipeline_bubble_fraction(8, 32, 4, "interleaved", relative_to="compute") == 7 / 128


def test_bubble_broadcasts():
    m = np.array([1, 4, 16, 64])
    f = pipeline_bubble_fraction(8, m)
    np.testing.assert_allclose(f, 7 / (m + 7))
    assert pipeline_bubble_fraction(1, 8) == 0.0


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 64), st.integers(1, 256), st.integers(1, 8))
def test_bubble_properties(p, m, v):
    f = pipeline_bubble_fraction(p, m, v, "interleaved")
    g = pipeline_bubble_fraction(p, m, v, "interleaved", relative_to="compute")
    assert 0 <= f < 1
    # the two forms describe the same idle time: f = g / (1 + g)
    assert np.isclose(f, g / (1 + g))
    assert pipeline_bubble_fraction(p, m + 1, v, "interleaved") <= f
    assert pipeline_bubble_fraction(p + 1, m, v, "interleaved") >= f


def test_bubble_errors():
    with pytest.raises(ValueError, match="n_microbatches"):
        pipeline_bubble_fraction(4, 0)
    with pytest.raises(ValueError, match="pp"):
        pipeline_bubble_fraction(2.5, 4)
    with pytest.raises(ValueError, match="schedule"):
        pipeline_bubble_fraction(4, 4, schedule="dualpipe")
    with pytest.raises(ValueError, match="GPipe has no virtual stages"):
        pipeline_bubble_fraction(4, 4, 2, "gpipe")


def test_numpy_integers_are_accepted_and_stored_as_int():
    p = ParallelPlan(dp=np.int64(8), tp=np.int32(4), zero=np.int64(3), shard_group=np.int64(4))
    assert (p.dp, p.tp, p.zero, p.shard_group) == (8, 4, 3, 4)
    assert all(type(v) is int for v in (p.dp, p.tp, p.zero, p.shard_group, p.world_size))


@pytest.mark.parametrize("kw, msg", [
    (dict(dp=True), "dp=True must be a positive integer"),
    (dict(tp="8"), "tp='8' must be a positive integer"),
    (dict(pp=2**63), "pp=9223372036854775808 must be a positive integer"),
    (dict(dp=4096, tp=4096, pp=4096), "world_size = dp·tp·pp·cp = 68,719,476,736 exceeds"),
    (dict(zero=np.array([1])), "is not a ZeRO stage"),
    (dict(sequence_parallel="yes"), "sequence_parallel='yes' must be True or False"),
    (dict(schedule=None), "schedule=None; valid choices"),
])
def test_validation_of_types_and_sizes(kw, msg):
    with pytest.raises(ValueError, match=msg):
        ParallelPlan(**kw)


def test_with_changes_refuses_unknown_fields():
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['devices'\]"):
        ParallelPlan().with_changes(devices=8)


@pytest.mark.parametrize("bad", [2.5, True, "64", None, 10**400, [64]])
def test_n_microbatches_refuses_non_counts(bad):
    with pytest.raises(ValueError, match="global_batch"):
        ParallelPlan(dp=2).n_microbatches(bad)


def test_bubble_refuses_non_counts():
    for kw in (dict(pp=2.5, n_microbatches=4), dict(pp=4, n_microbatches=True),
               dict(pp=4, n_microbatches=8, virtual_stages="2")):
        with pytest.raises(ValueError):
            pipeline_bubble_fraction(**kw)
