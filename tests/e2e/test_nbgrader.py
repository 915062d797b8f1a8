"""The instructor's path, driven through nbgrader's real commands for every lesson in the registry:
generate_assignment → autograde → generate_feedback (no hidden tests in the HTML) → export (CSV). Every
lesson's class holds a solved submission and a planted mistake (its feedback must name that lesson's mistake);
`course check` must give the same points as nbgrader for the same notebook.

The untouched release and a tampering twin of the planted mistake are submitted for the lessons of
`WHOLE_CLASS` only: what they test does not depend on the lesson (nbgrader's code stub, the same for every
solution region, scores nothing; a cell that patches the grader runs inside the sandbox, and a deleted or edited
autograder cell comes back from the source), so two lessons stand for all: lesson01, two functions, and lesson10,
the lesson with the most exercises (ten autograder cells to delete or edit, classes and a config whose stubs are
the likeliest to score by accident). Each nbgrader command runs once for every lesson at hand (nbgrader takes
an assignment glob): a command's start (nbgrader, the course's config, torch) is paid once, not once a lesson."""

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
from nbgrader_cli import nbgrader_argv

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
    """Run an nbgrader command in `course`. COURSE_MUTANT_BUDGET=0: autograde's reference (one per lesson, trusted,
    in that process's memory) probes no mutation candidate. The feedback this test reads names the planted
    mistake from the catalogue, which is probed whatever the budget, and the points never depend on a mutant; the
    engine's candidates cost up to 2 s per exercise, about 100 s of this test's CPU for nothing it checks."""
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # nbgrader runs `alembic`
           "COURSE_MUTANT_BUDGET": "0"}
    proc = subprocess.run(nbgrader_argv(*args), cwd=course, env=env, capture_output=True, text=True,
                          timeout=1200)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


WHOLE_CLASS = ("lesson01", "lesson10")  # the lessons whose class also holds the untouched and tampering twins


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


def _class(course: Path, lesson) -> dict[str, Path]:
    """The lesson's submissions from its released notebook: {student: path}."""
    release = nbformat.read(course / "release" / lesson.id / lesson.notebook, as_version=4)
    names = [e.name for e in lesson.exercises]
    solved = copy.deepcopy(release)
    for name in names:
        solved.cells[solution_cell_index(solved, name)].source = _solved_source(lesson, name)
    mistake = importlib.import_module(lesson.module).MISTAKES[0]
    planted = copy.deepcopy(solved)
    planted.cells[solution_cell_index(planted, mistake.exercise)].source = mistake_source(mistake)
    klass = [("solved", solved), ("mistake", planted)]
    if lesson.id in WHOLE_CLASS:
        tamper = copy.deepcopy(planted)
        tamper.cells.insert(1, nbformat.v4.new_code_cell(TAMPER))
        del tamper.cells[_test_cell(tamper, mistake.exercise)]  # deleting its autograder cell gains nothing
        other = next((n for n in names if n != mistake.exercise), None)
        if other:
            tamper.cells[_test_cell(tamper, other)].source = "pass  # edited by the student"
        klass += [("untouched", release), ("tamper", tamper)]
    return {s: _submit(course, s, lesson, nb) for s, nb in klass}


@pytest.fixture(scope="module")
def graded(tmp_path_factory, request):
    """The lessons this session runs (every lesson, or those `-k`/`-m` kept), each with its class submitted,
    through one run of each nbgrader command: {lesson id: {student: path}}, the course folder, the scores
    {lesson id: {student: raw score}} from the export."""
    wanted = {item.callspec.params["lesson"].id for item in request.session.items
              if item.module is request.module and hasattr(item, "callspec")}
    lessons = [l for l in LESSONS if l.id in wanted]
    course = tmp_path_factory.mktemp("nbcourse")
    make_course(course)
    # nbgrader takes an assignment glob: every lesson in one command; a few lessons, one command each
    assignments = ["*"] if len(lessons) == len(LESSONS) else [l.id for l in lessons]
    for a in assignments:
        nbgrader(course, "generate_assignment", a, "--force")
    paths = {l.id: _class(course, l) for l in lessons}
    for a in assignments:
        nbgrader(course, "autograde", a, "--force")
        nbgrader(course, "generate_feedback", a, "--force")
    out = course / "grades.csv"
    nbgrader(course, "export", "--to", str(out))
    scores: dict[str, dict[str, float]] = {}
    for r in csv.DictReader(out.open()):  # a student of the gradebook who did not submit this lesson: "not submitted"
        if r["status"] != "not submitted":
            scores.setdefault(r["assignment"], {})[r["student_id"]] = (float(r["raw_score"]) if r["status"] == "graded"
                                                                       else r["status"])
    return paths, course, scores


@pytest.mark.parametrize("lesson", [pytest.param(l, marks=marks(l), id=l.id) for l in LESSONS])
def test_nbgrader_pipeline(graded, lesson):
    all_paths, course, all_scores = graded
    paths, scores = all_paths[lesson.id], all_scores[lesson.id]
    text = (course / "release" / lesson.id / lesson.notebook).read_text()
    assert "### BEGIN SOLUTION" not in text and "hidden=True" not in text
    assert sorted(scores) == sorted(paths)  # every submission graded and exported, and only those
    mistake = importlib.import_module(lesson.module).MISTAKES[0]

    full = lesson.max_score
    lost = lesson.exercise(mistake.exercise).points
    assert scores["solved"] == full
    # course check gives the same points for the same notebook
    assert grade_notebook(lesson, paths["mistake"]).score == scores["mistake"]
    # partial credit: the mistaken exercise scores nothing (later exercises that build on it may fail too)
    assert scores["mistake"] <= full - lost
    if lesson.id in WHOLE_CLASS:
        assert scores["untouched"] == 0
        assert grade_notebook(lesson, paths["tamper"]).score == scores["tamper"]
        assert scores["tamper"] <= scores["mistake"]

    feedback = (course / "feedback" / "mistake" / lesson.id / lesson.notebook.replace(".ipynb", ".html")).read_text()
    assert "BEGIN HIDDEN TESTS" not in feedback and "hidden=True" not in feedback
    assert mistake.exercise in feedback
    words = re.sub(r"<[^>]+>", "", feedback)  # the report's `code` spans are <code> elements
    assert html.escape(mistake.message.replace("`", ""), quote=False) in words


def test_the_whole_class_lessons_exist():
    """WHOLE_CLASS names lessons of the registry (a renamed lesson would silently drop the untouched and
    tampering twins)."""
    assert set(WHOLE_CLASS) <= {l.id for l in LESSONS}
