"""The progress store survives kill -9 mid-write, concurrent writers and corruption."""

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

WRITER = r"""
import sys
from pathlib import Path
from course_cli.student.progress import ProgressStore
from graders.engine.results import ExerciseResult, LessonResult
ws, n, tag = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
store = ProgressStore(ws)
for i in range(n):
    r = LessonResult("lesson01", "nb.ipynb", [ExerciseResult("softmax", "failed", 0.0, 4.0)])
    store.record(r, source=f"{tag}-{i}")
    print(i, flush=True)  # attempt i is recorded (record returned)
"""


def writer(ws: Path, n: int, tag: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(ws), str(n), tag], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True)


def attempts(ws: Path) -> list[dict]:
    store = ProgressStore(ws)
    data = store.load()
    assert not store.warnings, store.warnings
    return data["lessons"].get("lesson01", {}).get("attempts", [])


def result(status="passed", points=4.0):
    return LessonResult("lesson01", "nb.ipynb", [ExerciseResult("softmax", status, points, 4.0)])


def test_a_failed_write_leaves_the_previous_store_whole(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    store = ProgressStore(ws)
    store.record(result(), source="first")
    before = store.path.read_bytes()

    def crash(*a, **k):
        raise OSError(28, "No space left on device")

    import os

    for module, name in ((json, "dumps"), (os, "fsync")):  # the text cannot be made; the disk fills mid-write
        monkeypatch.setattr(module, name, crash)
        try:
            store.record(result("failed", 0.0), source="second")
        except OSError:
            pass
        monkeypatch.undo()
        assert store.path.read_bytes() == before
    assert [a["source"] for a in attempts(ws)] == ["first"]


def test_a_corrupt_store_is_kept_aside_and_rebuilt_with_a_warning(tmp_path):
    ws = tmp_path / "ws"
    store = ProgressStore(ws)
    store.record(result(), source="old")
    store.path.write_text('{"version": 1, "lessons": {"lesson01": {"attem')  # a torn file
    store = ProgressStore(ws)
    store.record(result(), source="new")
    assert store.warnings and "kept it as progress.corrupt-" in store.warnings[0]
    aside = list((ws / ".course").glob("progress.corrupt-*.json"))
    assert len(aside) == 1 and aside[0].read_text().startswith('{"version": 1')
    assert [a["source"] for a in attempts(ws)] == ["new"]
    # not JSON of the right shape is corrupt too
    store.path.write_text("[1, 2, 3]")
    store = ProgressStore(ws)
    assert store.load()["lessons"] == {} and store.warnings


def test_course_lab_warms_the_lesson_status_calls_next(tmp_path):
    """`course lab` without a lesson prestarts the warm grader for the lesson `course status` calls next: the
    first with an exercise not passed (a full check's best), none when all pass."""
    from course_cli.main import _next_lesson
    from graders.registry import LESSONS

    (tmp_path / ".course").mkdir()
    assert _next_lesson(tmp_path).id == "lesson01"
    store = ProgressStore(tmp_path)
    first = LESSONS[0]
    store.record(LessonResult(first.id, "nb.ipynb", [ExerciseResult(e.name, "passed", e.points, e.points)
                                                      for e in first.exercises]))
    assert _next_lesson(tmp_path).id == LESSONS[1].id
    for lesson in LESSONS[1:]:
        store.record(LessonResult(lesson.id, "nb.ipynb", [ExerciseResult(e.name, "passed", e.points, e.points)
                                                          for e in lesson.exercises]))
    assert _next_lesson(tmp_path) is None
