"""The student's commands: init, reset (with backups), watch (driven by file writes), status, version."""

from __future__ import annotations

import json
import re
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner

from course_cli.main import cli
from graders.registry import LESSONS, find_lesson
from harness import solution_cell_index

L01 = find_lesson("lesson01")


def run(*args, cwd=None):
    if cwd:
        old = os.getcwd()
        os.chdir(cwd)
    try:
        return CliRunner().invoke(cli, list(args), catch_exceptions=False)
    finally:
        if cwd:
            os.chdir(old)


@pytest.fixture
def ws(tmp_path, monkeypatch):
    monkeypatch.delenv("COURSE_WORKSPACE", raising=False)
    r = run("init", str(tmp_path / "ws"))
    assert r.exit_code == 0, r.output
    return tmp_path / "ws"


def test_init_copies_every_lesson_and_never_overwrites(ws):
    for lesson in LESSONS:
        assert (ws / "lessons" / lesson.notebook).read_text() == lesson.student_path.read_text()
    mine = ws / "lessons" / L01.notebook
    mine.write_text(mine.read_text().replace("raise NotImplementedError()", "return 42", 1))
    (ws / "lessons" / LESSONS[-1].notebook).unlink()
    r = run("init", str(ws))
    assert "return 42" in mine.read_text()  # untouched
    assert (ws / "lessons" / LESSONS[-1].notebook).exists()  # the missing one is added back
    assert "kept" in r.output and "added" in r.output


def test_commands_find_the_workspace_from_a_subfolder(ws):
    sub = ws / "lessons"
    r = run("check", "lesson01", "--json", cwd=sub)
    assert json.loads(r.output)["notebook"] == str(ws / "lessons" / L01.notebook)
    assert (ws / ".course" / "progress.json").exists()


def _solve(path: Path, exercise: str):
    nb = nbformat.read(path, as_version=4)
    ref = nbformat.read(L01.solution_path, as_version=4)
    nb.cells[solution_cell_index(nb, exercise)].source = ref.cells[solution_cell_index(ref, exercise)].source
    nbformat.write(nb, path)


def test_reset_one_exercise_keeps_the_rest_and_backs_up(ws):
    path = ws / "lessons" / L01.notebook
    _solve(path, "softmax")
    _solve(path, "scaled_dot_product_attention")
    before = path.read_text()
    r = run("reset", "lesson01", "softmax", cwd=ws)
    assert r.exit_code == 0 and "backed up" in r.output
    backups = list((ws / ".course" / "backups").glob("*.ipynb"))
    assert len(backups) == 1 and backups[0].read_text() == before
    nb = nbformat.read(path, as_version=4)
    assert "raise NotImplementedError()" in nb.cells[solution_cell_index(nb, "softmax")].source
    assert "### BEGIN SOLUTION" not in nb.cells[solution_cell_index(nb, "softmax")].source
    assert "raise NotImplementedError()" not in nb.cells[solution_cell_index(nb, "scaled_dot_product_attention")].source


def test_reset_restores_a_deleted_cell_before_its_check(ws):
    path = ws / "lessons" / L01.notebook
    nb = nbformat.read(path, as_version=4)
    del nb.cells[solution_cell_index(nb, "softmax")]
    nbformat.write(nb, path)
    run("reset", "lesson01", "softmax", cwd=ws)
    nb = nbformat.read(path, as_version=4)
    i = solution_cell_index(nb, "softmax")
    assert nb.cells[i + 1].metadata["nbgrader"]["grade_id"] == "test_softmax"


def test_reset_whole_notebook_even_when_corrupt(ws):
    path = ws / "lessons" / L01.notebook
    path.write_text("{ not json")
    r = CliRunner().invoke(cli, ["reset", "lesson01", "softmax", "--notebook", str(path)])
    assert r.exit_code == 2 and "course reset lesson01" in r.output
    r = run("reset", "lesson01", cwd=ws)
    assert r.exit_code == 0
    assert path.read_text() == L01.student_path.read_text()
    assert any(b.read_text() == "{ not json" for b in (ws / ".course" / "backups").glob("*.ipynb"))


def test_status_dashboard(ws):
    run("check", "lesson01", cwd=ws)
    r = run("status", "--json", cwd=ws)
    row = json.loads(r.output)["lessons"][0]
    assert row["attempts"] == 1 and row["points"] == 0 and row["next"] == "softmax"
    assert row["last_attempt"] is not None
    r = run("status", cwd=ws)
    assert "just now" in r.output and "0/10" in r.output


def test_version_and_no_color(ws, monkeypatch):
    r = run("--version")
    assert r.exit_code == 0 and "course" in r.output
    out = subprocess.run([sys.executable, "-m", "course_cli", "list"], capture_output=True, text=True,
                         env={**os.environ, "NO_COLOR": "1", "FORCE_COLOR": "1"})
    assert not re.search(r"\x1b\[(\d+;)*(3\d|9[0-7])(;\d+)*m", out.stdout) and "lesson01" in out.stdout
    out = subprocess.run([sys.executable, "-m", "course_cli", "list"], capture_output=True, text=True)
    assert "\x1b[" not in out.stdout  # not a terminal: plain text


@pytest.mark.slow
def test_watch_rechecks_on_save_and_stops_on_ctrl_c(ws):
    path = ws / "lessons" / L01.notebook
    proc = subprocess.Popen([sys.executable, "-m", "course_cli", "watch", "lesson01", "softmax", "--interval", "0.2"],
                            cwd=ws, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "COLUMNS": "200"})
    try:
        out = _read_until(proc, "Waiting for the next save", 120)
        assert "not implemented" in out
        _solve(path, "softmax")
        out = _read_until(proc, "Waiting for the next save", 120)
        assert "passed" in out and "Score 4/4" in out
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert "Stopped watching" in proc.stdout.read()
    finally:
        proc.kill()


def _read_until(proc, marker: str, timeout: float) -> str:
    seen, end = [], time.time() + timeout
    while time.time() < end:
        line = proc.stdout.readline()
        if not line:
            break
        seen.append(line)
        if marker in line:
            return "".join(seen)
    raise AssertionError("watch printed:\n" + "".join(seen))
