"""Class grading's submissions forked from a zygote: one sandbox start per lesson and lane, not per submission.

    course grade (a local pool's thread) or a Dask worker's task ── grade_submission
        └─ take(lesson) ─▶ a class zygote: bwrap under a cold class child's rules (warm.Zygote, for_class=True):
              the student's child build of the graders (no answer), no notebook folder, a memory cgroup
              └─ fork per submission ─ its own user, mount, PID, IPC, UTS, network and cgroup namespaces, a
                 fresh /tmp, /dev/shm and output folder, the child's rlimits ─ course_cli.sandboxed.child
           give(zygote) ◀── after the grading is judged and everything the submission started is dead

A cold class grading starts bubblewrap, an interpreter, torch and the graders for every submission (about 1.6
CPU-s here before the notebook's first cell); a zygote pays that once and forks. The zygote never runs student
code, and forks one submission at a time: `give` takes it back only after the grading's `finish` killed the
submission's PID namespace (its init, by pidfd) and wiped its jobs folder, so what one student started or wrote
is gone before the next student's fork exists. A lane (a thread of the local pool, a Dask worker's thread) holds
its zygote for one submission; a zygote left behind by an overdue submission stays taken, and another lane
starts its own. Zygotes are kept per lesson and per everything a child's sandbox is made from (the limits, the
child's environment): a change starts new ones. Whatever goes wrong with a zygote (no pidfds, a zygote that did
not start or died) is `WarmUnavailable`: that submission is graded the cold way (dispatch.grade_submission),
and its verdict is the cold one. COURSE_CLASS_FORKS=0 turns this off (a fresh sandbox per submission).
"""

from __future__ import annotations

import atexit
import json
import os
import queue
import shutil
import sys
import tempfile
import threading
from pathlib import Path

from course_cli import settings
from course_cli.sandboxed import sandbox, warm

# zygotes kept idle in a process, at most (the least recently used stopped first): one per lesson, since nbgrader's
# autograde of several assignments goes student by student; each holds about 150 MB of its own (anonymous
# memory measured here; torch's libraries are shared pages)
MAX_IDLE = 10
_LOCK = threading.Lock()
_IDLE: dict[tuple, list] = {}  # key -> zygotes not grading now, most recently given back last
_ALL: list = []  # every zygote this process started and has not stopped
_LOGS: list[Path] = []  # this process's own folder (0700) for what its zygotes say on stderr
_STARTS: "queue.Queue | None" = None  # the spawner thread's requests (see _start)


def usable() -> bool:
    """Class grading forks its submissions here: asked for (COURSE_CLASS_FORKS is not 0), and possible (Linux,
    pidfds, a working bubblewrap)."""
    return (settings.class_forks() and sys.platform.startswith("linux") and hasattr(os, "pidfd_open")
            and sandbox.bwrap_status()[0])


def _log_dir() -> Path:
    if not _LOGS:
        _LOGS.append(Path(tempfile.mkdtemp(prefix="course-class-zygotes-")))
    return _LOGS[0]


def graded(lesson, grade):
    """`grade(runner)` (a trusted grading of one submission, with Grading's `runner`) on a zygote of `lesson` taken
    for it and given back after; where no zygote can run, or it fails (WarmUnavailable: never the student's
    doing), `grade(None)`: a fresh sandbox, the cold way, whose verdict is the same."""
    if usable():
        z = None
        try:
            z = take(lesson)
            return grade(z.runner)
        except warm.WarmUnavailable:
            with _LOCK:
                if z is not None and z not in _ALL:  # stopped under it (stop_all: an overdue lane's batch ended)
                    raise
        finally:
            if z is not None:
                give(z)
    return grade(None)


def _key(lesson) -> tuple:
    lim = sandbox.limits()
    env = sandbox.child_env("cpu", False, True)
    return lesson.id, json.dumps(lim.__dict__, sort_keys=True, default=str), tuple(sorted(env.items()))


def take(lesson) -> "warm.Zygote":
    """A zygote of `lesson` for one submission: an idle one, else a new one (started here: it imports torch
    and the graders inside its sandbox while this grading builds or copies its reference)."""
    k = _key(lesson)
    with _LOCK:
        idle = _IDLE.setdefault(k, [])
        while idle:
            z = idle.pop()
            if not z.broken and z.proc.poll() is None:
                z.key = k
                return z
            _stop(z)
    z = _start(lesson)
    z.key = k
    with _LOCK:
        _ALL.append(z)
    return z


def _start(lesson) -> "warm.Zygote":
    """A new class zygote, started by this process's spawner thread: bubblewrap's --die-with-parent
    (PR_SET_PDEATHSIG) kills a sandbox when the *thread* that started it ends, and a class's lanes are short-lived
    threads (the local pool starts one per submission), so no lane may start the zygote it will hand on."""
    global _STARTS
    with _LOCK:
        logs = _log_dir()
        if _STARTS is None:
            _STARTS = queue.Queue()
            threading.Thread(target=_spawner, args=(_STARTS,), daemon=True, name="class-zygotes").start()
        requests = _STARTS
    box: dict = {}
    done = threading.Event()
    requests.put((lambda: warm.Zygote(lesson, None, logs, for_class=True), box, done))
    done.wait()
    if "error" in box:
        raise box["error"]
    return box["zygote"]


def _spawner(requests: "queue.Queue") -> None:
    while True:
        make, box, done = requests.get()
        try:
            box["zygote"] = make()
        except BaseException as exc:  # handed to the lane that asked
            box["error"] = exc
        finally:
            done.set()


def give(z: "warm.Zygote") -> None:
    """Back after its submission's grading ended (its processes dead): idle for the next, or stopped when
    it broke."""
    with _LOCK:
        if z.broken or z.proc.poll() is not None or z not in _ALL:
            _stop(z)
            return
        idle = _IDLE.pop(z.key, [])
        idle.append(z)
        _IDLE[z.key] = idle  # (re)inserted: the most recently used lesson's last
        while sum(len(v) for v in _IDLE.values()) > MAX_IDLE:
            oldest = next(k for k, v in _IDLE.items() if v)
            _stop(_IDLE[oldest].pop(0))


def _stop(z) -> None:
    if z in _ALL:
        _ALL.remove(z)
    try:
        z.stop()
    except OSError:
        pass


@atexit.register
def stop_all() -> None:
    """Stop every zygote of this process (at exit; a killed process's zygotes die with it: bubblewrap's
    --die-with-parent)."""
    with _LOCK:
        zygotes = list(_ALL)
        _IDLE.clear()
    for z in zygotes:
        with _LOCK:
            _stop(z)
    for d in _LOGS:
        shutil.rmtree(d, ignore_errors=True)
    _LOGS.clear()
