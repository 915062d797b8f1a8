"""Starting and collecting the sandboxed child (course_cli/child.py).

The child runs in its own session (so a timeout kills its whole process group) under these limits:

  time     per cell and per exercise (an alarm inside the child, CELL_TIMEOUT / EXERCISE_TIMEOUT), and
           per notebook (NOTEBOOK_TIMEOUT, enforced here: past it the whole process group is killed)
  memory   RLIMIT_AS (MEMORY_LIMIT), reported as "ran out of memory"
  output   prints are capped at OUTPUT_LIMIT bytes inside the child (the rest is dropped and reported as
           "output limit exceeded"); every file the child writes is capped by RLIMIT_FSIZE (FILE_LIMIT,
           SIGXFSZ ignored, so a write past it fails with "File too large"); only a bounded tail is read back
  processes  a cgroup `pids.max` (PROCESS_LIMIT, threads included) when the cgroup tree is writable
           (root, or a delegated cgroup); and whatever the child leaves behind is killed when it ends:
           its process group, and every process in its cgroup (which also catches those that left the group)

Everything the child reports comes back as files: JSON, and observations that
`torch.load(weights_only=True)` reads (data only, never code).
"""

from __future__ import annotations

import itertools
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from graders.registry import ROOT

MEMORY_LIMIT = int(float(os.environ.get("COURSE_MEMORY_LIMIT_GB", "4")) * 2**30)
CELL_TIMEOUT = float(os.environ.get("COURSE_CELL_TIMEOUT", "20"))
EXERCISE_TIMEOUT = float(os.environ.get("COURSE_EXERCISE_TIMEOUT", "30"))
# on a GPU the first calls compile (Triton kernels, SDPA's and cuDNN's plans): that counts against the limit
GPU_EXERCISE_TIMEOUT = float(os.environ.get("COURSE_GPU_EXERCISE_TIMEOUT", "120"))
NOTEBOOK_TIMEOUT = float(os.environ.get("COURSE_NOTEBOOK_TIMEOUT", "600"))  # a student's whole notebook
STARTUP_ALLOWANCE = 60.0  # importing torch on a busy machine, on top of the notebook's limit
OUTPUT_LIMIT = int(float(os.environ.get("COURSE_OUTPUT_LIMIT_MB", "1")) * 2**20)  # printed text kept
FILE_LIMIT = int(float(os.environ.get("COURSE_FILE_LIMIT_MB", "32")) * 2**20)  # any one file the child writes
PROCESS_LIMIT = int(os.environ.get("COURSE_PROCESS_LIMIT", str(max(256, 8 * (os.cpu_count() or 1)))))


# ----------------------------------------------------------------------------------------------
# A cgroup per child, for a process limit and a complete kill (only where the cgroup tree is writable)

_CGROUP_BASE: "Path | None | bool" = False  # False: not looked up yet
_counter = itertools.count(1)


def _cgroup_base() -> Path | None:
    """The pids cgroup this process is in, if we may create cgroups under it (v1 `pids` or v2)."""
    global _CGROUP_BASE
    if _CGROUP_BASE is not False:
        return _CGROUP_BASE
    base = None
    if os.environ.get("COURSE_CGROUP", "1") != "0":
        try:
            for line in Path("/proc/self/cgroup").read_text().splitlines():
                _, controllers, path = line.split(":", 2)
                if "pids" in controllers.split(","):
                    cand = Path("/sys/fs/cgroup/pids") / path.lstrip("/")
                elif controllers == "" and "pids" in Path("/sys/fs/cgroup/cgroup.controllers").read_text().split():
                    cand = Path("/sys/fs/cgroup") / path.lstrip("/")
                else:
                    continue
                if os.access(cand, os.W_OK) and (cand / "cgroup.procs").exists():
                    base = cand
                    break
        except (OSError, ValueError):
            base = None
    _CGROUP_BASE = base
    if base is not None:
        _sweep(base)
    return base


def _sweep(base: Path) -> None:
    """Remove the cgroups (and kill the processes) that graders which died without cleaning up left."""
    try:
        for cg in base.glob("course-*-*"):
            owner = int(cg.name.split("-")[1])
            try:
                os.kill(owner, 0)
                continue  # its grader is still running
            except ProcessLookupError:
                pass
            except PermissionError:
                continue
            _cgroup_kill(cg)
            _remove_cgroup(cg)
    except (OSError, ValueError):
        pass


def _new_cgroup(limit: int) -> Path | None:
    base = _cgroup_base()
    if base is None:
        return None
    cg = base / f"course-{os.getpid()}-{next(_counter)}"
    try:
        cg.mkdir()
        (cg / "pids.max").write_text(str(limit))
        return cg
    except OSError:
        _remove_cgroup(cg)
        return None


def _cgroup_kill(cg: Path) -> None:
    """SIGKILL every process in the cgroup until it is empty (a fork loop cannot outrun pids.max)."""
    for _ in range(200):
        try:
            pids = [int(p) for p in (cg / "cgroup.procs").read_text().split()]
        except OSError:
            return
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.005)


def _remove_cgroup(cg: Path) -> None:
    for _ in range(100):
        try:
            cg.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError:  # busy: killed processes are still exiting
            time.sleep(0.01)


@dataclass
class Child:
    proc: subprocess.Popen
    out: Path
    deadline: float
    memory_limit: int | None
    job: dict
    returncode: int | None = None
    timed_out: bool = False
    elapsed: float = 0.0
    started: float = field(default_factory=time.monotonic)
    cgroup: Path | None = None
    notebook_limit: float | None = None  # the per-notebook limit, when it is what bounds this child

    def wait(self) -> "Child":
        """Wait for the child until its deadline; past it, kill its whole process group. Either way,
        kill whatever it left running (its process group, and everything in its cgroup)."""
        try:
            self.returncode = self.proc.wait(timeout=max(0.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.timed_out = True
        self.kill_all()
        if self.returncode is None:
            self.returncode = self.proc.wait()
        self.elapsed = time.monotonic() - self.started
        return self

    def kill_all(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.cgroup is not None:
            _cgroup_kill(self.cgroup)
            _remove_cgroup(self.cgroup)
            self.cgroup = None

    def text(self, name: str, limit: int = 4000) -> str:
        """The last `limit` bytes of a file the child wrote (never more, whatever its size)."""
        p = self.out / name
        try:
            with open(p, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                f.seek(max(0, size - limit))
                return f.read(limit).decode("utf-8", "replace")
        except OSError:
            return ""

    def json(self, name: str):
        try:
            return json.loads(self.text(name, limit=2**22))
        except (json.JSONDecodeError, ValueError):
            return None

    @property
    def progress(self) -> str:
        return self.text("progress", 200).strip()

    def death(self) -> str | None:
        """Why the child ended early, in words, or None if it finished."""
        if self.progress == "done":
            return None
        where = self.progress or "starting"
        if self.timed_out:
            if self.notebook_limit is not None:
                return (f"timed out while {where}: the notebook ran past its time limit of {self.notebook_limit:g} s "
                        f"(+{STARTUP_ALLOWANCE:g} s to start; at most COURSE_NOTEBOOK_TIMEOUT={NOTEBOOK_TIMEOUT:g} s); "
                        f"an infinite loop?")
            return f"timed out while {where} (limit {self.deadline - self.started:.0f} s); an infinite loop?"
        rc = self.returncode
        if rc is not None and rc < 0:
            try:
                sig = signal.Signals(-rc).name
            except ValueError:
                sig = f"signal {-rc}"
            if sig == "SIGKILL":
                return f"the grading process was killed while {where} (out of memory?)"
            if sig == "SIGXFSZ":
                return f"output limit exceeded: a file grew past {FILE_LIMIT / 2**20:g} MiB while {where}"
            return f"the grading process died with {sig} while {where}"
        err = self.text("stderr.txt", 600).strip().splitlines()
        tail = f": {err[-1][:300]}" if err else ""
        if "MemoryError" in tail or "can't allocate" in tail:
            return f"ran out of memory (limit {self.memory_limit / 2**30:.0f} GiB) while {where}"
        if "Traceback (most recent call last)" in tail or 'File "' in tail:
            tail = ""
        return f"the notebook's code ended the grading process (exit code {rc}) while {where}{tail}"


def _limits(memory: int | None, cgroup: Path | None):
    def apply():
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_LIMIT, FILE_LIMIT))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead of killing
        if cgroup is not None:
            try:
                with open(cgroup / "cgroup.procs", "w") as f:
                    f.write(str(os.getpid()))
            except OSError:
                pass
    return apply


def start(module: str, cells: list[dict], exercises: list[str], device: str = "cpu",
          mistakes: bool = False, only_public: bool = False, exercise_timeout: float | None = None,
          cwd: str | None = None, bench: bool = False) -> Child:
    """Start a child on `cells`; it probes `exercises` on `device` (and the mistakes if asked)."""
    cuda = device == "cuda"
    out = Path(tempfile.mkdtemp(prefix="course-"))
    ex_t = exercise_timeout or (max(EXERCISE_TIMEOUT, GPU_EXERCISE_TIMEOUT) if cuda else EXERCISE_TIMEOUT)
    job = {"module": module, "cells": cells, "exercises": exercises, "device": device, "out": str(out),
           "mistakes": mistakes, "only_public": only_public, "bench": bench, "cell_timeout": CELL_TIMEOUT,
           "exercise_timeout": ex_t, "output_limit": OUTPUT_LIMIT, "file_limit": FILE_LIMIT}
    (out / "job.json").write_text(json.dumps(job))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["MPLBACKEND"] = "Agg"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if not bench:
        # Probes are small: one thread each avoids OpenMP threads spinning against the parent and the
        # reference child on a two-core machine. (Benchmarks keep torch's default.)
        env.setdefault("OMP_NUM_THREADS", "1")
    if cuda:
        env.pop("TRITON_INTERPRET", None)
    else:
        env["TRITON_INTERPRET"] = "1"  # before anything in the child imports triton
        env["CUDA_VISIBLE_DEVICES"] = ""
    # CUDA reserves more address space than any sane limit. A benchmark keeps torch's threads, and glibc
    # reserves address space for each thread's malloc arena: twice the limit, and at most 4 arenas.
    memory = None if cuda else (2 * MEMORY_LIMIT if bench else MEMORY_LIMIT)
    env.setdefault("MALLOC_ARENA_MAX", "4")
    cgroup = _new_cgroup(PROCESS_LIMIT)
    try:
        proc = subprocess.Popen([sys.executable, "-m", "course_cli.child", str(out / "job.json")],
                                cwd=cwd or str(out), env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True,
                                preexec_fn=_limits(memory, cgroup))
    except BaseException:
        if cgroup is not None:
            _remove_cgroup(cgroup)
        raise
    # the whole child's wall-clock budget: the sum of its cells' and exercises' limits, and for a
    # student's notebook at most NOTEBOOK_TIMEOUT; the reference child (mistakes=True) runs trusted code
    work = CELL_TIMEOUT * max(1, len(cells)) + ex_t * len(exercises) + (ex_t if bench else 0)
    notebook_limit = None
    if mistakes:
        work += ex_t * 20
    elif not bench:
        work = notebook_limit = min(work, NOTEBOOK_TIMEOUT)
    return Child(proc, out, time.monotonic() + STARTUP_ALLOWANCE + work, memory, job, cgroup=cgroup,
                 notebook_limit=notebook_limit)
