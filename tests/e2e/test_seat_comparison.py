"""One mixed class graded by every seat, compared per student and exercise (issue 29): the check cell (in
process: `course_cli.incell.grade` on the notebook's cells), `course check --json`, `course grade` on the local
pool and on Dask (`--scheduler local`), nbgrader's real pipeline (generate_assignment, autograde, export) and
Gradescope's `run_autograder`. The class: solved, the stub, two catalogued mistakes, a renamed notebook, one that
is not JSON, one that imports a module the grader lacks, and a roster with an absentee."""

from __future__ import annotations

import copy
import csv
import json
import os
import shutil
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner

from course_cli.main import cli
from graders.engine import mistake_source
from graders.engine.notebook import renamed_note
from graders.registry import find_lesson
from harness import mistakes_of, solution_cell_index
from nbgrader_cli import nbgrader_argv

pytestmark = pytest.mark.slow
L01 = find_lesson("lesson01")
EXERCISES = [e.name for e in L01.exercises]
NOT_GRADED = "NOT GRADED"
SEED = "424242"


def _class(release) -> dict[str, tuple[str, object]]:
    """{student: (file name, notebook or raw text)}."""
    solved = copy.deepcopy(release)
    sol = nbformat.read(L01.solution_path, as_version=4)
    for name in EXERCISES:
        src = sol.cells[solution_cell_index(sol, name)].source
        solved.cells[solution_cell_index(solved, name)].source = "\n".join(
            ln for ln in src.splitlines() if "### BEGIN SOLUTION" not in ln and "### END SOLUTION" not in ln)
    out = {"solved": (L01.notebook, solved), "stub": (L01.notebook, release),
           "renamed": ("my attention.ipynb", solved), "broken": (L01.notebook, '{"cells": [')}
    for mid in ("no_max", "inverted_mask"):
        m = next(m for m in mistakes_of(L01) if m.id == mid)
        nb = copy.deepcopy(solved)
        nb.cells[solution_cell_index(nb, m.exercise)].source = mistake_source(m)
        out[mid] = (L01.notebook, nb)
    einops = copy.deepcopy(solved)
    first = next(c for c in einops.cells if c.cell_type == "code" and "import torch" in c.source)
    first.source = first.source.replace("import torch", "import einops\nimport torch", 1)
    out["einops"] = (L01.notebook, einops)
    return out


def _write(folder: Path, name: str, nb) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    if isinstance(nb, str):
        path.write_text(nb)
    else:
        nbformat.write(nb, path)
    return path


def _verdict(points: dict[str, float] | None, max_points: dict[str, float]) -> dict:
    if points is None:
        return {"status": NOT_GRADED}
    return {"status": "passed" if all(points[e] == max_points[e] for e in EXERCISES) else "incomplete",
            "points": {e: round(points[e], 2) for e in EXERCISES}}


@pytest.fixture(scope="module")
def seats(tmp_path_factory):
    from test_nbgrader import nbgrader

    os.environ["COURSE_HIDDEN_SEED"] = SEED  # one run's seed for every instructor's seat
    root = tmp_path_factory.mktemp("seats")
    from course_cli.instructor.nbgrader_course import make_course

    course = root / "course"
    make_course(course)
    nbgrader(course, "generate_assignment", L01.id, "--force")
    release = nbformat.read(course / "release" / L01.id / L01.notebook, as_version=4)
    klass = _class(release)
    files = {s: _write(course / "submitted" / s / L01.id, name, nb) for s, (name, nb) in klass.items()}
    roster = root / "roster.txt"
    roster.write_text("\n".join([*klass, "absent"]) + "\n")
    maxp = {e.name: float(e.points) for e in L01.exercises}
    got: dict[str, dict[str, dict]] = {}

    # course grade, local pool and Dask
    for seat, extra in (("course grade", []), ("course grade --scheduler local", ["--scheduler", "local"])):
        out = root / f"{len(got)}.json"
        r = CliRunner().invoke(cli, ["grade", str(course / "submitted"), "--lesson", L01.id, "--roster", str(roster),
                                     "--out", str(out), "--seed", SEED, *extra], catch_exceptions=False)
        assert r.exit_code in (0, 1), r.output
        data = json.loads(out.read_text())["students"]
        got[seat] = {s: _verdict(None if d.get("not_graded") else {e["id"]: e["points"] for e in d["exercises"]}, maxp)
                     | ({"note": d["note"]} if d.get("note") else {}) for s, d in data.items()}

    # course check --json, and the check cell (in process), per notebook
    import course_cli.incell as incell
    from course_cli.sandboxed.notebook import graded_cells, read_notebook

    got["course check"], got["check cell"] = {}, {}
    for s, path in files.items():
        r = CliRunner().invoke(cli, ["check", L01.id, "--notebook", str(path), "--json"], catch_exceptions=False)
        d = json.loads(r.output)
        got["course check"][s] = _verdict(None if d.get("not_graded") else
                                          {e["id"]: e["points"] for e in d["exercises"]}, maxp)
        if s == "broken":
            continue  # a kernel cannot open a notebook that is not JSON: no check cell runs
        cells = graded_cells(read_notebook(path))
        points = {}
        saved = incell.kernel_cells, incell._display, incell._record
        try:
            incell.kernel_cells, incell._display = (lambda: cells), (lambda html, text: None)
            for e in EXERCISES:
                incell._record = lambda res, e=e: points.__setitem__(e, res.exercises[0].points)
                incell.grade(L01.id, e)
        finally:
            incell.kernel_cells, incell._display, incell._record = saved
        got["check cell"][s] = _verdict(points, maxp)

    # nbgrader: autograde and the course's export; the per-exercise points from its gradebook
    import subprocess

    from test_nbgrader import BIN

    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(nbgrader_argv("autograde", L01.id, "--force"), cwd=course, env=env,
                          capture_output=True, text=True, timeout=1200)
    log = proc.stdout + proc.stderr  # the broken one is NOT GRADED, named; nbgrader is never handed it, so never fails
    assert proc.returncode == 0 and "NOT GRADED (0 points): broken: submitted/broken/" in log, log[-3000:]
    assert "for student 'renamed'" not in log, log[-3000:]
    nbgrader(course, "db", "student", "add", "absent")  # nbgrader's roster: its gradebook's students
    export = root / "grades.csv"
    nbgrader(course, "export", "--to", str(export), "--assignment", L01.id)
    from nbgrader.api import Gradebook

    rows = {r["student_id"]: r for r in csv.DictReader(export.open())}
    got["nbgrader"] = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gb:
        for s, row in rows.items():
            if row["status"] != "graded":
                got["nbgrader"][s] = {"status": NOT_GRADED}
                continue
            nb_name = L01.notebook.removesuffix(".ipynb")
            pts = {e: gb.find_grade(f"test_{e}", nb_name, L01.id, s).score for e in EXERCISES}
            got["nbgrader"][s] = _verdict(pts, maxp)
            assert float(row["raw_score"]) == pytest.approx(sum(pts.values()))
    # the note a renamed notebook gets, in nbgrader's autograded notebook (and so in its feedback)
    graded = nbformat.read(course / "autograded" / "renamed" / L01.id / L01.notebook, as_version=4)
    from course_cli.safe_text import for_markdown  # the notes cell is markdown: its text escaped as such

    if for_markdown(renamed_note("my attention.ipynb", L01.notebook), 1000) in graded.cells[0].source:
        got["nbgrader"]["renamed"]["note"] = renamed_note("my attention.ipynb", L01.notebook)

    # Gradescope's run_autograder, one submission at a time
    from test_gradescope import _run

    zip_path = root / "autograder.zip"
    r = CliRunner().invoke(cli, ["gradescope", L01.id, "--out", str(zip_path)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    got["gradescope"] = {}
    for s, path in files.items():
        tree = root / "gs" / s
        (tree / "source").mkdir(parents=True)
        import zipfile

        zipfile.ZipFile(zip_path).extractall(tree / "source")
        shutil.copy(tree / "source" / "run_autograder", tree / "run_autograder")
        (tree / "run_autograder").chmod(0o755)
        (tree / "results").mkdir()
        _write(tree / "submission", path.name, path.read_text())
        data = _run(tree)
        v = (_verdict(None, maxp) if data.get("extra_data", {}).get("not_graded") else
             _verdict({t["name"]: t["score"] for t in data["tests"]}, maxp))
        note = renamed_note(path.name, L01.notebook)
        if path.name != L01.notebook and note in data["output"]:
            v["note"] = note
        got["gradescope"][s] = v
    return got


def test_every_seat_gives_the_same_verdict_per_student_and_exercise(seats):
    base = seats["course grade"]
    assert base["solved"]["status"] == "passed" and base["stub"]["points"] == dict.fromkeys(EXERCISES, 0.0)
    assert base["broken"] == {"status": NOT_GRADED} and base["absent"] == {"status": NOT_GRADED}
    assert base["renamed"] == {**base["solved"], "note": renamed_note("my attention.ipynb", L01.notebook)}
    assert base["einops"]["points"] == dict.fromkeys(EXERCISES, 0.0)
    assert base["no_max"]["status"] == base["inverted_mask"]["status"] == "incomplete"
    for seat, verdicts in seats.items():
        for student, want in base.items():
            if student == "absent" and seat in ("course check", "check cell", "gradescope"):
                continue  # one submission at a time: only a class seat with a roster knows who is absent
            if student not in verdicts:
                assert seat == "check cell" and student == "broken", (seat, student)
                continue
            have = verdicts[student]
            if seat in ("course check", "check cell"):  # one notebook at a time: no note about its file's name
                want = {k: v for k, v in want.items() if k != "note"}
            assert have == want, (seat, student, have, want)


def test_a_missing_module_is_said_as_itself_in_every_seat_that_explains(seats, tmp_path):
    from course_cli.sandboxed.grading import grade_notebook

    path = tmp_path / L01.notebook
    klass = _class(nbformat.read(L01.student_path, as_version=4))
    nbformat.write(klass["einops"][1], path)
    result = grade_notebook(L01, path)
    assert all("imports `einops`" in ex.reason for ex in result.exercises), [ex.reason for ex in result.exercises]
