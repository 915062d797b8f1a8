"""One windowed dispatch loop for class grading, over any `concurrent.futures.Executor`: a local thread pool
here, Dask's `Client.get_executor()` on a cluster (it returns standard futures). The loop and the task it
runs are the same on both; only the executor and what a lost task means differ.

    submissions ── window of at most `window` in flight ── executor.submit(task) ── on_result(item, future)
                   (bounded memory for 2,000 students)                              True: done · False: again
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from pathlib import Path
from typing import Callable, Iterable, TypeVar

from graders.registry import Lesson
from graders.engine.results import LessonResult

Item = TypeVar("Item")


def grade_submission(lesson: Lesson, student: str, path: Path, root: Path | None = None, **kwargs) -> LessonResult:
    """Grade one submission in its own fresh sandbox: whatever goes wrong is that student's error row, except a
    sandbox that could not start (SandboxUnavailable), which stops the batch: "not graded", never a score. The
    task of every class-grading executor."""
    from course_cli.sandboxed.grading import _error_result, grade_notebook
    from course_cli.sandboxed.sandbox import SandboxUnavailable

    try:
        return grade_notebook(lesson, path, trusted=True, root=root, **kwargs)
    except SandboxUnavailable:  # the grader's failure, not the student's: nobody gets a 0 from it
        raise
    except Exception as exc:  # one submission's failure is never the batch's end
        return _error_result(lesson, str(path), f"the grader could not grade this submission "
                                                f"({type(exc).__name__}: {str(exc)[:300]})")


def dispatch(executor: Executor, items: Iterable[Item], submit: Callable[[Executor, Item], Future],
             on_result: Callable[[Item, Future], bool], window: int) -> None:
    """Submit `items` in order, at most `window` in flight; `on_result(item, future)` runs in this thread as each
    one finishes and says whether the item is done (False: submit it again, e.g. a task lost with its worker).
    On any exception (Ctrl-C, on_result raising) nothing more is submitted and what is in flight is cancelled."""
    todo = list(items)[::-1]
    pending: dict[Future, Item] = {}

    def submit_next() -> None:
        item = todo.pop()
        pending[submit(executor, item)] = item

    try:
        while todo and len(pending) < window:
            submit_next()
        while pending:
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for future in done:
                item = pending.pop(future)
                if not on_result(item, future):
                    todo.append(item)
                while todo and len(pending) < max(1, window):
                    submit_next()
    except BaseException:
        for future in pending:
            future.cancel()
        raise
