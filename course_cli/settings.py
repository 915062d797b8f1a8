"""A run's settings as data: the sandbox's limits, --insecure and the hidden checks' seed, read once by the
command that starts the run and passed down (to children in their job file, to Dask workers with each task),
never written into `os.environ` to reach another part.

The environment variables the course reads are listed in docs/architecture.md; the limits' ones are read here,
when a run is configured, not when a module is imported.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
from dataclasses import dataclass
from typing import Mapping

GiB, MiB = 2**30, 2**20


@dataclass(frozen=True)
class Limits:
    """What one grading child may use. Sizes in bytes, times in seconds."""

    memory: int = 4 * GiB  # RLIMIT_AS of a CPU child
    cell_timeout: float = 20.0
    exercise_timeout: float = 30.0
    gpu_exercise_timeout: float = 120.0  # on a GPU the first calls compile (Triton, SDPA's and cuDNN's plans)
    notebook_timeout: float = 600.0  # a student's whole notebook
    output: int = 1 * MiB  # printed text kept
    file: int = 32 * MiB  # any one file the child writes
    processes: int = max(256, 8 * (os.cpu_count() or 1))  # pids.max, threads included
    tmp: int = 64 * MiB  # the child's private /tmp

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Limits":
        env = os.environ if env is None else env
        d = cls()

        def num(name: str, default: float, scale: float = 1.0) -> float:
            raw = env.get(name)
            return default if raw in (None, "") else float(raw) * scale

        return cls(memory=int(num("COURSE_MEMORY_LIMIT_GB", d.memory / GiB, GiB)),
                   cell_timeout=num("COURSE_CELL_TIMEOUT", d.cell_timeout),
                   exercise_timeout=num("COURSE_EXERCISE_TIMEOUT", d.exercise_timeout),
                   gpu_exercise_timeout=num("COURSE_GPU_EXERCISE_TIMEOUT", d.gpu_exercise_timeout),
                   notebook_timeout=num("COURSE_NOTEBOOK_TIMEOUT", d.notebook_timeout),
                   output=int(num("COURSE_OUTPUT_LIMIT_MB", d.output / MiB, MiB)),
                   file=int(num("COURSE_FILE_LIMIT_MB", d.file / MiB, MiB)),
                   processes=int(num("COURSE_PROCESS_LIMIT", d.processes)),
                   tmp=int(num("COURSE_TMP_LIMIT_MB", d.tmp / MiB, MiB)))


@dataclass(frozen=True)
class Run:
    """One run's settings: the limits, whether class grading may go unsandboxed, the hidden checks' seed."""

    limits: Limits = dataclasses.field(default_factory=Limits)
    insecure: bool = False
    hidden_seed: int | None = None  # None until class grading first needs one (then drawn, and kept here)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Run":
        env = os.environ if env is None else env
        seed = env.get("COURSE_HIDDEN_SEED", "")
        return cls(Limits.from_env(env), env.get("COURSE_INSECURE") == "1", int(seed) if seed.isdigit() else None)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "Run":
        return cls(Limits(**data["limits"]), bool(data["insecure"]), data.get("hidden_seed"))


_CURRENT: Run | None = None
_DRAWN: int | None = None  # a seed drawn by this process when none was given


def current() -> Run:
    """This process's settings: the run a command is using, else the environment's as it is now (read when
    needed, never at import)."""
    return _CURRENT if _CURRENT is not None else Run.from_env()


@contextlib.contextmanager
def using(run: Run):
    """`run` as this process's settings for the block (a command, from its options; a Dask task, from what the
    client shipped), the previous ones back after it."""
    global _CURRENT
    before, _CURRENT = _CURRENT, run
    try:
        yield run
    finally:
        _CURRENT = before


def hidden_seed() -> int:
    """The hidden checks' seed of this run: the one given (--seed, COURSE_HIDDEN_SEED, the client's), else one
    drawn once per process."""
    global _DRAWN
    seed = current().hidden_seed
    if seed is not None:
        return seed
    if _DRAWN is None:
        _DRAWN = secrets.randbits(31)
    return _DRAWN


def resolved() -> Run:
    """The current run with its hidden seed fixed (what a client ships to its workers)."""
    return dataclasses.replace(current(), hidden_seed=hidden_seed())
