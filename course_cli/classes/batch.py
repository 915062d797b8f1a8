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
from pathlib import Path

from graders.engine.notebook import pick_notebook
from graders.registry import Lesson
from graders.engine.results import LessonResult

CSV_FIELDS = ["student", "lesson", "exercise", "status", "points", "max_points", "diagnosis", "reason", "notebook"]


def find_submissions(root: Path, lesson: Lesson) -> list[tuple[str, Path]]:
    """(student, notebook) pairs under `root`, sorted by student."""
    return find_class(root, lesson)[0]


def find_class(root: Path, lesson: Lesson) -> tuple[list[tuple[str, Path]], dict[str, str], dict[str, str]]:
    """(submissions, renamed, missing) under `root`: the (student, notebook) pairs to grade, sorted by student;
    for students whose notebook was found under another name, what was graded and why; and the students of an
    nbgrader layout with a folder but no gradable notebook, with the reason. Nobody is silently dropped."""
    root = Path(root)
    if (root / "submitted").is_dir():
        root = root / "submitted"
    found, renamed, missing = {}, {}, {}
    for folder in sorted(p for p in root.glob(f"*/{lesson.id}") if p.is_dir()):
        student = folder.parent.name
        nbs = sorted(p for p in folder.glob("*.ipynb") if p.is_symlink() or not p.is_dir())  # a link: refused, said
        pick, note = pick_notebook([p.name for p in nbs], lesson.notebook)  # the policy of every seat
        if pick is not None:
            found[student] = folder / pick
            if note:
                renamed[student] = note
        elif nbs:
            missing[student] = (f"no {lesson.notebook} in {folder}, and {len(nbs)} other notebooks "
                                f"({', '.join(p.name for p in nbs[:5])}): rename the one to grade")
        else:
            missing[student] = f"no notebook in {folder}"
    if not found and not missing:
        for p in sorted(root.glob("*.ipynb")):
            found[p.stem] = p
    return sorted(found.items()), renamed, missing


def read_roster(path: Path) -> list[str]:
    """The student ids of a roster: one a line, or a CSV's first column; blank lines, `#` comments and a
    header (`student`, `student_id`, `id`) skipped."""
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        sid = next(csv.reader([line]), [""])[0].strip() if line.strip() else ""
        if sid and not sid.startswith("#") and sid.lower() not in ("student", "student_id", "id", "username"):
            out.append(sid)
    return list(dict.fromkeys(out))


def grade_all(lesson: Lesson, submissions: list[tuple[str, Path]], jobs: int = 2, on_done=None,
              root: Path | None = None) -> dict[str, LessonResult]:
    """Grade every submission on a local pool, `jobs` at a time; `on_done(student, result)` after each one. A
    submission still grading past `dispatch.deadline()` is an error row saying so, and the batch goes on."""
    from course_cli.classes.dispatch import DaemonThreads, deadline, dispatch, grade_submission
    from course_cli.sandboxed.grading import Reference

    # A fresh reference, kept in memory, computed once for the whole class (see grading.Reference).
    Reference.finish(lesson, *Reference.start(lesson, "cpu", trusted=True), "cpu")
    results: dict[str, LessonResult] = {}

    def on_result(item, future) -> bool:
        student = item[0]
        results[student] = future.result()
        if on_done:
            on_done(student, results[student])
        return True

    seconds = deadline()

    def on_overdue(item) -> None:
        from graders.engine.verdict import error_result  # lazy: verdict imports torch (4.9 s cold here)

        student, path = item
        results[student] = error_result(lesson, str(path), f"the grader could not grade this submission within "
                                                           f"{seconds:g} s (the notebook's time limit and "
                                                           f"{STEP_SECONDS:g} s of the grader's own steps); left "
                                                           f"behind so the others are graded")
        if on_done:
            on_done(student, results[student])

    from course_cli.classes.dispatch import STEP_SECONDS

    # one daemon thread per submission in flight: one past its deadline is left behind, never waited for
    try:
        dispatch(DaemonThreads(), submissions, lambda ex, item: ex.submit(grade_submission, lesson, *item, root=root),
                 on_result, window=max(1, jobs), seconds=seconds, on_overdue=on_overdue)
    finally:
        from course_cli.sandboxed import class_forks

        class_forks.stop_all()  # the batch's lanes are done: their zygotes too (one left behind is killed)
    return dict(sorted(results.items()))


def grade_class(lesson: Lesson, submissions: list[tuple[str, Path]], jobs: int = 2, on_done=None,
                scheduler: str | None = None, workers: int | None = None, journal: Path | None = None,
                resume: bool = False, on_resumed=None, regrade=(), seed: int | None = None,
                root: Path | None = None, access=None) -> dict[str, LessonResult]:
    """Grade a class on the local pool (`jobs` at a time), or on Dask when `scheduler` is given ("local" or
    a scheduler's address; see cluster.py). With a `journal` path each result is journalled as it arrives;
    with resume=True the journal's results for unchanged submissions are kept (`on_resumed(n)` is told how
    many; the students in `regrade` are graded anyway) and only the others are graded. Either way the
    result is the same as one uninterrupted run's. Each submission is read first as every seat reads one
    (notebook.submission_bytes, inside `root`): one that is refused (a link, a FIFO, over a bound) is NOT
    GRADED with why, and never reaches a worker. `access`: how the cluster is reached (cluster.Access: its
    certificates, or --insecure-cluster, then recorded in the journal's header)."""
    import hashlib

    from course_cli.sandboxed.grading import reference_key
    from course_cli.sandboxed.notebook import NotebookError, SubmissionRefused, submission_bytes
    from course_cli.classes.journal import Journal

    digests, refused = {}, {}
    for student, path in submissions:
        try:
            digests[student] = hashlib.sha256(submission_bytes(path, root)).hexdigest()
        except SubmissionRefused as exc:
            digests[student], refused[student] = None, str(exc)
        except (OSError, NotebookError):
            digests[student] = None  # graded, as the NOT GRADED row grading gives it
    paths = {student: str(path) for student, path in submissions}
    insecure_cluster = bool(scheduler and access is not None and access.insecure)
    log = (Journal.open(journal, lesson.id, reference_key(lesson, "cpu"), resume, seed, insecure_cluster)
           if journal else None)
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

        for student, reason in refused.items():
            if student not in results:
                from graders.engine.verdict import missing_result  # lazy: verdict imports torch (4.9 s cold here)

                results[student] = missing_result(lesson, reason)
                done(student, results[student])
        todo = [(student, path) for student, path in submissions if student not in results]
        if todo and scheduler:
            from course_cli.classes.cluster import grade_on_cluster

            results.update(grade_on_cluster(lesson, todo, scheduler, done, workers or jobs, digests,
                                            access=access))
        elif todo:
            results.update(grade_all(lesson, todo, jobs, done, root))
    finally:
        if log is not None:
            log.close()
    return dict(sorted(results.items()))


def summary(results: dict[str, LessonResult]) -> dict:
    """The class at a glance, as data: per-exercise pass rates and statuses, every diagnosis with its count and
    the students it applies to, and the submissions that errored or timed out (the grader's own failures,
    `kind: "grader"`, apart from the students' code's, `kind: "code"`). Written into `course grade`'s JSON."""
    not_graded = [{"student": s, "reason": r.not_graded} for s, r in sorted(results.items()) if r.not_graded]
    everyone = results
    results = {s: r for s, r in results.items() if not r.not_graded}  # counted apart, never as a 0
    n = len(results)
    rates: dict[str, Counter] = {}
    max_points: dict[str, float] = {}
    diagnosed: dict[tuple[str, str], list[str]] = {}
    by_id: dict[tuple[str, str], dict] = {}
    errors, timeouts = [], []
    for student, res in sorted(results.items()):
        for ex in res.exercises:
            rates.setdefault(ex.id, Counter())[ex.status] += 1
            max_points[ex.id] = ex.max_points
            if ex.diagnosis:
                diagnosed.setdefault((ex.id, ex.diagnosis), []).append(student)
                key = (ex.id, ex.diagnosis_id or "other")
                by_id.setdefault(key, {"example": ex.diagnosis, "who": []})["who"].append(student)
            if ex.status in ("error", "timeout"):
                grader = bool(ex.checks) and ex.checks[0].kind == "grader"
                (errors if ex.status == "error" else timeouts).append(
                    {"student": student, "exercise": ex.id, "kind": "grader" if grader else "code",
                     "reason": ex.reason})
    ranked = sorted(diagnosed.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    return {
        "students": n,
        "mean_score": round(sum(r.score for r in results.values()) / n, 3) if n else 0.0,
        "max_score": max((r.max_score for r in everyone.values()), default=0.0),
        "exercises": [{"exercise": ex, "passed": c["passed"], "pass_rate": round(c["passed"] / n, 3) if n else 0.0,
                       "statuses": dict(c), "max_points": max_points[ex]} for ex, c in rates.items()],
        # `students` is the count (as before); `who` names them
        "diagnoses": [{"exercise": ex, "diagnosis": d, "students": len(who), "who": sorted(who)}
                      for (ex, d), who in ranked],
        "errors": errors,
        "timeouts": timeouts,
        # NOT GRADED (a notebook that is not JSON or cannot be read; a roster's student who submitted nothing):
        # not in `students`, the mean or the pass rates
        "not_graded": not_graded,
        # the same diagnoses counted by their stable id (graders/engine/kinds.py), whatever numbers their
        # sentences carry: what the class made, with one student's sentence as the example
        "misconceptions": [{"exercise": ex, "id": ident, "students": len(d["who"]), "who": sorted(d["who"]),
                            "example": d["example"]}
                           for (ex, ident), d in sorted(by_id.items(), key=lambda kv: (-len(kv[1]["who"]), kv[0]))],
    }


def csv_safe(value):
    """A CSV cell a spreadsheet will not run as a formula (`=`, `+`, `-`, `@`, tab or CR first): quoted
    with a leading apostrophe, as OWASP advises. Numbers stay numbers."""
    from course_cli.safe_text import for_csv

    return for_csv(value) if isinstance(value, str) else value


TOTAL = "TOTAL"  # the exercise column of each student's total row in the CSV
NOT_GRADED = "NOT GRADED"  # the status of a submission that was not graded (the same words as nbgrader's export)


def rows(results: dict[str, LessonResult]) -> list[dict]:
    """One row per student and exercise, then the student's TOTAL row (points summed; status `passed` when every
    exercise passed, else `incomplete`; reason: how many passed)."""
    out = []
    for student, res in results.items():
        if res.not_graded:  # one row, no score: never a 0 that looks like a graded submission
            out.append({"student": student, "lesson": res.lesson, "exercise": TOTAL, "status": NOT_GRADED,
                        "points": "", "max_points": res.max_score, "diagnosis": "", "reason": res.not_graded,
                        "notebook": res.notebook})
            continue
        out += [{"student": student, "lesson": res.lesson, "exercise": ex.id, "status": ex.status,
                 "points": ex.points, "max_points": ex.max_points, "diagnosis": ex.diagnosis or "",
                 "reason": ex.reason, "notebook": res.notebook} for ex in res.exercises]
        passed = sum(ex.status == "passed" for ex in res.exercises)
        out.append({"student": student, "lesson": res.lesson, "exercise": TOTAL,
                    "status": "passed" if res.all_passed else "incomplete", "points": res.score,
                    "max_points": res.max_score, "diagnosis": "",
                    "reason": "; ".join([f"{passed} of {len(res.exercises)} exercises passed"] + [res.note] * bool(res.note)),
                    "notebook": res.notebook})
    return out


def any_errors(results: dict[str, LessonResult]) -> bool:
    """Did the grader fail on any submission (as opposed to the student's code failing)?"""
    return any(ex.checks and ex.checks[0].kind == "grader" and ex.status == "error"
               for res in results.values() for ex in res.exercises)


def write(results: dict[str, LessonResult], out: Path, update: bool = False, insecure: bool = False,
          seed: int | None = None, insecure_cluster: bool = False) -> None:
    """Write results as CSV or JSON (by suffix). With update=True, students already in `out` and not
    in `results` are kept (re-grading one student). Written through course_cli/atomic.py: a link at `out` is
    replaced, never written through (nor read, with update=True), and the file replaced is kept as `<out>.bak`."""
    from course_cli.atomic import read_bytes, write_text

    out = Path(out)
    if out.suffix == ".csv":
        new = rows(results)
        if update and out.exists():
            kept = [r for r in csv.DictReader(io.StringIO(read_bytes(out).decode("utf-8")))
                    if r["student"] not in results]
            new = kept + new
        buf = io.StringIO()
        writer = csv.DictWriter(buf, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows({k: csv_safe(v) for k, v in r.items()} for r in sorted(new, key=lambda r: r["student"]))
        write_text(out, buf.getvalue(), backup=True)
        return
    students = {s: r.to_dict() for s, r in results.items()}
    if update and out.exists():
        old = json.loads(read_bytes(out)).get("students", {})
        students = {**old, **students}
    students = dict(sorted(students.items()))
    data = {"lesson": next(iter(results.values())).lesson if results else None,
            "students": students,
            "summary": summary({s: result_from_dict(d) for s, d in students.items()})}
    if seed is not None:
        data["hidden_seed"] = seed  # the hidden checks' inputs of this run: `course grade --seed` repeats it
    if insecure:
        data["insecure"] = True  # graded without the sandbox (--insecure)
    if insecure_cluster:
        data["insecure_cluster"] = True  # graded on a plain-TCP Dask cluster (--insecure-cluster)
    from course_cli.safe_text import json_clean

    write_text(out, json.dumps(json_clean(data, None), indent=1), backup=True)


def result_from_dict(d: dict) -> LessonResult:
    """A LessonResult back from its JSON (`LessonResult.to_dict`); notes are not stored there."""
    from course_cli.classes.journal import result_from_dict as from_dict

    res = from_dict({"notes": [], **d, "exercises": [{"checks": [], **e} for e in d.get("exercises", [])]})
    for ex in res.exercises:  # results files written before ids were stored: the id back from the sentence
        if ex.diagnosis and not ex.diagnosis_id:
            ex.diagnosis_id = _diagnosis_id(d["lesson"], ex.id, ex.diagnosis)
    return res


def _diagnosis_id(lesson: str, exercise: str, text: str | None) -> str | None:
    """The stable id of a diagnosis read from a results file written before ids were stored (graders/engine/kinds.py;
    the lesson's catalogue of mistakes is read without torch when it can be, else only structural kinds)."""
    if not text:
        return None
    from graders.engine.kinds import diagnosis_id

    return diagnosis_id(text, _catalogue(lesson), exercise)


_CATALOGUES: dict[str, tuple] = {}


def _catalogue(lesson: str) -> tuple:
    if lesson not in _CATALOGUES:
        try:
            import importlib

            from graders.registry import find_lesson

            _CATALOGUES[lesson] = tuple(getattr(importlib.import_module(find_lesson(lesson).module), "MISTAKES", ()))
        except Exception:  # an unknown lesson, or a grader module that cannot be imported here
            _CATALOGUES[lesson] = ()
    return _CATALOGUES[lesson]


def load(path: Path) -> tuple[str | None, dict[str, LessonResult]]:
    """`course grade`'s JSON back: (lesson, {student: LessonResult}). ValueError when it is not one."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        students = data["students"]
        if not isinstance(students, dict):
            raise TypeError("students is not an object")
        return data.get("lesson"), {s: result_from_dict(d) for s, d in students.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path} is not the JSON `course grade --out results.json` writes "
                         f"({type(exc).__name__}: {exc})") from None
