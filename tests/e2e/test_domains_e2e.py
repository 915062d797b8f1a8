"""test_domains, end to end: the tests of tests/lessons/test_domains.py that start a child (the slow tier)."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
import pytest
from graders.engine.checks import CHECKS_OF
from graders.engine.probe import draw_examples
from graders.registry import LESSONS, find_lesson
from harness import check_one, explain, reference, with_code
from test_domains import DECLARED  # noqa: F401 (helpers and fixtures shared with the fast tests)


def test_the_draws_depend_on_the_seed_only():
    lesson, exercise, domain = DECLARED[0]
    code = ("import importlib;from graders.engine.checks import CHECKS_OF;from graders.engine.probe import "
            f"draw_examples;d=CHECKS_OF(importlib.import_module({lesson.module!r})).domains[{exercise!r}][0];"
            "print(draw_examples(d, 99))")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert other == str(draw_examples(domain, 99))
    assert draw_examples(domain, 99) != draw_examples(domain, 100)


@pytest.mark.slow
def test_the_reference_child_hands_its_draws_to_the_students(tmp_path, monkeypatch):
    """The reference child writes what it drew beside the cached reference; a student's check reads them into
    its child's job (so that child need not import Hypothesis), and grades the same as without them."""
    import json

    from course_cli.sandboxed import grading

    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path / "cache"))
    lesson, exercise, domain = next((l, e, d) for l, e, d in DECLARED if l.id == "lesson10" and e == "filter_logits")
    first = grading.grade_notebook(lesson, lesson.solution_path, [exercise])
    (side,) = (tmp_path / "cache").glob(f"{lesson.id}-cpu-*.draws.json")
    drawn = json.loads(side.read_text())
    checks = CHECKS_OF(importlib.import_module(lesson.module))
    public = [c for c in checks.of(exercise) if not c.hidden and "declared domain" in c.name]
    assert public and all(any(k.startswith(f"{domain.examples}:") for k in drawn) for _ in public)
    starts = []
    real = grading.sandbox.start
    monkeypatch.setattr(grading.sandbox, "start", lambda *a, **k: starts.append(k.get("draws")) or real(*a, **k))
    again = grading.grade_notebook(lesson, lesson.solution_path, [exercise])
    assert starts and starts[-1] == drawn  # the student's child was handed the reference's draws
    assert [e.status for e in again.exercises] == [e.status for e in first.exercises] == ["passed"]
