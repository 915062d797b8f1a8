"""Every command of the CLI on every kind of bad notebook: a clear message and a clean exit code, never a
traceback (issue 47 item 1). In process, with click's CliRunner, so an exception that escapes a command is
`result.exception` (anything but SystemExit is a traceback a person would have seen)."""

from __future__ import annotations

import json
import shutil
import types
from pathlib import Path

import pytest
from click.testing import CliRunner

from course_cli.main import cli
from graders.registry import LESSONS, find_lesson

L01 = find_lesson("lesson01")
L05 = find_lesson("lesson05")  # a lesson with a benchmark

BAD = {
    "missing": None,
    "directory": "dir",
    "empty": b"",
    "truncated": b'{"cells": [{"cell_type": "code", "sou',
    "binary": bytes(range(256)) * 8,
    "not_a_notebook": b'{"hello": [1, 2, 3]}',
    "no_lesson_cells": json.dumps({"cells": [{"cell_type": "code", "source": "x = 1", "metadata": {},
                                              "outputs": [], "execution_count": None}],
                                   "metadata": {}, "nbformat": 4, "nbformat_minor": 5}).encode(),
}
# kinds the grader cannot read: NOT GRADED, the message, exit code 2
UNREADABLE = {"missing", "directory", "empty", "truncated", "binary", "not_a_notebook"}


def plant(path: Path, kind: str) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    value = BAD[kind]
    if value == "dir":
        path.mkdir(parents=True)
        (path / "inside.txt").write_text("a folder where the notebook should be")
    elif value is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(value)


def invoke(*args: str, **kw):
    r = CliRunner().invoke(cli, list(args), **kw)
    escaped = r.exception if r.exception is not None and not isinstance(r.exception, SystemExit) else None
    assert escaped is None, f"course {' '.join(args)}: {escaped!r}\n{r.output}"
    assert "Traceback" not in r.output, r.output
    assert r.exit_code in (0, 1, 2), (r.exit_code, r.output)
    return r


@pytest.fixture(params=sorted(BAD))
def bad(request, tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    (ws / ".course").mkdir(parents=True)
    (ws / "lessons").mkdir()
    for lesson in LESSONS:
        shutil.copy(lesson.student_path, ws / "lessons" / lesson.notebook)
    for lesson in (L01, L05):
        plant(ws / "lessons" / lesson.notebook, request.param)
    monkeypatch.setenv("COURSE_WORKSPACE", str(ws))
    monkeypatch.setenv("COURSE_WARM", "0")  # no warm server outliving the test
    monkeypatch.chdir(tmp_path)
    return request.param, ws


def test_every_command_on_a_bad_notebook(bad, tmp_path, monkeypatch):
    kind, ws = bad
    nb = ws / "lessons" / L01.notebook

    # the student's commands that read the notebook: the message, a clean non-zero exit, NOT GRADED recorded
    for args in (["check", "lesson01"], ["check", "lesson01", "softmax", "--detail"], ["check", "lesson01", "--json"]):
        r = invoke(*args)
        assert r.exit_code != 0, r.output
        if kind in UNREADABLE:
            assert r.exit_code == 2, r.output
            assert "Score" not in r.output
            if "--json" in args:
                data = json.loads(r.stdout)
                assert data["score"] is None and data["not_graded"]
            else:
                assert "NOT GRADED" in r.output and r.output.replace("\n", "").count(str(nb)) == 1, r.output
    progress = json.loads((ws / ".course" / "progress.json").read_text())
    attempts = progress["lessons"]["lesson01"]["attempts"]
    assert len(attempts) == 3
    if kind in UNREADABLE:
        assert all(a["score"] is None and a["not_graded"] and a["exercises"] == {} for a in attempts)
    r = invoke("status")
    assert r.exit_code == 0
    row = next(line for line in r.output.splitlines() if line.strip().startswith("lesson01"))
    if kind in UNREADABLE:
        assert "not graded" in row and "0/10" not in row.split()[2:3], row
        assert "your last check was not graded" in r.output
        assert json.loads(invoke("status", "--json").output)["lessons"][0]["last_points"] is None
    if kind not in ("missing", "directory"):
        r = invoke("check", "lesson01", "--notebook", str(nb))
        assert r.exit_code == (2 if kind in UNREADABLE else 1), r.output

    # watch, bounded: the first look at the file, then Ctrl-C
    import course_cli.student.watch as watch_mod

    sleeps = []

    def sleep(s):
        sleeps.append(s)
        if len(sleeps) > 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(watch_mod, "time", types.SimpleNamespace(sleep=sleep, strftime=watch_mod.time.strftime))
    r = invoke("watch", "lesson01")
    assert "Stopped watching" in r.output and "Score" not in r.output.split("lesson01")[-1] or kind not in UNREADABLE
    monkeypatch.undo()
    monkeypatch.setenv("COURSE_WORKSPACE", str(ws))
    monkeypatch.setenv("COURSE_WARM", "0")
    monkeypatch.chdir(tmp_path)

    r = invoke("bench", "lesson05")
    assert r.exit_code != 0 or kind == "no_lesson_cells", r.output
    for args in (["list"], ["hint", "lesson01", "softmax"], ["lab", "--help"], ["lab", "lesson01", "--print-command"],
                 ["watch", "--help"], ["build", "--check"]):
        assert invoke(*args).exit_code == 0, args

    # the instructor's: a class folder holding the bad notebook, its results and report
    subs = tmp_path / "submitted" / "student1" / "lesson01"
    subs.mkdir(parents=True)
    plant(subs / L01.notebook, kind)
    r = invoke("grade", str(tmp_path / "submitted"), "--lesson", "lesson01", "--out", str(tmp_path / "r.json"),
               "--jobs", "1")
    results = json.loads((tmp_path / "r.json").read_text())
    row = results["students"]["student1"] if "students" in results else results
    if kind in UNREADABLE:  # a grader error exits 1; nothing there to grade is the student's NOT GRADED row
        assert r.exit_code == 1 or "not_graded" in json.dumps(row), (r.output, row)
    if (tmp_path / "r.json").exists():
        r = invoke("report", str(tmp_path / "r.json"), "--out", str(tmp_path / "r.html"))
        assert r.exit_code == 0, r.output
    # the results file itself bad: the report says so
    plant(tmp_path / "bad.json", kind if kind not in ("missing", "directory") else "truncated")
    assert invoke("report", str(tmp_path / "bad.json"), "--out", str(tmp_path / "b.html")).exit_code == 2

    course = tmp_path / "course"
    plant(course / "source" / "lesson01" / L01.notebook, kind)  # the bad notebook where nbgrader's source goes
    invoke("nbgrader", str(course), "--no-pack")
    invoke("gradescope", "lesson01", "--out", str(tmp_path / "a.zip"))
    invoke("classroom", "lesson01", "--dir", str(tmp_path / "tpl"), "--package", "attention-course")
    plant(tmp_path / "pack", kind if kind != "missing" else "directory")
    invoke("pack", str(tmp_path / "pack"))
    r = invoke("reset", "lesson01")
    if kind == "directory":
        assert r.exit_code == 2 and "move it aside" in r.output and nb.is_dir()
    else:
        assert r.exit_code == 0 and json.loads(nb.read_text())["cells"]
        if kind != "missing":
            assert list((ws / ".course" / "backups").glob("lesson01*")), "the bad notebook was not backed up"


def test_a_missing_notebook_points_at_a_renamed_copy(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    (ws / ".course").mkdir(parents=True)
    (ws / "lessons").mkdir()
    shutil.copy(L01.student_path, ws / "lessons" / "lesson01_sdpa (copy).ipynb")
    monkeypatch.setenv("COURSE_WORKSPACE", str(ws))
    monkeypatch.setenv("COURSE_WARM", "0")
    r = invoke("check", "lesson01")
    assert r.exit_code == 2
    assert "lesson01_sdpa (copy).ipynb" in r.output and "--notebook FILE" in r.output, r.output
