"""The same notebook gets the same verdicts, messages and diagnosis on every run (seeded inputs, no
dependence on timing or on the runner), for a known mistake of every lesson: its grading by the session's
sandbox matrix (a check forked by a warm zygote: tests/harness.py SandboxMatrix, shared with
tests/e2e/test_lessons_e2e.py) and a fresh cold child's, in another process, give the same JSON. So the
matrix's warm gradings of every catalogued mistake stand for the cold ones (warm = cold)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from course_cli.sandboxed.grading import grade_notebook
from graders.registry import LESSONS
from harness import mistakes_of, with_mistake


@pytest.mark.slow
@pytest.mark.parametrize("lesson", LESSONS, ids=[l.id for l in LESSONS])
def test_same_notebook_same_json(lesson, sandbox_matrix, tmp_path):
    mistake = mistakes_of(lesson)[0]
    first = sandbox_matrix.graded(lesson, mistake)  # warm: forked by the lesson's zygote
    second = grade_notebook(lesson, with_mistake(lesson, mistake, tmp_path), [mistake.exercise])  # a cold child
    a, b = (json.dumps({**r.to_dict(), "notebook": Path(r.notebook).name}, sort_keys=True) for r in (first, second))
    assert a == b
    assert first.notes == second.notes
    assert any(e.status != "passed" for e in first.exercises)  # the mistake is caught, the same way twice
