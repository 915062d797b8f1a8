"""`course gradescope`: the autograder zip, and its real `run_autograder` run in a temporary tree laid out as
Gradescope lays it out, on the solved, the stub and a mistaken notebook: the same points as `course check`, and
the hidden checks as the README's policy says (names and statuses; no message, value or code) in results.json."""

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


def test_which_notebook_is_graded(tmp_path):
    assert find_submission(tmp_path, L01) == (None, f"no notebook was submitted: upload {L01.notebook}")
    (tmp_path / "mine.ipynb").write_text("{}")
    path, note = find_submission(tmp_path, L01)
    assert path.name == "mine.ipynb" and note == f"submitted as mine.ipynb, expected {L01.notebook}: graded as {L01.notebook}"
    (tmp_path / "other.ipynb").write_text("{}")
    path, note = find_submission(tmp_path, L01)
    assert path is None and "2 notebooks" in note
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / L01.notebook).write_text("{}")
    (tmp_path / ".ipynb_checkpoints").mkdir()
    (tmp_path / ".ipynb_checkpoints" / L01.notebook).write_text("{}")
    assert find_submission(tmp_path, L01) == (tmp_path / "sub" / L01.notebook, "")


def test_no_notebook_still_gives_a_results_file(tmp_path, monkeypatch):
    from course_cli.sandboxed import sandbox

    monkeypatch.setattr(sandbox, "_BWRAP", (True, ""))  # bwrap usable, not probed: the fast tier starts no process
    from course_cli.instructor.gradescope import main

    (tmp_path / "submission").mkdir()
    assert main(["run", "--lesson", "lesson01", "--root", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "results" / "results.json").read_text())
    assert data["score"] == 0.0 and "no notebook was submitted" in data["output"]
    assert [t["score"] for t in data["tests"] if "score" in t] == [0.0, 0.0]
    assert main(["run", "--lesson", "lesson99", "--root", str(tmp_path)]) == 1  # cannot grade: no score at all
    assert not (tmp_path / "results" / "results.json").exists()


def test_results_format_from_a_result():
    from graders.engine.results import hidden_only_line

    hidden = hidden_names(L01)
    h = sorted(name for ex, name in hidden if ex == "softmax")
    assert h and any(ex == "scaled_dot_product_attention" for ex, _ in hidden)
    result = LessonResult("lesson01", "x.ipynb", [
        ExerciseResult("softmax", "failed", 0.0, 4.0, [CheckResult("matches the reference on random inputs", "passed"),
                                                       CheckResult(h[0], "failed", message="SECRET 0.1234 at (3, 1)"),
                                                       CheckResult(h[1], "passed")], "DIAGNOSIS"),
        ExerciseResult("scaled_dot_product_attention", "passed", 6.0, 6.0, [CheckResult("shapes", "passed")])])
    data = gradescope_results(L01, result, hidden)
    assert data["score"] == 0.0 + 6.0
    by = {t["name"]: t for t in data["tests"]}
    assert by["softmax"]["score"] == 0.0 and by["softmax"]["max_score"] == 4.0 and by["softmax"]["visibility"] == "visible"
    assert "DIAGNOSIS" not in by["softmax"]["output"]  # the engine did not say it came from public checks alone
    assert list(by) == ["softmax", "scaled_dot_product_attention"]  # the points counted once, all visible
    assert by["scaled_dot_product_attention"]["score"] == 6.0
    text = json.dumps(data, ensure_ascii=False)
    assert "SECRET" not in text and h[0] in text and h[1] in text  # names and statuses shown, messages not
    assert hidden_only_line([h[0]]) in by["softmax"]["output"]  # "passes the public checks; fails 1 hidden check"


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
    """The hidden checks' names, their messages in `checked` (course check's result) that no public check also
    gave (a stub's "not implemented yet" is no secret), and the distinctive lines of the code of the hidden checks
    that no public check shares (a hidden twin's probe and judge are its public check's, no secret)."""
    module = importlib.import_module(lesson.module)
    names = {c.name for c in module.CHECKS if c.hidden}
    said = {c.message for ex in checked.exercises for c in ex.checks if c.name not in names}
    messages = {c.message for ex in checked.exercises for c in ex.checks if c.name in names and c.message} - said
    public = {id(f) for c in module.CHECKS if not c.hidden for f in (c.probe, c.judge)}
    code = []
    for c in module.CHECKS:
        if c.hidden:
            for fn in (c.probe, c.judge):
                if id(fn) not in public and not c.variant:  # (the battery's code is the base check's)
                    code += [ln.strip() for ln in inspect.getsource(fn).splitlines() if len(ln.strip()) > 30]
    return names, messages, code
