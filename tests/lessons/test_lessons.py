"""What every lesson in the registry must satisfy (rustlings' `dev check`, for this course):
the solved notebook passes, the untouched student notebook is not_implemented throughout, every known
mistake is rejected and named, the student notebook is derived from the solution, and the registry
matches the files on disk.

The fast tier probes and judges the course's own (trusted) code in this process (tests/harness.py);
the same properties through the sandboxed child, end to end, are the `slow` tests below."""

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

LESSON_CASES = [pytest.param(l, marks=marks(l), id=l.id) for l in LESSONS]


@pytest.mark.parametrize("lesson", LESSON_CASES)
def test_solution_passes_in_process(lesson):
    _, ref = reference(lesson)
    for ex in lesson.exercises:
        res = judge_in_process(lesson, ex.name, ref[ex.name])
        assert res.status == "passed", explain(res)
        assert res.points == res.max_points


@pytest.mark.parametrize("lesson", LESSON_CASES)
def test_student_stub_is_not_implemented_in_process(lesson):
    from graders.engine import probe_exercise

    from harness import _configs

    module = importlib.import_module(lesson.module)
    ns, reports = run_in_process(lesson, lesson.student_path)
    assert all(r["status"] == "ok" for r in reports), reports  # the stub notebook runs without errors
    for ex in lesson.exercises:
        res = judge_in_process(lesson, ex.name, probe_exercise(module, ns, ex.name, _configs(module)))
        assert res.status == "not_implemented", explain(res)
        assert res.points == 0


@pytest.mark.parametrize("lesson, mistake", [pytest.param(l, m, marks=marks(l, m.exercise), id=f"{l.id}-{m.id}")
                                             for l in LESSONS for m in mistakes_of(l)])
def test_known_mistake_is_rejected_and_named_in_process(lesson, mistake):
    res = judge_in_process(lesson, mistake.exercise, mistake_observations(lesson, mistake))
    assert res.status in ("failed", "error"), explain(res)
    assert res.points == 0
    assert res.diagnosis == mistake.message, explain(res)


# ----------------------------------------------------------------------------------------------
# End to end, through the sandboxed child and the reference cache (the slow tier)


MISTAKE_CASES = [pytest.param(l, m, marks=marks(l, m.exercise), id=f"{l.id}-{m.id}")
                 for l in LESSONS for m in mistakes_of(l)]


@pytest.mark.parametrize("lesson", [pytest.param(l, marks=marks(l), id=l.id) for l in LESSONS])
def test_student_notebook_is_derived_from_the_solution(lesson):
    text = lesson.student_path.read_text()
    assert text == student_notebook(lesson), f"{lesson.student_path} drifted: run `course build`"
    assert "### BEGIN SOLUTION" not in text and "### BEGIN HIDDEN TESTS" not in text
    assert '"output_type"' not in text


def test_no_orphan_notebooks_or_graders():
    known = {l.notebook for l in LESSONS}
    assert {p.name for p in (ROOT / "solutions").glob("*.ipynb")} == known
    assert {p.name for p in (ROOT / "lessons").glob("*.ipynb")} == known
    graders = {p.stem for p in (ROOT / "graders").glob("lesson*.py")}
    assert graders == {l.module.split(".")[1] for l in LESSONS}
