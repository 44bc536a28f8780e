"""Verdicts: what an exercise earns, decided in the grading process from the probe's payload.

One of :data:`VERDICTS` per exercise, with the message :func:`scaling_lib.course.grading.assess` gives
(the same comparison the notebooks print) and the exercise's hint, collected in a
:class:`Result` per notebook.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .chapter import Exercise
from .codec import decode, split_case

from .probe import CASE_TIME_LIMIT, FIRST_CASE_FACTOR

VERDICTS = ("pass", "fail", "unanswered", "error")
STATUSES = ("graded", "unreadable", "error", "superseded")


def _assess(answer, expected, **kw) -> tuple[str, str]:
    """:func:`~scaling_lib.course.grading.assess`, and a plain comparison when describing the miss
    itself fails (an answer of 1e308 overflows the description): never raises. ``name`` and
    ``p`` (to name a listed mistake) are passed only where ``assess`` takes them."""
    import inspect

    from ..grading import FAIL, PASS, assess

    known = inspect.signature(assess).parameters
    kw = {k: v for k, v in kw.items() if k in known and not (k == "p" and v is None)}
    try:
        return assess(answer, expected, **kw)
    except Exception as exc:
        try:
            import numpy as np

            a = np.asarray(answer, dtype=float)
            e = np.asarray(expected, dtype=float)
            ok = a.shape == e.shape and bool(np.all(np.isclose(
                a, e, rtol=kw.get("rtol", 0.02), atol=kw.get("atol", 0.0))))
        except Exception:
            ok = False
        return (PASS, "within tolerance") if ok else (
            FAIL, f"far from the expected value (the checker could not describe the miss: "
            f"{type(exc).__name__})")


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
    status: str = "graded"                           # one of STATUSES
    sha256: str = ""                                  # of the submitted file
    hints: dict = field(default_factory=dict)         # name -> hints seen (saved outputs)

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
                "seconds": round(self.seconds, 2), "status": self.status, "sha256": self.sha256,
                "hints": dict(self.hints)}

    def to_json(self) -> dict:
        """Everything, for the per-notebook result file (:meth:`from_json` reads it back)."""
        return {**self.record(), "messages": {k: list(v) for k, v in self.messages.items()}}

    @classmethod
    def from_json(cls, d: dict) -> "Result":
        r = cls(d["notebook"], d.get("student"), d.get("chapter"), d.get("seed"),
                dict(d.get("exercises", {})),
                {k: tuple(v) for k, v in d.get("messages", {}).items()}, list(d.get("flags", [])),
                float(d.get("seconds", 0.0)), d.get("status", "graded"), d.get("sha256", ""),
                dict(d.get("hints", {})))
        return r


def verdict_value(ex: Exercise, payload, expected, p=None) -> tuple[str, str]:
    """(verdict, message) for a ``check`` exercise from the probe's payload."""
    from ..grading import FAIL, NOT_SOLVED

    if not isinstance(payload, dict) or "value" not in payload:
        why = (payload.get("missing") if isinstance(payload, dict) else None) or \
            "no answer came back"
        return "error", f"no `{ex.target}` after the cell ran ({why})"
    try:
        answer = decode(payload["value"])
    except Exception as exc:  # a hostile payload: any failure is an error
        return "error", f"the answer could not be read back ({type(exc).__name__})"
    v, msg = _assess(answer, expected, unit=ex.unit, name=ex.name, p=p, **ex.tolerance)
    return {NOT_SOLVED: "unanswered", FAIL: "fail"}.get(v, "pass"), msg


def verdict_function(ex: Exercise, payload, reference, cases) -> tuple[str, str]:
    """(verdict, message) for a ``check_function`` exercise, as ``check_function`` decides it."""
    from ..grading import FAIL, NOT_SOLVED

    if not isinstance(payload, dict):
        return "error", "no results came back"
    if "prelude" in payload:
        return "error", f"the exercise's locked cells failed ({payload['prelude']})"
    if "missing" in payload:
        why = str(payload["missing"])
        if why.startswith("NotImplementedError"):
            return "unanswered", "replace the `raise NotImplementedError` line with your code"
        return "fail", f"the cell or `{ex.target}` failed: {why}"
    if payload.get("not_callable"):
        return "fail", "expected a function"
    if not isinstance(payload.get("cases"), list):
        return "error", "no results came back"
    tol = {"rtol": ex.tolerance.get("rtol", 1e-6), "atol": ex.tolerance.get("atol", 0.0)}
    got_cases = payload["cases"]
    if len(got_cases) != len(cases):
        return "error", "the function's results did not all come back"
    for i, (case, got) in enumerate(zip(cases, got_cases), start=1):
        args, kwargs = split_case(case)
        if not isinstance(got, dict):
            return "error", f"case {i}: the result could not be read back"
        if "late" in got:
            limit = CASE_TIME_LIMIT * (FIRST_CASE_FACTOR if i == 1 else 1)
            return "fail", (f"case {i} took longer than {limit:g} s: does a loop never end?")
        if "raised" in got:
            if got["raised"] == "NotImplementedError":
                return "unanswered", "replace the `raise NotImplementedError` line with your code"
            return "fail", f"case {i}: your function raised {got['raised']}: {got.get('text')}"
        try:
            value = decode(got["ok"])
        except Exception as exc:  # a hostile payload: any failure is an error
            return "error", f"case {i}: the result could not be read back ({type(exc).__name__})"
        if value is None:
            return "unanswered", "the function returned None; return your result"
        try:
            want = reference(*args, **kwargs)
        except Exception as exc:
            return "error", f"case {i}: the answer key raised {type(exc).__name__}: {exc}"
        v, msg = _assess(value, want, **tol)
        if v == NOT_SOLVED:
            return "unanswered", msg
        if v == FAIL:
            return "fail", f"case {i}: {msg}"
    return "pass", f"{len(cases)} of {len(cases)} cases match"
