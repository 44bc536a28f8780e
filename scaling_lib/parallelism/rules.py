"""The one table of rules a parallel plan must obey, vectorised over arrays of plans.

Every check of "can this plan run" in the library reads this table: the planner (a bit mask per
plan), ``estimate`` and the scalar models (a ValueError naming the first broken rule), the
strategies' ``constraints`` and ``explain``. Each rule has a name, a one-line teaching message
and a test over plan arrays (``dp tp pp cp ep zero micro_batch virtual_stages schedule
sequence_parallel`` and, optionally, ``pp_layout cp_variant``).

What frameworks refuse, and why:

- tp splits attention by heads and the MLP by columns: it divides the N query heads and F (and
  each expert's F_e); it divides the K kv heads, or is a multiple of K (each kv head is then
  replicated on tp/K ranks, as Megatron-LM does). The vocabulary never refuses a tp:
  Megatron-LM pads V to a multiple of 128·tp (``--make-vocab-size-divisible-by``).
- Pipeline stages split the layers evenly (Megatron-LM: L divisible by pp), or, with
  ``pp_layout="light_ends"``, L + 2 of them (the embedding and the loss counted as a layer each);
  every chunk holds at least one layer.
- The interleaved schedule cuts each stage's layers into v equal model chunks: the layers per
  stage must be divisible by v (rule pp_virtual). Megatron-LM refuses anything else: its
  ``validate_args`` (megatron/training/arguments.py) asserts "number of layers per pipeline stage
  must be divisible number of layers per virtual pipeline stage" and derives v from
  ``--num-layers-per-virtual-pipeline-stage``; so GPT-3's 96 layers on 8 stages (12 per stage)
  take v in {1, 2, 3, 4, 6, 12}, never 8.
- The interleaved schedule takes micro-batches in groups of pp (Megatron-LM's
  ``microbatch_group_size_per_vp_stage``, default pp): m is a multiple of pp. 1F1B and GPipe
  run any m >= 1 (with m < p the bubble is large, but the schedule runs).
- cp cuts each sequence into 2·cp load-balanced chunks (T divisible by 2·cp); Ulysses splits
  the query heads of a tensor rank over cp; sequence parallelism splits T/cp over tp.
- ep divides the E experts (dense models: ep = 1) and the dp·cp replicas it is carved from.
- The global batch is a multiple of dp · micro_batch.
- ZeRO-2 with pipeline stages: DeepSpeed refuses it (ZeRO-2 reduce-scatters gradients as each
  micro-batch's backward produces them, which pipeline accumulation defeats). ZeRO-1 and ZeRO-3
  (FSDP) run with stages: Megatron-LM's distributed optimizer, torchtitan's FSDP + PP, and
  Llama 3 405B (Dubey et al. 2024, section 3.3.2).

See: the chapters "Pipeline parallelism" and "Planning a training run".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import models
from ..units import _brief, check_count, divisors
from .plan import ParallelPlan, check_plan


@dataclass(frozen=True)
class Rule:
    """A rule: its name, the sentence a reader learns from, and its bit in a plan's mask."""

    name: str
    message: str
    bit: int
    kind: str  # "shape": the step is not defined (estimate raises); "framework": frameworks
    # refuse it (estimate still times it and lists it in ``StepEstimate.rules_broken``)


_TABLE = (
    ("tp_heads", "tp must divide the N query heads (attention splits by heads)"),
    ("tp_kv_heads", "tp must divide the K kv heads or be a multiple of K (each kv head then "
                    "replicated on tp/K ranks, as Megatron-LM does)"),
    ("tp_ffn", "tp must divide the MLP width F and each expert's width F_e (column splits)"),
    ("pp_layers", "pp · virtual_stages must not exceed the L layers (each chunk needs a layer)"),
    ("pp_split", "the layers must split evenly over the pp stages (Megatron-LM), "
                 "or L + 2 of them with pp_layout='light_ends'"),
    ("pp_virtual", "the layers of a stage must split evenly into its virtual_stages chunks "
                   "(Megatron-LM asserts layers per stage divisible by layers per virtual stage)"),
    ("interleaved_m", "the interleaved schedule needs the micro-batches per step to be a "
                      "multiple of pp (Megatron-LM takes them in groups of pp)"),
    ("cp_seq", "context parallelism needs T divisible by 2·cp (load-balanced causal chunks)"),
    ("cp_heads", "Ulysses context parallelism needs cp to divide the query heads of a tensor "
                 "rank (N / tp)"),
    ("sp_seq", "sequence parallelism needs T / cp divisible by tp"),
    ("ep_experts", "ep must divide the E experts (dense models use ep = 1)"),
    ("ep_replicas", "ep must divide dp · cp (experts are spread over the data-parallel ranks)"),
    ("batch", "the global batch must be a multiple of dp · micro_batch"),
    ("zero2_pp", "ZeRO-2 with pp > 1 does not run (DeepSpeed refuses it: pipeline accumulation "
                 "defeats its per-micro-batch gradient sharding); use ZeRO-1, or ZeRO-3 (FSDP, "
                 "as torchtitan and Llama 3 run it with stages)"),
)
FRAMEWORK_RULES = ("pp_layers", "pp_split", "pp_virtual", "interleaved_m", "zero2_pp")
RULES = tuple(Rule(name, msg, 1 << i, "framework" if name in FRAMEWORK_RULES else "shape")
              for i, (name, msg) in enumerate(_TABLE))
BY_NAME = {r.name: r for r in RULES}
FIELDS = ("dp", "tp", "pp", "cp", "ep", "zero", "micro_batch", "virtual_stages", "schedule",
          "sequence_parallel")
OPTIONAL = {"pp_layout": "even", "cp_variant": "allgather"}


def tp_choices(cfg) -> list[int]:
    """Tensor-parallel degrees ``cfg`` can be split over: the rules tp_heads, tp_kv_heads and
    tp_ffn (not the vocabulary, which frameworks pad).

    >>> tp_choices("llama3-8b")
    [1, 2, 4, 8, 16, 32]
    >>> tp_choices(models.TransformerConfig(L=1, D=64, F=96, N=12, K=4, H=16, V=100))
    [1, 2, 4, 12]
    """
    c = models.get(cfg)
    return [t for t in divisors(c.N) if (c.K % t == 0 or t % c.K == 0)
            and c.F % t == 0 and c.F_e % t == 0]


def chunk_layers(L, pp, v, layout):
    """Layers of one model chunk (the middle ones with "light_ends"), per plan: L / (pp·v)
    even, (L + 2) / (pp·v) with the ends one layer lighter. Broadcasts; a fraction where the
    split is uneven (rule pp_split)."""
    n = np.asarray(pp) * np.asarray(v)
    return np.where(np.asarray(layout) == "light_ends", (L + 2) / n, L / n)


def stage_layers(L, pp, v=1, layout="even"):
    """(first, middle, last) stage's layers per plan: each stage holds v chunks; with
    "light_ends" the first chunk of the first stage and the last chunk of the last stage hold
    one layer fewer. With pp = 1 the one stage holds all L. Broadcasts.

    >>> [int(x) for x in stage_layers(126, 16, 1, "light_ends")]  # Llama 3 405B
    [7, 8, 7]
    >>> [int(x) for x in stage_layers(96, 8, 2)]
    [12, 12, 12]
    """
    pp = np.asarray(pp)
    v = np.asarray(v)
    mid = chunk_layers(L, pp, v, layout) * v
    light = np.asarray(layout) == "light_ends"
    end = np.where(light, mid - 1, mid)
    one = pp == 1
    return (np.where(one, L, end), np.where(one, L, mid), np.where(one, L, end))


def _col(plans, k, n):
    if k in plans:
        return np.asarray(plans[k])
    return np.full(n, OPTIONAL[k])


def check_arrays(cfg, plans: dict, global_batch, T) -> np.ndarray:
    """Bit mask of the rules each plan breaks (``Rule.bit``), one int64 per plan; 0 = runs.

    >>> p = {k: np.array([v]) for k, v in dict(dp=8, tp=3, pp=1, cp=1, ep=1, zero=0,
    ...      micro_batch=1, virtual_stages=1, schedule="1f1b", sequence_parallel=False).items()}
    >>> names(int(check_arrays("llama3-8b", p, 64, 4096)[0]))
    ['tp_heads', 'tp_kv_heads', 'tp_ffn']
    """
    c = models.get(cfg)
    B, T = int(global_batch), int(T)
    dp, tp, pp, cp, ep, zero, mb, v = (np.asarray(plans[k]).astype(np.int64) for k in (
        "dp", "tp", "pp", "cp", "ep", "zero", "micro_batch", "virtual_stages"))
    sched = np.asarray(plans["schedule"])
    sp = np.asarray(plans["sequence_parallel"]).astype(bool)
    n = len(dp)
    layout, variant = _col(plans, "pp_layout", n), _col(plans, "cp_variant", n)
    light = layout == "light_ends"
    chunks = pp * v
    per_step = dp * mb
    m = B // np.maximum(per_step, 1)
    tests = {
        "tp_heads": c.N % tp != 0,
        "tp_kv_heads": (c.K % tp != 0) & (tp % c.K != 0),
        "tp_ffn": (c.F % tp != 0) | (c.F_e % tp != 0),
        "pp_layers": chunks > c.L,
        "pp_split": (pp > 1) & np.where(light, ((c.L + 2) % pp != 0) | (pp < 3)
                                        | ((c.L + 2) // np.maximum(pp, 1) < 2),
                                        c.L % pp != 0),
        "pp_virtual": (pp > 1) & (v > 1) & np.where(
            light, ((c.L + 2) % chunks != 0) | ((c.L + 2) // np.maximum(chunks, 1) < 2),
            c.L % chunks != 0),
        "interleaved_m": (sched == "interleaved") & (pp > 1) & (m % pp != 0),
        "cp_seq": (cp > 1) & (T % (2 * cp) != 0),
        "cp_heads": (variant == "ulysses") & (cp > 1)
        & ((c.N % tp != 0) | ((c.N // np.maximum(tp, 1)) % cp != 0)),
        "sp_seq": sp & ((T // cp) % tp != 0),
        "ep_experts": (c.E % ep != 0) | ((ep > 1) & (not c.is_moe)),
        "ep_replicas": (dp * cp) % ep != 0,
        "batch": (B % per_step != 0) | (per_step > B),
        "zero2_pp": (pp > 1) & (zero == 2),
    }
    mask = np.zeros(n, dtype=np.int64)
    for r in RULES:
        mask |= np.where(tests[r.name], r.bit, 0)
    return mask


def names(mask: int) -> list[str]:
    """Names of the rules set in a mask.

    >>> names(BY_NAME["batch"].bit)
    ['batch']
    """
    return [r.name for r in RULES if int(mask) & r.bit]


def messages(mask: int) -> list[str]:
    """The teaching sentences of the rules set in a mask."""
    return [r.message for r in RULES if int(mask) & r.bit]


def plan_columns(plans) -> dict:
    """Plan arrays (``FIELDS`` and the optional ones) of a list of ParallelPlans."""
    plans = [check_plan(p) for p in plans]
    return {k: np.array([getattr(p, k) for p in plans]) for k in FIELDS + tuple(OPTIONAL)}


def _one_count(name, value) -> int:
    if np.ndim(value):
        raise ValueError(f"{name}={_brief(value)} must be one whole number, not an array")
    return int(check_count(name, value))


def broken(cfg, plan: ParallelPlan, global_batch, T) -> list[str]:
    """Names of the rules ``plan`` breaks (empty when it runs).

    >>> broken("gpt3-175b", ParallelPlan(pp=8, virtual_stages=8, schedule="interleaved",
    ...                                  dp=8), 64, 2048)  # 12 layers per stage, 8 chunks
    ['pp_virtual']
    """
    B, T = _one_count("global_batch", global_batch), _one_count("T", T)
    return names(int(check_arrays(cfg, plan_columns([plan]), B, T)[0]))


def _detail(c, plan, B, T, name) -> str:
    """The numbers behind a broken rule and the valid choices."""
    p = plan
    if name.startswith("tp_"):
        return f"tp={p.tp}, N={c.N}, K={c.K}, F={c.F}; choose tp in {tp_choices(c)}"
    if name in ("pp_layers", "pp_split"):
        ok = [q for q in range(1, c.L + 1) if c.L % (q * p.virtual_stages) == 0]
        return (f"pp={p.pp}, virtual_stages={p.virtual_stages}, L={c.L}, "
                f"pp_layout={p.pp_layout!r}; even splits: pp in {ok}")
    if name == "pp_virtual":
        per = (c.L + 2 if p.pp_layout == "light_ends" else c.L) / p.pp
        ok = [q for q in range(1, int(per) + 1) if per == int(per) and int(per) % q == 0]
        return (f"pp={p.pp}, L={c.L}, pp_layout={p.pp_layout!r}: {per:g} layers per stage; "
                f"choose virtual_stages in {ok}")
    if name == "interleaved_m":
        return f"m = {B} / (dp·micro_batch) = {B // (p.dp * p.micro_batch)}, pp={p.pp}"
    if name in ("cp_seq", "cp_heads", "sp_seq"):
        return f"T={T}, cp={p.cp}, tp={p.tp}, N={c.N}"
    if name.startswith("ep_"):
        return f"ep={p.ep}, E={c.E}, dp·cp={p.dp * p.cp}"
    if name == "batch":
        return f"global_batch={B}, dp·micro_batch={p.dp * p.micro_batch}"
    return f"zero={p.zero}, pp={p.pp}"


def check(cfg, plan: ParallelPlan, global_batch, T, *, kinds=("shape", "framework")) -> ParallelPlan:
    """``plan`` if it breaks no rule of ``kinds``, else a ValueError naming the first rule
    broken, its sentence and the numbers involved.

    >>> check("llama3-8b", ParallelPlan(tp=3, dp=2), 8, 4096)
    Traceback (most recent call last):
    ...
    ValueError: tp_heads: tp must divide the N query heads (attention splits by heads) (tp=3, N=32, K=8, F=14336; choose tp in [1, 2, 4, 8, 16, 32])
    """
    c = models.get(cfg)
    bad = [n for n in broken(c, plan, global_batch, T) if BY_NAME[n].kind in kinds]
    if bad:
        r = BY_NAME[bad[0]]
        raise ValueError(f"{r.name}: {r.message} ({_detail(c, plan, int(global_batch), int(T), r.name)})")
    return plan


__all__ = ["BY_NAME", "FRAMEWORK_RULES", "RULES", "Rule", "broken", "check", "check_arrays", "chunk_layers",
           "messages", "names", "plan_columns", "stage_layers", "tp_choices"]
