"""`course grade` on Dask distributed (`--scheduler local`) and the results journal (`--resume`).

A class of CLASS_SIZE (15) mixed lesson01 submissions (solved, stubs, a half-done notebook, the known mistakes
these tests name, a hang, a crash, a truncated file) is graded on the local pool and on a LocalCluster and compared field by field; a
worker is killed mid-batch; a submission that kills its worker every time becomes an error row; batches
interrupted (the client killed, or stopped after k results) resume to the same output. Grading runs with
short sandbox limits; on the cluster they travel with each task (monkeypatching stops at this process).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner

from course_cli.classes import batch, cluster
from course_cli.sandboxed import sandbox
from course_cli.sandboxed.grading import Reference, reference_key
from course_cli.classes.journal import (Journal, JournalError, file_digest, journal_seed, result_from_dict,
                                result_to_dict)
from course_cli.main import cli
from graders.registry import ROOT, find_lesson
from graders.engine.results import CheckResult, ExerciseResult, LessonResult
from harness import mistakes_of, with_code, with_mistake

L01 = find_lesson("lesson01")
# the `cluster` extra (pip install -e ".[cluster]"); without it only the journal and the local pool are tested
needs_dask = pytest.mark.skipif(importlib.util.find_spec("distributed") is None,
                                reason="the cluster extra (dask, distributed) is not installed")
# the hang ends soon; two cores, several children (the run's limits: in process, the CLI and child processes)
ENV_LIMITS = {"COURSE_CELL_TIMEOUT": "3", "COURSE_EXERCISE_TIMEOUT": "6"}


def _result(student: str) -> LessonResult:
    return LessonResult("lesson01", f"/subs/{student}.ipynb", [
        ExerciseResult("softmax", "passed", 4.0, 4.0, [CheckResult("random inputs", "passed", message="ok")]),
        ExerciseResult("scaled_dot_product_attention", "failed", 0.0, 6.0,
                       [CheckResult("masked", "failed", "cpu", "float64", "leaks\nsecond line")], "the mask leaks"),
    ], notes=["cell 3 failed: NameError"])


# ---------------------------------------------------------------------------------------------------------
# The journal (no grading)

def test_a_result_round_trips_through_the_journal_format_exactly():
    res = _result("alice")
    back = result_from_dict(json.loads(json.dumps(result_to_dict(res))))
    assert back == res and back.to_dict() == res.to_dict() and back.notes == res.notes


def test_the_journal_resumes_whole_lines_and_only_unchanged_submissions(tmp_path):
    nb = tmp_path / "alice.ipynb"
    nb.write_text("{}")
    other = tmp_path / "bob.ipynb"
    other.write_text("{}")
    path = tmp_path / "results.json.journal"
    with Journal.open(path, "lesson01", "key", resume=False) as j:
        j.record("alice", str(nb), file_digest(nb), _result("alice"))
        j.record("bob", str(other), file_digest(other), _result("bob"))
    with open(path, "ab") as f:
        f.write(b'{"student": "carol", "notebook": "x", "sha2')  # a killed run's torn last line
    other.write_text('{"changed": 1}')  # bob resubmitted
    with Journal.open(path, "lesson01", "key", resume=True) as j:
        assert j.finished("alice", file_digest(nb)) == _result("alice")
        assert j.finished("bob", file_digest(other)) is None  # graded again
        assert j.finished("carol", file_digest(nb)) is None
        j.record("carol", "x", None, _result("carol"))
    lines = path.read_bytes().split(b"\n")
    assert lines[-1] == b"" and [json.loads(x)["student"] for x in lines[1:-1]] == ["alice", "bob", "carol"]


def test_a_journal_of_another_lesson_or_other_graders_is_refused_and_a_fresh_start_keeps_a_backup(tmp_path):
    path = tmp_path / "j"
    Journal.open(path, "lesson01", "key", resume=False).close()
    with pytest.raises(JournalError, match="journal of lesson01, not lesson02"):
        Journal.open(path, "lesson02", "key", resume=True)
    with pytest.raises(JournalError, match="course changed since"):
        Journal.open(path, "lesson01", "other-key", resume=True)
    path.write_text("not a journal\n")
    with pytest.raises(JournalError, match="not a results journal"):
        Journal.open(path, "lesson01", "key", resume=True)
    Journal.open(path, "lesson01", "key", resume=False).close()
    assert (tmp_path / "j.bak").read_text() == "not a journal\n"
    assert json.loads(path.read_text()) == {"journal": 1, "lesson": "lesson01", "reference": "key"}
    Journal.open(path, "lesson01", "key", resume=False, seed=12345).close()  # the run's hidden seed is kept
    assert journal_seed(path) == 12345 and journal_seed(tmp_path / "j.bak") is None
    with pytest.raises(JournalError, match="hidden seed 12345, not 7"):
        Journal.open(path, "lesson01", "key", resume=True, seed=7)
    Journal.open(path, "lesson01", "key", resume=True, seed=12345).close()


def test_a_worker_with_other_graders_refuses_to_grade():
    with pytest.raises(cluster.ClusterError, match="install the same version of the course"):
        cluster.grade_task("lesson01", "alice", "/nowhere.ipynb", b"{}", None, None, "not-this-key")


# ---------------------------------------------------------------------------------------------------------
# A class graded both ways

@pytest.fixture(scope="module")
def limits():
    with pytest.MonkeyPatch.context() as mp:
        for name, value in ENV_LIMITS.items():
            mp.setenv(name, value)
        yield


NAMED_MISTAKES = {"no_max", "k_T", "divide_by_dk", "inverted_mask", "sum_wrong_dim", "no_scaling"}
# 3 solved, 2 stubs, one half done, the named mistakes, a hang, a crash, a torn file: every kind of row a class
# gives (passed, not implemented, partly done, a named cause, a timeout, an error, NOT GRADED) and identical
# notebooks graded apart. Every submission is graded on the local pool and again on the cluster (the other
# catalogued mistakes are each graded in the sandbox by tests/e2e/test_lessons_e2e.py).
CLASS_SIZE = 3 + 2 + 1 + len(NAMED_MISTAKES) + 3


@pytest.fixture(scope="module")
def klass(tmp_path_factory, limits) -> Path:
    """CLASS_SIZE submissions: 3 solved, 2 stubs, one half done, the named mistakes, a hang, a crash, a torn file."""
    tmp = tmp_path_factory.mktemp("class")
    folder = tmp / "subs"
    folder.mkdir()
    for i in range(3):
        shutil.copy(L01.solution_path, folder / f"solved{i}.ipynb")
    for i in range(2):
        shutil.copy(L01.student_path, folder / f"stub{i}.ipynb")
    half = with_code(L01, "softmax", "def softmax(x, dim=-1):\n    raise NotImplementedError\n", tmp)
    shutil.copy(half, folder / "half.ipynb")
    mistakes = [m for m in mistakes_of(L01) if m.id in NAMED_MISTAKES]
    assert len(mistakes) == len(NAMED_MISTAKES), "a mistake the cluster tests name left lesson 01's catalogue"
    for m in mistakes:
        shutil.copy(with_mistake(L01, m, tmp), folder / f"mistake-{m.id}.ipynb")
    hang = with_code(L01, "softmax", "def softmax(x, dim=-1):\n    while True:\n        pass\n", tmp)
    shutil.copy(hang, folder / "hang.ipynb")
    crash = nbformat.read(L01.solution_path, as_version=4)
    crash.cells.insert(2, nbformat.v4.new_code_cell("import os\nos._exit(3)"))
    nbformat.write(crash, folder / "crash.ipynb")
    (folder / "torn.ipynb").write_text('{"cells": [')
    assert len(list(folder.glob("*.ipynb"))) == CLASS_SIZE
    return folder


def _grade_cli(folder: Path, out: Path, *options: str):
    r = CliRunner().invoke(cli, ["grade", str(folder), "--lesson", "lesson01", "--out", str(out), *options],
                           catch_exceptions=False)
    assert r.exit_code in (0, 1) and out.exists(), r.output  # 1: some submissions could not be graded (torn)
    return r


@pytest.fixture(scope="module")
def local(klass, tmp_path_factory):
    """The class graded on the local pool (2 jobs): the expected results of every other test."""
    out = tmp_path_factory.mktemp("local") / "results.json"
    r = _grade_cli(klass, out, "--jobs", "2")
    data = json.loads(out.read_text())
    by = data["students"]
    assert by["solved0"]["score"] == 10.0 and by["stub0"]["score"] == 0.0
    assert {e["status"] for e in by["hang"]["exercises"]} == {"timeout"}
    assert {e["status"] for e in by["crash"]["exercises"]} == {"error"}
    assert by["mistake-no_scaling"]["exercises"][1]["diagnosis"].startswith("the scores are not divided")
    return {"out": out, "run": r, "data": data, "journal": _journal(Path(str(out) + ".journal"))}


def _journal(path: Path) -> dict:
    """student -> the journalled result dict (with notes)."""
    lines = path.read_text().splitlines()
    entries = [json.loads(x) for x in lines[1:]]
    students = [e["student"] for e in entries]
    assert len(students) == len(set(students)), "a submission was graded twice"
    return {e["student"]: e["result"] for e in entries}


def _table(stdout: str) -> str:
    return "\n".join(line for line in stdout.splitlines() if not line.startswith("wrote "))


@pytest.fixture
def client(limits):
    """A fresh LocalCluster of 2 for each test (a test that kills workers leaves its cluster changed)."""
    distributed = pytest.importorskip("distributed")
    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import this test file
    c = distributed.Client(cluster.local_cluster(2))
    yield c
    cluster_obj = c.cluster
    c.close()
    cluster_obj.close()


def _subset(klass: Path, names: list[str]) -> list[tuple[str, Path]]:
    return [(n, klass / f"{n}.ipynb") for n in names]


def _kills_its_worker(lesson_id, student, *args):
    if student == "killer":
        os._exit(1)
    return cluster.grade_task(lesson_id, student, *args)


def _spy_on_reference_children():
    """On a worker: count the children its sandbox starts, the reference's (mistakes=True) apart, and the
    students' forked from a class zygote (course_cli/sandboxed/class_forks.py) with the students'."""
    from course_cli.sandboxed import warm

    start, fork = sandbox.start, warm.Zygote.start
    if getattr(start, "spied", False):
        return

    def spy(*args, **kwargs):
        sandbox.children_started[bool(kwargs.get("mistakes"))] += 1
        return start(*args, **kwargs)

    def spy_fork(zygote, job):
        sandbox.children_started[0] += 1
        return fork(zygote, job)

    spy.spied = True
    sandbox.children_started = [0, 0]  # [students' children, reference children]
    sandbox.start = spy
    warm.Zygote.start = spy_fork


def _children_started():
    return tuple(sandbox.children_started)


