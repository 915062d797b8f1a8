"""The sandboxed child: runs a notebook's code and the probes, writes observations, nothing else.

Started by `course_cli.sandboxed.sandbox` as `python -m course_cli.sandboxed.child JOB.json` in its own session, under a
memory limit, with TRITON_INTERPRET=1 for CPU runs (set before anything imports triton). It writes:

  progress      what it is doing now (a cell or an exercise), for timeout messages
  cells.json    each executed cell: ok, or the error with the student's line
  obs-<exercise>.pt, mistake-<id>.pt   observations, read back with torch.load(weights_only=True)
  env.json      torch version and whether CUDA is present, written last

The parent never unpickles anything from here and judges in its own process. Prints go to files through
a cap (`_Capped`: past `output_limit` bytes the rest is dropped and reported as "output limit exceeded");
RLIMIT_FSIZE, set by the parent, bounds every file written here, prints through raw file descriptors included.

Student code runs in this process, so it can change anything here. Before each exercise is probed, the
graders' modules, their classes, `torch`'s namespace and `builtins` are put back as they were before the
first cell ran (`_Guard`): replacing `graders.engine.probe_exercise`, a lesson's `CHECKS` or a probe has no
effect. That is a convenience, not the guarantee: the verdict is made in the parent, which compares
these observations with the reference's, computed in a separate process from the solved notebook.
"""

from __future__ import annotations

import builtins
import contextlib
import io
import json
import os
import signal
import sys
from pathlib import Path

from course_cli import settings


class _Alarm:
    """Raise ExerciseTimeout in the student's code after `seconds` of wall-clock time."""

    def __init__(self, seconds: float, exc_type):
        self.seconds, self.exc_type = seconds, exc_type

    def _fire(self, signum, frame):
        raise self.exc_type(f"ran longer than the {self.seconds:g} s time limit (an infinite loop?)")

    def __enter__(self):
        signal.signal(signal.SIGALRM, self._fire)
        signal.setitimer(signal.ITIMER_REAL, self.seconds)

    def __exit__(self, *exc):
        signal.setitimer(signal.ITIMER_REAL, 0)
        return False


class _Capped(io.RawIOBase):
    """A write-only stream on a file descriptor that keeps the first `limit` bytes and drops the rest."""

    def __init__(self, fd: int, limit: int):
        super().__init__()
        self.fd, self.limit, self.kept, self.dropped = fd, limit, 0, 0

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self.fd

    def write(self, b) -> int:
        n = len(b)
        room = self.limit - self.kept
        if room > 0:
            try:
                os.write(self.fd, bytes(b[:room]))
            except OSError:  # past RLIMIT_FSIZE (raw writes to the same fd filled it)
                pass
            self.kept += min(n, room)
        if n > room:
            self.dropped += n - max(room, 0)
        return n


class _Guard:
    """A snapshot of what grading relies on in this process, put back before each exercise is probed."""

    def __init__(self, torch, modules: list, classes: list):
        import torch.nn.functional as F

        self.modules = [(m, dict(vars(m))) for m in [*modules, torch, F, builtins, os, json, signal]]
        self.classes = [(c, dict(vars(c))) for c in [*classes, torch.Tensor]]
        self.lists = [(m.CHECKS, list(m.CHECKS), [(c, dict(vars(c))) for c in m.CHECKS])
                      for m in modules if isinstance(getattr(m, "CHECKS", None), list)]

    def restore(self) -> None:
        for m, saved in self.modules:
            d = vars(m)
            for k, v in saved.items():
                if d.get(k, _MISSING) is not v:
                    d[k] = v
        for cls, saved in self.classes:
            for k in [k for k in vars(cls) if k not in saved]:
                try:
                    delattr(cls, k)
                except (AttributeError, TypeError):
                    pass
            for k, v in saved.items():
                if vars(cls).get(k, _MISSING) is not v and k not in ("__dict__", "__weakref__", "__doc__"):
                    try:
                        setattr(cls, k, v)
                    except (AttributeError, TypeError):
                        pass
        for lst, items, fields in self.lists:
            list.__setitem__(lst, slice(None), items)
            for obj, saved in fields:
                vars(obj).update(saved)


_MISSING = object()


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _no_keyboard(prompt: object = "") -> str:
    """`input()` in a graded notebook: there is no keyboard, on any machine (stdin is /dev/null, or closed, or a
    pipe the grader's own caller left open): the same EOFError, with why, wherever it is graded."""
    raise EOFError("EOF when reading a line: input() has no keyboard while the notebook is graded "
                   "(give the value in the code instead)")


class _ChildSeat:
    """The sandboxed child's seat (graders.engine.runner.Seat's hooks): its progress file, each cell's and
    exercise's alarm, the guard put back after the student's code, the output cap's notes, observations saved
    as they come."""

    raise_errors = False

    def __init__(self, job: dict, out: Path, guard: "_Guard", torch, timeout_exc):
        self.job, self.out, self.guard, self.torch, self.timeout_exc = job, out, guard, torch, timeout_exc
        self.progress = out / "progress"
        self.dropped = _dropped()

    @contextlib.contextmanager
    def cell(self, index):
        _write(self.progress, f"running cell {index}")
        with _Alarm(self.job["cell_timeout"], self.timeout_exc):
            yield

    @contextlib.contextmanager
    def exercise(self, name: str):
        _write(self.progress, f"checking {name}")
        self.guard.restore()
        try:
            with _Alarm(self.job["exercise_timeout"], self.timeout_exc):
                yield
        finally:
            self.guard.restore()

    def failed(self) -> None:
        self.guard.restore()

    def cell_done(self, report: dict) -> None:
        now = _dropped()
        if now > self.dropped:
            limit = self.job.get("output_limit", 2**20)
            msg = (f"cell {report['index']}: output limit exceeded: the notebook printed more than {_size(limit)}; "
                   f"the rest ({_size(now - self.dropped)} from this cell) was discarded")
            if report["status"] == "ok":
                report.update(status="output_limit", error=msg)
            else:
                report["error"] += f" ({msg})"
            self.dropped = now

    def cells_done(self, reports: list[dict]) -> None:
        self.guard.restore()
        if not self.job.get("in_process"):  # (in the grader's own process, kill(-1) would reach the grader's)
            _stop_leftovers()
        _write(self.out / "cells.json", json.dumps(reports))

    def observed(self, name: str, obs: dict) -> None:
        _save(self.torch, obs, self.out / f"obs-{name}.pt", self.job.get("file_limit"))


def run(job: dict) -> None:
    """The child's whole run: graders.engine.runner's cells and probes (a benchmark instead of probes, when
    asked), then the known mistakes for the reference child, with this seat's limits, guard and files."""
    out = Path(job["out"])
    progress = out / "progress"
    _write(progress, "starting: importing torch")

    # torch, the engine and the lesson are imported after the progress file exists: a child that dies importing
    # them has started (sandbox.Child.never_started tells the sandbox's own failures from the notebook's)
    import torch

    from graders.engine import draws, runner
    from graders.engine.probe import ExerciseTimeout

    torch.manual_seed(0)
    draws.given(job.get("draws"))  # the reference child's draws: no Hypothesis import here when they cover all
    hidden_seed = job.get("hidden_seed")  # class grading: the hidden checks' inputs of this run
    module = __import__(job["module"], fromlist=["CHECKS"])
    configs = runner.configs_of(module, job["device"])
    engine_modules = [m for n, m in sorted(sys.modules.items()) if n == "graders.engine" or n.startswith("graders.engine.")]
    engine_classes = [v for m in engine_modules for v in vars(m).values()
                      if isinstance(v, type) and v.__module__ == m.__name__]
    builtins.input = _no_keyboard  # the same answer on every machine, whatever stdin the grader was given
    guard = _Guard(torch, [*engine_modules, module], engine_classes)
    seat = _ChildSeat(job, out, guard, torch, ExerciseTimeout)
    only_public = job.get("only_public", False)
    if job.get("bench"):
        ns = runner.namespace()
        runner.run_cells(job["cells"], ns, seat)
        _write(progress, "benchmarking")
        report = module.benchmark(ns, job["device"])
        _write(out / "bench.json", json.dumps(report, default=str))
        _write(out / "env.json", json.dumps({"torch": torch.__version__, "cuda": torch.cuda.is_available()}))
        _write(progress, "done")
        return
    ns, cells_report, solved = runner.run_notebook(module, job["cells"], job["exercises"], configs, only_public,
                                                   hidden_seed, seat)
    if _dropped() > seat.dropped:
        output_limit = job.get("output_limit", 2**20)
        cells_report.append({"index": "checks", "status": "output_limit", "error": (
            f"output limit exceeded while checking: your functions printed more than {_size(output_limit)} "
            f"in all; the rest was discarded")})
        _write(out / "cells.json", json.dumps(cells_report))

    if job.get("mistakes"):
        if job.get("catalogue", True):  # (a follow-up probes mutants only: grading.follow_up)
            probe_mistakes(job, module, ns, configs, torch)
        _write(out / "draws.json", json.dumps(draws.made()))  # (the mutants draw the same examples)
        if job.get("mutants", True):
            _probe_mutants(job, module, ns, solved, configs, only_public, hidden_seed, out, progress, torch)

    _write(out / "env.json", json.dumps({"torch": torch.__version__, "cuda": torch.cuda.is_available()}))
    if job.get("mistakes"):  # the reference child: what it drew, for the students' children
        _write(out / "draws.json", json.dumps(draws.made()))
    _write(progress, "done")


def probe_mistakes(job: dict, module, ns: dict, configs: tuple, torch) -> None:
    """The reference child's last step: each known mistake's observations (the solved namespace with the
    mistake's code in place of its exercise), saved as mistake-<id>.pt."""
    from graders import engine

    out = Path(job["out"])
    progress = out / "progress"
    only_public, hidden_seed = job.get("only_public", False), job.get("hidden_seed")
    for mistake in getattr(module, "MISTAKES", ()):
        if mistake.exercise not in job["exercises"] or mistake.observed:
            continue
        _write(progress, f"probing mistake {mistake.id}")
        m_ns = dict(ns)
        src = engine.mistake_source(mistake, module.CHECKS.lesson)
        engine.register_source(f"<mistake {mistake.id}>", src)  # triton reads a kernel's source
        exec(compile(src, f"<mistake {mistake.id}>", "exec", dont_inherit=True), m_ns)
        try:
            with _Alarm(job["exercise_timeout"], engine.ExerciseTimeout):
                obs = engine.probe_exercise(module, m_ns, mistake.exercise, configs, only_public, hidden_seed)
        except engine.ExerciseTimeout:
            continue
        _save(torch, obs, out / f"mistake-{mistake.id}.pt")


def _probe_mutants(job, module, ns, solved, configs, only_public, hidden_seed, out: Path, progress, torch) -> None:
    """The engine's mutants of each exercise (graders/engine/mutations.py), run here, in the reference child
    only: the solved cell's own source, changed by the engine; `mutant-<exercise>-<n>.pt` for the ones that
    show on a check, and mutants.json with what was tried, dropped and skipped (a time budget per exercise).
    A follow-up (job["mutant_follow"]: {exercise: {"candidates": [n, ...], "screen": a check key or None}})
    probes those candidates of those exercises, by count, each within the exercise time limit; with a screen,
    each first runs that check against the student's observation there ("student": torch.save's bytes, base64)
    and `screened-<exercise>-<n>.pt` keeps what it gave (course_cli/sandboxed/grading.py follow_up).
    Each candidate is a phase of its own in the progress file ("probing mistake mutant:..."), so the parent's
    watchdog gives each the exercise limit."""
    from graders import engine
    from graders.engine import mutations

    report = {}
    follow = job.get("mutant_follow")

    def at(name: str, k: str, counts: dict) -> None:  # mutants.json says where a child that died was
        _write(progress, f"probing mistake {k}")
        report[name] = {**counts, "at": int(k.rsplit(":", 1)[1]), "done": False}
        _write(out / "mutants.json", json.dumps(report))

    def keep(k: str, obs: dict, prefix: str = "mutant") -> None:
        _save(torch, obs, out / f"{prefix}-{k.removeprefix(mutations.PREFIX).replace(':', '-')}.pt")

    for name in job["exercises"]:
        if name not in solved or solved[name].get("missing") or (follow is not None and name not in follow):
            continue
        _write(progress, f"probing mistake mutant:{name}")
        only, screen = None, None
        if follow is not None:  # by count: the candidates asked for, each bounded by the exercise limit
            budget, alarm = float("inf"), lambda s: _Alarm(float(job["exercise_timeout"]), engine.ExerciseTimeout)
            only = [int(n) for n in follow[name]["candidates"]]
            if follow[name].get("screen"):
                try:  # the student's observation: data (weights_only), from the parent
                    import base64

                    raw = base64.b64decode(follow[name]["student"])
                    screen = (follow[name]["screen"], torch.load(io.BytesIO(raw), weights_only=True))
                except Exception:  # noqa: BLE001 - unreadable: every candidate runs the whole battery
                    screen = None
        else:
            budget = float(job.get("mutant_budget", mutations.BUDGET_S))
            alarm = lambda s: _Alarm(max(s, 0.001), engine.ExerciseTimeout)  # noqa: E731
        kept, counts = mutations.probe_mutants(
            module, ns, name, configs, solved[name], only_public, hidden_seed,
            budget=budget, cap=int(job.get("mutant_cap", mutations.CAP)), alarm=alarm, only=only, screen=screen,
            on_candidate=lambda k, counts, name=name: at(name, k, counts), on_kept=keep,
            on_screened=lambda k, seen: keep(k, {"checks": seen}, "screened"))
        report[name] = {**counts, "done": True}
        _write(out / "mutants.json", json.dumps(report))


def _save(torch, obs, path: Path, file_limit: int | None = None) -> None:
    tmp = path.with_name(path.name + ".tmp")
    try:
        torch.save(obs, tmp)
    except OSError as exc:  # observations past RLIMIT_FSIZE: the student's outputs are absurdly large
        if exc.errno != 27:
            raise
        limit = f"{file_limit / 2**20:g} MiB" if file_limit else "the file size limit"
        err = {"__error__": {"kind": "error", "type": "OutputLimit", "message": (
            f"output limit exceeded: the outputs returned by this exercise do not fit in {limit}")}}
        obs = {**obs, "checks": {k: err for k in obs.get("checks", {})}}
        torch.save(obs, tmp)
    os.replace(tmp, path)


def _stop_leftovers() -> None:
    """Kill the processes the notebook's cells left running, before the checks: they would hold the
    process limit (and the checks' threads could not start). Inside bubblewrap this process is alone in
    its PID namespace with the sandbox's init, so kill(-1) reaches exactly the notebook's processes;
    otherwise only inside a course cgroup of our own."""
    if settings.sandboxed():
        try:
            os.kill(-1, signal.SIGKILL)  # every process of this PID namespace but init and this one
        except OSError:
            pass
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            name = path.rsplit("/", 1)[-1]
            if not name.startswith("course-"):
                continue
            root = "/sys/fs/cgroup/pids" if "pids" in controllers.split(",") else "/sys/fs/cgroup"
            procs = Path(root + path) / "cgroup.procs"
            for _ in range(50):
                pids = [int(p) for p in procs.read_text().split() if int(p) != os.getpid()]
                if not pids:
                    break
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                import time

                time.sleep(0.005)
    except (OSError, ValueError):
        pass
    try:  # reap our own children among them: a zombie still counts against the process limit
        while os.waitpid(-1, os.WNOHANG)[0]:
            pass
    except ChildProcessError:
        pass


def _dropped() -> int:
    """Bytes of output dropped so far (after flushing what the student's prints buffered)."""
    for w in _WRAPPERS:
        try:
            w.flush()
        except BaseException:
            pass
    return sum(s.dropped for s in _STREAMS)


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 2**10:.0f} KiB"


_STREAMS: list[_Capped] = []
_WRAPPERS: list[io.TextIOWrapper] = []


def _send_view(job: dict) -> None:
    """First thing, before any of the notebook's code: send the parent our output folder's descriptor on the
    socket it gave us (job["view_fd"]), then close it. Inside the sandbox that folder is a sized tmpfs the
    parent could not reach otherwise; it keeps it alive, and reads it, after we are gone."""
    fd = job.get("view_fd")
    if fd is None:
        return
    import socket

    try:
        sock = socket.socket(fileno=int(fd))
    except OSError:
        return
    try:
        view = os.open(job["out"], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            socket.send_fds(sock, [b"v"], [view])
        finally:
            os.close(view)
    except OSError:
        pass
    finally:
        sock.close()


def main() -> None:
    job = json.loads(Path(sys.argv[1]).read_text())
    out = Path(job["out"])
    _send_view(job)
    # The student's prints go to files the parent reads a bounded tail of, never to our terminal; the
    # first `output_limit` bytes are kept, the rest dropped (RLIMIT_FSIZE bounds raw writes to fds 1 and 2).
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limit = int(job.get("output_limit", 2**20))
    for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
        f = os.open(out / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(f, fd)
        os.close(f)
        raw = _Capped(fd, limit)
        _STREAMS.append(raw)
        stream = io.TextIOWrapper(io.BufferedWriter(raw), encoding="utf-8", errors="backslashreplace",
                                  line_buffering=fd == 2)
        _WRAPPERS.append(stream)
        setattr(sys, "stdout" if fd == 1 else "stderr", stream)
    sys.stdin = open(os.devnull)
    os.environ.setdefault("MPLBACKEND", "Agg")
    run(job)
    for stream in _WRAPPERS:
        try:
            stream.flush()
        except BaseException:
            pass
    os._exit(0)  # skip interpreter teardown: it can be slow, and the student's atexit hooks are not ours


if __name__ == "__main__":
    main()
