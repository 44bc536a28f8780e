"""Router balancing in parallelism.routing: Switch's auxiliary loss, ST-MoE's z-loss and
DeepSeek-V3's bias routing and update (papers cited in the docstrings)."""

import numpy as np
import pytest

from scaling_lib.parallelism import expert, routing


def test_aux_loss_is_alpha_when_balanced_and_larger_when_skewed():
    # Fedus et al. 2022 eq. 4: alpha·E·sum f_i P_i = alpha at f = P = 1/E
    assert routing.load_balance_loss(np.zeros((8, 4)), 1, alpha=0.01) == pytest.approx(0.01)
    skewed = routing.toy_logits(4096, 16, 2, skew=1.0)
    balanced = routing.toy_logits(4096, 16, 2, skew=0.0)
    assert routing.load_balance_loss(skewed, 2, alpha=1.0) > 1.2
    assert routing.load_balance_loss(balanced, 2, alpha=1.0) < 1.05


def test_aux_loss_f_counts_all_k_choices():
    z = np.array([[3.0, 2.0, 0.0, -1.0]] * 4)   # every token picks experts 0 and 1
    # f = (1/2, 1/2, 0, 0); P = softmax(z) for every token
    p = np.exp(z[0]) / np.exp(z[0]).sum()
    assert routing.load_balance_loss(z, 2, alpha=1.0) == pytest.approx(4 * 0.5 * (p[0] + p[1]))


def test_z_loss_is_the_mean_squared_logsumexp():
    z = np.array([[0.0, np.log(3.0)], [1.0, 1.0]])
    want = np.mean([np.log(4.0) ** 2, (1 + np.log(2.0)) ** 2]) * 1e-3
    assert routing.router_z_loss(z) == pytest.approx(want)


def test_biased_route_picks_with_the_bias_but_gates_without_it():
    z = np.array([[0.0, 1.0, 2.0]])
    experts, gates = routing.biased_route(z, np.array([5.0, 0.0, 0.0]), 2)
    assert experts.tolist() == [[0, 2]]
    assert gates[0] == pytest.approx(np.exp([0.0, 2.0]) / np.exp([0.0, 2.0]).sum())


def test_bias_updates_flatten_a_skewed_router():
    z = routing.toy_logits(2048, 16, 2, skew=1.0)
    before = routing.imbalance(routing.expert_loads(routing.route(z, 2)[0], 16))
    b = np.zeros(16)
    for _ in range(100):
        b = routing.bias_update(b, routing.expert_loads(routing.biased_route(z, b, 2)[0], 16),
                                gamma=0.01)
    after = routing.imbalance(routing.expert_loads(routing.biased_route(z, b, 2)[0], 16))
    assert before > 2 and after < 1.2


def test_toy_router_routes_toy_logits_and_expert_reexports():
    assert np.array_equal(routing.toy_router(64, 8, 2, skew=0.5, seed=3),
                          routing.route(routing.toy_logits(64, 8, 2, skew=0.5, seed=3), 2)[0])
    assert expert.load_balance_loss is routing.load_balance_loss


@pytest.mark.parametrize("call", [lambda: routing.bias_update(np.zeros(3), np.zeros(4)),
                                  lambda: routing.biased_route(np.zeros((2, 3)), np.zeros(2), 1),
                                  lambda: routing.router_z_loss(np.zeros(3))])
def test_bad_shapes_are_value_errors(call):
    with pytest.raises(ValueError):
        call()
