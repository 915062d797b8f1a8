"""Hints nudge; they never hand out a line of the answer.

A hint tier may name the key idea, the right axis, the trap to avoid, but no hint of an exercise may contain a
non-trivial line of that exercise's reference solution (its solved cell, between the solution markers), compared
as `tests/test_teaching.py` compares the teaching text: whitespace removed, trailing comments cut, lines under
MIN_CHARS and boilerplate ignored.
"""

from __future__ import annotations

import pytest

from graders.registry import LESSONS
from test_teaching import _cells, _squash, reference_lines


def _solution_cell(lesson, name: str) -> str:
    from graders.engine.notebook import defining_cell, graded_cells

    cell = defining_cell(graded_cells(_cells(lesson.solution_path)), name)
    assert cell is not None, (lesson.id, name)
    return cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])


def hint_leaks(lesson) -> list[str]:
    found = []
    for ex in lesson.exercises:
        lines = reference_lines(_solution_cell(lesson, ex.name))
        for tier, hint in enumerate(ex.hints, start=1):
            text = _squash(hint)
            found += [f"{ex.name} hint {tier}: {line}" for line in lines if line in text]
    return found


@pytest.mark.parametrize("lesson", LESSONS, ids=[l.id for l in LESSONS])
def test_no_hint_contains_a_line_of_its_solution(lesson):
    found = hint_leaks(lesson)
    assert not found, "hints that print the answer (end on the key idea instead):\n" + "\n".join(found)


def test_the_hint_comparison_catches_a_leak():
    src = "def f(x):\n    ### BEGIN SOLUTION\n    z = x - x.amax(dim=-1, keepdim=True)\n    return z\n    ### END SOLUTION\n"
    (line,) = reference_lines(src)
    assert line in _squash("Roughly: `z = x - x.amax(dim=-1, keepdim=True)`, then exponentiate.")
    assert line not in _squash("Subtract the row maximum (kept as a column) before exponentiating.")


def test_every_exercise_has_tiers_and_lines_to_compare():
    for lesson in LESSONS:
        for ex in lesson.exercises:
            assert len(ex.hints) >= 2, (lesson.id, ex.name)
            assert reference_lines(_solution_cell(lesson, ex.name)), (lesson.id, ex.name)
