"""Issue 45: through nbgrader's real exchange, with two local users created here, a student cannot plant or
overwrite a classmate's submission. nbgrader's `submit --student=ID` (or a renamed inbound folder) files a
submission under any id; nbgrader's collect only warns that its owner differs ("cheating attempt?") and
collects it as that classmate's. The course's collect (CourseExchangeCollect, set by `course nbgrader`'s
config) never collects a submission as a local user's unless that user made it: a forged one is NOT
COLLECTED (an error naming both), and the classmate's own newest submission is collected instead.
Before the change: submitted/<ana>/ held eve's notebook, both times."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from course_cli.instructor.nbgrader_course import make_course
from graders.registry import find_lesson
from nbgrader_cli import nbgrader_argv

pytestmark = pytest.mark.slow
BIN = Path(sys.executable).parent
L = find_lesson("lesson01")
SITE = Path(__import__("nbgrader").__file__).resolve().parents[1]  # the venv's site-packages
# the course's Python may live where another user cannot run it (/root/.pyenv): the system's, of the same
# minor version, with the venv's packages on its path, stands in for the students' own installation
PYTHON = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")


@pytest.fixture
def students():
    """Two local users (created here, removed after), each with a home of their own."""
    if os.geteuid() != 0:
        pytest.skip("creating local users needs root (useradd); run the slow tier as root to test this")
    for tool in ("useradd", "userdel", "setpriv"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed")
    if not PYTHON.exists():
        pytest.skip(f"no system {PYTHON.name} for the students")
    base = Path(tempfile.mkdtemp(prefix="course-exchange-"))  # (pytest's tmp folders are root's, 0700)
    base.chmod(0o755)
    tag = uuid.uuid4().hex[:6]
    made = []
    try:
        for who in ("ana", "eve"):
            name = f"course-{who}-{tag}"
            subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                           check=True, capture_output=True, timeout=30)
            made.append(name)
            entry = pwd.getpwnam(name)
            home = base / who
            home.mkdir()
            os.chown(home, entry.pw_uid, entry.pw_gid)
        yield base, made
    finally:
        for name in made:
            subprocess.run(["userdel", name], capture_output=True, timeout=30)
        shutil.rmtree(base, ignore_errors=True)


def test_a_submission_under_a_classmate_s_id_is_never_collected_as_theirs(tmp_path, students):
    base, (ana, eve) = students
    exchange = base / "exchange"
    exchange.mkdir()
    exchange.chmod(0o777)
    course = tmp_path / "course"
    make_course(course)
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}

    def instructor(*args: str) -> str:
        p = subprocess.run(nbgrader_argv(*args, f"--Exchange.root={exchange}"), cwd=course, env=env,
                           capture_output=True, text=True, timeout=600)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        return p.stdout + p.stderr

    def student(name: str, *args: str) -> None:
        entry = pwd.getpwnam(name)
        home = base / name.split("-")[1]
        p = subprocess.run(["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups",
                            *nbgrader_argv(*args, python=PYTHON), "--course", "attention-course",
                            f"--Exchange.root={exchange}"], cwd=home, capture_output=True, text=True, timeout=300,
                           env={"PATH": "/usr/bin:/bin", "HOME": str(home), "PYTHONPATH": str(SITE)})
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]

    def write_as(name: str, mark: str) -> None:  # the student's notebook, told apart by a mark in its metadata
        nb = base / name.split("-")[1] / L.id / L.notebook
        data = json.loads(nb.read_text())
        data["metadata"]["whose"] = mark
        nb.write_text(json.dumps(data))

    def collected() -> str | None:
        nb = course / "submitted" / ana / L.id / L.notebook
        return json.loads(nb.read_text())["metadata"].get("whose") if nb.exists() else None

    instructor("generate_assignment", L.id)
    instructor("release_assignment", L.id)
    for name in (ana, eve):
        student(name, "fetch_assignment", L.id)

    # eve plants a submission for ana, who has not submitted
    write_as(eve, "eve's")
    student(eve, "submit", L.id, f"--student={ana}")
    out = instructor("collect", L.id)
    assert collected() is None, "eve's submission was collected as ana's"
    assert f"claims to be {ana}'s but is owned by {eve}" in out, out[-3000:]

    # ana submits her own; eve submits over it, later, under ana's id: ana's is collected, not eve's
    write_as(ana, "ana's")
    student(ana, "submit", L.id)
    time.sleep(1.1)  # nbgrader's timestamps: eve's is the newest
    student(eve, "submit", L.id, f"--student={ana}")
    inbound = sorted(p.name for p in (exchange / "attention-course" / "inbound").iterdir())
    assert len([n for n in inbound if n.startswith(f"{ana}+")]) == 3, inbound
    out = instructor("collect", "--update", L.id)
    assert collected() == "ana's", out[-3000:]
    assert f"claims to be {ana}'s but is owned by {eve}" in out, out[-3000:]
    assert not (course / "submitted" / eve).exists()  # eve submitted nothing as herself
