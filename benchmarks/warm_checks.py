"""Warm checks against `python -c "import torch"`, every figure a ratio measured in one run (interleaved, so
each ratio's two sides see the same machine load).

    python benchmarks/warm_checks.py [--runs 5] [--lessons 01,02,...,09] [--write] [--quick]

  warm    `course check lesson01 --solution` with the workspace's warm server running   goal <= 0.3x
  first   the first check of each lesson after `course init` (references built, no server yet:
          it is started by this check)                                                  goal <= 1.5x
          and what the start adds: the first check less the warm check right after it; and its floor,
          a process importing what the zygote imports (torch, the grader, WARM_IMPORTS) plus that warm check
  cold    `course check lesson01 --solution --cold` (a fresh sandbox, as before)        goal <= 1.5x
  cell    lesson 01's check cell in a real kernel (jupyter_client; no browser), warm and cold; and every
          lesson 10 check cell warm (the slowest and the median exercise)          goal <= 0.5 s, 1.5 s

--quick measures the warm and cold rows only (a minute, for a loaded machine); benchmarks/warm_phases.py says where
a warm check's time goes. --write puts the table into docs/benchmarks.md (its "Warm checks" section). The reference observations are
built first, as `course init` does; the warm server lives in a private temporary XDG_RUNTIME_DIR.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def timed(cmd: list[str], env: dict) -> float:
    t = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=str(ROOT))
    if r.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr.decode()[-2000:]}")
    return time.perf_counter() - t


def imports_cmd(lesson) -> list[str]:
    """A process importing what a lesson's zygote imports before its first fork (zygote.main): torch, the engine's
    child side, the lesson's grader and its WARM_IMPORTS; no sandbox, socket or reference."""
    return [sys.executable, "-c", "import importlib, torch; from graders.engine import probe; "
            f"from course_cli.sandboxed import child, zygote; "
            f"zygote.preload(importlib.import_module({lesson.module!r}))"]


def stop_servers(run_dir: Path) -> None:
    for pidfile in (run_dir / "attention-course").glob("w-*.pid"):
        try:
            pid = int(pidfile.read_text())
            os.kill(pid, signal.SIGTERM)
            for _ in range(200):
                os.kill(pid, 0)
                time.sleep(0.05)
        except (OSError, ValueError):
            pass


def check_cell_times(runs: int, env: dict, lesson_id: str = "lesson01", exercises: list[str] | None = None,
                     modes: tuple[str, ...] = ("1", "0")) -> dict[str, dict[str, list[float]]]:
    """A lesson's check cells (`grade(lesson, exercise)`) executed in a real kernel after the solved notebook's
    cells, timed from execute request to the cell's end (no browser): {mode: {exercise: [seconds]}}, warm
    ("1") then cold ("0"); each exercise checked once untimed first (the server's start, the zygote)."""
    from jupyter_client.manager import start_new_kernel

    from course_cli.sandboxed.notebook import graded_cells, read_notebook
    from graders.registry import find_lesson

    lesson = find_lesson(lesson_id)
    exercises = exercises or [e.name for e in lesson.exercises]
    km, kc = start_new_kernel(kernel_name="python3", env=env, cwd=str(lesson.solution_path.parent))
    quiet = {"output_hook": lambda msg: None}
    try:
        for cell in graded_cells(read_notebook(lesson.solution_path)):
            kc.execute_interactive(cell["source"], timeout=300, **quiet)
        kc.execute_interactive("from course_cli.incell import grade", timeout=60, **quiet)
        out: dict[str, dict[str, list[float]]] = {m: {e: [] for e in exercises} for m in modes}
        for mode in modes:
            kc.execute_interactive(f"import os; os.environ['COURSE_WARM'] = {mode!r}", timeout=60, **quiet)
            for ex in exercises:
                kc.execute_interactive(f'grade("{lesson.id}", "{ex}")', timeout=600, **quiet)
                for _ in range(runs):
                    t = time.perf_counter()
                    kc.execute_interactive(f'grade("{lesson.id}", "{ex}")', timeout=600, **quiet)
                    out[mode][ex].append(time.perf_counter() - t)
        return out
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--lessons", default="01,02,03,04,05,06,07,08,09")
    ap.add_argument("--first-runs", type=int, default=3, help="runs of each lesson's first check (the median's shown)")
    ap.add_argument("--write", action="store_true", help="write the table into docs/benchmarks.md")
    ap.add_argument("--quick", action="store_true", help="the warm and cold `course check` rows only")
    args = ap.parse_args()
    if args.quick and args.write:
        ap.error("--write needs the whole table (without --quick)")

    from course_cli.sandboxed import references
    from graders.registry import find_lesson

    todo = references.missing()
    if todo:
        print(f"building {len(todo)} references first (as `course init` does)", flush=True)
        references.build(todo)
    run_dir = Path(tempfile.mkdtemp(prefix="cwb-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "XDG_RUNTIME_DIR": str(run_dir), "COURSE_WARM": "1"}
    cold_env = {**env, "COURSE_WARM": "0"}
    course = [sys.executable, "-m", "course_cli"]
    torch_cmd = [sys.executable, "-c", "import torch"]
    check01 = course + ["check", "lesson01", "--solution"]
    try:
        timed(check01, env)  # starts the warm server
        imports, warm, cold = [], [], []
        for _ in range(args.runs):
            imports.append(timed(torch_cmd, env))
            warm.append(timed(check01, env))
            cold.append(timed(check01 + ["--cold"], cold_env))
        if args.quick:
            i = statistics.median(imports)
            print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, load average "
                  f"{os.getloadavg()[0]:.1f} at the end; medians of {args.runs} interleaved runs\n\n"
                  "| what | seconds | import torch (s) | ratio | goal |\n|---|---|---|---|---|\n"
                  f"| warm `course check lesson01 --solution` | {statistics.median(warm):.2f} | {i:.2f} | "
                  f"{statistics.median(warm) / i:.2f}x | <= 0.3x |\n"
                  f"| cold `course check lesson01 --solution --cold` | {statistics.median(cold):.2f} | {i:.2f} | "
                  f"{statistics.median(cold) / i:.2f}x | <= 1.5x |")
            return
        cells01 = check_cell_times(args.runs, env, "lesson01", ["softmax"])
        cell_warm, cell_cold = cells01["1"]["softmax"], cells01["0"]["softmax"]
        cells10 = check_cell_times(max(1, args.runs // 2), env, "lesson10", modes=("1",))["1"]
        cell_import = timed(torch_cmd, env)
        runs: dict[str, list[tuple[float, float, float]]] = {}
        for _ in range(args.first_runs):  # the lessons in turn, each run a fresh server
            for n in args.lessons.split(","):
                lesson = find_lesson(f"lesson{int(n):02d}")
                stop_servers(run_dir)
                t_import = timed(torch_cmd, env)
                t_first = timed(course + ["check", lesson.id, "--solution"], env)
                t_next = timed(course + ["check", lesson.id, "--solution"], env)  # warm: the check's own work
                t_imports = timed(imports_cmd(lesson), env)  # what the zygote imports, without the sandbox
                runs.setdefault(lesson.id, []).append((t_first / t_import, t_import, t_next, t_imports))
        firsts = []  # per lesson, the run of median ratio: (lesson, first, import torch, warm check, imports)
        for lid, rs in runs.items():
            ratio, ti, tn, tz = sorted(rs)[len(rs) // 2]
            firsts.append((lid, ratio * ti, ti, tn, tz))
    finally:
        stop_servers(run_dir)
        shutil.rmtree(run_dir, ignore_errors=True)

    i = statistics.median(imports)
    rows = [("warm `course check lesson01 --solution`", statistics.median(warm), i, 0.3),
            ("cold `course check lesson01 --solution --cold`", statistics.median(cold), i, 1.5)]
    rows += [("lesson 01 check cell in a kernel, warm (execute to result, no browser)",
              statistics.median(cell_warm), cell_import, 0.5 / 1.37),
             ("lesson 01 check cell in a kernel, cold", statistics.median(cell_cold), cell_import, None)]
    slowest10 = max(cells10, key=lambda e: statistics.median(cells10[e]))
    rows += [(f"lesson 10 check cells in a kernel, warm: the slowest (`{slowest10}`)",
              statistics.median(cells10[slowest10]), cell_import, 1.5 / 1.37),
             ("lesson 10 check cells in a kernel, warm: the median exercise",
              statistics.median(statistics.median(v) for v in cells10.values()), cell_import, None)]
    rows += [(f"first check of {lid} after `course init`", t, ti, 1.5) for lid, t, ti, _, _ in firsts]
    rows += [(f"the start's own cost in {lid}'s first check (first minus the warm check after it)", t - tn, ti, None)
             for lid, t, ti, tn, _ in firsts]

    lines = [f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} on {os.cpu_count()} cores "
             f"({platform.machine()}, load average {os.getloadavg()[0]:.1f} at the end), "
             f"`python benchmarks/warm_checks.py --runs {args.runs} --first-runs {args.first_runs}`; medians of {args.runs} interleaved runs "
             f"(warm, cold); first checks: the run of median ratio of {args.first_runs}, each against an import torch "
             f"just before it.", "",
             "| what | seconds | import torch (s) | ratio | goal |", "|---|---|---|---|---|"]
    for what, t, ti, goal in rows:
        lines.append(f"| {what} | {t:.2f} | {ti:.2f} | {t / ti:.2f}x | {f'<= {goal:.2g}x' if goal else ''} |")
    lines += ["", "Each first check against its floor: what no first check can skip, a process importing what the "
              "lesson's zygote imports (torch, the grader, WARM_IMPORTS: the imports torch's own ops make lazily "
              "for the lesson's probes) plus the warm check after it (the check's own work). Same runs as above.",
              "", "| lesson | first check (s) | import torch (s) | the zygote's imports (s) | warm check (s) | "
              "first / (imports + warm) | imports / import torch |", "|---|---|---|---|---|---|---|"]
    for lid, t, ti, tn, tz in firsts:
        lines.append(f"| {lid} | {t:.2f} | {ti:.2f} | {tz:.2f} | {tn:.2f} | {t / (tz + tn):.2f}x | {tz / ti:.2f}x |")
    lines.append("")
    lines.append("The check cell's goal is 0.5 s for lesson 01 and 1.5 s for lesson 10 on the quiet machine, where "
                 "`import torch` takes 1.37 s (the section above): 0.36x and 1.1x as ratios.")
    table = "\n".join(lines)
    print(table)
    if args.write:
        doc = ROOT / "docs" / "benchmarks.md"
        text = doc.read_text() if doc.exists() else "# Benchmarks\n"
        section = f"## Warm checks (benchmarks/warm_checks.py)\n\n{table}\n"
        pattern = re.compile(r"## Warm checks \(benchmarks/warm_checks.py\)\n.*?(?=\nRead with care|\n## |\Z)", re.S)
        text = pattern.sub(lambda m: section.rstrip("\n") + "\n", text) if pattern.search(text) else \
            text.rstrip("\n") + "\n\n" + section
        doc.write_text(text)
        print(f"wrote {doc}")


if __name__ == "__main__":
    main()
