"""The sandboxed child: runs a notebook's code and the probes, writes observations, nothing else.

Started by `course_cli.sandbox` as `python -m course_cli.child JOB.json` in its own session, under a
memory limit, with TRITON_INTERPRET=1 for CPU runs (set before anything imports triton). It writes:

  progress      what it is doing now (a cell or an exercise), for timeout messages
  cells.json    each executed cell: ok, or the error with the student's line
  obs-<exercise>.pt, mistake-<id>.pt   observations, read back with torch.load(weights_only=True)
  env.json      torch version and whether CUDA is present, written last

The parent never unpickles anything from here and judges in its own process.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from pathlib import Path

_MAGIC = re.compile(r"^(\s*)([%!].*)$")


def strip_magics(source: str) -> str | None:
    """IPython magics and shell escapes become `pass`; a cell magic (%%) skips the whole cell."""
    if source.lstrip().startswith("%%"):
        return None
    lines = []
    for line in source.splitlines():
        m = _MAGIC.match(line)
        lines.append(f"{m.group(1)}pass  # skipped: {m.group(2)[:40]}" if m else line)
    return "\n".join(lines)


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


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def run(job: dict) -> None:
    out = Path(job["out"])
    progress = out / "progress"
    _write(progress, "starting: importing torch")

    import torch

    from graders import engine

    torch.manual_seed(0)
    module = __import__(job["module"], fromlist=["CHECKS"])
    configs = tuple(sorted({c for check in module.CHECKS for c in check.configs if c.device == job["device"]},
                           key=lambda c: c.key))
    cells_report = []
    ns: dict = {"__name__": "__main__", "__builtins__": __builtins__}
    for cell in job["cells"]:
        index, source = cell["index"], strip_magics(cell["source"])
        filename = f"<cell {index}>"
        _write(progress, f"running cell {index}")
        report = {"index": index, "status": "ok"}
        if source is None:
            report["status"] = "skipped"
            cells_report.append(report)
            continue
        engine.register_source(filename, source)
        try:
            code = compile(source, filename, "exec")
        except SyntaxError as exc:
            report.update(status="error", error=f"{type(exc).__name__}: {exc.msg} (cell {index}, line {exc.lineno})")
            cells_report.append(report)
            continue
        try:
            with _Alarm(job["cell_timeout"], engine.ExerciseTimeout):
                exec(code, ns)
        except engine.ExerciseTimeout as exc:
            report.update(status="timeout", error=f"cell {index} {exc}")
        except SystemExit as exc:
            report.update(status="error", error=f"cell {index} called sys.exit({exc.code!r}); grading went on without the rest of that cell")
        except BaseException as exc:  # anything the student's cell raises is reported, never fatal
            report.update(status="error", error=engine.student_traceback(exc))
        cells_report.append(report)
    _write(out / "cells.json", json.dumps(cells_report))

    if job.get("bench"):
        _write(progress, "benchmarking")
        report = module.benchmark(ns, job["device"])
        _write(out / "bench.json", json.dumps(report, default=str))
        _write(out / "env.json", json.dumps({"torch": torch.__version__, "cuda": torch.cuda.is_available()}))
        _write(progress, "done")
        return

    only_public = job.get("only_public", False)
    for name in job["exercises"]:
        _write(progress, f"checking {name}")
        try:
            with _Alarm(job["exercise_timeout"], engine.ExerciseTimeout):
                obs = engine.probe_exercise(module, ns, name, configs, only_public)
        except engine.ExerciseTimeout as exc:  # the alarm fired between checks
            obs = {"checks": {}, "timeout": True, "forbidden": [], "mutated": [], "message": str(exc)}
        _save(torch, obs, out / f"obs-{name}.pt")

    if job.get("mistakes"):
        for mistake in getattr(module, "MISTAKES", ()):
            if mistake.exercise not in job["exercises"]:
                continue
            _write(progress, f"probing mistake {mistake.id}")
            m_ns = dict(ns)
            src = engine.mistake_source(mistake)
            engine.register_source(f"<mistake {mistake.id}>", src)  # triton reads a kernel's source
            exec(compile(src, f"<mistake {mistake.id}>", "exec"), m_ns)
            try:
                with _Alarm(job["exercise_timeout"], engine.ExerciseTimeout):
                    obs = engine.probe_exercise(module, m_ns, mistake.exercise, configs, only_public)
            except engine.ExerciseTimeout:
                continue
            _save(torch, obs, out / f"mistake-{mistake.id}.pt")

    _write(out / "env.json", json.dumps({"torch": torch.__version__, "cuda": torch.cuda.is_available()}))
    _write(progress, "done")


def _save(torch, obs, path: Path) -> None:
    tmp = path.with_name(path.name + ".tmp")
    torch.save(obs, tmp)
    os.replace(tmp, path)


def main() -> None:
    job = json.loads(Path(sys.argv[1]).read_text())
    out = Path(job["out"])
    # The student's prints go to files the parent reads a bounded tail of, never to our terminal.
    for fd, name in ((1, "stdout.txt"), (2, "stderr.txt")):
        f = os.open(out / name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(f, fd)
        os.close(f)
    sys.stdin = open(os.devnull)
    os.environ.setdefault("MPLBACKEND", "Agg")
    run(job)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # skip interpreter teardown: it can be slow, and the student's atexit hooks are not ours


if __name__ == "__main__":
    main()
