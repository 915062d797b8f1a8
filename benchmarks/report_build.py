"""`course report`'s build time for a class of 200 and of 2,000 synthetic submissions (tests/classdata.py,
lesson03, `realistic`: cascades and structural diagnoses), measured in one run: reading the results JSON,
the data, the three plots and the page, as `course report` does; best of --repeat.

    python benchmarks/report_build.py [--sizes 200 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from classdata import synthetic_class  # noqa: E402

from course_cli.classes import batch  # noqa: E402
from course_cli.instructor.report import write_report  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[200, 2000])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    write_report  # noqa: B018 - imported above: matplotlib's import is not part of the measurement
    import matplotlib.figure  # noqa: F401

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            results, out = Path(tmp) / f"results{n}.json", Path(tmp) / f"report{n}.html"
            batch.write(synthetic_class(n, realistic=True, not_submitted=max(1, n // 100)), results)
            best = min(_timed(results, out) for _ in range(args.repeat))
            rows.append((n, best, results.stat().st_size, out.stat().st_size))
    print(f"{'submissions':>11} {'build (s)':>10} {'results.json':>13} {'report.html':>12}")
    for n, t, r, p in rows:
        print(f"{n:>11} {t:>10.2f} {r / 1e6:>11.1f} MB {p / 1e6:>10.1f} MB")
    if len(rows) > 1:
        (n0, t0, *_), (n1, t1, *_) = rows[0], rows[-1]
        print(f"{n1 // n0}x the submissions: {t1 / t0:.1f}x the time")


def _timed(results: Path, out: Path) -> float:
    t = time.perf_counter()
    write_report(results, out)
    return time.perf_counter() - t


if __name__ == "__main__":
    main()
