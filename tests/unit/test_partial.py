"""Partial credit, when the instructor asks for it: the rule (graders/scoring.py), and the same points through
`course grade --partial` and `nbgrader autograde` with `c.ApplyCourseVerdict.partial_credit = True`."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner

from graders.registry import Exercise, find_lesson
from graders.engine.results import CheckResult, ExerciseResult
from graders.engine.scoring import apply_partial, partial_points

L01 = find_lesson("lesson01")


def _ex(statuses, status="failed", points=6.0):
    return ExerciseResult("x", status, 0.0, points, [CheckResult(f"c{i}", s) for i, s in enumerate(statuses)]
                          + [CheckResult("leaves its inputs unchanged", "passed", kind="mutation")])


def test_partial_points_rule():
    # the first property weighs as much as the others together, plus one share held back for passing:
    # c0 (2) + c1 (1) passed of c0 (2) + c1 (1) + c2 (1) + fresh (1) -> 6 * 3/5
    assert partial_points(_ex(["passed", "passed", "failed"])) == 3.6
    assert partial_points(_ex(["passed", "skipped", "failed"])) == 2.0  # skipped GPU checks do not count: 6 * 1/3
    assert partial_points(_ex(["failed", "passed", "passed"])) == 2.4  # the fundamental one failed: 6 * 2/5
    assert partial_points(_ex(["passed", "failed"], status="passed")) == 6.0
    assert partial_points(_ex(["not_implemented"], status="not_implemented")) == 0.0
    assert partial_points(_ex(["passed", "failed"]), {"c1": 3.0}) == 2.57  # weighted as the registry says: 6 * 3/7
    assert partial_points(_ex(["passed", "failed"]), hidden={"c1"}) == 3.0  # hidden runs: not counted, 6 * 1/2
    assert partial_points(_ex(["passed", "passed", "failed"]), known_mistake=True) == 3.0  # capped at half
    forbidden = _ex(["passed", "passed"])
    forbidden.checks.append(CheckResult("uses no forbidden API", "failed", kind="forbidden"))
    assert partial_points(forbidden) == 0.0


def test_apply_partial_reads_the_registry_weights():
    from graders.engine.results import LessonResult

    class Lesson:
        exercises = (Exercise("x", points=6, weights=(("c0", 2.0),)),)

    res = LessonResult("lessonXX", "", [_ex(["passed", "failed"])])
    assert apply_partial(res, Lesson, checks=[]).exercises[0].points == 3.0  # 6 * 2 / (2 + 1 + 1)
