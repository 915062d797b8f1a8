"""Class grading forks each submission from its lesson's class zygote (course_cli/sandboxed/class_forks.py),
attacked and compared with the cold way:

- a mixed class (solved, stub, catalogued mistakes, a student who leaves files and a daemon behind, one who
  looks for them) graded on the local pool with forks and with COURSE_CLASS_FORKS=0: the same results, field
  by field, and with forks one zygote per lane, not one per submission (a zygote killed when the lane's thread
  that started it ended would show as more);
- what one student leaves (files in /tmp, /dev/shm, the home and working folders; a daemon of its own session
  that keeps writing) is not there for the next student the same zygote forks (the leaver looks too, and
  finds its own: the look works);
- a zygote that dies under a submission: that submission is graded the cold way, with the cold verdict, and the
  next one gets a new zygote;
- what a forked student's child can read is tested in tests/e2e/test_child_build.py
  (`test_a_student_child_can_read_no_answer`, both ways).
"""

from __future__ import annotations

import copy
import json
import os
import signal

import nbformat
import pytest

from course_cli import settings
from course_cli.classes import batch
from course_cli.sandboxed import class_forks, sandbox, warm
from graders.engine import mistake_source
from graders.registry import find_lesson
from harness import mistakes_of, solution_cell_index

pytestmark = [pytest.mark.slow, pytest.mark.lesson01,
              pytest.mark.skipif(not class_forks.usable(), reason="needs bubblewrap and pidfds (Linux)")]

L01 = find_lesson("lesson01")
SEED = 31337

LEAVE = '''import os, time
for d in ("/tmp", "/dev/shm", os.path.expanduser("~"), os.getcwd()):
    try:
        with open(os.path.join(d, "left-by-a"), "w") as f:
            f.write("a")
    except OSError:
        pass
pid = os.fork()
if pid == 0:  # a daemon of its own session, writing on after the notebook ends
    os.setsid()
    if os.fork() == 0:
        while True:
            for d in ("/tmp", "/dev/shm"):
                try:
                    with open(os.path.join(d, "left-by-a-daemon"), "w") as f:
                        f.write("a")
                except OSError:
                    pass
            time.sleep(0.02)
    os._exit(0)
os.waitpid(pid, 0)
'''

LOOK = '''
import glob as _glob, os as _os
_LEFT = sorted(p for d in ("/tmp", "/dev/shm", _os.path.expanduser("~"), _os.getcwd())
               for p in _glob.glob(_os.path.join(d, "left-by-a*")))
if _LEFT:
    def softmax(x, dim=-1):
        raise RuntimeError(f"left by another student: {_LEFT}")
'''


def _solved():
    nb = nbformat.read(L01.solution_path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = "\n".join(ln for ln in cell.source.splitlines() if "### BEGIN SOLUTION" not in ln
                                    and "### END SOLUTION" not in ln)
    return nb


def _write(folder, student: str, nb) -> None:
    path = folder / student / L01.id / L01.notebook
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)


def _class(folder, extra: bool) -> None:
    solved = _solved()
    _write(folder, "c_solved", solved)
    _write(folder, "d_stub", nbformat.read(L01.student_path, as_version=4))
    for m in mistakes_of(L01)[:3]:
        nb = copy.deepcopy(solved)
        nb.cells[solution_cell_index(nb, m.exercise)].source = mistake_source(m)
        _write(folder, f"e_{m.id}", nb)
    if extra:
        looker = copy.deepcopy(solved)
        looker.cells[solution_cell_index(looker, "softmax")].source += LOOK
        _write(folder, "b_looker", looker)
        leaver = copy.deepcopy(looker)  # it looks too: it finds what it left itself (the look works)
        leaver.cells.insert(1, nbformat.v4.new_code_cell(LEAVE))
        _write(folder, "a_leaver", leaver)


class Count:
    """How many zygotes were started and how many submissions they forked, in this process."""

    def __init__(self, monkeypatch):
        self.zygotes = self.forks = 0
        init, start = warm.Zygote.__init__, warm.Zygote.start

        def counted_init(z, *a, **k):
            self.zygotes += 1
            return init(z, *a, **k)

        def counted_start(z, job):
            self.forks += 1
            return start(z, job)

        monkeypatch.setattr(warm.Zygote, "__init__", counted_init)
        monkeypatch.setattr(warm.Zygote, "start", counted_start)


def _grade(folder, jobs: int) -> dict:
    subs = batch.find_submissions(folder, L01)
    with settings.using(settings.Run(hidden_seed=SEED)):
        results = batch.grade_class(L01, subs, jobs=jobs)
    return {s: r.to_dict() for s, r in results.items()}


def _same(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for student in a:
        assert json.dumps(a[student], sort_keys=True) == json.dumps(b[student], sort_keys=True), student


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """The mixed class (solved, stub, three catalogued mistakes) and its results graded the cold way."""
    folder = tmp_path_factory.mktemp("class")
    _class(folder, extra=False)
    mp = pytest.MonkeyPatch()
    try:
        mp.setenv("COURSE_CLASS_FORKS", "0")
        cold = _grade(folder, jobs=2)
    finally:
        mp.undo()
    assert cold["c_solved"]["score"] == L01.max_score and cold["d_stub"]["score"] == 0
    return folder, cold


def test_a_forked_class_gets_the_cold_verdicts_with_one_zygote_per_lane(mixed, monkeypatch):
    folder, cold = mixed
    count = Count(monkeypatch)
    forked = _grade(folder, jobs=2)
    assert count.forks == len(forked) == 5
    assert count.zygotes <= 2, count.zygotes  # one per lane: a lane's thread ending killed none
    assert class_forks._ALL == []  # the batch's zygotes stopped with it
    _same(forked, cold)


def test_what_a_student_leaves_is_not_there_for_the_next(tmp_path, monkeypatch):
    _class(tmp_path, extra=True)
    count = Count(monkeypatch)
    forked = _grade(tmp_path, jobs=1)  # in order, one lane: the leaver, then the looker, from one zygote
    assert count.zygotes == 1 and count.forks == len(forked) == 7
    leaver = next(e for e in forked["a_leaver"]["exercises"] if e["id"] == "softmax")
    assert leaver["status"] == "error" and "left-by-a" in json.dumps(leaver)  # its own files: the look sees
    looker = forked["b_looker"]
    assert looker["score"] == L01.max_score, json.dumps(looker)[:2000]


def test_a_zygote_that_dies_under_a_submission_grades_it_cold(mixed, monkeypatch):
    folder, cold = mixed
    count = Count(monkeypatch)
    start = warm.Zygote.start
    killed = []

    def die_first(z, job):  # the first fork: its zygote is killed as the submission starts
        child = start(z, job)
        if not killed:
            killed.append(z)
            os.killpg(z.proc.pid, signal.SIGKILL)
        return child

    monkeypatch.setattr(warm.Zygote, "start", die_first)
    starts = []
    cold_start = sandbox.start
    monkeypatch.setattr(sandbox, "start", lambda *a, **k: starts.append(k.get("mistakes")) or cold_start(*a, **k))
    forked = _grade(folder, jobs=1)
    assert killed and count.zygotes == 2  # a new zygote for the next submission
    assert sum(1 for mistakes in starts if not mistakes) == 1  # that one submission's child, started cold
    _same(forked, cold)
