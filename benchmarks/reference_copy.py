"""What each student of a class grading pays for its copy of the class's trusted reference: a deep copy (how
`grading._trusted_copy` made it before) against `Reference.for_one_grading` (its own dicts where a grading writes,
the observations shared: judging only reads them, tests/unit/test_reference_untouched.py). The reference is built
as `course grade` builds it (trusted, in this process's memory, the default mutant budget), then each copy is
timed `--runs` times, alternating, in this one process.

    PYTHONPATH=. python benchmarks/reference_copy.py [--lessons lesson01 lesson10] [--runs 5]

Prints the tensors in the reference and the median seconds of each copy. Exit status 0 (a measure)."""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _tensors(obj) -> int:
    import torch

    if isinstance(obj, torch.Tensor):
        return 1
    if isinstance(obj, dict):
        return sum(_tensors(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return sum(_tensors(v) for v in obj)
    return 0


def main() -> None:
    from course_cli.sandboxed.grading import Reference
    from graders.registry import find_lesson

    ap = argparse.ArgumentParser()
    ap.add_argument("--lessons", nargs="+", default=["lesson01", "lesson10"])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    for lid in args.lessons:
        lesson = find_lesson(lid)
        t = time.perf_counter()
        ref = Reference.finish(lesson, *Reference.start(lesson, "cpu", trusted=True), "cpu").origin
        built = time.perf_counter() - t
        deep, shared = [], []
        for _ in range(args.runs):
            t = time.perf_counter()
            copy.deepcopy(ref)
            deep.append(time.perf_counter() - t)
            t = time.perf_counter()
            ref.for_one_grading()
            shared.append(time.perf_counter() - t)
        d, s = statistics.median(deep), statistics.median(shared)
        print(f"{lid}: built in {built:.1f} s; {_tensors(ref.exercises) + _tensors(ref.mistakes)} tensors, "
              f"{len(ref.mistakes)} mistakes; per student: deep copy {d * 1000:.0f} ms, for_one_grading "
              f"{s * 1000:.1f} ms ({d / s:.0f}x)", flush=True)


if __name__ == "__main__":
    main()
