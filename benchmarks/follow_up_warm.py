"""The follow-up's cost on a *warm* check (the default `course check`), against the same check without it.

    python benchmarks/follow_up_warm.py lesson10 Llama 39 [--rounds 3]

benchmarks/follow_up_cost.sh measures cold checks (COURSE_WARM=0): there the follow-up starts a reference child
of its own. A warm check follows up inside the workspace's warm server instead (course_cli/sandboxed/warm.py),
which already holds torch, the graders and the reference. Each round: the solved notebook of LESSON with
EXERCISE's mutation candidate N planted (benchmarks/plant_candidate.py), two fresh copies of one reference cache
(built with the default budget, as `course init` does) and two warm servers in private XDG_RUNTIME_DIRs, one
started with COURSE_FOLLOW_UPS=0; each server is started and warmed by two `--solution` checks, then timed:

  no follow-up   the failing check on the server started with COURSE_FOLLOW_UPS=0
  first          the failing check on the other server: it follows up (once per exercise and course version)
  after          the same check again: judged from what the first kept

Prints one row per round and the medians, with each check's diagnosis id.
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
    base = work / "cache-base"
    subprocess.run(course + ["--solution", "--cold"], env={**base_env, "COURSE_CACHE_DIR": str(base),
                                                           "COURSE_FOLLOW_UPS": "0"},
                   capture_output=True, check=False, cwd=str(ROOT), timeout=900)
    rows = []
    try:
        for i in range(args.rounds):
            row = {}
            for mode in ("off", "on"):
                cache, run_dir = work / f"cache-{mode}-{i}", work / f"run-{mode}-{i}"
                shutil.copytree(base, cache)
                run_dir.mkdir(mode=0o700)
                env = {**base_env, "COURSE_CACHE_DIR": str(cache), "XDG_RUNTIME_DIR": str(run_dir)}
                if mode == "off":
                    env["COURSE_FOLLOW_UPS"] = "0"
                run(course + ["--solution", "--json"], env)  # starts the server
                row[f"warm-{mode}"], _ = run(course + ["--solution", "--json"], env)
                if mode == "off":
                    row["none"], r = run(course + ["--notebook", nb, "--json"], env)
                    row["none-id"] = diagnosis(r, args.exercise)
                else:
                    row["first"], r = run(course + ["--notebook", nb, "--json"], env)
                    row["first-id"] = diagnosis(r, args.exercise)
                    row["after"], r = run(course + ["--notebook", nb, "--json"], env)
                    row["after-id"] = diagnosis(r, args.exercise)
                stop_servers(run_dir)
            rows.append(row)
            print(f"round {i + 1}: warm solution check {row['warm-off']:.2f}/{row['warm-on']:.2f} s; no follow-up "
                  f"{row['none']:.2f} s ({row['none-id']}); first {row['first']:.2f} s ({row['first-id']}); "
                  f"after {row['after']:.2f} s ({row['after-id']}); first / none {row['first'] / row['none']:.2f}x",
                  flush=True)
    finally:
        for d in work.glob("run-*"):
            stop_servers(d)
        shutil.rmtree(work, ignore_errors=True)
    med = {k: statistics.median(r[k] for r in rows) for k in ("none", "first", "after")}
    print(f"medians of {len(rows)}: no follow-up {med['none']:.2f} s, first {med['first']:.2f} s "
          f"({med['first'] / med['none']:.2f}x), after {med['after']:.2f} s ({med['after'] / med['none']:.2f}x); "
          f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
