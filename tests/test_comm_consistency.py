"""Communication has one model: the pairs that used to disagree agree on many shapes.

- ``collectives.group_time`` (vectorised, what the estimator, the planner and serving call)
  against the scalar functions of API.md (``all_reduce_time`` ..., ``hierarchical_time``) on
  switches, rings, tori with and without wraparound, hierarchies with pods, and strided groups;
- small messages: the algorithm NCCL-like libraries pick on NVSwitch, against measured
  all-reduce times on 8 H100s;
- TPU tori: all of a chip's links (the estimator's inline copy used half: v5p-64 2x);
- frameworks' communication: sequence parallelism's backward re-gather, ring attention's
  backward (twice the forward), Ulysses' replicated kv heads, the gradient dtype, MoE layers per
  pipeline stage;
- compiled vs model bytes on simulated devices (the JAX part at the end, skipped without JAX),
  through ``simulate.expected_collectives``, which names every difference.
"""

import importlib
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaling_lib import collectives as C
from scaling_lib import hardware, models
from scaling_lib.models import TransformerConfig
from scaling_lib.parallelism import ParallelPlan, collectives, context, expert, totals

KINDS = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all")
CLUSTERS = ["dgx-h100", "dgx-a100", "llama3-24k", "tpu-v5p-4x4x4", "tpu-v5p-2x4x4",
            "tpu-v5e-16x16", "tpu-v5e-4x8", "tpu-v4-4x4x8"]


def cluster(name):
    return hardware.get_cluster(name)


# ---- group_time against the scalar model ------------------------------------------------------
@pytest.mark.parametrize("name", CLUSTERS)
@pytest.mark.parametrize("kind", KINDS)
def test_whole_cluster_ring_equals_hierarchical_time(name, kind):
    """With the ring only, a group of every device (stride 1) costs hierarchical_time."""
    c = cluster(name)
    sizes = [c.n_devices] if c.n_devices <= 256 else [8, 64, 3072, 6144, c.n_devices]
    for n, V in itertools.product(sizes, (1e3, 1e6, 3e9)):
        want = C.hierarchical_time(kind, V, c, n).total
        got = C.group_time(kind, V, n, 1, c, algorithms=("ring",))
        assert got == pytest.approx(want, rel=1e-12), (n, V)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("n", [2, 4, 8])
def test_one_switch_node_equals_the_textbook_formula(kind, n):
    """One NVSwitch node, ring only: the API.md function with topology="switch"."""
    c = hardware.cluster("h100", n)
    for V in (0.0, 16e3, 1e9):
        want = C.collective_time(kind, V, n, c.intra_node.bytes_per_s, topology="switch",
                                 latency=c.intra_node.latency)
        assert C.group_time(kind, V, n, 1, c, algorithms=("ring",)) == pytest.approx(want)


@pytest.mark.parametrize("name,g,stride,topology", [
    ("tpu-v5p-4x4x4", 4, 1, "bidirectional_ring"),   # axis 0: a wrapped ring of 4
    ("tpu-v5p-4x4x4", 4, 16, "bidirectional_ring"),  # axis 2
    ("tpu-v5e-16x16", 16, 1, "bidirectional_ring"),  # a full (wrapped) axis of the pod
    ("tpu-v5e-4x8", 4, 1, "ring"),                   # an unwrapped axis: a line
])
def test_tpu_axis_groups_are_the_ring_formulas(name, g, stride, topology):
    """A group along one torus axis is a ring of its chips: bidirectional when the axis wraps,
    a line (one-way ring terms over one link) when it does not."""
    c = cluster(name)
    W, a = c.intra_node.per_link_bytes_per_s, c.intra_node.latency
    for kind in ("all-gather", "all-reduce"):
        want = C.collective_time(kind, 1e8, g, W, topology=topology, latency=a)
        assert C.group_time(kind, 1e8, g, stride, c) == pytest.approx(want)


def test_tpu_torus_uses_every_link_and_v5p64_is_what_the_issue_measured():
    """v5p-64 (4x4x4, wraparound) all-reduce of 2 GB: 7.30 ms, over 6 links of 90 GB/s; the
    estimator's inline copy took the torus as a switch at half the chip's bandwidth: 14.71 ms.
    The bound: each chip receives 2 (n - 1)/n V over 540 GB/s of links."""
    c = cluster("tpu-v5p-4x4x4")
    cal = type("Nominal", (), dict(nvlink_efficiency=1.0, nvlink_latency=1e-6,
                                   network_efficiency=1.0, network_latency=20e-6))()
    t = C.group_time("all-reduce", 2e9, 64, 1, c, calibration=cal)
    assert round(t * 1e3, 2) == 7.30
    bound = 2 * 63 / 64 * 2e9 / (6 * 90e9)
    assert bound < t < 1.01 * bound
    est = importlib.import_module("scaling_lib.parallelism.estimate")
    if hasattr(est, "_coll_time"):  # the old inline copy, while it exists: half the links
        old = float(est._coll_time("all-reduce", 2e9, 64, 1, est._links(c, cal)))
        assert round(old * 1e3, 2) == 14.71


def test_strided_groups_share_links_and_cross_more_hops():
    """Chips 0 and 2 of an axis of 4: two hops per step, and the links are shared with the
    interleaved pair (1, 3). Without wraparound that halves the bandwidth; with it the pair has
    both directions round the ring, which makes up for the sharing: the same bandwidth term as
    neighbours, twice the latency."""
    line = cluster("tpu-v5e-4x8")  # axis 0 of 4 chips, no wraparound
    near = C.group_time("all-gather", 1e9, 2, 1, line)
    far = C.group_time("all-gather", 1e9, 2, 2, line)
    assert far == pytest.approx(2 * near)
    assert C.torus_terms("all-gather", [(2, False, 2)]) == (2.0, 1.0)
    ring = cluster("tpu-v5p-4x4x4")
    near0, far0 = (C.group_time("all-gather", 0.0, 2, s, ring) for s in (1, 2))
    near1, far1 = (C.group_time("all-gather", 1e9, 2, s, ring) for s in (1, 2))
    assert far0 == pytest.approx(2 * near0)
    assert far1 - far0 == pytest.approx(near1 - near0)


@pytest.mark.parametrize("name", ["llama3-24k", "tpu-v5e-4x8"])
def test_arrays_broadcast_like_scalar_calls(name):
    c = cluster(name)
    rng = np.random.default_rng(0)
    n = 200
    V = rng.uniform(0, 1e9, n)
    g = 2 ** rng.integers(0, 6, n)
    s = 2 ** rng.integers(0, 4, n)
    for kind in KINDS + ("collective-permute",):
        arr = C.group_time(kind, V, g, s, c)
        one = [C.group_time(kind, v, int(gg), int(ss), c) for v, gg, ss in zip(V, g, s)]
        np.testing.assert_allclose(arr, one, rtol=1e-12)


@settings(max_examples=60, deadline=None)
@given(V=st.floats(0, 1e10), g=st.sampled_from([1, 2, 4, 8, 16, 64, 512]),
       stride=st.sampled_from([1, 2, 8, 16]), kind=st.sampled_from(KINDS),
       name=st.sampled_from(["llama3-24k", "tpu-v5p-4x4x4", "dgx-a100"]))
def test_group_time_is_positive_monotone_and_zero_alone(V, g, stride, kind, name):
    c = cluster(name)
    g = min(g, c.n_devices)
    t = C.group_time(kind, V, g, stride, c)
    assert t >= 0
    assert C.group_time(kind, 2 * V + 1, g, stride, c) >= t
    assert C.group_time(kind, V, 1, stride, c) == 0.0
    # the algorithm choice never makes a collective slower than the ring alone
    assert t <= C.group_time(kind, V, g, stride, c, algorithms=("ring",)) * (1 + 1e-12)


def test_all_reduce_is_reduce_scatter_plus_all_gather_with_rings():
    for name in CLUSTERS:
        c = cluster(name)
        for g in (2, 8, min(64, c.n_devices)):
            rs, ag, ar = (C.group_time(k, 1e9, g, 1, c, algorithms=("ring",))
                          for k in ("reduce-scatter", "all-gather", "all-reduce"))
            if g <= c.devices_per_node:  # one level: exactly the sum
                assert ar == pytest.approx(rs + ag)
            else:  # the top level all-reduces a share: never more than the sum
                assert ar <= (rs + ag) * (1 + 1e-12)


def test_calibration_scales_bandwidth_and_replaces_latency():
    c = cluster("dgx-h100")
    cal = type("Cal", (), dict(nvlink_efficiency=0.5, nvlink_latency=10e-6,
                               network_efficiency=0.5, network_latency=50e-6))()
    slow = C.group_time("all-gather", 1e9, 8, 1, c, calibration=cal, algorithms=("ring",))
    want = 7 * 10e-6 + 7 / 8 * 1e9 / (0.5 * 450e9)
    assert slow == pytest.approx(want)


# ---- small messages on NVSwitch ---------------------------------------------------------------
# Measured all-reduce of bf16 on 8 H100s (one node, NVSwitch), out-of-place time, nccl-tests
# with MSCCL++'s NVLS kernels preloaded (microsoft/mscclpp pull request #646, 2025):
MEASURED_8xH100_US = {16384: 5.92, 32768: 7.51, 65536: 7.59, 131072: 6.57, 262144: 7.19,
                      524288: 7.90, 1048576: 9.95, 2097152: 13.60}
# TensorRT-LLM's custom (one-shot) all-reduce at tp = 8 on H100, sgl-project/sglang pull request
# #2904 (2025): 5.7 us at 4 kB and 7.8 us at 32 kB. NCCL itself through torch.distributed
# (eager): 20.7 us at 16 kB (ByteDance-Seed/Triton-distributed issue #57, 2025); NCCL's own
# tuning model gives its LL ring 6.6 + 14 x 0.6 = 15 us on 8 GPUs (src/graph/tuning.cc).


def test_16kb_all_reduce_on_8_h100_costs_what_it_measures():
    c = hardware.cluster("h100", 8)
    t = C.group_time("all-reduce", 16384, 8, 1, c)
    assert 5e-6 <= t <= 12e-6
    assert abs(t / 5.92e-6 - 1) < 0.25
    ring = C.group_time("all-reduce", 16384, 8, 1, c, algorithms=("ring",))
    assert ring > 25e-6  # the 14-step ring the chapters used to charge
    _, name = C.best_algorithm("all-reduce", 16384, 8, 450e9, latency=2e-6)
    assert name == "nvls"
    _, name = C.best_algorithm("all-reduce", 16384, 8, 300e9, latency=2e-6,
                               accelerator="a100-80gb")
    assert name == "one_shot"  # no NVLink SHARP on A100


def test_h100_all_reduce_follows_the_measured_curve():
    c = hardware.cluster("h100", 8)
    sizes = np.array(list(MEASURED_8xH100_US), dtype=float)
    got = C.group_time("all-reduce", sizes, 8, 1, c) * 1e6
    want = np.array(list(MEASURED_8xH100_US.values()))
    assert np.all(np.abs(got / want - 1) < 0.25), dict(zip(sizes, got.round(2)))


def test_algorithm_switch_points():
    """One-shot while the steps dominate, then the bandwidth-efficient algorithms: on A100 the
    switch from one-shot to two-shot falls near vLLM's 256 kB at 8 GPUs; above the direct
    kernels' 8 MiB buffer the ring takes over; across nodes NCCL's tree wins small messages."""
    names = [C.best_algorithm("all-reduce", V, 8, 300e9, latency=2e-6,
                              accelerator="a100-80gb")[1] for V in (64e3, 1e6, 64e6)]
    assert names == ["one_shot", "two_shot", "ring"]
    sizes = np.geomspace(1e3, 8e6, 400)
    t1, t2 = (C.algorithm_terms("all-reduce", 8, a) for a in ("one_shot", "two_shot"))
    one = t1[0] * 2e-6 + t1[1] * sizes / 300e9
    two = t2[0] * 2e-6 + t2[1] * sizes / 300e9
    cross = sizes[np.argmax(two < one)]
    assert 200e3 < cross < 320e3
    tree = [C.best_algorithm("all-reduce", V, 64, 50e9, latency=5e-6, nodes=64)[1]
            for V in (1e3, 1e9)]
    assert tree == ["tree", "ring"]


def test_cross_node_small_all_reduce_uses_the_tree():
    c = hardware.cluster("h100", 512)
    auto = C.group_time("all-reduce", 16e3, 512, 1, c)
    ring = C.group_time("all-reduce", 16e3, 512, 1, c, algorithms=("ring",))
    assert auto < ring / 2


def test_bad_inputs_name_the_rule():
    with pytest.raises(ValueError, match="group_size"):
        C.group_time("all-reduce", 1e6, 0, 1, "dgx-h100")
    with pytest.raises(ValueError, match="stride"):
        C.group_time("all-reduce", 1e6, 2, 0.5, "dgx-h100")
    with pytest.raises(ValueError, match="unknown collective"):
        C.group_time("gather", 1e6, 2, 1, "dgx-h100")
    with pytest.raises(ValueError, match="algorithms"):
        C.group_time("all-reduce", 1e6, 2, 1, "dgx-h100", algorithms=("magic",))
    with pytest.raises(ValueError, match="runs an all-reduce"):
        C.algorithm_terms("all-gather", 8, "one_shot")


# ---- frameworks' communication -----------------------------------------------------------------
CFG = TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64)


def _sent(comms):
    return sum(C.collective_bytes(c.kind, c.nbytes, c.group_size).sent_bytes * c.count
               for c in comms)


@pytest.mark.parametrize("cp", [2, 4, 8])
def test_ring_attention_backward_is_twice_the_forward(cp):
    cfg = models.get("llama3-8b")
    plan = ParallelPlan(dp=2, cp=cp, cp_variant="ring")
    comms = context.comms(cfg, plan, 2, 8192)
    fwd = sum(c.nbytes * c.count for c in comms if c.phase == "forward")
    bwd = sum(c.nbytes * c.count for c in comms if c.phase == "backward")
    assert bwd == 2 * fwd
    kept = context.comms(cfg, plan, 2, 8192, ring_keeps_kv=True)
    assert sum(c.nbytes * c.count for c in kept if c.phase == "backward") == fwd


@pytest.mark.parametrize("model,tp,cp", [("llama3-8b", 1, 16), ("llama3-70b", 8, 8),
                                         ("llama3-8b", 4, 4), ("llama3-8b", 1, 4)])
def test_ulysses_replicates_kv_heads_up_to_the_query_heads(model, tp, cp):
    cfg = models.get(model)
    n, k = context.heads_per_rank(cfg, tp)
    plan = ParallelPlan(cp=cp, tp=tp, cp_variant="ulysses")
    assert context.constraints(cfg, plan, 1, 8192) == []
    qkv = [c for c in context.comms(cfg, plan, 1, 8192) if c.kind == "all-to-all"][0]
    assert qkv.nbytes == 2 * 8192 * (n + 2 * max(k, cp)) * cfg.H
    too_many = ParallelPlan(cp=int(2 * n), tp=tp, cp_variant="ulysses")
    assert "query heads" in context.constraints(cfg, too_many, 1, 8192 * 4)[0]


def test_sequence_parallel_regather_is_an_extra_all_gather_per_column_linear():
    plan = ParallelPlan(tp=4, sequence_parallel=True, micro_batch=2)
    cfg = models.get("llama3-8b")
    with_re = collectives(cfg, plan, 4, 4096)
    without = collectives(cfg, plan, 4, 4096, sp_regather=False)
    extra = [c for c in with_re if c not in without]
    assert [(c.kind, c.phase, c.count) for c in extra] == [
        ("all-gather", "backward", (2 * cfg.L + 1) * plan.n_microbatches(4))]
    assert extra[0].nbytes == 2 * 2 * 4096 * cfg.D


def test_gradient_reduction_dtype_is_an_option():
    cfg = models.get("llama3-8b")
    for plan in (ParallelPlan(dp=8), ParallelPlan(dp=8, zero=1), ParallelPlan(dp=8, zero=3),
                 ParallelPlan(dp=8, zero=3, shard_group=4)):
        bf, fp = (collectives(cfg, plan, 8, 4096, grad_dtype=g) for g in (None, "fp32"))
        for a, b in zip(bf, fp):
            grad = a.axis == "dp" and a.kind in ("all-reduce", "reduce-scatter")
            assert b.nbytes == (2 if grad else 1) * a.nbytes


def test_moe_all_to_alls_follow_the_stage_and_the_dispatch():
    cfg = models.get("mixtral-8x7b")
    base = totals(collectives(cfg, ParallelPlan(dp=8, ep=8), 64, 4096))[("all-to-all", 8)]
    pp2 = totals(collectives(cfg, ParallelPlan(dp=8, ep=8, pp=2), 64, 4096))[("all-to-all", 8)]
    assert pp2 == base / 2
    padded = totals(collectives(cfg, ParallelPlan(dp=8, ep=8), 64, 4096,
                                dispatch="padded"))[("all-to-all", 8)]
    assert padded == cfg.E / cfg.k * base
    assert expert.stage_moe_layers(cfg, 2) == cfg.L // 2


# ---- compiled vs model bytes (JAX) --------------------------------------------------------------
MOE = TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64, E=4, k=2, F_expert=32,
                        name="tiny-moe")
COMPILED = {
    "ring-cp2": (CFG, ParallelPlan(cp=2, micro_batch=8, cp_variant="ring")),
    "ulysses-cp4-kv-replicated": (CFG, ParallelPlan(dp=2, cp=4, micro_batch=4,
                                                    cp_variant="ulysses")),
    "tp2-sp": (CFG, ParallelPlan(tp=2, sequence_parallel=True, micro_batch=4)),
    "moe-E4-k2-dropless": (MOE, ParallelPlan(dp=2, ep=2, micro_batch=4)),
}


@pytest.mark.parametrize("name", list(COMPILED))
def test_compiled_bytes_are_the_model_with_named_differences(name):
    pytest.importorskip("jax")
    from scaling_lib import simulate as sim

    sim.use_cpu_devices(8)
    cfg, plan = COMPILED[name]
    r = sim.train_step(cfg, plan, B=8, T=16)
    emitted = sim.emitted_totals(r.collectives)
    assert emitted == totals(sim.expected_collectives(cfg, plan, 8, 16))
    model = totals(collectives(cfg, plan, 8, 16, dtype="f32"))
    assert (emitted == model) == (sim.differences(cfg, plan) == ())
    if math.isfinite(0) and name == "moe-E4-k2-dropless":  # E/k = 2: the issue's 2x
        assert emitted[("all-to-all", 2)] == 2 * model[("all-to-all", 2)]


def test_nvls_matches_the_measured_large_message_ratio_and_loses_on_two_gpus():
    """NVLink SHARP at 8 GPUs: 480 against the ring's 370 GB/s of bus bandwidth (NCCL lead,
    NVIDIA/nccl-tests #212), i.e. b_ring / b_nvls = 480/370; on 2 GPUs the ring already moves
    only V per GPU, so the switch's reduction does not pay."""
    (_, ring8), (_, nvls8) = (C.algorithm_terms("all-reduce", 8, a) for a in ("ring", "nvls"))
    assert ring8 / nvls8 == pytest.approx(480 / 370)
    (_, ring2), (_, nvls2) = (C.algorithm_terms("all-reduce", 2, a) for a in ("ring", "nvls"))
    assert nvls2 > ring2
    assert C.best_algorithm("all-reduce", 1e9, 2, 450e9, latency=2e-6)[1] == "ring"
    assert C.best_algorithm("all-reduce", 1e9, 8, 450e9, latency=2e-6)[1] == "nvls"


def test_tpu_small_messages_pay_one_latency_per_hop():
    """On ICI a step to the next chip is one hop (1 us): an all-reduce over a wrapped 4x4x4
    v5p slice takes 2 (2 + 2 + 2) = 12 hops, over an unwrapped 2x4x4 one 2 (1 + 3 + 3) = 14;
    NCCL's algorithms do not apply (no switch)."""
    assert C.group_time("all-reduce", 0.0, 64, 1, cluster("tpu-v5p-4x4x4")) == \
        pytest.approx(12e-6)
    assert C.group_time("all-reduce", 0.0, 32, 1, cluster("tpu-v5p-2x4x4")) == \
        pytest.approx(14e-6)
    small = C.group_time("all-reduce", 16e3, 64, 1, cluster("tpu-v5p-4x4x4"))
    assert small == C.group_time("all-reduce", 16e3, 64, 1, cluster("tpu-v5p-4x4x4"),
                                 algorithms=("ring",))
