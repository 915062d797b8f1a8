"""test_gradescope, end to end: the tests of tests/unit/test_gradescope.py that start a child (the slow tier)."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
import pytest
from click.testing import CliRunner
from course_cli.instructor.gradescope import find_submission, gradescope_results, hidden_names
from course_cli.sandboxed.grading import grade_notebook
from course_cli.main import cli
from graders.registry import find_lesson
from graders.engine.results import CheckResult, ExerciseResult, LessonResult
from harness import mistakes_of, with_mistake
from test_gradescope import L01, _hidden_secrets, _run, _tree, autograder  # noqa: F401 (helpers and fixtures shared with the fast tests)


def test_the_zip_has_gradescope_s_scripts_at_its_root_and_the_course_beside(autograder):
    z = zipfile.ZipFile(autograder)
    names = z.namelist()
    assert "setup.sh" in names and "run_autograder" in names
    for script in ("setup.sh", "run_autograder"):
        assert (z.getinfo(script).external_attr >> 16) & 0o111, f"{script} is not executable"
    assert "course/graders/lesson01_sdpa.py" in names and "course/solutions/lesson01_sdpa.ipynb" in names
    assert "course/constraints.txt" in names and "course/pyproject.toml" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    setup = z.read("setup.sh").decode()
    assert "bubblewrap" in setup and "-c \"$ROOT/source/course/constraints.txt\"" in setup
    run = z.read("run_autograder").decode()
    assert "--lesson lesson01" in run and "AUTOGRADER_ROOT" in run
    tmp = autograder.parent / "syntax"
    tmp.mkdir(exist_ok=True)
    for script in ("setup.sh", "run_autograder"):
        (tmp / script).write_bytes(z.read(script))
        assert subprocess.run(["bash", "-n", str(tmp / script)]).returncode == 0


def test_a_zip_that_is_not_ours_is_kept(tmp_path):
    out = tmp_path / "autograder.zip"
    out.write_text("my own file")
    r = CliRunner().invoke(cli, ["gradescope", "1", "--out", str(out)], catch_exceptions=False)
    assert r.exit_code == 0
    assert (tmp_path / "autograder.zip.bak").read_text() == "my own file"
    assert zipfile.is_zipfile(out)
    r = CliRunner().invoke(cli, ["gradescope", "lesson99", "--out", str(out)])
    assert r.exit_code == 2 and "no lesson 'lesson99'" in r.output


@pytest.mark.slow
@pytest.mark.parametrize("case", ["solved", "stub", "mistake"])
def test_run_autograder_gives_course_check_s_points_and_hides_the_hidden(case, autograder, tmp_path):
    notebook = {"solved": L01.solution_path, "stub": L01.student_path}.get(case)
    if case == "mistake":
        m = next(m for m in mistakes_of(L01) if m.id == "softmax_over_queries")
        notebook = with_mistake(L01, m, tmp_path)
    data = _run(_tree(tmp_path, autograder, notebook))
    checked = grade_notebook(L01, notebook)  # what `course check --notebook` gives
    exercise_tests = {t["name"]: t for t in data["tests"] if t["visibility"] == "visible"}
    assert list(exercise_tests) == [e.id for e in checked.exercises]
    for ex in checked.exercises:
        assert exercise_tests[ex.id]["score"] == ex.points and exercise_tests[ex.id]["max_score"] == ex.max_points
    assert data["score"] == checked.score
    assert {"solved": 10.0, "stub": 0.0}.get(case, data["score"]) == data["score"]
    assert all(t["visibility"] == "visible" for t in data["tests"])  # the policy: nothing to publish later
    assert all(set(t) >= {"name", "output", "visibility"} for t in data["tests"])
    text = json.dumps(data, ensure_ascii=False)
    names, messages, code = _hidden_secrets(L01, checked)
    assert not [m for m in messages if m in text]
    assert not [line for line in code if line in text]
    if case == "mistake":
        assert messages, "the mistaken notebook should fail some hidden check, or this test shows nothing"
        sdpa = exercise_tests["scaled_dot_product_attention"]
        assert sdpa["score"] == 0.0 and "Likely mistake" in sdpa["output"]


@pytest.mark.slow
def test_the_zip_s_course_builds_as_setup_sh_installs_it(autograder, tmp_path):
    """setup.sh pip-installs course/ from the zip: it must build with only what the zip holds."""
    zipfile.ZipFile(autograder).extractall(tmp_path / "source")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w",
                           str(tmp_path / "wheel"), str(tmp_path / "source" / "course")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = (tmp_path / "wheel").glob("attention_course-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "course_cli/instructor/gradescope.py" in names and "graders/lesson01_sdpa.py" in names
