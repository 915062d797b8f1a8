"""Batch grading speed, measured in one run on 20 lesson01 submissions:

  1. `course grade --jobs 1` against `--jobs 2` (goal: >= 1.7x on two cores);
  2. seconds per submission of `nbgrader autograde` (with the course's config) against a bare nbclient run
     of the same notebooks (goal for the nbgrader path: <= 1.2x the bare run).

    python benchmarks/batch_grading.py [--n 20]
"""

from __future__ import annotations

import argparse
import copy
import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from graders.engine import mistake_source  # noqa: E402
from graders.registry import find_lesson  # noqa: E402
from harness import solution_cell_index  # noqa: E402

BIN = Path(sys.executable).parent


def submissions(lesson, n: int) -> list[nbformat.NotebookNode]:
    """A class of n: solved, untouched, and each known mistake, in turn."""
    sol = nbformat.read(lesson.solution_path, as_version=4)
    stub = nbformat.read(lesson.student_path, as_version=4)
    mistakes = importlib.import_module(lesson.module).MISTAKES
    out = []
    for i in range(n):
        kind = i % (len(mistakes) + 2)
        if kind == 0:
            nb = copy.deepcopy(sol)
        elif kind == 1:
            nb = copy.deepcopy(stub)
        else:
            m = mistakes[kind - 2]
            nb = copy.deepcopy(sol)
            nb.cells[solution_cell_index(nb, m.exercise)].source = mistake_source(m)
        out.append(nb)
    return out


def run(cmd: list[str], cwd: Path) -> float:
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20)
    args = ap.parse_args()
    lesson = find_lesson("lesson01")
    work = Path(tempfile.mkdtemp(prefix="bench-batch-"))
    course = work / "course"
    run([str(BIN / "course"), "nbgrader", str(course)], work)
    run([str(BIN / "nbgrader"), "generate_assignment", lesson.id], course)
    for i, nb in enumerate(submissions(lesson, args.n)):
        folder = course / "submitted" / f"student{i:02d}" / lesson.id
        folder.mkdir(parents=True)
        nbformat.write(nb, folder / lesson.notebook)
    grade = [str(BIN / "course"), "grade", "submitted", "--lesson", lesson.id]
    run(grade + ["--jobs", "1"], course)  # warm the reference cache and the OS caches
    t1 = run(grade + ["--jobs", "1"], course)
    t2 = run(grade + ["--jobs", "2"], course)
    t_nbg = run([str(BIN / "nbgrader"), "autograde", lesson.id], course)

    from nbclient import NotebookClient

    from course_cli.sandboxed.notebook import is_demo

    # The bare run: the kernel executes the notebook and nothing grades it (check cells become no-ops).
    os.environ["COURSE_NBGRADER"] = "1"
    bare = {}
    for label, keep in (("all cells", lambda c: True), ("without demo cells", lambda c: not is_demo(c))):
        t = time.perf_counter()
        for p in sorted((course / "submitted").glob(f"*/{lesson.id}/{lesson.notebook}")):
            nb = nbformat.read(p, as_version=4)
            nb.cells = [c for c in nb.cells if keep(c)]
            NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                           resources={"metadata": {"path": str(p.parent)}}).execute()
        bare[label] = time.perf_counter() - t
    n = args.n
    print(f"{n} submissions of {lesson.id}")
    print(f"course grade --jobs 1:   {t1:7.1f} s  ({t1 / n:.2f} s per submission)")
    print(f"course grade --jobs 2:   {t2:7.1f} s  ({t2 / n:.2f} s per submission)   speed-up {t1 / t2:.2f}x (goal >= 1.7x)")
    print(f"nbgrader autograde:      {t_nbg:7.1f} s  ({t_nbg / n:.2f} s per submission)")
    for label, t_bare in bare.items():
        print(f"bare nbclient run, {label}: {t_bare:7.1f} s  ({t_bare / n:.2f} s per submission)   "
              f"nbgrader path / bare = {t_nbg / t_bare:.2f}x (goal <= 1.2x)")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
