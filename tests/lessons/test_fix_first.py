"""An exercise that stops on a stub it calls says "fix X first", not "not implemented" (issue 28, item 3)."""

from __future__ import annotations

import pytest

from graders.registry import find_lesson
from harness import check_in_process, with_code

pytestmark = pytest.mark.lesson03
L03 = find_lesson("lesson03")

SPLIT_STUB = '''
def split_heads(x, num_heads):
    raise NotImplementedError()


def merge_heads(x):
    B, H, T, Dh = x.shape
    return x.transpose(1, 2).reshape(B, T, H * Dh)
'''


def test_a_written_exercise_blocked_by_a_stub_says_fix_it_first(tmp_path):
    path = with_code(L03, "split_heads", SPLIT_STUB, tmp_path)
    result = check_in_process(L03, path, ["split_heads", "merge_heads", "MultiHeadAttention"])
    by = {e.id: e for e in result.exercises}
    assert by["split_heads"].status == "not_implemented"  # the stub itself
    assert by["merge_heads"].status == "passed"
    mha = by["MultiHeadAttention"]
    assert mha.status == "failed" and mha.points == 0
    assert "fix `split_heads` first" in mha.checks[0].message


def test_the_untouched_stub_notebook_stays_not_implemented():
    result = check_in_process(L03, L03.student_path)
    assert {e.status for e in result.exercises} == {"not_implemented"}
