"""Dask's cost for class grading, measured in one run on synthetic lesson01 submissions:

  1. `course grade --scheduler local` (a LocalCluster of 2 worker processes, 1 thread each, over mutual TLS as
     the course starts it) against the local pool with 2 jobs, and against the same LocalCluster over plain
     TCP (--insecure-cluster), all through `batch.grade_class` with a journal: the overhead per submission
     (goal <= 5 %) and the cost of TLS (TLS / plain TCP, per submission). The modes alternate in rounds, so
     that a change in the machine's load hits all alike; the clusters' start-up and their first gradings
     (each worker imports torch) are timed apart.
  2. The scheduler's own limit: no-op tasks per second through the same LocalCluster.
  3. From the measured per-submission cost, the projected wall time for 20,000 submissions on 8, 64 and 512
     workers (one core each), and the share of the scheduler's no-op rate each needs.

    python benchmarks/cluster_overhead.py [--n 200] [--rounds 4]
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import nbformat

sys.path.insert(0, str(Path(__file__).resolve().parent))

from batch_grading import submissions  # noqa: E402

from course_cli.classes import batch, cluster  # noqa: E402
from course_cli.sandboxed.grading import Reference  # noqa: E402
from course_cli.classes.journal import result_to_dict  # noqa: E402
from graders.registry import find_lesson  # noqa: E402


def noop(i: int) -> int:
    return i


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--noops", type=int, default=5000)
    args = ap.parse_args()
    from distributed import Client, wait

    lesson = find_lesson("lesson01")
    load_before = os.getloadavg()[0]
    work = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    folder = work / "subs"
    folder.mkdir()
    for i, nb in enumerate(submissions(lesson, args.n + 4)):
        nbformat.write(nb, folder / f"student{i:03d}.ipynb")
    subs = batch.find_submissions(folder, lesson)
    warm, subs = subs[:4], subs[4:]
    rounds = [subs[k::args.rounds] for k in range(args.rounds)]

    t = time.perf_counter()
    Reference.finish(lesson, *Reference.start(lesson, "cpu", trusted=True), "cpu")  # both modes reuse it
    t_reference = time.perf_counter() - t
    t = time.perf_counter()
    security = cluster.security_for("local")  # the run's certificates, as `--scheduler local` makes them
    client = Client(cluster.local_cluster(2, security), security=security)
    t_start = time.perf_counter() - t
    t = time.perf_counter()
    plain = Client(cluster.local_cluster(2, None))  # --insecure-cluster
    t_start_plain = time.perf_counter() - t
    t = time.perf_counter()
    batch.grade_class(lesson, warm[:2], jobs=2, journal=work / "warm-local.journal")
    t_warm_local = time.perf_counter() - t
    t = time.perf_counter()
    batch.grade_class(lesson, warm[2:], scheduler=client, journal=work / "warm-cluster.journal")
    t_warm_cluster = time.perf_counter() - t
    batch.grade_class(lesson, warm[2:], scheduler=plain, journal=work / "warm-plain.journal")

    t_local = t_cluster = t_plain = 0.0
    local, remote, tcp = {}, {}, {}
    for k, part in enumerate(rounds):
        t = time.perf_counter()
        local.update(batch.grade_class(lesson, part, jobs=2, journal=work / f"local-{k}.journal"))
        a = time.perf_counter() - t
        t = time.perf_counter()
        remote.update(batch.grade_class(lesson, part, scheduler=client, journal=work / f"cluster-{k}.journal"))
        b = time.perf_counter() - t
        t = time.perf_counter()
        tcp.update(batch.grade_class(lesson, part, scheduler=plain, journal=work / f"plain-{k}.journal"))
        c = time.perf_counter() - t
        t_local, t_cluster, t_plain = t_local + a, t_cluster + b, t_plain + c
        print(f"round {k + 1}/{args.rounds} ({len(part)} submissions): local pool {a:6.1f} s, cluster (TLS) "
              f"{b:6.1f} s ({(b / a - 1) * 100:+.1f} %), cluster (plain TCP) {c:6.1f} s; TLS / TCP {b / c:.3f}",
              flush=True)
    as_dicts = lambda rs: {s: result_to_dict(r) for s, r in rs.items()}  # noqa: E731
    same = as_dicts(local) == as_dicts(remote) == as_dicts(tcp)
    pl = plain.cluster
    plain.close()
    pl.close()

    t = time.perf_counter()
    futures = client.map(noop, range(args.noops), pure=False)
    wait(futures)
    t_noop = time.perf_counter() - t
    del futures
    rate = args.noops / t_noop
    cl = client.cluster
    logging.getLogger("distributed").setLevel(logging.CRITICAL)  # the workers' complaints as the scheduler goes
    client.close()
    cl.close()
    shutil.rmtree(work, ignore_errors=True)

    n = len(subs)
    cost = t_cluster * 2 / n  # worker-seconds per submission (2 workers, one core each)
    print(f"\n{n} lesson01 submissions in {args.rounds} alternating rounds, on {os.cpu_count()} cores "
          f"(1-minute load average: {load_before:.1f} before, {os.getloadavg()[0]:.1f} after)")
    print(f"reference (once per run):          {t_reference:6.2f} s")
    print(f"LocalCluster(2) start: TLS {t_start:6.2f} s (certificates included), plain TCP {t_start_plain:6.2f} s")
    print(f"first 2 submissions: local pool {t_warm_local:5.2f} s, cluster {t_warm_cluster:5.2f} s "
          f"(each worker imports torch)")
    print(f"local pool, 2 jobs:                {t_local:6.1f} s  ({t_local / n:.3f} s per submission)")
    print(f"LocalCluster, 2 workers, TLS:      {t_cluster:6.1f} s  ({t_cluster / n:.3f} s per submission)")
    print(f"LocalCluster, 2 workers, plain TCP:{t_plain:6.1f} s  ({t_plain / n:.3f} s per submission)")
    print(f"the cost of TLS per submission:    {t_cluster / t_plain:.3f}x plain TCP "
          f"({(t_cluster - t_plain) / n * 1000:+.1f} ms)")
    print(f"overhead per submission:           {(t_cluster - t_local) / n * 1000:+6.1f} ms  "
          f"({(t_cluster / t_local - 1) * 100:+.1f} %, goal <= 5 %)")
    print(f"same results both ways:            {same}")
    print(f"scheduler, no-op tasks (TLS):      {rate:6.0f} tasks/s ({args.noops} tasks)")
    print(f"cost per submission on one worker: {cost:.2f} s")
    total = 20000
    floor = total / rate  # the scheduler cannot dispatch faster than its no-op rate
    for w in (8, 64, 512):
        grading = total * cost / w
        need = w / cost  # tasks per second the workers finish
        print(f"20,000 submissions on {w:3d} workers: {max(grading, floor) / 60:7.1f} min (+ start-up; grading "
              f"{grading / 60:.1f} min, the scheduler's floor {floor / 60:.1f} min); needs {need:6.1f} tasks/s = "
              f"{need / rate * 100:5.1f} % of the scheduler's no-op rate")


if __name__ == "__main__":
    main()
