"""What a child's graders cost to import with the child build compiled to bytecode and without (issue 46: the
child build is bound read-only, so a child could never write its own bytecode and compiled every module at each
start). One run, interleaved: for each lesson, the child build (course_cli/sandboxed/child_build.py) copied with
its __pycache__ and without, then in fresh interpreters (torch imported first, not counted) the modules a child
imports: the engine's and the lesson's grader.

    python benchmarks/child_bytecode.py [--runs 5] [lesson01 lesson10]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

CODE = """
import time, torch
t = time.perf_counter()
import graders.engine.probe, graders.engine.runner, graders.engine.checks, graders.{module}
print(time.perf_counter() - t)
"""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("lessons", nargs="*", default=["lesson01", "lesson10"])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    from course_cli.sandboxed.child_build import child_build
    from graders.registry import find_lesson

    tmp = Path(tempfile.mkdtemp())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # as the sandbox's child runs
    for lid in args.lessons:
        lesson = find_lesson(lid)
        build = child_build(tmp / "cache", lesson)
        roots = {}
        for kind in ("compiled", "source only"):
            root = tmp / f"{lid}-{kind.replace(' ', '-')}"
            shutil.copytree(build, root / "graders", copy_function=shutil.copy2)  # mtimes kept: the pycs stay fresh
            if kind == "source only":
                for d in list((root / "graders").rglob("__pycache__")):
                    shutil.rmtree(d)
            roots[kind] = root
        times = {k: [] for k in roots}
        for _ in range(args.runs):
            for kind, root in roots.items():
                out = subprocess.run([sys.executable, "-c", CODE.format(module=lesson.module.split(".")[-1])],
                                     cwd=root, env={**env, "PYTHONPATH": str(root)}, capture_output=True, text=True,
                                     check=True)
                times[kind].append(float(out.stdout))
        c, s = statistics.median(times["compiled"]), statistics.median(times["source only"])
        print(f"{lid}: a child's graders import, median of {args.runs}: compiled {c * 1000:.0f} ms, source only "
              f"{s * 1000:.0f} ms ({s - c:+.3f} s, {c / s:.2f}x); load {os.getloadavg()[0]:.1f}", flush=True)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
