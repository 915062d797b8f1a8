"""The two reference bugs of issue 28, pinned: `online_logsumexp` gave NaN for a row whose first block is
all -inf, and `filter_logits(top_p=1.0)` dropped tokens. The reference's own code is checked against
torch on those inputs (so a regression of the solved notebook fails here), and the public checks that
catch the old code are shown to catch it (it is kept as a catalogued mistake, the one-line edit back)."""

from __future__ import annotations

import importlib

import pytest
import torch

from graders.registry import find_lesson
from harness import judge_in_process, mistake_observations, reference

L09, L10 = find_lesson("lesson09"), find_lesson("lesson10")


def _failed_checks(lesson, mistake_id):
    module = importlib.import_module(lesson.module)
    mistake = next(m for m in module.MISTAKES if m.id == mistake_id)
    res = judge_in_process(lesson, mistake.exercise, mistake_observations(lesson, mistake))
    return res, {c.name for c in res.checks if c.status != "passed"}, module


@pytest.mark.lesson09
def test_reference_logsumexp_is_finite_after_a_masked_first_block():
    ns, _ = reference(L09)
    x = torch.randn(4, 24, dtype=torch.float64)
    x[0, :8] = float("-inf")
    x[1, :16] = float("-inf")
    x[3] = float("-inf")
    for block in (8, 5, 1, 24):
        got = ns["online_logsumexp"](x, block)
        assert not torch.isnan(got).any(), (block, got)
        torch.testing.assert_close(got, torch.logsumexp(x, dim=-1))


@pytest.mark.lesson09
def test_the_old_logsumexp_fails_the_public_masked_check_and_is_named():
    res, failed, module = _failed_checks(L09, "lse_nan_after_masked_block")
    check = next(c for c in module.CHECKS if c.name.startswith("rows whose first blocks are all -inf"))
    assert not check.hidden  # a student sees it fail before submitting
    assert check.name in failed
    assert res.diagnosis and "NaN" in res.diagnosis


@pytest.mark.lesson10
def test_reference_top_p_one_keeps_every_token():
    ns, _ = reference(L10)
    logits = torch.tensor([[20.0, 0.0, -1.0]])
    assert torch.equal(ns["filter_logits"](logits, top_p=1.0), logits)
    wide = torch.randn(3, 1000) * 8
    assert torch.isfinite(ns["filter_logits"](wide, top_p=1.0)).all()
    # just under 1: the crossing token is still kept, nothing else changes
    kept = ns["filter_logits"](logits, top_p=0.5) > float("-inf")
    assert kept.tolist() == [[True, False, False]]


@pytest.mark.lesson10
def test_the_old_top_p_fails_the_public_top_p_one_check_and_is_named():
    res, failed, module = _failed_checks(L10, "top_p_one_drops_tokens")
    check = next(c for c in module.CHECKS if c.name.startswith("top_p=1.0 keeps every token"))
    assert not check.hidden
    assert check.name in failed
    assert res.diagnosis and "top_p=1.0" in res.diagnosis
