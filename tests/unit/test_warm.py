"""Warm checks (course_cli/sandboxed/warm.py, zygote.py): the same verdicts warm and cold, a warm process
that a check cannot influence, restarted when killed or stale, never waited on when it does not answer, and
never used by class grading.

The end-to-end tests run `course check` in a subprocess with COURSE_WARM=1 and a private XDG_RUNTIME_DIR
(the socket's folder); each stops the servers it started."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import nbformat
import pytest

from course_cli.sandboxed import warm
from graders.engine.results import CheckResult, ExerciseResult, LessonResult
from graders.registry import LESSONS, ROOT, find_lesson

L01 = find_lesson("lesson01")


# ----------------------------------------------------------------------------------------------
# without a child

def test_a_result_crosses_the_socket_whole():
    check = CheckResult("matches", "failed", "cpu", "float32", "max abs error 1.0")
    check.figure = {"what": "out", "student": [[1.0, float("nan")]], "reference": [[1.0, 2.0]]}
    result = LessonResult("lesson01", "nb.ipynb", [ExerciseResult("softmax", "failed", 0.0, 4.0, [check],
                                                                  "the mask is inverted")], ["a note"])
    back = warm.from_wire(json.loads(json.dumps(warm.to_wire(result))))
    assert back.to_dict() == result.to_dict()
    assert back.notes == ["a note"]
    assert back.exercises[0].checks[0].figure["reference"] == [[1.0, 2.0]]


def test_every_field_of_a_result_crosses_the_socket():
    """A NOT GRADED notebook, a renamed one's note, a public-only run: what the cold seat says, warm too."""
    from dataclasses import fields

    result = LessonResult("lesson01", "nb.ipynb", [ExerciseResult("softmax", "error", 0.0, 4.0, [])], ["why"],
                          public_only=True, not_graded="nb.ipynb is not a valid Jupyter notebook", note="renamed")
    back = warm.from_wire(json.loads(json.dumps(warm.to_wire(result))))
    for f in fields(LessonResult):
        if f.name != "exercises":
            assert getattr(back, f.name) == getattr(result, f.name) != f.default, f.name
    assert back.score is None and back.to_dict() == result.to_dict()


def test_the_key_follows_the_course_code(tmp_path, monkeypatch):
    (tmp_path / "graders" / "engine").mkdir(parents=True)
    f = tmp_path / "graders" / "engine" / "judges.py"
    f.write_text("x = 1\n")
    monkeypatch.setattr(warm, "ROOT", tmp_path)
    before = warm.course_key()
    assert warm.course_key() == before
    f.write_text("x = 2  # changed\n")
    assert warm.course_key() != before
    changed = warm.course_key()
    (tmp_path / "solutions").mkdir()
    (tmp_path / "solutions" / "lesson99_new.ipynb").write_text("{}")
    assert warm.course_key() != changed  # a new lesson


def test_a_setup_cell_setting_triton_interpret_keeps_the_kernel_s_server(tmp_path, monkeypatch):
    """Lesson 05's and 09's setup cells set TRITON_INTERPRET=1 in the kernel on a machine without a GPU (lesson
    10's through import_lesson): the check cells must still reach the server the kernel started when the
    notebook opened (a CPU check's children interpret whatever the client has: sandbox.child_env). A variable
    the children do get from the client still names another server."""
    from course_cli.sandboxed import sandbox

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    before = (warm.socket_path(tmp_path), warm.course_key())
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert (warm.socket_path(tmp_path), warm.course_key()) == before
    assert sandbox.child_env("cpu", False, True)["TRITON_INTERPRET"] == "1"
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert sandbox.child_env("cpu", False, True)["TRITON_INTERPRET"] == "1"
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert warm.socket_path(tmp_path) != before[0] and warm.course_key() != before[1]


def test_the_socket_folder_is_private(monkeypatch):
    import shutil
    import tempfile

    short = Path(tempfile.mkdtemp(prefix="xdg-", dir="/tmp"))  # a socket's path is short: not pytest's tmp_path
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(short))
    d = warm.socket_dir()
    assert d.parent == short and stat.S_IMODE(os.stat(d).st_mode) == 0o700
    os.chmod(d, 0o755)  # opened up by someone: not used (the temp folder's own private one is)
    assert warm.socket_dir() != d
    shutil.rmtree(short)


def test_warm_is_off_when_asked(monkeypatch):
    monkeypatch.setenv("COURSE_WARM", "0")
    assert not warm.enabled()
    called = []
    monkeypatch.setattr(warm, "_grade_warm", lambda req: called.append(req))
    from graders.engine.results import LessonResult

    monkeypatch.setattr("course_cli.sandboxed.grading.grade_notebook", lambda *a, **k: LessonResult("cold", ""))
    assert warm.grade_notebook(L01, L01.solution_path).lesson == "cold" and not called  # (as students see it)


def test_course_check_starts_its_server_first_and_then_waits_for_that_one(monkeypatch, tmp_path):
    """`course check` starts the warm server before it imports the rest of the CLI (start_early), so that the
    server imports torch meanwhile; the check then waits for that server: one start, not two (a second server
    would lose the workspace's lock, and cost a Python start on a 2-core machine)."""
    spawned, listening = [], []

    class Started:
        def poll(self):
            return None

    def spawn(path, key, lesson, cwd, workspace):
        spawned.append((lesson, cwd))
        assert workspace == tmp_path  # the server is told its workspace (it exits when that folder is gone)
        return Started()

    def connect(path):
        if not spawned or len(listening) < 2:  # not yet listening, then listening
            listening.append(bool(spawned))
            return None
        return socket.socketpair()[0]

    monkeypatch.setattr(warm, "enabled", lambda: True)
    monkeypatch.setattr(warm, "asked", lambda: True)
    monkeypatch.setattr(warm, "socket_path", lambda ws: tmp_path / "w.sock" if ws == tmp_path else 1 / 0)
    monkeypatch.setattr(warm, "_spawn", spawn)
    monkeypatch.setattr(warm, "_connect", connect)
    monkeypatch.setattr(warm, "_hello", lambda conn, key: {"key": key, "pid": -1})
    monkeypatch.setattr(warm, "_send", lambda conn, msg: None)
    monkeypatch.setattr(warm, "_recv", lambda conn, timeout: {"result": "the verdict"})
    monkeypatch.setattr(warm, "from_wire", lambda data: data)
    warm.start_early(L01, tmp_path / "nb" / "lesson01.ipynb", tmp_path)
    assert spawned == [("lesson01", str((tmp_path / "nb").resolve()))]
    req = {"op": "grade", "lesson": "lesson01", "path": "x", "cwd": str(tmp_path / "nb")}
    assert warm._grade_warm(req, tmp_path) == "the verdict"
    assert len(spawned) == 1 and warm._EARLY is None
    # with no early start (the check cell's path), the check starts the server itself
    listening.clear()
    spawned.clear()
    assert warm._grade_warm(req, tmp_path) == "the verdict" and len(spawned) == 1


# ----------------------------------------------------------------------------------------------
# end to end

def _env(run_dir: Path, **extra) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COURSE_WARM": "1", "XDG_RUNTIME_DIR": str(run_dir), **extra}
    return env


@pytest.fixture
def run_dir(monkeypatch):
    import shutil
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="cw-"))  # short: a socket's path has at most 107 bytes
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(d))
    yield d
    _stop_servers(d)
    shutil.rmtree(d, ignore_errors=True)


def _stop_servers(d: Path) -> None:
    """Stop the servers of run folder `d`: SIGTERM to every one, then SIGKILL to those still there 5 s later (a
    server left running here outlives the test session; one that misses both still exits once `d` is deleted: its
    socket is gone). All at once: the hostile corpus's folder held 19 servers, and waiting 5 s for each in turn
    made its module's teardown 87 s (`--durations`)."""
    pids = []
    for pidfile in (d / "attention-course").glob("w-*.pid"):
        try:
            pid = int(pidfile.read_text())
            os.kill(pid, signal.SIGTERM)
            pids.append(pid)
        except (OSError, ValueError):
            pass
    warm.end(pids, 5.0)


def check(path, run_dir, *flags, lesson=L01, cwd=None, timeout=600, **env):
    r = subprocess.run([sys.executable, "-m", "course_cli", "check", lesson.id, "--notebook", str(path), "--json",
                        *flags], capture_output=True, text=True, env=_env(run_dir, **env), cwd=cwd, timeout=timeout)
    assert r.returncode in (0, 1, 2), r.stderr[-3000:]
    result = json.loads(r.stdout)
    assert (r.returncode == 2) == bool(result.get("not_graded")), r.stdout[-3000:]  # 2: bad input, said once
    return result


def warm_checks(run_dir) -> int:
    """How many checks a warm server graded (its log line per check: "HH:MM:SS lessonNN: 0.42 s")."""
    import re

    return sum(1 for f in (run_dir / "attention-course").glob("w-*.log") for line in f.read_text().splitlines()
               if re.fullmatch(r"\d\d:\d\d:\d\d lesson\d\d: [\d.]+ s( \(new zygote\))?", line))


def server_pid(run_dir) -> int:
    (pidfile,) = (run_dir / "attention-course").glob("w-*.pid")
    return int(pidfile.read_text())


def _notebooks(lesson, folder: Path) -> list[Path]:
    """The solution, the stub and two catalogued mistakes, in one folder (one zygote serves them)."""
    from harness import mistakes_of, with_mistake

    folder.mkdir(parents=True, exist_ok=True)
    out = [folder / "solution.ipynb", folder / "stub.ipynb"]
    out[0].write_bytes(lesson.solution_path.read_bytes())
    out[1].write_bytes((ROOT / "lessons" / lesson.notebook).read_bytes())
    for m in list(mistakes_of(lesson))[:2]:
        out.append(with_mistake(lesson, m, folder))
    return out


def _hostile(tmp_path: Path) -> Path:
    """lesson01's solution, plus a cell that tries to leave something for the next check."""
    nb = nbformat.read(L01.solution_path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(r'''
import os, sys, signal, torch, builtins
open("/tmp/planted", "w").write("x")
open("../planted", "w").write("x")
os.environ["PLANTED"] = "1"
torch.softmax = lambda *a, **k: torch.zeros(1)
torch.Tensor.softmax = lambda self, *a, **k: torch.zeros(1)
builtins.PLANTED = True
# every process this check can see: try to read, trace or signal it (the zygote, its init, bwrap)
for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    for what in ("mem", "environ", "root/tmp/planted-in-zygote"):
        try:
            open(f"/proc/{pid}/{what}", "w").write("x")
        except OSError:
            pass
    try:
        fd = os.open(f"/proc/{pid}", os.O_RDONLY | os.O_DIRECTORY)
        signal.pidfd_send_signal(fd, signal.SIGKILL)
    except OSError:
        pass
if os.fork() == 0:  # a daemon that outlives the check, if it can
    os.setsid()
    import time
    time.sleep(2)
    for p in ("/tmp/planted-late", "../planted-late"):
        try:
            open(p, "w").write("x")
        except OSError:
            pass
    os._exit(0)
'''))
    path = tmp_path / "hostile.ipynb"
    nbformat.write(nb, path)
    return path


def _probe(tmp_path: Path) -> Path:
    """lesson01's solution, whose softmax breaks if anything of a previous check is still around."""
    nb = nbformat.read(L01.solution_path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(r'''
import os, glob, builtins, torch
_traces = [p for p in ("/tmp/planted", "/tmp/planted-late", "../planted", "../planted-late")
           if os.path.exists(p)] + glob.glob("../*/planted*")
_status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
_privileged = int(_status["CapEff"].strip(), 16) != 0 or _status["NoNewPrivs"].strip() != "1"
# a forked process computes correctly, with a thread pool of its own too
torch.set_num_threads(2)
_a = torch.randn(300, 300, dtype=torch.float64)
_wrong = not torch.allclose(_a @ _a, torch.from_numpy(_a.numpy() @ _a.numpy()))
torch.set_num_threads(1)
if _traces or os.environ.get("PLANTED") or getattr(builtins, "PLANTED", False) or _privileged or _wrong \
        or torch.softmax(torch.zeros(2), 0).shape != (2,):
    def softmax(x, dim=-1):
        raise RuntimeError(f"a previous check left {_traces}")
'''))
    path = tmp_path / "probe.ipynb"
    nbformat.write(nb, path)
    return path


from harness import HOSTILE  # noqa: E402 (the corpus of tests/fixtures/hostile; tests/e2e/test_warm_e2e.py grades it)


@pytest.fixture(scope="module")
def hostile_folder(sandbox_matrix):
    """The corpus in one folder (the session's, where its cold gradings read it: tests/harness.py
    SandboxMatrix.hostile_corpus), one socket folder and one workspace (COURSE_WORKSPACE, which the autouse
    `_isolated_workspace` makes per test: a server's key holds the COURSE_ variables, so a workspace per test
    started a server per notebook, 44 torch imports): one warm server and one zygote serve them all, as they
    serve one student's checks. (folder, run folder, the check's environment)."""
    import shutil
    import tempfile

    folder = sandbox_matrix.hostile_corpus()
    d = Path(tempfile.mkdtemp(prefix="cw-"))
    yield folder, d, {"COURSE_WORKSPACE": str(d / "workspace")}
    _stop_servers(d)
    shutil.rmtree(d, ignore_errors=True)


def test_a_followed_process_is_recognised_by_its_pid_and_start_time():
    me = [os.getpid(), warm._started(os.getpid())]
    assert me[1] is not None and warm._alive(me)
    assert not warm._alive([os.getpid(), "0"])  # the same PID with another start time: a reused PID
    assert warm._started(2**22 + 12345) is None  # no such process
    before = warm._OWNER
    try:
        warm.stay_with(os.getpid())
        assert warm._OWNER == me
    finally:
        warm._OWNER = before
