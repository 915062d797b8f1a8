"""Lesson 06's RoPE in half precision says "compute the angles p·θ in float32" only when that premise holds on
the check's own inputs (issue 44): the same inputs in float32 give the right answer. A RoPE wrong whatever the
precision (a catalogued mistake) used to get the precision hint on its float16 and bfloat16 checks; now those say
the difference is not the precision's. A RoPE that computes its angles in x's dtype still gets the hint. Graded
in process (tests/harness.py), as the reference child grades."""

from __future__ import annotations

from graders.engine import solved_cell
from graders.registry import find_lesson
from harness import check_one, mistakes_of, with_code, with_mistake

L06 = find_lesson("lesson06")
HINT = "Compute the angles p·θ in float32"
NOT_PRECISION = "the difference is not"
# the solution with its angles and rotation in x's dtype: right in float32, inexact at large positions in half
ANGLES_IN_X_DTYPE = [("dtype=torch.float32) / D)", "dtype=x.dtype) / D)"),
                     ("positions.to(x.device, torch.float32)", "positions.to(x.device, x.dtype)"),
                     ("a, b = x[..., 0::2].float(), x[..., 1::2].float()", "a, b = x[..., 0::2], x[..., 1::2]")]


def _half_messages(ex) -> list[str]:
    """The failed messages of the value checks in half precision: a config in float16 or bfloat16, or the input
    battery's half-precision entries (their judge is the check's own)."""
    return [c.message for c in ex.checks if c.status == "failed" and c.message
            and (c.dtype in ("float16", "bfloat16") or c.name in ("float16 inputs on the CPU", "bfloat16 inputs on the CPU"))
            and ("Compute the angles" in c.message or "float32" in c.message)]


def test_angles_in_half_precision_are_told_to_compute_them_in_float32(tmp_path):
    src = solved_cell(L06.id, "apply_rope")
    for old, new in ANGLES_IN_X_DTYPE:
        assert src.count(old) == 1, old
        src = src.replace(old, new)
    ex = check_one(L06, with_code(L06, "apply_rope", src, tmp_path), "apply_rope")
    said = _half_messages(ex)
    assert said and all(HINT in m and NOT_PRECISION not in m for m in said), [c.name for c in ex.checks]


def test_a_rope_wrong_in_float32_too_is_not_sent_to_its_precision(tmp_path):
    told = 0
    for m in [m for m in mistakes_of(L06) if m.exercise == "apply_rope"]:
        ex = check_one(L06, with_mistake(L06, m, tmp_path), m.exercise)
        for msg in _half_messages(ex):
            assert HINT not in msg and NOT_PRECISION in msg, (m.id, msg)
            told += 1
    assert told, "no catalogued apply_rope mistake fails a half-precision check: this test checks nothing"
