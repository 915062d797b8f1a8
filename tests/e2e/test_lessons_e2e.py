"""test_lessons, end to end: the tests of tests/lessons/test_lessons.py that start a child (the slow tier)."""

from __future__ import annotations

import importlib
import json
import pytest
from conftest import marks
from course_cli.instructor.build import student_notebook
from course_cli.sandboxed.grading import grade_notebook
from graders.engine.notebook import defines, defining_cell, source_of
from graders.registry import LESSONS, ROOT
from harness import (explain, grade_one, judge_in_process, mistake_observations, mistakes_of, reference,
                     run_in_process, with_mistake)
from test_lessons import LESSON_CASES, MISTAKE_CASES  # noqa: F401 (helpers and fixtures shared with the fast tests)


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSON_CASES)
def test_solution_passes_every_exercise(lesson, sandbox_matrix):
    result = sandbox_matrix.cold(lesson, lesson.solution_path)  # a cold child, once per session (test_warm_e2e)
    for ex in result.exercises:
        assert ex.status == "passed", explain(ex)
        assert ex.points == ex.max_points
    assert result.score == lesson.max_score


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSON_CASES)
def test_student_notebook_is_not_implemented(lesson, sandbox_matrix):
    result = sandbox_matrix.cold(lesson, lesson.student_path)  # a cold child, once per session (test_warm_e2e)
    assert [e.id for e in result.exercises] == [e.name for e in lesson.exercises]
    for ex in result.exercises:
        assert ex.status == "not_implemented", explain(ex)
        assert ex.points == 0
    assert not result.notes, result.notes  # the stub notebook runs without errors


@pytest.mark.slow
@pytest.mark.parametrize("lesson, mistake", MISTAKE_CASES)
def test_known_mistake_is_rejected_and_named(lesson, mistake, sandbox_matrix):
    """In the sandbox: the lesson's catalogue is graded once per session through one sandbox start (a warm
    zygote forks a check per mistake: tests/harness.py grade_mistakes_in_the_sandbox), not a cold child each."""
    ex = sandbox_matrix.mistake(lesson, mistake)
    assert ex.status in ("failed", "error"), explain(ex)
    assert ex.points == 0
    assert ex.diagnosis == mistake.message, explain(ex)


@pytest.mark.parametrize("lesson", [pytest.param(l, marks=marks(l), id=l.id) for l in LESSONS])
def test_registry_matches_the_files(lesson):
    assert lesson.solution_path.exists() and lesson.student_path.exists()
    module = importlib.import_module(lesson.module)
    names = [e.name for e in lesson.exercises]
    for ex in lesson.exercises:
        assert len(ex.hints) >= 2, f"{ex.name} needs at least two hints"
        assert module.CHECKS.of(ex.name), f"{ex.name} has no checks"
        assert ex.points > 0
    assert {c.exercise for c in module.CHECKS} <= set(names)
    for m in module.MISTAKES:
        assert m.exercise in names, m
    assert len({m.id for m in module.MISTAKES}) == len(module.MISTAKES)
    for name in getattr(module, "FORBIDDEN", {}):
        assert name in names
    source = lesson.solution_path.read_text()
    cells = json.loads(source)["cells"]
    for name in names:
        # a solution cell defines it; its grade id is this exercise's, or that of the exercise it shares its step with
        cell = defining_cell(cells, name)
        assert cell is not None, f"no cell defines {name}"
        nbg = cell.get("metadata", {}).get("nbgrader", {})
        assert nbg.get("solution"), f"{name} is not defined in a solution cell"
        assert nbg.get("grade_id") in {n for n in names if defines(source_of(cell), n)}, (name, nbg.get("grade_id"))
        assert f'"grade_id": "test_{name}"' in source, f"no test cell with grade_id test_{name}"


@pytest.mark.parametrize("lesson", LESSON_CASES)
def test_nbgrader_points_of_every_check_cell_equal_the_registry(lesson):
    import json

    nb = json.loads(lesson.solution_path.read_text())
    points = {c["metadata"]["nbgrader"]["grade_id"]: c["metadata"]["nbgrader"].get("points")
              for c in nb["cells"] if c.get("metadata", {}).get("nbgrader", {}).get("grade")}
    assert points == {f"test_{e.name}": e.points for e in lesson.exercises}
    student = json.loads(lesson.student_path.read_text())
    assert sum(c["metadata"]["nbgrader"].get("points", 0) for c in student["cells"]
               if c.get("metadata", {}).get("nbgrader", {}).get("grade")) == lesson.max_score
