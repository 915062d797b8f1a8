"""Lesson 03's dropout checks say "in eval mode dropout must do nothing" only when that premise holds on the
check's own inputs (issue 44: a check's hint is a claim about the student's code). Each check builds the module
with dropout=0.5 and compares its eval-mode output; it also builds it with dropout=0.0. A module whose forward is
wrong whatever the dropout (q, k, v interleaved per head, no output projection, ...) fails the eval-mode comparison
too, and used to be told to look at its dropout: now it is told the difference is not dropout's. A module that
applies dropout in eval mode is still told to switch it off. Graded in process (tests/harness.py), as the
reference child grades."""

from __future__ import annotations

import pytest

from graders.engine import solved_cell
from graders.registry import find_lesson
from harness import check_one, mistakes_of, with_code, with_mistake

L03 = find_lesson("lesson03")
HINT = "in eval mode dropout must do nothing"
NOT_DROPOUT = "the difference is not dropout's"
# the solution with its dropout applied whatever the mode: the premise of the hint holds
DROPOUT_IN_EVAL = {
    "MultiHeadAttention": ("training=self.training", "training=True"),
    "CausalSelfAttention": ("dropout_p=self.dropout if self.training else 0.0", "dropout_p=self.dropout"),
}


def _dropout_check(ex):
    (c,) = [c for c in ex.checks if c.name.startswith("dropout") and c.name.endswith("training mode only")]
    return c


@pytest.mark.parametrize("exercise", sorted(DROPOUT_IN_EVAL))
def test_dropout_in_eval_mode_is_told_to_switch_it_off(exercise, tmp_path):
    src = solved_cell(L03.id, exercise)
    assert src.count(DROPOUT_IN_EVAL[exercise][0]) == 1
    ex = check_one(L03, with_code(L03, exercise, src.replace(*DROPOUT_IN_EVAL[exercise]), tmp_path), exercise)
    c = _dropout_check(ex)
    assert c.status == "failed" and HINT in c.message and NOT_DROPOUT not in c.message, c.message


@pytest.mark.parametrize("mistake", ["qkv_interleaved", "never_causal", "no_out_proj", "scale_by_sqrt_d_model"])
def test_a_forward_wrong_without_dropout_is_not_sent_to_its_dropout(mistake, tmp_path):
    m = next(m for m in mistakes_of(L03) if m.id == mistake)
    ex = check_one(L03, with_mistake(L03, m, tmp_path), m.exercise)
    c = _dropout_check(ex)
    assert c.status == "failed" and NOT_DROPOUT in c.message and HINT not in c.message, c.message
