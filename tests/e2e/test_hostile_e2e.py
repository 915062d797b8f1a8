"""test_hostile, end to end: the tests of tests/unit/test_hostile.py that start a child (the slow tier)."""

from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import pytest
from click.testing import CliRunner
from course_cli.sandboxed import sandbox
from course_cli.sandboxed.grading import Reference, grade_notebook
from course_cli.main import cli
from graders.registry import find_lesson
from test_hostile import EXERCISES, EXPECTED, L01, ROOT_USER, _cgroup_available, _describe, _leftovers, _short_limits, results  # noqa: F401 (helpers and fixtures shared with the fast tests)
from harness import set_limit


@pytest.mark.parametrize("name", [n for n, c in EXPECTED.items() if c.get("kind") != "unknown_lesson"])
def test_hostile_notebook(results, name):
    case, result = EXPECTED[name], results[name]
    want = {ex: case[ex] for ex in EXERCISES if ex in case}
    if ROOT_USER and "as_root" in case:
        # root reads a chmod 000 file anyway: the notebook is simply graded (honest, not a bug)
        want = case["as_root"]
        case = {k: v for k, v in case.items() if k != "reason"}
    got = {e.id: e.status for e in result.exercises}
    assert {ex: got[ex] for ex in want} == want, _describe(result)
    for ex in result.exercises:  # a score only ever for a pass
        assert (ex.points > 0) == (ex.status == "passed")
    text = json.dumps(result.to_dict()) + "\n".join(result.notes)
    if "reason" in case:
        assert case["reason"] in text, _describe(result)
    if "note" in case:
        assert any(case["note"] in n for n in result.notes), _describe(result)
    assert "Traceback (most recent call last)" not in text, text
    assert 'File "/' not in text and "course_cli/" not in text and "graders/" not in text, text
    if "leftovers" in case:
        assert not _leftovers(case["leftovers"]), "processes the notebook started outlived its grading"


def test_unknown_lesson_is_a_clean_error(results):
    r = results["<unknown lesson>"]
    assert r["exit_code"] == 2
    assert EXPECTED["<unknown lesson>"]["reason"] in r["output"]
    assert "Traceback" not in r["output"]


def test_output_never_floods_the_disk_or_the_result(results):
    """50 MB printed: the JSON and notes stay small (the child kept at most OUTPUT_LIMIT of it)."""
    result = results["huge_print.ipynb"]
    assert len(json.dumps(result.to_dict())) + sum(map(len, result.notes)) < 50_000


@pytest.mark.skipif(not _cgroup_available(), reason="no writable pids cgroup here: no process limit to test")
def test_process_limit_stops_a_fork_loop_and_everything_is_killed(tmp_path, monkeypatch):
    _short_limits(monkeypatch)
    set_limit(monkeypatch, "processes", 48)
    code = ("import os, time\nkids = 0\ntry:\n    while kids < 10_000:\n        if os.fork() == 0:\n"
            "            os.setsid()\n            os.execvp('sleep', ['sleep', '311'])\n        kids += 1\n"
            "finally:\n    print('forked', kids)\n")
    import nbformat

    nb = nbformat.read(L01.solution_path, as_version=4)
    nb.cells.insert(2, nbformat.v4.new_code_cell(code))
    path = tmp_path / "forks.ipynb"
    nbformat.write(nb, path)
    result = grade_notebook(L01, path)
    assert any("process limit exceeded" in n for n in result.notes), _describe(result)
    assert {e.status for e in result.exercises} == {"passed"}, _describe(result)
    assert not _leftovers("sleep 311")
    leftover_groups = [p for p in sandbox._cgroup_base().iterdir() if p.name.startswith(f"course-{os.getpid()}-")]
    assert not leftover_groups


def test_notebook_time_limit_kills_the_child_and_says_so(tmp_path, monkeypatch):
    """A cell that outlives the per-notebook limit (its own, per-cell, limit being longer)."""
    import nbformat

    set_limit(monkeypatch, "cell_timeout", 120.0)
    set_limit(monkeypatch, "notebook_timeout", 2.0)
    monkeypatch.setattr(sandbox, "STARTUP_ALLOWANCE", 20.0)
    nb = nbformat.read(L01.solution_path, as_version=4)
    nb.cells.insert(2, nbformat.v4.new_code_cell(
        "import signal, subprocess\nsignal.setitimer(signal.ITIMER_REAL, 0)\n"
        "subprocess.Popen(['sleep', '313'])\nwhile True:\n    signal.setitimer(signal.ITIMER_REAL, 0)"))
    path = tmp_path / "slow.ipynb"
    nbformat.write(nb, path)
    result = grade_notebook(L01, path)
    assert {e.status for e in result.exercises} == {"timeout"}, _describe(result)
    assert "the notebook ran past its time limit of 2 s" in result.exercises[0].reason
    assert "COURSE_NOTEBOOK_TIMEOUT" in result.exercises[0].reason
    assert not _leftovers("sleep 313")
