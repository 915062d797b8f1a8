"""How long `course check lesson01` takes against `python -c "import torch"`, measured in one run.

    python benchmarks/check_latency.py [--runs 5]

The goal (issue 2): a warm check (reference cache filled) at most 2x the torch import.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path


def timed(cmd: list[str]) -> float:
    t = time.perf_counter()
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--lesson", default="lesson01")
    args = ap.parse_args()
    course = str(Path(sys.executable).with_name("course"))
    if not Path(course).exists():
        course = shutil.which("course") or "course"
    check = [course, "check", args.lesson, "--notebook",
             str(Path(__file__).resolve().parent.parent / "lessons" / f"{args.lesson}_sdpa.ipynb")]
    timed(check)  # fill the reference cache
    imports, checks = [], []
    for _ in range(args.runs):  # interleaved, so both see the same machine load
        imports.append(timed([sys.executable, "-c", "import torch"]))
        checks.append(timed(check))
    i, c = statistics.median(imports), statistics.median(checks)
    print(f"python -c 'import torch': median {i:.2f} s over {args.runs} runs")
    print(f"course check {args.lesson}:   median {c:.2f} s over {args.runs} runs")
    print(f"ratio: {c / i:.2f}x (goal <= 2x)")


if __name__ == "__main__":
    main()
