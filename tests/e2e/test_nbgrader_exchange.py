"""nbgrader's exchange, end to end (issue 47 item 7): a student who renames the notebook before submitting it is
graded, and `nbgrader fetch_feedback` brings them the feedback (nbgrader looks for it under the submitted name);
`autograde --force` grades them again with the rename's note, not "Skipping unknown notebook". When the same
student then submits a notebook cut short, nbgrader does not fail on it: it is NOT GRADED, the export's note says
the cause in the instructor's words, and the feedback the student fetches says why in theirs."""

from __future__ import annotations

import csv
import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_cli.instructor.nbgrader_course import make_course
from graders.registry import find_lesson
from nbgrader_cli import nbgrader_argv

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
L = find_lesson("lesson01")


def nbgrader(cwd: Path, exchange: Path, *args: str) -> str:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    proc = subprocess.run(nbgrader_argv(*args, f"--Exchange.root={exchange}"), cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def test_a_renamed_submission_gets_its_feedback_through_the_exchange(tmp_path):
    course, home, exchange = tmp_path / "course", tmp_path / "student", tmp_path / "exchange"
    make_course(course)
    exchange.mkdir(mode=0o777)
    home.mkdir()
    nbgrader(course, exchange, "generate_assignment", L.id)
    nbgrader(course, exchange, "release_assignment", L.id)
    nbgrader(home, exchange, "fetch_assignment", L.id, "--course", "attention-course")
    fetched = home / L.id / L.notebook
    assert fetched.is_file()
    fetched.rename(fetched.with_name("my attempt.ipynb"))  # the only notebook, under another name
    nbgrader(home, exchange, "submit", L.id, "--course", "attention-course")

    nbgrader(course, exchange, "collect", L.id)
    out = nbgrader(course, exchange, "autograde", L.id)
    assert "Skipping unknown notebook" not in out, out[-2000:]
    nbgrader(course, exchange, "generate_feedback", L.id)
    nbgrader(course, exchange, "release_feedback", L.id)
    nbgrader(home, exchange, "fetch_feedback", L.id, "--course", "attention-course")
    got = list((home / L.id / "feedback").glob("*/my attempt.html"))
    assert len(got) == 1, list((home / L.id).rglob("*"))
    page = got[0].read_text()
    assert "softmax" in page and "my attempt.ipynb" in page  # the verdict, and the rename's note

    student = next(p.name for p in (course / "submitted").iterdir())
    out = nbgrader(course, exchange, "autograde", L.id, "--force")
    assert "Skipping unknown notebook" not in out, out[-2000:]
    graded = nbformat.read(course / "autograded" / student / L.id / L.notebook, as_version=4)
    assert "my attempt.ipynb" in json.dumps(graded.cells) or "my attempt.ipynb" in json.dumps(graded.metadata)

    # the same student submits again, a notebook cut short (a save that did not finish)
    (home / L.id / "my attempt.ipynb").unlink()
    cut = '{"cells": ['
    (home / L.id / L.notebook).write_text(cut)
    nbgrader(home, exchange, "submit", L.id, "--course", "attention-course")
    nbgrader(course, exchange, "collect", "--update", L.id)
    out = nbgrader(course, exchange, "autograde", L.id, "--force")  # rc 0: nbgrader is not handed it
    assert "There was an error processing" not in out, out[-2000:]
    assert f"NOT GRADED (0 points): {student}: submitted/{student}/{L.id}/{L.notebook} is not valid JSON" in out
    assert (course / "submitted" / student / L.id / L.notebook).read_text() == cut  # as it came, for other seats
    nbgrader(course, exchange, "export", "--to", str(tmp_path / "grades.csv"))
    with open(tmp_path / "grades.csv", newline="") as fh:
        row = next(csv.DictReader(fh))
    note = row["note"]
    assert row["status"] == "NOT GRADED" and row["score"] == "", row
    assert note.startswith(f"submitted/{student}/{L.id}/{L.notebook} is not valid JSON (Expecting value, line 1, "
                           f"column 12)"), note
    assert not any(w in note for w in ("its log says why", "course reset", "submit it", "submit the")), note
    assert not re.search(r"\b(\w+) \1\b", note), note  # no "at at"
    nbgrader(course, exchange, "generate_feedback", L.id, "--force")
    nbgrader(course, exchange, "release_feedback", L.id)
    nbgrader(home, exchange, "fetch_feedback", L.id, "--course", "attention-course")
    pages = [p for p in (home / L.id / "feedback").glob(f"*/{L.notebook.removesuffix('.ipynb')}.html")]
    assert len(pages) == 1, list((home / L.id).rglob("*"))
    text = html.unescape(re.sub(r"<[^>]+>", " ", pages[0].read_text()))
    text = re.sub(r"\s+", " ", text)
    assert (f"Not graded. Your {L.notebook} is not valid JSON (Expecting value, line 1, column 12), so it could "
            f"not be opened as a notebook") in text, text[:3000]
    assert "submit it again" in text and str(course) not in text and "refused/" not in text
