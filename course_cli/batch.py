"""Batch grading: a folder of submissions, graded in parallel with the course's sandbox.

Layouts: nbgrader's `submitted/<student>/<lesson>/<notebook>.ipynb` (give the course folder or its
`submitted/`), or a flat folder of notebooks (the student is the file name). Each submission is one
`grade_notebook` call: its own child, its own limits, so one that hangs, crashes or exhausts memory is
recorded as such while the others go on. The work is waiting on children, so threads suffice here.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from graders.registry import Lesson
from graders.results import LessonResult

CSV_FIELDS = ["student", "lesson", "exercise", "status", "points", "max_points", "diagnosis", "reason", "notebook"]


def find_submissions(root: Path, lesson: Lesson) -> list[tuple[str, Path]]:
    """(student, notebook) pairs under `root`, sorted by student."""
    root = Path(root)
    if (root / "submitted").is_dir():
        root = root / "submitted"
    found = {}
    for p in sorted(root.glob(f"*/{lesson.id}/{lesson.notebook}")):
        found[p.parent.parent.name] = p
    if not found:
        for p in sorted(root.glob("*.ipynb")):
            found[p.stem] = p
    return sorted(found.items())


def grade_submission(lesson: Lesson, student: str, path: Path, **kwargs) -> LessonResult:
    """Grade one submission; never raises: whatever goes wrong is that student's error row."""
    from .grading import _error_result, grade_notebook

    try:
        return grade_notebook(lesson, path, trusted=True, **kwargs)
    except Exception as exc:  # one submission's failure is never the batch's end
        return _error_result(lesson, str(path), f"the grader could not grade this submission "
                                                f"({type(exc).__name__}: {str(exc)[:300]})")


def grade_all(lesson: Lesson, submissions: list[tuple[str, Path]], jobs: int = 2, on_done=None) -> dict[str, LessonResult]:
    """Grade every submission, `jobs` at a time; `on_done(student, result)` after each one."""
    from .grading import Reference

    # A fresh reference, kept in memory, computed once for the whole class (see grading.Reference).
    Reference.finish(lesson, *Reference.start(lesson, "cpu", trusted=True), "cpu")
    results: dict[str, LessonResult] = {}
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        futures = {pool.submit(grade_submission, lesson, student, path): student for student, path in submissions}
        try:
            for future in as_completed(futures):
                student = futures[future]
                results[student] = future.result()
                if on_done:
                    on_done(student, results[student])
        except BaseException:  # Ctrl-C, or on_done failed: start no more (those running finish)
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return dict(sorted(results.items()))


def grade_class(lesson: Lesson, submissions: list[tuple[str, Path]], jobs: int = 2, on_done=None,
                scheduler: str | None = None, workers: int | None = None, journal: Path | None = None,
                resume: bool = False, on_resumed=None, regrade=()) -> dict[str, LessonResult]:
    """Grade a class on the local pool (`jobs` at a time), or on Dask when `scheduler` is given ("local" or
    a scheduler's address; see cluster.py). With a `journal` path each result is journalled as it arrives;
    with resume=True the journal's results for unchanged submissions are kept (`on_resumed(n)` is told how
    many; the students in `regrade` are graded anyway) and only the others are graded. Either way the
    result is the same as one uninterrupted run's."""
    from .grading import reference_key
    from .journal import Journal, file_digest

    digests = {student: file_digest(path) for student, path in submissions}
    paths = {student: str(path) for student, path in submissions}
    log = Journal.open(journal, lesson.id, reference_key(lesson, "cpu"), resume) if journal else None
    results: dict[str, LessonResult] = {}
    try:
        if log is not None:
            for student, _ in submissions:
                kept = None if student in regrade else log.finished(student, digests[student])
                if kept is not None:
                    results[student] = kept
            if on_resumed:
                on_resumed(len(results))

        def done(student: str, result: LessonResult) -> None:
            if log is not None:
                log.record(student, paths[student], digests[student], result)
            if on_done:
                on_done(student, result)

        todo = [(student, path) for student, path in submissions if student not in results]
        if todo and scheduler:
            from .cluster import grade_on_cluster

            results.update(grade_on_cluster(lesson, todo, scheduler, done, workers or jobs, digests))
        elif todo:
            results.update(grade_all(lesson, todo, jobs, done))
    finally:
        if log is not None:
            log.close()
    return dict(sorted(results.items()))


def summary(results: dict[str, LessonResult]) -> dict:
    """Per-exercise pass rates and the most frequent diagnoses across the class."""
    n = len(results)
    rates, diagnoses = {}, Counter()
    for res in results.values():
        for ex in res.exercises:
            rates.setdefault(ex.id, Counter())[ex.status] += 1
            if ex.diagnosis:
                diagnoses[(ex.id, ex.diagnosis)] += 1
    return {
        "students": n,
        "mean_score": round(sum(r.score for r in results.values()) / n, 3) if n else 0.0,
        "exercises": [{"exercise": ex, "passed": c["passed"], "pass_rate": round(c["passed"] / n, 3) if n else 0.0,
                       "statuses": dict(c)} for ex, c in rates.items()],
        "diagnoses": [{"exercise": ex, "diagnosis": d, "students": k} for (ex, d), k in diagnoses.most_common(10)],
    }


def csv_safe(value):
    """A CSV cell a spreadsheet will not run as a formula (`=`, `+`, `-`, `@`, tab or CR first): quoted
    with a leading apostrophe, as OWASP advises. Numbers stay numbers."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def rows(results: dict[str, LessonResult]) -> list[dict]:
    return [{"student": student, "lesson": res.lesson, "exercise": ex.id, "status": ex.status, "points": ex.points,
             "max_points": ex.max_points, "diagnosis": ex.diagnosis or "", "reason": ex.reason, "notebook": res.notebook}
            for student, res in results.items() for ex in res.exercises]


def any_errors(results: dict[str, LessonResult]) -> bool:
    """Did the grader fail on any submission (as opposed to the student's code failing)?"""
    return any(ex.checks and ex.checks[0].name == "notebook" and ex.status == "error"
               for res in results.values() for ex in res.exercises)


def write(results: dict[str, LessonResult], out: Path, update: bool = False) -> None:
    """Write results as CSV or JSON (by suffix). With update=True, students already in `out` and not
    in `results` are kept (re-grading one student)."""
    out = Path(out)
    if out.suffix == ".csv":
        new = rows(results)
        if update and out.exists():
            kept = [r for r in csv.DictReader(io.StringIO(out.read_text())) if r["student"] not in results]
            new = kept + new
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows({k: csv_safe(v) for k, v in r.items()} for r in sorted(new, key=lambda r: r["student"]))
        out.write_text(buf.getvalue())
        return
    students = {s: r.to_dict() for s, r in results.items()}
    if update and out.exists():
        old = json.loads(out.read_text()).get("students", {})
        students = {**old, **students}
    data = {"lesson": next(iter(results.values())).lesson if results else None,
            "students": dict(sorted(students.items()))}
    out.write_text(json.dumps(data, indent=1))
