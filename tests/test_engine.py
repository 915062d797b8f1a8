"""The engine's own rules, fast and in process: known mistakes as edits of the solved source."""

from __future__ import annotations

import importlib

import pytest

from graders.engine import Mistake, mistake_source, solved_cell
from graders.registry import LESSONS

ALL_MISTAKES = [pytest.param(l, m, id=f"{l.id}-{m.id}") for l in LESSONS
                for m in importlib.import_module(l.module).MISTAKES]


@pytest.mark.parametrize("lesson, mistake", ALL_MISTAKES)
def test_every_mistake_builds_from_the_solved_source(lesson, mistake):
    """Each edit's `old` occurs exactly once (mistake_source raises otherwise), the result differs from the
    solved cell, still defines the exercise and compiles."""
    src = mistake_source(mistake, lesson.id)
    if mistake.edits:
        assert src != solved_cell(lesson.id, mistake.exercise)
    compile(src, f"<mistake {mistake.id}>", "exec", dont_inherit=True)
    assert f"def {mistake.exercise}" in src or f"class {mistake.exercise}" in src


def test_an_edit_that_does_not_match_exactly_once_is_refused():
    lesson = LESSONS[0]
    name = lesson.exercises[0].name
    with pytest.raises(ValueError, match="matches 0 times"):
        mistake_source(Mistake(name, "x", "m", edits={"no such text anywhere": "y"}), lesson.id)
    cell = solved_cell(lesson.id, name)
    common = next(tok for tok in ("(", ")", ",", "=") if cell.count(tok) > 1)
    with pytest.raises(ValueError, match=f"matches {cell.count(common)} times"):
        mistake_source(Mistake(name, "x", "m", edits={common: "y"}), lesson.id)


def test_a_mistake_is_either_edits_or_an_implementation():
    with pytest.raises(ValueError):
        Mistake("softmax", "x", "m")
    with pytest.raises(ValueError):
        Mistake("softmax", "x", "m", impl=len, edits={"a": "b"})
