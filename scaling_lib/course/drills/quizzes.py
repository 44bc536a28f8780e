"""Quick multiple-choice rounds drawn from a seed, without a notebook.

Each numeric question of a level comes with its right answer and, as distractors, the answers
of the common wrong methods that the answer key lists (``WRONG_METHODS``).

See: the "Interview preparation" part of the book.
"""

from __future__ import annotations

import numpy as np

from .bank import QUESTIONS

def quiz(seed: int, level: str = "90_numbers", n: int = 5) -> list[dict]:
    """A multiple-choice round: ``n`` numeric questions of ``level`` drawn from ``seed``, each with
    its right answer and the common wrong ones (the answer key's WRONG_METHODS) shuffled.

    >>> q = quiz(0)[0]
    >>> q["options"][q["correct"]] == q["answer"]
    True
    """
    from ..grading import draw
    from ..grading.tables import mistake
    from ..keys import drills as key

    if level not in QUESTIONS:
        raise ValueError(f"level={level!r}; valid choices: {', '.join(QUESTIONS)}")
    bank = [q for q in QUESTIONS[level] if not q.signature and q.name in key.WRONG_METHODS_ALL]
    rng = np.random.default_rng(seed)
    out = []
    for q in [bank[i] for i in rng.permutation(len(bank))[:n]]:
        p = eval(f"draw(seed, {q.name!r}, {q.draw})", {"draw": draw, "seed": seed})
        right = getattr(key, q.key)(p)
        options = [right] + [mistake(label, v).fn(p)
                             for label, v in key.WRONG_METHODS_ALL[q.name].items()]
        options = list(dict.fromkeys(float(o) for o in options))
        order = rng.permutation(len(options))
        shuffled = [options[i] for i in order]
        out.append({"name": q.name, "question": q.prompt, "params": p, "answer": float(right),
                    "options": shuffled, "correct": shuffled.index(float(right)), "unit": q.unit})
    return out
