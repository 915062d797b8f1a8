"""Starting and collecting the sandboxed child (course_cli/child.py).

The child runs in its own session (so a timeout kills its whole process group) under an address-space
limit, with a wall-clock limit enforced here. Everything it reports comes back as files: JSON, and
observations that `torch.load(weights_only=True)` reads (data only, never code).
"""

from __future__ import annotations

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
STARTUP_ALLOWANCE = 60.0  # importing torch on a busy machine


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

    def wait(self) -> "Child":
        """Wait for the child until its deadline; past it, kill its whole process group."""
        try:
            self.returncode = self.proc.wait(timeout=max(0.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.timed_out = True
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.returncode = self.proc.wait()
        self.elapsed = time.monotonic() - self.started
        return self

    def text(self, name: str, limit: int = 4000) -> str:
        p = self.out / name
        if not p.exists():
            return ""
        with open(p, "rb") as f:
            f.seek(max(0, p.stat().st_size - limit))
            return f.read().decode("utf-8", "replace")

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
            return f"timed out while {where} (limit {self.deadline - self.started:.0f} s); an infinite loop?"
        rc = self.returncode
        if rc is not None and rc < 0:
            sig = signal.Signals(-rc).name
            if sig == "SIGKILL":
                return f"the grading process was killed while {where} (out of memory?)"
            return f"the grading process died with {sig} while {where}"
        err = self.text("stderr.txt", 600).strip().splitlines()
        tail = f": {err[-1]}" if err else ""
        if "MemoryError" in tail or "can't allocate" in tail:
            return f"ran out of memory (limit {self.memory_limit / 2**30:.0f} GiB) while {where}"
        return f"the notebook's code ended the grading process (exit code {rc}) while {where}{tail}"


def _limits(memory: int | None):
    def apply():
        if memory:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


def start(module: str, cells: list[dict], exercises: list[str], device: str = "cpu",
          mistakes: bool = False, only_public: bool = False, exercise_timeout: float | None = None,
          cwd: str | None = None, bench: bool = False) -> Child:
    """Start a child on `cells`; it probes `exercises` on `device` (and the mistakes if asked)."""
    cuda = device == "cuda"
    out = Path(tempfile.mkdtemp(prefix="course-"))
    ex_t = exercise_timeout or EXERCISE_TIMEOUT
    job = {"module": module, "cells": cells, "exercises": exercises, "device": device, "out": str(out),
           "mistakes": mistakes, "only_public": only_public, "bench": bench, "cell_timeout": CELL_TIMEOUT, "exercise_timeout": ex_t}
    (out / "job.json").write_text(json.dumps(job))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["MPLBACKEND"] = "Agg"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if cuda:
        env.pop("TRITON_INTERPRET", None)
    else:
        env["TRITON_INTERPRET"] = "1"  # before anything in the child imports triton
        env["CUDA_VISIBLE_DEVICES"] = ""
    memory = None if cuda else MEMORY_LIMIT  # CUDA reserves more address space than any sane limit
    proc = subprocess.Popen([sys.executable, "-m", "course_cli.child", str(out / "job.json")], cwd=cwd or str(out),
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, preexec_fn=_limits(memory))
    # the whole child's wall-clock budget; the reference child (mistakes=True) runs trusted code, so generously
    budget = (STARTUP_ALLOWANCE + CELL_TIMEOUT * max(1, len(cells)) + ex_t * len(exercises)
              + (ex_t * 20 if mistakes else 0) + (ex_t if bench else 0))
    return Child(proc, out, time.monotonic() + budget, memory, job)
