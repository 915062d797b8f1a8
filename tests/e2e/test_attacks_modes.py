"""The attacks of test_attacks.py in the modes that file does not cover (issue 30, item 8): a class graded on
Dask (`course grade --scheduler local`), and nbgrader's feedback opened in a real browser. Each asserts the
attacker gains nothing, the honest classmate keeps their marks and file, the batch writes its results, nothing
is left running, and no submitted markup runs."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner

from course_cli.main import cli
from harness import set_limit
from browser import AVAILABLE as HAVE_CHROMIUM, MISSING as NO_CHROMIUM
from nbgrader_cli import nbgrader_argv
from test_attacks import (CGROUP, ENV_SECRETS, L01, READ_SOLUTIONS, SDPA, SECRET, SOFTMAX, _processes_with,
                          attack_notebook, classmate_cell, daemon_cell, needs_sandbox, short_limits,  # noqa: F401
                          solved_copy)

pytestmark = pytest.mark.slow
MARKUP = '<img src=x onerror="document.title=\'PWNED\'"><script>document.title="PWNED"</script>'
# a softmax whose error message carries markup: it reaches the verdict's text in every output
MARKUP_SOFTMAX = f"def softmax(x, dim=-1):\n    raise RuntimeError({MARKUP!r})\n"


@needs_sandbox
def test_dask_grades_a_class_of_attackers_as_the_local_pool_does(tmp_path, short_limits, monkeypatch):
    pytest.importorskip("distributed", reason="Dask is not installed (pip install '.[cluster]')")
    set_limit(monkeypatch, "cell_timeout", 20.0)  # the workers' children share two cores with the cluster's
    set_limit(monkeypatch, "exercise_timeout", 30.0)
    subs = tmp_path / "submitted"
    (subs / "alice" / "lesson01").mkdir(parents=True)
    alice = subs / "alice" / "lesson01" / L01.notebook
    alice.write_bytes(solved_copy(tmp_path, "alice").read_bytes())
    before = alice.read_bytes()
    out = tmp_path / "results.csv"
    marker = tmp_path / f"daemon-{tmp_path.name}"
    attacks = {"mallory_read": READ_SOLUTIONS, "mallory_env": ENV_SECRETS, "mallory_cgroup": CGROUP,
               "mallory_classmate": classmate_cell(alice), "mallory_daemon": daemon_cell(marker, [out, alice])}
    for student, cell in attacks.items():
        (subs / student / "lesson01").mkdir(parents=True)
        (subs / student / "lesson01" / L01.notebook).write_bytes(attack_notebook(tmp_path, student, cell).read_bytes())

    r = CliRunner().invoke(cli, ["grade", str(subs), "--lesson", "lesson01", "--scheduler", "local",
                                 "--workers", "2", "--out", str(out)])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    text = out.read_text()
    time.sleep(4)  # a daemon would have edited the results (or alice's notebook) by now
    assert out.read_text() == text and alice.read_bytes() == before
    assert not marker.exists() and not _processes_with(marker.name)
    assert "ATTACK-SUCCEEDED" not in text and SECRET not in text
    totals = {row["student"]: float(row["points"] or 0) for row in csv.DictReader(text.splitlines())
              if row["exercise"] == "TOTAL"}
    assert set(totals) == {"alice", *attacks}, totals  # the batch completed: everyone has a row
    assert totals["alice"] == 10.0
    assert all(totals[s] == 0.0 for s in attacks), totals


def _nbgrader(course: Path):
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}

    def run(*args, ok=True):
        p = subprocess.run(nbgrader_argv(*args), cwd=course, env=env, capture_output=True, text=True,
                           timeout=900)
        if ok:
            assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
        return p.stdout + p.stderr
    return run



@needs_sandbox
@pytest.mark.skipif(not HAVE_CHROMIUM, reason=NO_CHROMIUM)
def test_nbgrader_feedback_and_export_of_hostile_submissions(tmp_path, short_limits):
    """Markup and control bytes in an error message, and notes planted in a submission's metadata, through
    autograde, generate_feedback and export: the feedback page runs nothing when Chromium opens it, shows no
    planted note, and the export holds the honest student's full marks and the attacker's 0."""
    pytest.importorskip("selenium", reason="selenium is not installed (pip install '.[test]')")
    from course_cli.instructor.nbgrader_course import make_course
    from test_report import browser

    course = tmp_path / "course"
    make_course(course)
    nbgrader = _nbgrader(course)
    nbgrader("generate_assignment", "lesson01", "--force")
    release = course / "release" / "lesson01" / L01.notebook

    def submit(student: str, nb) -> Path:
        folder = course / "submitted" / student / "lesson01"
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / L01.notebook)
        return folder / L01.notebook

    sol = nbformat.read(L01.solution_path, as_version=4)
    honest = nbformat.read(release, as_version=4)
    for cell in honest.cells:  # the release notebook with the solutions filled in
        gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
        if gid in (SOFTMAX, SDPA):
            cell.source = next(s.source for s in sol.cells if s.get("metadata", {}).get("nbgrader", {}).get("grade_id") == gid)
    alice = submit("alice", honest)
    before = alice.read_bytes()
    hostile = nbformat.read(release, as_version=4)
    hostile.cells.append(nbformat.v4.new_code_cell(MARKUP_SOFTMAX.replace("raise RuntimeError(",
                                                                          "raise RuntimeError('\\x1b[2J' + ")))
    hostile.metadata["course"] = {"notes": ["Grading notes: full marks approved by the instructor " + MARKUP]}
    submit("mallory", hostile)

    log = nbgrader("autograde", "lesson01", "--force")
    assert "\x1b[2J" not in log  # no control byte reaches the instructor's terminal
    nbgrader("generate_feedback", "lesson01", "--force")
    nbgrader("export", "--to", str(tmp_path / "grades.csv"))
    grades = {row["student_id"]: float(row["raw_score"]) for row in csv.DictReader((tmp_path / "grades.csv").open())}
    assert grades == {"alice": 10.0, "mallory": 0.0}, grades
    assert alice.read_bytes() == before

    page = course / "feedback" / "mallory" / "lesson01" / L01.notebook.replace(".ipynb", ".html")
    html = page.read_text(encoding="utf-8")
    assert "approved by the instructor" not in html  # a submission's own notes are never shown as the course's
    assert "<script>document.title" not in html and "<img src=x onerror" not in html
    driver, profile = browser()
    try:
        driver.get(page.as_uri())
        time.sleep(1)
        assert driver.title != "PWNED"
        planted = driver.execute_script("return [...document.querySelectorAll('img')]"
                                        ".filter(i => (i.getAttribute('onerror') || '').includes('PWNED')).length")
        assert planted == 0
        text = driver.execute_script("return document.body.innerText")
        assert "softmax" in text and "PWNED" in text  # the message is shown, as text
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
