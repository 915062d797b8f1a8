"""test_partial, end to end: the tests of tests/unit/test_partial.py that start a child (the slow tier)."""

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
from test_partial import L01  # noqa: F401 (helpers and fixtures shared with the fast tests)
from nbgrader_cli import nbgrader_argv


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
        p = subprocess.run(nbgrader_argv(*args), cwd=course, env=env, capture_output=True, text=True,
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
