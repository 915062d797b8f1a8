"""The follow-up's cost on a *warm* check (the default `course check`), against the same check without it.

    python benchmarks/follow_up_warm.py lesson10 Llama 39 [--rounds 3]

benchmarks/follow_up_cost.sh measures cold checks (COURSE_WARM=0): there the follow-up starts a reference child
of its own. A warm check follows up inside the workspace's warm server instead (course_cli/sandboxed/warm.py),
which already holds torch, the graders and the reference; and while no check runs, the server probes the
candidates the reference left (its idle probes), so that a failing check later finds its cause already probed.
Each round: the solved notebook of LESSON with EXERCISE's mutation candidate N planted
(benchmarks/plant_candidate.py) and the solved notebook beside it, in one folder (a zygote serves one notebook
folder: the student's); three fresh copies of one reference cache (built with the default budget, as
`course init` does) and three warm servers in private XDG_RUNTIME_DIRs, each started and warmed by two checks of
the solved notebook, then timed:

  no follow-up   the failing check, COURSE_FOLLOW_UPS=0 (no follow-up, no idle probe)
  first          the failing check, COURSE_IDLE_PROBES=0: it follows up (once per exercise and course version)
  after          the same check again: judged from what the first kept
  idle           the failing check on a server left idle until its idle probes ended (the default settings)

Prints one row per round (and how long the idle probes took), then the medians, with each check's diagnosis id.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from warm_checks import stop_servers  # noqa: E402


def run(cmd: list[str], env: dict) -> tuple[float, dict | None]:
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(ROOT), timeout=900)
    took = time.perf_counter() - t
    if r.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr[-2000:]}")
    try:
        return took, json.loads(r.stdout)
    except json.JSONDecodeError:
        return took, None


def diagnosis(result: dict | None, exercise: str) -> str:
    ex = next(e for e in (result or {}).get("exercises", []) if e["id"] == exercise)
    return f"{ex['status']} {ex.get('diagnosis_id')}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("lesson")
    ap.add_argument("exercise")
    ap.add_argument("candidate", type=int)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fuw-", dir=os.environ.get("SCRATCH") or str(Path.home())))
    base_env = {**os.environ, "PYTHONPATH": str(ROOT), "COURSE_WARM": "1"}
    course = [sys.executable, "-m", "course_cli", "check", args.lesson]
    planted = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "plant_candidate.py"), args.lesson,
                              args.exercise, str(args.candidate), str(work / "nb")],
                             capture_output=True, text=True, check=True, cwd=str(ROOT))
    nb = json.loads(planted.stdout)["path"]
    solved = work / "nb" / "solved.ipynb"
    shutil.copy(ROOT / "solutions" / Path(nb_of(args.lesson)).name, solved)
    base = work / "cache-base"
    subprocess.run(course + ["--solution", "--cold"], env={**base_env, "COURSE_CACHE_DIR": str(base),
                                                           "COURSE_FOLLOW_UPS": "0"},
                   capture_output=True, check=False, cwd=str(ROOT), timeout=900)
    rows = []
    try:
        for i in range(args.rounds):
            row = {}
            for mode in ("off", "on", "idle"):
                cache, run_dir = work / f"cache-{mode}-{i}", work / f"run-{mode}-{i}"
                shutil.copytree(base, cache)
                run_dir.mkdir(mode=0o700)
                env = {**base_env, "COURSE_CACHE_DIR": str(cache), "XDG_RUNTIME_DIR": str(run_dir)}
                if mode == "off":
                    env["COURSE_FOLLOW_UPS"] = "0"
                elif mode == "on":
                    env["COURSE_IDLE_PROBES"] = "0"
                run(course + ["--notebook", str(solved), "--json"], env)  # starts the server
                row[f"warm-{mode}"], _ = run(course + ["--notebook", str(solved), "--json"], env)
                if mode == "off":
                    row["none"], r = run(course + ["--notebook", nb, "--json"], env)
                    row["none-id"] = diagnosis(r, args.exercise)
                elif mode == "on":
                    row["first"], r = run(course + ["--notebook", nb, "--json"], env)
                    row["first-id"] = diagnosis(r, args.exercise)
                    row["after"], r = run(course + ["--notebook", nb, "--json"], env)
                    row["after-id"] = diagnosis(r, args.exercise)
                else:
                    idle_probes_end(run_dir, started=True)
                    row["passing-during"], _ = run(course + ["--notebook", str(solved), "--json"], env)
                    row["probes"] = idle_probes_end(run_dir)
                    row["idle"], r = run(course + ["--notebook", nb, "--json"], env)
                    row["idle-id"] = diagnosis(r, args.exercise)
                stop_servers(run_dir)
            rows.append(row)
            print(f"round {i + 1}: warm solved check {row['warm-off']:.2f}/{row['warm-on']:.2f}/{row['warm-idle']:.2f}"
                  f" s; no follow-up {row['none']:.2f} s ({row['none-id']}); first {row['first']:.2f} s "
                  f"({row['first-id']}); after {row['after']:.2f} s ({row['after-id']}); idle probes "
                  f"{row['probes']:.1f} s (a passing check during them {row['passing-during']:.2f} s), then {row['idle']:.2f} s "
                  f"({row['idle-id']}); first / none "
                  f"{row['first'] / row['none']:.2f}x, idle / none {row['idle'] / row['none']:.2f}x", flush=True)
    finally:
        for d in work.glob("run-*"):
            stop_servers(d)
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(r[k] for r in rows) for k in ("none", "first", "after", "idle", "probes",
                                                              "warm-idle", "passing-during")}
    print(f"medians of {len(rows)}: no follow-up {med['none']:.2f} s, first {med['first']:.2f} s "
          f"({med['first'] / med['none']:.2f}x), after {med['after']:.2f} s ({med['after'] / med['none']:.2f}x), "
          f"after the idle probes ({med['probes']:.1f} s) {med['idle']:.2f} s ({med['idle'] / med['none']:.2f}x); "
          f"a passing check {med['warm-idle']:.2f} s before the probes, {med['passing-during']:.2f} s during them "
          f"({med['passing-during'] / med['warm-idle']:.2f}x); "
          f"load {os.getloadavg()[0]:.1f}")


def nb_of(lesson_id: str) -> str:
    from graders.registry import find_lesson

    return str(find_lesson(lesson_id).solution_path)


def idle_probes_end(run_dir: Path, limit: float = 600.0, started: bool = False) -> float:
    """Wait until the server's idle probes have ended (its log: each probe started has ended, and none started
    for 5 s); the seconds from the first probe's start to the last one's end, from the log's clock. With
    `started`, only until one has started (0.0)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        text = "".join(p.read_text() for p in run_dir.glob("*/w-*.log"))
        started_at = re.findall(r"^(\d\d:\d\d:\d\d) \S+: idle probe of \S+ \(", text, re.M)
        ended = re.findall(r"^(\d\d:\d\d:\d\d) \S+: idle probe of \S+ (?:done|ended)", text, re.M)
        if started and started_at:
            return 0.0
        if started_at and len(ended) == len(started_at) and time.monotonic() - t0 > 5:
            stamp = lambda t: sum(int(x) * m for x, m in zip(t.split(":"), (3600, 60, 1)))  # noqa: E731
            time.sleep(5)
            again = "".join(p.read_text() for p in run_dir.glob("*/w-*.log"))
            if again == text:
                return float(stamp(ended[-1]) - stamp(started_at[0]))
        time.sleep(1)
    raise SystemExit(f"the idle probes did not end within {limit:g} s")


if __name__ == "__main__":
    main()
