"""Where a warm `course check lesson01 --solution` spends its time, phase by phase, measured in one run.

    python benchmarks/warm_phases.py [--runs 7] [--lesson lesson01] [--profile]

Each run starts the CLI in a fresh interpreter with a tracer in front of it (the CLI's own code, its functions
wrapped to stamp the clock as they return; CLOCK_MONOTONIC, shared with this process), against the workspace's
warm server started once beforehand. Client phases: the interpreter's start, the imports, start_early (the
server's start, when none listens), the rest before the check, the course key and socket path, the connection
(connect and the version handshake), the server's part (from the reply's "phases": queued, the notebook read,
the Grading's set-up, the job file, the fork with its namespaces, the check itself, judging, the result as
data), what the socket and JSON add, the result decoded, rendering, and the interpreter's exit. Each row is the
median over the runs of that phase; `import torch` is timed in the same runs (interleaved), with the load.

--profile also writes cProfile's top functions of one client run, and of the check's own work (the child's
`run` on the job a fork gets, in a process that imported what the zygote imports: torch, the grader, its
WARM_IMPORTS), to stdout.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from warm_checks import stop_servers  # noqa: E402 (this folder is sys.path[0] when run as a script)

TRACER = r"""
import time
_T = [("boot", time.perf_counter())]
import json, os, sys, functools
def _mark(name):
    _T.append((name, time.perf_counter()))
import course_cli.main as _main
from course_cli.sandboxed import warm as _warm
import course_cli.render as _render
from course_cli.student import checking as _checking
from course_cli.sandboxed import sandbox as _sandbox
_mark("imports")
_SERVER = {}
def _wrap(mod, name, after=None, before=None):
    fn = getattr(mod, name)
    @functools.wraps(fn)
    def wrapper(*a, **k):
        if before:
            _mark(before)
        out = fn(*a, **k)
        if after:
            _mark(after)
        if isinstance(out, dict) and "phases" in out:
            _SERVER.update(out["phases"])
        return out
    setattr(mod, name, wrapper)
_wrap(_warm, "start_early", after="start_early", before="before start_early")
_wrap(_checking, "check_and_record", before="before the check")
_wrap(_warm, "socket_path", after="key and socket path")
_wrap(_warm, "_hello", after="connection")
_wrap(_warm, "_recv")
_wrap(_warm, "from_wire", before="server", after="result decoded")
_wrap(_render, "render_result", before="after the check", after="render")
def _dump():
    _mark("exit")
    with open(os.environ["TRACE_OUT"], "w") as f:
        json.dump({"marks": _T, "server": _SERVER}, f)
import atexit
atexit.register(_dump)
sys.argv = ["course"] + sys.argv[1:]
_main.cli(prog_name="course")
"""


def phases_of(trace: dict, t_start: float, t_end: float) -> dict[str, float]:
    """The client's marks and the server's phases as {phase: seconds}, in order."""
    marks = [("start", t_start)] + [tuple(m) for m in trace["marks"]] + [("interpreter exit", t_end)]
    out: dict[str, float] = {}
    for (_, t0), (name, t1) in zip(marks, marks[1:]):
        if name == "server":
            server = trace["server"]
            for k, v in server.items():
                out[f"server: {k}"] = v
            out["server: the socket and JSON"] = (t1 - t0) - sum(server.values())
        else:
            key = {"boot": "interpreter start"}.get(name, name)
            out[key] = out.get(key, 0.0) + (t1 - t0)
    return out


def run_traced(args: list[str], env: dict, out: Path) -> dict[str, float]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-c", TRACER, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       env={**env, "TRACE_OUT": str(out)}, cwd=str(ROOT))
    t1 = time.perf_counter()
    if r.returncode not in (0, 1):
        raise SystemExit(f"the check failed:\n{r.stderr.decode()[-2000:]}")
    trace = json.loads(out.read_text())
    if not trace["server"]:
        raise SystemExit("the check was not graded warm (no server phases came back)")
    ph = phases_of(trace, t0, t1)
    ph["total"] = t1 - t0
    return ph


def profile_client(args: list[str], env: dict) -> None:
    import pstats

    prof = Path(tempfile.mkdtemp()) / "client.prof"
    subprocess.run([sys.executable, "-m", "cProfile", "-o", str(prof), "-m", "course_cli", *args],
                   stdout=subprocess.DEVNULL, env=env, cwd=str(ROOT))
    print("\n## cProfile: the client (cumulative, top 30)\n")
    pstats.Stats(str(prof)).sort_stats("cumulative").print_stats(30)


CHECK_PROFILE = r"""
import cProfile, importlib, pstats, sys, tempfile, json
import torch
from graders import engine
from course_cli.sandboxed import child, zygote, grading, sandbox
from course_cli.sandboxed.notebook import graded_cells, read_notebook
from graders.registry import find_lesson
lesson = find_lesson(sys.argv[1])
zygote.preload(importlib.import_module(lesson.module))
ref = grading.Reference.finish(lesson, *grading.Reference.start(lesson, "cpu"), "cpu")
cells = graded_cells(read_notebook(lesson.solution_path))
names = [e.name for e in lesson.exercises]
def job():
    out = tempfile.mkdtemp()
    j = sandbox.make_job(lesson.module, cells, names, "cpu", out, draws=ref.draws)
    j["in_process"] = True
    return j
child.run(job())  # once untimed: what a forked check finds already done in the zygote stays so
p = cProfile.Profile()
p.enable()
child.run(job())
p.disable()
pstats.Stats(p).sort_stats(sys.argv[2]).print_stats(25)
"""


def profile_check(lesson: str, env: dict) -> None:
    for key in ("cumulative", "tottime"):
        print(f"\n## cProfile: the check's own work (child.run in process, {key}, top 25)\n", flush=True)
        subprocess.run([sys.executable, "-c", CHECK_PROFILE, lesson, key], env={**env, "COURSE_WARM": "0"},
                       cwd=str(ROOT))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--lesson", default="lesson01")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()

    run_dir = Path(tempfile.mkdtemp(prefix="cwp-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_RUNTIME_DIR": str(run_dir), "COURSE_WARM": "1"}
    check = ["check", args.lesson, "--solution"]
    out = run_dir / "trace.json"
    runs, imports, loads = [], [], []
    try:
        run_traced(check, env, out)  # starts the server (and its zygote)
        run_traced(check, env, out)  # the first check after a start: not counted
        for _ in range(args.runs):
            loads.append(os.getloadavg()[0])
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import torch"], env=env, check=True)
            imports.append(time.perf_counter() - t)
            runs.append(run_traced(check, env, out))
        if args.profile:
            profile_client(check, env)
    finally:
        stop_servers(run_dir)
        shutil.rmtree(run_dir, ignore_errors=True)
    if args.profile:
        profile_check(args.lesson, env)

    names = list(dict.fromkeys(k for r in runs for k in r))
    i = statistics.median(imports)
    print(f"\n`python benchmarks/warm_phases.py --runs {args.runs} --lesson {args.lesson}`, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, load average "
          f"{min(loads):.1f}-{max(loads):.1f} during the runs; medians of {args.runs} runs\n")
    print("| phase | median (ms) | min (ms) | share of the median total |")
    print("|---|---|---|---|")
    total = statistics.median(r["total"] for r in runs)
    for n in names:
        vals = [r.get(n, 0.0) for r in runs]
        print(f"| {n} | {statistics.median(vals) * 1000:.0f} | {min(vals) * 1000:.0f} | "
              f"{statistics.median(vals) / total:.0%} |" if n != "total" else
              f"| **total** | **{total * 1000:.0f}** | {min(vals) * 1000:.0f} | |")
    print(f"| `import torch` (interleaved) | {i * 1000:.0f} | {min(imports) * 1000:.0f} | |")
    print(f"\nwarm check / import torch: {total / i:.2f}x (median of each)")


if __name__ == "__main__":
    main()
