"""Attacks on the forbidden-API and memory checks by switching the grader's recorders off (issue 28, item 6).

Each attack is a notebook whose exercise calls what it must not, hidden from the torch-function recorder
(`torch._C.DisableTorchFunction()`), past it (`torch.ops.aten._softmax`), or from every Python mode
(`torch.utils._python_dispatch._disable_current_modes()`, around a full Tq×Tk attention). Each is graded
as a notebook (cells, probes, verdict rules) and must fail "uses no forbidden API". Every attack comes
twice: naming the switch (caught by the parent reading the source, which the student's code cannot reach),
and reaching it through getattr on concatenated strings (caught in the child: the aten-level recorder,
and the switches wired while the student's code runs)."""

from __future__ import annotations

import pytest

from graders.engine.checks import switch_offs
from graders.registry import find_lesson
from harness import check_one, explain, with_code

L01, L09 = find_lesson("lesson01"), find_lesson("lesson09")

SOFTMAX_DISABLED = '''
def softmax(x, dim=-1):
    with torch._C.DisableTorchFunction():
        return torch.softmax(x, dim)
'''
SOFTMAX_DISABLED_HIDDEN = '''
def softmax(x, dim=-1):
    with getattr(torch._C, "Disable" + "TorchFunction")():
        return torch.softmax(x, dim)
'''
SOFTMAX_ATEN = '''
def softmax(x, dim=-1):
    return torch.ops.aten._softmax(x, dim, False)
'''
SOFTMAX_ATEN_HIDDEN = '''
def softmax(x, dim=-1):
    return getattr(getattr(torch.ops, "at" + "en"), "_soft" + "max")(x, dim, False)
'''
_FULL = '''
        scale = q.shape[-1] ** -0.5
        s = (q.float() @ k.float().transpose(-2, -1)) * scale  # (B, H, Tq, Tk): the whole matrix
        if causal:
            Tq, Tk = q.shape[-2], k.shape[-2]
            keep = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(Tk - Tq)
            s = s.masked_fill(~keep, float("-inf"))
        lse = torch.logsumexp(s, dim=-1)
        p = torch.exp(s - lse[..., None]).nan_to_num(0.0)
        out = (p @ v.float()).to(q.dtype)
    return out, lse
'''
FLASH_MODES_OFF = '''
def flash_attention(q, k, v, causal=False, block_q=64, block_k=64):
    from torch.utils._python_dispatch import _disable_current_modes
    with _disable_current_modes():''' + _FULL
FLASH_MODES_OFF_HIDDEN = '''
def flash_attention(q, k, v, causal=False, block_q=64, block_k=64):
    import importlib
    dispatch = importlib.import_module("torch.utils._python_" + "dispatch")
    with getattr(dispatch, "_disable_" + "current_modes")():''' + _FULL

ATTACKS = [
    pytest.param(L01, "softmax", SOFTMAX_DISABLED, id="softmax-DisableTorchFunction"),
    pytest.param(L01, "softmax", SOFTMAX_DISABLED_HIDDEN, id="softmax-DisableTorchFunction-getattr"),
    pytest.param(L01, "softmax", SOFTMAX_ATEN, id="softmax-ops.aten"),
    pytest.param(L01, "softmax", SOFTMAX_ATEN_HIDDEN, id="softmax-ops.aten-getattr"),
    pytest.param(L09, "flash_attention", FLASH_MODES_OFF, id="flash-_disable_current_modes",
                 marks=pytest.mark.lesson09),
    pytest.param(L09, "flash_attention", FLASH_MODES_OFF_HIDDEN, id="flash-_disable_current_modes-getattr",
                 marks=pytest.mark.lesson09),
]


@pytest.mark.parametrize("lesson, exercise, code", ATTACKS)
def test_switching_the_recorder_off_fails_the_forbidden_check(lesson, exercise, code, tmp_path):
    ex = check_one(lesson, with_code(lesson, exercise, code, tmp_path), exercise)
    assert ex.status == "failed", explain(ex)
    assert ex.points == 0
    forbidden = next(c for c in ex.checks if c.name == "uses no forbidden API")
    assert forbidden.status == "failed", explain(ex)


def test_the_hidden_attacks_are_not_caught_by_the_source_scan_alone():
    """The getattr variants name no switch: what fails them is the child's runtime recording."""
    for code in (SOFTMAX_DISABLED_HIDDEN, SOFTMAX_ATEN_HIDDEN, FLASH_MODES_OFF_HIDDEN):
        assert switch_offs(code) == []
    for code in (SOFTMAX_DISABLED, SOFTMAX_ATEN, FLASH_MODES_OFF):
        assert switch_offs(code)


PRINTING_SOFTMAX = '''
def softmax(x, dim=-1):
    # a comment may say DisableTorchFunction without calling it
    shifted = x - x.amax(dim=dim, keepdim=True)
    e = shifted.exp()
    print(e[..., :1].flatten()[:2])  # printing a tensor runs torch's own _disable_current_modes
    return e / e.sum(dim=dim, keepdim=True)
'''


def test_honest_code_that_prints_a_tensor_is_not_flagged(tmp_path):
    ex = check_one(L01, with_code(L01, "softmax", PRINTING_SOFTMAX, tmp_path), "softmax")
    assert ex.status == "passed", explain(ex)
