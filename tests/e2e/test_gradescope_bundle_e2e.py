"""test_gradescope_bundle, end to end: the tests of tests/unit/test_gradescope_bundle.py that start a child (the slow tier)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path
import jsonschema
import pytest
from click.testing import CliRunner
from course_cli.instructor.gradescope import gradescope_results, hidden_names, main
from course_cli.main import cli
from graders.engine.results import CheckResult, ExerciseResult, LessonResult
from graders.registry import find_lesson
from test_gradescope_bundle import L01, _bwrap_works, _refusing_bwrap  # noqa: F401 (helpers and fixtures shared with the fast tests)


@pytest.mark.slow
@pytest.mark.skipif(not _bwrap_works(), reason="bubblewrap cannot make its namespaces on this machine")
def test_setup_sh_builds_as_root_in_a_fresh_venv_and_starts_the_sandbox(tmp_path):
    """setup.sh on this machine, where tests/e2e/test_gradescope_ubuntu.py cannot run it on Gradescope's own base
    image (Ubuntu's archive out of reach): one of the two, about 90 CPU-s each (docs/benchmarks.md, the test
    budget). Then the build with user namespaces refused fails, saying why."""
    from test_gradescope_ubuntu import needs_ubuntu

    if os.geteuid() != 0:
        pytest.skip("setup.sh runs as root on Gradescope; run this test as root")
    if not needs_ubuntu.args[0]:
        pytest.skip("setup.sh runs on Ubuntu 22.04, Gradescope's base image, in test_gradescope_ubuntu.py")
    out = tmp_path / "autograder.zip"
    r = CliRunner().invoke(cli, ["gradescope", "lesson01", "--out", str(out)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    root = tmp_path / "autograder"
    zipfile.ZipFile(out).extractall(root / "source")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "COURSE_SANDBOX")}
    # offline here: an index that cannot be reached is given up at once (Gradescope's build has the network)
    env.update(AUTOGRADER_ROOT=str(root), COURSE_SETUP_APT="0", PIP_RETRIES="0", PIP_TIMEOUT="3",
               PATH=":".join(p for p in env.get("PATH", "").split(":") if ".venv" not in p))
    t0 = time.monotonic()
    proc = subprocess.run(["bash", str(root / "source" / "setup.sh")], cwd=root / "source", env=env,
                          capture_output=True, text=True, timeout=1800)
    seconds = time.monotonic() - t0
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert "the sandbox works: lesson01's solution graded in it, 10/10" in proc.stdout
    size = sum(p.stat().st_size for p in (root / "venv").rglob("*") if p.is_file())
    print(f"setup.sh: {seconds:.0f} s, venv {size / 2**20:.0f} MiB")
    # the same image with user namespaces refused: the build fails, saying why
    env["PATH"] = f"{_refusing_bwrap(tmp_path / 'bin')['PATH']}"
    proc = subprocess.run([str(root / "venv" / "bin" / "python"), "-m", "course_cli.instructor.gradescope",
                           "selftest", "--lesson", "lesson01"], cwd=root / "source" / "course", env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1 and "No permissions to creating new namespace" in proc.stderr


# moved from tests/unit/test_gradescope_bundle.py: each runs the autograder's own process
def test_a_sandbox_that_cannot_start_is_an_error_not_a_score(tmp_path):
    out = tmp_path / "autograder.zip"
    r = CliRunner().invoke(cli, ["gradescope", "lesson01", "--out", str(out)], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    root = tmp_path / "autograder"
    zipfile.ZipFile(out).extractall(root / "source")
    shutil.copy(root / "source" / "run_autograder", root / "run_autograder")
    (root / "run_autograder").chmod(0o755)
    (root / "submission").mkdir()
    shutil.copy(L01.solution_path, root / "submission" / L01.notebook)
    (root / "results").mkdir()
    (root / "results" / "results.json").write_text('{"score": 10}')  # a stale file is no result either
    env = _refusing_bwrap(tmp_path / "bin")
    env.pop("PYTHONPATH")  # the zip's course, as on Gradescope
    env.update(AUTOGRADER_ROOT=str(root), COURSE_PYTHON=sys.executable)
    proc = subprocess.run([str(root / "run_autograder")], cwd=root, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode != 0
    assert not (root / "results" / "results.json").exists()  # no score at all, not a 0
    assert "NOT GRADED" in proc.stderr and "cannot make its namespaces" in proc.stderr
    assert "user namespaces" in proc.stderr and "Gradescope" in proc.stderr


def test_selftest_fails_the_build_with_the_reason_when_namespaces_are_refused(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "course_cli.instructor.gradescope", "selftest", "--lesson",
                           "lesson01"], env=_refusing_bwrap(tmp_path / "bin"), capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 1
    assert "the sandbox cannot start here" in proc.stderr and "No permissions to creating new namespace" in proc.stderr
    assert "Gradescope" in proc.stderr
