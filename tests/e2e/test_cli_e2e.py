"""test_cli, end to end: the tests of tests/unit/test_cli.py that start a child (the slow tier)."""

from __future__ import annotations

import json
import shutil
import pytest
from click.testing import CliRunner
from course_cli.main import cli
from graders.registry import LESSONS, ROOT, find_lesson
from test_cli import run, workspace  # noqa: F401 (helpers and fixtures shared with the fast tests)


def test_check_solution_json_layout_and_exit_code():
    r = run("check", "lesson01", "--solution", "--json")
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert list(data) == ["lesson", "notebook", "score", "max_score", "exercises"]
    assert data["score"] == data["max_score"] == 10.0
    ex = data["exercises"][0]
    assert list(ex) == ["id", "status", "points", "max_points", "checks", "diagnosis", "diagnosis_id"]
    assert [e["id"] for e in data["exercises"]] == ["softmax", "scaled_dot_product_attention"]
    check = ex["checks"][0]
    assert list(check) == ["name", "status", "device", "dtype", "message", "kind", "failure", "size"]
    statuses = {c["status"] for e in data["exercises"] for c in e["checks"]}
    assert statuses <= {"passed", "skipped"}
    assert all(c["status"] == "skipped" for e in data["exercises"] for c in e["checks"] if c["device"] == "cuda")


def test_check_student_notebook_is_not_implemented_and_records_progress(workspace):
    r = run("check", "1", "--json")
    assert r.exit_code == 1
    data = json.loads(r.output)
    assert {e["status"] for e in data["exercises"]} == {"not_implemented"}
    progress = json.loads((workspace / ".course" / "progress.json").read_text())
    assert len(progress["lessons"]["lesson01"]["attempts"]) == 1


def test_unknown_lesson_is_a_clean_error():
    r = CliRunner().invoke(cli, ["check", "lesson99"])
    assert r.exit_code == 2
    assert "no lesson 'lesson99'" in r.output and "Traceback" not in r.output


def test_unknown_exercise_is_a_clean_error():
    r = CliRunner().invoke(cli, ["check", "lesson01", "sofmax"])
    assert r.exit_code == 2 and "has no exercise 'sofmax'" in r.output


def test_check_one_exercise_table(workspace):
    r = run("check", "lesson01", "softmax")
    assert r.exit_code == 1
    assert "softmax" in r.output and "not implemented" in r.output
    assert "scaled_dot_product_attention" not in r.output.split("Next")[0]


def test_list_and_status(workspace):
    r = run("list")
    assert r.exit_code == 0 and "lesson01" in r.output and "softmax" in r.output
    run("check", "lesson01", "--json")
    r = run("status", "--json")
    rows = json.loads(r.output)["lessons"]
    assert rows[0]["lesson"] == "lesson01" and rows[0]["attempts"] == 1 and rows[0]["next"] == "softmax"
    r = run("status")
    assert r.exit_code == 0 and "lesson01" in r.output and "Next up" in r.output


def test_hints_are_revealed_one_at_a_time(workspace):
    first = run("hint", "lesson01", "softmax").output
    second = run("hint", "lesson01", "softmax").output
    assert "Hint 1/" in first and "Hint 2/" not in first
    assert "Hint 2/" in second
    for _ in range(5):
        last = run("hint", "lesson01", "softmax").output
    assert "That was the last hint." in last


def test_every_command_has_help_with_an_example():
    for name, command in cli.commands.items():
        r = run(name, "--help")
        assert r.exit_code == 0
        assert "Example:" in r.output, f"`course {name} --help` lacks an example"
