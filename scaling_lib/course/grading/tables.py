"""What an answer key says about each exercise: its listed mistakes, its hints, its synonyms.

An answer-key module (``scaling_lib.course.keys.<chapter>``) may define, per exercise name::

    WRONG_METHODS = {"5.4": {"forward only (2N)": (fn, "that is the forward pass only: the "
                                                   "backward pass does twice its work"),
                             "with recomputation (8N)": fn}}
    HINTS = {"5.4": ("which passes does training run over each token?",
                     "count the FLOPs per parameter per token of each pass and add them")}
    SYNONYMS = {"13.9": {"no": ("not worth it",)}}
    ACCEPTED_METHODS = {"7.12": {"the chapter's 4/3 rule": fn}}

A wrong method is a function of the exercise's drawn parameters ``p`` (no argument for an
exercise that draws none; the function's arguments for an "implement" exercise) returning the
answer that slip gives, computed from the key's own functions. Its value is the function alone
(the label is then the message the student reads) or ``(fn, message)``. HINTS holds the nudge
shown after the first FAIL and the method shown after a later one, never the answer.

:func:`tables` finds them for an exercise name in the answer keys the notebook has imported
(every module under ``scaling_lib.course.keys`` in ``sys.modules``, plus any passed in), so the
check line of a graded cell stays ``check(answer, key.f(p), name="5.4", ...)``.
"""

from __future__ import annotations

import contextlib
import inspect
import sys
import types
from dataclasses import dataclass, field

KEYS_PACKAGE = "scaling_lib.course.keys"


@dataclass(frozen=True)
class Mistake:
    """One listed mistake of an exercise: its label, the function giving its answer, its message."""

    label: str
    fn: object
    message: str


@dataclass(frozen=True)
class Tables:
    """Everything the answer keys list for one exercise."""

    mistakes: tuple = ()                     # Mistake, in the key's order
    hints: tuple = ()                        # (nudge, method)
    synonyms: dict = field(default_factory=dict)   # answer -> accepted spellings
    accepted: dict = field(default_factory=dict)   # label -> fn (ACCEPTED_METHODS)


def mistake(label: str, value) -> Mistake:
    """A WRONG_METHODS entry as a :class:`Mistake`: ``fn`` (the label is the message) or
    ``(fn, message)``.

    >>> mistake("forward only", (abs, "that is the forward pass only")).message
    'that is the forward pass only'
    >>> mistake("forward only", abs).message
    'forward only'
    """
    if isinstance(value, tuple):
        if len(value) != 2 or not callable(value[0]) or not isinstance(value[1], str):
            raise ValueError(f"WRONG_METHODS entry {label!r} is {value!r}: give a function or a "
                             "(function, message) pair")
        return Mistake(label, value[0], value[1])
    if not callable(value):
        raise ValueError(f"WRONG_METHODS entry {label!r} is {value!r}: give a function or a "
                         "(function, message) pair")
    return Mistake(label, value, label)


_USING: list = []   # answer-key modules set by use_keys (the audit), else those imported


@contextlib.contextmanager
def use_keys(modules):
    """Within the block, :func:`tables` reads these answer-key modules only (the audit's)."""
    _USING.append(list(modules))
    try:
        yield
    finally:
        _USING.pop()


def key_modules(extra=()) -> list:
    """The answer-key modules imported so far (under ``scaling_lib.course.keys``), then
    ``extra``."""
    mods = [m for n, m in list(sys.modules.items())
            if isinstance(m, types.ModuleType) and n.startswith(KEYS_PACKAGE + ".")]
    return mods + [m for m in extra if m not in mods]


def tables(name: str, modules=None) -> Tables:
    """The listed mistakes, hints and synonyms of exercise ``name`` in the answer-key ``modules``
    (default: :func:`key_modules`)."""
    mods = modules if modules is not None else (_USING[-1] if _USING else key_modules())
    wrong, hints, syn, acc = {}, (), {}, {}
    for mod in mods:
        wrong.update(getattr(mod, "WRONG_METHODS", {}).get(name, {}))
        hints = getattr(mod, "HINTS", {}).get(name, hints)
        syn.update(getattr(mod, "SYNONYMS", {}).get(name, {}))
        acc.update(getattr(mod, "ACCEPTED_METHODS", {}).get(name, {}))
    if isinstance(hints, str):
        hints = (hints,)
    return Tables(tuple(mistake(k, v) for k, v in wrong.items()), tuple(hints), syn, acc)


def with_messages(wrong_methods: dict, messages: dict) -> dict:
    """Give listed mistakes their student-facing messages, in place: ``messages`` maps an exercise
    to {label: message}; an entry already holding ``(fn, message)`` keeps its function.

    >>> w = {"5.4": {"forward only": abs}}
    >>> with_messages(w, {"5.4": {"forward only": "that is the forward pass only"}})["5.4"]
    {'forward only': (<built-in function abs>, 'that is the forward pass only')}
    """
    for ex, said in messages.items():
        for label, message in said.items():
            if label not in wrong_methods.get(ex, {}):
                raise ValueError(f"no listed mistake {label!r} for exercise {ex!r}; listed: "
                                 f"{', '.join(wrong_methods.get(ex, {})) or 'none'}")
            wrong_methods[ex][label] = (mistake(label, wrong_methods[ex][label]).fn, message)
    return wrong_methods


def apply(fn, p):
    """A method's answer: ``fn()`` when it takes no argument, else ``fn(p)``."""
    try:
        inspect.signature(fn).bind()
    except (TypeError, ValueError):
        return fn(p)
    return fn()
