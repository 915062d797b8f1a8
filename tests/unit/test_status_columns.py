"""`course status` at 80 columns: every exercise name whole on its line, and an attempt that could not be graded
said as such (never a score of 0)."""

from __future__ import annotations

import json

from click.testing import CliRunner

from course_cli.main import cli
from graders.registry import LESSONS


def store(ws, lessons: dict) -> None:
    (ws / ".course").mkdir(parents=True, exist_ok=True)
    (ws / ".course" / "progress.json").write_text(json.dumps({"version": 1, "lessons": lessons}))


def test_every_next_name_is_whole_at_80_columns(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_WORKSPACE", str(tmp_path))
    lessons = {}
    for lesson in LESSONS:  # each lesson's longest exercise name is its next
        longest = max(lesson.exercises, key=lambda e: len(e.name))
        best = {e.name: {"points": e.points, "status": "passed"} for e in lesson.exercises if e is not longest}
        lessons[lesson.id] = {"attempts": [{"time": 1.0, "source": "cli", "score": 0.0, "max_score": 1.0,
                                            "checks": "all", "exercises": {}}], "best": best}
    store(tmp_path, lessons)
    r = CliRunner().invoke(cli, ["status"], env={"COLUMNS": "80"}, catch_exceptions=False)
    assert r.exit_code == 0
    assert max(len(line) for line in r.output.splitlines()) <= 80, r.output
    rows = [line for line in r.output.splitlines() if line.strip().startswith("lesson")]
    for lesson in LESSONS:
        longest = max(lesson.exercises, key=lambda e: len(e.name)).name
        row = next(line for line in rows if line.split()[0] == lesson.id)
        assert row.split()[-1] == longest, (row, longest)


def test_a_not_graded_attempt_is_no_score(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_WORKSPACE", str(tmp_path))
    ok = {"time": 1.0, "source": "cli", "score": 4.0, "max_score": 10.0, "checks": "all",
          "exercises": {"softmax": {"status": "passed", "points": 4.0}}}
    old_style = {"time": 2.0, "source": "cli", "score": None, "max_score": 10.0, "checks": "all",
                 "exercises": {"softmax": {"status": "error", "points": 0.0}}}  # written before `not_graded`
    store(tmp_path, {"lesson01": {"attempts": [ok, old_style], "best": {"softmax": {"points": 4.0,
                                                                                    "status": "passed"}}}})
    r = CliRunner().invoke(cli, ["status"], env={"COLUMNS": "80"}, catch_exceptions=False)
    row = next(line for line in r.output.splitlines() if line.strip().startswith("lesson01"))
    assert "not graded" in row and "0/10" not in row, row
    data = json.loads(CliRunner().invoke(cli, ["status", "--json"]).output)["lessons"][0]
    assert data["last_points"] is None and data["last_not_graded"]
    store(tmp_path, {"lesson01": {"attempts": [ok], "best": {}}})
    row = next(line for line in CliRunner().invoke(cli, ["status"]).output.splitlines()
               if line.strip().startswith("lesson01"))
    assert "4/10" in row and "not graded" not in row
