"""Conceptual interview questions: model answers and self-scoring rubrics.

:func:`concepts` returns {key: (question, model answer, pass list)} of the concept bank
(:mod:`.concept_bank`, every number computed from the library); :func:`reveal` shows one
question's three model answers and its rubric folded, for a reader to open after answering.

See: the "Interview preparation" part of the book.
"""

from __future__ import annotations

from ... import transformer
from ...units import DAY

def _run_16k():
    """Llama 3 405B's largest published run (Table 4 of the Llama 3 paper)."""
    from ... import published
    return max((r for r in published.RUNS.values() if r.name.startswith("llama3-405b")),
               key=lambda r: (r.n_devices, r.mfu))


def _frontier_days() -> float:
    """Llama 3 405B's training FLOPs on its 16K-GPU run at that run's MFU: days of compute."""
    from ... import published
    run = _run_16k()
    return float(transformer.train_time(published.LLAMA3_405B_TRAIN_FLOPS, run.n_devices,
                                        run.accelerator, run.mfu) / DAY)


def concepts() -> dict:
    """{key: (question, model answer at depth 2, pass list)} of every question of the concept
    bank (:mod:`.concept_bank`); numbers in the answers come from the library."""
    from .concept_bank import bank

    return {c.key: (c.question, c.answers[1], list(c.passing)) for c in bank()}


def reveal(key: str):
    """The model answers (three depths) and the rubric of concept question ``key``, folded (shown
    when opened): for a reader to open after answering aloud."""
    from IPython.display import Markdown

    from .concept_bank import SCORES, by_key, rubric_markdown

    table = by_key()
    if key not in table:
        raise ValueError(f"unknown question {key!r}; valid choices: {', '.join(table)}")
    c = table[key]
    scale = "; ".join(f"{k} {v}" for k, v in SCORES.items())
    return Markdown(f"<details><summary>Model answers and rubric (open after answering)</summary>"
                    f"\n\n**Depth 1 (new graduate).** {c.answers[0]}\n\n**Depth 2 (engineer).** "
                    f"{c.answers[1]}\n\n**Depth 3 (senior).** {c.answers[2]}\n\n"
                    f"**Score yourself** ({scale}).\n\n{rubric_markdown(c)}\n\n</details>")
