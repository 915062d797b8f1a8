"""Warm checks: a grading server per workspace that keeps torch, the graders and the references loaded, and
a zygote inside the sandbox that forks one sandboxed child per check (course_cli/sandboxed/zygote.py).

    course check / check cell / course watch ── Unix socket (0600, in a 0700 folder; peer uid checked)
        └─▶ warm server (this user; never runs student code): the reference in memory, judges
              └─ bwrap (the student child's rules) ─ zygote (torch + graders imported, no student code)
                                                        └─ fork per check ─ its own namespaces ─ the child

Only a student's own checks use it (`course check`, the check cells, `course watch`); class grading (`course
grade`, nbgrader, Gradescope) calls course_cli.sandboxed.grading directly: a fresh sandbox per submission.
Whatever goes wrong on the warm path (no bubblewrap, a dead or stale server, a zygote that is not safe to
fork), the check is graded the cold way: a check never hangs on the warm process, and its verdict is the
cold one.

The server is keyed on the course's code (every file of graders/, course_cli/ and solutions/, the
interpreter, torch's version) and the environment the children get: any change restarts it (a version
handshake on every check). It exits after COURSE_WARM_IDLE seconds (900) without a check. COURSE_WARM=0
(or `course check --cold`) turns warm checks off.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import queue
import select
import shutil
import signal
import socket
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import fields
from pathlib import Path

from graders.engine.results import CheckResult, ExerciseResult, LessonResult, for_students
from graders.registry import ROOT, find_lesson

from course_cli import atomic, settings
from course_cli.sandboxed import sandbox
from course_cli.sandboxed.notebook import NotebookError, _nbformat, graded_cells, read_notebook
from course_cli.sandboxed.zygote import VIEW_FD, recv, send

CONNECT_TIMEOUT = 2.0  # to connect and to get the handshake's answer
SILENCE = 20.0  # the longest a grading server may be silent (it sends a heartbeat every second)
START_TIMEOUT = 30.0  # for a server just started to listen
_ENV_PREFIXES = ("COURSE_", "OMP_", "MKL_", "OPENBLAS_", "KMP_", "CUDA_", "NVIDIA_", "TORCH_", "TRITON_",
                 "LD_LIBRARY_PATH", "PYTORCH_", "MALLOC_ARENA_MAX")


# The time stamps of the check a server grades (one at a time, on its worker thread), as phases: what the log
# line after each check and the reply's "phases" report (benchmarks/warm_phases.py reads them). Off (None)
# outside Server.grade (the tests' harness forks checks through Zygote.runner too).
_MARKS: "list[tuple[str, float]] | None" = None


def _mark(phase: str) -> None:
    """The phase `phase` of the check in flight ended now."""
    if _MARKS is not None:
        _MARKS.append((phase, time.perf_counter()))


def _phases() -> dict[str, float]:
    """{phase: seconds} of the marks so far, each from the mark before it."""
    return {name: round(t - _MARKS[i - 1][1], 4) for i, (name, t) in enumerate(_MARKS) if i}


class WarmUnavailable(Exception):
    """The warm path cannot grade this check; it is graded cold instead."""


def asked() -> bool:
    """Warm checks are asked for (COURSE_WARM is not 0) and could run here (Linux, pidfds); a server that answers
    proves the rest (it starts only where bubblewrap works), so a client asks no more before it connects."""
    return settings.warm() and sys.platform.startswith("linux") and hasattr(os, "pidfd_open")


def enabled() -> bool:
    """Warm checks are on unless COURSE_WARM=0; they need Linux, pidfds and bubblewrap (a try of bwrap, once per
    process: 20-50 ms here, asked only before a server is started)."""
    return asked() and sandbox.bwrap_status()[0]


# ----------------------------------------------------------------------------------------------
# identity: which server a check may use

# Not part of a server's name: COURSE_WARM (every client of a server has it), and TRITON_INTERPRET, which a warm
# check's children get as "1" whatever the client has (sandbox.child_env: a CPU child always interprets), and which
# lesson 05's and 09's setup cells set in the kernel on a machine without a GPU (lesson 10's too, through
# import_lesson("lesson05")): with it in the name, the server the kernel started when the notebook opened was
# never the check cells' one, and the first check cell started a second server.
_ENV_IGNORED = ("COURSE_WARM", "TRITON_INTERPRET")


def _env_part() -> list[tuple[str, str]]:
    return sorted((k, v) for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES) and k not in _ENV_IGNORED)


def course_key() -> str:
    """The course's code as the server loaded it: every grader, CLI and solution file (path, size, mtime),
    the interpreter and torch's version. A check whose key differs restarts the server."""
    h = hashlib.sha256()
    h.update(f"{sys.executable}\0{sys.version}\0{ROOT}\0{_torch_stamp()}\0".encode())
    for sub, pattern in (("graders", "**/*.py"), ("course_cli", "**/*.py"), ("solutions", "*.ipynb"),
                         ("graders", "data/**/*.pt")):
        for p in sorted((ROOT / sub).glob(pattern)):
            try:
                st = p.stat()
            except OSError:
                continue
            h.update(f"{p.relative_to(ROOT)}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    h.update(repr(_env_part()).encode())
    return h.hexdigest()[:24]


def _torch_stamp() -> str:
    """torch as installed: its version file's path, size and mtime (a reinstall rewrites it). Not
    importlib.metadata's version: importing it cost the client 48 ms."""
    for entry in sys.path:
        p = Path(entry or ".") / "torch" / "version.py"
        try:
            st = p.stat()
        except OSError:
            continue
        return f"{p}\0{st.st_size}\0{st.st_mtime_ns}"
    return ""


def socket_dir() -> Path:
    """A folder only this user can open: $XDG_RUNTIME_DIR/attention-course, else one in the temp folder.
    Raise WarmUnavailable when it exists and is not ours alone."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    candidates = [Path(base) / "attention-course"] if base and os.path.isdir(base) else []
    candidates.append(Path(tempfile.gettempdir()) / f"attention-course-{os.getuid()}")
    for d in candidates:
        if len(str(d)) > 80:  # a Unix socket's path has at most 107 bytes
            continue
        try:
            d.mkdir(mode=0o700, exist_ok=True)
            st = os.lstat(d)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and st.st_mode & 0o077 == 0:
            return d
    raise WarmUnavailable("no private folder for the warm grader's socket")


def socket_path(workspace: Path) -> Path:
    name = hashlib.sha256(f"{Path(workspace).resolve()}\0{_env_part()!r}".encode()).hexdigest()[:16]
    return socket_dir() / f"w-{name}.sock"


# ----------------------------------------------------------------------------------------------
# framing (the zygote's) and results on the wire

def _send(sock, msg: dict) -> None:
    send(sock, msg)


def _recv(sock, timeout: float):
    """One frame within `timeout` seconds; None at EOF; raise TimeoutError when nothing came."""
    ready, _, _ = select.select([sock], [], [], timeout)
    if not ready:
        raise TimeoutError
    sock.settimeout(SILENCE)
    try:
        return recv(sock)
    finally:
        sock.settimeout(None)


def _peer_uid(sock: socket.socket) -> int:
    pid, uid, gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return uid


def to_wire(result) -> dict:
    """A LessonResult as JSON-able data, every attribute kept (a check's figure data too; the result's own
    not_graded, note and public_only: the warm seat must say what the cold one says)."""
    return {**{k: (list(v) if isinstance(v, list) else v) for k, v in vars(result).items() if k != "exercises"},
            "exercises": [{**{k: v for k, v in vars(e).items() if k != "checks"},
                           "checks": [dict(vars(c)) for c in e.checks]} for e in result.exercises]}


def from_wire(data: dict):
    def build(cls, d: dict):
        names = {f.name for f in fields(cls)}
        obj = cls(**{k: v for k, v in d.items() if k in names})
        for k, v in d.items():
            if k not in names:
                setattr(obj, k, v)
        return obj

    exercises = []
    for e in data["exercises"]:
        ex = build(ExerciseResult, {k: v for k, v in e.items() if k != "checks"})
        ex.checks = [build(CheckResult, c) for c in e["checks"]]
        exercises.append(ex)
    return build(LessonResult, {**{k: v for k, v in data.items() if k != "exercises"}, "exercises": exercises})


# ----------------------------------------------------------------------------------------------
# the client: what `course check`, the check cell and `course watch` call

_SPAWNED: list[subprocess.Popen] = []
_OWNER: "list | None" = None  # [pid, its start time]: the process whose life the server follows (stay_with)


def _started(pid: int) -> str | None:
    """The start time of process `pid` (its /proc stat's 22nd field: a PID reused later has another), or None
    when it is gone or a zombie."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def stay_with(pid: int) -> None:
    """The warm server this process starts or uses ends when process `pid` ends (a notebook's kernel, `course
    watch`, JupyterLab), besides after COURSE_WARM_IDLE seconds idle. `course check` from a shell names none:
    its server waits for the next check until the idle limit."""
    global _OWNER
    started = _started(pid)
    _OWNER = [pid, started] if started else None


def _alive(owner) -> bool:
    return _started(owner[0]) == owner[1]


def grade_notebook(lesson, path, exercises=None, only_public: bool = False, warm: bool = True,
                   workspace: Path | None = None):
    """grading.grade_notebook, through `workspace`'s warm server when it can be used (else cold, the same verdict),
    as a student sees it (hidden checks: names and statuses, `results.for_students`). The caller names the
    workspace (the student's side finds it: this module never imports it); without one, cold."""
    if warm and workspace is not None and asked():
        req = {"op": "grade", "lesson": lesson.id, "path": str(path), "exercises": exercises,
               "only_public": only_public, "cwd": str(Path(path).resolve().parent)}
        result = _grade_warm(req, workspace)
        if result is not None:
            return for_students(result)
    # lazy: a warm check never needs grading: +0.13 s to `course check`, +0.29 s to a kernel's prestart (load 19)
    from course_cli.sandboxed import grading

    return for_students(grading.grade_notebook(lesson, path, exercises, only_public=only_public))


def grade_cells(lesson, cells, notebook: str = "", exercises=None, only_public: bool = False, cwd=None,
                warm: bool = True, workspace: Path | None = None):
    """grading.grade_cells (a student's own check), through `workspace`'s warm server when it can be used, as a
    student sees it (`results.for_students`); without a workspace, cold."""
    if warm and workspace is not None and asked():
        req = {"op": "grade", "lesson": lesson.id, "cells": cells, "notebook": notebook, "exercises": exercises,
               "only_public": only_public, "cwd": str(cwd) if cwd else None}
        result = _grade_warm(req, workspace)
        if result is not None:
            return for_students(result)
    # lazy: a warm check never needs grading: +0.13 s to `course check`, +0.29 s to a kernel's prestart (load 19)
    from course_cli.sandboxed import grading

    return for_students(grading.grade_cells(lesson, cells, notebook, exercises, only_public=only_public, cwd=cwd))


def _none_listening(workspace: Path) -> "tuple[Path, str] | None":
    """(socket path, course key) when warm checks are on here and no server of `workspace` listens."""
    if not asked():
        return None
    try:
        path = socket_path(workspace)
        conn = _connect(path)
        if conn is not None:
            conn.close()
            return None
        return (path, course_key()) if enabled() else None
    except (OSError, WarmUnavailable):
        return None


def prestart(lesson, workspace: Path, cwd=None, detach: bool = True) -> None:
    """Start the workspace's warm server for `lesson` if none is running, detached from this process (which
    `course lab` replaces with JupyterLab: `stay_with(os.getpid())` first makes the server end with it); never
    waits for it. detach=False (a kernel, which has threads): started as this process's child, in a session
    of its own, as a check cell starts it."""
    found = _none_listening(workspace)
    if found is None:
        return
    if not detach:
        try:
            _spawn(*found, lesson.id, cwd, workspace)
        except OSError:
            pass
        return
    pid = os.fork()  # this process has no threads and no torch: the fork only detaches the server
    if pid == 0:
        try:
            os.setsid()
            _spawn(*found, lesson.id, cwd, workspace)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def start_early(lesson, notebook, workspace: Path) -> None:
    """`course check`'s first step: start the workspace's warm server for `lesson` now if none is listening, so
    that it and its zygote import torch while this process imports the rest of the CLI and reads the notebook;
    the check that follows (grade_notebook) waits for this server instead of starting another."""
    global _EARLY
    found = _none_listening(workspace)
    if found is not None:
        try:
            _EARLY = (found[0], _spawn(*found, lesson.id, str(Path(notebook).resolve().parent), workspace))
        except OSError:
            pass


_EARLY: "tuple[Path, subprocess.Popen] | None" = None  # the server start_early started, not yet waited for


def _connect(path: Path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(CONNECT_TIMEOUT)
    try:
        s.connect(str(path))
        if _peer_uid(s) != os.getuid():
            raise OSError("the warm grader's socket belongs to another user")
    except OSError:
        s.close()
        return None
    s.settimeout(None)
    return s


def _spawn(path: Path, key: str, lesson: str | None, cwd: str | None, workspace: Path) -> subprocess.Popen:
    for p in list(_SPAWNED):  # reap servers this process started that have since exited
        if p.poll() is not None:
            _SPAWNED.remove(p)
    argv = [sys.executable, "-m", "course_cli.sandboxed.warm", "serve", str(path), key, lesson or "", cwd or "",
            "--workspace", str(Path(workspace).resolve())]
    if _OWNER:
        argv += [str(_OWNER[0]), _OWNER[1]]
    log = atomic.open_append(path.with_suffix(".log"))  # never through a link planted at its name
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                                start_new_session=True, close_fds=True, env={**os.environ, "COURSE_WARM": "1"})
    finally:
        log.close()
    _SPAWNED.append(proc)
    return proc


def _hello(conn, key: str) -> dict | None:
    try:
        _send(conn, {"op": "hello", "key": key})
        reply = _recv(conn, CONNECT_TIMEOUT * 3)
    except (OSError, TimeoutError, ValueError):
        return None
    return reply if isinstance(reply, dict) else None


def _stop(conn, reply: dict | None) -> None:
    """Tell a stale server to go, and make sure it went (it is this user's own process)."""
    try:
        _send(conn, {"op": "stop"})
    except OSError:
        pass
    conn.close()
    pid = reply.get("pid") if reply else None
    if isinstance(pid, int) and pid > 1:
        end([pid], 5.0)


def end(pids: list[int], seconds: float) -> None:
    """Give `pids` (told to go) `seconds` to exit, all at once, then SIGKILL those still there."""
    deadline = time.monotonic() + seconds
    while pids and time.monotonic() < deadline:
        pids = [pid for pid in pids if _exists(pid)]
        if pids:
            time.sleep(0.05)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _discard(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


def _grade_warm(req: dict, workspace: Path):
    """The result from `workspace`'s warm server, or None (then the caller grades cold)."""
    global _EARLY
    try:
        key, path = course_key(), socket_path(workspace)
    except (OSError, WarmUnavailable):
        return None
    for attempt in range(3):
        conn = _connect(path)
        if conn is None:
            if attempt == 2:
                return None
            early, _EARLY = (_EARLY if _EARLY and _EARLY[0] == path else None), None
            if early is None and not enabled():  # no bubblewrap: no server could start (the cold path says why)
                return None
            proc = early[1] if early else _spawn(path, key, req["lesson"], req.get("cwd"), workspace)
            deadline = time.monotonic() + START_TIMEOUT
            while conn is None and time.monotonic() < deadline:
                time.sleep(0.05)
                conn = _connect(path)
                if conn is None and proc.poll() is not None:
                    # it exited: another server won the lock (and is about to listen), or it cannot run here
                    deadline = min(deadline, time.monotonic() + 2.0)
            if conn is None:
                return None
        reply = _hello(conn, key)
        if reply is None:  # listening but not answering: whatever it is, a fresh server takes the path
            conn.close()
            _discard(path)
            continue
        if reply.get("key") != key:
            _stop(conn, reply)  # stale (older course code): replaced
            continue
        try:
            _send(conn, {**req, "owner": _OWNER} if _OWNER else req)
            while True:
                msg = _recv(conn, SILENCE)
                if msg is None:
                    return None  # the server died during the check: graded cold
                if "result" in msg:
                    return from_wire(msg["result"])
                if "error" in msg:
                    return None
        except (OSError, TimeoutError, ValueError, KeyError, TypeError):
            _stop(conn, reply)
            return None
        finally:
            conn.close()
    return None


# ----------------------------------------------------------------------------------------------
# the zygote, seen from the server

def _grading():
    """course_cli.sandboxed.grading, for the server's side of this module."""
    from course_cli.sandboxed import grading  # lazy: as in grade_notebook (+0.13-0.29 s to the client)

    return grading


class _ZygoteProc:
    """What sandbox.Child needs of a Popen, for one check forked by the zygote."""

    pid = -1

    def __init__(self, zygote: "Zygote", pidfd: int):
        self.zygote, self.pidfd, self.returncode = zygote, pidfd, None

    def wait(self, timeout: float | None = None):
        if self.returncode is not None:
            return self.returncode
        try:
            msg = self.zygote.recv(SILENCE if timeout is None else timeout)
        except TimeoutError:
            if timeout is None:
                self.zygote.broken = True
                raise WarmUnavailable("the warm check did not end after it was killed") from None
            raise subprocess.TimeoutExpired("warm check", timeout) from None
        if not isinstance(msg, dict) or not isinstance(msg.get("status"), int):
            self.zygote.broken = True
            raise WarmUnavailable(f"the zygote ended during a check ({msg})")
        self.returncode = msg["status"]
        _mark("check")  # the check ran: its cells and probes, its observations written
        return self.returncode

    def kill(self) -> None:
        try:
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        except OSError:
            pass


def _warm_child_class():
    class WarmChild(sandbox.Child):
        """A sandbox.Child forked by the zygote: the same phase watching, the same death() rules; killed
        through its pidfd (its PID namespace's init) instead of a process group."""

        zygote: "Zygote | None" = None
        oom_before: int = 0  # the zygote's memory cgroup's OOM kills when this check started

        def kill_all(self) -> None:
            proc = self.proc
            proc.kill()
            if proc.returncode is None:
                try:
                    proc.wait(None)
                except WarmUnavailable:
                    pass
            if proc.pidfd >= 0:
                os.close(proc.pidfd)
                proc.pidfd = -1
            mem = self.zygote.mem_cgroup if self.zygote is not None else None
            self.oom_killed = self.oom_killed or sandbox.oom_kills(mem) > self.oom_before

        def cleanup(self) -> None:
            super().cleanup()
            if self.zygote is not None:
                self.zygote.wipe()

    return WarmChild


ZYGOTE_OWN = 2**30  # a class zygote's memory cap above its check's: its own pages (torch, the graders imported)


class Zygote:
    """One warm sandbox for a lesson and a notebook folder (the binds a student child of that lesson gets).

    `for_class`: a zygote that class grading forks submissions from (course_cli/sandboxed/class_forks.py), under
    a cold class child's rules: the graders shown as the student's child build (no answer; sandbox.start's
    `graders`), no notebook folder, and a memory cgroup (its check's cold cap plus ZYGOTE_OWN) that one
    submission's processes share with the zygote alone, as a cold child's are held in a cgroup of their own."""

    def __init__(self, lesson, cwd: str | None, log_dir: Path, for_class: bool = False):
        grading = _grading()
        self.lesson, self.cwd, self.broken = lesson, cwd, False
        self.jobs = Path(tempfile.mkdtemp(prefix=f"course-warm-{os.getpid()}-"))  # swept if this server is killed
        visible = grading.visible_solutions(lesson) + ([Path(cwd)] if cwd else [])
        env = {**sandbox.child_env("cpu", False, True), **({"COURSE_WORKSPACE": str(cwd)} if cwd else {})}
        self.sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        graders = sandbox._child_build(lesson.module) if for_class else None
        argv = sandbox._bwrap_argv(self.jobs, "cpu", visible, env, graders) + [
            sys.executable, "-m", "course_cli.sandboxed.zygote", str(theirs.fileno()), lesson.module]
        lim = sandbox.limits()
        self.cgroup = sandbox._new_cgroup(lim.pids())
        self.mem_cgroup = sandbox.capped_memory(self.cgroup, lim.memory + lim.write + ZYGOTE_OWN) if for_class \
            else None
        try:
            with atomic.open_append(log_dir / f"zygote-{os.getpid()}.log") as err:
                self.proc = subprocess.Popen(argv, cwd=str(self.jobs), env=env, pass_fds=(theirs.fileno(),),
                                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                             start_new_session=True,
                                             preexec_fn=sandbox._limits(lim.memory, self.cgroup, self.mem_cgroup,
                                                                        file_limit=lim.file))
        except BaseException:
            self._release()
            raise
        finally:
            theirs.close()
        self.ready = None

    def wait_ready(self) -> None:
        if self.ready is None:
            try:
                self.ready = self.recv(sandbox.STARTUP_ALLOWANCE)
            except TimeoutError:
                self.ready = None
        if not (isinstance(self.ready, dict) and self.ready.get("ready") and self.ready.get("threads") == 1):
            self.broken = True
            raise WarmUnavailable(f"the zygote did not start ({self.ready})")

    def recv(self, timeout: float):
        return _recv(self.sock, timeout)

    def runner(self, module: str, cells: list[dict], exercises: list[str], device: str = "cpu",
               mistakes: bool = False, only_public: bool = False, hidden_seed: int | None = None,
               draws: dict | None = None, **cold):
        """A grading.Grading runner: a student's CPU check forked from this zygote (which has the lesson's binds:
        `cold`'s visible folders and environment are already its own); anything else (a GPU check, the
        reference) is started fresh, by sandbox.start."""
        if device != "cpu" or mistakes or module != self.lesson.module:
            return sandbox.start(module, cells, exercises, device, mistakes=mistakes, only_public=only_public,
                                 hidden_seed=hidden_seed, draws=draws, **cold)
        _mark("grading")  # the Grading's own set-up (the reference's copy, the draws)
        return self.start(sandbox.make_job(module, cells, exercises, device, None, only_public=only_public,
                                           hidden_seed=hidden_seed, draws=draws))

    def start(self, job: dict):
        """Fork one check on `job` (sandbox.make_job's, without `out`); a sandbox.Child for it."""
        self.wait_ready()
        self.wipe()
        out = Path(tempfile.mkdtemp(dir=self.jobs))
        job = {**job, "out": str(out), "view_fd": VIEW_FD}
        atomic.write_text(out / "job.json", json.dumps(job))
        lim = sandbox.limits()
        out_size = max(2**20, lim.write - lim.tmp - lim.shm)  # as a cold child's (sandbox.start)
        report, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        _mark("job")
        try:
            send(self.sock, {"op": "check", "job": str(out / "job.json"), "out": str(out),
                             "limits": {"memory": lim.memory, "file": lim.file, "tmp": lim.tmp, "shm": lim.shm,
                                        "out": out_size}}, [theirs.fileno()])
            theirs.close()
            ready, _, _ = select.select([self.sock], [], [], SILENCE)
            msg, fds = recv(self.sock, want_fds=True) if ready else (None, [])
        except OSError as exc:
            msg, fds = {"error": str(exc)}, []
        theirs.close()
        if not (isinstance(msg, dict) and msg.get("started") and len(fds) == 1):
            for fd in fds:
                os.close(fd)
            report.close()
            self.broken = True
            raise WarmUnavailable(f"the zygote did not start the check ({msg})")
        _mark("fork")  # the zygote forked, made the check's namespaces and mounts, and its init
        ex_t = float(job["exercise_timeout"])
        work = min(lim.cell_timeout * max(1, len(job["cells"])) + ex_t * len(job["exercises"]),
                   lim.notebook_timeout)  # as sandbox.start's budget for a student's notebook
        child = _warm_child_class()(_ZygoteProc(self, fds[0]), out, time.monotonic() + sandbox.STARTUP_ALLOWANCE + work,
                                    lim.memory, job, notebook_limit=work, sandboxed=True, report=report,
                                    write_limit=out_size, sized=True)
        child.zygote, child.oom_before = self, sandbox.oom_kills(self.mem_cgroup)
        return child

    def wipe(self) -> None:
        """Remove everything a check left in the jobs folder (its processes are dead by then)."""
        for p in self.jobs.iterdir():
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)

    def stop(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self.proc.wait()
        self._release()

    def _release(self) -> None:
        for cg in dict.fromkeys(c for c in (self.cgroup, self.mem_cgroup) if c is not None):
            sandbox._cgroup_kill(cg)
            sandbox._remove_cgroup(cg)
        self.cgroup = self.mem_cgroup = None
        self.sock.close()
        shutil.rmtree(self.jobs, ignore_errors=True)


def _warm_grading(zygote: Zygote, reference, lesson, cells, notebook, exercises, only_public, cwd,
                  before_follow_up=None):
    """grading.Grading with the zygote as its runner and the reference from memory: the cold grading's rules,
    its student's CPU child forked instead of started."""
    return _grading().Grading(lesson, cells, notebook, exercises, only_public, cwd, runner=zygote.runner,
                              reference=reference.for_one_grading(), before_follow_up=before_follow_up)


# ----------------------------------------------------------------------------------------------
# the server

class Server:
    MAX_ZYGOTES = 2

    def __init__(self, path: Path, key: str, workspace: Path | None = None):
        self.path, self.key = path, key
        # followed only when it exists now (COURSE_WORKSPACE may name a folder not made yet: nothing to lose)
        self.workspace = workspace if workspace is not None and workspace.is_dir() else None
        self.lock = threading.Lock()  # one check at a time: the zygote forks one child per job
        self.zygotes: dict[tuple, Zygote] = {}
        self.references: dict[str, object] = {}
        self.last = time.monotonic()
        self.busy = 0
        self.done = False
        self.owners: list = []  # [pid, start time] of the processes it follows: it ends when all have
        self.disabled_until = 0.0
        # Every grading runs on one worker thread: torch gives each thread that computes its own pool of
        # OpenMP threads, and a thread per check would leave a pool behind per check.
        self.queue: "queue.Queue" = queue.Queue()
        self.working = False  # the worker thread is running something (a check, the prewarm, an idle probe's step)
        self.checks = 0  # checks graded so far (the idle probes look again for work after each)
        self.probing = None  # the idle probe in flight: (lesson id, exercise, grading.FollowUp)
        self.probe_tries: dict[tuple[str, str], int] = {}
        threading.Thread(target=self._work, daemon=True).start()

    def _work(self) -> None:
        while True:
            fn, box, done = self.queue.get()
            self.working = True
            try:
                box["reply"] = fn()
            except Exception as exc:
                traceback.print_exc()
                box["reply"] = {"error": f"{type(exc).__name__}: {exc}"}
            finally:
                self.working = False
                done.set()

    def _on_worker(self, fn):
        """Run `fn` on the worker thread, between checks, and return what it returned."""
        box: dict = {}
        done = threading.Event()
        self.queue.put((fn, box, done))
        done.wait()
        return box.get("reply")

    # the idle probes -----------------------------------------------------------------------------------
    IDLE_PROBE_AFTER = 2.0  # seconds without a check before an idle probe starts
    PROBE_TRIES = 2  # an exercise whose probe ends without progress this many times is left to the follow-ups

    def _idle(self) -> bool:
        return not (self.busy or self.working or self.queue.qsize()) and \
            time.monotonic() - self.last >= self.IDLE_PROBE_AFTER

    def idle_probes(self) -> None:
        """While no check runs, probe whole the mutation candidates the references this server holds left
        unprobed (past the reference child's time budget, or screened out by a follow-up), one exercise at a
        time, in a follow-up child (grading.FollowUp) at the lowest scheduling priority. What it probes joins the
        server's reference and the disk cache as a check's follow-up does, so a failing check later finds its
        cause among them and starts no follow-up of its own: the follow-up's cost is paid while the student
        reads or types, not in a check. A check that follows up on the exercise being probed stops the probe
        (`_yield_probe`). A thread of its own (settings.idle_probes()); each step that touches the reference runs
        on the worker thread, between checks."""
        seen = None
        while not self.done:
            time.sleep(0.5)
            if not self._idle():
                continue
            state = (self.checks, tuple(self.references))
            if state == seen:
                continue  # nothing was left to probe, and no check or reference came since
            running = self._on_worker(self._start_probe)
            if not isinstance(running, tuple):
                seen = state
                continue
            lesson_id, exercise, follow = running
            try:
                follow.child.wait()  # here, not on the worker: checks go on meanwhile
            except Exception:
                traceback.print_exc()
            self._on_worker(lambda: self._finish_probe(lesson_id, exercise, follow))

    def _start_probe(self):
        """On the worker: the next exercise with candidates left, its follow-up child started (nice 19)."""
        if not self._idle_now():
            return None
        grading = _grading()
        for lesson_id, reference in reversed(list(self.references.items())):
            lesson = find_lesson(lesson_id)
            if not lesson.solution_path.exists() or reference.path is None:
                continue
            for e in lesson.exercises:
                if self.probe_tries.get((lesson_id, e.name), 0) >= self.PROBE_TRIES or not reference.unprobed(e.name):
                    continue
                try:
                    follow = grading.FollowUp.start(lesson, reference, [e.name], nice=19)
                except Exception as exc:  # no sandbox, no child: counts as a try, as a child that ends badly
                    print(f"{time.strftime('%H:%M:%S')} {lesson_id}: idle probe of {e.name} could not start: "
                          f"{exc!r}", file=sys.stderr, flush=True)
                    self.probe_tries[(lesson_id, e.name)] = self.probe_tries.get((lesson_id, e.name), 0) + 1
                    continue
                if follow is None:
                    continue
                self.probing = (lesson_id, e.name, follow)
                print(f"{time.strftime('%H:%M:%S')} {lesson_id}: idle probe of {e.name} "
                      f"({len(follow.plan[e.name]['candidates'])} candidates)", file=sys.stderr, flush=True)
                return self.probing
        return None

    def _idle_now(self) -> bool:
        """On the worker (which is running this): no check waiting, none for IDLE_PROBE_AFTER seconds."""
        return not (self.busy or self.queue.qsize()) and time.monotonic() - self.last >= self.IDLE_PROBE_AFTER

    def _finish_probe(self, lesson_id: str, exercise: str, follow) -> None:
        """On the worker: what the probe found joins the reference, unless a check stopped it."""
        if self.probing is None or self.probing[2] is not follow:  # stopped by a check (`_yield_probe`)
            follow.child.cleanup()
            return
        self.probing = None
        reference = self.references.get(lesson_id)
        before = (reference.mutation.get(exercise) or {}).get("next") if reference is not None else None
        added = follow.finish()
        after = (reference.mutation.get(exercise) or {}).get("next") if reference is not None else None
        if exercise not in added or (after == before and reference.unprobed(exercise)):
            self.probe_tries[(lesson_id, exercise)] = self.probe_tries.get((lesson_id, exercise), 0) + 1
        print(f"{time.strftime('%H:%M:%S')} {lesson_id}: idle probe of {exercise} "
              f"{'done' if exercise in added else 'ended without a result'}", file=sys.stderr, flush=True)

    def _yield_probe(self, lesson_id: str, exercises: list[str]) -> None:
        """On the worker, before a check's follow-up: stop an idle probe of the same exercises (the follow-up
        probes them now, for this student, screened on the check that failed)."""
        if self.probing is not None and self.probing[0] == lesson_id and self.probing[1] in exercises:
            follow, self.probing = self.probing[2], None
            follow.child.kill_all()

    def stop_probe(self) -> None:
        if self.probing is not None:
            try:
                self.probing[2].child.kill_all()
            except Exception:
                pass

    def reference(self, lesson):
        if lesson.id not in self.references:
            g = _grading()
            # read whole, once: the server keeps every exercise's mistakes in memory for the checks to come
            self.references[lesson.id] = g.Reference.finish(lesson, *g.Reference.start(lesson, "cpu"), "cpu").read_all()
        return self.references[lesson.id]

    def zygote(self, lesson, cwd: str | None) -> Zygote:
        k = (lesson.id, cwd)
        z = self.zygotes.get(k)
        if z is not None and (z.broken or z.proc.poll() is not None):
            z.stop()
            del self.zygotes[k]
            z = None
        if z is None:
            while len(self.zygotes) >= self.MAX_ZYGOTES:
                old = next(iter(self.zygotes))
                self.zygotes.pop(old).stop()
            z = self.zygotes[k] = Zygote(lesson, cwd, self.path.parent)
        else:
            self.zygotes[k] = self.zygotes.pop(k)  # most recently used last
        return z

    def prewarm(self, lesson_id: str, cwd: str | None) -> None:
        with self.lock:
            try:
                lesson = find_lesson(lesson_id)
                z = self.zygote(lesson, cwd)  # first: it imports torch in the sandbox while we do here
                # lazy: the server's warm-up is these imports (torch: 4.6 s here); the client imports this module
                import torch  # noqa: F401

                __import__(lesson.module, fromlist=["CHECKS"])
                # what the first judging would import: the verdict, the judges, the diagnosis, nbformat
                # lazy: as torch above (the judges and the diagnosis import torch)
                import graders.engine.diagnosis  # noqa: F401
                import graders.engine.judges  # noqa: F401
                import graders.engine.verdict  # noqa: F401

                _nbformat()

                self.reference(lesson)
                z.wait_ready()
            except Exception as exc:
                print(f"prewarm of {lesson_id} failed: {exc!r}", file=sys.stderr, flush=True)

    def grade(self, req: dict, received: float | None = None) -> dict:
        global _MARKS
        _MARKS = [("received", received or time.perf_counter())]
        try:
            return self._grade(req)
        finally:
            _MARKS = None

    def _grade(self, req: dict) -> dict:
        _mark("queued")
        grading = _grading()
        lesson = find_lesson(req["lesson"])
        exercises, only_public, cwd = req.get("exercises"), bool(req.get("only_public")), req.get("cwd") or None
        if "path" in req:
            name = req["path"]
            try:
                cells = graded_cells(read_notebook(name))
            except NotebookError as exc:
                # lazy: verdict imports torch (4.9 s cold here); the server imported it while warming
                from graders.engine.verdict import error_result

                return {"result": to_wire(error_result(lesson, name, str(exc), not_graded=True))}
        else:
            cells, name = req["cells"], req.get("notebook", "")
        _mark("read")  # the notebook read and its graded cells taken
        if time.monotonic() < self.disabled_until:
            return {"error": "warm checks failed here a moment ago; graded cold"}
        with self.lock:
            t0 = time.monotonic()
            reference = self.reference(lesson)
            for attempt in range(2):
                fresh = (lesson.id, cwd) not in self.zygotes
                z = self.zygote(lesson, cwd)
                try:
                    result = _warm_grading(z, reference, lesson, cells, name, exercises, only_public, cwd,
                                           lambda unnamed: self._yield_probe(lesson.id, unnamed)).finish()
                    _mark("judge")  # read back and judged
                    wire = to_wire(result)
                    _mark("wire")
                    phases = _phases()
                    print(f"{time.strftime('%H:%M:%S')} {lesson.id}: {time.monotonic() - t0:.2f} s"
                          f"{' (new zygote)' if fresh else ''}\n  phases: "
                          + ", ".join(f"{k} {v:.3f}" for k, v in phases.items()), file=sys.stderr, flush=True)
                    self.checks += 1
                    return {"result": wire, "phases": phases}
                except WarmUnavailable as exc:
                    z.broken = True
                    why = str(exc)
                    print(f"{time.strftime('%H:%M:%S')} {lesson.id}: warm check failed: {why}", file=sys.stderr,
                          flush=True)
            self.disabled_until = time.monotonic() + 300  # twice in a row: cold checks for a while, at once
            return {"error": why}

    def handle(self, conn: socket.socket) -> None:
        try:
            if _peer_uid(conn) != os.getuid():
                return
            msg = _recv(conn, CONNECT_TIMEOUT * 3)
            if not isinstance(msg, dict) or msg.get("op") != "hello":
                return
            _send(conn, {"key": self.key, "pid": os.getpid()})
            if msg.get("key") != self.key:
                self.done = True  # a newer course: the client replaces this server
            while True:
                msg = _recv(conn, SILENCE)
                if not isinstance(msg, dict) or msg.get("op") == "stop":
                    if isinstance(msg, dict):
                        self.done = True
                    return
                if msg.get("op") != "grade":
                    return
                owner = msg.get("owner")
                if (isinstance(owner, list) and len(owner) == 2 and isinstance(owner[0], int)
                        and isinstance(owner[1], str) and owner not in self.owners and len(self.owners) < 64):
                    self.owners.append(owner)
                box: dict = {}
                done = threading.Event()
                self.busy += 1
                received = time.perf_counter()
                self.queue.put((lambda: self.grade(msg, received), box, done))
                try:
                    while not done.wait(1.0):
                        _send(conn, {"op": "wait"})
                finally:
                    done.wait()
                    self.busy -= 1
                    self.last = time.monotonic()
                _send(conn, box["reply"])
        except (OSError, TimeoutError, ValueError):
            pass
        finally:
            conn.close()
            self.last = time.monotonic()

    def serve(self, lesson_id: str | None, cwd: str | None) -> None:
        lock = atomic.open_append(self.path.with_suffix(".lock"))
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return  # another server of this workspace is running or starting
        self.path.unlink(missing_ok=True)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(str(self.path))
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        ino = os.stat(self.path).st_ino
        listener.listen(8)
        listener.settimeout(1.0)
        atomic.write_text(self.path.with_suffix(".pid"), str(os.getpid()))
        _sweep_jobs()
        idle = settings.warm_idle()
        if lesson_id:
            self.queue.put((lambda: self.prewarm(lesson_id, cwd), {}, threading.Event()))
        if settings.idle_probes():
            threading.Thread(target=self.idle_probes, daemon=True).start()
        try:
            while not self.done:
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    if not self.busy and time.monotonic() - self.last > idle:
                        break
                    if not self.busy and self.owners and not any(_alive(o) for o in self.owners):
                        print(f"{time.strftime('%H:%M:%S')} the processes it served have ended: exiting",
                              file=sys.stderr, flush=True)
                        break
                    gone = self.gone(ino)
                    if gone:
                        print(f"{time.strftime('%H:%M:%S')} {gone}: exiting", file=sys.stderr, flush=True)
                        break
                    continue
                self.last = time.monotonic()
                threading.Thread(target=self.handle, args=(conn,), daemon=True).start()
        finally:
            try:
                if os.stat(self.path).st_ino == ino:
                    self.path.unlink()
            except OSError:
                pass
            self.path.with_suffix(".pid").unlink(missing_ok=True)
            self.done = True
            self.stop_probe()
            for z in self.zygotes.values():
                try:
                    z.stop()
                except Exception:
                    pass
            listener.close()
            lock.close()
            log = self.path.parent / f"zygote-{os.getpid()}.log"
            try:
                if log.stat().st_size == 0:
                    log.unlink()
            except OSError:
                pass


    def gone(self, ino: int) -> str | None:
        """Why no check can reach this server any more, else None: its socket was removed or replaced (its
        folder deleted, a test's teardown, another server), or its workspace folder was deleted."""
        try:
            if os.stat(self.path).st_ino != ino:
                return "its socket was replaced"
        except OSError:
            return "its socket is gone"
        if self.workspace is not None and not self.workspace.is_dir():
            return "its workspace is gone"
        return None


def _sweep_jobs() -> None:
    """Remove the jobs folders of this user's warm servers that were killed before they could clean up."""
    for d in Path(tempfile.gettempdir()).glob("course-warm-*-*"):
        try:
            owner = int(d.name.split("-")[2])
            if os.lstat(d).st_uid != os.getuid():
                continue
            os.kill(owner, 0)
            state = Path(f"/proc/{owner}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state not in ("Z", "X"):
                continue  # its server is alive (a zombie is not)
            shutil.rmtree(d, ignore_errors=True)
        except (ProcessLookupError, FileNotFoundError):
            shutil.rmtree(d, ignore_errors=True)
        except (OSError, ValueError, IndexError):
            pass


def stop_all() -> int:
    """Stop every warm server of this user (tests, and `python -m course_cli.sandboxed.warm stop`)."""
    n = 0
    try:
        d = socket_dir()
    except WarmUnavailable:
        return 0
    for pidfile in d.glob("w-*.pid"):
        try:
            pid = int(pidfile.read_text())
            os.kill(pid, signal.SIGTERM)
            n += 1
        except (OSError, ValueError):
            pass
    return n


USAGE = ("usage: python -m course_cli.sandboxed.warm serve SOCKET KEY [LESSON CWD [--workspace DIR] "
         "[OWNER_PID OWNER_START]] | stop")


def main(argv: list[str]) -> None:
    if argv[:1] == ["stop"]:
        print(f"stopped {stop_all()} warm grader(s)")
        return
    workspace = None
    if "--workspace" in argv:
        i = argv.index("--workspace")
        if i + 1 >= len(argv):
            sys.exit(USAGE)
        workspace, argv = Path(argv[i + 1]), argv[:i] + argv[i + 2:]
    if argv[:1] != ["serve"] or len(argv) < 3:
        sys.exit(USAGE)
    path, key = Path(argv[1]), argv[2]
    lesson, cwd = (argv[3] or None, argv[4] or None) if len(argv) >= 5 else (None, None)
    owners = [[int(argv[5]), argv[6]]] if len(argv) >= 7 and argv[5].isdigit() else []
    signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
    if not sandbox.bwrap_status()[0]:
        print(f"warm checks need the sandbox: {sandbox.bwrap_status()[1]}", file=sys.stderr)
        return  # clients fall back to cold checks
    server = Server(path, key, workspace)
    server.owners += owners
    code = 0
    try:
        server.serve(lesson, cwd)
    except SystemExit as exc:  # SIGTERM
        code = exc.code if isinstance(exc.code, int) else 0
    except BaseException:
        traceback.print_exc()
        code = 1
    # cleaned up by serve's own `finally`: no thread a library left running keeps this process alive after it
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main(sys.argv[1:])
