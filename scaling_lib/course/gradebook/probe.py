"""Asking the student's kernel for an answer: the probe cells and reading their reply.

After a graded cell runs, a probe cell (:data:`CODEC` plus a template) sends back, on one line
prefixed by a random nonce, the *value* of the checker call's first argument, or for "implement"
exercises what the student's function returns on the exercise's cases, each case under
:data:`~scaling_lib.course.gradebook.verdicts.CASE_TIME_LIMIT`. The expected value is computed here, in
the grading process, and the verdict is decided here too (:mod:`.verdicts`).
"""

from __future__ import annotations

import json
import secrets

from .chapter import Chapter, Exercise
from .codec import CODEC, encode
from .verdicts import CASE_TIME_LIMIT, Result, verdict_function, verdict_value

# The probe cells (kernel side). {nonce} prefixes the one line the grader reads.
_PROBE_VALUE = r'''
def _probe(g):
    import json
    try:
        v = eval({expr!r}, g)
    except BaseException as exc:
        return {{"missing": f"{{type(exc).__name__}}: {{str(exc)[:200]}}"}}
    return {{"value": _enc(v)}}
print({nonce!r} + __import__("json").dumps(_probe(__g)))
'''
_PROBE_FUNCTION = r'''
class _Late(BaseException):
    pass

def _probe(g):
    import json, signal
    try:
        fn = eval({expr!r}, g)
    except BaseException as exc:
        return {{"missing": f"{{type(exc).__name__}}: {{str(exc)[:200]}}"}}
    if not callable(fn):
        return {{"value": _enc(fn), "not_callable": True}}
    out = []
    def late(signum, frame):
        raise _Late
    for case in _dec(json.loads({cases!r})):
        args, kwargs = _split_case(case)
        signal.signal(signal.SIGALRM, late)
        signal.setitimer(signal.ITIMER_REAL, {limit!r})
        try:
            out.append({{"ok": _enc(fn(*args, **kwargs))}})
        except _Late:
            out.append({{"late": True}})
        except BaseException as exc:
            out.append({{"raised": type(exc).__name__, "text": str(exc)[:200]}})
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    return {{"cases": out}}
print({nonce!r} + __import__("json").dumps(_probe(__g)))
'''


def _probe_cell(template: str, **fields) -> str:
    """Wrap a probe so its helper names stay out of the student's namespace."""
    src = CODEC + template.format(**fields)
    return f"exec({src!r}, {{'__g': globals(), '__builtins__': __builtins__}})"


def _forget(name: str) -> str:
    return f"globals().pop({name!r}, None)"


def _payload(text: str, nonce: str):
    for line in reversed(text.splitlines()):
        if line.startswith(nonce):
            try:
                return json.loads(line[len(nonce):])
            except ValueError:
                return None
    return None


def _revive(kernel, prelude: list[str], timeout: float, res: Result) -> None:
    """A fresh kernel with the locked set-up cells run again, so later exercises can go on."""
    kernel.restart()
    for src in prelude:
        kernel.run(src, timeout)


def _probe(kernel, ex: Exercise, chapter: Chapter, seed: int, timeout: float):
    nonce = "@@grader-" + secrets.token_hex(8) + "@@"
    try:
        expected = chapter.expected(ex.name, seed)
    except Exception as exc:  # the key itself failed: the course's bug, not the student's
        return "error", f"the answer key raised {type(exc).__name__}: {exc}"
    if ex.kind == "check":
        out = kernel.run(_probe_cell(_PROBE_VALUE, expr=ex.target, nonce=nonce), timeout)
        return verdict_value(ex, _payload(out.text, nonce), expected)
    reference, cases = expected
    cases_json = json.dumps(encode(cases))
    budget = CASE_TIME_LIMIT * len(cases) + timeout
    out = kernel.run(_probe_cell(_PROBE_FUNCTION, expr=ex.target, nonce=nonce, cases=cases_json,
                                 limit=CASE_TIME_LIMIT), budget)
    if out.died:
        return "error", "the function stopped the kernel (exit, crash or memory)"
    return verdict_function(ex, _payload(out.text, nonce), reference, cases)
