"""Tests for scaling_lib.hardware: presets against their datasheets, chip internals against the
peaks they must rebuild, TPU slices, and the named clusters."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaling_lib import hardware as hw
from scaling_lib.units import GiB, KiB, MiB

API_NAMES = ["v100", "a100-40gb", "a100-80gb", "h100", "h200", "b200",
             "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e"]
GPUS_WITH_INTERNALS = ["k40", "p100", "v100", "a100-40gb", "a100-80gb", "h100", "h200"]


# ---- lookup -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", API_NAMES)
def test_every_api_name_resolves(name):
    acc = hw.get(name)
    assert acc.name == name
    assert acc.peak_flops_per_s(hw.training_dtype(acc)) > 0
    assert acc.hbm_bytes > 0 and acc.hbm_bytes_per_s > 0


def test_unknown_accelerator_lists_known_names():
    with pytest.raises(ValueError) as err:
        hw.get("h1000")
    for name in API_NAMES:
        assert name in str(err.value)


def test_aliases_and_passthrough():
    assert hw.get(" H100-SXM ") is hw.get("h100")
    assert hw.get("v5e") is hw.get("tpu-v5e")
    acc = hw.get("h100")
    assert hw.get(acc) is acc
    with pytest.raises(ValueError):
        hw.get(3)


def test_missing_dtype_names_the_valid_ones():
    with pytest.raises(ValueError, match="fp16"):
        hw.get("v100").peak_flops_per_s("bf16")


# ---- golden values from datasheets ----------------------------------------------------------------

def test_h100_datasheet_sxm5():
    # NVIDIA H100 datasheet (SXM5): 989.4 TF bf16 dense, 1,978.9 fp8, 80 GB at 3.35 TB/s.
    h = hw.get("h100")
    assert h.peak_flops_per_s("bf16") == 989.4e12
    assert h.peak_flops_per_s("fp8") == 1978.9e12
    assert h.hbm_bytes == 80e9 and h.hbm_bytes_per_s == 3.35e12
    assert h.critical_intensity() == pytest.approx(295.3, abs=0.1)
    assert h.link_bytes_per_s == 450e9  # 900 GB/s both directions


@pytest.mark.parametrize("name,bf16,hbm,bw", [
    ("a100-80gb", 312e12, 80e9, 2.039e12),  # A100 datasheet (SXM4 80GB)
    ("h200", 989.4e12, 141e9, 4.8e12),      # H200 datasheet
    ("b200", 2.25e15, 180e9, 8e12),         # HGX B200 (1000 W); DGX B200: 1,440 GB / 8
    ("tpu-v5e", 197e12, 16e9, 819e9),       # Cloud TPU v5e docs
    ("tpu-v5p", 459e12, 95e9, 2.765e12),    # Cloud TPU v5p docs
    ("tpu-v6e", 918e12, 32e9, 1.638e12),    # Cloud TPU v6e docs
    ("tpu-v4", 275e12, 32 * GiB, 1.2e12),   # Cloud TPU v4 docs
])
def test_datasheet_values(name, bf16, hbm, bw):
    acc = hw.get(name)
    assert (acc.peak_flops_per_s(), acc.hbm_bytes, acc.hbm_bytes_per_s) == (bf16, hbm, bw)
    assert acc.critical_intensity() == pytest.approx(bf16 / bw)


def test_k40_is_fp32_only():
    # Tesla K40 datasheet: 4.29 TF fp32 at base clock, 12 GB at 288 GB/s, no 16-bit rate.
    k = hw.get("k40")
    assert hw.training_dtype(k) == "fp32"
    assert k.peak_flops_per_s("fp32") == 4.29e12 and k.hbm_bytes_per_s == 288e9
    assert not k.supports("bf16")


# ---- GPU internals --------------------------------------------------------------------------------

@pytest.mark.parametrize("name", GPUS_WITH_INTERNALS)
def test_internals_rebuild_the_datasheet_peaks(name):
    acc = hw.get(name)
    inside = acc.internals
    assert inside.n_sm == acc.n_cores and inside.n_sm <= inside.n_sm_full
    assert inside.fp32_flops_per_s == pytest.approx(acc.peak_flops_per_s("fp32"), rel=0.005)
    if inside.tensor_cores_per_sm:
        dtype = hw.training_dtype(acc)
        assert inside.tensor_flops_per_s == pytest.approx(acc.peak_flops_per_s(dtype), rel=0.005)
    else:
        assert inside.tensor_flops_per_s == 0.0
    assert inside.level("HBM" if name != "k40" else "GDDR5").capacity_bytes == acc.hbm_bytes


def test_h100_from_the_inside():
    # H100 whitepaper: 132 of 144 SMs, 4 tensor cores and 128 FP32 cores per SM.
    g = hw.get("h100").internals
    assert (g.n_sm, g.n_sm_full, g.tensor_cores_per_sm, g.fp32_cores_per_sm) == (132, 144, 4, 128)
    assert g.tensor_flops_per_clock_per_sm == 4096 and g.fp32_flops_per_clock_per_sm == 256
    assert g.tensor_clock_hz == pytest.approx(1.83e9) and g.clock_hz == pytest.approx(1.98e9)
    assert g.level("registers").capacity_bytes == 256 * KiB
    assert g.level("l1/smem").capacity_bytes == 256 * KiB
    assert g.level("L2").total_bytes == 50 * MiB
    assert g.level("HBM").bytes_per_s == 3.35e12
    with pytest.raises(ValueError, match="registers"):
        g.level("L3")


@pytest.mark.parametrize("name", ["v100", "a100-80gb", "h100"])
def test_memory_hierarchy_slower_levels_are_bigger(name):
    # Bandwidth falls level by level; HBM dwarfs the on-chip SRAM. (The per-SM SRAM summed over
    # all SMs can exceed L2: on V100, 80 x 128 KiB of SMEM is 10 MiB against a 6 MiB L2.)
    levels = hw.get(name).internals.memory
    caps = [lvl.total_bytes for lvl in levels]
    bws = [lvl.bytes_per_s for lvl in levels]
    assert caps[-1] > 1000 * max(caps[:-1])
    assert bws == sorted(bws, reverse=True)
    assert all(np.isfinite(bws))


def test_tensor_core_speedup():
    # H100: 989.4 / 66.9 TF; per clock 4096 / 256 = 16 (the tensor peak uses a lower clock).
    assert hw.tensor_core_speedup("h100") == pytest.approx(14.79, abs=0.01)
    assert hw.tensor_core_speedup("a100-80gb") == pytest.approx(16.0)
    assert hw.tensor_core_speedup("v100", "fp16") == pytest.approx(125 / 15.7)


def test_training_dtype_rejects_chips_without_one():
    odd = hw.with_changes(hw.get("tpu-v5e"), name="int8-only", peak_flops={"int8": 1e15})
    with pytest.raises(ValueError, match="int8"):
        hw.training_dtype(odd)


def test_gpu_timeline_grows():
    accs = [hw.get(n) for n in hw.GPU_TIMELINE]
    years = [a.year for a in accs]
    peaks = [a.peak_flops_per_s(hw.training_dtype(a)) for a in accs]
    assert years == sorted(years) and years[-1] - years[0] == 11
    assert peaks == sorted(peaks)
    # compute grew faster than memory bandwidth: the critical intensity rises
    assert peaks[-1] / peaks[0] > 10 * accs[-1].hbm_bytes_per_s / accs[0].hbm_bytes_per_s


@given(n=st.integers(1, 200), f=st.floats(1, 1e4), c=st.floats(1e8, 3e9))
@settings(max_examples=50, deadline=None)
def test_chip_flops_per_s_is_a_product(n, f, c):
    assert hw.chip_flops_per_s(n, f, c) == pytest.approx(n * f * c)
    assert hw.chip_flops_per_s(2 * n, f, c) == pytest.approx(2 * hw.chip_flops_per_s(n, f, c))


def test_chip_flops_per_s_broadcasts_and_validates():
    out = hw.chip_flops_per_s(np.array([108, 132]), 4096, 1.83e9)
    assert out.shape == (2,)
    with pytest.raises(ValueError, match="clock_hz"):
        hw.chip_flops_per_s(132, 4096, 0)


# ---- TPU internals --------------------------------------------------------------------------------

def test_tpu_v4_clock_matches_the_paper():
    # Jouppi et al. 2023 (TPU v4, ISCA), table: 1,050 MHz; 2 TensorCores x 4 MXUs of 128x128.
    acc = hw.get("tpu-v4")
    assert acc.internals.implied_clock_hz(acc.peak_flops_per_s()) == pytest.approx(1.05e9, rel=0.01)


def test_tpu_internals():
    v5e, v5p, v6e = (hw.get(n).internals for n in ("tpu-v5e", "tpu-v5p", "tpu-v6e"))
    assert (v5e.tensorcores, v5e.n_mxus, v5e.mxu_size, v5e.chips_per_host) == (1, 4, 128, 8)
    assert (v5p.tensorcores, v5p.n_mxus, v5p.chips_per_host) == (2, 8, 4)
    assert v6e.mxu_size == 256 and v5e.vmem_bytes == 128 * MiB
    assert v5e.flops_per_clock == 4 * 2 * 128**2
    assert v5e.implied_clock_hz(197e12) == pytest.approx(1.5e9, rel=0.01)
    assert math.isnan(v5p.vmem_bytes)


# ---- TPU slices -----------------------------------------------------------------------------------

@pytest.mark.parametrize("name,shape,expected", [
    ("tpu-v5e", (16, 16), (True, True)),
    ("tpu-v5e", (8, 16), (False, True)),
    ("tpu-v5e", (4, 4), (False, False)),
    ("tpu-v6e", (16, 8), (True, False)),
    ("tpu-v5p", (4, 4, 4), (True, True, True)),
    ("tpu-v5p", (4, 4, 8), (True, True, True)),
    ("tpu-v5p", (2, 2, 4), (False, False, False)),
    ("tpu-v4", (16, 16, 16), (True, True, True)),
])
def test_wraparound_only_on_full_axes(name, shape, expected):
    assert hw.wraparound(name, shape) == expected


@pytest.mark.parametrize("args,match", [
    (("tpu-v5e", (4, 4, 4)), "2 positive integers"),
    (("tpu-v5e", (32, 16)), "256"),
    (("h100", (4, 4)), "TPU"),
    (("tpu-v5p", (0, 4, 4)), "positive"),
])
def test_wraparound_rejects_bad_slices(args, match):
    with pytest.raises(ValueError, match=match):
        hw.wraparound(*args)


def test_ici_max_hops():
    assert hw.ici_max_hops((4, 4), (False, False)) == 6
    assert hw.ici_max_hops((16, 16)) == 16
    assert hw.ici_max_hops((16, 20, 28)) == 8 + 10 + 14
    with pytest.raises(ValueError):
        hw.ici_max_hops((4, 4), (True,))


@given(shape=st.lists(st.integers(1, 32), min_size=1, max_size=3))
@settings(max_examples=60, deadline=None)
def test_wraparound_never_adds_hops(shape):
    closed = hw.ici_max_hops(shape)
    open_ = hw.ici_max_hops(shape, [False] * len(shape))
    assert closed <= open_ == sum(a - 1 for a in shape)


@given(a=st.sampled_from([1, 2, 4, 8, 16]), b=st.sampled_from([1, 2, 4, 8, 16]))
@settings(max_examples=30, deadline=None)
def test_tpu_slice_counts(a, b):
    s = hw.tpu_slice("tpu-v5e", (a, b))
    assert s.n_devices == a * b and s.n_nodes == 1
    assert s.n_hosts == math.ceil(a * b / 8)
    assert s.wraparound == (a == 16, b == 16)
    assert s.topology == "torus_2d"


def test_full_pods():
    # Cloud TPU docs: v5e pod 256 chips, 50.63 PF bf16; v6e 234.9 PF; v5p 8,960 chips (16x20x28).
    v5e, v6e, v5p = (hw.get_cluster(n) for n in ("tpu-v5e-pod", "tpu-v6e-pod", "tpu-v5p-pod"))
    assert v5e.peak_flops_per_s == pytest.approx(50.63e15, rel=0.005)
    assert v6e.peak_flops_per_s == pytest.approx(234.9e15, rel=0.005)
    assert v5e.hbm_bytes == 256 * 16e9 and v5e.n_hosts == 32
    assert v5p.n_devices == 8960 and v5p.torus_shape == (16, 20, 28) and v5p.n_hosts == 2240
    assert v5p.hbm_bytes == 8960 * 95e9
    assert v5p.peak_flops_per_s == pytest.approx(4.11e18, rel=0.001)
    assert all(v5p.wraparound)


# ---- named clusters -------------------------------------------------------------------------------

def test_every_cluster_preset_builds():
    for name in hw.cluster_names():
        c = hw.get_cluster(name)
        assert c.n_devices >= 8 and c.name
        assert c.peak_flops_per_s == c.n_devices * c.accelerator.peak_flops_per_s()


def test_unknown_cluster_lists_known_names():
    with pytest.raises(ValueError) as err:
        hw.get_cluster("dgx-h1000")
    for name in hw.cluster_names():
        assert name in str(err.value)
    with pytest.raises(ValueError):
        hw.get_cluster(None)


def test_dgx_h100():
    # DGX H100 user guide: 8 GPUs, NVLink 4 at 900 GB/s both ways, 8 x 400 Gb/s NICs.
    c = hw.get_cluster("dgx-h100")
    assert (c.n_devices, c.n_nodes, c.n_hosts, c.topology) == (8, 1, 1, "switch")
    assert c.intra_node.bytes_per_s == 450e9
    assert c.devices_per_node * c.inter_node.bytes_per_s == 400e9  # node egress
    assert hw.get_cluster("hgx-a100").inter_node.bytes_per_s == 25e9


def test_gb200_nvl72():
    # GB200 NVL72 spec: 72 GPUs, 180 PF bf16 dense (360 with sparsity), 13.4 TB HBM3e, 18 trays.
    c = hw.get_cluster("gb200-nvl72")
    assert (c.n_devices, c.n_nodes, c.n_hosts) == (72, 1, 18)
    assert c.peak_flops_per_s == pytest.approx(180e15)
    assert c.hbm_bytes == pytest.approx(13.4e12)


def test_llama3_cluster_totals():
    # Llama 3 Herd of Models, section 3.3: 24,576 H100 80GB in 8 pods of 3,072, 1:7 between pods.
    c = hw.get_cluster("llama3-24k")
    assert (c.n_devices, c.n_pods, c.devices_per_pod, c.n_nodes) == (24576, 8, 3072, 3072)
    # HBM: 24,576 x 80e9 = 1.97e15 bytes (decimal PB); the "about 1.8 PB" figure is this total in
    # binary units, 1.75 PiB.
    assert c.hbm_bytes == pytest.approx(1.966e15, rel=1e-3)
    assert c.hbm_bytes / 2**50 == pytest.approx(1.746, abs=0.001)
    assert c.peak_flops_per_s == pytest.approx(24.3e18, rel=0.001)  # 24,576 x 989.4e12
    assert c.inter_pod.bytes_per_s == pytest.approx(c.inter_node.bytes_per_s / 7)


def test_cluster_validation():
    link = hw.Link("x", 1e9)
    acc = hw.get("h100")
    with pytest.raises(ValueError, match="wraparound"):
        hw.Cluster(acc, 16, 16, link, link, "torus_2d", (4, 4), wraparound=(True,))
    with pytest.raises(ValueError, match="devices_per_pod"):
        hw.Cluster(acc, 64, 8, link, link, devices_per_pod=12, inter_pod=link)
    with pytest.raises(ValueError, match="topology"):
        hw.Cluster(acc, 8, 8, link, link, "mesh")


def test_cluster_defaults_unchanged():
    c = hw.cluster("h100", 64)
    assert (c.n_nodes, c.intra_node.bytes_per_s, c.inter_node.bytes_per_s) == (8, 450e9, 50e9)
    assert c.n_pods == 1 and c.inter_pod is None
    t = hw.cluster("tpu-v5p", 64)
    assert t.torus_shape == (4, 4, 4) and all(t.wraparound) and t.n_hosts == 16
    with pytest.raises(ValueError, match="unknown cluster option"):
        hw.cluster("h100", 8, nodes=2)
    with pytest.raises(ValueError, match="no default cluster"):
        hw.cluster("k40", 8)


# ---- tile quantization ----------------------------------------------------------------------------

def test_wave_and_padding_efficiency():
    assert hw.wave_efficiency(264, 132) == 1.0
    assert hw.wave_efficiency(133, 132) == pytest.approx(133 / 264)
    assert hw.padding_efficiency(200, 128) == pytest.approx(200 / 256)
    out = hw.padding_efficiency(np.array([128, 129, 256]), 128)
    np.testing.assert_allclose(out, [1.0, 129 / 256, 1.0])
    with pytest.raises(ValueError, match="n_units"):
        hw.wave_efficiency(10, 0)


@given(n=st.integers(1, 10_000), units=st.integers(1, 200))
@settings(max_examples=80, deadline=None)
def test_efficiencies_are_fractions_and_exact_on_multiples(n, units):
    e = hw.wave_efficiency(n, units)
    assert 0 < e <= 1 and (e == 1.0) == (n % units == 0)
    # one more full wave never lowers the efficiency
    assert hw.wave_efficiency(n + units, units) >= e - 1e-12
    assert 0 < hw.padding_efficiency(n, units) <= 1


# ---- the chapters' figures (scaling_lib.course.widgets.hardware) -------------------------------------------

def test_hardware_figures_draw_library_numbers():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scaling_lib.course.widgets import hardware as fig

    g = fig.growth_since_first()
    assert g["names"][0] == "k40" and g["peak"][0] == 1.0
    assert g["peak"][-1] == pytest.approx(2.25e15 / 4.29e12)  # B200 bf16 over K40 fp32
    _, axes = plt.subplots(1, 3)
    fig.plot_timeline(axes[0])
    levels = fig.plot_memory_hierarchy(axes[1], "h100")
    assert [m.name for m in levels] == ["registers", "L1/SMEM", "L2", "HBM"]
    assert fig.plot_torus(axes[2], (4, 16), (False, True)) == 3 + 8
    with pytest.raises(ValueError, match="h100"):
        fig.plot_memory_hierarchy(axes[1], "b200")
    with pytest.raises(ValueError, match="2D"):
        fig.plot_torus(axes[2], (4, 4, 4))
    plt.close("all")


# ---- warps and occupancy (CUDA Programming Guide, compute capability 9.0) ----------------------

from scaling_lib.hardware import clusters as hw_clusters  # noqa: E402
from scaling_lib.hardware import internals as hw_internals  # noqa: E402


def test_h100_sm_limits_match_the_cuda_guide():
    lim = hw_internals.SM_LIMITS["Hopper"]
    assert (lim.warp_size, lim.max_warps, lim.max_blocks) == (32, 64, 32)
    assert lim.max_warps * lim.warp_size == 2048  # resident threads per SM
    assert lim.registers * 4 == 256 * 1024  # the 256 KB register file of the memory table
    assert lim.smem_bytes == 228 * 1024 and lim.max_smem_per_block == 227 * 1024
    assert lim.smem_bytes <= hw.get("h100").internals.level("L1/SMEM").capacity_bytes


def test_occupancy_limiters():
    occ = hw_internals.occupancy
    full = occ(32, 0, 256)
    assert (full.blocks, full.warps, full.fraction, full.limited_by) == (8, 64, 1.0, "warps")
    # registers: 64 per thread -> 2,048 per warp -> 32 warps of 64
    assert occ(64, 0, 256).warps == 32 and occ(64, 0, 256).limited_by == "registers"
    # 255 registers round up to 8,192 per warp: 8 warps
    assert occ(255, 0, 32).warps == 8
    # shared memory: 100 KB per block (+1 KB reserved) -> 2 blocks of 228 KB
    o = occ(32, 100 * 1024, 128)
    assert (o.blocks, o.limited_by) == (2, "shared memory")
    # tiny blocks hit the 32-block cap
    o = occ(16, 0, 32)
    assert (o.blocks, o.warps, o.limited_by) == (32, 32, "blocks")
    # a 1,024-thread block of 64 registers exactly fills the register file twice
    assert occ(64, 0, 1024).blocks == 1
    # A100 holds less shared memory per SM than H100
    assert occ(32, 60 * 1024, 128, "Ampere").blocks < occ(32, 60 * 1024, 128).blocks


@pytest.mark.parametrize("kw", [dict(registers_per_thread=0), dict(registers_per_thread=256),
                                dict(registers_per_thread=32.5), dict(registers_per_thread=True),
                                dict(threads_per_block=1025), dict(smem_bytes_per_block=-1),
                                dict(smem_bytes_per_block=228 * 1024), dict(limits="Volta")])
def test_occupancy_bad_input(kw):
    args = dict(registers_per_thread=32, smem_bytes_per_block=0, threads_per_block=256) | kw
    with pytest.raises(ValueError):
        hw_internals.occupancy(**args)


def test_occupancy_monotone_in_registers():
    fr = [hw_internals.occupancy(r, 0, 128).fraction for r in range(16, 256, 8)]
    assert all(a >= b for a, b in zip(fr, fr[1:]))
    assert fr[0] == 1.0 and fr[-1] < 0.2


# ---- NCCL over NVLink, NVLink SHARP ------------------------------------------------------------


def test_nccl_h100_figures_and_efficiency():
    f = hw_clusters.nccl_on_nvlink("h100")
    assert f.line_bytes_per_s == hw.get("h100").link_bytes_per_s  # the one-way NVLink 4 rate
    assert 0.75 < f.efficiency < 0.85  # "protocol overhead (~20%)" (nccl-tests #212)
    assert f.nvls_bus_bytes_per_s > f.line_bytes_per_s > f.ring_bus_bytes_per_s
    # busbw = algbw * 2(n-1)/n: the NVLS figures quoted together agree to within 2%
    factor = hw_clusters.bus_bandwidth_factor("all-reduce", 8)
    assert f.nvls_alg_bytes_per_s * factor == pytest.approx(f.nvls_bus_bytes_per_s, rel=0.02)
    assert hw_clusters.nccl_on_nvlink("h200") == f
    with pytest.raises(ValueError):
        hw_clusters.nccl_on_nvlink("tpu-v5e")


def test_bus_bandwidth_factor():
    assert hw_clusters.bus_bandwidth_factor("all_reduce", 2) == 1.0
    assert hw_clusters.bus_bandwidth_factor("all-gather", 4) == 0.75
    for bad in (dict(collective="scan", n=8), dict(collective="all-reduce", n=1),
                dict(collective="all-reduce", n=2.0)):
        with pytest.raises(ValueError):
            hw_clusters.bus_bandwidth_factor(**bad)


def test_in_switch_all_reduce_halves_traffic_for_large_n():
    f = hw_clusters.all_reduce_bytes_per_device
    assert f(1e9, 1) == 0.0
    assert f(1e9, 2) == f(1e9, 2, in_switch=True) == 1e9  # two GPUs: nothing to gain
    assert f(1e9, 8) / f(1e9, 8, in_switch=True) == pytest.approx(1.75)
    assert f(1e9, 72) / f(1e9, 72, in_switch=True) == pytest.approx(2 * 71 / 72)
    for bad in (dict(nbytes=-1, n=8), dict(nbytes=1e9, n=0), dict(nbytes=float("nan"), n=8),
                dict(nbytes="1e9", n=8)):
        with pytest.raises(ValueError):
            f(**bad)


def test_nvl72_is_one_nvlink_domain_of_72():
    c = hw.get_cluster("gb200-nvl72")
    assert c.n_devices == c.devices_per_node == 72 and c.n_nodes == 1
    assert c.intra_node.bytes_per_s / c.inter_node.bytes_per_s == 18  # 900 GB/s vs a 400 Gb/s NIC


def test_occupancy_zero_when_one_block_does_not_fit():
    # 512 threads x 129 registers > the 65,536-register file: CUDA refuses the launch
    o = hw_internals.occupancy(129, 0, 512)
    assert (o.blocks, o.warps, o.fraction, o.limited_by) == (0, 0, 0.0, "registers")
    assert hw_internals.occupancy(128, 0, 512).blocks == 1


def test_occupancy_figure_draws_the_calculator():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from scaling_lib.course.widgets import hardware as fig

    _, ax = plt.subplots()
    out = fig.plot_occupancy(ax, (256, 512))
    assert out[256][0] == 1.0  # 16 registers: every warp slot
    assert out[256][64 - 16] == hw_internals.occupancy(64, 0, 256).fraction
    assert np.isnan(out[512][129 - 16])  # a 512-thread block of 129 registers cannot launch
    plt.close("all")


def test_tpu_v5e_vmem_bandwidth_is_about_22x_hbm():
    """Austin et al., How to Scale Your Model, part 2: VMEM ~22x HBM, so a matmul fed from VMEM is
    compute-bound from an intensity of about 10-20 FLOPs per byte."""
    from scaling_lib import hardware

    v5e = hardware.get("tpu-v5e")
    ratio = v5e.internals.vmem_bytes_per_s / v5e.hbm_bytes_per_s
    assert 21 < ratio < 23
    assert 10 < v5e.peak_flops_per_s() / v5e.internals.vmem_bytes_per_s < 20
    assert math.isnan(hardware.get("tpu-v5p").internals.vmem_bytes_per_s)


def test_tpu_largest_slices_against_their_pods():
    """v5e/v6e: the largest slice is the pod; v5p: 6,144 of 8,960 chips (Google Cloud v5p docs)."""
    from scaling_lib import hardware
    from scaling_lib.hardware import chips

    for name, shape in chips.TPU_MAX_SLICE_SHAPE.items():
        pod = hardware.get_cluster(f"{name}-pod")
        assert math.prod(shape) <= pod.n_devices
        assert (math.prod(shape) == pod.n_devices) == (name != "tpu-v5p")
        assert all(hardware.wraparound(name, shape))
    assert math.prod(chips.TPU_MAX_SLICE_SHAPE["tpu-v5p"]) == 6144


@pytest.mark.parametrize("name,shape", [("tpu-v5p", (16, 20, 28)), ("tpu-v5p", (16, 16, 32)),
                                        ("tpu-v5e", (8, 32)), ("tpu-v6e", (16, 16, 2)),
                                        ("tpu-v4", (16, 16, 32))])
def test_tpu_slice_refuses_more_than_the_largest_slice(name, shape):
    """Google Cloud TPU docs: v5p's largest slice is 16x16x24 (6,144 chips); v5e/v6e 16x16."""
    with pytest.raises(ValueError, match="largest single"):
        hw.tpu_slice(name, shape)


def test_tpu_slice_accepts_the_largest_slice_and_the_v5p_pod_is_not_one():
    from scaling_lib.hardware import chips
    for name, shape in chips.TPU_MAX_SLICE_SHAPE.items():
        assert hw.tpu_slice(name, shape[::-1]).n_devices == math.prod(shape)
    assert hw.get_cluster("tpu-v5p-pod").n_devices == 8960 > hw.tpu_slice("tpu-v5p", (16, 16, 24)).n_devices


def test_systolic_clocks_fill_and_drain():
    """Row r reaches cell (k, j) at clock r + k + j: the last row leaves at n - 1 + 2 (s - 1)."""
    assert hw.systolic_clocks(1, 1) == 1
    assert hw.systolic_clocks(4, 4) == 4 + 6
    s = 128
    # utilisation of an isolated tile rises with the rows streamed through it
    u = [n / hw.systolic_clocks(n, s) for n in (128, 1024, 8192)]
    assert u == sorted(u) and u[-1] > 0.96 and u[0] < 0.34
    with pytest.raises(ValueError):
        hw.systolic_clocks(0, 128)
