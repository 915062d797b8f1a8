"""Every lesson's reference observations built once per course version (`course init`), so that the first
check of a lesson does not wait for its reference child.

They go to the same disk cache as a check's (grading.Reference, keyed by the lesson's source, its grader, the
engine, torch's version and the device): a lesson whose key has not changed is not built again. Each is built
by the same reference child as on a first check (the solved notebook and the mistakes, in the sandbox).
COURSE_INIT_REFERENCES=0 (or `course init --no-references`) leaves them to the first check of each lesson.
"""

from __future__ import annotations

import os
from typing import Callable

from graders.registry import LESSONS, Lesson

from course_cli import settings


def missing(device: str = "cpu") -> list[Lesson]:
    """The lessons whose reference for this course version is not in the cache yet (none in the student
    distribution: its public references ship as data)."""
    from course_cli.sandboxed.grading import reference_key

    cache = settings.cache_dir()
    return [l for l in LESSONS if l.solution_path.exists()
            and not (cache / f"{l.id}-{device}-{reference_key(l, device)}.pt").exists()]


def wanted() -> bool:
    return settings.init_references()


def build(lessons: list[Lesson], on_done: Callable[[Lesson, str | None], None] = lambda l, e: None,
          jobs: int | None = None) -> dict[str, str]:
    """Build the references of `lessons`, `jobs` reference children at a time (both cores by default);
    `on_done(lesson, error or None)` after each. Returns {lesson id: error} for those that failed."""
    from course_cli.sandboxed.grading import Reference

    jobs = max(1, jobs or min(2, os.cpu_count() or 1))
    failed: dict[str, str] = {}
    todo = list(lessons)
    running: list[tuple[Lesson, object, object]] = []
    while todo or running:
        while todo and len(running) < jobs:
            lesson = todo.pop(0)
            try:
                path, child = Reference.start(lesson, "cpu")
                running.append((lesson, path, child))
            except Exception as exc:  # noqa: BLE001 - reported, the others go on
                failed[lesson.id] = str(exc)
                on_done(lesson, str(exc))
        if not running:
            continue
        lesson, path, child = running.pop(0)
        try:
            Reference.finish(lesson, path, child, "cpu")
            on_done(lesson, None)
        except Exception as exc:  # noqa: BLE001
            failed[lesson.id] = str(exc)
            on_done(lesson, str(exc))
    return failed
