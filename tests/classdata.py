"""A synthetic class, built as results directly (no notebook is graded): the input of the summary and report tests.

Each student gets, per exercise, a status drawn from that exercise's difficulty; failures carry one of the
lesson's real mistake messages as diagnosis (or none), and some messages name the student's own path, as real
tracebacks do, so that anonymisation can be tested. One exercise is made far harder than the others.
"""

from __future__ import annotations

import importlib
import random

from graders.registry import find_lesson
from graders.engine.results import CheckResult, ExerciseResult, LessonResult

FIRST = ["ada", "bao", "chen", "dara", "emeka", "farah", "goran", "hana", "ines", "jonas", "kofi", "lena", "mira",
         "nils", "omar", "priya", "quinn", "rosa", "sami", "tara"]


def student_names(n: int) -> list[str]:
    return [f"{FIRST[i % len(FIRST)]}_{i:02d}" for i in range(n)]


def nan_rows_message(rng: random.Random) -> str:
    """A structural diagnosis as graders/engine/diagnosis.py words it, with this student's own numbers."""
    rows = rng.randint(1, 6)
    return (f"`output` has {rows * 8} NaN values where the reference has numbers, starting at index "
            f"(0, {rng.randint(0, 3)}, {rng.randint(0, 5)}, 0); they fill {rows} whole rows of the last axis: a row "
            f"with nothing to attend to (every score -inf) gives exp(-inf)/0 = NaN in the softmax")


def synthetic_class(n: int = 40, lesson_id: str = "lesson03", hard: str | None = "MultiHeadAttention",
                    seed: int = 0, grader_errors: int = 1, realistic: bool = False,
                    not_submitted: int = 0, p_hard: float = 0.7, p_other: float = 0.15) -> dict[str, LessonResult]:
    """{student: LessonResult} for `n` students of `lesson_id`; `hard` fails with probability `p_hard` (70%),
    the other exercises with `p_other` (15%); the last `grader_errors` students' notebooks could not be read at
    all, the `not_submitted` before them handed in nothing. With `realistic`, as a real class grades: an
    exercise whose dependency (registry `depends`) failed fails too (a cascade, with no diagnosis of its own or
    a structural one), and a failure without a catalogued mistake often carries a structural diagnosis whose
    numbers differ from student to student (`nan_rows_message`). Diagnoses carry their stable id."""
    lesson = find_lesson(lesson_id)
    mistakes = importlib.import_module(lesson.module).MISTAKES
    rng = random.Random(seed)
    names = student_names(n)
    out = {}
    for i, student in enumerate(names):
        notebook = f"/srv/course/submitted/{student}/{lesson.id}/{lesson.notebook}"
        res = LessonResult(lesson.id, notebook)
        if n - grader_errors - not_submitted <= i < n - grader_errors:
            why = f"no notebook in /srv/course/submitted/{student}/{lesson.id}"
            res = LessonResult(lesson.id, "", notes=[why], not_graded=why)  # as verdict.missing_result makes it
            res.exercises = [ExerciseResult(e.name, "error", 0.0, float(e.points),
                                            [CheckResult("submission", "error", message=why, kind="absent")])
                             for e in lesson.exercises]
            out[student] = res
            continue
        if i >= n - grader_errors:
            msg = f"{notebook} is not valid JSON (line 1, column 3): was it saved completely?"
            res.exercises = [ExerciseResult(e.name, "error", 0.0, float(e.points), [CheckResult("notebook", "error", kind="grader",
                                                                                                message=msg)])
                             for e in lesson.exercises]
            out[student] = res
            continue
        for ex in lesson.exercises:
            p_fail = p_hard if ex.name == hard else p_other
            r = rng.random()
            broken_dep = realistic and any(e.id in ex.depends and e.status == "failed" for e in res.exercises)
            if broken_dep:
                msg = nan_rows_message(rng) if rng.random() < 0.5 else None
                checks = [CheckResult("output matches the reference", "failed",
                                      message=f"output differs from the reference at {rng.randint(2, 96)} of 96 "
                                              "positions")]
                res.exercises.append(ExerciseResult(ex.name, "failed", 0.0, float(ex.points), checks, msg,
                                                    "structural:nan-rows" if msg else None))
                continue
            if r >= p_fail:
                checks = [CheckResult("output matches the reference", "passed"),
                          CheckResult("gradients match", "passed"),
                          CheckResult("output matches the reference", "skipped", "cuda", "float16",
                                      "no CUDA device here: GPU check skipped (not passed)")]
                res.exercises.append(ExerciseResult(ex.name, "passed", float(ex.points), float(ex.points), checks))
                continue
            kind = rng.choices(["failed", "not_implemented", "error", "timeout"], [6, 2, 1, 1])[0]
            diagnosis = ident = None
            if kind == "failed":
                own = [m for m in mistakes if m.exercise == ex.name]
                # from a stream of its own: a mistake added to the catalogue changes which one is named, not who
                # passes (the class's pass rates stay those of its seed)
                pick = random.Random(f"{seed}-{i}-{ex.name}").randrange(len(own) + 1)
                diagnosis, ident = (own[pick].message, own[pick].id) if pick < len(own) else (None, None)
                if realistic and diagnosis is None and rng.random() < 0.6:
                    diagnosis, ident = nan_rows_message(rng), "structural:nan-rows"
                msg = (f"output differs from the reference at {rng.randint(2, 96)} of 96 positions: max abs error "
                       f"{rng.uniform(0.01, 2):.4f}; tolerance atol=1e-05, rtol=1e-04 (float32, on cpu)")
                checks = [CheckResult("output matches the reference", "failed", message=msg)]
            elif kind == "not_implemented":
                checks = [CheckResult("defined", "not_implemented", message=f"`{ex.name}` raises NotImplementedError",
                                      kind="absent")]
            elif kind == "error":
                checks = [CheckResult("output matches the reference", "error",
                                      message=f'RuntimeError: shape mismatch\n  File "{notebook}", cell 7, line 3')]
            else:
                checks = [CheckResult("ran", "timeout", message="ran longer than the 30 s time limit", kind="absent")]
            res.exercises.append(ExerciseResult(ex.name, kind, 0.0, float(ex.points), checks, diagnosis, ident))
        out[student] = res
    return out


def synthetic_progress(results: dict[str, LessonResult], seed: int = 1, start: float = 1.7e9) -> dict[str, dict]:
    """{student: progress.json contents} consistent with `results`: a few attempts each, the exercises that
    passed in the results passing at a drawn attempt (course_cli/student/progress.py's format)."""
    rng = random.Random(seed)
    stores = {}
    for student, res in results.items():
        if not res.exercises or res.exercises[0].checks and res.exercises[0].checks[0].name == "notebook":
            continue
        n_attempts = rng.randint(2, 6)
        t = start + rng.uniform(0, 86400)
        passes_at = {ex.id: rng.randint(0, n_attempts - 1) for ex in res.exercises if ex.status == "passed"}
        attempts = []
        for k in range(n_attempts):
            exs = {ex.id: ({"status": "passed", "points": ex.max_points} if passes_at.get(ex.id, n_attempts) <= k
                           else {"status": "failed", "points": 0.0}) for ex in res.exercises}
            attempts.append({"time": t, "source": "cli", "score": sum(e["points"] for e in exs.values()),
                             "max_score": res.max_score, "exercises": exs})
            t += rng.uniform(60, 3600)
        stores[student] = {"version": 1, "lessons": {res.lesson: {"attempts": attempts, "best": {}, "hints": {}}}}
    return stores
