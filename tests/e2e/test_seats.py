"""One verdict in every seat: the policies every seat shares, each tested where it is applied (the slow
comparison of the seats on one mixed class is tests/test_seat_comparison.py)."""

from __future__ import annotations

import csv
import io
import json
import shutil

import nbformat
import pytest
from click.testing import CliRunner

from course_cli.classes.batch import read_roster, rows, summary, write
from course_cli.sandboxed.grading import grade_notebook
from graders.engine.verdict import error_result, missing_result
from graders.engine.notebook import pick_notebook, renamed_note
from graders.engine.results import CheckResult, ExerciseResult, LessonResult, for_students, hidden_only_line
from graders.registry import find_lesson

L01 = find_lesson("lesson01")


def test_which_notebook_is_graded_is_one_rule():
    nb = L01.notebook
    assert pick_notebook([nb, "x.ipynb"], nb) == (nb, "")
    assert pick_notebook(["mine.ipynb"], nb) == ("mine.ipynb", renamed_note("mine.ipynb", nb))
    assert pick_notebook(["a.ipynb", "lesson01_sdpa (1).ipynb"], nb)[0] == "lesson01_sdpa (1).ipynb"
    assert pick_notebook(["a.ipynb", "b.ipynb"], nb)[0] is None
    assert pick_notebook([], nb)[0] is None
    assert renamed_note("mine.ipynb", nb).startswith(f"submitted as mine.ipynb, expected {nb}")


def _graded(student_points: dict[str, float | None]) -> dict[str, LessonResult]:
    out = {}
    for s, p in student_points.items():
        if p is None:
            out[s] = error_result(L01, f"{s}.ipynb", f"{s}.ipynb is not a notebook: not valid JSON", not_graded=True)
        else:
            out[s] = LessonResult("lesson01", f"{s}.ipynb", [ExerciseResult("softmax", "passed" if p else "failed",
                                                                            p, 4.0)])
    return out


def test_not_graded_has_no_score_and_stays_out_of_the_mean(tmp_path):
    results = _graded({"ann": 4.0, "ben": 0.0, "cat": None})
    results["dan"] = missing_result(L01, "not submitted")
    info = summary(results)
    assert info["students"] == 2 and info["mean_score"] == 2.0  # ann and ben; cat and dan apart, not zeros
    assert [d["student"] for d in info["not_graded"]] == ["cat", "dan"]
    assert info["exercises"][0]["statuses"] == {"passed": 1, "failed": 1}
    by = {(r["student"], r["exercise"]): r for r in rows(results)}
    assert by["cat", "TOTAL"]["status"] == "NOT GRADED" and by["cat", "TOTAL"]["points"] == ""
    assert by["dan", "TOTAL"]["reason"] == "not submitted" and ("cat", "softmax") not in by
    out = tmp_path / "r.json"
    write(results, out)
    data = json.loads(out.read_text())
    assert data["students"]["cat"]["score"] is None and data["students"]["cat"]["not_graded"]
    assert data["summary"]["mean_score"] == 2.0
    from course_cli.instructor.report import report_data
    from course_cli.classes.batch import load

    assert sum(b["count"] for b in report_data(*load(out))["histogram"]) == 2  # the histogram: graded ones only


def test_an_unreadable_notebook_is_not_graded(tmp_path):
    bad = tmp_path / "bad.ipynb"
    bad.write_text('{"cells": [')
    result = grade_notebook(L01, bad)
    assert result.not_graded and result.score is None and "not valid JSON" in result.not_graded


def test_the_roster_gives_absentees_a_not_submitted_row(tmp_path):
    from course_cli.main import cli

    root = tmp_path / "submitted"
    (root / "ann" / "lesson01").mkdir(parents=True)
    shutil.copy(L01.solution_path, root / "ann" / "lesson01" / L01.notebook)
    roster = tmp_path / "roster.csv"
    roster.write_text("student_id,name\nann,Ann\nzed,Zed\n\n# a comment\n")
    assert read_roster(roster) == ["ann", "zed"]
    out = tmp_path / "r.csv"
    r = CliRunner().invoke(cli, ["grade", str(root), "--lesson", "lesson01", "--roster", str(roster), "--out", str(out)],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    got = {(row["student"], row["exercise"]): row for row in csv.DictReader(io.StringIO(out.read_text()))}
    assert got["zed", "TOTAL"]["status"] == "NOT GRADED" and got["zed", "TOTAL"]["reason"] == "not submitted"
    assert got["zed", "TOTAL"]["points"] == "" and got["ann", "TOTAL"]["points"] == "10.0"
    assert "1 submissions graded (1 NOT GRADED, not in the mean)" in " ".join(r.output.split())


def _result_with_a_hidden_failure():
    name = "huge magnitudes (±1e4) give no inf or NaN (fresh inputs)"
    return LessonResult("lesson01", "x.ipynb", [ExerciseResult("softmax", "failed", 0.0, 4.0, [
        CheckResult("matches the reference on random inputs", "passed"),
        CheckResult(name, "failed", message="expected 0.25 at [3, 1], got nan (SECRET)")], "DIAGNOSIS")]), name


def test_what_students_see_of_hidden_checks():
    """The README's policy: a hidden check's name and status are shown, its message (values) is not, nor a
    diagnosis the engine did not derive from the public checks alone (issue 45)."""
    import graders.lesson01_sdpa as g
    from graders.engine.checks import hidden_properties

    result, name = _result_with_a_hidden_failure()
    shown = for_students(result, hidden_properties(g.CHECKS))
    c = shown.exercises[0].checks[1]
    assert c.name == name and c.status == "failed" and "SECRET" not in c.message
    assert c.message == hidden_only_line([name])  # only a hidden check failed
    assert shown.exercises[0].diagnosis is None and shown.exercises[0].points == 0.0
    assert "SECRET" in result.exercises[0].checks[1].message  # the instructor's copy is unchanged


def test_nbgraders_feedback_follows_the_policy():
    """ApplyCourseVerdict writes the cell outputs nbgrader's feedback shows: no hidden message in them."""
    from course_cli.instructor import nbgrader_course as nc

    result, name = _result_with_a_hidden_failure()
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("grade('lesson01', 'softmax')")
    cell.metadata["nbgrader"] = {"grade_id": "test_softmax", "grade": True, "solution": False, "points": 4}
    nb.cells.append(cell)
    resources = {"nbgrader": {"notebook": "lesson01_sdpa", "student": "s1", "assignment": "lesson01"}}
    nc._IN_FLIGHT[nc._key(resources)] = result
    nb, _ = nc.ApplyCourseVerdict().preprocess(nb, resources)
    text = json.dumps(nb.cells[0].outputs, ensure_ascii=False)
    assert "SECRET" not in text and "softmax: failed" in text


def test_nbgrader_grades_a_renamed_notebook_with_the_note(tmp_path):
    from course_cli.instructor.nbgrader_course import adopt_renamed

    folder = tmp_path / "submitted" / "s1" / "lesson01"
    folder.mkdir(parents=True)
    shutil.copy(L01.solution_path, folder / "mine.ipynb")
    notebooks = [str(folder / "mine.ipynb")]
    adopt_renamed(assignment="lesson01", student="*", notebooks=notebooks)
    assert notebooks == [str(folder / L01.notebook)] and (folder / "mine.ipynb").exists()
    # the note is the course's (RepairCells drops any a submission's metadata brings), given when it is graded
    from course_cli.instructor import nbgrader_course as nc

    nb = nbformat.read(folder / L01.notebook, as_version=4)
    nb.metadata.setdefault("course", {})["notes"] = ["a note the student wrote"]
    resources = {"nbgrader": {"notebook": "lesson01_sdpa", "student": "s1", "assignment": "lesson01"}}
    nb, _ = nc.RepairCells().preprocess(nb, resources)
    assert nb.metadata["course"]["notes"] == [renamed_note("mine.ipynb", L01.notebook)]
    # graded again (autograde --force): both files are there now; the marker says the renamed file is the
    # submission, so the copy is made from it again and it alone is graded (nbgrader skips nothing)
    (folder / L01.notebook).write_text("{}")
    again = [str(folder / L01.notebook), str(folder / "mine.ipynb")]
    adopt_renamed(assignment="lesson01", student="*", notebooks=again)
    assert again == [str(folder / L01.notebook)]
    assert (folder / L01.notebook).read_bytes() == (folder / "mine.ipynb").read_bytes()


def test_gradescope_not_graded_and_renamed():
    from course_cli.instructor.gradescope import gradescope_results, hidden_names

    bad = error_result(L01, "x.ipynb", "x.ipynb is not a notebook", not_graded=True)
    data = gradescope_results(L01, bad, hidden_names(L01))
    assert "NOT GRADED: x.ipynb is not a notebook" in data["output"] and data["extra_data"]["not_graded"]
    ok = LessonResult("lesson01", "mine.ipynb", [ExerciseResult("softmax", "passed", 4.0, 4.0)],
                      note=renamed_note("mine.ipynb", L01.notebook))
    assert renamed_note("mine.ipynb", L01.notebook) in gradescope_results(L01, ok, {})["output"]


def test_a_missing_module_is_said_as_itself(tmp_path):
    from graders.engine.verdict import StudentRun, absent

    cells = [{"index": 1, "source": "import einops\nimport torch"}, {"index": 2, "source": "def softmax(x):\n  pass"}]
    run = StudentRun({}, [{"index": 1, "status": "error",
                           "error": "ModuleNotFoundError: No module named 'einops'\n  at cell 1, line 1: import einops"},
                          {"index": 2, "status": "error", "error": "NameError: name 'torch' is not defined"}])
    why = absent("softmax", {"missing": True}, run, cells)
    assert why.status == "error"
    assert why.message.startswith("the notebook imports `einops` (cell 1, line 1), which is not installed where")
