"""Classroom, honestly: the generated workflow says at its top that its points are practice feedback from public
checks in the student's own repository (forgeable, never marks) and where marks come from; it runs on the Python
the course is tested with, keeps pip's cache (the CPU torch wheel with it) between runs, and installs bubblewrap
after `apt-get update`, in the workflow and in the older autograding.json. The README says the same."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from click.testing import CliRunner

from course_cli.instructor.classroom import HONEST, PYTHON, TORCH_CPU
from course_cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "attention-course @ git+https://example.org/attention-course-dist.git"


def made(tmp_path):
    r = CliRunner().invoke(cli, ["classroom", "lesson01", "--dir", str(tmp_path), "--package", PACKAGE],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    text = (tmp_path / ".github" / "workflows" / "classroom.yml").read_text()
    legacy = json.loads((tmp_path / ".github" / "classroom" / "autograding.json").read_text())
    return text, yaml.safe_load(text), legacy


def test_the_workflow_says_its_points_are_practice_feedback_not_marks(tmp_path):
    text, wf, _ = made(tmp_path)
    head = "\n".join(ln for ln in text.splitlines()[:15] if ln.startswith("#"))
    flat = " ".join(head.replace("#", " ").split())
    for words in ("PRACTICE FEEDBACK, NEVER MARKS", "public checks", "student's own repository",
                  "forge", "`course grade`", "nbgrader", "Gradescope"):
        assert words in flat, words
    assert "practice feedback" in wf["name"]
    names = [s.get("name", "") for s in next(iter(wf["jobs"].values()))["steps"]]
    assert any("not marks" in n for n in names)


def test_pinned_python_and_a_pip_cache_with_the_cpu_torch_wheel(tmp_path):
    _, wf, _ = made(tmp_path)
    steps = next(iter(wf["jobs"].values()))["steps"]
    setup = next(s for s in steps if str(s.get("uses", "")).startswith("actions/setup-python@"))
    assert setup["with"]["python-version"] == PYTHON == "3.11"  # a string: YAML would read 3.10 as 3.1
    assert setup["with"]["cache"] == "pip"
    assert setup["with"]["cache-dependency-path"] == ".github/classroom/constraints.txt"
    assert (tmp_path / ".github" / "classroom" / "constraints.txt").read_text() == (ROOT / "constraints.txt").read_text()
    install = next(s for s in steps if "pip install" in s.get("run", ""))
    # torch comes from the CPU index through pip, so its wheel lands in the cache setup-python keeps
    assert f"--extra-index-url {TORCH_CPU}" in install["run"] and "--no-cache-dir" not in install["run"]
    assert re.search(r"^torch==", (ROOT / "constraints.txt").read_text(), re.M)


def test_bubblewrap_is_installed_after_apt_get_update_everywhere(tmp_path):
    _, wf, legacy = made(tmp_path)
    steps = next(iter(wf["jobs"].values()))["steps"]
    install = next(s for s in steps if "bubblewrap" in s.get("run", ""))["run"]
    setup = legacy["tests"][0]["setup"]
    for cmd in (install, setup):
        assert "apt-get update" in cmd and cmd.index("apt-get update") < cmd.index("apt-get install")


def test_the_readme_says_it_where_instructors_read():
    readme = " ".join((ROOT / "README.md").read_text().split())
    section = readme[readme.index("### GitHub Classroom"):readme.index("## How grading works")]
    for words in ("practice feedback", "never marks", "forge", "`course grade`", "nbgrader", "Gradescope",
                  "student's own repository"):
        assert words in section, words
    assert all(line in (ROOT / "course_cli" / "instructor" / "classroom.py").read_text() for line in HONEST)
