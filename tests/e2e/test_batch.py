"""`course grade`: a class graded in parallel; a hanging or crashing submission is recorded and the
batch goes on; CSV/JSON exports; pass rates and frequent mistakes; re-grading one student."""

from __future__ import annotations

import csv
import json
import shutil

import nbformat
import pytest
from click.testing import CliRunner

from course_cli.sandboxed import sandbox
from course_cli.main import cli
from graders.registry import find_lesson
from harness import mistakes_of, with_code, with_mistake
from harness import set_limit

L01 = find_lesson("lesson01")


@pytest.fixture
def flat(tmp_path, monkeypatch):
    set_limit(monkeypatch, "cell_timeout", 2.0)
    set_limit(monkeypatch, "exercise_timeout", 3.0)
    folder = tmp_path / "subs"
    folder.mkdir()
    shutil.copy(L01.solution_path, folder / "alice.ipynb")
    shutil.copy(L01.student_path, folder / "bob.ipynb")
    m = next(m for m in mistakes_of(L01) if m.id == "no_scaling")
    shutil.copy(with_mistake(L01, m, tmp_path), folder / "carol.ipynb")
    shutil.copy(with_mistake(L01, m, tmp_path), folder / "dan.ipynb")
    hang = with_code(L01, "softmax", "def softmax(x, dim=-1):\n    while True:\n        pass\n", tmp_path)
    shutil.copy(hang, folder / "erin.ipynb")
    crash = nbformat.read(L01.solution_path, as_version=4)
    crash.cells.insert(2, nbformat.v4.new_code_cell("import os\nos._exit(3)"))
    nbformat.write(crash, folder / "frank.ipynb")
    (folder / "gina.ipynb").write_text("{ truncated")
    return folder


def test_grade_a_flat_folder_to_csv(flat, tmp_path):
    out = tmp_path / "results.csv"
    r = CliRunner().invoke(cli, ["grade", str(flat), "--lesson", "1", "--jobs", "2", "--out", str(out)],
                           catch_exceptions=False)
    assert r.exit_code == 1, r.output  # gina's notebook could not be graded: the exit code says so
    assert "could not grade 1 submission(s): gina" in r.output
    rows = list(csv.DictReader(out.open()))
    by = {(x["student"], x["exercise"]): x for x in rows}
    assert len(rows) == 6 * 3 + 1  # two exercises and the TOTAL row per graded student; gina: NOT GRADED, one row
    assert by[("alice", "softmax")]["status"] == "passed"
    assert by[("bob", "softmax")]["status"] == "not_implemented"
    assert by[("carol", "scaled_dot_product_attention")]["diagnosis"].startswith("the scores are not divided")
    assert by[("erin", "softmax")]["status"] == "timeout"
    assert by[("frank", "softmax")]["status"] == "error" and "ended the grading process" in by[("frank", "softmax")]["reason"]
    assert by[("gina", "TOTAL")]["status"] == "NOT GRADED" and "not valid JSON" in by[("gina", "TOTAL")]["reason"]
    assert by[("gina", "TOTAL")]["points"] == ""  # no score: never a 0 that reads as graded
    assert "Most frequent mistakes" in r.output and "2 " in r.output  # carol and dan share a mistake
    assert "pass rate" in r.output


def test_regrade_one_student_keeps_the_others(flat, tmp_path):
    out = tmp_path / "results.json"
    CliRunner().invoke(cli, ["grade", str(flat), "--lesson", "1", "--out", str(out)], catch_exceptions=False)
    before = json.loads(out.read_text())
    shutil.copy(L01.solution_path, flat / "bob.ipynb")  # bob fixes his notebook
    r = CliRunner().invoke(cli, ["grade", str(flat), "--lesson", "1", "--student", "bob", "--out", str(out)],
                           catch_exceptions=False)
    assert r.exit_code == 0
    after = json.loads(out.read_text())
    assert set(after["students"]) == set(before["students"])
    assert after["students"]["bob"]["score"] == 10.0
    assert after["students"]["carol"] == before["students"]["carol"]


def test_nbgrader_layout_and_unknown_student(tmp_path):
    sub = tmp_path / "course" / "submitted" / "zoe" / "lesson01"
    sub.mkdir(parents=True)
    shutil.copy(L01.solution_path, sub / L01.notebook)
    r = CliRunner().invoke(cli, ["grade", str(tmp_path / "course"), "--lesson", "lesson01"], catch_exceptions=False)
    assert r.exit_code == 0 and "100%" in r.output
    r = CliRunner().invoke(cli, ["grade", str(tmp_path / "course"), "--lesson", "lesson01", "--student", "yann"])
    assert r.exit_code == 2 and "no submission of lesson01 for: yann" in r.output


def test_renamed_and_missing_notebooks_are_accounted_for(tmp_path):
    """A notebook saved under another name is graded and said so; a folder with nothing gradable is a row
    with the reason: nobody is dropped."""
    root = tmp_path / "submitted"
    for student, names in {"alice": [L01.notebook], "bob": ["lesson01_sdpa-Copy1.ipynb"],
                           "carol": ["scratch.ipynb", "other.ipynb"], "dan": []}.items():
        folder = root / student / "lesson01"
        folder.mkdir(parents=True)
        for name in names:
            shutil.copy(L01.solution_path, folder / name)
    out = tmp_path / "r.json"
    r = CliRunner().invoke(cli, ["grade", str(root), "--lesson", "1", "--out", str(out)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert f"bob: submitted as lesson01_sdpa-Copy1.ipynb, expected {L01.notebook}" in r.output
    data = json.loads(out.read_text())["students"]
    assert set(data) == {"alice", "bob", "carol", "dan"}
    assert data["alice"]["score"] == data["bob"]["score"] == 10.0
    assert data["bob"]["note"].startswith("submitted as lesson01_sdpa-Copy1.ipynb")
    assert data["carol"]["score"] is data["dan"]["score"] is None  # NOT GRADED: no score, not a 0
    assert data["carol"]["not_graded"] and data["dan"]["not_graded"]
    assert "rename the one to grade" in data["carol"]["exercises"][0]["checks"][0]["message"]
    assert "no notebook in" in data["dan"]["exercises"][0]["checks"][0]["message"]
