"""`course gradescope`: the autograder zip, and its real `run_autograder` run in a temporary tree laid out as
Gradescope lays it out, on the solved, the stub and a mistaken notebook: the same points as `course check`, and
nothing of the hidden checks (names, messages, code) in results.json."""

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

L01 = find_lesson("lesson01")


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    out = tmp_path_factory.mktemp("gs") / "autograder.zip"
    r = CliRunner().invoke(cli, ["gradescope", "lesson01", "--out", str(out)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return out


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


def test_which_notebook_is_graded(tmp_path):
    assert find_submission(tmp_path, L01) == (None, f"no notebook was submitted: upload {L01.notebook}")
    (tmp_path / "mine.ipynb").write_text("{}")
    path, note = find_submission(tmp_path, L01)
    assert path.name == "mine.ipynb" and "the only notebook" in note
    (tmp_path / "other.ipynb").write_text("{}")
    path, note = find_submission(tmp_path, L01)
    assert path is None and "2 notebooks" in note
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / L01.notebook).write_text("{}")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".ipynb_checkpoints" / L01.notebook).write_text("{}")
    assert find_submission(tmp_path, L01) == (tmp_path / "sub" / L01.notebook, "")


def test_no_notebook_still_gives_a_results_file(tmp_path):
    from course_cli.instructor.gradescope import main

    (tmp_path / "submission").mkdir()
    assert main(["run", "--lesson", "lesson01", "--root", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results" / "results.json").read_text())
    assert data["score"] == 0.0 and "no notebook was submitted" in data["output"]
    assert [t["score"] for t in data["tests"] if "score" in t] == [0.0, 0.0]
    assert main(["run", "--lesson", "lesson99", "--root", str(tmp_path)]) == 1
    data = json.loads((tmp_path / "results" / "results.json").read_text())
    assert data["score"] == 0.0 and "could not grade" in data["output"]


def test_results_format_from_a_result():
    hidden = hidden_names(L01)
    assert hidden["softmax"] and hidden["scaled_dot_product_attention"]
    h = sorted(hidden["softmax"])
    result = LessonResult("lesson01", "x.ipynb", [
        ExerciseResult("softmax", "failed", 0.0, 4.0, [CheckResult("matches the reference on random inputs", "passed"),
                                                       CheckResult(h[0], "failed", message="SECRET 0.1234 at (3, 1)"),
                                                       CheckResult(h[1], "passed")], "DIAGNOSIS"),
        ExerciseResult("scaled_dot_product_attention", "passed", 6.0, 6.0, [CheckResult("shapes", "passed")])])
    data = gradescope_results(L01, result, hidden)
    assert data["score"] == 0.0 + 6.0
    by = {t["name"]: t for t in data["tests"]}
    assert by["softmax"]["score"] == 0.0 and by["softmax"]["max_score"] == 4.0 and by["softmax"]["visibility"] == "visible"
    assert "DIAGNOSIS" in by["softmax"]["output"]
    assert by["softmax: hidden checks"]["visibility"] == "after_published"
    assert "score" not in by["softmax: hidden checks"]  # the points are the exercise's, counted once
    assert "1 of 2 hidden check runs passed" in by["softmax: hidden checks"]["output"]
    assert by["scaled_dot_product_attention"]["score"] == 6.0
    text = json.dumps(data)
    assert "SECRET" not in text and not any(name in text for name in h)


def _tree(tmp_path: Path, zip_path: Path, notebook: Path) -> Path:
    """/autograder as Gradescope lays it out: source/ (the zip), run_autograder, submission/, results/."""
    root = tmp_path / "autograder"
    (root / "source").mkdir(parents=True)
    zipfile.ZipFile(zip_path).extractall(root / "source")
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    (root / "run_autograder").chmod(0o755)
    (root / "submission").mkdir()
    shutil.copy(notebook, root / "submission" / L01.notebook)
    (root / "results").mkdir()
    return root


def _run(root: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the zip's course, not this checkout's
    env.update(AUTOGRADER_ROOT=str(root), COURSE_PYTHON=sys.executable)
    proc = subprocess.run([str(root / "run_autograder")], cwd=root, env=env, capture_output=True, text=True,
                          timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads((root / "results" / "results.json").read_text())


def _hidden_secrets(lesson, checked) -> tuple[set[str], set[str], list[str]]:
    """The hidden checks' names (those no public check shares), their messages in `checked` (course check's
    result) that no public check also gave (a stub's "not implemented yet" is no secret), and the distinctive lines of their probes' and judges' code."""
    module = importlib.import_module(lesson.module)
    public = {c.name for c in module.CHECKS if not c.hidden}
    names = {c.name for c in module.CHECKS if c.hidden} - public
    said = {c.message for ex in checked.exercises for c in ex.checks if c.name not in names}
    messages = {c.message for ex in checked.exercises for c in ex.checks if c.name in names and c.message} - said
    code = []
    for c in module.CHECKS:
        if c.hidden:
            for fn in (c.probe, c.judge):
                code += [ln.strip() for ln in inspect.getsource(fn).splitlines() if len(ln.strip()) > 30]
    return names, messages, code


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
    hidden_tests = [t for t in data["tests"] if t["visibility"] == "after_published"]
    assert {t["name"] for t in hidden_tests} == {f"{e.name}: hidden checks" for e in L01.exercises}
    assert all(set(t) >= {"name", "output", "visibility"} for t in data["tests"])
    text = json.dumps(data, ensure_ascii=False)
    names, messages, code = _hidden_secrets(L01, checked)
    assert not [n for n in names if n in text]
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
