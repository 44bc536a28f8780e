"""Failures at scale: Young-Daly interval, goodput (Llama 3 405B: 466 interruptions in 54 days)."""

import math

import numpy as np
import pytest

from scaling_lib import reliability as rel


def test_young_daly_maximises_first_order_goodput():
    d, M, R = 45.0, 2.5 * 3600, 300.0
    best = rel.young_daly_interval(d, M)
    grid = np.linspace(best / 5, best * 5, 2001)
    g = [rel.goodput(t, d, M, restart_time=R) for t in grid]
    assert math.isclose(grid[int(np.argmax(g))], best, rel_tol=0.01)


def test_daly_refines_young_for_small_checkpoints():
    M = 3 * 3600.0
    assert math.isclose(rel.young_daly_interval(1.0, M, higher_order=True),
                        rel.young_daly_interval(1.0, M), rel_tol=0.01)
    assert rel.young_daly_interval(3 * M, M, higher_order=True) == M


def test_llama3_snapshot():
    """Dubey et al. 2024, section 3.3.4: 466 interruptions in 54 days on 16K H100s."""
    M = rel.mtbf(rel.LLAMA3_INTERRUPTIONS, rel.LLAMA3_SNAPSHOT_DAYS * 86400)
    assert 2.7 < M / 3600 < 2.9
    ckpt = rel.checkpoint_time(rel.checkpoint_bytes("llama3-405b"), rel.LLAMA3_STORAGE_BYTES_PER_S)
    assert 2 < ckpt < 4  # 5.7 TB at 2 TB/s
    tau = rel.young_daly_interval(ckpt, M)
    assert rel.goodput(tau, ckpt, M) > 0.95


@pytest.mark.parametrize("fn, args", [
    (rel.mtbf, (0, 10.0)), (rel.young_daly_interval, (-1.0, 10.0)),
    (rel.goodput, (0.0, 1.0, 10.0)), (rel.checkpoint_time, (1.0, 0.0)),
])
def test_bad_input_raises_value_error(fn, args):
    with pytest.raises(ValueError):
        fn(*args)


def test_exact_goodput_stays_positive_where_the_first_order_one_reaches_zero():
    """Daly 2006: with Poisson failures the goodput tends to 0 but never reaches it."""
    M, d = 3 * 3600.0, 60.0
    assert rel.goodput(4 * M, d, M) == 0.0
    assert 0 < rel.goodput(4 * M, d, M, exact=True) < 0.2
    small = rel.goodput(300.0, 5.0, 100 * M, exact=True)  # short intervals: the two agree
    assert small == pytest.approx(rel.goodput(300.0, 5.0, 100 * M), rel=1e-3)
