"""Verdicts: what an exercise earns, decided in the grading process from the probe's payload.

One of :data:`VERDICTS` per exercise, with the message :func:`scaling_lib.course.grading.assess` gives
(the same comparison the notebooks print) and the exercise's hint, collected in a
:class:`Result` per notebook.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .chapter import Exercise
from .codec import decode, split_case

VERDICTS = ("pass", "fail", "unanswered", "error")
CASE_TIME_LIMIT = 10.0


@dataclass
class Result:
    notebook: str
    student: str
    chapter: str | None
    seed: int | None
    exercises: dict = field(default_factory=dict)    # name -> verdict
    messages: dict = field(default_factory=dict)     # name -> (message, hint)
    flags: list = field(default_factory=list)
    seconds: float = 0.0

    @property
    def passed(self) -> int:
        return sum(v == "pass" for v in self.exercises.values())

    @property
    def total(self) -> int:
        return len(self.exercises)

    def record(self) -> dict:
        return {"notebook": self.notebook, "student": self.student, "chapter": self.chapter,
                "seed": self.seed, "exercises": dict(self.exercises), "passed": self.passed,
                "total": self.total, "flags": list(self.flags),
                "seconds": round(self.seconds, 2)}


def verdict_value(ex: Exercise, payload, expected) -> tuple[str, str]:
    """(verdict, message) for a ``check`` exercise from the probe's payload."""
    from ..grading import FAIL, NOT_SOLVED, assess

    if not payload or "value" not in payload:
        why = (payload or {}).get("missing", "no answer came back")
        return "error", f"no `{ex.target}` after the cell ran ({why})"
    try:
        answer = decode(payload["value"])
    except Exception as exc:
        return "error", f"the answer could not be read back ({type(exc).__name__})"
    v, msg = assess(answer, expected, unit=ex.unit, **ex.tolerance)
    return {NOT_SOLVED: "unanswered", FAIL: "fail"}.get(v, "pass"), msg


def verdict_function(ex: Exercise, payload, reference, cases) -> tuple[str, str]:
    """(verdict, message) for a ``check_function`` exercise, as ``check_function`` decides it."""
    from ..grading import FAIL, NOT_SOLVED, assess

    if not payload or "cases" not in payload and "not_callable" not in payload:
        why = (payload or {}).get("missing", "no results came back")
        return "error", f"no function `{ex.target}` after the cell ran ({why})"
    if payload.get("not_callable"):
        return "fail", f"expected a function, got {payload['value'].get('t')}"
    tol = {"rtol": ex.tolerance.get("rtol", 1e-6), "atol": ex.tolerance.get("atol", 0.0)}
    got_cases = payload["cases"]
    if len(got_cases) != len(cases):
        return "error", "the function's results did not all come back"
    for i, (case, got) in enumerate(zip(cases, got_cases), start=1):
        args, kwargs = split_case(case)
        if "late" in got:
            return "fail", (f"case {i} took longer than {CASE_TIME_LIMIT:g} s: does a loop "
                            "never end?")
        if "raised" in got:
            if got["raised"] == "NotImplementedError":
                return "unanswered", "replace the `raise NotImplementedError` line with your code"
            return "fail", f"case {i}: your function raised {got['raised']}: {got['text']}"
        try:
            value = decode(got["ok"])
        except Exception as exc:
            return "error", f"case {i}: the result could not be read back ({type(exc).__name__})"
        if value is None:
            return "unanswered", "the function returned None; return your result"
        v, msg = assess(value, reference(*args, **kwargs), **tol)
        if v == NOT_SOLVED:
            return "unanswered", msg
        if v == FAIL:
            return "fail", f"case {i}: {msg}"
    return "pass", f"{len(cases)} of {len(cases)} cases match"
