"""parallelism.tensor's costs: the compute-bound limit on tp, kv-head replication."""

import pytest

from scaling_lib import hardware as hw
from scaling_lib.parallelism import tensor as tc


@pytest.mark.parametrize("model", ["llama3-8b", "llama3-70b", "llama3-405b"])
@pytest.mark.parametrize("W", [450e9, 50e9])
def test_limit_is_where_comm_equals_math(model, W):
    """Up to floor(tp_limit) the two AllReduces hide behind the matmuls, one more and they
    do not, whatever the token count (it cancels)."""
    t = int(tc.tp_limit(model, "h100", W))
    for tokens in (1024, 65536):
        t_math, t_comm = tc.layer_times(model, t, tokens, "h100", W)
        assert t == 1 or t_comm <= t_math
        t_math, t_comm = tc.layer_times(model, t + 1, tokens, "h100", W)
        assert t_comm > t_math


def test_torus_axis_is_a_bidirectional_ring_of_twice_the_link():
    link = hw.get_cluster("tpu-v5p-pod").intra_node.per_link_bytes_per_s
    _, ring = tc.layer_times("llama3-70b", 8, 4096, "tpu-v5p", link, topology="bidirectional_ring")
    _, flat = tc.layer_times("llama3-70b", 8, 4096, "tpu-v5p", 2 * link, topology="ring")
    assert ring == pytest.approx(flat)


def test_max_tp_degree_respects_kv_heads():
    assert tc.max_tp_degree("llama3-70b", "h100", 450e9) == 8
    assert tc.max_tp_degree("llama3-70b", "h100", 450e9, divisors_only=False) == 12
    assert tc.max_tp_degree("llama3-70b", "h100", 50e9) == 2


def test_kv_replication():
    assert [tc.kv_replication("llama3-405b", t) for t in (1, 8, 16, 128)] == [1, 1, 2, 16]
    with pytest.raises(ValueError, match="tp=12"):
        tc.kv_replication("llama3-8b", 12)


def test_bad_inputs_name_the_rule():
    with pytest.raises(ValueError, match="bytes_per_s"):
        tc.tp_limit("llama3-70b", "h100", 0)
    with pytest.raises(ValueError, match="tp=0"):
        tc.kv_replication("llama3-70b", 0)
    with pytest.raises(ValueError, match="MoE"):
        tc.layer_flops_per_token("mixtral-8x7b")
