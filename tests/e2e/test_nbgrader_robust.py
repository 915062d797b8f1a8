"""Every submission accounted for, through the real `nbgrader autograde` with the course's config: a missing
definition, copied solution and autograder cells, duplicated cell ids, a cell of the wrong type, a split
cell — each gets a grade (and a note where something was repaired), nbgrader never crashes on them, a
notebook nbgrader itself cannot read is exported as NOT GRADED (named, no score, the cause), the checksum
warning appears only for a cell the student really changed, and no temporary folder survives the run."""

from __future__ import annotations

import copy
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_cli.instructor.nbgrader_course import make_course
from graders.registry import find_lesson
from nbgrader_cli import nbgrader_argv

pytestmark = pytest.mark.slow
L01 = find_lesson("lesson01")
BIN = Path(sys.executable).parent


def _gid(cell) -> str | None:
    return cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")


def test_broken_submissions_through_the_real_pipeline(tmp_path):
    course = tmp_path / "course"
    make_course(course)
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "TMPDIR": str(private_tmp)}

    def nbgrader(*args):
        p = subprocess.run(nbgrader_argv(*args), cwd=course, env=env, capture_output=True, text=True,
                           timeout=900)
        return p.returncode, p.stdout + p.stderr

    assert nbgrader("generate_assignment", "lesson01", "--force")[0] == 0
    release = nbformat.read(course / "release" / "lesson01" / L01.notebook, as_version=4)
    solved = nbformat.read(L01.solution_path, as_version=4)
    answers = {_gid(c): c.source for c in solved.cells if _gid(c) in ("softmax", "scaled_dot_product_attention")}

    def submit(student, nb, raw=False):
        folder = course / "submitted" / student / "lesson01"
        folder.mkdir(parents=True)
        (folder / L01.notebook).write_text(json.dumps(nb) if raw else nbformat.writes(nb))

    def index(nb, gid):
        return next(i for i, c in enumerate(nb.cells) if _gid(c) == gid)

    good = copy.deepcopy(release)
    for c in good.cells:
        if _gid(c) in answers:
            c.source = answers[_gid(c)]
    submit("solved", good)
    nb = copy.deepcopy(good)
    nb.cells = [c for c in nb.cells if _gid(c) != "softmax"]
    submit("missing_definition", nb)
    nb = copy.deepcopy(good)
    i = index(nb, "softmax")
    nb.cells[i + 2:i + 2] = copy.deepcopy(nb.cells[i:i + 2])  # the solution and its autograder cell, twice
    submit("copied_cells", nb)
    nb = json.loads(nbformat.writes(good))
    nb["cells"][3]["id"] = nb["cells"][2]["id"]
    submit("duplicate_ids", nb, raw=True)
    nb = copy.deepcopy(good)
    i = index(nb, "softmax")
    nb.cells[i] = nbformat.v4.new_markdown_cell(nb.cells[i].source, metadata=nb.cells[i].metadata)
    submit("wrong_type", nb)
    nb = copy.deepcopy(good)
    i = index(nb, "softmax")
    nb.cells.insert(i + 1, nbformat.v4.new_code_cell("helper = 1"))
    submit("split_cells", nb)
    nb = copy.deepcopy(good)
    i = index(nb, "test_softmax")
    nb.cells[i].source = nb.cells[i].source.replace('grade("lesson01", "softmax")', 'print("all good")')
    submit("edited_test_cell", nb)
    # one nbgrader itself cannot read (not JSON): nbgrader would fail on it (and drop the student's graded copy,
    # so no feedback); the course reads what arrived first and hands nbgrader its released notebook instead
    (course / "submitted" / "not_json" / "lesson01").mkdir(parents=True)
    (course / "submitted" / "not_json" / "lesson01" / L01.notebook).write_text('{"cells": [')

    rc, out = nbgrader("autograde", "lesson01", "--force")
    assert rc == 0 and "There was an error processing" not in out, out[-3000:]
    assert "NOT GRADED (0 points): not_json: submitted/not_json/lesson01/" in out  # named in the log
    rc, out_export = nbgrader("export", "--to", str(tmp_path / "grades.csv"))
    assert rc == 0, out_export[-3000:]
    rows = {r["student_id"]: r for r in csv.DictReader((tmp_path / "grades.csv").open())}
    # ... and the export says so: NOT GRADED, no score (not a 0 that reads as "did not submit"), and why
    assert rows["not_json"]["status"] == "NOT GRADED" and rows["not_json"]["raw_score"] == ""
    assert f"lesson01/{L01.notebook} is not valid JSON (Expecting value, line 1, column 12)" in rows["not_json"]["note"]
    assert "NOT GRADED: not_json (lesson01)" in out_export
    grades = {s: float(r["raw_score"]) for s, r in rows.items() if s != "not_json"}
    assert {r["status"] for s, r in rows.items() if s != "not_json"} == {"graded"}
    assert set(grades) == {"solved", "missing_definition", "copied_cells", "duplicate_ids", "wrong_type",
                           "split_cells", "edited_test_cell"}
    assert grades["solved"] == grades["copied_cells"] == grades["duplicate_ids"] == grades["split_cells"] == 10.0
    assert grades["edited_test_cell"] == 10.0  # the autograder cell is restored from the source
    assert grades["missing_definition"] == 0.0  # no softmax, and attention calls softmax: graded, not dropped
    checksum_warnings = [l for l in out.splitlines() if "'checksum'" in l]
    assert checksum_warnings and all("test_softmax" in l for l in checksum_warnings), checksum_warnings
    assert "copied_cells: cell" in out and "wrong_type: cell softmax" in out  # a note per student
    notes = nbformat.read(course / "autograded" / "copied_cells" / "lesson01" / L01.notebook, as_version=4).cells[0]
    assert "Grading notes" in notes.source
    graded = nbformat.read(course / "autograded" / "solved" / "lesson01" / L01.notebook, as_version=4)
    assert isinstance(graded.metadata["course"]["hidden_seed"], int)  # kept, to repeat this run
    assert not [p for p in private_tmp.iterdir() if p.name.startswith("course-")]
