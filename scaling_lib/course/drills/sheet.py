"""The numbers sheet: tables of chips, precision recipes, models and collectives.

Every cell is computed by the library (formatted with ``scaling_lib.units``), so the sheet
follows a changed constant. :data:`CHIPS` and :data:`MODELS` are the presets the sheet and the
drills draw from.

See: the "Interview preparation" part of the book, "Numbers every LLM engineer should know".
"""

from __future__ import annotations

from ... import collectives, hardware, inference, memory, models, transformer
from ...units import fmt_bytes, fmt_bytes_per_s, fmt_flops, fmt_flops_per_s, fmt_seconds

CHIPS = ("a100-80gb", "h100", "h200", "b200", "tpu-v4", "tpu-v5e", "tpu-v5p", "tpu-v6e")
MODELS = ("llama3-8b", "llama2-13b", "llama3-70b", "llama3-405b", "gpt3-175b")


def chip_rows(names=CHIPS) -> list[dict]:
    """One row per chip: dense bf16 peak, HBM (datasheet, and what the driver reports where
    measured: ``memory_capacity_bytes``), HBM bandwidth, one-way scale-up link, B*."""
    from ... import roofline

    rows = []
    for n in names:
        a = hardware.get(n)
        rows.append({"chip": n, "bf16 dense": fmt_flops_per_s(a.peak_flops_per_s("bf16")),
                     "HBM": fmt_bytes(a.hbm_bytes),
                     "usable (driver)": (fmt_bytes(a.memory_capacity_bytes)
                                         if a.usable_hbm_bytes else "-"),
                     "HBM bandwidth": fmt_bytes_per_s(a.hbm_bytes_per_s),
                     "scale-up link (one-way)": fmt_bytes_per_s(a.link_bytes_per_s),
                     "critical batch B*": round(roofline.critical_batch(n, "bf16"))})
    return rows


def recipe_rows() -> list[dict]:
    """Training bytes per parameter by precision recipe (Adam)."""
    return [{"recipe": r, **{k: v for k, v in memory.bytes_per_param(r).items()},
             "total": memory.bytes_per_param(r).total} for r in memory.RECIPES]


def model_rows(names=MODELS) -> list[dict]:
    """Parameters, bf16 weights (all of them: what must be resident), the bytes a decode step
    reads (every weight but the input embedding), KV cache per token and per 8K context,
    6·N FLOPs per token."""
    from ... import serving

    rows = []
    for n in names:
        cfg = models.get(n)
        n_params = transformer.n_params(cfg)
        rows.append({"model": n, "parameters": f"{n_params / 1e9:.1f}B",
                     "bf16 weights": fmt_bytes(serving.weight_bytes_per_device(cfg, 1, 1, "bf16")),
                     "read per decode step": fmt_bytes(inference.weight_bytes_read(cfg)),
                     "KV per token": fmt_bytes(transformer.kv_cache_bytes(cfg, 1, 1)),
                     "KV per 8K context": fmt_bytes(transformer.kv_cache_bytes(cfg, 1, 8192)),
                     "train FLOPs/token (6N)": fmt_flops(transformer.six_n_flops(n_params, 1))})
    return rows


def collective_rows(nbytes=1e9) -> list[dict]:
    """AllReduce / AllGather of ``nbytes`` on a few systems (one-way link bandwidths)."""
    rows = []
    for label, n, acc in (("8 H100, NVLink", 8, "h100"), ("64 H100, 8 nodes, IB", 64, "h100"),
                          ("1,024 H100, 128 nodes, IB", 1024, "h100")):
        c = hardware.cluster(acc, n)

        def t(kind):
            return fmt_seconds(collectives.hierarchical_time(kind, nbytes, c, n).total)
        rows.append({"system": label, "AllReduce": t("all-reduce"), "AllGather": t("all-gather")})
    return rows
