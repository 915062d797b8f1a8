"""The instructor's path, driven through nbgrader's real commands for every lesson in the registry:
generate_assignment → autograde four submissions (solved, untouched, a planted mistake, a tampering
twin of it) → generate_feedback (no hidden tests in the HTML) → export (CSV). `course check` must give
the same points as nbgrader for the same notebook."""

from __future__ import annotations

import copy
import csv
import html
import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from conftest import marks
from course_cli.sandboxed.grading import grade_notebook
from course_cli.instructor.nbgrader_course import make_course
from graders.engine import mistake_source
from graders.registry import LESSONS
from harness import solution_cell_index

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent

TAMPER = '''import builtins, torch, torch.testing
import graders.engine, graders.engine.compare, course_cli.incell
course_cli.incell.grade = lambda *a, **k: print("all tests passed!")
graders.engine.judge_exercise = lambda *a, **k: None
graders.engine.compare.close = lambda *a, **k: None
torch.allclose = lambda *a, **k: True
torch.testing.assert_close = lambda *a, **k: None
builtins.AssertionError = type("Nope", (Exception,), {})
'''


def nbgrader(course: Path, *args: str) -> str:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}  # nbgrader runs `alembic`
    proc = subprocess.run([str(BIN / "nbgrader"), *args], cwd=course, env=env, capture_output=True, text=True,
                          timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("nbcourse")
    make_course(root)
    return root


def _solved_source(lesson, exercise: str) -> str:
    sol = nbformat.read(lesson.solution_path, as_version=4)
    src = sol.cells[solution_cell_index(sol, exercise)].source
    return "\n".join(line for line in src.splitlines() if "### BEGIN SOLUTION" not in line and "### END SOLUTION" not in line)


def _submit(course: Path, student: str, lesson, nb) -> Path:
    folder = course / "submitted" / student / lesson.id
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / lesson.notebook
    nbformat.write(nb, path)
    return path


def _test_cell(nb, exercise: str) -> int:
    return next(i for i, c in enumerate(nb.cells)
                if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == f"test_{exercise}")


@pytest.mark.parametrize("lesson", [pytest.param(l, marks=marks(l), id=l.id) for l in LESSONS])
def test_nbgrader_pipeline(course, lesson):
    nbgrader(course, "generate_assignment", lesson.id, "--force")
    release = nbformat.read(course / "release" / lesson.id / lesson.notebook, as_version=4)
    text = (course / "release" / lesson.id / lesson.notebook).read_text()
    assert "### BEGIN SOLUTION" not in text and "hidden=True" not in text

    names = [e.name for e in lesson.exercises]
    solved = copy.deepcopy(release)
    for name in names:
        solved.cells[solution_cell_index(solved, name)].source = _solved_source(lesson, name)
    mistake = importlib.import_module(lesson.module).MISTAKES[0]
    planted = copy.deepcopy(solved)
    planted.cells[solution_cell_index(planted, mistake.exercise)].source = mistake_source(mistake)
    tamper = copy.deepcopy(planted)
    tamper.cells.insert(1, nbformat.v4.new_code_cell(TAMPER))
    del tamper.cells[_test_cell(tamper, mistake.exercise)]  # deleting its autograder cell gains nothing
    other = next((n for n in names if n != mistake.exercise), None)
    if other:
        tamper.cells[_test_cell(tamper, other)].source = "pass  # edited by the student"
    paths = {s: _submit(course, s, lesson, nb) for s, nb in
             (("solved", solved), ("untouched", release), ("mistake", planted), ("tamper", tamper))}

    nbgrader(course, "autograde", lesson.id, "--force")
    nbgrader(course, "generate_feedback", lesson.id, "--force")
    out = course / f"grades-{lesson.id}.csv"
    nbgrader(course, "export", "--to", str(out), "--assignment", lesson.id)
    scores = {r["student_id"]: float(r["raw_score"]) for r in csv.DictReader(out.open()) if r["assignment"] == lesson.id}

    full = lesson.max_score
    lost = lesson.exercise(mistake.exercise).points
    assert scores["solved"] == full
    assert scores["untouched"] == 0
    # course check gives the same points for the same notebook
    assert grade_notebook(lesson, paths["mistake"]).score == scores["mistake"]
    assert grade_notebook(lesson, paths["tamper"]).score == scores["tamper"]
    # partial credit: the mistaken exercise scores nothing (later exercises that build on it may fail too)
    assert scores["mistake"] <= full - lost
    assert scores["tamper"] <= scores["mistake"]

    feedback = (course / "feedback" / "mistake" / lesson.id / lesson.notebook.replace(".ipynb", ".html")).read_text()
    assert "BEGIN HIDDEN TESTS" not in feedback and "hidden=True" not in feedback
    assert mistake.exercise in feedback
    words = re.sub(r"<[^>]+>", "", feedback)  # the report's `code` spans are <code> elements
    assert html.escape(mistake.message.replace("`", ""), quote=False) in words
