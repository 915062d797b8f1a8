"""`course classroom`: the GitHub Actions workflow and Classroom autograding files, parsed with PyYAML and checked
for structure and points; and (slow) their commands, run as the runner would, on a solved and a stub notebook."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from course_cli.instructor.classroom import GRADER, REPORTER, step_id, verdict
from course_cli.main import cli
from graders.registry import LESSONS, find_lesson

PACKAGE = "attention-course @ git+https://example.org/attention-course-dist.git"


def make(tmp_path, *lessons):
    r = CliRunner().invoke(cli, ["classroom", *lessons, "--dir", str(tmp_path), "--package", PACKAGE],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    wf = yaml.safe_load((tmp_path / ".github" / "workflows" / "classroom.yml").read_text())
    legacy = json.loads((tmp_path / ".github" / "classroom" / "autograding.json").read_text())
    return wf, legacy, r.output


def test_verdict_reads_course_check_json(tmp_path):
    f = tmp_path / "lesson01.json"
    f.write_text(json.dumps({"exercises": [
        {"id": "softmax", "status": "passed", "points": 4.0, "max_points": 4.0, "checks": [], "diagnosis": None},
        {"id": "scaled_dot_product_attention", "status": "failed", "points": 0.0, "max_points": 6.0,
         "checks": [{"name": "shapes", "status": "failed", "device": "cpu", "dtype": "float32", "message": "bad"}],
         "diagnosis": "the scores are not scaled"}]}))
    assert verdict(f, "softmax")[0] == 0
    code, text = verdict(f, "scaled_dot_product_attention")
    assert code == 1 and "Likely mistake: the scores are not scaled" in text and "bad" in text
    assert verdict(f, "nope")[0] == 1
    assert verdict(tmp_path / "missing.json", "softmax")[0] == 1
    (tmp_path / "empty.json").write_text("")
    code, text = verdict(tmp_path / "empty.json", "softmax")
    assert code == 1 and "no result" in text




def _repo_with_linked_lessons(tmp_path):
    """A repository whose committed `lessons` is a link to a folder outside it holding the solved notebook."""
    lesson = find_lesson("lesson01")
    repo, elsewhere = tmp_path / "repo", tmp_path / "elsewhere"
    repo.mkdir()
    elsewhere.mkdir()
    shutil.copy(lesson.solution_path, elsewhere / lesson.notebook)
    (repo / "lessons").symlink_to(elsewhere, target_is_directory=True)
    return repo, lesson


def test_the_workflow_reads_the_notebook_inside_the_repository_root(tmp_path, monkeypatch, capsys):
    """Each lesson's step reads the notebook as a submission whose root is the repository (the folder the
    workflow runs in): a committed `lessons -> /elsewhere` is refused before any child starts, NOT GRADED with
    the reason, and the exercise's test in the older format fails with it. (`course check --notebook`, which
    the workflow ran before, reads through the link: the notebook's own folder was its root.)"""
    from course_cli.instructor.classroom import check, main

    repo, lesson = _repo_with_linked_lessons(tmp_path)
    wf, legacy, _ = make(repo, "lesson01")
    run = next(s for s in next(iter(wf["jobs"].values()))["steps"]
               if s.get("name", "").startswith("Practice feedback: lesson01"))["run"]
    assert f"python -I -m course_cli.instructor.classroom check lesson01 lessons/{lesson.notebook} >" in run
    assert {t["run"] for t in legacy["tests"]} == {
        f"python -I -m course_cli.instructor.classroom check lesson01 lessons/{lesson.notebook} {ex.name}"
        for ex in lesson.exercises}

    monkeypatch.chdir(repo)
    code, data = check("lesson01", f"lessons/{lesson.notebook}")
    assert code == 2 and data["score"] is None, data
    assert "lessons is a symbolic link" in data["not_graded"] and "inside" in data["not_graded"], data
    assert not [c for e in data["exercises"] for c in e["checks"] if c["status"] == "passed"]
    assert main(["check", "lesson01", f"lessons/{lesson.notebook}"]) == 2
    printed = json.loads(capsys.readouterr().out)
    assert printed["not_graded"] == data["not_graded"]
    assert main(["check", "lesson01", f"lessons/{lesson.notebook}", "softmax"]) == 1
    assert "symbolic link" in capsys.readouterr().out
    (repo / "lessons").unlink()
    (repo / "lessons").mkdir()
    (repo / "lessons" / lesson.notebook).symlink_to(tmp_path / "elsewhere" / lesson.notebook)  # the notebook
    code, data = check("lesson01", f"lessons/{lesson.notebook}")
    assert code == 2 and "symbolic link" in data["not_graded"], data
    code, data = check("lesson01", f"../elsewhere/{lesson.notebook}")  # outside the repository
    assert code == 2 and "outside" in data["not_graded"], data


def test_check_usage_and_unknown_lesson(capsys):
    from course_cli.instructor.classroom import main

    assert main(["check", "lesson01"]) == 2 and "usage" in capsys.readouterr().err
    assert main(["check", "lesson99", "x.ipynb"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
