"""What class grading's zygotes save (course_cli/sandboxed/class_forks.py): `course grade` of one class, each
submission forked from its lesson's class zygote (the default) against a fresh sandbox per submission
(COURSE_CLASS_FORKS=0), interleaved run after run in one loop, so the ratio is measured within one run on one
machine. The class: the lesson's solved notebook and its first catalogued mistakes, copied to --size students.

Each run is `python -m course_cli grade` in a process of its own, inside a cpuacct cgroup made for it (cgroup
v1's cpuacct, or v2's cpu.stat) when one can be made, so the CPU counted is all of it: the parent, the
reference's child, every sandbox and zygote. The results (the JSON, per student) must be the same both ways.

    PYTHONPATH=. python benchmarks/class_forks.py [--lesson lesson01] [--size 12] [--jobs 2] [--runs 2] [--json F]

Exit status 0 (a measure, not a test), 1 when the two ways' results differ."""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def _class(lesson, folder: Path, size: int) -> None:
    import nbformat

    from graders.engine import mistake_source
    from harness import mistakes_of, solution_cell_index

    solved = nbformat.read(lesson.solution_path, as_version=4)
    kinds = [("solved", solved)]
    for m in mistakes_of(lesson)[:3]:
        nb = copy.deepcopy(solved)
        nb.cells[solution_cell_index(nb, m.exercise)].source = mistake_source(m)
        kinds.append((m.id, nb))
    for i, (name, nb) in zip(range(size), itertools.cycle(kinds)):
        path = folder / f"s{i:03d}-{name}" / lesson.id / lesson.notebook
        path.parent.mkdir(parents=True)
        nbformat.write(nb, path)


def _cpu_group() -> "tuple[Path, str] | None":
    """A fresh cgroup that counts CPU, and the file to read it from (v1 cpuacct, else v2), or None."""
    for base, knob in ((Path("/sys/fs/cgroup/cpuacct"), "cpuacct.usage"), (Path("/sys/fs/cgroup"), "cpu.stat")):
        if (base / knob).exists() or (base / "cgroup.controllers").exists():
            group = base / f"course-bench-{os.getpid()}-{time.monotonic_ns()}"
            try:
                group.mkdir()
                return group, knob
            except OSError:
                continue
    return None


def _cpu_seconds(group: Path, knob: str) -> float:
    text = (group / knob).read_text()
    if knob == "cpuacct.usage":
        return int(text) / 1e9
    return int(dict(line.split() for line in text.splitlines())["usage_usec"]) / 1e6


def _once(folder: Path, lesson: str, jobs: int, forks: bool, out: Path) -> dict:
    env = {**os.environ, "COURSE_CLASS_FORKS": "1" if forks else "0", "PYTHONPATH": str(ROOT)}
    made = _cpu_group()

    def join():  # the run's process (and so everything it starts) in the group
        if made is not None:
            (made[0] / "cgroup.procs").write_text(str(os.getpid()))

    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "course_cli", "grade", str(folder), "--lesson", lesson,
                           "--jobs", str(jobs), "--seed", "7", "--out", str(out)], env=env, capture_output=True,
                          text=True, preexec_fn=join)
    wall = time.perf_counter() - start
    cpu = None
    if made is not None:
        time.sleep(0.5)  # the last killed sandboxes leave the group
        cpu = round(_cpu_seconds(*made), 2)
        try:
            made[0].rmdir()
        except OSError:
            pass
    if proc.returncode != 0:
        raise SystemExit(f"course grade exited {proc.returncode}: {proc.stderr[-2000:]}")
    return {"forks": forks, "wall_s": round(wall, 2), "cpu_s": cpu}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lesson", default="lesson01")
    ap.add_argument("--size", type=int, default=12)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    from graders.registry import find_lesson

    lesson = find_lesson(args.lesson)
    work = Path(tempfile.mkdtemp(prefix="class-forks-bench-"))
    _class(lesson, work / "class", args.size)
    runs, results = [], {}
    load = os.getloadavg()[0]
    for r in range(args.runs):
        for forks in (True, False) if r % 2 == 0 else (False, True):
            out = work / f"out-{forks}-{r}.json"
            row = _once(work / "class", lesson.id, args.jobs, forks, out)
            runs.append(row)
            print(f"run {r} forks={forks}: {row['wall_s']} s wall, {row['cpu_s']} CPU-s", flush=True)
            results.setdefault(forks, json.loads(out.read_text())["students"])
    same = json.dumps(results[True], sort_keys=True) == json.dumps(results[False], sort_keys=True)
    summary = {}
    for forks in (True, False):
        rows = [x for x in runs if x["forks"] == forks]
        summary["forked" if forks else "cold"] = {
            "wall_s": statistics.median(x["wall_s"] for x in rows),
            "cpu_s": statistics.median(x["cpu_s"] for x in rows) if rows[0]["cpu_s"] is not None else None}
    print(f"medians: forked {summary['forked']}, cold {summary['cold']}; the same results both ways: {same}")
    if args.json:
        record = {"command": "python benchmarks/class_forks.py " + " ".join(sys.argv[1:]),
                  "date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": platform.node(),
                  "cores": os.cpu_count(), "load_average_1min_at_start": round(load, 2), "lesson": lesson.id,
                  "size": args.size, "jobs": args.jobs, "runs": runs, "medians": summary, "same_results": same}
        args.json.write_text(json.dumps(record, indent=1) + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
