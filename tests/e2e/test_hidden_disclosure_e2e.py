"""Hidden checks disclose nothing but their name and points to students, through the real seats (issue 45,
item 3): `course check --json` and its terminal text (the sandboxed child, as a student runs it), Gradescope's
`run_autograder` in a Gradescope-like root, nbgrader's generate_assignment → autograde → generate_feedback; and
`course grade`'s JSON, the instructor's, keeps everything. The submission is the planted softmax of
tests/unit/test_hidden_disclosure.py: right on every public input, wrong only on the hidden battery's tiny inputs."""

from __future__ import annotations

import copy
import json
import re

import nbformat
import pytest
from click.testing import CliRunner

from course_cli.main import cli
from harness import solution_cell_index
from test_hidden_disclosure import HIDDEN, L01, LINE, PLANT, planted_notebook, secrets
from test_gradescope import _run, _tree, autograder  # noqa: F401 (the zip, built once)

pytestmark = pytest.mark.slow
NUMBERS = re.compile(r"\d+\.\d{2,}|expected -?\d|got -?\d|\d× \(=")  # what a check's message or diagnosis quotes


@pytest.fixture(scope="module")
def plant(tmp_path_factory):
    return planted_notebook(tmp_path_factory.mktemp("plant"))


def test_course_check_shows_the_hidden_check_s_name_only(plant):
    from harness import check_in_process

    full = check_in_process(L01, plant, ["softmax"])  # the same fixed seeds as `course check`
    assert secrets(full)
    r = CliRunner().invoke(cli, ["check", "lesson01", "softmax", "--notebook", str(plant), "--json", "--cold"])
    assert r.exit_code == 1, r.output
    data = json.loads(r.output)
    (ex,) = data["exercises"]
    assert ex["status"] == "failed" and ex["diagnosis"] is None
    assert next(c for c in ex["checks"] if c["name"] == HIDDEN)["message"] == LINE
    assert not [s for s in secrets(full) if s in r.output]
    r = CliRunner().invoke(cli, ["check", "lesson01", "softmax", "--notebook", str(plant), "--detail", "-v", "--cold"])
    text = " ".join(r.output.split())
    assert "passes the public checks; fails 1 hidden check" in text and HIDDEN in text
    assert not [s for s in secrets(full) if s in text] and not NUMBERS.search(text)


def test_course_grade_keeps_everything_for_the_instructor(plant, tmp_path):
    folder = tmp_path / "subs"
    folder.mkdir()
    (folder / "ann.ipynb").write_bytes(plant.read_bytes())
    out = tmp_path / "results.json"
    r = CliRunner().invoke(cli, ["grade", str(folder), "--lesson", "lesson01", "--out", str(out)],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    text = out.read_text()
    data = json.loads(text)
    (ex,) = [e for e in data["students"]["ann"]["exercises"] if e["id"] == "softmax"]
    row = next(c for c in ex["checks"] if c["name"] == HIDDEN)
    assert row["status"] == "failed" and re.search(r"expected \d\.\d+, got \d\.\d+", row["message"])
    assert ex["diagnosis"] and "0.5" in ex["diagnosis"]  # the instructor's diagnosis, over every check
    assert LINE not in text


def test_gradescope_shows_the_hidden_check_s_name_only(plant, autograder, tmp_path):  # noqa: F811
    data = _run(_tree(tmp_path, autograder, plant))
    by = {t["name"]: t for t in data["tests"]}
    out = by["softmax"]["output"]
    assert by["softmax"]["score"] == 0.0 and LINE in out and HIDDEN in out
    assert "Likely mistake" not in out and not NUMBERS.search(json.dumps(data, ensure_ascii=False))


def test_nbgrader_feedback_shows_the_hidden_check_s_name_only(plant, tmp_path):
    from course_cli.instructor.nbgrader_course import make_course
    from test_nbgrader import _solved_source, _submit, nbgrader

    course = tmp_path / "nbcourse"
    make_course(course)
    nbgrader(course, "generate_assignment", L01.id, "--force")
    release = nbformat.read(course / "release" / L01.id / L01.notebook, as_version=4)
    nb = copy.deepcopy(release)
    for e in L01.exercises:
        nb.cells[solution_cell_index(nb, e.name)].source = PLANT if e.name == "softmax" else _solved_source(L01, e.name)
    _submit(course, "ann", L01, nb)
    nbgrader(course, "autograde", L01.id, "--force")
    nbgrader(course, "generate_feedback", L01.id, "--force")
    feedback = (course / "feedback" / "ann" / L01.id / L01.notebook.replace(".ipynb", ".html")).read_text()
    words = " ".join(re.sub(r"<[^>]+>", "", feedback).split())
    assert "passes the public checks; fails 1 hidden check" in words
    assert "Likely mistake" not in words and "course-figure" not in feedback
    start = words.index("softmax: failed")
    assert not NUMBERS.search(words[start:start + 2000])  # the exercise's report quotes no value
