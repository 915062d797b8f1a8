"""test_classroom, end to end: the tests of tests/unit/test_classroom.py that start a child (the slow tier)."""

from __future__ import annotations

import json
import os
import shlex
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
from test_classroom import PACKAGE, make  # noqa: F401 (helpers and fixtures shared with the fast tests)


def test_workflow_structure_and_points(tmp_path):
    chosen = [find_lesson("lesson01"), find_lesson("lesson03")]
    wf, _, output = make(tmp_path, "lesson01", "3")
    assert "on" in wf and "push" in wf["on"]  # quoted, so YAML 1.1 does not read it as true
    assert wf["permissions"]["checks"] == "write"
    (job,) = wf["jobs"].values()
    steps = job["steps"]
    assert steps[0]["uses"].startswith("actions/checkout@")
    install = next(s for s in steps if "pip install" in s.get("run", ""))
    assert "-c .github/classroom/constraints.txt" in install["run"] and PACKAGE in install["run"]
    assert "bubblewrap" in install["run"]
    for lesson in chosen:
        grade = next(s for s in steps if s.get("name") == f"Practice feedback: {lesson.id} (public checks, not marks)")
        assert (f"python -I -m course_cli.instructor.classroom check {lesson.id} lessons/{lesson.notebook} "
                f"> .course-results/{lesson.id}.json") in grade["run"]
    graders = [s for s in steps if s.get("uses") == GRADER]
    want = [(lesson, ex) for lesson in chosen for ex in lesson.exercises]
    assert [s["id"] for s in graders] == [step_id(lesson, ex.name) for lesson, ex in want]
    for step, (lesson, ex) in zip(graders, want):
        assert step["with"]["max-score"] == ex.points
        assert step["with"]["command"].endswith(f".course-results/{lesson.id}.json {ex.name}")
        assert step["with"]["timeout"] > 0
    for lesson in chosen:
        assert sum(s["with"]["max-score"] for s in graders if s["id"].startswith(lesson.id)) == lesson.max_score
    reporter = steps[-1]
    assert reporter["uses"] == REPORTER
    ids = [s["id"] for s in graders]
    assert reporter["with"]["runners"].split(",") == ids
    assert reporter["env"] == {f"{i.upper()}_RESULTS": f"${{{{steps.{i}.outputs.result}}}}" for i in ids}
    assert len(set(ids)) == len(ids) and all(i.replace("-", "").isalnum() and i == i.lower() for i in ids)
    assert "22 points" in output


def test_legacy_autograding_json_and_constraints(tmp_path):
    _, legacy, _ = make(tmp_path)  # no lesson given: all of them
    tests = legacy["tests"]
    assert len(tests) == sum(len(lesson.exercises) for lesson in LESSONS)
    assert sum(t["points"] for t in tests) == sum(lesson.max_score for lesson in LESSONS)
    # the classroom check: `course check --public`, the notebook read inside the repository's root
    assert all(t["run"].startswith("python -I -m course_cli.instructor.classroom check ") for t in tests)
    assert "pip install -c .github/classroom/constraints.txt" in tests[0]["setup"]
    pins = (tmp_path / ".github" / "classroom" / "constraints.txt").read_text()
    assert "torch==" in pins


def test_rewriting_keeps_a_changed_file(tmp_path):
    make(tmp_path, "1")
    wf = tmp_path / ".github" / "workflows" / "classroom.yml"
    wf.write_text(wf.read_text() + "# my own edit\n")
    _, _, output = make(tmp_path, "1")
    assert "# my own edit" in (tmp_path / ".github" / "workflows" / "classroom.yml.bak").read_text()
    assert "unchanged" in output  # the other two files were the same


def _here(command: str) -> str:
    """A workflow command run on this tree: under -I Python imports the course installed in the environment
    (an editable install may be another checkout); -P keeps what matters here (the repository's folder is not
    on sys.path, so a committed course_cli/ cannot shadow it) and imports this tree through PYTHONPATH."""
    assert "python -I -m course_cli." in command, command
    return command.replace("python -I -m ", f"{shlex.quote(sys.executable)} -P -m ")


@pytest.mark.slow
@pytest.mark.parametrize("source,passes", [("solution", True), ("stub", False), ("linked", False)])
def test_the_workflow_s_commands_run_as_written(tmp_path, source, passes):
    """The lesson step, then each exercise's verdict step. "linked": `lessons` is a committed link to a folder
    outside the repository holding the solved notebook; nothing is read through it (NOT GRADED, every step
    fails), where `course check --notebook lessons/...` alone grades the solution there (full points)."""
    lesson = find_lesson("lesson01")
    repo = tmp_path / "repo"
    wf, _, _ = make(repo, "lesson01")
    folder = tmp_path / "elsewhere" if source == "linked" else repo / "lessons"
    folder.mkdir()
    shutil.copy(lesson.student_path if source == "stub" else lesson.solution_path, folder / lesson.notebook)
    if source == "linked":
        (repo / "lessons").symlink_to(folder, target_is_directory=True)
    steps = next(iter(wf["jobs"].values()))["steps"]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    grade = next(s for s in steps if s.get("name", "").startswith("Practice feedback: lesson01"))
    subprocess.run(["bash", "-e", "-c", _here(grade["run"])], cwd=repo, env=env, check=True, timeout=600)
    data = json.loads((repo / ".course-results" / "lesson01.json").read_text())
    assert [e["id"] for e in data["exercises"]] == [e.name for e in lesson.exercises]
    if source == "linked":
        assert data["score"] is None and "lessons is a symbolic link" in data["not_graded"], data
    hidden = {c.name for c in __import__(lesson.module, fromlist=["CHECKS"]).CHECKS if c.hidden}
    assert not {c["name"] for e in data["exercises"] for c in e["checks"]} & hidden  # public checks only
    for step in (s for s in steps if s.get("uses") == GRADER):
        proc = subprocess.run(_here(step["with"]["command"]), shell=True, cwd=repo, env=env, capture_output=True,
                              text=True, timeout=60)
        assert (proc.returncode == 0) == passes, proc.stdout + proc.stderr
