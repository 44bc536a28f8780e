"""The 45-minute mock interview: timed sections, follow-ups that depend on the first answer, and
a score sheet the grading tool fills for the numeric parts.

:data:`FLOW` maps a level (1, 2, 3) to its :class:`Section` list; every section's minutes add up
to :data:`MOCK_MINUTES`. An :class:`Item` is a graded drill (``"93.2"``: the candidate answers in
the drill notebook at the seed the interviewer hands out), a concept question
(``"concept:tp_decode"``, scored 0-3 on its rubric, :mod:`.concept_bank`) or a design question
(``"design:training"``, scored 0-3). :func:`follow_up` gives the next question from the first
answer's outcome; :func:`score_sheet` fills the numeric rows from the grading tool's JSON
(``python -m scaling_lib grade SUBMISSIONS --json``) and takes the interviewer's scores for the
rest; :func:`verdict` applies the thresholds.

See: the instructor guide, "A 45-minute mock interview".
"""

from __future__ import annotations

from dataclasses import dataclass

MOCK_MINUTES = 45
NUMERIC_PASS_SHARE = 0.6   # share of the numeric points a passing candidate scores
DESIGN_PASS_SCORE = 2      # a design answer scored 0-3 like a concept question


@dataclass(frozen=True)
class Item:
    """One question of a section, and where to go after the first answer."""

    ref: str                 # "93.2", "concept:<key>" or "design:<key>"
    if_pass: str = ""        # follow-up after a pass (a ref, or a question in words)
    if_fail: str = ""        # follow-up after a fail or a weak answer
    if_mistake: tuple = ()   # ((label of a listed mistake the FAIL names, follow-up), ...)

    @property
    def kind(self) -> str:
        return self.ref.split(":")[0] if ":" in self.ref else "numeric"

    @property
    def max_points(self) -> int:
        return 1 if self.kind == "numeric" else 3


@dataclass(frozen=True)
class Section:
    name: str
    minutes: int
    items: tuple[Item, ...]
    how: str


DESIGNS = {
    "serving": ("Serve Llama 3 70B at 50 ms per output token: how many H100s, in which layout?",
                "drills.serving_answer()"),
    "training": ("Train a 70B model on 1,024 H100s in 30 days: which plan, what MFU, how many "
                 "tokens?", "drills.training_answer()"),
    "gpt4": ("Serve a GPT-4-class model on A100s and on H100s: how many, which layout, which "
             "precision?", "drills.gpt4_serving_answer()"),
    "low_mfu": ("A 70B run on 1,024 H100s reaches only about a quarter of peak: why, and what "
                "would you change?", "drills.low_mfu_answer()"),
    "long_context": ("Size a 128K-token fine-tune of an 8B model on 64 H100s.",
                     "drills.long_context_answer()"),
}

_WARM = "Hand out the seed; the candidate answers in the drill notebook, out loud first."
_ENV = ("The candidate works in the level's drill notebook at your seed, talking through each "
        "number; move on at the time limit whatever the state.")
_CONCEPT = ("Ask the question; score it 0-3 on its rubric (concept bank); then ask the follow-up "
            "the score selects.")
_DESIGN = ("Let the candidate drive: requirements, a first estimate, then layouts compared. Open "
           "the library's worked answer only at the end and ask for the assumption behind each "
           "number of theirs that differs.")
_WRAP = "The candidate's questions; then fill the score sheet."

FLOW: dict[int, tuple[Section, ...]] = {
    1: (Section("Numbers warm-up", 5, (Item("90.1"), Item("90.5"), Item("90.14")), _WARM),
        Section("Back-of-envelope", 12, (
            Item("91.2"), Item("91.4", if_fail="concept:kv_sizing"),
            Item("91.6", if_pass="How many micro-batches make the bubble under 10%?",
                 if_fail="concept:parallelism")), _ENV),
        Section("Concepts", 10, (
            Item("concept:parallelism", if_pass="concept:dp_bottleneck",
                 if_fail="concept:collectives"),
            Item("concept:batching", if_pass="concept:ttft_tpot", if_fail="concept:roofline")),
            _CONCEPT),
        Section("System design", 15, (Item("design:serving", if_pass="concept:quantisation",
                                           if_fail="concept:kv_sizing"),), _DESIGN),
        Section("Wrap-up", 3, (), _WRAP)),
    2: (Section("Numbers warm-up", 5, (Item("90.4"), Item("90.11"), Item("90.12")), _WARM),
        Section("Back-of-envelope", 12, (
            Item("92.1", if_fail="concept:mfu"),
            Item("92.5", if_pass="concept:tp_decode", if_fail="concept:collectives",
                 if_mistake=(("all-reduces left out (Chapter 8's roofline bound)",
                              "concept:tp_decode"),)),
            Item("92.3", if_fail="concept:zero_stages")), _ENV),
        Section("Concepts", 10, (
            Item("concept:zero_stages", if_pass="concept:recompute",
                 if_fail="concept:step_memory"),
            Item("concept:mfu_at_scale", if_pass="concept:slow_run", if_fail="concept:mfu")),
            _CONCEPT),
        Section("System design", 15, (Item("design:serving", if_pass="design:gpt4",
                                           if_fail="concept:kv_sizing"),), _DESIGN),
        Section("Wrap-up", 3, (), _WRAP)),
    3: (Section("Numbers warm-up", 5, (
            Item("90.13", if_mistake=(("NVLink pools two GPUs' memory into one",
                                       "concept:nvlink"),)),
            Item("90.14", if_mistake=(("data parallelism needs about 8 bytes per parameter",
                                       "concept:step_memory"),)),
            Item("90.12")), _WARM),
        Section("Back-of-envelope", 12, (
            Item("93.1", if_fail="Which bytes must be resident, and which does a step read?"),
            Item("93.2", if_pass="concept:tp_decode", if_fail="concept:collectives",
                 if_mistake=(("all-reduces left out (Chapter 8's roofline bound)",
                              "concept:tp_decode"),
                             ("per sequence", "concept:batching"))),
            Item("93.9", if_pass="concept:failures",
                 if_fail="What is the mean time between failures of a job on n GPUs?")), _ENV),
        Section("Concepts", 10, (
            Item("concept:tp_decode", if_pass="concept:disaggregation",
                 if_fail="concept:batching"),
            Item("concept:diverging_run", if_pass="concept:moe_routing",
                 if_fail="concept:slow_run")), _CONCEPT),
        Section("System design", 15, (Item("design:training", if_pass="design:low_mfu",
                                           if_fail="concept:choose_layout"),), _DESIGN),
        Section("Wrap-up", 3, (), _WRAP)),
}


def _check_level(level) -> int:
    if level not in FLOW:
        raise ValueError(f"level={level!r} is not a mock-interview level; valid choices: "
                         f"{', '.join(map(str, FLOW))}")
    return level


def follow_up(level: int, ref: str, passed: bool, mistake: str | None = None) -> str:
    """The follow-up of item ``ref`` at ``level`` after a first answer that ``passed`` (a numeric
    PASS, or a concept or design score of at least 2); after a FAIL that names a listed
    ``mistake`` (its label), the follow-up for that mistake where the item has one; "" when the
    item lists none.

    >>> follow_up(3, "93.2", passed=False)
    'concept:collectives'
    >>> follow_up(3, "93.2", False, "all-reduces left out (Chapter 8's roofline bound)")
    'concept:tp_decode'
    """
    _check_level(level)
    for s in FLOW[level]:
        for it in s.items:
            if it.ref == ref:
                if not passed and mistake is not None:
                    hit = dict(it.if_mistake).get(mistake)
                    if hit:
                        return hit
                return it.if_pass if passed else it.if_fail
    refs = [it.ref for s in FLOW[level] for it in s.items]
    raise ValueError(f"ref={ref!r} is not an item of level {level}; valid choices: "
                     f"{', '.join(refs)}")


def describe(ref: str) -> str:
    """A ref in words: the drill's title, the concept's question or the design question."""
    if ref.startswith("concept:"):
        from .concept_bank import by_key
        return by_key()[ref.split(":", 1)[1]].question
    if ref.startswith("design:"):
        return DESIGNS[ref.split(":", 1)[1]][0]
    from .bank import QUESTIONS
    for qs in QUESTIONS.values():
        for q in qs:
            if q.name == ref:
                return f"{q.name} {q.title}"
    return ref  # a follow-up asked in words


def exercises_from_grades(records, student: str | None = None) -> dict:
    """{exercise: "pass" | "fail" | "unanswered" | "error"} merged from the grading tool's JSON
    records (``grade ... --json``), those of ``student`` only when given (notebooks named
    ``STUDENT/NN_x.ipynb`` or ``STUDENT_NN_x.ipynb``)."""
    out = {}
    for r in records:
        nb = str(r.get("notebook", ""))
        if student is not None and not (nb.startswith(f"{student}/")
                                        or nb.startswith(f"{student}_")):
            continue
        out.update(r.get("exercises", {}))
    return out


def score_sheet(level: int, grades: dict | None = None, scores: dict | None = None) -> list[dict]:
    """One row per item of the level's flow: section, item, kind, points, max and who scored it.

    ``grades``: {exercise: verdict} (:func:`exercises_from_grades`) fills the numeric rows (1
    point for "pass", else 0; None where the exercise was not graded). ``scores``: {ref: 0-3}
    from the interviewer for the concept and design rows (None where not yet scored).

    >>> rows = score_sheet(3, {"93.1": "pass", "93.2": "fail"}, {"concept:tp_decode": 3})
    >>> [(r["item"], r["points"]) for r in rows][3:6]
    [('93.1', 1), ('93.2', 0), ('93.9', None)]
    """
    _check_level(level)
    grades, scores = grades or {}, scores or {}
    rows = []
    for s in FLOW[level]:
        for it in s.items:
            if it.kind == "numeric":
                v = grades.get(it.ref)
                pts = None if v is None else int(v == "pass")
                who = "grader"
            else:
                pts = scores.get(it.ref)
                if pts is not None and pts not in (0, 1, 2, 3):
                    raise ValueError(f"score {pts!r} for {it.ref} must be 0, 1, 2 or 3")
                who = "interviewer"
            rows.append({"section": s.name, "item": it.ref, "kind": it.kind, "points": pts,
                         "max": it.max_points, "scored by": who})
    return rows


def verdict(rows: list[dict]) -> dict:
    """Totals and the pass rule: numeric points at least NUMERIC_PASS_SHARE of their maximum, the
    concept questions by the bank's session rule, the design at DESIGN_PASS_SCORE; "incomplete"
    while a row is unscored.

    >>> verdict(score_sheet(1))["result"]
    'incomplete'
    """
    from .concept_bank import PASS_SCORE, SESSION_MAX_BELOW, SESSION_PASS_MEAN

    if any(r["points"] is None for r in rows):
        return {"result": "incomplete",
                "missing": [r["item"] for r in rows if r["points"] is None]}
    num = [r for r in rows if r["kind"] == "numeric"]
    con = [r["points"] for r in rows if r["kind"] == "concept"]
    des = [r["points"] for r in rows if r["kind"] == "design"]
    num_share = sum(r["points"] for r in num) / max(sum(r["max"] for r in num), 1)
    con_mean = sum(con) / len(con) if con else 0.0
    ok = (num_share >= NUMERIC_PASS_SHARE
          and con_mean >= SESSION_PASS_MEAN
          and sum(p < PASS_SCORE for p in con) <= SESSION_MAX_BELOW
          and all(p >= DESIGN_PASS_SCORE for p in des))
    return {"result": "pass" if ok else "no pass", "numeric share": num_share,
            "concept mean": con_mean, "design": des,
            "total": sum(r["points"] for r in rows), "max": sum(r["max"] for r in rows)}


def flow_markdown(level: int) -> str:
    """The level's flow as Markdown: sections with their minutes, items and follow-ups."""
    _check_level(level)
    out = []
    for s in FLOW[level]:
        out.append(f"**{s.name} ({s.minutes} min).** {s.how}\n")
        for it in s.items:
            line = f"- {describe(it.ref)} (`{it.ref}`)"
            if it.if_pass or it.if_fail:
                line += (f"; then, if it passes: {describe(it.if_pass) or 'move on'}; "
                         f"if not: {describe(it.if_fail) or 'move on'}")
            for label, ref in it.if_mistake:
                line += f"; if the checker names \"{label}\": {describe(ref)}"
            out.append(line)
        out.append("")
    return "\n".join(out)


def sheet_markdown(rows: list[dict]) -> str:
    """The score sheet as a Markdown table with its verdict (a dash where not yet scored)."""
    from ..nbtools import table

    v = verdict(rows)
    body = table([{k: ("—" if x is None else x) for k, x in r.items()} for r in rows])
    if v["result"] == "incomplete":
        return body + f"\n\n**Incomplete**: not yet scored: {', '.join(v['missing'])}."
    return (body + f"\n\n**{v['result'].capitalize()}**: {v['total']} of {v['max']} points; "
            f"numeric {v['numeric share']:.0%}, concept mean {v['concept mean']:.2f}, "
            f"design {', '.join(map(str, v['design'])) or '-'}.")


def main(argv=None) -> int:
    """``python -m scaling_lib.course.drills.mock GRADES.json --student NAME --level N
    [--score REF=0..3 ...]``: the score sheet of one candidate, its numeric rows filled from the
    grading tool's JSON (``python -m scaling_lib grade SUBMISSIONS --json > GRADES.json``)."""
    import argparse
    import json
    import sys

    ap = argparse.ArgumentParser(prog="python -m scaling_lib.course.drills.mock",
                                 description=main.__doc__)
    ap.add_argument("grades", help="the JSON list that `grade ... --json` prints")
    ap.add_argument("--student", required=True)
    ap.add_argument("--level", type=int, required=True, choices=sorted(FLOW))
    ap.add_argument("--score", action="append", default=[], metavar="REF=N",
                    help="an interviewer's score, e.g. concept:tp_decode=3 (repeat)")
    args = ap.parse_args(argv)
    try:
        with open(args.grades) as f:
            records = json.load(f)
        scores = {}
        for s in args.score:
            ref, _, val = s.partition("=")
            if not val.strip().isdigit():
                raise ValueError(f"--score {s!r} must be REF=N with N in 0, 1, 2, 3")
            scores[ref.strip()] = int(val)
        rows = score_sheet(args.level, exercises_from_grades(records, args.student), scores)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(sheet_markdown(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
