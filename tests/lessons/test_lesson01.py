"""lesson01 beyond the generic tests: correct alternatives pass, forbidden APIs and in-place edits are
named, wrong return types fail cleanly."""

from __future__ import annotations

import pytest

from graders.registry import find_lesson
from harness import check_one, explain, with_code

pytestmark = pytest.mark.lesson01
L01 = find_lesson("lesson01")

# In at least float32 (as torch's own softmax computes a bfloat16 input): in bfloat16 the log-sum-exp of a row
# whose largest entries tie at ±1e4 rounds back to the max, and the row sums to 2 (the domain draws such rows).
SOFTMAX_LOGSUMEXP = '''
def softmax(x, dim=-1):
    xf = x.to(torch.promote_types(x.dtype, torch.float32))
    return torch.exp(xf - torch.logsumexp(xf, dim=dim, keepdim=True)).to(x.dtype)
'''

SDPA_EINSUM = '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = torch.einsum("...qd,...kd->...qk", q, k) * q.shape[-1] ** -0.5
    if mask is not None:
        scores = torch.where(mask, scores, torch.tensor(float("-inf")))
    w = softmax(scores)
    return torch.einsum("...qk,...kd->...qd", w, v), w
'''


@pytest.mark.softmax
def test_softmax_through_logsumexp_is_accepted(tmp_path):
    ex = check_one(L01, with_code(L01, "softmax", SOFTMAX_LOGSUMEXP, tmp_path), "softmax")
    assert ex.status == "passed", explain(ex)


@pytest.mark.scaled_dot_product_attention
def test_attention_through_einsum_is_accepted(tmp_path):
    ex = check_one(L01, with_code(L01, "scaled_dot_product_attention", SDPA_EINSUM, tmp_path),
                   "scaled_dot_product_attention")
    assert ex.status == "passed", explain(ex)


@pytest.mark.softmax
@pytest.mark.parametrize("call", ["torch.softmax(x, dim)", "x.softmax(dim)", "F.softmax(x, dim=dim)",
                                  "torch.log_softmax(x, dim).exp()"])
def test_forbidden_softmax_is_its_own_failure(tmp_path, call):
    code = f"def softmax(x, dim=-1):\n    return {call}\n"
    ex = check_one(L01, with_code(L01, "softmax", code, tmp_path), "softmax")
    assert ex.status == "failed", explain(ex)
    forbidden = [c for c in ex.checks if c.name == "uses no forbidden API"]
    assert forbidden[0].status == "failed" and "softmax" in forbidden[0].message
    assert all(c.status in ("passed", "skipped") for c in ex.checks if c.name != "uses no forbidden API")


@pytest.mark.scaled_dot_product_attention
def test_forbidden_sdpa_is_named(tmp_path):
    code = ("def scaled_dot_product_attention(q, k, v, mask=None):\n"
            "    w = softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]))\n"
            "    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask), w\n")
    ex = check_one(L01, with_code(L01, "scaled_dot_product_attention", code, tmp_path), "scaled_dot_product_attention")
    assert ex.status == "failed"
    assert any(c.name == "uses no forbidden API" and "scaled_dot_product_attention" in c.message for c in ex.checks)


@pytest.mark.softmax
def test_in_place_modification_is_reported(tmp_path):
    code = ("def softmax(x, dim=-1):\n"
            "    x.sub_(x.amax(dim=dim, keepdim=True)) if not x.requires_grad else None\n"
            "    e = (x - x.amax(dim=dim, keepdim=True)).exp()\n"
            "    return e / e.sum(dim=dim, keepdim=True)\n")
    ex = check_one(L01, with_code(L01, "softmax", code, tmp_path), "softmax")
    assert ex.status == "failed"
    check = next(c for c in ex.checks if c.name == "leaves its inputs unchanged")
    assert check.status == "failed" and "in place" in check.message


@pytest.mark.scaled_dot_product_attention
def test_returning_only_the_output_fails_with_a_clear_message(tmp_path):
    code = ("def scaled_dot_product_attention(q, k, v, mask=None):\n"
            "    return softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])) @ v\n")
    ex = check_one(L01, with_code(L01, "scaled_dot_product_attention", code, tmp_path), "scaled_dot_product_attention")
    assert ex.status == "failed"
    assert "should return a pair (output, weights)" in ex.reason


@pytest.mark.softmax
def test_a_wrong_answer_names_shape_and_error_and_tolerance(tmp_path):
    code = "def softmax(x, dim=-1):\n    e = x.exp()\n    return e / (e.sum(dim=dim, keepdim=True) + 0.01)\n"
    ex = check_one(L01, with_code(L01, "softmax", code, tmp_path), "softmax")
    msg = next(c.message for c in ex.checks if c.status == "failed")
    assert "max abs error" in msg and "index" in msg and "atol=" in msg and "float32" in msg
