"""test_progress, end to end: the tests of tests/unit/test_progress.py that start a child (the slow tier)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from course_cli.student.progress import ProgressStore
from graders.registry import ROOT
from graders.engine.results import ExerciseResult, LessonResult
from test_progress import attempts, result, writer  # noqa: F401 (helpers and fixtures shared with the fast tests)


def test_kill_9_mid_write_loses_nothing_recorded(tmp_path):
    ws = tmp_path / "ws"
    ProgressStore(ws).record(result(), source="before")
    for round_ in range(4):
        p = writer(ws, 100_000, f"r{round_}")
        done = -1
        deadline = time.monotonic() + 0.4 + 0.3 * round_
        while time.monotonic() < deadline:
            line = p.stdout.readline()
            if line:
                done = int(line)
        p.send_signal(signal.SIGKILL)
        p.wait()
        rest = p.stdout.read().split()
        done = max([done] + [int(x) for x in rest])
        got = [a["source"] for a in attempts(ws)]  # the store reads cleanly: no corruption, no warning
        assert "before" in got
        recorded = {s for s in got if s.startswith(f"r{round_}-")}
        assert {f"r{round_}-{i}" for i in range(done + 1)} <= recorded
    assert not list((ws / ".course").glob("progress.corrupt-*"))


def test_ten_concurrent_writers_lose_no_update(tmp_path):
    ws = tmp_path / "ws"
    procs = [writer(ws, 15, f"w{k}") for k in range(10)]
    for p in procs:
        p.communicate()
        assert p.returncode == 0
    got = [a["source"] for a in attempts(ws)]
    assert len(got) == 150
    assert set(got) == {f"w{k}-{i}" for k in range(10) for i in range(15)}


def test_ten_concurrent_course_check_runs_lose_no_attempt(tmp_path):
    """The real command, ten at once on one workspace (a stub notebook: quick, all not_implemented)."""
    import shutil

    from graders.registry import find_lesson

    l01 = find_lesson("lesson01")
    ws = tmp_path / "ws"
    (ws / "lessons").mkdir(parents=True)
    (ws / ".course").mkdir()
    shutil.copy(l01.student_path, ws / "lessons" / l01.notebook)
    env = {**__import__("os").environ, "COURSE_WORKSPACE": str(ws)}
    procs = [subprocess.Popen([sys.executable, "-m", "course_cli", "check", "lesson01", "--json"], cwd=ROOT, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(10)]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 1, err  # not everything passed: exit code 1, and a result
        assert json.loads(out)["lesson"] == "lesson01"
    assert len(attempts(ws)) == 10
