"""Lessons 01-03 over their declared domains (issue 28, item 1): wrong code the older checks let through
fails the exercise's domain check, and the message names the simplest input that shows it.

Each case is an implementation no earlier check rejected (the old probes draw float32 on the CPU, with the
default arguments); the expected example text is derived from the domain itself (`example_text` over the
choices the test names, the rest at their defaults), never typed in by hand."""

from __future__ import annotations

import importlib

import pytest

from graders.engine.checks import CHECKS_OF, example_text
from graders.registry import find_lesson
from harness import check_one, explain, with_code

DOMAIN_CHECK = "over its declared domain (drawn examples, the simplest failure shown)"


def _expected_start(lesson, exercise: str, **choices) -> str:
    """"fails for dim=0": the message's start for the example with `choices` and the rest at default."""
    (domain,) = CHECKS_OF(importlib.import_module(lesson.module)).domains[exercise]
    defaults = {n: v[0] for n, v in domain.choices()}
    unknown = set(choices) - set(defaults)
    assert not unknown, f"{exercise}'s domain has no choice {sorted(unknown)}"
    for name, value in choices.items():
        assert value in dict(domain.choices())[name], f"{name}={value!r} is not in {exercise}'s domain"
    return f"fails for {example_text({**defaults, **choices}, defaults)}"


def _fails_only_the_domain(lesson, exercise: str, code: str, tmp_path, **simplest):
    ex = check_one(lesson, with_code(lesson, exercise, code, tmp_path), exercise)
    assert ex.status == "failed", explain(ex)
    failed = [c for c in ex.checks if c.status == "failed"]
    # the older checks passed this code: only the domain check (and its hidden twin, if any) fails
    assert {c.name.removesuffix(" (fresh inputs)") for c in failed} == {DOMAIN_CHECK}, explain(ex)
    start = _expected_start(lesson, exercise, **simplest)
    assert failed[0].message.startswith(start), (start, failed[0].message)
    return failed[0].message


# ----------------------------------------------------------------------------------------------
# lesson01

L01 = find_lesson("lesson01")

# The max is subtracted only along the last axis; other dims take the textbook formula, which overflows.
SOFTMAX_STABLE_ON_LAST_AXIS_ONLY = '''
def softmax(x, dim=-1):
    if dim in (-1, x.dim() - 1):
        x = x - x.amax(dim=-1, keepdim=True)
    e = x.exp()
    return e / e.sum(dim=dim, keepdim=True)
'''

# Masked scores filled with -1e9: exact zeros in float32, but float16 cannot hold -1e9.
SDPA_MINUS_1E9 = '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    weights = softmax(scores, dim=-1)
    return weights @ v, weights
'''

# The mask added as a float32 bias: float16 and bfloat16 scores become float32.
SDPA_FLOAT_BIAS = '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if mask is not None:
        scores = scores + (1.0 - mask.float()) * -1e9
    weights = softmax(scores, dim=-1)
    return weights @ v, weights
'''


@pytest.mark.lesson01
def test_softmax_stable_only_along_the_last_axis_fails_for_another_dim(tmp_path):
    msg = _fails_only_the_domain(L01, "softmax", SOFTMAX_STABLE_ON_LAST_AXIS_ONLY, tmp_path, dim=0)
    assert "NaN/inf" in msg and "huge" in msg


@pytest.mark.lesson01
def test_sdpa_masked_with_minus_1e9_fails_in_float16(tmp_path):
    msg = _fails_only_the_domain(L01, "scaled_dot_product_attention", SDPA_MINUS_1E9, tmp_path,
                                 **{"dtype of q, k, v": "float16"})
    assert "raised RuntimeError" in msg


@pytest.mark.lesson01
def test_sdpa_with_a_float32_bias_fails_in_float16(tmp_path):
    msg = _fails_only_the_domain(L01, "scaled_dot_product_attention", SDPA_FLOAT_BIAS, tmp_path,
                                 **{"dtype of q, k, v": "float16"})
    assert "raised RuntimeError" in msg and "Half" in msg  # float32 weights @ float16 v


# ----------------------------------------------------------------------------------------------
# lesson02

L02 = find_lesson("lesson02")

# `device` honoured only when t_k is given: the square mask is always made on the CPU.
CAUSAL_DEVICE_ON_ONE_PATH = '''
def causal_mask(t_q, t_k=None, device=None):
    if t_k is None:
        return torch.ones(t_q, t_q, dtype=torch.bool).tril()
    return torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(diagonal=t_k - t_q)
'''

# The bias made on the default device, whatever the mask's.
ADDITIVE_ON_THE_CPU = '''
def to_additive(mask, dtype=torch.float32):
    return torch.full(mask.shape, float("-inf"), dtype=dtype).masked_fill(mask, 0.0)
'''


@pytest.mark.lesson02
def test_causal_mask_ignoring_device_for_a_square_mask_fails_on_meta(tmp_path):
    msg = _fails_only_the_domain(L02, "causal_mask", CAUSAL_DEVICE_ON_ONE_PATH, tmp_path, device='"meta"')
    assert "meta device" in msg


@pytest.mark.lesson02
def test_to_additive_made_on_the_cpu_fails_for_a_mask_elsewhere(tmp_path):
    msg = _fails_only_the_domain(L02, "to_additive", ADDITIVE_ON_THE_CPU, tmp_path, **{"device of mask": "meta"})
    assert "meta" in msg  # made on the CPU, or raised mixing a CPU bias with a meta mask


# ----------------------------------------------------------------------------------------------
# lesson03

L03 = find_lesson("lesson03")


def _solution_with(lesson, exercise: str, old: str, new: str) -> str:
    """The solved definition of `exercise` with one exact edit (the escape is a small change of correct code)."""
    from harness import solution_cell_index
    import nbformat

    nb = nbformat.read(lesson.solution_path, as_version=4)
    src = nb.cells[solution_cell_index(nb, exercise)].source
    assert src.count(old) == 1, old
    return src.replace(old, new)


@pytest.mark.lesson03
def test_mha_taking_values_from_the_query_fails_when_only_key_is_given(tmp_path):
    code = _solution_with(L03, "MultiHeadAttention", "value = key if value is None else value",
                          "value = value if value is not None else query")
    _fails_only_the_domain(L03, "MultiHeadAttention", code, tmp_path, **{"key, value": "given, None"})


@pytest.mark.lesson03
def test_csa_ignoring_bias_false_fails_for_bias_false(tmp_path):
    code = _solution_with(L03, "CausalSelfAttention", "self.qkv_proj = nn.Linear(d_model, 3 * d_model, bias=bias)",
                          "self.qkv_proj = nn.Linear(d_model, 3 * d_model)")
    _fails_only_the_domain(L03, "CausalSelfAttention", code, tmp_path, bias=False)


@pytest.mark.lesson03
def test_gqa_without_biases_fails_for_bias_true(tmp_path):
    code = _solution_with(L03, "GroupedQueryAttention", "self.q_proj = nn.Linear(d_model, d_model, bias=bias)",
                          "self.q_proj = nn.Linear(d_model, d_model, bias=False)")
    msg = _fails_only_the_domain(L03, "GroupedQueryAttention", code, tmp_path, bias=True)
    assert "q_proj.bias" in msg
