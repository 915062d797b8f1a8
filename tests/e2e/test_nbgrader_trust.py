"""Issue 45 through the real `nbgrader autograde` and `export` with the course's config: a submission that is a
link to nbgrader's solved source/ (or a classmate's notebook), or a FIFO, is NOT GRADED with the reason and never
scores; a course of another version than the one that released the assignment, or one without the lesson, gives
every autograder cell an error and 0 points with a note naming the cause, never full points."""

from __future__ import annotations

import copy
import csv
import html
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_cli.instructor.nbgrader_course import RELEASE, make_course
from graders.registry import find_lesson
from nbgrader_cli import nbgrader_argv

pytestmark = pytest.mark.slow
L01 = find_lesson("lesson01")
BIN = Path(sys.executable).parent


def _gid(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def _run(course, env, *args):
    p = subprocess.run(nbgrader_argv(*args), cwd=course, env=env, capture_output=True, text=True,
                       timeout=900)
    return p.returncode, p.stdout + p.stderr


def _scores(course, env):
    rc, out = _run(course, env, "export")
    assert rc == 0, out
    with open(course / "grades.csv", newline="") as fh:
        return {r["student_id"]: r for r in csv.DictReader(fh)}, out


def test_links_and_fifos_are_not_graded_and_another_version_fails_closed(tmp_path):
    course = tmp_path / "course"
    make_course(course)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    assert json.loads((course / "source" / "lesson01" / RELEASE).read_text())["lesson"] == "lesson01"
    rc, out = _run(course, env, "generate_assignment", "lesson01", "--force")
    assert rc == 0, out
    release = nbformat.read(course / "release" / "lesson01" / L01.notebook, as_version=4)

    def folder(student):
        f = course / "submitted" / student / "lesson01"
        f.mkdir(parents=True)
        return f

    nbformat.write(copy.deepcopy(release), folder("untouched") / L01.notebook)
    (folder("to_source") / L01.notebook).symlink_to(course / "source" / "lesson01" / L01.notebook)
    (folder("to_classmate") / L01.notebook).symlink_to(course / "source" / "lesson01" / L01.notebook)
    os.mkfifo(folder("fifo") / L01.notebook)
    rc, out = _run(course, env, "autograde", "lesson01")
    assert rc == 0, out[-3000:]
    rows, out = _scores(course, env)
    for student in ("to_source", "to_classmate", "fifo"):
        assert rows[student]["status"] == "NOT GRADED", (student, rows[student])
        assert rows[student]["score"] == "", rows[student]
    assert "symbolic link" in rows["to_source"]["note"] and "FIFO" in rows["fifo"]["note"]
    assert rows["untouched"]["status"] == "graded" and float(rows["untouched"]["score"]) == 0.0

    # the installed course is not the one that released the assignment: the cells are not judged, 0 points
    (course / "source" / "lesson01" / RELEASE).write_text(json.dumps({"course": "0.0.1", "lesson": "lesson01",
                                                                     "exercises": {}}))
    solved = nbformat.read(L01.solution_path, as_version=4)
    answers = {_gid(c): c.source for c in solved.cells if _gid(c)}
    good = copy.deepcopy(release)
    for c in good.cells:
        if _gid(c) in answers and not _gid(c).startswith("test_"):
            c.source = answers[_gid(c)]
    nbformat.write(good, folder("solved_other_version") / L01.notebook)
    rc, out = _run(course, env, "autograde", "lesson01", "--student", "solved_other_version")
    assert rc == 0, out[-3000:]
    rows, _ = _scores(course, env)
    row = rows["solved_other_version"]
    assert row["status"] == "NOT GRADED" and row["score"] == "" and "released with course 0.0.1" in row["note"], row
    graded = nbformat.read(course / "autograded" / "solved_other_version" / "lesson01" / L01.notebook, as_version=4)
    tests = [c for c in graded.cells if (_gid(c) or "").startswith("test_")]
    # every autograder cell an error, and the notebook (from which the feedback is made) opens with why, both in
    # the student's words; the instructor's (the version) are the export's note, above
    released_with = "is not the one your assignment was released with"
    assert tests and all(any(o.get("output_type") == "error" and released_with in o.get("evalue", "")
                             for o in c.outputs) for c in tests)
    first = " ".join(html.unescape(graded.cells[0].source).split())
    assert first.startswith(f"**Not graded.** The course installed where your notebook {L01.notebook} is graded "
                            f"{released_with}. This is not about your work"), first
