"""test_teaching, end to end: the tests of tests/lessons/test_teaching.py that start a child (the slow tier)."""

from __future__ import annotations

import pytest

from test_teaching import SHARED, _alone, _stub_all_but, steps  # noqa: F401 (helpers and fixtures shared with the fast tests)


@pytest.mark.slow
@pytest.mark.parametrize("lesson, names", SHARED)
def test_a_shared_step_end_to_end(lesson, names, tmp_path):
    """The same, through the sandboxed child: `course check --notebook`."""
    from course_cli.sandboxed.grading import grade_notebook
    from harness import explain, with_code

    (cell, _), = [(c, n) for c, n in steps(lesson) if n == names]
    keep = [n for n in names if _alone(lesson, n, names)][-1]
    path = with_code(lesson, keep, _stub_all_but(lesson, cell["source"], keep), tmp_path)
    result = grade_notebook(lesson, path, names)
    assert {ex.id: ex.status for ex in result.exercises} == {n: "passed" if n == keep else "not_implemented"
                                                              for n in names}, "\n".join(explain(e) for e in result.exercises)
