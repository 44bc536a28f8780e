"""The communication of one training step, strategy by strategy: ``Comm`` and ``collectives``.

Each strategy module (``data``, ``fsdp``, ``tensor``, ``context``) lists the collectives one
device takes part in during one step as :class:`Comm` records; :func:`collectives` puts a plan's
together.
``nbytes`` is V, the full array of the collective (as in :func:`scaling_lib.collectives.
collective_bytes`): the whole gradient for an all-reduce or a reduce-scatter, the whole gathered
array for an all-gather; for a collective-permute, the bytes each device sends. The time of each
is :func:`scaling_lib.collectives.group_time` of (kind, nbytes, group_size, the group's stride
on the device order) on a cluster.

See: the parallelism chapters.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import models
from ..collectives import KINDS
from ..units import _brief, check_count, check_positive, dtype_bytes
from .plan import ParallelPlan, check_step_args

AXES = ("dp", "tp", "pp", "cp", "ep")
PHASES = ("forward", "backward", "optimizer")
_HLO_NAMES = {"f32": "fp32", "f16": "fp16", "f64": "fp64", "s8": "int8"}


@dataclass(frozen=True)
class Comm:
    """One collective of a training step, as one device takes part in it.

    ``kind`` (HLO spelling), ``axis`` (the plan's degree it runs over), ``group_size``,
    ``nbytes`` (V, the full array), ``count`` (times per step), ``phase`` ("forward",
    "backward" or "optimizer") and ``overlappable`` (whether compute can hide it).
    """

    kind: str
    axis: str
    group_size: int
    nbytes: float
    count: int = 1
    phase: str = "backward"
    overlappable: bool = True

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r}; valid choices: {', '.join(KINDS)}")
        if self.axis not in AXES:
            raise ValueError(f"axis={self.axis!r}; valid choices: {', '.join(AXES)}")
        if self.phase not in PHASES:
            raise ValueError(f"phase={self.phase!r}; valid choices: {', '.join(PHASES)}")
        check_count("group_size", self.group_size)
        check_positive("nbytes", self.nbytes, allow_zero=True)
        check_count("count", self.count, minimum=0)


def element_bytes(dtype) -> float:
    """Bytes per element, in the units module's names or HLO's ("f32", "bf16").

    >>> element_bytes("bf16"), element_bytes("f32"), element_bytes("fp32")
    (2.0, 4.0, 4.0)
    """
    return dtype_bytes(_HLO_NAMES.get(dtype, dtype) if isinstance(dtype, str) else dtype)


def params_per_device(cfg, plan: ParallelPlan) -> tuple[float, float, float]:
    """(embedding, other dense, expert) parameters one tensor-parallel rank holds, before ZeRO.

    The memory module's split (attention, MLPs and the vocabulary-parallel embedding and output
    layer / tp; norms replicated; experts / (ep · tp)); with pp > 1, of the first pipeline
    stage (its ⌈L/pp⌉ layers and the embedding), as the memory module reports.

    >>> c = models.TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64)
    >>> # V·D/2, then (2·(2·32·48 + 3·32·64) + 64·32)/2 + 5·32
    >>> params_per_device(c, ParallelPlan(tp=2))
    (1024.0, 10400.0, 0.0)
    """
    from ..memory import _first_stage_params  # the one home of the per-rank split

    if not isinstance(plan, ParallelPlan):
        raise ValueError(f"plan={_brief(plan)} must be a ParallelPlan")
    c = models.get(cfg)
    dense, experts, _, _ = _first_stage_params(c, plan)
    embedding = (c.V + c.learned_positions) * c.D / plan.tp
    return embedding, dense - embedding, experts


def collectives(cfg, plan: ParallelPlan, B, T, *, dtype="bf16", grad_dtype=None,
                sp_regather=True, ring_keeps_kv=False, dispatch="ragged") -> list[Comm]:
    """Every collective one device takes part in during one training step of ``plan``.

    B is the global batch in sequences of T tokens; ``dtype`` the format of the weights,
    gradients and activations that are communicated; ``grad_dtype`` that of the data-parallel
    gradient reduction (all-reduce or reduce-scatter over dp), default ``dtype`` (Llama 3
    reduce-scatters its gradients in fp32: Grattafiori et al. 2024, section 3.3.2, "Numerical
    stability"). How the frameworks run each strategy, as options: ``sp_regather`` (sequence parallelism gathers a
    column-parallel linear's input again for its weight gradient, Megatron-LM's default:
    :mod:`~scaling_lib.parallelism.tensor`), ``ring_keeps_kv`` (ring attention's backward
    keeps the forward's K/V blocks and sends only dK/dV: :mod:`~scaling_lib.parallelism.
    context`), ``dispatch`` ("ragged" or "padded" dropless expert AllToAlls:
    :mod:`~scaling_lib.parallelism.expert`). Raises ValueError with the plan's constraint
    violations (see :func:`constraints`).

    >>> c = models.TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64)
    >>> collectives(c, ParallelPlan(), 8, 16)  # one device: nothing to communicate
    []
    >>> [x.nbytes for x in collectives(c, ParallelPlan(dp=2), 8, 16, grad_dtype="fp32")]
    [90752.0]
    """
    check_step_args(plan, B, T)
    from . import context, data, expert, fsdp, pipeline, tensor

    reasons = constraints(cfg, plan, B, T)
    if reasons:
        raise ValueError("; ".join(reasons))
    options = {tensor: {"sp_regather": sp_regather}, context: {"ring_keeps_kv": ring_keeps_kv},
               expert: {"dispatch": dispatch}}
    scale = 1.0 if grad_dtype is None else element_bytes(grad_dtype) / element_bytes(dtype)
    out = []
    for mod in (data, fsdp, tensor, context, pipeline, expert):
        for c in mod.comms(cfg, plan, B, T, dtype=dtype, **options.get(mod, {})):
            if scale != 1.0 and c.axis == "dp" and c.kind in ("all-reduce", "reduce-scatter"):
                c = Comm(c.kind, c.axis, c.group_size, c.nbytes * scale, c.count, c.phase,
                         c.overlappable)  # a gradient reduction, in grad_dtype
            out.append(c)
    return out


def constraints(cfg, plan: ParallelPlan, B, T) -> list[str]:
    """Every strategy's reasons why ``plan`` cannot run (cfg, B, T); empty when it can.

    >>> c = models.TransformerConfig(L=2, D=32, F=64, N=4, K=2, H=8, V=64)
    >>> constraints(c, ParallelPlan(dp=3), 8, 16)
    ['B=8 sequences must be a multiple of dp·micro_batch = 3']
    """
    check_step_args(plan, B, T)
    from . import context, data, expert, fsdp, pipeline, tensor

    return [r for mod in (data, fsdp, tensor, context, pipeline, expert)
            for r in mod.constraints(cfg, plan, B, T)]


def totals(comms) -> dict:
    """Bytes per (kind, group_size): the sum of nbytes · count (groups of one move nothing).

    >>> totals([Comm("all-reduce", "dp", 8, 100.0, 2), Comm("all-reduce", "dp", 8, 50.0)])
    {('all-reduce', 8): 250.0}
    """
    if isinstance(comms, (str, bytes)) or not hasattr(comms, "__iter__"):
        raise ValueError(f"comms={_brief(comms)} must be a list of Comm records")
    comms = list(comms)
    if any(not isinstance(c, Comm) for c in comms):
        raise ValueError(f"comms must hold Comm records only, got {_brief(comms)}")
    out: dict = {}
    for c in comms:
        if c.group_size > 1 and c.nbytes * c.count:
            key = (c.kind, c.group_size)
            out[key] = out.get(key, 0.0) + float(c.nbytes) * c.count
    return out
