"""The names of collectives and network topologies, and their spellings.

:data:`KINDS` spells collectives as XLA's HLO does ("all-gather"); :func:`canonical_kind` maps
the library's and JAX's spellings ("all_gather", "psum", "a2a", ...) onto them.
:data:`TOPOLOGIES` are the networks the cost models know.

See: Chapter "Networks and collectives".
"""

from __future__ import annotations

TOPOLOGIES = ("ring", "bidirectional_ring", "torus_2d", "torus_3d", "switch")

# Collective names as XLA's HLO spells them; the library's functions use underscores.
KINDS = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute")
_KIND_ALIASES = {
    "all_gather": "all-gather", "allgather": "all-gather", "ag": "all-gather",
    "reduce_scatter": "reduce-scatter", "reducescatter": "reduce-scatter", "rs": "reduce-scatter",
    "psum_scatter": "reduce-scatter",
    "all_reduce": "all-reduce", "allreduce": "all-reduce", "ar": "all-reduce", "psum": "all-reduce",
    "all_to_all": "all-to-all", "alltoall": "all-to-all", "a2a": "all-to-all",
    "collective_permute": "collective-permute", "ppermute": "collective-permute",
    "send_recv": "collective-permute", "send-recv": "collective-permute",
}


def canonical_kind(kind: str) -> str:
    """The HLO spelling of a collective's name ("all_gather" -> "all-gather").

    >>> canonical_kind("psum"), canonical_kind("all_to_all")
    ('all-reduce', 'all-to-all')
    """
    key = str(kind).strip().lower()
    key = _KIND_ALIASES.get(key, key)
    if key not in KINDS:
        raise ValueError(f"unknown collective {kind!r}; valid choices: {', '.join(KINDS)} "
                         f"(or {', '.join(sorted(_KIND_ALIASES))})")
    return key
