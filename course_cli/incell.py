"""Grading from inside a running notebook: the check cells call `grade(lesson, exercise)`.

The kernel's own cell history (what the student ran, in the order they ran it) is handed to the same
sandboxed child and parent-side judge as `course check`; nothing is judged inside the kernel. A failing
exercise raises AssertionError, so nbgrader's autograder gives the cell 0 points and a passing one full
points: the same all-or-nothing rule as `course check`.
"""

from __future__ import annotations

import re

_GRADING_CELL = re.compile(r"\bgrade\(\s*['\"]lesson|\bcheck\(\s*['\"]")


def kernel_cells() -> list[dict]:
    """The cells this kernel executed, oldest first, without the grading cells themselves."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency of ipykernel
        get_ipython = lambda: None  # noqa: E731
    ip = get_ipython()
    if ip is None:
        raise RuntimeError("grade() runs inside a Jupyter notebook; from a terminal use `course check LESSON`")
    history = list(ip.history_manager.input_hist_raw)
    return [{"index": i, "source": src} for i, src in enumerate(history)
            if src.strip() and not _GRADING_CELL.search(src)]


def check(exercise: str, lesson: str | None = None):
    """`check("softmax")`: grade one exercise from a notebook cell, every check included (as `course check`)."""
    __tracebackhide__ = True
    from graders.registry import LESSONS

    if lesson is None:
        owners = [l.id for l in LESSONS if any(e.name == exercise for e in l.exercises)]
        if len(owners) != 1:
            raise ValueError(f"no single lesson has an exercise {exercise!r}; say which: check({exercise!r}, 'lessonNN')"
                             if owners else f"no lesson has an exercise {exercise!r}")
        lesson = owners[0]
    return grade(lesson, exercise, hidden=True)


def grade(lesson: str, exercise: str, hidden: bool = False):
    """Check one exercise of `lesson` against the reference and show the table inline.

    Public checks only unless `hidden=True` (nbgrader's hidden tests call it that way)."""
    __tracebackhide__ = True  # IPython: show the student's cell, not our frames
    import os

    from graders.registry import find_lesson

    if os.environ.get("COURSE_NBGRADER") == "1":
        # Inside `nbgrader autograde` the verdict is computed outside this kernel (course_cli/nbgrader_course.py)
        # and replaces this cell's outputs; grading here as well would only cost time.
        print(f"{exercise}: graded by the course's autograder step, outside this kernel")
        return None

    from .grading import grade_cells
    from .render import exercise_table, make_console

    lesson_obj = find_lesson(lesson)
    lesson_obj.exercise(exercise)
    result = grade_cells(lesson_obj, kernel_cells(), "(this notebook's kernel)", [exercise], only_public=not hidden)
    console = make_console(jupyter=True)
    ex = result.exercises[0]
    console.print(exercise_table(result, ex))
    _record(result)
    if ex.status != "passed":
        raise AssertionError(f"{exercise}: {ex.status.replace('_', ' ')} — {ex.reason}"
                             + (f"\nLikely mistake: {ex.diagnosis}" if ex.diagnosis else ""))
    return None


def _record(result) -> None:
    try:
        from .progress import ProgressStore
        from .workspace import find_workspace

        ProgressStore(find_workspace()).record(result, source="notebook")
    except Exception:  # progress is a convenience; never let it fail a check
        pass
