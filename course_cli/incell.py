"""Grading from inside a running notebook: the check cells call `grade(lesson, exercise)`; `check("softmax")`
works in any cell.

The kernel's own cell history (what the student ran, in the order they ran it) is handed to the same
sandboxed child and parent-side judge as `course check`; nothing is judged inside the kernel. The report is
HTML that wraps to the output area, with the failing matrix drawn when there is one.

A failing check does not raise in a student's kernel, so Run All goes on to the end of the notebook (the
plots after a check are often what shows the mistake). Scoring does not depend on it: under `nbgrader
autograde` this function grades nothing, and the course's autograder step (course_cli/instructor/nbgrader_course.py,
ApplyCourseVerdict) replaces each check cell's outputs with the verdict computed outside the kernel, with an
error output when the exercise did not pass, so nbgrader gives that cell 0 points. Set COURSE_CHECK_RAISE=1
to make a failing check raise (a short error, never the course's own traceback).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from course_cli import settings

_GRADING_CELL = re.compile(r"\bgrade\(\s*['\"]lesson|\bcheck\(\s*['\"]")


class CheckFailed(AssertionError):
    """A check that did not pass, or could not run: shown as one line, without the course's frames."""

    def _render_traceback_(self):  # IPython shows these lines instead of a traceback
        return [f"\x1b[31m{type(self).__name__}\x1b[0m: {self}"]


class CheckError(ValueError):
    """A check cell asked for something that does not exist (a misspelt exercise): one line, no traceback."""

    def _render_traceback_(self):
        return [f"\x1b[31m{type(self).__name__}\x1b[0m: {self}"]


def kernel_cells() -> list[dict]:
    """The cells this kernel executed, oldest first, without the grading cells themselves."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython is a dependency of ipykernel
        get_ipython = lambda: None  # noqa: E731
    ip = get_ipython()
    if ip is None:
        raise CheckError("grade() runs inside a Jupyter notebook; from a terminal use `course check LESSON`")
    ip.user_ns.setdefault("check", check)  # after the first check cell, `check("softmax")` works in any cell
    history = list(ip.history_manager.input_hist_raw)
    return [{"index": i, "source": src} for i, src in enumerate(history)
            if src.strip() and not _GRADING_CELL.search(src)]


DEMO_GUARD = "from course_cli.incell import demo\nwith demo("  # how `course build` wraps a demo cell (build.guard_demo)


def demo_sources(lesson) -> set[str]:
    """The sources of the lesson's demo cells (metadata course.role = demo), stripped: those of the notebook this
    kernel runs when JupyterLab names it (`__session__`, or JPY_SESSION_NAME: its path), and the course's own
    student and solved notebooks. The grader never runs a demo (`graded_cells` leaves them out of a notebook
    file); a check cell must not either: run from the kernel's history, a lesson's plots and timings would run
    again in every check (lesson 10's, 23 s) and could change what the exercises see."""
    import json

    from graders.engine.notebook import is_demo

    paths = [lesson.student_path, lesson.solution_path]
    try:
        from IPython import get_ipython

        ip = get_ipython()
        session = (ip.user_ns.get("__session__") if ip is not None else None) or os.environ.get("JPY_SESSION_NAME")
    except ImportError:  # pragma: no cover
        session = os.environ.get("JPY_SESSION_NAME")
    if isinstance(session, str) and session.endswith(".ipynb"):
        paths.insert(0, Path(session))
    found: set[str] = set()
    for path in paths:
        try:
            cells = json.loads(Path(path).read_text(encoding="utf-8")).get("cells", [])
            found |= {"".join(c.get("source", "")).strip() for c in cells if isinstance(c, dict) and is_demo(c)}
        except (OSError, ValueError, AttributeError, TypeError):
            continue
    return found - {""}


def graded_kernel_cells(lesson) -> list[dict]:
    """kernel_cells() without the lesson's demo cells (demo_sources) and cells `course build` guarded as demos:
    the cells `course check` would run from the notebook file."""
    demos = demo_sources(lesson)
    return [c for c in kernel_cells() if c["source"].strip() not in demos and not c["source"].startswith(DEMO_GUARD)]


def check(exercise: str, lesson: str | None = None):
    """`check("softmax")`: grade one exercise from a notebook cell, every check included (as `course check`)."""
    __tracebackhide__ = True
    from graders.registry import LESSONS, UnknownLesson, find_lesson

    if lesson is None:
        owners = [l.id for l in LESSONS if any(e.name == exercise for e in l.exercises)]
        if len(owners) != 1:
            if owners:
                raise CheckError(f"more than one lesson has an exercise {exercise!r} ({', '.join(owners)}); "
                                 f"say which: check({exercise!r}, {owners[0]!r})")
            from difflib import get_close_matches

            names = [e.name for l in LESSONS for e in l.exercises]
            near = get_close_matches(exercise, names, n=1)
            raise CheckError(f"no lesson has an exercise {exercise!r}" + (f"; did you mean {near[0]!r}?" if near else ""))
        lesson = owners[0]
    else:
        try:
            lesson = find_lesson(lesson).id
        except UnknownLesson as exc:
            raise CheckError(str(exc)) from None
    return grade(lesson, exercise, hidden=True)


def grade(lesson: str, exercise: str, hidden: bool | None = None):
    """Check one exercise of `lesson` against the reference and show the report inline.

    Every check, as `course check` runs them, in the repository (self-study); in the student distribution, which
    ships the public checks' references only, the public ones, and the report says that the instructor's run
    draws more. `hidden=False` asks for the public checks only."""
    __tracebackhide__ = True  # IPython: show the student's cell, not our frames
    from graders.registry import UnknownLesson, find_lesson

    if settings.nbgrader_kernel():
        # Inside `nbgrader autograde` the verdict is computed outside this kernel (course_cli/instructor/nbgrader_course.py)
        # and replaces this cell's outputs; grading here as well would only cost time.
        print(f"{exercise}: graded by the course's autograder step, outside this kernel")
        return None

    from course_cli.sandboxed.warm import grade_cells, stay_with  # warm when it can be, else cold (the same verdict)
    from course_cli.render import blocked_by, exercise_html, exercise_plain

    try:
        lesson_obj = find_lesson(lesson)
        ex_obj = lesson_obj.exercise(exercise)
    except (UnknownLesson, LookupError) as exc:
        raise CheckError(str(exc).strip("'\"")) from None
    names = [exercise] + [d for d in ex_obj.depends if d != exercise]  # its dependencies: to point back at them
    if hidden is None:
        from graders.registry import STUDENT_DISTRIBUTION

        hidden = not STUDENT_DISTRIBUTION
    stay_with(os.getpid())  # the warm grader ends with this kernel (or when idle)
    from course_cli.student.workspace import find_workspace

    result = grade_cells(lesson_obj, graded_kernel_cells(lesson_obj), "(this notebook's kernel)", names,
                         only_public=not hidden, workspace=find_workspace())
    ex = next(e for e in result.exercises if e.id == exercise)
    blockers = blocked_by(lesson_obj.id, result).get(exercise)
    html_text, plain = exercise_html(ex, lesson_obj.id, blockers), exercise_plain(ex, lesson_obj.id, blockers)
    if result.public_only:
        from html import escape

        from graders.engine.results import PUBLIC_ONLY_NOTE

        note = PUBLIC_ONLY_NOTE[0].upper() + PUBLIC_ONLY_NOTE[1:] + "."
        html_text, plain = html_text + f'<div class="dim">{escape(note)}</div>', plain + "\n  " + note
    _display(html_text, plain)
    single = type(result)(result.lesson, result.notebook, [ex], result.notes, public_only=result.public_only)
    _record(single)
    if ex.status != "passed" and settings.check_raise():
        raise CheckFailed(f"{exercise}: {ex.status.replace('_', ' ')} — {ex.reason}")
    return None


def _display(html: str, text: str) -> None:
    try:
        from IPython.display import display

        display({"text/html": html, "text/plain": text}, raw=True)
    except ImportError:  # pragma: no cover
        print(text)


def _record(result) -> None:
    from course_cli.student.checking import record

    record(result, None, "notebook")  # never raises: progress is a convenience, never a failed check


class demo:
    """`with demo():` around a demo cell's code (the student notebooks have it, from `course build`): while an
    exercise the demo uses still raises NotImplementedError, one line says so instead of a traceback, so
    Run All goes on to the end of the notebook."""

    def __enter__(self):
        return self.show

    @staticmethod
    def show(value):
        """Display the cell's last value, as Jupyter does for a cell's last expression (None shows nothing)."""
        if value is not None:
            try:
                from IPython.display import display
            except ImportError:  # pragma: no cover
                print(repr(value))
            else:
                display(value)
        return None

    def __exit__(self, etype, value, tb):
        if etype is not None and issubclass(etype, NotImplementedError):
            where = ""
            frames = __import__("traceback").extract_tb(tb)
            if frames:
                where = f" (it stopped in {frames[-1].name})" if frames[-1].name != "<module>" else ""
            print(f"This demo uses an exercise above that is not written yet{where}: fill it in, then run this "
                  f"cell again.")
            return True
        return False
