"""The chapter 11 answer key's implement-it graders on 8 simulated devices: the right per-device
code passes, the common wrong ones are caught by their compiled collectives or their numbers.

Asks for 8 CPU devices before JAX starts, like tests/test_train_step.py (same count).
"""

import io
from contextlib import redirect_stdout

import numpy as np
import pytest

jax = pytest.importorskip("jax")

from scaling_lib import simulate as sim  # noqa: E402
from scaling_lib.course.grading import check_function  # noqa: E402
from scaling_lib.course.keys import tensor_parallelism as key  # noqa: E402

sim.use_cpu_devices(8)
lax = jax.lax
CASES = [(8, 16, 64, 0), (16, 8, 16, 1)]


def verdict(fn, reference, cases, **tol):
    buf = io.StringIO()
    with redirect_stdout(buf):
        check_function(fn, reference, cases, name="t", **tol)
    return buf.getvalue().split(":")[0]


def megatron(x, w1, w2):
    return lax.psum(jax.nn.gelu(x @ w1) @ w2, "tp")


def sequence(x, w1, w2):
    x = lax.all_gather(x, "tp", axis=0, tiled=True)
    return lax.psum_scatter(jax.nn.gelu(x @ w1) @ w2, "tp", scatter_dimension=0, tiled=True)


def test_megatron_mlp_grader():
    assert verdict(key.on_devices(megatron), key.mlp_reference, CASES, rtol=1e-5, atol=1e-5) == "PASS"
    for wrong in (key._wrong_mlp_no_sum, key._wrong_mlp_gather_weights):
        assert verdict(wrong, key.mlp_reference, CASES, rtol=1e-5, atol=1e-5) == "FAIL"


def test_sequence_parallel_mlp_grader():
    ok = key.on_devices(sequence, "sequence")
    assert verdict(ok, key.mlp_reference, CASES, rtol=1e-5, atol=1e-5) == "PASS"
    bad = key._wrong_sp_all_reduce
    assert np.allclose(key.mlp_reference(*CASES[0]), np.asarray(_unchecked_sp_all_reduce(*CASES[0])),
                       atol=1e-5)  # the numbers are right: only the collectives give it away
    assert verdict(bad, key.mlp_reference, CASES, rtol=1e-5, atol=1e-5) == "FAIL"


def _unchecked_sp_all_reduce(B, D, F, seed):
    P = jax.sharding.PartitionSpec

    def local(x, w1, w2):
        x = lax.all_gather(x, "tp", axis=0, tiled=True)
        y = lax.psum(jax.nn.gelu(x @ w1) @ w2, "tp")
        rows = y.shape[0] // 8
        return lax.dynamic_slice_in_dim(y, lax.axis_index("tp") * rows, rows, 0)

    fn = jax.shard_map(local, mesh=sim.make_mesh((8,), ("tp",)),
                       in_specs=(P("tp", None), P(None, "tp"), P("tp", None)),
                       out_specs=P("tp", None))
    return fn(*key.mlp_inputs(B, D, F, seed))


def test_missing_psum_loss_right_gradients_wrong():
    grads_bug, emitted_bug, loss_bug = key.tp_two_block(lambda _, ct: (ct,))
    grads_ok, emitted_ok, loss_ok = key.tp_two_block(lambda _, ct: (lax.psum(ct, "tp"),))
    ref = key.two_block_grads_reference(0)
    assert loss_bug(0) == pytest.approx(loss_ok(0), rel=1e-6)
    np.testing.assert_allclose(grads_ok(0), ref, rtol=1e-4, atol=1e-5)
    assert np.max(np.abs(grads_bug(0) - ref)) > 0.1 * np.max(np.abs(ref))
    assert emitted_ok() == {("all-reduce", 8): 2 * emitted_bug()[("all-reduce", 8)]}
    good = key.checked_two_block_grads(lambda _, ct: (lax.psum(ct, "tp"),))
    assert verdict(good, key.two_block_grads_reference, [0, 1], rtol=1e-4, atol=1e-5) == "PASS"
    assert verdict(key._wrong_f_identity, key.two_block_grads_reference, [0, 1],
                   rtol=1e-4, atol=1e-5) == "FAIL"
