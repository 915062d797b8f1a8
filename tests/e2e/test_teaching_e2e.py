"""test_teaching, end to end: the tests of tests/lessons/test_teaching.py that start a child (the slow tier)."""

from __future__ import annotations

import json
import re
import pytest
from conftest import marks
from graders.registry import LESSONS
from test_teaching import CASES, KNOWN_ANSWERS, SHARED, _alone, _cells, _is_text, _squash, _stub_all_but, leaks, reference_lines, steps  # noqa: F401 (helpers and fixtures shared with the fast tests)


@pytest.mark.parametrize("lesson", CASES)
def test_no_reference_line_in_the_teaching_text(lesson):
    found = leaks(lesson)
    assert not found, "the lesson's text gives away its exercises' code:\n" + "\n".join(found)


def test_every_exercise_has_reference_lines_to_compare():
    """The comparison is not vacuous: every solution cell of lessons 01-09 yields lines to look for."""
    for lesson in LESSONS:
        if lesson.number > 9:
            continue
        for cell in _cells(lesson.solution_path):
            nbg = cell.get("metadata", {}).get("nbgrader", {})
            if nbg.get("solution") and cell["cell_type"] == "code":
                assert reference_lines("".join(cell["source"])), (lesson.id, nbg.get("grade_id"))


@pytest.mark.parametrize("lesson_id, fragment", KNOWN_ANSWERS)
def test_known_answer_stays_out_of_the_text(lesson_id, fragment):
    lesson = next(l for l in LESSONS if l.id == lesson_id)
    texts = [_squash("".join(c["source"])) for c in _cells(lesson.student_path) if _is_text(c)]
    texts += [_squash("".join(c["source"])) for c in _cells(lesson.student_path)
              if c.get("metadata", {}).get("nbgrader", {}).get("solution")]  # the stub's own comments too
    assert not any(_squash(fragment) in t for t in texts), fragment


def test_triton_stub_has_a_skeleton_and_no_body():
    lesson = next(l for l in LESSONS if l.id == "lesson09")
    stub = next("".join(c["source"]) for c in _cells(lesson.student_path)
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "flash_attention_triton")
    kernel = stub.split("def flash_attention_triton(")[0]
    for skeleton in ("tl.program_id(0)", "tl.program_id(1)", "rows = first + tl.arange(0, BLOCK_M)", "for start in range("):
        assert skeleton in kernel, skeleton
    assert "tl.dot" not in kernel  # the body is the student's
    assert kernel.count("raise NotImplementedError()") == 1


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
