"""Issue 45 item 1 through nbgrader's real exchange: `nbgrader collect` with the course's config copies no link.
A student writes into the exchange's inbound folder what they like: a submission whose notebook is a link to the
instructor's solved source/, one holding a link to a file only the instructor can read, and one that is itself a
link to source/. nbgrader's own collect (shutil.copytree) copies the targets' content in, read with the
instructor's rights (this test fails so without the course's collect); the course's collect copies none of
it, and autograde and export say NOT GRADED with the reason, beside an honest submission collected byte for byte
and graded as usual."""

from __future__ import annotations

import csv
import os
import shutil
from pathlib import Path

import pytest

from course_cli.instructor.nbgrader_course import make_course
from graders.registry import find_lesson
from test_nbgrader_exchange import nbgrader

pytestmark = pytest.mark.slow
L = find_lesson("lesson01")
SECRET = "instructor-only: 7f3a9c"


def test_collect_copies_no_link_and_the_submission_is_not_graded(tmp_path):
    course, home, exchange = tmp_path / "course", tmp_path / "student", tmp_path / "exchange"
    make_course(course)
    exchange.mkdir(mode=0o777)
    home.mkdir()
    secret = tmp_path / "grades-private.txt"
    secret.write_text(SECRET)
    secret.chmod(0o600)
    nbgrader(course, exchange, "generate_assignment", L.id)
    nbgrader(course, exchange, "release_assignment", L.id)
    nbgrader(home, exchange, "fetch_assignment", L.id, "--course", "attention-course")
    nbgrader(home, exchange, "submit", L.id, "--course", "attention-course")
    inbound = exchange / "attention-course" / "inbound"
    (honest,) = inbound.iterdir()
    me, rest = honest.name.split("+", 1)
    source = course / "source" / L.id

    def plant(student: str) -> Path:  # what a student can write into inbound (it is world-writable)
        return Path(shutil.copytree(honest, inbound / f"{student}+{rest}"))

    linker = plant("linker")
    (linker / L.notebook).unlink()
    (linker / L.notebook).symlink_to(source / L.notebook)
    peeker = plant("peeker")
    (peeker / "notes.txt").symlink_to(secret)
    (inbound / f"dirlink+{rest}").symlink_to(source, target_is_directory=True)

    out = nbgrader(course, exchange, "collect", L.id)
    submitted = course / "submitted"
    assert {p.name for p in submitted.iterdir()} == {me, "linker", "peeker", "dirlink"}, out[-2000:]
    for f in (p for p in submitted.rglob("*") if p.is_file()):
        text = f.read_text(errors="replace")
        assert "BEGIN SOLUTION" not in text and SECRET not in text, f  # nothing read through a link
    assert not [p for p in submitted.rglob("*") if p.is_symlink()]
    assert (submitted / me / L.id / L.notebook).read_bytes() == (honest / L.notebook).read_bytes()
    # the peeker's own notebook is kept for the instructor, as it came
    assert (course / "refused" / "peeker" / L.id / L.notebook).read_bytes() == (honest / L.notebook).read_bytes()
    assert "NOT GRADED" in out and "symbolic link" in out

    nbgrader(course, exchange, "autograde", L.id)
    nbgrader(course, exchange, "export")
    with open(course / "grades.csv", newline="") as fh:
        rows = {r["student_id"]: r for r in csv.DictReader(fh)}
    assert rows[me]["status"] == "graded" and float(rows[me]["score"]) == 0.0, rows[me]  # the fetched stub
    for student, named in (("linker", L.notebook), ("peeker", "notes.txt"), ("dirlink", "itself")):
        row = rows[student]
        assert row["status"] == "NOT GRADED" and row["score"] == "", row
        assert named in row["note"] and "symbolic link" in row["note"], row
