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


def test_a_limit_that_is_not_a_number_is_a_clean_error(monkeypatch):
    monkeypatch.setenv("COURSE_CELL_TIMEOUT", "twenty")
    r = CliRunner().invoke(cli, ["list"])
    assert r.exit_code not in (0, None) and "Traceback" not in r.output, r.output
    assert "COURSE_CELL_TIMEOUT='twenty' is not a number" in r.output


def test_limits_are_read_when_a_run_starts_not_at_import(monkeypatch):
    """The sandbox asks the run for its limits when it starts a child: a value set after import is the one used."""
    from course_cli.sandboxed import sandbox
    from course_cli.settings import Limits, Run, using

    monkeypatch.setenv("COURSE_CELL_TIMEOUT", "7")
    assert sandbox.limits().cell_timeout == 7.0
    with using(Run(Limits(cell_timeout=3.0, processes=48))):
        assert sandbox.limits().cell_timeout == 3.0 and sandbox.limits().pids() == 48
    assert Limits.from_env(Limits(memory=2 * 2**30, file=8 * 2**20).env()) == Limits(memory=2 * 2**30, file=8 * 2**20)


def test_without_tmpfs_sizes_tmp_and_shm_are_watched_folders_of_the_output(tmp_path, monkeypatch):
    """bubblewrap 0.6 (Ubuntu 22.04) has no --size: /tmp and /dev/shm are then folders of the child's output
    folder, inside the total the parent watches, instead of unsized tmpfs."""
    from course_cli.sandboxed import sandbox

    monkeypatch.setattr(sandbox, "_SIZES", False)
    argv = sandbox._bwrap_argv(tmp_path, "cpu", [], {})
    assert "--size" not in argv
    pairs = list(zip(argv, argv[1:], argv[2:]))
    assert ("--bind", str(tmp_path / ".tmp"), "/tmp") in pairs and ("--bind", str(tmp_path / ".shm"), "/dev/shm") in pairs
    assert not any(a == "--tmpfs" and b in ("/tmp", "/dev/shm") for a, b in zip(argv, argv[1:]))
    monkeypatch.setattr(sandbox, "_SIZES", True)
    argv = sandbox._bwrap_argv(tmp_path, "cpu", [], {})
    assert ("--tmpfs", "/tmp") in list(zip(argv, argv[1:])) and "--size" in argv
