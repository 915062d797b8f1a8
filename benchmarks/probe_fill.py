"""What `engine.probe.filled_memory` costs: each lesson's solved notebook probed in this process (every CPU
check of every exercise, as the grading child runs them) with the fill on and off, interleaved; medians.

    TRITON_INTERPRET=1 python benchmarks/probe_fill.py [--lessons lesson08 lesson09] [--runs 5]

One torch thread, as in a grading child (the sandbox sets OMP_NUM_THREADS=1). The first pass of each lesson
warms its caches and is not counted.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lessons", nargs="*", default=None, help="lesson ids (default: all)")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    os.environ.setdefault("TRITON_INTERPRET", "1")
    sys.path[:0] = [str(HERE), str(HERE / "tests")]
    import torch

    torch.set_num_threads(1)
    import graders.engine.probe as probe
    from graders.registry import LESSONS
    from harness import _configs, run_in_process

    filled = probe.filled_memory

    @contextlib.contextmanager
    def unfilled(device):
        yield

    def probe_all(lesson, module, ns) -> float:
        t = time.perf_counter()
        for e in lesson.exercises:
            probe.probe_exercise(module, ns, e.name, _configs(module))
        return time.perf_counter() - t

    print("| lesson | fill off (s) | fill on (s) | on / off |")
    print("|---|---|---|---|")
    for lesson in LESSONS:
        if args.lessons and lesson.id not in args.lessons:
            continue
        module = importlib.import_module(lesson.module)
        ns, _ = run_in_process(lesson, lesson.solution_path)
        probe_all(lesson, module, ns)
        times = {"off": [], "on": []}
        for _ in range(args.runs):
            for name, fill in (("off", unfilled), ("on", filled)):
                probe.filled_memory = fill
                try:
                    times[name].append(probe_all(lesson, module, ns))
                finally:
                    probe.filled_memory = filled
        off, on = statistics.median(times["off"]), statistics.median(times["on"])
        print(f"| {lesson.id} | {off:.3f} | {on:.3f} | {on / off:.2f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
