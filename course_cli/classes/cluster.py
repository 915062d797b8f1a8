"""`course grade --scheduler`: a class graded on Dask distributed, one task per submission.

    client ── the trusted reference, computed once ── a worker plugin (every worker) ─┐
           └─ per submission: its path, bytes, sha256, the sandbox's limits ── submit ─┴─▶ worker: grade_task
                                                                                          │ grade_submission
           journal ◀── on_done ◀── as_completed ◀── the result as a dict ◀────────────────┘ (sandboxed child)

`--scheduler local` starts a `distributed.LocalCluster` here (worker processes, one thread each); any other
value is the address of a running scheduler (`tcp://host:8786`, see docs/deploying.md). Dask is imported only
inside this module's functions (and by cluster_plugin.py), which run only when `--scheduler` is given.

- The reference observations are computed once, by this process, from the solved notebook (trusted), and
  shipped to the workers in memory by a worker plugin (cluster_plugin.py), which the scheduler also gives to
  workers that join or restart mid-batch; they are not in Dask's data store, so never spilled to disk, and a
  worker never computes a CPU reference. A worker checks that it runs the same graders (the same
  `reference_key`) before it grades.
- The client's sandbox limits (and --insecure) travel with each task, so every worker grades under the same
  limits; a worker that cannot sandbox refuses, and the batch stops with its reason.
- A worker that dies mid-task (killed, lost) is survived: the scheduler reruns the task elsewhere, at most
  MAX_WORKER_DEATHS more times; past that the submission is an error row (it probably kills its worker).
  A submission that kills its own sandbox is already an error row (grade_submission), never retried.
- Without a shared filesystem a worker grades the shipped bytes in a folder of its own; the paths in the
  result are the client's, as in a local run.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import socket
import tempfile
import uuid
from pathlib import Path

from graders.registry import Lesson
from graders.engine.results import LessonResult

from course_cli.sandboxed import sandbox
from course_cli.classes.journal import file_digest, result_from_dict, result_to_dict

MAX_WORKER_DEATHS = 2  # Dask's allowed-failures: a task may lose this many workers, then it is an error row
IN_FLIGHT = 500  # tasks submitted ahead of the results (at least 4 per worker thread): bounded client memory


class ClusterError(RuntimeError):
    """The cluster could not grade (no scheduler, a lost scheduler, workers with other graders)."""


def client_run() -> dict:
    """The client's run settings (the sandbox's limits, --insecure, the hidden checks' seed, fixed here) as data
    for its tasks; a worker grades under them (a limit left at its default, the process count, follows the
    worker's own cores)."""
    from course_cli.settings import resolved

    return resolved().to_dict()


# ----------------------------------------------------------------------------------------------------------
# The worker's side

_WORKER_KEYS: dict[str, str] = {}  # lesson id -> the reference key of this worker's course code


def _worker_sandbox() -> None:
    """Refuse (ClusterError) where the sandbox is missing (the client's choices, its limits, --insecure and the
    seed, are the run settings the task grades under: grade_task)."""
    # Dask's nanny sets MALLOC_TRIM_THRESHOLD_ for its workers (distributed.nanny.pre-spawn-environ); the
    # grading children get the environment a local pool's children get
    os.environ.pop("MALLOC_TRIM_THRESHOLD_", None)
    require = getattr(sandbox, "require_sandbox", None)  # (the bubblewrap sandbox's check, where it exists)
    if require is not None:
        try:
            require()
        except Exception as exc:
            raise ClusterError(f"the worker on {socket.gethostname()} cannot sandbox the submissions: {exc}") from None


def grade_task(lesson_id: str, student: str, path: str, content: bytes | None, digest: str | None,
               reference, reference_key: str, run: dict | None = None) -> dict:
    """Grade one submission on a worker with the client's reference (`reference`, or None: the one the
    ReferencePlugin gave this worker); the result as `journal.result_to_dict`."""
    from graders.registry import find_lesson

    from course_cli.sandboxed.grading import reference_key as key_of

    lesson = find_lesson(lesson_id)
    if lesson_id not in _WORKER_KEYS:
        _WORKER_KEYS[lesson_id] = key_of(lesson, "cpu")
    if _WORKER_KEYS[lesson_id] != reference_key:
        raise ClusterError(f"the worker on {socket.gethostname()} has other graders or solved notebooks than the "
                           f"client (installed at {Path(__file__).resolve().parents[2]}); install the same "
                           f"version of the course on every worker")
    from course_cli.settings import Run, current, using

    with using(Run.from_dict(run) if run else current()):
        return _grade_task(lesson, lesson_id, student, path, content, digest, reference, reference_key)


def _grade_task(lesson, lesson_id, student, path, content, digest, reference, reference_key) -> dict:
    from course_cli.classes.cluster_plugin import SHIPPED
    from course_cli.classes.dispatch import grade_submission
    from course_cli.sandboxed.grading import Reference

    _worker_sandbox()
    if reference is None:
        reference = SHIPPED.get((lesson_id, reference_key))
        if reference is None:
            raise ClusterError(f"the worker on {socket.gethostname()} did not receive the reference")
    Reference.inject(lesson, reference)
    here, tmp = path, None
    if content is not None and file_digest(Path(path)) != digest:  # no shared filesystem: grade the bytes
        tmp = Path(tempfile.mkdtemp(prefix="course-task-"))
        here = str(tmp / student / Path(path).name)
        Path(here).parent.mkdir()
        Path(here).write_bytes(content)
    try:
        data = result_to_dict(grade_submission(lesson, student, Path(here)))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    if tmp is not None:  # the client's path, wherever it appears (the notebook field, messages)
        data = json.loads(json.dumps(data).replace(json.dumps(here)[1:-1], json.dumps(path)[1:-1]))
    return data


# ----------------------------------------------------------------------------------------------------------
# The client's side

def _worker_died_result(lesson: Lesson, path: str, exc: BaseException) -> LessonResult:
    from course_cli.sandboxed.grading import _error_result

    return _error_result(lesson, path, f"the grader could not grade this submission: the Dask worker grading it "
                                       f"died {MAX_WORKER_DEATHS + 1} times (does it crash its worker?); not "
                                       f"retried further ({type(exc).__name__})")


# the scheduler's settings (for a LocalCluster; a remote scheduler is started with them, docs/deploying.md):
# a task may lose MAX_WORKER_DEATHS workers; a worker holds only the task it runs (so only that one is
# suspected when the worker dies)
SCHEDULER_CONFIG = {"distributed.scheduler.allowed-failures": MAX_WORKER_DEATHS,
                    "distributed.scheduler.worker-saturation": 1.0}


def local_cluster(workers: int):
    """A LocalCluster of `workers` processes with one thread each, as `--scheduler local` starts it."""
    import logging

    import dask
    from distributed import LocalCluster

    with dask.config.set(SCHEDULER_CONFIG):
        # memory_limit=0: nothing of the batch spilled to disk, no memory-based pauses or restarts; the
        # sandbox limits each grading child's memory instead
        return LocalCluster(n_workers=max(1, workers), threads_per_worker=1, processes=True, memory_limit=0,
                            dashboard_address=None, worker_dashboard_address=None, silence_logs=logging.ERROR)


def connect(scheduler: str, workers: int):
    """(client, cluster or None): a LocalCluster of `workers` processes, or a running scheduler's client."""
    from distributed import Client

    if scheduler == "local":
        cluster = local_cluster(workers)
        return Client(cluster), cluster
    try:
        return Client(scheduler, timeout=30), None
    except (OSError, TimeoutError, ValueError) as exc:
        raise ClusterError(f"could not reach the Dask scheduler at {scheduler} ({exc})") from None


def grade_on_cluster(lesson: Lesson, submissions: list[tuple[str, Path]], scheduler, on_done=None,
                     workers: int = 2, digests: dict[str, str | None] | None = None,
                     task=grade_task) -> dict[str, LessonResult]:
    """Grade every submission on Dask; `on_done(student, result)` after each one, in this thread, as results
    arrive. `scheduler`: "local", a scheduler's address, or a `distributed.Client` (used, not closed).
    `digests` are the submissions' sha256 if already known."""
    from distributed import Client
    from distributed.scheduler import KilledWorker

    from course_cli.sandboxed.grading import Reference, hidden_seed, reference_key

    digests = dict(digests or {})
    key = reference_key(lesson, "cpu")
    hidden_seed()  # drawn (or given) here, and shipped to the workers with the run's settings
    env = client_run()
    # the reference's child runs while the cluster starts (or the client connects)
    path, child = Reference.start(lesson, "cpu", trusted=True)
    try:
        client, cluster = (scheduler, None) if isinstance(scheduler, Client) else connect(scheduler, workers)
    except BaseException:
        if child is not None:
            child.kill_all()
            child.proc.wait()
            child.cleanup()
        raise
    try:
        reference = Reference.finish(lesson, path, child, "cpu")
    except BaseException:
        if client is not scheduler:
            client.close()
        if cluster is not None:
            cluster.close()
        raise
    results: dict[str, LessonResult] = {}
    executor = None
    plugin = None
    try:
        from course_cli.classes.cluster_plugin import ReferencePlugin
        from course_cli.classes.dispatch import dispatch

        plugin = ReferencePlugin(lesson.id, key, reference)
        client.register_plugin(plugin)
        del reference
        run = uuid.uuid4().hex[:8]
        count = itertools.count()
        lost: dict[str, int] = {}  # student -> results lost with their worker before they could be fetched
        # standard futures from Dask (the same dispatch loop as the local pool's); one retry on a lost worker
        executor = client.get_executor(pure=False, retries=1)

        def submit(ex, item):
            student, path = item
            from course_cli.sandboxed.notebook import NotebookError, submission_bytes

            try:
                content = submission_bytes(path)  # never through a link, bounded (the batch refused the others)
            except (OSError, NotebookError):
                content = None  # graded where it is: the same NOT GRADED row as a local run gives
            digest = digests.get(student) or file_digest(Path(path))
            return ex.submit(task, lesson.id, student, str(path), content, digest, None, key, env,
                             key=f"grade-{lesson.id}-{run}-{next(count)}-{student}"[:200])

        def on_result(item, future) -> bool:
            student, path = item
            if future.cancelled():  # lost: its worker died after the task finished, or the scheduler went away
                lost[student] = lost.get(student, 0) + 1
                if client.status != "running" or lost[student] > MAX_WORKER_DEATHS:
                    raise ClusterError(f"the cluster lost the task grading {student} (a lost scheduler?)")
                return False  # graded again: the same submission, the same result
            exc = future.exception()
            if isinstance(exc, KilledWorker):
                result = _worker_died_result(lesson, str(path), exc)
            elif exc is not None:
                raise ClusterError(f"grading {student} failed on the cluster: {type(exc).__name__}: "
                                   f"{str(exc)[:400]}")
            else:
                result = result_from_dict(future.result())
            results[student] = result
            if on_done:
                on_done(student, result)
            return True

        window = max(IN_FLIGHT, 4 * sum(client.nthreads().values()))
        dispatch(executor, list(submissions), submit, on_result, window)
    finally:
        if executor is not None:
            executor.shutdown(wait=False)  # cancels what this batch left (a client the caller keeps goes on)
        if plugin is not None and cluster is None and client.status == "running":
            try:  # a running cluster keeps no reference after the batch
                client.unregister_worker_plugin(plugin.name)
            except Exception:  # (a cluster going away as the batch stops)
                pass
        if client is not scheduler:
            client.close()
        if cluster is not None:
            cluster.close()
    return dict(sorted(results.items()))
