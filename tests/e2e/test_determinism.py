"""The same notebook gets the same verdicts, messages and diagnosis on every run (seeded inputs, no
dependence on timing), for a known mistake of each of lessons 01-06."""

from __future__ import annotations

import json

import pytest

from course_cli.sandboxed.grading import grade_notebook
from graders.registry import find_lesson
from harness import mistakes_of, with_mistake

LESSONS = [find_lesson(f"lesson0{i}") for i in range(1, 7)]


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS, ids=[l.id for l in LESSONS])
def test_same_notebook_same_json(lesson, tmp_path):
    mistake = mistakes_of(lesson)[0]
    path = with_mistake(lesson, mistake, tmp_path)
    first = grade_notebook(lesson, path)
    second = grade_notebook(lesson, path)
    a, b = json.dumps(first.to_dict(), sort_keys=True), json.dumps(second.to_dict(), sort_keys=True)
    assert a == b
    assert first.notes == second.notes
    assert any(e.status != "passed" for e in first.exercises)  # the mistake is caught, the same way twice
