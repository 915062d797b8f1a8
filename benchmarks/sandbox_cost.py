"""What the sandbox (bubblewrap) costs, measured in one run, interleaved so both see the same machine load:

  1. `course check lesson01` (warm reference cache) inside the sandbox and without it (COURSE_SANDBOX=none),
     each against `python -c "import torch"` (goal: the sandboxed check still <= 1.5x the import);
  2. `course grade --jobs 2` of 20 lesson01 submissions (solved, untouched, each known mistake) inside the
     sandbox and without it (`--insecure` with COURSE_SANDBOX=none) (goal: <= 1.1x the unsandboxed time).

    python benchmarks/sandbox_cost.py [--runs 5] [--n 20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))

from batch_grading import submissions  # noqa: E402

from graders.registry import find_lesson  # noqa: E402

BIN = Path(sys.executable).parent


def timed(cmd: list[str], sandbox: bool = True, cwd: Path | None = None) -> float:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    if not sandbox:
        env["COURSE_SANDBOX"] = "none"
    t = time.perf_counter()
    proc = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--n", type=int, default=20)
    ap.add_argument("--batches", type=int, default=2)
    args = ap.parse_args()
    lesson = find_lesson("lesson01")
    course = str(BIN / "course")
    check = [course, "check", lesson.id, "--notebook", str(lesson.student_path)]
    timed(check)
    timed(check, sandbox=False)  # fill the reference cache
    imports, boxed, bare = [], [], []
    for _ in range(args.runs):
        imports.append(timed([sys.executable, "-c", "import torch"]))
        boxed.append(timed(check))
        bare.append(timed(check, sandbox=False))
    i, b, n = statistics.median(imports), statistics.median(boxed), statistics.median(bare)
    print(f"python -c 'import torch':            median {i:.2f} s over {args.runs} runs")
    print(f"course check {lesson.id}, sandboxed:   median {b:.2f} s  ({b / i:.2f}x the import; goal <= 1.5x)")
    print(f"course check {lesson.id}, unsandboxed: median {n:.2f} s  ({n / i:.2f}x the import)")

    work = Path(tempfile.mkdtemp(prefix="bench-sandbox-"))
    for k, nb in enumerate(submissions(lesson, args.n)):
        folder = work / "submitted" / f"student{k:02d}" / lesson.id
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / lesson.notebook)
    grade = [course, "grade", str(work / "submitted"), "--lesson", lesson.id, "--jobs", "2"]
    g_boxed, g_bare = [], []
    for _ in range(args.batches):
        g_boxed.append(timed(grade))
        g_bare.append(timed(grade + ["--insecure"], sandbox=False))
    gb, gn = statistics.median(g_boxed), statistics.median(g_bare)
    print(f"course grade --jobs 2, {args.n} submissions, sandboxed:   median {gb:.1f} s over {args.batches} runs")
    print(f"course grade --jobs 2, {args.n} submissions, unsandboxed: median {gn:.1f} s  "
          f"(sandboxed / unsandboxed = {gb / gn:.2f}x; goal <= 1.1x)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
