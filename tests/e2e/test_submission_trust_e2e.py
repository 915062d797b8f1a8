"""Issue 45/50's attacks that take a process of their own (moved from tests/unit/test_submission_trust.py): `course
lab` started in a planted workspace, and Classroom's verdict step run in a repository holding a forged
`course_cli/`."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from graders.registry import LESSONS
from test_submission_trust import _other_uid


@pytest.mark.skipif(os.geteuid() != 0, reason="planting a folder owned by another user needs root")
def test_course_lab_refuses_a_planted_workspace(tmp_path):
    shared = tmp_path / "shared"
    (shared / ".course").mkdir(parents=True)
    (shared / ".jupyter").mkdir()
    (shared / ".jupyter" / "jupyter_server_config.py").write_text("open('/tmp/pwned-b', 'w')\n")
    os.chown(shared / ".jupyter", _other_uid(), -1)
    (shared / "victim").mkdir()
    env = {k: v for k, v in os.environ.items() if k != "COURSE_WORKSPACE"}
    proc = subprocess.run([sys.executable, "-m", "course_cli", "lab", "--no-browser"], cwd=shared / "victim", env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "not using the workspace" in proc.stderr and "Traceback" not in proc.stderr


def test_a_committed_course_cli_cannot_replace_classroom_s_verdict(tmp_path):
    """The workflow's verdict step, run in a student repository holding a forged `course_cli/` that exits 0:
    the installed course's verdict runs (no results: exit 1), never the forged one."""
    import shlex

    from course_cli.instructor.classroom import verdict_command

    forged = tmp_path / "course_cli" / "instructor"
    forged.mkdir(parents=True)
    (tmp_path / "course_cli" / "__init__.py").write_text("")
    (forged / "__init__.py").write_text("")
    (forged / "classroom.py").write_text("print('forged: passed'); raise SystemExit(0)\n")
    words = shlex.split(verdict_command(LESSONS[0], LESSONS[0].exercises[0].name))
    assert words[0] == "python"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, *words[1:]], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert "forged" not in proc.stdout and proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
