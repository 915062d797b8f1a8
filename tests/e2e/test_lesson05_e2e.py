"""test_lesson05, end to end: the tests of tests/lessons/test_lesson05.py that start a child (the slow tier)."""

from __future__ import annotations

import pytest
from graders.registry import find_lesson
from harness import check_in_process, check_one, explain, with_code
pytestmark = pytest.mark.lesson05
from test_lesson05 import DECOY_KERNEL, KERNEL_LEFT_AS_STUB, LESSON, PURE_TORCH, RMSNORM_WITHOUT_HELPER, RMS_NORM_ALTERNATIVES, TRITON_ALTERNATIVE, _kernel_check  # noqa: F401 (helpers and fixtures shared with the fast tests)


def test_correct_alternatives_pass(tmp_path):
    """1/sqrt for rms_norm, an RMSNorm written inline, a different kernel: one notebook, graded once."""
    path = with_code(LESSON, "rms_norm", RMS_NORM_ALTERNATIVES["one_over_sqrt"], tmp_path, "a.ipynb")
    path = with_code(LESSON, "RMSNorm", RMSNORM_WITHOUT_HELPER, tmp_path, "b.ipynb", base=path)
    path = with_code(LESSON, "rms_norm_triton", TRITON_ALTERNATIVE, tmp_path, "c.ipynb", base=path)
    result = check_in_process(LESSON, path)
    for ex in result.exercises:
        assert ex.status == "passed", explain(ex)


@pytest.mark.rms_norm_triton
def test_pure_torch_is_rejected_with_a_clear_message(tmp_path):
    ex = check_one(LESSON, with_code(LESSON, "rms_norm_triton", PURE_TORCH, tmp_path), "rms_norm_triton")
    assert ex.status == "failed" and ex.points == 0, explain(ex)
    check = _kernel_check(ex)
    assert check.status == "failed" and "no Triton kernel ran" in check.message, explain(ex)
    # every other value check passes: only the missing kernel fails it
    assert all(c.status in ("passed", "skipped") for c in ex.checks if c is not check), explain(ex)


@pytest.mark.rms_norm_triton
def test_a_decoy_kernel_does_not_count(tmp_path):
    ex = check_one(LESSON, with_code(LESSON, "rms_norm_triton", DECOY_KERNEL, tmp_path), "rms_norm_triton")
    assert ex.status == "failed", explain(ex)
    check = _kernel_check(ex)
    assert check.status == "failed" and "not one that was passed to it" in check.message, explain(ex)


@pytest.mark.rms_norm_triton
def test_a_kernel_still_raising_is_not_implemented(tmp_path):
    """The interpreter wraps the kernel's NotImplementedError; it still reads as not implemented."""
    path = with_code(LESSON, "rms_norm_triton", KERNEL_LEFT_AS_STUB, tmp_path)
    ex = check_one(LESSON, path, "rms_norm_triton")
    assert ex.status == "not_implemented", explain(ex)
