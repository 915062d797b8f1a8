"""The command line: exit codes, the pinned JSON layout, lesson ids, progress, hints, help text."""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner

from course_cli.main import cli
from graders.registry import LESSONS, ROOT, find_lesson


def run(*args, **kw):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, **kw)


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    (ws / ".course").mkdir(parents=True)
    (ws / "lessons").mkdir()
    for lesson in LESSONS:
        shutil.copy(lesson.student_path, ws / "lessons" / lesson.notebook)
    monkeypatch.setenv("COURSE_WORKSPACE", str(ws))
    return ws


@pytest.mark.parametrize("key", ["lesson01", "1", "01", "sdpa"])
def test_lesson_ids(key):
    assert find_lesson(key).id == "lesson01"


def test_readme_lists_every_public_command():
    readme = (ROOT / "README.md").read_text()
    for name, command in cli.commands.items():
        if not command.hidden:
            assert f"course {name}" in readme, f"README does not mention `course {name}`"
