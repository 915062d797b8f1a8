"""`course classroom`: the GitHub Actions workflow and Classroom autograding files, parsed with PyYAML and checked
for structure and points; and (slow) their commands, run as the runner would, on a solved and a stub notebook."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from course_cli.instructor.classroom import GRADER, REPORTER, step_id, verdict
from course_cli.main import cli
from graders.registry import LESSONS, find_lesson

PACKAGE = "attention-course @ git+https://example.org/attention-course-dist.git"


def make(tmp_path, *lessons):
    r = CliRunner().invoke(cli, ["classroom", *lessons, "--dir", str(tmp_path), "--package", PACKAGE],
                           catch_exceptions=False)
    assert r.exit_code == 0, r.output
    wf = yaml.safe_load((tmp_path / ".github" / "workflows" / "classroom.yml").read_text())
    legacy = json.loads((tmp_path / ".github" / "classroom" / "autograding.json").read_text())
    return wf, legacy, r.output


def test_verdict_reads_course_check_json(tmp_path):
    f = tmp_path / "lesson01.json"
    f.write_text(json.dumps({"exercises": [
        {"id": "softmax", "status": "passed", "points": 4.0, "max_points": 4.0, "checks": [], "diagnosis": None},
        {"id": "scaled_dot_product_attention", "status": "failed", "points": 0.0, "max_points": 6.0,
         "checks": [{"name": "shapes", "status": "failed", "device": "cpu", "dtype": "float32", "message": "bad"}],
         "diagnosis": "the scores are not scaled"}]}))
    assert verdict(f, "softmax")[0] == 0
    code, text = verdict(f, "scaled_dot_product_attention")
    assert code == 1 and "Likely mistake: the scores are not scaled" in text and "bad" in text
    assert verdict(f, "nope")[0] == 1
    assert verdict(tmp_path / "missing.json", "softmax")[0] == 1
    (tmp_path / "empty.json").write_text("")
    code, text = verdict(tmp_path / "empty.json", "softmax")
    assert code == 1 and "no result" in text


