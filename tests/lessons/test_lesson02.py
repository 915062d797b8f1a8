"""Lesson 02 beyond the generic tests: correct alternatives are accepted, wrong kinds of answer get a
clear message, and the grader stays cheap to import."""

from __future__ import annotations

import subprocess
import sys

import pytest

from graders.registry import ROOT, find_lesson
from harness import check_in_process, check_one, explain, with_code

LESSON = find_lesson("lesson02")
pytestmark = pytest.mark.lesson02

# Correct answers written differently from the reference, one per exercise, all in one notebook.
ALTERNATIVES = {
    "causal_mask": '''
def causal_mask(t_q, t_k=None, device=None):
    if t_k is None:
        t_k = t_q
    rows = torch.arange(t_q, device=device).unsqueeze(1)   # (t_q, 1)
    cols = torch.arange(t_k, device=device).unsqueeze(0)   # (1, t_k)
    return cols - rows <= t_k - t_q
''',
    "padding_mask": '''
def padding_mask(lengths, t):
    B = lengths.shape[0]
    keys = torch.arange(t, device=lengths.device).expand(B, t)
    return (keys < lengths.unsqueeze(-1)).reshape(B, 1, 1, t)
''',
    "sliding_window_mask": '''
def sliding_window_mask(t, window):
    if not window >= 1:  # the exercise asks for a ValueError (graded since issue 17)
        raise ValueError("window must be positive")
    full = torch.ones(t, t, dtype=torch.bool)
    return full.tril() & ~full.tril(diagonal=-window)
''',
    "to_additive": '''
def to_additive(mask, dtype=torch.float32):
    return torch.log(mask.to(dtype))  # log 1 = 0, log 0 = -inf
''',
    "masked_attention": '''
def masked_attention(q, k, v, mask):
    scores = torch.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5
    scores = torch.where(mask, scores, torch.full_like(scores, float("-inf")))
    m = scores.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))   # an empty row's max is -inf
    e = torch.exp(scores - m)                                     # exactly 0 at masked keys
    denom = e.sum(dim=-1, keepdim=True)
    weights = e / torch.where(denom > 0, denom, torch.ones_like(denom))
    return torch.einsum("...qk,...kd->...qd", weights, v)
''',
}


def test_correct_alternatives_are_accepted(tmp_path):
    path = None
    for name, code in ALTERNATIVES.items():
        path = with_code(LESSON, name, code, tmp_path, "alternatives.ipynb", base=path)
    result = check_in_process(LESSON, path)
    for ex in result.exercises:
        assert ex.status == "passed", explain(ex)


def test_mask_of_the_wrong_shape_or_dtype_is_explained(tmp_path):
    path = with_code(LESSON, "padding_mask", '''
def padding_mask(lengths, t):
    return torch.arange(t, device=lengths.device)[None, :] < lengths[:, None]   # (B, t): forgot the view
''', tmp_path, "pad-shape.ipynb")
    ex = check_one(LESSON, path, "padding_mask")
    assert ex.status == "failed", explain(ex)
    assert any("shape (3, 1, 1, 7)" in c.message for c in ex.checks), explain(ex)

    path = with_code(LESSON, "causal_mask", '''
def causal_mask(t_q, t_k=None, device=None):
    t_k = t_q if t_k is None else t_k
    return torch.ones(t_q, t_k, device=device).tril(diagonal=t_k - t_q)   # float, not bool
''', tmp_path, "causal-float.ipynb")
    ex = check_one(LESSON, path, "causal_mask")
    assert ex.status == "failed", explain(ex)
    assert any("a mask is a bool tensor" in c.message for c in ex.checks), explain(ex)


def test_sdpa_is_forbidden_in_masked_attention(tmp_path):
    # torch's SDPA already returns zeros for empty rows on the CPU: correct values, but not the exercise
    path = with_code(LESSON, "masked_attention", '''
def masked_attention(q, k, v, mask):
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
''', tmp_path, "sdpa.ipynb")
    ex = check_one(LESSON, path, "masked_attention")
    assert ex.status == "failed", explain(ex)
    (forbidden,) = [c for c in ex.checks if c.name == "uses no forbidden API"]
    assert forbidden.status == "failed" and "scaled_dot_product_attention" in forbidden.message


@pytest.mark.causal_mask
def test_a_mask_that_ignores_device_fails_on_the_meta_device_without_a_gpu(tmp_path):
    path = with_code(LESSON, "causal_mask", '''
def causal_mask(t_q, t_k=None, device=None):
    t_k = t_q if t_k is None else t_k
    return torch.ones(t_q, t_k, dtype=torch.bool).tril(diagonal=t_k - t_q)   # device ignored
''', tmp_path, "causal-no-device.ipynb")
    ex = check_one(LESSON, path, "causal_mask")
    failed = [c for c in ex.checks if c.status == "failed" and not c.name.endswith(" (fresh inputs)")]
    # the meta check, and the declared domain's device="meta" examples (tests/lessons/test_domains_lesson01_03.py)
    assert ex.status == "failed" and [c.name for c in failed] == [
        'device="meta": made on the device asked for, whatever it is',
        "over its declared domain (drawn examples, the simplest failure shown)"], explain(ex)
    assert all("not a tensor on the meta device" in c.message for c in failed)


def test_the_lower_right_mask_the_grader_builds_is_torchs_causal_lower_right():
    """causal_vs_torch builds causal_lower_right's mask with tril (its import costs a cold check 1.5-3 s):
    at every size it probes, and at more, the two are the same mask."""
    import warnings

    import torch
    from torch.nn.attention.bias import causal_lower_right

    from graders.lesson02_masks import LOWER_RIGHT_SIZES, lower_right

    sizes = set(LOWER_RIGHT_SIZES) | {(t_q, t_k) for t_q in range(1, 7) for t_k in range(1, 7)}
    for t_q, t_k in sorted(sizes):
        with warnings.catch_warnings():  # t_q > t_k leaves rows with no key, which torch warns about
            warnings.simplefilter("ignore")
            want = causal_lower_right(t_q, t_k)._materialize()
        assert want.dtype == torch.bool
        assert torch.equal(lower_right(t_q, t_k), want), (t_q, t_k)
