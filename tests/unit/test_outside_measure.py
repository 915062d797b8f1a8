"""The outside measure's library (benchmarks/outside_cases.py) and its judge (benchmarks/outside_measure.py): every
case is an edit that applies to the solved cell as written, the oracles pass the solutions and fail the cases
(for the lessons whose cells run alone, without the grader), and the classification counts a diagnosis the way
the benchmark's docstring says."""

from __future__ import annotations

import math
import sys
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import outside_cases  # noqa: E402
import outside_measure  # noqa: E402
import outside_oracles  # noqa: E402

from graders.engine import solved_cell  # noqa: E402

CASES = outside_cases.CASES


def test_library_size_and_spread():
    per = Counter(c["lesson"] for c in CASES if not c["not_wrong"])
    assert sorted(per) == [f"lesson{i:02d}" for i in range(1, 11)]
    assert min(per.values()) >= 6 and sum(per.values()) >= 60, per
    assert len({c["id"] for c in CASES}) == len(CASES)
    for c in CASES:
        assert c["what"] and c["right"], c["id"]
        assert (c["lesson"], c["exercise"]) in outside_oracles.ORACLES, c["id"]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_each_edit_applies_once_and_changes_the_cell(case):
    src = solved_cell(case["lesson"], case["exercise"])
    out = outside_measure.edited(src, case["edits"])
    assert out != src
    compile(out, case["id"], "exec")


def test_an_edit_that_does_not_apply_is_refused():
    with pytest.raises(ValueError, match="occurs 0 times"):
        outside_measure.edited("x = 1\n", [("y = 2", "y = 3")])


# Cells that run alone (torch and math only): the oracle is run here on the solved cell and on each case.
ALONE = {("lesson01", "softmax"), ("lesson02", "causal_mask"), ("lesson02", "to_additive"),
         ("lesson02", "padding_mask"), ("lesson02", "sliding_window_mask"), ("lesson02", "masked_attention"),
         ("lesson03", "split_heads"), ("lesson03", "merge_heads"), ("lesson03", "repeat_kv"),
         ("lesson04", "layer_norm"), ("lesson04", "layer_norm_manual"), ("lesson04", "batch_norm"), ("lesson04", "group_norm"),
         ("lesson06", "sinusoidal_table"), ("lesson06", "apply_rope"), ("lesson06", "rope_inv_freq"),
         ("lesson06", "alibi_slopes"), ("lesson06", "alibi_bias"), ("lesson09", "online_logsumexp"), ("lesson09", "flash_attention"),
         ("lesson09", "attention_flops"), ("lesson09", "kv_cache_bytes"), ("lesson10", "swiglu_hidden_dim"),
         ("lesson10", "filter_logits")}


def _ns(src: str) -> dict:
    ns = {"torch": torch, "math": math, "F": torch.nn.functional, "nn": torch.nn}
    exec(compile(src, "<cell>", "exec"), ns)
    return ns


@pytest.mark.parametrize("key", sorted(ALONE), ids=lambda k: f"{k[0]}-{k[1]}")
def test_oracle_passes_the_solution_and_fails_every_case(key):
    lesson, exercise = key
    oracle = outside_oracles.ORACLES[key]
    src = solved_cell(lesson, exercise)
    if exercise == "alibi_bias":
        src = solved_cell(lesson, "alibi_slopes") + "\n" + src
    assert oracle(_ns(src)) == []
    for case in (c for c in CASES if (c["lesson"], c["exercise"]) == key):
        try:
            fails = oracle(_ns(outside_measure.edited(src, case["edits"])))
        except Exception as exc:  # noqa: BLE001 - a cell that does not run is wrong
            fails = [repr(exc)]
        assert bool(fails) != bool(case["not_wrong"]), (case["id"], fails)


def _res(status, diagnosis, messages=()):
    checks = [SimpleNamespace(name=f"check {i}", status="failed", message=m) for i, m in enumerate(messages)]
    return SimpleNamespace(status=status, diagnosis=diagnosis, checks=checks)


CASE = {"exercise": "softmax", "right": ["keepdim"], "wrong": ["constant factor"]}


def test_classify_counts_the_way_the_docstring_says():
    c = outside_measure.classify
    assert c(CASE, _res("passed", None), None)["class"] == "accepted"
    assert c(CASE, _res("failed", None), None)["class"] == "facts"
    assert c(CASE, _res("failed", "the sum drops keepdim=True"), None)["class"] == "right"
    # a wrong phrase is never counted by phrase: a human reads it
    got = c(CASE, _res("failed", "a constant factor: the scale"), None)
    assert got["class"] == "unjudged" and "wrong phrase" in got["by"]
    # a structural fact (kinds.py says fact) is facts, unless it carries a wrong phrase
    fact = "your rows (the last axis) sum to 2, not 1, where the reference's do"
    assert c(CASE, _res("failed", "`output`: " + fact), None)["class"] == "facts"
    # a cause that matches neither list is read by a human
    assert c(CASE, _res("failed", "the mask is inverted"), None)["class"] == "unjudged"
    # a human's judgement holds for the diagnosis that was read, and only for it
    judged = [{"diagnosis": "the mask is inverted", "verdict": "wrong", "reason": "no mask here"}]
    assert c(CASE, _res("failed", "the mask is inverted"), judged)["class"] == "wrong"
    assert c(CASE, _res("failed", "the mask is inverted twice"), judged)["class"] == "unjudged"
    # a failing check whose message holds a wrong phrase is reported
    got = c(CASE, _res("failed", None, ["yours is off by a constant factor"]), None)
    assert got["misleading_checks"] == ["check 0: yours is off by a constant factor"]


def test_judgements_name_cases_that_exist():
    ids = {c["id"] for c in CASES}
    for k, entries in outside_cases.JUDGED.items():
        assert k in ids, k
        for j in entries:
            assert j["verdict"] in ("right", "wrong", "facts") and j["reason"] and j["diagnosis"], k
