"""What the declared domains cost (issue 28): per lesson, the checks and drawn examples per exercise, and
`course check LESSON --solution`'s time in this tree against another tree (the code before), interleaved.

    python benchmarks/check_cost.py --before /tmp/base-tree [--lessons lesson09 lesson10] [--runs 3]
    python benchmarks/check_cost.py --before /tmp/base-tree --mistake [--lessons ...]

`--mistake` times a notebook carrying one mistake instead (the lesson's first catalogued one, planted in the
solved notebook by tests/harness.py's `with_mistake`; the same file for both trees): what a failing check
costs, the cause engine's work included (issue 44, "the cost": goal at most 1.5x the time before).

`--before` is a checkout of the commit to compare with (e.g. `git archive f681e7c | tar -x -C /tmp/base`).
Each tree's reference cache is filled by one run first, so the times are warm checks (the student's child,
the parent's judging, the diagnosis); the goal is at most 1.3x the time before.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def counts(lesson_id: str) -> list[tuple[str, int, int]]:
    """(exercise, CPU checks, drawn examples) of this tree's grader for `lesson_id`."""
    sys.path.insert(0, str(HERE))
    from graders.engine.checks import CHECKS_OF
    from graders.engine.probe import draw_examples, seed_for
    from graders.registry import find_lesson

    lesson = find_lesson(lesson_id)
    checks = CHECKS_OF(importlib.import_module(lesson.module))
    out = []
    for ex in lesson.exercises:
        mine = checks.of(ex.name)
        n = sum(1 for c in mine for cfg in c.configs if cfg.device == "cpu")
        drawn = 0
        for c in mine:
            for d in checks.domains.get(ex.name, []):
                if c.name.startswith("over its declared domain"):
                    drawn += len(draw_examples(d, seed_for(lesson_id, c, c.configs[0])))
                    break
        out.append((ex.name, n, drawn))
    return out


def timed(tree: Path, lesson: str, notebook: Path | None = None) -> float:
    env = dict(os.environ, PYTHONPATH=str(tree))
    what = ["--notebook", str(notebook)] if notebook else ["--solution"]
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "course_cli", "check", lesson, *what], cwd=tree, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def mistake_notebook(lesson_id: str, folder: Path) -> tuple[str, Path]:
    """The lesson's first catalogued mistake planted in its solved notebook: (the mistake's name, the file)."""
    sys.path[:0] = [str(HERE), str(HERE / "tests")]
    from harness import mistakes_of, with_mistake
    from graders.registry import find_lesson

    lesson = find_lesson(lesson_id)
    mistake = mistakes_of(lesson)[0]
    sub = folder / lesson_id
    sub.mkdir(parents=True, exist_ok=True)
    return mistake.id, with_mistake(lesson, mistake, sub)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, required=True, help="a checkout of the code to compare with")
    ap.add_argument("--lessons", nargs="+", default=["lesson09", "lesson10"])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--mistake", action="store_true", help="time a notebook with one catalogued mistake")
    args = ap.parse_args()
    import tempfile

    scratch = Path(tempfile.mkdtemp(prefix="check-cost-", dir=HERE.parent))
    for lesson in args.lessons:
        print(f"{lesson}: exercise, checks (CPU), drawn examples")
        for name, n, drawn in counts(lesson):
            print(f"  {name:28} {n:4d} {drawn:4d}")
    for lesson in args.lessons:
        name, nb = mistake_notebook(lesson, scratch) if args.mistake else ("--solution", None)
        timed(args.before, lesson, nb), timed(HERE, lesson, nb)  # fill both reference caches
        before, after = [], []
        for _ in range(args.runs):  # interleaved: both trees see the same machine load
            before.append(timed(args.before, lesson, nb))
            after.append(timed(HERE, lesson, nb))
        b, a = statistics.median(before), statistics.median(after)
        print(f"{lesson}: course check ({name}) before {b:.1f} s, after {a:.1f} s (median of {args.runs}), "
              f"ratio {a / b:.2f}", flush=True)
    import shutil

    shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
