"""A run's settings as data: the sandbox's limits, --insecure and the hidden checks' seed, read once by the
command that starts the run and passed down (to children in their job file, to Dask workers with each task),
never written into `os.environ` to reach another part.

Every `COURSE_*` environment variable is read here and nowhere else (tests/unit/test_settings_reads.py), each
when it is asked for, never when a module is imported; docs/architecture.md lists them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
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
    processes: int = 0  # pids.max, threads included; 0: 8 per core of the machine the child runs on, at least 256
    tmp: int = 64 * MiB  # the child's private /tmp
    shm: int = 32 * MiB  # the child's private /dev/shm
    write: int = 256 * MiB  # everything the child writes: /tmp, /dev/shm and its output folder together

    # field -> (environment variable, its unit in bytes or 1): the one table from_env and the docs read
    ENV = {"memory": ("COURSE_MEMORY_LIMIT_GB", GiB), "cell_timeout": ("COURSE_CELL_TIMEOUT", 1),
           "exercise_timeout": ("COURSE_EXERCISE_TIMEOUT", 1),
           "gpu_exercise_timeout": ("COURSE_GPU_EXERCISE_TIMEOUT", 1),
           "notebook_timeout": ("COURSE_NOTEBOOK_TIMEOUT", 1), "output": ("COURSE_OUTPUT_LIMIT_MB", MiB),
           "file": ("COURSE_FILE_LIMIT_MB", MiB), "processes": ("COURSE_PROCESS_LIMIT", 1),
           "tmp": ("COURSE_TMP_LIMIT_MB", MiB), "shm": ("COURSE_SHM_LIMIT_MB", MiB),
           "write": ("COURSE_WRITE_LIMIT_MB", MiB)}

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Limits":
        env = os.environ if env is None else env
        values = {}
        for field in dataclasses.fields(cls):
            name, unit = cls.ENV[field.name]
            raw = env.get(name)
            if raw in (None, ""):
                continue
            try:
                value = float(raw) * unit
            except ValueError:
                raise ValueError(f"{name}={raw!r} is not a number") from None
            values[field.name] = int(value) if isinstance(field.default, int) else value
        return cls(**values)

    def pids(self) -> int:
        """The process limit on this machine (the one given, else by its cores: a Dask worker's own)."""
        return self.processes or max(256, 8 * (os.cpu_count() or 1))

    def env(self) -> dict[str, str]:
        """These limits as the environment variables from_env reads (for a process that reads its own)."""
        out = {}
        for field in dataclasses.fields(self):
            name, unit = self.ENV[field.name]
            value = getattr(self, field.name)
            if value != field.default:
                out[name] = repr(value / unit) if unit != 1 else repr(value)
        return out


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


# The course's other switches, each read from the environment when asked (so a test's or a command's change is
# seen), never at import.

def cache_dir() -> Path:
    """The course's cache (COURSE_CACHE_DIR, else ~/.cache/attention-course), as an absolute path: a relative
    one would mean another folder inside the sandbox, whose working directory is not the caller's."""
    given = os.environ.get("COURSE_CACHE_DIR")
    return Path(given or Path.home() / ".cache" / "attention-course").expanduser().absolute()


def workspace() -> str | None:
    """The student's workspace as COURSE_WORKSPACE names it (None: unset or empty)."""
    return os.environ.get("COURSE_WORKSPACE") or None


def sandbox_off() -> bool:
    """COURSE_SANDBOX=none: no bubblewrap (measuring its cost; never for a class)."""
    return os.environ.get("COURSE_SANDBOX", "auto") == "none"


def sandboxed() -> bool:
    """This process is a sandboxed child (the sandbox sets COURSE_SANDBOXED=1 for it)."""
    return os.environ.get("COURSE_SANDBOXED") == "1"


def cgroups() -> bool:
    """Whether a child gets a cgroup of its own (COURSE_CGROUP=0: none)."""
    return os.environ.get("COURSE_CGROUP", "1") != "0"


def nbgrader_kernel() -> bool:
    """Inside nbgrader's kernel (the course's nbgrader config sets COURSE_NBGRADER=1)."""
    return os.environ.get("COURSE_NBGRADER") == "1"


def check_raise() -> bool:
    """COURSE_CHECK_RAISE=1: a failing check cell raises (scripted runs)."""
    return os.environ.get("COURSE_CHECK_RAISE") == "1"


def warm() -> bool:
    """Warm checks asked for (COURSE_WARM=0: every check cold)."""
    return os.environ.get("COURSE_WARM", "1") != "0"


def class_forks() -> bool:
    """Class grading forks each submission from a zygote of its lesson (COURSE_CLASS_FORKS=0: a fresh sandbox per
    submission; course_cli/sandboxed/class_forks.py)."""
    return os.environ.get("COURSE_CLASS_FORKS", "1") != "0"


def warm_idle() -> float:
    """Seconds a warm grader waits for the next check before it exits (COURSE_WARM_IDLE, default 900)."""
    raw = os.environ.get("COURSE_WARM_IDLE", "")
    try:
        return float(raw) if raw else 900.0
    except ValueError:
        raise ValueError(f"COURSE_WARM_IDLE={raw!r} is not a number") from None


def follow_ups() -> bool:
    """A failing check whose exercise had mutation candidates left unprobed probes them before it reports
    (grading.follow_up; COURSE_FOLLOW_UPS=0: never, the diagnosis from what the reference child reached)."""
    return os.environ.get("COURSE_FOLLOW_UPS", "1") != "0"


def idle_probes() -> bool:
    """A warm server probes, while no check runs, the mutation candidates its references left unprobed, so that a
    failing check finds its cause already probed (course_cli/sandboxed/warm.py `Server.idle_probes`;
    COURSE_IDLE_PROBES=0: never, a failing check follows up as a cold one does)."""
    return os.environ.get("COURSE_IDLE_PROBES", "1") != "0" and follow_ups()


_ON_DEMAND: list[bool] = []  # inside `mutants_on_demand`


@contextlib.contextmanager
def mutants_on_demand():
    """A seat that grades one submission per process (Gradescope's run_autograder): the trusted reference it builds
    serves nobody else, so unless COURSE_MUTANT_BUDGET is set its child probes the catalogue only (a budget of 0),
    and an exercise that fails with no cause named follows up on the engine's candidates by count
    (grading.follow_up), naming what every other seat names."""
    _ON_DEMAND.append(True)
    try:
        yield
    finally:
        _ON_DEMAND.pop()


def mutant_budget() -> float | None:
    """Seconds of mutation candidates the reference child probes per exercise (COURSE_MUTANT_BUDGET; None: the
    engine's default, graders.engine.mutations.BUDGET_S; 0 when unset inside `mutants_on_demand`); a failing check
    follows up on the rest (`follow_ups`)."""
    raw = os.environ.get("COURSE_MUTANT_BUDGET", "")
    if not raw:
        return 0.0 if _ON_DEMAND else None
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"COURSE_MUTANT_BUDGET={raw!r} is not a number of seconds") from None
    if not 0 <= value < 10**6:
        raise ValueError(f"COURSE_MUTANT_BUDGET={raw!r} is not a number of seconds from 0 up")
    return value


def init_references() -> bool:
    """Whether `course init` builds the reference observations (COURSE_INIT_REFERENCES=0: not)."""
    return os.environ.get("COURSE_INIT_REFERENCES", "1") != "0"
