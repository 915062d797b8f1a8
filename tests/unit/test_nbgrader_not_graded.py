"""A NOT GRADED nbgrader submission, in two wordings (issue 47 item 7): the export's note and the autograde log
say the cause in the instructor's words (where the file is, what it is, where it was moved; no student command,
no "its log says why"), the feedback says it in the student's (their notebook's name, no instructor folder,
what they can do). What arrived unreadable is stood in for while nbgrader reads it, then put back (other seats
read submitted/); nothing in refused/ is overwritten; the feedback copied under a renamed submission's name is
written through course_cli/atomic.py (a planted link is not followed).
The same steps through the real nbgrader exchange: tests/e2e/test_nbgrader_exchange.py."""

from __future__ import annotations

import json
import re

import nbformat
import pytest

from course_cli.instructor import nbgrader_course as nc
from graders.registry import find_lesson

L01 = find_lesson("lesson01")
CUT = b'{"cells": ['
DOUBLED = re.compile(r"\b(\w+) \1\b", re.I)  # "at at"
STUDENT_COMMANDS = ("course reset", "submit it again", "submit the notebook", "Submit ")


def _instructor_words(text: str) -> None:
    assert "its log says why" not in text and not DOUBLED.search(text), text
    assert not any(c in text for c in STUDENT_COMMANDS), text


def _student_words(text: str, *private: str) -> None:
    assert not DOUBLED.search(text), text
    assert not any(p in text for p in private + ("submitted/", "refused/")), text


def _course(tmp_path, student: str, data: bytes | None = None):
    course = tmp_path / "course"
    release = course / "release" / "lesson01"
    release.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("released")]),
                   release / L01.notebook)
    folder = course / "submitted" / student / "lesson01"
    folder.mkdir(parents=True)
    if data is not None:
        (folder / L01.notebook).write_bytes(data)
    return course, folder / L01.notebook


@pytest.mark.parametrize("data, words", [
    (b"\xff\xfe{}", "not UTF-8"),
    (b"  \n", "is empty"),
    (CUT, "not valid JSON (Expecting value, line 1, column 12)"),
    (b'{"a": 1}', "not a Jupyter notebook"),
    (b'{"cells": 3, "nbformat": 4, "nbformat_minor": 5, "metadata": {}}', "not a notebook nbformat can read"),
])
def test_what_nbgrader_cannot_read_is_said_in_both_wordings(data, words):
    instructor, student = nc._unreadable(data)
    assert words in instructor and words in student
    _instructor_words(instructor)
    _student_words(student)
    good = nbformat.writes(nbformat.v4.new_notebook()).encode()
    assert nc._unreadable(good) is None  # what nbformat reads is left to the course's grading


def test_an_unreadable_submission_is_stood_in_for_while_nbgrader_reads_then_put_back(tmp_path):
    course, path = _course(tmp_path, "cut", CUT)
    aside = course / "refused" / "cut" / "lesson01" / L01.notebook
    aside.parent.mkdir(parents=True)
    aside.write_text("an earlier refusal")
    nc._check_arrived([str(path)])
    assert aside.read_bytes() == CUT  # as it came, while nbgrader reads the stand-in
    assert [p.read_text() for p in aside.parent.glob("*.bak")] == ["an earlier refusal"]  # never overwritten
    stand_in = nbformat.read(path, as_version=4)
    assert [c.source for c in stand_in.cells] == ["released"]
    instructor, student = stand_in.metadata["course"]["refused"], stand_in.metadata["course"]["refused_student"]
    assert instructor == (f"submitted/cut/lesson01/{L01.notebook} is not valid JSON (Expecting value, line 1, "
                          f"column 12): a notebook cut short when it was saved, or not a notebook")
    _instructor_words(instructor)
    assert student.startswith(f"Your {L01.notebook} is not valid JSON") and "submit it again" in student
    _student_words(student, str(tmp_path))
    # nbgrader's first autograde step: the submission is back where every other seat reads it (`course grade`)
    resources = {"nbgrader": {"student": "cut", "assignment": "lesson01", "notebook": L01.notebook[:-6]}}
    nc.StartCourseGrading().preprocess(stand_in, resources)
    assert path.read_bytes() == CUT and not aside.exists()
    why = nc._IN_FLIGHT.pop(nc._key(resources))
    assert (why.cause, why.student) == (instructor, student)


def test_a_link_is_named_with_its_target_for_the_instructor_and_not_for_the_student(tmp_path):
    course, path = _course(tmp_path, "linked")
    secret = tmp_path / "instructor-only.ipynb"
    secret.write_text("solved")
    path.symlink_to(secret)
    nc._check_arrived([str(path)])
    aside = course / "refused" / "linked" / "lesson01" / L01.notebook
    assert aside.is_symlink() and secret.read_text() == "solved"
    meta = nbformat.read(path, as_version=4).metadata["course"]
    assert f"is a symbolic link to {secret}" in meta["refused"]
    _instructor_words(meta["refused"])
    assert "symbolic link" in meta["refused_student"] and "Submit the notebook file itself" in meta["refused_student"]
    _student_words(meta["refused_student"], str(tmp_path), secret.name)


def test_a_not_graded_notebook_tells_the_student_why_first_and_the_export_the_instructors_words():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("x = 1", metadata={"nbgrader": {"grade": True, "solution": False,
                                                                  "grade_id": "test_softmax", "points": 4}})])
    why = nc.NotJudged("submitted/a/lesson01/x.ipynb is a FIFO", "What you submitted as x.ipynb is a FIFO_thing.")
    for _ in range(2):  # graded again: one such cell, not two
        nb = nc._not_judged(nb, why)
    first = nb.cells[0]
    assert first.cell_type == "markdown" and first.source.startswith("**Not graded.** What you submitted as x.ipynb")
    assert "FIFO&#95;thing" in first.source  # the student's text, escaped as Markdown
    assert all(len(line) <= 80 for line in first.source.splitlines())
    assert [c.metadata.get("course", {}).get("role") for c in nb.cells].count(nc.NOT_GRADED_ROLE) == 1
    errors = [o for o in nb.cells[1].outputs if o.output_type == "error"]
    assert errors and "What you submitted as x.ipynb" in errors[0].evalue and "submitted/" not in errors[0].evalue
    assert nb.metadata["course"]["not_graded"] == "submitted/a/lesson01/x.ipynb is a FIFO"


def test_the_export_says_what_nbgrader_failed_on_not_where_to_look(tmp_path):
    course, path = _course(tmp_path, "late", CUT)  # arrived before the course checked what arrives
    note = nc.CourseExport._failed(path.parent, L01.notebook)
    assert note.startswith(f"{L01.notebook} is not valid JSON (Expecting value, line 1, column 12)")
    assert note.endswith("nbgrader could not grade it and removed the graded copy")
    _instructor_words(note)
    nbformat.write(nbformat.v4.new_notebook(), path)
    note = nc.CourseExport._failed(path.parent, L01.notebook)
    assert "reads as a notebook, but nbgrader stopped" in note and "`nbgrader autograde ASSIGNMENT --student ID" in note
    _instructor_words(note)


def test_the_feedback_copied_under_a_renamed_submissions_name_does_not_follow_a_planted_link(tmp_path):
    course = tmp_path / "course"
    submitted = course / "submitted" / "ren" / "lesson01"
    feedback = course / "feedback" / "ren" / "lesson01"
    autograded = course / "autograded" / "ren" / "lesson01"
    for f in (submitted, feedback, autograded):
        f.mkdir(parents=True)
    (submitted / nc.ADOPTED_MARK).write_text(json.dumps({"submitted": "mine.ipynb", "note": "renamed"}))
    graded = feedback / (L01.notebook.removesuffix(".ipynb") + ".html")
    graded.write_text("<p>feedback</p>")
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    (feedback / "mine.html").symlink_to(victim)
    nc.feedback_under_submitted_names("lesson01", "ren", [str(autograded / L01.notebook)])
    assert victim.read_text() == "keep"
    assert not (feedback / "mine.html").is_symlink() and (feedback / "mine.html").read_text() == "<p>feedback</p>"


def test_an_assignment_the_installed_course_has_no_lesson_for_is_not_graded_with_both_wordings():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("x = 1", metadata={"nbgrader": {"grade": True, "solution": False,
                                                                  "grade_id": "test_x", "points": 1}})])
    resources = {"nbgrader": {"student": "s1", "assignment": "lesson99", "notebook": "mystery"}}
    nb, _ = nc.StartCourseGrading().preprocess(nb, resources)
    nb, _ = nc.ApplyCourseVerdict().preprocess(nb, resources)
    instructor = nb.metadata["course"]["not_graded"]
    assert instructor.startswith(f"the installed course ({nc.course_version()}) has no lesson 'mystery'")
    _instructor_words(instructor)
    student = nb.metadata["course"]["not_graded_student"]
    assert student.startswith("The course installed where your notebook mystery.ipynb is graded has no lesson")
    _student_words(student, nc.course_version())
    assert nb.cells[0].source.startswith("**Not graded.** The course installed where your notebook")
