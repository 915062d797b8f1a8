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
                          + [CheckResult("leaves its inputs unchanged", "passed")])


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
    forbidden.checks.append(CheckResult("uses no forbidden API", "failed"))
    assert partial_points(forbidden) == 0.0


def test_apply_partial_reads_the_registry_weights():
    from graders.engine.results import LessonResult

    class Lesson:
        exercises = (Exercise("x", points=6, weights=(("c0", 2.0),)),)

    res = LessonResult("lessonXX", "", [_ex(["passed", "failed"])])
    assert apply_partial(res, Lesson, checks=[]).exercises[0].points == 3.0  # 6 * 2 / (2 + 1 + 1)


@pytest.mark.slow
def test_nbgrader_and_course_grade_give_the_same_partial_points(tmp_path):
    from course_cli.instructor.nbgrader_course import make_course
    from harness import mistakes_of, with_mistake

    course = tmp_path / "course"
    make_course(course)
    with open(course / "nbgrader_config.py", "a") as f:
        f.write("\nc.ApplyCourseVerdict.partial_credit = True\n")
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}

    def nbgrader(*args):
        p = subprocess.run([str(bin_dir / "nbgrader"), *args], cwd=course, env=env, capture_output=True, text=True,
                           timeout=900)
        assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]

    nbgrader("generate_assignment", "lesson01", "--force")
    notebooks = {"solved": L01.solution_path, "stub": L01.student_path}
    for m in mistakes_of(L01):
        if m.id in ("no_scaling", "mask_with_zero", "max_wrong_dim"):
            notebooks[m.id] = with_mistake(L01, m, tmp_path)
    for student, path in notebooks.items():
        folder = course / "submitted" / student / "lesson01"
        folder.mkdir(parents=True)
        nbformat.write(nbformat.read(path, as_version=4), folder / L01.notebook)
    nbgrader("autograde", "lesson01", "--force")
    nbgrader("export", "--to", str(tmp_path / "grades.csv"))
    nb_points = {r["student_id"]: float(r["raw_score"]) for r in csv.DictReader((tmp_path / "grades.csv").open())}

    from course_cli.main import cli

    out = tmp_path / "r.json"
    r = CliRunner().invoke(cli, ["grade", str(course / "submitted"), "--lesson", "lesson01", "--partial",
                                 "--out", str(out)])
    assert r.exit_code == 0, r.output
    ours = {s: d["score"] for s, d in json.loads(out.read_text())["students"].items()}
    assert ours == pytest.approx(nb_points, abs=0.011), (ours, nb_points)
    assert ours["solved"] == 10.0 and ours["stub"] == 0.0
    assert any(0 < v < 10 and v != 4.0 for v in ours.values())  # some exercise really got partial points
