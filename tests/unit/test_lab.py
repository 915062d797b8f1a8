"""`course lab` anywhere: as root (a container, Codespaces, a cloud VM) it passes --allow-root and says so; it
takes --no-browser, --port and --ip, and hands anything after `--` to JupyterLab; the student's lab shows no
Jupyter news toast. The slow test starts it headless, as root when the tests run as root, through the `course`
command itself, and opens a lesson in headless Chromium."""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from course_cli.main import cli
from course_cli.student.workspace_ops import JUPYTER_DIR, init

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def ws(tmp_path, monkeypatch):
    # these tests pretend to be uid 1000 over root's files: the workspace's ownership test is
    # tests/unit/test_submission_trust.py's, not theirs
    monkeypatch.setattr("course_cli.student.workspace.unsafe_reason", lambda folder: None)
    init(tmp_path / "ws")
    monkeypatch.setenv("COURSE_WORKSPACE", str(tmp_path / "ws"))
    return tmp_path / "ws"


def argv(output: str) -> list[str]:
    line = next(ln for ln in output.splitlines() if "JUPYTER_CONFIG_DIR=" in ln)
    words = shlex.split(line)
    return words[next(i for i, w in enumerate(words) if not re.match(r"[A-Z_]+=", w)):]  # after the environment


def test_as_root_it_passes_allow_root_and_says_so(ws, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    r = CliRunner().invoke(cli, ["lab", "lesson01", "--print-command"])
    assert r.exit_code == 0, r.output
    assert "--allow-root" in argv(r.output)
    assert "running as root" in r.output and "--allow-root" in r.output.splitlines()[0]


def test_as_a_user_it_does_not(ws, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    r = CliRunner().invoke(cli, ["lab", "lesson01", "--print-command"])
    assert r.exit_code == 0 and "--allow-root" not in r.output and "root" not in r.output.lower().replace(
        str(ws).lower(), "")


def test_flags_and_everything_after_the_double_dash_reach_jupyterlab(ws, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    r = CliRunner().invoke(cli, ["lab", "lesson01", "--no-browser", "--port", "9123", "--ip", "0.0.0.0",
                                 "--print-command", "--", "--ServerApp.token=s3cret", "--debug"])
    assert r.exit_code == 0, r.output
    args = argv(r.output)
    assert args[1] == "lab" and args[2].endswith("lesson01_sdpa.ipynb")
    assert args[3:] == ["--no-browser", "--port=9123", "--ip=0.0.0.0", "--ServerApp.token=s3cret", "--debug"]
    # no lesson: the lessons folder, and the flags still JupyterLab's
    r = CliRunner().invoke(cli, ["lab", "--print-command", "--", "--ServerApp.token=x"])
    assert r.exit_code == 0, r.output
    args = argv(r.output)
    assert args[2] == str(ws / "lessons") and args[3:] == ["--ServerApp.token=x"]


def test_a_bad_port_is_a_clean_error(ws):
    r = CliRunner().invoke(cli, ["lab", "--port", "99999", "--print-command"])
    assert r.exit_code == 2 and "Traceback" not in r.output and "99999" in r.output


def test_no_news_toast_in_the_students_lab_even_in_an_older_workspace(ws):
    quiet = ws / JUPYTER_DIR / "jupyter_server_config.d" / "attention-course-quiet.json"
    settings = (ws / JUPYTER_DIR / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension" /
                "notification.jupyterlab-settings")
    assert json.loads(quiet.read_text())["LabApp"]["news_url"] is None
    assert json.loads(settings.read_text()) == {"fetchNews": "false", "checkForUpdates": False}
    quiet.unlink()
    settings.unlink()  # a workspace made before these files existed: `course lab` adds them
    r = CliRunner().invoke(cli, ["lab", "--print-command"])
    assert r.exit_code == 0 and quiet.exists() and settings.exists()




def test_the_lab_s_kernels_load_the_warm_extension_from_this_environment(ws, monkeypatch):
    """`course lab` puts a python3 kernelspec of its own first on JUPYTER_PATH: this environment's Python with
    course_cli.kernel_warm (a lesson notebook's kernel starts its warm grader), rewritten when it goes stale."""
    import sys

    from course_cli.kernel_warm import lesson_of

    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.delenv("JUPYTER_PATH", raising=False)
    spec = ws / JUPYTER_DIR / "data" / "kernels" / "python3" / "kernel.json"
    spec.parent.mkdir(parents=True)
    spec.write_text(json.dumps({"argv": ["/gone/python", "-m", "ipykernel_launcher"]}))
    r = CliRunner().invoke(cli, ["lab", "lesson01", "--print-command"])
    assert r.exit_code == 0, r.output
    assert f"JUPYTER_PATH={ws / JUPYTER_DIR / 'data'}" in r.output
    argv_ = json.loads(spec.read_text())["argv"]
    assert argv_[0] == sys.executable and "--ext=course_cli.kernel_warm" in argv_ and "{connection_file}" in argv_
    assert lesson_of(str(ws / "lessons" / "lesson03_heads.ipynb")).id == "lesson03"
    assert lesson_of(str(ws / "scratch.ipynb")) is None and lesson_of("") is None
