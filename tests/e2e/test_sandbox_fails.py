"""A sandbox that does not start is an error, never a score (issue 30, item 7 of the issue): bubblewrap is made
to fail (a fake `bwrap` first on PATH that exits 1 the way bubblewrap does), from the start of a run or only
after the reference child started (mid-run), under `course grade`, Gradescope's `run_autograder` step and
setup.sh's smoke child. Each asserts a non-zero exit, the words "not graded: the sandbox could not start", and
no score written for anyone."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner

from course_cli.main import cli
from course_cli.sandboxed import sandbox
from graders.registry import ROOT, find_lesson
from harness import set_limit

L01 = find_lesson("lesson01")
REAL_BWRAP = shutil.which("bwrap")


def fake_bwrap(folder: Path, real_first: int = 0) -> Path:
    """A `bwrap` that fails as bubblewrap does when it cannot make its namespaces; the first `real_first` calls
    go to the real one."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "bwrap"
    # mkdir is atomic: of children started at once, exactly `real_first` get a slot (a read-then-write
    # counter let two parallel students both through)
    script.write_text(f"""#!/bin/sh
i=0
while [ "$i" -lt {real_first} ]; do
  if mkdir {folder}/slot-$i 2>/dev/null; then exec {REAL_BWRAP or '/bin/false'} "$@"; fi
  i=$((i + 1))
done
echo "bwrap: setting up uid map: Permission denied" >&2
exit 1
""")
    script.chmod(0o755)
    return folder


@pytest.fixture
def broken(tmp_path, monkeypatch):
    def make(real_first: int = 0):
        d = fake_bwrap(tmp_path / "fakebin", real_first)
        monkeypatch.setenv("PATH", f"{d}:{os.environ['PATH']}")
        monkeypatch.setattr(sandbox, "_BWRAP", (True, ""))  # it looked fine when the run started
        set_limit(monkeypatch, "cell_timeout", 5.0)
        # no trusted reference kept from an earlier test in this process: the class's reference child is the
        # first bwrap call
        from course_cli.sandboxed import grading
        monkeypatch.setattr(grading, "_TRUSTED", {})
        return d
    return make


def class_of(tmp_path: Path) -> Path:
    subs = tmp_path / "subs"
    for student in ("alice", "bob"):
        (subs / student / "lesson01").mkdir(parents=True)
        nbformat.write(nbformat.read(L01.solution_path, as_version=4), subs / student / "lesson01" / L01.notebook)
    return subs


def _assert_not_graded(r, out: Path) -> None:
    assert r.exit_code not in (0, None), r.output
    assert sandbox.NOT_GRADED in r.output, r.output
    assert "Permission denied" in r.output  # what bubblewrap said
    assert not out.exists() or '"score"' not in out.read_text()


def test_course_grade_with_a_broken_sandbox_grades_nobody(tmp_path, broken):
    broken()
    out = tmp_path / "r.json"
    r = CliRunner().invoke(cli, ["grade", str(class_of(tmp_path)), "--lesson", "lesson01", "--out", str(out)])
    _assert_not_graded(r, out)


@pytest.mark.slow
@pytest.mark.skipif(REAL_BWRAP is None or not sandbox.bwrap_status()[0], reason="needs a working bubblewrap")
def test_course_grade_when_the_sandbox_breaks_mid_run(tmp_path, broken):
    broken(real_first=1)  # the class's reference child starts, the students' children cannot
    out = tmp_path / "r.json"
    r = CliRunner().invoke(cli, ["grade", str(class_of(tmp_path)), "--lesson", "lesson01", "--out", str(out)])
    _assert_not_graded(r, out)


def test_gradescope_run_autograder_with_a_broken_sandbox_writes_no_score(tmp_path, broken, capsys):
    from course_cli.instructor import gradescope

    broken()
    root = tmp_path / "autograder"
    (root / "submission").mkdir(parents=True)
    shutil.copy(L01.solution_path, root / "submission" / L01.notebook)
    rc = gradescope.main(["run", "--lesson", "lesson01", "--root", str(root)])
    err = capsys.readouterr().err
    assert rc != 0
    assert sandbox.NOT_GRADED in err
    assert not (root / "results" / "results.json").exists()  # Gradescope shows a failed run, not a 0


def test_setup_sh_runs_a_smoke_child_that_fails_the_build(tmp_path):
    from course_cli.instructor import gradescope

    setup = gradescope.SETUP.format(extra="", module="lesson01_sdpa", lesson="lesson01")
    assert '-m course_cli.sandboxed.sandbox smoke ||' in setup and "exit 1" in setup
    d = fake_bwrap(tmp_path / "fakebin")
    env = {**os.environ, "PATH": f"{d}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "course_cli.sandboxed.sandbox", "smoke"], env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode != 0
    assert "apt-get install bubblewrap" in r.stderr  # the fixing command
    if REAL_BWRAP and sandbox.bwrap_status()[0]:  # and with the real one it passes
        r = subprocess.run([sys.executable, "-m", "course_cli.sandboxed.sandbox", "smoke"],
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
