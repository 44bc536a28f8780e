"""Published training runs: what the authors reported, and the inputs to recompute it.

Each :class:`TrainingRun` holds a model shape, the hardware, the parallel layout and batch as
printed, and what the paper reported (throughput, step time, FLOP/s per device, MFU, HFU), with
its source (paper and table). The functions below recompute the reported figures from those inputs
with :mod:`scaling_lib.transformer`, so every published number in Chapter 7 is also a test.

Papers count FLOPs differently, which is half of what Chapter 7 is about:

- PaLM (Chowdhery et al. 2022, appendix B) defines MFU with the model FLOPs 6N + 12·L·H·Q·T per
  token: attention over the full T x T square, no recomputation.
- Megatron-LM (Narayanan et al. 2021, eq. 3) and MT-NLG (Smith et al. 2022) report achieved
  FLOP/s per GPU counted as 96·B·s·l·h²·(1 + s/6h + V/16lh) per step: the forward pass run twice
  (full activation recomputation), i.e. hardware FLOPs. ``flops_convention="full"`` marks them.
- Llama 3 (2024, Table 4) reports TFLOPs/GPU and BF16 MFU without stating how it counts attention.
- DeepSeek-V3 (2024) trained with fp8 matmuls and reports GPU-hours, no MFU: any MFU quoted for it
  depends on the peak chosen (:func:`whole_run_mfu` with ``dtype``).

See: Chapter 7, "MFU and HFU".
"""

from __future__ import annotations

from dataclasses import dataclass

from . import hardware, models, transformer
from .units import (DAY, HOUR, _brief, check_choice, check_count, check_fraction,
                    check_positive)

CONVENTIONS = ("none", "full")


@dataclass(frozen=True)
class TrainingRun:
    """One published training configuration and what was reported for it.

    Inputs: ``model`` (shape), ``accelerator`` (preset name), ``n_devices``, ``T`` (sequence
    length), ``global_batch`` (sequences per optimizer step), parallel degrees ``tp, pp, cp, dp``.
    Reported (None where the paper gives nothing): ``step_time`` (s), ``tokens_per_s``,
    ``flops_per_s_per_device`` (counted as ``flops_convention``: "none" = model FLOPs, "full" =
    with full recomputation), ``mfu``, ``mfu_no_attention``, ``hfu`` (fractions), ``n_params``.
    """

    name: str
    model: models.TransformerConfig
    accelerator: str
    n_devices: int
    T: int
    global_batch: int
    source: str
    tp: int = 1
    pp: int = 1
    cp: int = 1
    dp: int = 1
    step_time: float | None = None
    tokens_per_s: float | None = None
    flops_per_s_per_device: float | None = None
    flops_convention: str = "none"
    mfu: float | None = None
    mfu_no_attention: float | None = None
    hfu: float | None = None
    n_params: float | None = None
    notes: str = ""

    def __post_init__(self):
        check_choice("flops_convention", self.flops_convention, CONVENTIONS)
        if not isinstance(self.model, models.TransformerConfig):
            raise ValueError(f"model={_brief(self.model)} must be a TransformerConfig")
        if not isinstance(self.accelerator, str):
            raise ValueError(f"accelerator={_brief(self.accelerator)} must be a preset name")
        hardware.get(self.accelerator)  # unknown names raise, listing the known ones
        for name in ("n_devices", "T", "global_batch", "tp", "pp", "cp", "dp"):
            check_count(name, getattr(self, name))
        for name in ("step_time", "tokens_per_s", "flops_per_s_per_device", "n_params"):
            if getattr(self, name) is not None:
                check_positive(name, getattr(self, name))
        for name in ("mfu", "mfu_no_attention", "hfu"):
            if getattr(self, name) is not None:
                check_fraction(name, getattr(self, name))

    @property
    def tokens_per_step(self) -> int:
        """Tokens in one optimizer step: global_batch · T."""
        return self.global_batch * self.T


# ---- Megatron-LM, Narayanan et al. 2021 (SC21), Table 1 ----------------------------------------
# GPT models with V = 51,200 and s = 2,048 on A100 80GB (Selene, DGX A100), mixed precision.
# Columns: (billions of parameters, heads, hidden, layers, TP, PP, GPUs, batch size,
# achieved TFLOP/s per GPU, % of theoretical peak, aggregate PFLOP/s). The per-GPU FLOP/s use
# eq. 3, which counts full activation recomputation, so the "% of peak" is an HFU.
# Cross-checks of this transcription (tests/test_published.py): eq. 2 reproduces every parameter
# count, per-GPU x GPUs the aggregate column, per-GPU / 312 TFLOP/s the percentage.
_MEGATRON_TABLE1 = (
    (1.7, 24, 2304, 24, 1, 1, 32, 512, 137, 0.44, 4.4),
    (3.6, 32, 3072, 30, 2, 1, 64, 512, 138, 0.44, 8.8),
    (7.5, 32, 4096, 36, 4, 1, 128, 512, 142, 0.46, 18.2),
    (18.4, 48, 6144, 40, 8, 1, 256, 1024, 135, 0.43, 34.6),
    (39.1, 64, 8192, 48, 8, 2, 512, 1536, 138, 0.44, 70.8),
    (76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140, 0.45, 143.8),
    (145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148, 0.47, 227.1),
    (310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155, 0.50, 297.4),
    (529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163, 0.52, 410.2),
    (1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163, 0.52, 502.0),
)


def _megatron_name(billions: float) -> str:
    return f"megatron-{billions:g}b" if billions < 1000 else "megatron-1t"


# Aggregate FLOP/s as printed, by run name (a transcription check, not an input).
MEGATRON_AGGREGATE_FLOPS_PER_S = {_megatron_name(row[0]): row[-1] * 1e15
                                  for row in _MEGATRON_TABLE1}


def _megatron_runs():
    out = []
    for (b, N, D, L, tp, pp, n, batch, tflops, frac, _) in _MEGATRON_TABLE1:
        name = _megatron_name(b)
        out.append(TrainingRun(
            name=name, model=models.gpt(L, D, N, V=51200, T_max=2048, name=name),
            accelerator="a100-80gb", n_devices=n, T=2048, global_batch=batch,
            source="Narayanan et al. 2021 (Megatron-LM, SC21), Table 1",
            tp=tp, pp=pp, dp=n // (tp * pp), flops_per_s_per_device=tflops * 1e12,
            flops_convention="full", hfu=frac, n_params=b * 1e9,
            notes="hfu is the paper's '% of theoretical peak' (its FLOPs count recomputation)"))
    return out


# ---- MT-NLG 530B, Smith et al. 2022 (arXiv 2201.11990), section 2.4 -----------------------------
# 105 layers, hidden 20,480, 128 heads, s = 2,048, global batch 1,920 sequences, 8-way tensor and
# 35-way pipeline parallelism on DGX A100 nodes (8 GPUs each). 280, 350 and 420 nodes gave 60.1,
# 50.2 and 44.4 s per iteration and 126, 121 and 113 TFLOP/s per GPU (Megatron's eq. 3 counting).
# Vocabulary: the GPT-2 BPE (50,257) padded by Megatron to a multiple of 1,024 with TP = 8, i.e.
# 51,200; our assumption, the paper does not print it (it moves the FLOPs by < 0.1%).
# PaLM (Chowdhery et al. 2022, section 4.1 and Table 3) derives 65.43K tokens/s from the 2,240-GPU
# step time and an MFU of 30.2% with attention, 29.7% without.
_MTNLG = models.gpt(105, 20480, 128, V=51200, T_max=2048, name="mt-nlg-530b",
                    source="Smith et al. 2022 (MT-NLG), section 2")


def _mtnlg_runs():
    out = []
    for nodes, step, tflops in ((280, 60.1, 126), (350, 50.2, 121), (420, 44.4, 113)):
        n = 8 * nodes
        palm = dict(mfu=0.302, mfu_no_attention=0.297) if nodes == 280 else {}
        out.append(TrainingRun(
            name=f"mt-nlg-530b-{n}", model=_MTNLG, accelerator="a100-80gb", n_devices=n,
            T=2048, global_batch=1920, tp=8, pp=35, dp=n // (8 * 35), step_time=step,
            flops_per_s_per_device=tflops * 1e12, flops_convention="full",
            source="Smith et al. 2022 (MT-NLG), section 2.4"
                   + ("; MFU: Chowdhery et al. 2022 (PaLM) section 4.1, Table 3" if palm else ""),
            **palm))
    return out


# ---- PaLM 540B, Chowdhery et al. 2022, section 4.1, Table 3 and appendix B ----------------------
# 6,144 TPU v4 chips in two pods; in each pod 12-way model parallelism and 256-way fully sharded
# data parallelism, data parallel across the two pods (section 4). 238.3K tokens/s at batch 2,048
# sequences of 2,048 tokens. MFU 46.2% (45.7% without self-attention); HFU 57.8% with PaLM's
# rematerialization, whose exact policy the paper does not give.
# Left out of Table 3's comparison: GPT-3's 21.3% ("24.6 non-attention model TFLOP/s per GPU" on
# V100s); with the 125 TFLOP/s V100 peak we get 19.7%, and we do not know which peak PaLM used.
_PALM = TrainingRun(
    name="palm-540b", model=models.get("palm-540b"), accelerator="tpu-v4", n_devices=6144,
    T=2048, global_batch=2048, tp=12, dp=512, tokens_per_s=238.3e3, mfu=0.462,
    mfu_no_attention=0.457, hfu=0.578,
    source="Chowdhery et al. 2022 (PaLM), section 4.1, Table 3, appendix B",
    notes="dp = 256-way sharded data parallelism in each of 2 pods")


# ---- Llama 3 405B, The Llama 3 Herd of Models (2024), section 3.3.2, Table 4 --------------------
# Columns GPUs, TP, CP, PP, DP, seq. len., batch size/DP, tokens/batch, TFLOPs/GPU, BF16 MFU.
# The third row prints DP = 4 in the arXiv PDF, which contradicts its own GPU count
# (8·16·16·4 = 8,192, not 16,384) and its 16M tokens per batch (16·4·131,072 = 8.4M); both imply
# DP = 8, which we store. The TFLOPs/GPU column is rounded to tens: 400/989.4 is 40.4%, printed 41%.
def _llama3_runs():
    out = []
    for n, tp, cp, pp, dp, T, per_dp, tflops, mfu in (
            (8192, 8, 1, 16, 64, 8192, 32, 430, 0.43),
            (16384, 8, 1, 16, 128, 8192, 16, 400, 0.41),
            (16384, 8, 16, 16, 8, 131072, 16, 380, 0.38)):
        out.append(TrainingRun(
            name=f"llama3-405b-{n // 1024}k-T{T // 1024}k", model=models.get("llama3-405b"),
            accelerator="h100", n_devices=n, T=T, global_batch=per_dp * dp, tp=tp, cp=cp, pp=pp,
            dp=dp, flops_per_s_per_device=tflops * 1e12, mfu=mfu,
            source="The Llama 3 Herd of Models (2024), section 3.3.2, Table 4",
            notes="DP printed as 4 in the PDF; 8 is consistent with the row" if cp > 1 else ""))
    return out


RUNS: dict[str, TrainingRun] = {r.name: r for r in (
    [_PALM] + _mtnlg_runs() + _megatron_runs() + _llama3_runs())}


# ---- whole-run figures --------------------------------------------------------------------------
@dataclass(frozen=True)
class TimeEstimate:
    """A paper's own estimate of end-to-end training time, with its inputs."""

    name: str
    n_params: float
    n_tokens: float
    n_devices: int
    flops_per_s_per_device: float
    days: float
    source: str
    accelerator: str = "a100-80gb"


# Narayanan et al. 2021, section 5.1, eq. 4: time ≈ 8·T·P / (n·X). The text says "1 trillion"
# parameters for the second estimate; its 84 days follow from the model's 1,008B (1T gives 83.2).
TIME_ESTIMATES = (
    TimeEstimate("gpt3-175b on 1024 A100", 175e9, 300e9, 1024, 140e12, 34,
                 "Narayanan et al. 2021, section 5.1"),
    TimeEstimate("1T GPT on 3072 A100", 1008e9, 450e9, 3072, 163e12, 84,
                 "Narayanan et al. 2021, section 5.1"),
)

# Llama 3.1 405B: 30.84M H100 GPU-hours of pre-training (Llama 3.1 model card, meta-llama/
# llama-models MODEL_CARD.md, "Training Energy Use"), 3.8e25 FLOPs on 15.6T tokens (The Llama 3
# Herd of Models, sections 1 and 3.2).
LLAMA3_405B_GPU_HOURS = 30.84e6
LLAMA3_405B_TRAIN_FLOPS = 3.8e25
LLAMA3_405B_TOKENS = 15.6e12

# DeepSeek-V3 (DeepSeek-AI 2024, arXiv 2412.19437): 14.8T pre-training tokens of 4K sequences
# (section 4.2), "180K H800 GPU hours" per trillion tokens, "3.7 days on our cluster with 2048
# H800 GPUs", 2,664K GPU hours for pre-training (section 1, Table 1). FP8 GEMMs for the layers'
# matmuls; embedding, output head, MoE gating, norms and attention operators in BF16/FP32
# (section 3.3). The report prints no MFU. The H800 is the export version of the H100 SXM with
# the same tensor cores (its NVLink is cut to 400 GB/s), so the "h100" preset's peaks apply.
DEEPSEEK_V3_TOKENS = 14.8e12
DEEPSEEK_V3_T = 4096
DEEPSEEK_V3_GPU_HOURS_PER_TRILLION = 180e3
DEEPSEEK_V3_PRETRAIN_GPU_HOURS = 2664e3
DEEPSEEK_V3_N_GPUS = 2048
DEEPSEEK_V3_ACCELERATOR = "h100"  # H800: the H100's compute


# ---- lookups ------------------------------------------------------------------------------------
def names() -> tuple[str, ...]:
    """Names of every published run."""
    return tuple(RUNS)


def get(name) -> TrainingRun:
    """Look up a published run by name (a TrainingRun passes through).

    >>> get("palm-540b").n_devices
    6144
    """
    if isinstance(name, TrainingRun):
        return name
    if not isinstance(name, str) or name not in RUNS:
        raise ValueError(f"unknown run {_brief(name)}; known: {', '.join(RUNS)}")
    return RUNS[name]


# ---- recomputing the reported figures -----------------------------------------------------------
def tokens_per_s(run) -> float:
    """Training throughput of the whole job: as reported, or global_batch · T / step_time.

    >>> round(tokens_per_s("mt-nlg-530b-2240"))  # PaLM Table 3 quotes 65.43K tokens/s
    65427
    """
    r = get(run)
    if r.tokens_per_s is not None:
        return r.tokens_per_s
    if r.step_time is None:
        raise ValueError(f"{r.name}: the paper gives neither tokens/s nor a step time; "
                         "use implied_tokens_per_s() to derive one from its FLOP/s")
    return r.tokens_per_step / r.step_time


def flops_per_s_per_device(run, recompute: str = "none", *, include_attention: bool = True):
    """FLOP/s per device from the measured throughput: flops_per_token · tokens/s / n.

    ``recompute="full"`` counts what Megatron-LM counts (hardware FLOPs with every layer's
    forward run twice); "none" counts model FLOPs.

    >>> round(flops_per_s_per_device("mt-nlg-530b-2240", "full") / 1e12, 1)  # reported: 126
    125.7
    """
    r = get(run)
    f = transformer.flops_per_token(r.model, r.T, include_attention=include_attention,
                                    recompute=recompute)
    return f * tokens_per_s(r) / r.n_devices


def mfu(run, *, include_attention: bool = True) -> float:
    """MFU recomputed from the run's throughput (PaLM's definition), via :func:`transformer.mfu`.

    With ``include_attention=False`` the 12·L·T·N·H attention term is left out of the model
    FLOPs, as in PaLM's "without self-attention" figures.

    >>> round(mfu("palm-540b"), 3), round(mfu("palm-540b", include_attention=False), 3)
    (0.462, 0.457)
    """
    r = get(run)
    if include_attention:
        return transformer.mfu(r.model, tokens_per_s(r), r.n_devices, r.accelerator, r.T)
    peak = hardware.get(r.accelerator).peak_flops_per_s("bf16")
    return flops_per_s_per_device(r, include_attention=False) / peak


def model_flops_fraction(cfg, T, recompute: str = "full") -> float:
    """Model FLOPs over hardware FLOPs when training with ``recompute``: MFU / HFU.

    About 3/4 for full recomputation (the forward pass runs twice: 3 + 1 passes for 3 needed).

    >>> round(model_flops_fraction("llama3-405b", 8192), 3)
    0.751
    """
    return (transformer.flops_per_token(cfg, T)
            / transformer.flops_per_token(cfg, T, recompute=recompute))


def mfu_from_reported_flops(run) -> float:
    """MFU implied by the FLOP/s per device a paper reports, converting its counting convention.

    MFU = X · (model FLOPs / counted FLOPs) / C: Megatron-style figures (which count full
    recomputation) shrink by about 3/4.

    >>> round(mfu_from_reported_flops("megatron-1t"), 3)  # reported "52% of peak" is an HFU
    0.392
    """
    r = get(run)
    if r.flops_per_s_per_device is None:
        raise ValueError(f"{r.name}: no FLOP/s per device reported")
    peak = hardware.get(r.accelerator).peak_flops_per_s("bf16")
    return r.flops_per_s_per_device * model_flops_fraction(r.model, r.T, r.flops_convention) / peak


def implied_tokens_per_s(run, *, causal: bool = False) -> float:
    """Throughput implied by the reported FLOP/s per device: n · X / flops_per_token.

    ``causal`` halves attention's FLOPs (for papers that may count only the unmasked half).

    >>> round(implied_tokens_per_s("llama3-405b-8k-T8k") / 1e6, 2)  # million tokens/s
    1.34
    """
    r = get(run)
    if r.flops_per_s_per_device is None:
        raise ValueError(f"{r.name}: no FLOP/s per device reported")
    f = transformer.flops_per_token(r.model, r.T, causal=causal, recompute=r.flops_convention)
    return r.n_devices * r.flops_per_s_per_device / f


def implied_step_time(run, *, causal: bool = False) -> float:
    """Seconds per optimizer step implied by the reported FLOP/s: tokens_per_step / tokens/s.

    >>> round(implied_step_time("llama3-405b-8k-T8k"), 1)
    12.5
    """
    r = get(run)
    return r.tokens_per_step / implied_tokens_per_s(r, causal=causal)


def whole_run_mfu(cfg, T, n_tokens, gpu_hours, accelerator, *, dtype="bf16",
                  causal: bool = False) -> float:
    """Model FLOPs of ``n_tokens`` tokens at sequence length T over what ``gpu_hours`` of
    ``accelerator`` could do at its dense ``dtype`` peak: flops_per_token · n_tokens /
    (gpu_hours · 3600 · C).

    The denominator is a choice: pass ``dtype="fp8"`` for the fp8 peak of a run whose matmuls
    ran in fp8 (half the figure on an H100), or compare with
    :func:`transformer.mixed_precision_peak`.

    >>> round(whole_run_mfu("deepseek-v3", DEEPSEEK_V3_T, 1e12,
    ...                     DEEPSEEK_V3_GPU_HOURS_PER_TRILLION, "h100"), 3)
    0.439
    """
    f = transformer.flops_per_token(cfg, T, causal=causal) * check_positive("n_tokens", n_tokens)
    seconds = check_positive("gpu_hours", gpu_hours) * HOUR
    return f / (seconds * hardware.get(accelerator).peak_flops_per_s(dtype))


def estimated_days(estimate: TimeEstimate) -> float:
    """Narayanan et al.'s end-to-end time, in days: 8·T·P / (n·X).

    8 FLOPs per parameter and token: 6 for forward and backward plus 2 for recomputing the
    forward. Attention and the logit layer are left out.

    >>> [round(estimated_days(e)) for e in TIME_ESTIMATES]
    [34, 84]
    """
    if not isinstance(estimate, TimeEstimate):
        raise ValueError(f"estimate={_brief(estimate)} must be a TimeEstimate (see "
                         "TIME_ESTIMATES)")
    e = estimate
    flops = 8.0 * check_positive("n_params", e.n_params) * check_positive("n_tokens", e.n_tokens)
    peak = hardware.get(e.accelerator).peak_flops_per_s("bf16")
    return transformer.train_time(flops, e.n_devices, e.accelerator,
                                  e.flops_per_s_per_device / peak) / DAY
