"""One windowed dispatch loop for class grading, over any `concurrent.futures.Executor`: a local thread pool
here, Dask's `Client.get_executor()` on a cluster (it returns standard futures). The loop and the task it
runs are the same on both; only the executor and what a lost task means differ.

    submissions ── window of at most `window` in flight ── executor.submit(task) ── on_result(item, future)
                   (bounded memory for 2,000 students)                              True: done · False: again
                                                              past its deadline ── on_overdue(item)

On the local pool each submission has a deadline (`deadline()`): the sandboxed child's own whole-notebook
limit plus STEP_SECONDS for the grader's own steps around it (reading, starting the child, judging). A
submission still running then is recorded as such and left behind (its thread is a daemon, never waited for),
so no one submission decides whether the others are graded or whether the batch ends.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import FIRST_COMPLETED, Executor, Future, wait
from pathlib import Path
from typing import Callable, Iterable, TypeVar

from graders.registry import Lesson
from graders.engine.results import LessonResult

Item = TypeVar("Item")


def grade_submission(lesson: Lesson, student: str, path: Path, root: Path | None = None, **kwargs) -> LessonResult:
    """Grade one submission in a sandbox of its own, forked from its lesson's class zygote where one can run
    (course_cli/sandboxed/class_forks.py), else started fresh: whatever goes wrong is that student's error row,
    except a sandbox that could not start (SandboxUnavailable), which stops the batch: "not graded", never a
    score. The task of every class-grading executor."""
    from course_cli.sandboxed import class_forks
    from course_cli.sandboxed.grading import grade_notebook
    from course_cli.sandboxed.sandbox import SandboxUnavailable

    try:
        return class_forks.graded(lesson, lambda runner: grade_notebook(lesson, path, trusted=True, root=root,
                                                                        runner=runner, **kwargs))
    except SandboxUnavailable:  # the grader's failure, not the student's: nobody gets a 0 from it
        raise
    except Exception as exc:  # one submission's failure is never the batch's end
        from graders.engine.verdict import error_result  # lazy: verdict imports torch (4.9 s cold here)

        return error_result(lesson, str(path), f"the grader could not grade this submission "
                                               f"({type(exc).__name__}: {str(exc)[:300]})")


STEP_SECONDS = 60.0  # the grader's own steps for one submission, besides its sandboxed child's time limit


def deadline() -> float:
    """Seconds one submission may take on the local pool: the run's whole-notebook limit (Limits, the child's
    own) plus STEP_SECONDS."""
    from course_cli.settings import current

    return current().limits.notebook_timeout + STEP_SECONDS


class DaemonThreads(Executor):
    """One daemon thread per task (the dispatch window bounds how many): a task past its deadline is left
    running without holding up the pool or the process's exit."""

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:
                future.set_exception(exc)

        threading.Thread(target=run, daemon=True, name="course-grade").start()
        return future


def dispatch(executor: Executor, items: Iterable[Item], submit: Callable[[Executor, Item], Future],
             on_result: Callable[[Item, Future], bool], window: int, seconds: float | None = None,
             on_overdue: Callable[[Item], None] | None = None) -> None:
    """Submit `items` in order, at most `window` in flight; `on_result(item, future)` runs in this thread as each
    one finishes and says whether the item is done (False: submit it again, e.g. a task lost with its worker).
    With `seconds`, an item not finished that long after its submission is `on_overdue(item)` instead, and its
    future is abandoned (cancelled if it can be). On any exception (Ctrl-C, on_result raising) nothing more is
    submitted and what is in flight is cancelled."""
    todo = list(items)[::-1]
    pending: dict[Future, Item] = {}
    due: dict[Future, float] = {}

    def submit_next() -> None:
        item = todo.pop()
        future = submit(executor, item)
        pending[future] = item
        if seconds is not None:
            due[future] = time.monotonic() + seconds

    try:
        while todo and len(pending) < window:
            submit_next()
        while pending:
            timeout = None if not due else max(0.0, min(due.values()) - time.monotonic())
            done, _ = wait(list(pending), timeout=timeout, return_when=FIRST_COMPLETED)
            if not done and due:
                now = time.monotonic()
                for future in [f for f, t in due.items() if t <= now]:
                    item = pending.pop(future)
                    del due[future]
                    future.cancel()
                    on_overdue(item)
            for future in done:
                item = pending.pop(future)
                due.pop(future, None)
                if not on_result(item, future):
                    todo.append(item)
            while todo and len(pending) < max(1, window):
                submit_next()
    except BaseException:
        for future in pending:
            future.cancel()
        raise
