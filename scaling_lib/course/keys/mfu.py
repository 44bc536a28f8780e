"""Answer key for Chapter 7 (MFU and HFU) exercises."""

from __future__ import annotations

from ... import hardware, published, transformer
from ...units import HOUR
from ...roofline import no_overlap_utilization
from ..grading.tables import with_messages


def _sig3(x):
    return float(f"{x:.3g}")


def measured_step_time(p):
    """Ex 7.2-7.3: the "measured" seconds per step shown to the student (3 significant digits):
    the run's ideal step time divided by a hidden utilisation p.u."""
    return _sig3(step_time_for_mfu(p.model, p.global_batch, p.T, p.n_devices, p.accelerator,
                                   p.u))


def gpu_hours(p):
    """Ex 7.6: device-hours the run is said to have taken (3 significant digits), from p.u."""
    flops = transformer.flops_per_token(p.model, p.T) * p.n_tokens
    peak = hardware.get(p.accelerator).peak_flops_per_s("bf16")
    return _sig3(flops / (peak * p.u) / HOUR)


def _tokens_per_s(p):
    return p.global_batch * p.T / measured_step_time(p)


def model_flops_per_token(p):
    """Ex 7.1: training FLOPs per token of p.model at sequence length p.T (attention included,
    no recomputation): the numerator of MFU."""
    return transformer.flops_per_token(p.model, p.T)


def mfu_from_step(p):
    """Ex 7.2: MFU of p.n_devices p.accelerator training p.model on p.global_batch sequences of
    p.T tokens in measured_step_time(p) seconds per step."""
    return transformer.mfu(p.model, _tokens_per_s(p), p.n_devices, p.accelerator, p.T)


def hfu_full_recompute(p):
    """Ex 7.3: HFU of the same run with full activation recomputation and FlashAttention (the
    library's default: the QKᵀ its backward recomputes counts)."""
    return transformer.hfu(p.model, _tokens_per_s(p), p.n_devices, p.accelerator, p.T,
                           recompute="full")


def megatron_mfu(p):
    """Ex 7.4: MFU behind the per-GPU FLOP/s that Megatron-LM Table 1 reports for run p.run."""
    return published.mfu_from_reported_flops(p.run)


def llama3_step_time(p):
    """Ex 7.5: seconds per step implied by a Llama 3 Table 4 row (full-square attention)."""
    return published.implied_step_time(p.run)


def whole_run_utilization(p):
    """Ex 7.6: model FLOPs of p.n_tokens tokens (at p.T) over gpu_hours(p) at p.accelerator peak."""
    flops = transformer.flops_per_token(p.model, p.T) * p.n_tokens
    peak = hardware.get(p.accelerator).peak_flops_per_s("bf16")
    return flops / (gpu_hours(p) * HOUR * peak)


def no_overlap_fraction(p):
    """Ex 7.7: fraction of peak reached by work of intensity p.intensity on p.accelerator when
    its memory traffic does not overlap its compute."""
    return float(no_overlap_utilization(p.intensity, p.accelerator))


def palm_extra_flops(p=None):
    """Ex 7.8: PaLM 540B's HFU over its MFU (hardware FLOPs per model FLOP)."""
    run = published.get("palm-540b")
    return run.hfu / published.mfu(run)


def recompute_changes_mfu(p=None):
    """Ex 7.9: does turning on recomputation change MFU at an unchanged step time? No."""
    return False


def mfu_from_step_time(cfg, global_batch, T, step_time, n_devices, accelerator):
    """Ex 7.10 reference: MFU from a measured step time."""
    return transformer.mfu(cfg, global_batch * T / step_time, n_devices, accelerator, T)


def step_time_for_mfu(cfg, global_batch, T, n_devices, accelerator, mfu):
    """Ex 7.11 reference: the seconds per step at which the run reaches ``mfu``."""
    return transformer.train_time(transformer.train_flops(cfg, global_batch, T), n_devices,
                                  accelerator, mfu)


def fp8_run_mfu(p):
    """Ex 7.13: MFU of an fp8 run (layer matmuls in fp8, the rest in bf16) against the peak it had:
    each FLOP at its own precision's dense peak (transformer.mixed_precision_peak)."""
    return (transformer.flops_per_token(p.model, p.T) * _tokens_per_s(p)
            / (p.n_devices * transformer.mixed_precision_peak(p.model, p.T, p.accelerator)))


def reported_to_mfu(cfg, T, flops_per_s_per_device, accelerator):
    """Ex 7.12 reference: MFU from a per-device FLOP/s counted with full recomputation."""
    peak = hardware.get(accelerator).peak_flops_per_s("bf16")
    return flops_per_s_per_device * published.model_flops_fraction(cfg, T, "full") / peak


# ---- Methods the checker must reject or accept (see tests/test_wrong_methods.py) ---------------
# Each function takes the same drawn parameters ``p`` as the key of its exercise; for the
# "implement" exercises (7.10-7.12) it takes the reference function's arguments instead. They
# call the library: a wrong method is the right formula with one common slip.

def _peak(accelerator, dtype="bf16"):
    return hardware.get(accelerator).peak_flops_per_s(dtype)


def _six_n(cfg):
    return 6.0 * transformer.n_params(cfg)


def _mfu_with(p, flops_per_tok, peak_factor=1.0):
    """MFU of ex 7.2's run with a given FLOPs-per-token count and peak multiplier."""
    return flops_per_tok * _tokens_per_s(p) / (p.n_devices * peak_factor * _peak(p.accelerator))


def _palm_count(p):
    return float(transformer.palm_flops_per_token(p.model, p.T))


def _causal(p):
    return float(transformer.flops_per_token(p.model, p.T, causal=True))


WRONG_METHODS = {
    "7.1": {
        "6N, attention left out": lambda p: _six_n(p.model),
        "6N + 12LTNH: the input embedding counted as a matmul (untied models)": _palm_count,
        "attention term left out": lambda p: float(
            transformer.flops_per_token(p.model, p.T, include_attention=False)),
        "attention over the causal half only": _causal,
        "forward pass only": lambda p: float(transformer.flops_per_token(p.model, p.T,
                                                                         training=False)),
    },
    "7.2": {
        "6N per token (no attention)": lambda p: _mfu_with(p, _six_n(p.model)),
        "hardware FLOPs with full recomputation (HFU)": lambda p: _mfu_with(
            p, transformer.flops_per_token(p.model, p.T, recompute="full")),
        "the sparsity peak (2x dense)": lambda p: _mfu_with(
            p, transformer.flops_per_token(p.model, p.T), 2.0),
        "the device count divided twice": lambda p: mfu_from_step(p) / p.n_devices,
    },
    "7.3": {
        "MFU: recomputation not counted": mfu_from_step,
        "selective recomputation instead of full": lambda p: transformer.hfu(
            p.model, _tokens_per_s(p), p.n_devices, p.accelerator, p.T, recompute="selective"),
    },
    "7.4": {
        "the paper's % of peak taken as MFU": lambda p: (
            published.get(p.run).flops_per_s_per_device / _peak(published.get(p.run).accelerator)),
        "multiplied by 4/3 instead of 3/4": lambda p: megatron_mfu(p) * (4 / 3) ** 2,
    },
    "7.5": {
        "attention over the causal half only": lambda p: published.implied_step_time(
            p.run, causal=True),
        "6N per token (no attention)": lambda p: (
            published.get(p.run).tokens_per_step * _six_n(published.get(p.run).model)
            / (published.get(p.run).n_devices * published.get(p.run).flops_per_s_per_device)),
        "one GPU's FLOP/s for the whole step": lambda p: (
            llama3_step_time(p) * published.get(p.run).n_devices),
    },
    "7.6": {
        "6N per token (no attention)": lambda p: (
            _six_n(p.model) * p.n_tokens / (gpu_hours(p) * HOUR * _peak(p.accelerator))),
        "the sparsity peak (2x dense)": lambda p: whole_run_utilization(p) / 2,
        "GPU-hours not converted to seconds": lambda p: whole_run_utilization(p) * HOUR,
    },
    "7.7": {
        "memory traffic overlapped (max, not sum)": lambda p: min(
            1.0, p.intensity / hardware.get(p.accelerator).critical_intensity()),
    },
    "7.13": {
        "the bf16 peak": mfu_from_step,
        "the fp8 peak for every FLOP": lambda p: mfu_from_step(p) * _peak(p.accelerator) / _peak(
            p.accelerator, "fp8"),
    },
    "7.10": {
        "6N per token (no attention)": lambda cfg, global_batch, T, step_time, n_devices, acc: (
            _six_n(cfg) * global_batch * T / step_time / (n_devices * _peak(acc))),
        "the sparsity peak (2x dense)": lambda cfg, global_batch, T, step_time, n_devices, acc: (
            mfu_from_step_time(cfg, global_batch, T, step_time, n_devices, acc) / 2),
    },
    "7.11": {
        "the sparsity peak (2x dense)": lambda cfg, global_batch, T, n_devices, acc, mfu: (
            step_time_for_mfu(cfg, global_batch, T, n_devices, acc, mfu) / 2),
        "forward FLOPs only": lambda cfg, global_batch, T, n_devices, acc, mfu: (
            transformer.forward_flops(cfg, global_batch, T) / (n_devices * _peak(acc) * mfu)),
    },
    "7.12": {
        "no conversion: the reported FLOP/s over the peak": lambda cfg, T, x, acc: x / _peak(acc),
        "multiplied by 4/3 instead of 3/4": lambda cfg, T, x, acc: x * (4 / 3) / _peak(acc),
    },
}

ACCEPTED_METHODS = {
    "7.3": {
        "the chapter's 4/3 rule: HFU = 4/3 x MFU": lambda p: 4 / 3 * mfu_from_step(p),
        "full recomputation, attention scores stored (no FlashAttention)": lambda p: (
            transformer.hfu(p.model, _tokens_per_s(p), p.n_devices, p.accelerator, p.T,
                            recompute="full", flash_attention=False)),
    },
    "7.4": {
        "the chapter's 3/4 rule": lambda p: (
            0.75 * published.get(p.run).flops_per_s_per_device
            / _peak(published.get(p.run).accelerator)),
    },
    "7.12": {
        "the chapter's 4/3 rule": lambda cfg, T, x, acc: 0.75 * x / _peak(acc),
    },
}

# ---- Hints, shown after a FAIL (never before a try): the first FAIL shows the nudge, a later
# one the method; neither gives the answer (scaling_lib.course.grading.tables).
HINTS = {
    '7.1': ("Model FLOPs count the weights' matmuls and attention, forward and backward.",
            "6 FLOPs per matmul weight (the output layer included) plus attention's einsums for "
            'training at this T'),
    '7.2': ('MFU compares the model FLOPs done per second with the peak.',
            'tokens per second from the batch and the step time, times model FLOPs per token, '
            "over the devices' peak"),
    '7.3': ('HFU counts every FLOP the hardware ran, recomputation included.',
            "add a second forward of each layer and FlashAttention's recomputed QKᵀ to the "
            'model FLOPs'),
    '7.4': ('The reported FLOP/s include recomputed work; MFU does not.',
            'scale the reported rate by model FLOPs over hardware FLOPs per token, then divide '
            'by the peak'),
    '7.5': ("A step's work over the rate all the GPUs deliver.",
            "the step's training FLOPs over (GPUs × peak × the stated utilisation)"),
    '7.6': ('Over a whole run, count all the work and all the device time.',
            'model FLOPs of all tokens over device-seconds times the peak'),
    '7.7': ('On a faster chip the math shrinks but the memory traffic does not.',
            "write the share of time doing math from the two times; express it with the chip's "
            "critical intensity and the op's intensity"),
    '7.8': ('HFU and MFU share tokens/s and the peak: what differs?',
            'take the ratio of hardware FLOPs to model FLOPs per token'),
    '7.9': ("What does MFU's numerator count?",
            'MFU depends on tokens/s, the model and the peak: does recomputation change the '
            'model FLOPs?'),
    '7.10': ('MFU needs tokens per second first.',
             'tokens per step over the step time, times model FLOPs per token, over the '
             "devices' peak"),
    '7.11': ('Invert the MFU formula: what step time gives the target?',
             "the step's training FLOPs over what the devices deliver at that MFU"),
    '7.12': ('A "% of peak" that counts recomputation is HFU.',
             'convert from hardware FLOPs to model FLOPs per token, then divide by the peak'),
    '7.13': ('fp8 and bf16 FLOPs have different peaks: weigh each by its own.',
             "the time each token's FLOPs would take at their own peaks, times tokens/s, over "
             'the devices'),
}


# ---- More listed mistakes, each with what the student reads (issue 21).

WRONG_METHODS["7.7"]["the overlapped bound (the max)"] = (
    lambda p: min(1.0, p.intensity / hardware.get(p.accelerator).critical_intensity("bf16")),
    "that assumes memory traffic and compute overlap perfectly: here they do not, so the times "
    "add")
WRONG_METHODS["7.8"] = {
    "MFU over HFU (inverted)": (
        lambda: 1 / palm_extra_flops(),
        "that is MFU over HFU: hardware FLOPs include the recomputed ones, so the ratio is at "
        "least 1"),
    "HFU minus MFU": (
        lambda: 1 + (palm_extra_flops() - 1) * published.mfu(published.get("palm-540b")),
        "the question asks for a ratio of the two utilisations, not their difference"),
}
WRONG_METHODS["7.9"] = {
    "recomputation counted in MFU": (
        lambda: True,
        "MFU counts the model's FLOPs, which recomputation does not change: at the same step "
        "time MFU stays the same (HFU rises)"),
}

_SPARSE = ("the datasheet's \"with sparsity\" peak is twice the dense one: MFU is over the dense "
           "peak")
_NO_ATTN = "model FLOPs include attention's QKᵀ and AV: 6N per token leaves them out"
with_messages(WRONG_METHODS, {
    "7.1": {"6N, attention left out": _NO_ATTN,
            "6N + 12LTNH: the input embedding counted as a matmul (untied models)":
            "the input embedding is a lookup: only the output layer's V·D is a matmul",
            "attention term left out": _NO_ATTN,
            "attention over the causal half only":
            "model FLOPs count attention over all T keys, without the causal discount",
            "forward pass only": "training runs the backward too: 3 times the forward FLOPs"},
    "7.2": {"6N per token (no attention)": _NO_ATTN,
            "hardware FLOPs with full recomputation (HFU)":
            "MFU counts the model's FLOPs, not the recomputed ones",
            "the sparsity peak (2x dense)": _SPARSE,
            "the device count divided twice": "divide by the devices once: the cluster's peak"},
    "7.3": {"MFU: recomputation not counted":
            "HFU counts every FLOP the hardware ran: add the recomputed forward",
            "selective recomputation instead of full":
            "full recomputation runs each layer's whole forward again"},
    "7.4": {"the paper's % of peak taken as MFU":
            "the paper's figure counts recomputed FLOPs: convert it to model FLOPs",
            "multiplied by 4/3 instead of 3/4":
            "model FLOPs are fewer than hardware FLOPs: the conversion lowers the figure"},
    "7.5": {"attention over the causal half only":
            "count attention over all T keys, as the paper's model FLOPs do",
            "6N per token (no attention)": _NO_ATTN,
            "one GPU's FLOP/s for the whole step": "all the GPUs work on the step together"},
    "7.6": {"6N per token (no attention)": _NO_ATTN,
            "the sparsity peak (2x dense)": _SPARSE,
            "GPU-hours not converted to seconds": "a GPU-hour is 3,600 GPU-seconds"},
    "7.7": {"memory traffic overlapped (max, not sum)":
            "without overlap the memory time adds to the compute time"},
    "7.13": {"the bf16 peak": "the fp8 matmuls run at the fp8 peak: weigh each FLOP by its own",
             "the fp8 peak for every FLOP":
             "only the fp8 matmuls run at the fp8 peak: the rest at the bf16 peak"},
    "7.10": {"6N per token (no attention)": _NO_ATTN,
             "the sparsity peak (2x dense)": _SPARSE},
    "7.11": {"the sparsity peak (2x dense)": _SPARSE,
             "forward FLOPs only": "a training step runs forward and backward"},
    "7.12": {"no conversion: the reported FLOP/s over the peak":
             "the reported rate counts recomputed FLOPs: convert to model FLOPs first",
             "multiplied by 4/3 instead of 3/4":
             "model FLOPs are fewer than hardware FLOPs: the conversion lowers the figure"},
})
