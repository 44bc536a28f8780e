"""Interview drills: the bank, its notebooks, the quiz, the worked design answers, the concept
bank, the mock interview; every drill key checked at many seeds against a derivation by hand."""

import math
from pathlib import Path

import nbformat
import pytest

from scaling_lib import hardware
from scaling_lib.course import drills
from scaling_lib.course.drills_build import notebook
from scaling_lib.course.grading import FAIL, PASS, Params, assess
from scaling_lib.course.keys import drills as key

ROOT = Path(__file__).resolve().parents[1]


def test_bank_names_keys_and_shape():
    names = [q.name for qs in drills.QUESTIONS.values() for q in qs]
    assert len(names) == len(set(names))
    for stem, qs in drills.QUESTIONS.items():
        assert stem in drills.LEVELS and stem in drills.MINUTES
        assert len(qs) >= 8 and sum(bool(q.signature) for q in qs) >= 2
        for q in qs:
            assert q.name.split(".")[0] == stem[:2]
            assert callable(getattr(key, q.key)), q.key
            if q.name in key.WRONG_METHODS_ALL:
                assert not q.signature


@pytest.mark.parametrize("stem", list(drills.QUESTIONS))
def test_committed_notebooks_match_the_bank(stem):
    setup = next(c for c in nbformat.read(ROOT / "solutions" / "01_rooflines.ipynb", as_version=4)
                 .cells if c.cell_type == "code").source
    made = [c.source for c in notebook(stem, setup).cells if c.cell_type == "code"]
    have = [c.source for c in nbformat.read(ROOT / "solutions" / f"{stem}.ipynb", as_version=4)
            .cells if c.cell_type == "code"]
    assert made == have, "run `python -m scaling_lib.course.drills_build` and re-run the notebooks"


def test_a_changed_constant_changes_the_drill_and_its_answer(monkeypatch):
    real = hardware.get
    faster = hardware.with_changes(real("h100"), hbm_bytes_per_s=5e12)
    monkeypatch.setattr(hardware, "get", lambda n: faster if n == "h100" else real(n))
    p = Params({"accelerator": "h100"})
    assert key.hbm_bytes_per_s(p) == 5e12
    assert any(r["HBM bandwidth"] == "5 TB/s" for r in drills.chip_rows(["h100"]))
    assert key.critical_batch(p) == pytest.approx(faster.peak_flops_per_s() / 5e12)


def test_quiz_is_seeded_and_its_distractors_fail():
    a, b = drills.quiz(3, n=4), drills.quiz(3, n=4)
    assert [q["name"] for q in a] == [q["name"] for q in b] and len(a) == 4
    for q in a:
        assert q["options"][q["correct"]] == q["answer"]
        assert len(set(q["options"])) == len(q["options"]) >= 2
        want = getattr(key, next(x.key for x in drills.QUESTIONS["90_numbers"]
                                 if x.name == q["name"]))(q["params"])
        for i, o in enumerate(q["options"]):
            assert assess(o, want)[0] == (PASS if i == q["correct"] else FAIL)
    for level in drills.QUESTIONS:
        assert drills.quiz(0, level, n=2)
    with pytest.raises(ValueError, match="valid choices"):
        drills.quiz(0, "level-9")


# ---- Every drill key at many seeds against an independent derivation -----------------------
# The derivations below use a different path than the keys: parameters counted from the config's
# shape (not transformer.n_params), bytes and FLOPs multiplied out by hand, datasheet fields read
# directly. Only the collective's cost is taken from collectives.group_time (its one home), and
# through a different call than the key's (inference.tp_decode_comm_time).

def _params(model):
    """Parameters of a dense or MoE GLU decoder, counted from its shape."""
    from scaling_lib import models
    c = models.get(model)
    attn = c.D * c.N * c.H + 2 * c.D * c.K * c.H + c.N * c.H * c.D
    mlp = 3 * c.D * c.F * (c.E if c.E > 1 else 1) + (c.D * c.E if c.E > 1 else 0)
    emb = c.V * c.D
    return emb + c.L * (attn + mlp + 2 * c.D) + c.D + (0 if c.tied_embeddings else emb), emb


def _kv(model, B, S, w=2):
    from scaling_lib import models
    c = models.get(model)
    return 2 * c.L * c.K * c.H * w * B * S


def _decode_step(p):
    """92.5 / 93.2 by hand: memory-bound split step plus 2L + 1 all-reduces of B·D bf16 values."""
    from scaling_lib import collectives, models
    c = models.get(p.model)
    acc = hardware.get(p.accelerator)
    n_all, emb = _params(p.model)
    read = 2 * (n_all - emb) + _kv(p.model, p.B, p.S)
    t_mem = read / (p.n * acc.hbm_bytes_per_s)
    t_math = 2 * n_all * p.B / (p.n * acc.peak_flops_per_s("bf16"))
    one = collectives.group_time("all-reduce", p.B * c.D * 2, p.n, 1,
                                 hardware.cluster(p.accelerator, p.n))
    return max(t_mem, t_math) + (2 * c.L + 1) * float(one)


def _hierarchical(V, n, g=8):
    """Ring reduce-scatter in the node, ring all-reduce of V/g across the m = n/g nodes on each
    GPU's NIC, ring all-gather in the node: bandwidth terms plus one latency per ring step."""
    c = hardware.cluster("h100", n)
    m = n // g
    nv, ib = c.intra_node, c.inter_node
    return (2 * (g - 1) / g * V / nv.bytes_per_s + 2 * (g - 1) * nv.latency
            + 2 * (m - 1) / m * (V / g) / ib.bytes_per_s + 2 * (m - 1) * ib.latency)


def _train_flops_per_token(model, T):
    """6 FLOPs per matmul weight (the output layer's included, the embedding lookup not) plus
    attention's 12·L·T·N·H (PaLM's appendix B, no causal halving)."""
    c = _cfg(model)
    attn = c.D * c.N * c.H + 2 * c.D * c.K * c.H + c.N * c.H * c.D
    return 6 * (c.L * (attn + 3 * c.D * c.F) + c.V * c.D) + 12 * c.L * T * c.N * c.H


def _ring(V, n, W):
    return 2 * (n - 1) / n * V / W


_GT = {3: 8e9, 4: 16e9, 5: 32e9}
BY_HAND = {
    "90.5": lambda p: {"mixed": 16, "bf16": 8, "fp32": 16}[p.recipe],
    "90.6": lambda p: hardware.get(p.accelerator).peak_flops_per_s("bf16")
    / hardware.get(p.accelerator).hbm_bytes_per_s,
    "90.7": lambda p: _kv(p.model, 1, 1),
    "90.8": lambda p: _ring(p.gbytes * 1e9, p.n, p.link_gbytes_per_s * 1e9),
    "90.11": lambda p: max(p.n * 80e9 - 2 * _params(p.model)[0], 0) / _kv(p.model, 1, 1),
    "90.12": lambda p: p.gbytes * 1e9 / (16 * _GT[p.gen] * 128 / 130 / 8),
    "90.13": lambda p: (80e9 / hardware.get("a100-80gb").hbm_bytes_per_s
                        + (2 * (_params(p.model)[0] - _params(p.model)[1]) - 80e9)
                        / hardware.get("a100-80gb").link_bytes_per_s),
    "90.14": lambda p: hardware.get(p.accelerator).hbm_bytes / 16,
    "91.1": lambda p: 2 * p.B * p.D * p.F / hardware.get(p.accelerator).peak_flops_per_s("bf16"),
    "91.2": lambda p: 6 * p.n_params * p.n_tokens,
    "91.3": lambda p: 16 * p.n_params,
    "91.4": lambda p: _kv(p.model, p.B, p.S),
    "91.5": lambda p: 2 * _params(p.model)[0] / (p.n * hardware.get(p.accelerator).hbm_bytes_per_s),
    "91.6": lambda p: (p.pp - 1) / (p.m + p.pp - 1),
    "92.1": lambda p: _train_flops_per_token(p.model, 4096) * p.tokens_per_chip / hardware.get(
        p.accelerator).peak_flops_per_s("bf16"),
    "92.2": lambda p: 6 * p.n_params * p.n_tokens / (
        p.n * hardware.get(p.accelerator).peak_flops_per_s("bf16") * p.mfu) / 86400,
    "92.3": lambda p: (2 * p.n_params / (p.dp if p.zero >= 3 else 1)
                       + 2 * p.n_params / (p.dp if p.zero >= 2 else 1)
                       + 12 * p.n_params / (p.dp if p.zero >= 1 else 1)),
    "92.4": lambda p: _ring(2 * p.n_params, p.dp, p.link_gbytes_per_s * 1e9),
    "92.5": _decode_step,
    "92.6": lambda p: max(p.n * hardware.get(p.accelerator).hbm_bytes
                          - 2 * _params(p.model)[0], 0) / _kv(p.model, 1, 1),
    "93.1": lambda p: math.ceil((2 * _params(p.model)[0] + _kv(p.model, p.B, p.S))
                                / hardware.get(p.accelerator).memory_capacity_bytes),
    "93.2": lambda p: p.B / _decode_step(p),
    "93.3": lambda p: _hierarchical(p.gbytes * 1e9, p.n),
    "93.4": lambda p: p.mfu * (1 - (p.pp - 1) / (p.v * p.m + p.pp - 1)),
    "93.5": lambda p: p.n_tokens / (p.days * 86400),
    "93.6": lambda p: 6 * p.n_params * p.n_tokens / (
        hardware.get(p.accelerator).peak_flops_per_s("bf16") * p.mfu * p.days * 86400),
    "93.9": lambda p: math.sqrt(2 * p.ckpt_s * p.mtbf_hours * 3600 / p.n),
    "93.10": lambda p: sum(p.alpha ** i for i in range(p.gamma + 1)) / (1 + p.gamma * p.draft_cost),
    "93.11": lambda p: _kv(p.model, p.B, p.S) / min(p.tp, _cfg(p.model).K),
    "93.12": lambda p: p.E - p.E * (1 - p.k / p.E) ** p.B,  # E minus the experts no token picks
}
# Keys that read a datasheet field: no second path exists.
NOT_BY_HAND = {"90.1", "90.2", "90.3", "90.4"}


def _cfg(model):
    from scaling_lib import models
    return models.get(model)


def _draw(q, seed):
    from scaling_lib.course.grading import draw
    return eval(f"draw(seed, {q.name!r}, {q.draw})", {"draw": draw, "seed": seed})


def test_params_by_hand_match_the_library():
    from scaling_lib import transformer
    for m in ("llama3-8b", "llama3-70b", "llama3-405b", "llama2-13b", "mixtral-8x7b"):
        assert _params(m)[0] == transformer.n_params(m), m


@pytest.mark.parametrize("level", list(drills.QUESTIONS))
def test_every_drill_key_matches_a_derivation_by_hand_at_many_seeds(level):
    numeric = [q for q in drills.QUESTIONS[level] if not q.signature]
    assert {q.name for q in numeric} <= set(BY_HAND) | NOT_BY_HAND
    for q in numeric:
        if q.name in NOT_BY_HAND:
            continue
        for seed in range(0, 400, 8):  # 50 draws each
            p = _draw(q, seed)
            want = BY_HAND[q.name](p)
            got = getattr(key, q.key)(p)
            assert got == pytest.approx(want, rel=1e-6, abs=1e-12), (q.name, seed, p)


def test_93_1_counts_every_weight_on_usable_memory():
    """Llama 3 70B in bf16 is 141.1 GB, a little more than one H200's 141 GB: 2 chips (issue 29,
    SEED 131); the bytes a step reads (no input embedding) would say 1."""
    from scaling_lib import inference
    p = _draw(next(q for q in drills.QUESTIONS["93_interview_senior"] if q.name == "93.1"), 131)
    assert (p.model, p.accelerator) == ("llama3-70b", "h200")
    assert key.chips_for_weights(p) == 2
    assert 2 * _params("llama3-70b")[0] > hardware.get("h200").memory_capacity_bytes
    assert inference.weight_bytes_read("llama3-70b") < hardware.get("h200").memory_capacity_bytes


def test_92_5_and_93_2_include_the_all_reduces_chapter_21_teaches():
    from scaling_lib import inference
    from scaling_lib.course.keys import serving_at_scale
    p = Params({"model": "llama3-70b", "accelerator": "h100", "n": 8, "B": 128, "S": 4096})
    bound = inference.decode_step_time(p.model, p.B, p.S, p.accelerator, p.n)
    assert key.decode_step(p) > 1.05 * bound  # the all-reduces are a visible part
    assert key.decode_tokens_per_s(p) == pytest.approx(p.B / key.decode_step(p))
    # the same step as chapter 21's exercise 21.2 (tp = n, mean context P + G/2)
    q = Params({"model": "llama3-70b", "accelerator": "h100", "n": 8, "B": 128, "P": 4096, "G": 0})
    assert serving_at_scale.step_time(q) == pytest.approx(key.decode_step(p))


def test_numbers_sheet_weights_are_every_parameter():
    rows = {r["model"]: r for r in drills.model_rows(["llama3-8b", "llama3-70b", "llama3-405b"])}
    assert [rows[m]["bf16 weights"] for m in rows] == ["16.1 GB", "141 GB", "812 GB"]
    assert rows["llama3-8b"]["read per decode step"] == "15 GB"


def test_draw_names_say_bytes_not_bits():
    for qs in drills.QUESTIONS.values():
        for q in qs:
            assert "gbps" not in q.draw and "gbps" not in q.prompt, q.name


def test_no_stale_not_written_yet_text():
    pages = [ROOT / "book" / "instructor_guide.ipynb", ROOT / "book" / "concept_bank.ipynb",
             *sorted((ROOT / "solutions").glob("9*.ipynb"))]
    import inspect
    from scaling_lib.course.drills import design
    texts = [p.read_text() for p in pages] + [inspect.getsource(design)]
    for t in texts:
        assert "not written yet" not in t and "no step estimator" not in t


# ---- Design answers: computed by the planner and the estimators --------------------------------

def test_design_training_ranks_plans_with_the_step_model():
    d = drills.design_training(n=64, global_batch=64, T=4096, top=2)
    planner_rows = [r for r in d["rows"] if r["layout"].startswith("planner")]
    assert len(planner_rows) == 2 and planner_rows[0]["step_time"] <= planner_rows[1]["step_time"]
    assert all(r["fits"] for r in planner_rows)
    assert len(d["rows"]) == 4  # two hand-picked layouts compared beside them
    best = d["best"]
    assert best["tokens"] == pytest.approx(best["tokens_per_s"] * 30 * 86400)
    with pytest.raises(ValueError, match="world_size"):
        drills.design_training(n=64, plans=[drills.ParallelPlan(dp=8)])


def test_design_serving_answer_meets_the_target_with_all_reduces():
    d = drills.design_serving(tpot=0.050, sizes=(2, 4, 8))
    best = d["best"]
    assert best["fits"] and best["tpot"] <= 0.050
    assert all(not r["meets"] for r in d["rows"] if r["chips"] < best["chips"])
    assert best["chips"] >= d["min_for_memory"]
    alt = d["alternatives"]  # the largest size's layouts: replicas against a wider group
    assert len(alt) >= 3 and all(" pp=1 " in r["layout"] for r in alt)
    assert {r["layout"] for r in alt} >= {"tp=8 pp=1 replicas=1", "tp=4 pp=1 replicas=2"}
    assert drills.design_serving(tpot=1e-6, sizes=(8,))["best"] is None
    # issue 29: every weight plus the cache, 227 GB for 32 x 8K (not 225: the embedding counts)
    d8 = drills.design_serving(batch=32, prompt_len=8192, gen_len=1, sizes=(8,))
    want = 2 * _params("llama3-70b")[0] + _kv("llama3-70b", 32, 8193)
    assert d8["need_bytes"] == pytest.approx(want) and round(want / 1e9) == 227


def test_design_low_mfu_and_long_context():
    plan = drills.ParallelPlan(dp=2, tp=8, pp=8, zero=1, recompute="full", sequence_parallel=True)
    d = drills.design_low_mfu(n=128, global_batch=128, plan=plan)
    e = d["estimate"]
    assert e.mfu < 0.35 and e.hfu > e.mfu and d["rows"][-1]["mfu"] > e.mfu
    assert any(c["axis"] == "tp" and c["exposed"] > 0 for c in d["comms"])

def test_design_long_context_splits_the_sequence():
    lc = drills.design_long_context(n=32, global_batch=32, top=1)
    assert lc["rows"][0]["plan"].cp > 1 and lc["rows"][0]["fits"]
    assert not lc["rows"][-1]["fits"]  # one whole 128K sequence per GPU does not fit


def test_design_gpt4_compares_chips_precisions_layouts():
    d = drills.design_gpt4_serving()
    assert {(r["chip"], r["dtype"]) for r in d["rows"]} == {
        ("a100-80gb", "bf16"), ("a100-80gb", "int8"), ("h100", "bf16"), ("h100", "fp8")}
    tp8 = {(r["chip"], r["dtype"]): r["tpot"] for r in d["rows"] if r["layout"].startswith("tp=8")}
    assert tp8[("h100", "fp8")] < tp8[("h100", "bf16")] < tp8[("a100-80gb", "bf16")]
    assert d["floors"][("h100", "fp8")] < d["floors"][("h100", "bf16")]


# ---- The concept bank and the mock interview ----------------------------------------------------

def test_concept_bank_covers_the_interview_topics_at_three_depths():
    from scaling_lib.course.drills import concept_bank as cb
    bank = cb.bank()
    assert len(bank) >= 30 and len({c.key for c in bank}) == len(bank)
    for c in bank:
        assert c.topic in cb.TOPICS and c.question.endswith(("?", "."))
        assert len(c.answers) == 3 and all(len(a) > 40 for a in c.answers)
        assert c.passing and c.strong and c.follow_ups and c.level in (1, 2, 3)
    keys = {c.key for c in bank}
    for needed in ("parallelism", "context_parallelism", "expert_parallelism", "step_memory",
                   "zero_stages", "recompute", "mfu_at_scale", "networks", "collectives",
                   "kv_sizing", "batching", "paged_attention", "speculative", "quantisation",
                   "disaggregation", "moe_routing", "long_context", "failures", "sync_sgd",
                   "slow_run", "diverging_run"):
        assert needed in keys, needed
    assert sum(c.level == 3 for c in bank) >= 5
    flags = " ".join(f for c in bank for f in c.red_flags)
    for e in cb.errata():
        assert e["claim"] in flags, e["claim"]
        assert e["drill"] in key.WRONG_METHODS_ALL and e["claim"] in key.WRONG_METHODS_ALL[e["drill"]]


def test_concept_page_markdown_is_balanced():
    from scaling_lib.course.drills import concept_bank as cb
    md = cb.page_markdown()
    opens = md.count(":::{admonition}")
    assert opens == 2 * len(cb.bank())
    assert md.count("\n:::\n") == opens


def test_concepts_view_and_reveal():
    table = drills.concepts()
    assert {"parallelism", "nvlink", "sync_sgd", "dp_bottleneck", "frontier_time"} <= set(table)
    shown = drills.reveal("nvlink").data
    assert shown.startswith("<details>") and "Depth 3" in shown and "Red flags" in shown
    with pytest.raises(ValueError, match="valid choices"):
        drills.reveal("nope")


def test_mock_flow_is_45_minutes_and_every_ref_resolves():
    from scaling_lib.course.drills import concept_bank as cb
    from scaling_lib.course.drills import mock
    names = {q.name for qs in drills.QUESTIONS.values() for q in qs}
    for level, sections in mock.FLOW.items():
        assert sum(s.minutes for s in sections) == mock.MOCK_MINUTES == 45
        for s in sections:
            for it in s.items:
                for label, _ in it.if_mistake:  # each names a listed mistake of its drill
                    assert label in key.WRONG_METHODS_ALL[it.ref], (it.ref, label)
                for ref in (it.ref, it.if_pass, it.if_fail, *(r for _, r in it.if_mistake)):
                    if ref.startswith("concept:"):
                        assert ref[8:] in cb.by_key()
                    elif ref.startswith("design:"):
                        assert ref[7:] in mock.DESIGNS
                    elif ref[:2].isdigit():
                        assert ref in names, ref
        assert mock.flow_markdown(level).count("min).") == len(sections)
    assert mock.follow_up(3, "93.2", True) == "concept:tp_decode"
    with pytest.raises(ValueError, match="valid choices"):
        mock.follow_up(3, "91.1", True)


def test_score_sheet_filled_from_the_grader_json():
    from scaling_lib.course.drills import mock
    records = [{"notebook": "alice/93_interview_senior.ipynb",
                "exercises": {"93.1": "pass", "93.2": "fail", "93.9": "pass"}},
               {"notebook": "alice/90_numbers.ipynb",
                "exercises": {"90.12": "pass", "90.13": "pass", "90.14": "fail"}},
               {"notebook": "bob/90_numbers.ipynb", "exercises": {"90.13": "fail"}}]
    grades = mock.exercises_from_grades(records, "alice")
    assert grades["90.13"] == "pass"
    scores = {"concept:tp_decode": 3, "concept:diverging_run": 2, "design:training": 2}
    rows = mock.score_sheet(3, grades, scores)
    assert [r["points"] for r in rows if r["kind"] == "numeric"] == [1, 0, 1, 1, 0, 1]
    v = mock.verdict(rows)
    assert v["result"] == "pass" and v["numeric share"] == pytest.approx(4 / 6)
    assert mock.verdict(mock.score_sheet(3, grades, {**scores, "design:training": 1}))[
        "result"] == "no pass"
    with pytest.raises(ValueError, match="0, 1, 2 or 3"):
        mock.score_sheet(3, grades, {"concept:tp_decode": 5})


def test_score_sheet_command_reads_the_grader_json(tmp_path, capsys):
    import json
    from scaling_lib.course.drills import mock
    path = tmp_path / "grades.json"
    path.write_text(json.dumps([{"notebook": "alice_93_interview_senior.ipynb",
                                 "exercises": {"93.1": "pass", "93.2": "pass", "93.9": "fail"}},
                                {"notebook": "alice_90_numbers.ipynb",
                                 "exercises": {"90.12": "pass", "90.13": "pass",
                                               "90.14": "pass"}}]))
    args = [str(path), "--student", "alice", "--level", "3", "--score", "concept:tp_decode=3",
            "--score", "concept:diverging_run=2", "--score", "design:training=2"]
    assert mock.main(args) == 0
    out = capsys.readouterr().out
    assert "| 93.9 | numeric | 0 | 1 | grader |" in out and out.strip().endswith(
        "design 2.") and "**Pass**" in out
    assert mock.main([str(path), "--student", "alice", "--level", "3"]) == 0
    assert "**Incomplete**" in capsys.readouterr().out
    assert mock.main(args[:-1] + ["design:training=x"]) == 2
    assert "must be REF=N" in capsys.readouterr().err
