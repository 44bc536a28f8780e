"""Llama 3's load-balanced causal chunks for context parallelism: which tokens each cp rank
holds, and how evenly the causal mask's work then splits.

The sequence is cut into 2·cp chunks and rank i holds chunks i and 2·cp-1-i
(Grattafiori et al. 2024, section 3.3.2), so every rank has the same share of the key/query
pairs under the causal mask. :mod:`~scaling_lib.parallelism.context` re-exports every name.

See: the chapter "Context parallelism".
"""

from __future__ import annotations

import numpy as np

from ..units import MAX_DEVICES, _brief, check_count


def chunk_assignment(cp) -> list[tuple[int, int]]:
    """The two chunks (of 2·cp) rank i holds: (i, 2·cp - 1 - i), Llama 3's load balancing.

    >>> chunk_assignment(4)
    [(0, 7), (1, 6), (2, 5), (3, 4)]
    """
    cp = check_count("cp", cp)
    if np.ndim(cp) or cp > MAX_DEVICES:
        raise ValueError(f"cp={_brief(cp)} must be one number of ranks, at most {MAX_DEVICES:,}")
    cp = int(cp)
    return [(i, 2 * cp - 1 - i) for i in range(cp)]


def token_order(T, cp) -> np.ndarray:
    """Token positions in device order: rank 0's T/cp positions, then rank 1's, ...

    Cutting this order into cp contiguous shards gives each rank its two chunks.

    >>> token_order(8, 2).tolist()
    [0, 1, 6, 7, 2, 3, 4, 5]
    """
    T, cp = _check_T(T, cp, 2)
    c = T // (2 * cp)
    return np.concatenate([np.arange(j * c, (j + 1) * c)
                           for pair in chunk_assignment(cp) for j in pair])


def causal_pairs(T, cp, *, balanced=True) -> np.ndarray:
    """(query, key) pairs of the causal mask each rank computes, key <= query.

    ``balanced``: rank i holds chunks i and 2·cp-1-i; else the contiguous shard i. A query at
    position p attends to p + 1 keys.

    >>> causal_pairs(8, 2).tolist(), causal_pairs(8, 2, balanced=False).tolist()
    ([18, 18], [10, 26])
    """
    T, cp = _check_T(T, cp, 2 if balanced else 1)
    if balanced:
        pos = token_order(T, cp).reshape(cp, -1)
    else:
        pos = np.arange(T).reshape(cp, -1)
    return (pos + 1).sum(axis=1)


def imbalance(T, cp, *, balanced=True) -> float:
    """Busiest rank's causal work over the average: the step waits for the busiest.

    >>> imbalance(8192, 16, balanced=False) > 1.9, imbalance(8192, 16)
    (True, 1.0)
    """
    w = causal_pairs(T, cp, balanced=balanced)
    return float(w.max() / w.mean())


MAX_TOKENS = 2**24  # positions listed one by one below: keep the arrays small


def _check_T(T, cp, per_rank_chunks):
    T = check_count("T", T)
    cp = check_count("cp", cp)
    if np.ndim(T) or np.ndim(cp):
        raise ValueError("T and cp must be single numbers")
    if T > MAX_TOKENS or cp > MAX_DEVICES:
        raise ValueError(f"T={T:,} tokens and cp={cp:,} ranks must be at most {MAX_TOKENS:,} "
                         f"and {MAX_DEVICES:,} (positions are listed one by one)")
    if T % (per_rank_chunks * cp):
        raise ValueError(f"T={T} tokens must be divisible by {per_rank_chunks}·cp = "
                         f"{per_rank_chunks * cp}")
    return int(T), int(cp)
