"""Issue 44 item 4, on a real grading: every check that ran records how many values it observed, and of the
failing checks that are otherwise alike the feedback leads with the one on the smaller input."""

from __future__ import annotations

import pytest

from course_cli.render import explains, failing_checks
from graders.registry import find_lesson
from harness import check_one, mistakes_of, with_mistake

L01 = find_lesson("lesson01")


@pytest.mark.lesson01
def test_checks_record_their_size_and_the_smallest_alike_failure_leads(tmp_path):
    m = next(m for m in mistakes_of(L01) if m.id == "no_max" or m.exercise == "scaled_dot_product_attention")
    ex = check_one(L01, with_mistake(L01, m, tmp_path), m.exercise)
    ran = [c for c in ex.checks if c.status in ("passed", "failed") and c.kind == "check"]
    assert ran and all(c.size > 0 for c in ran)
    rows = failing_checks(ex)
    assert len(rows) >= 2
    for a, b in zip(rows, rows[1:]):  # sizes never decrease within a run of otherwise alike failures
        if explains(a)[:4] == explains(b)[:4] and a.status == b.status:
            assert a.size <= b.size, (a.name, a.size, b.name, b.size)
