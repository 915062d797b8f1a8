"""`course grade --scheduler`: a class graded on Dask distributed, one task per submission, over mutual TLS.

    client ── the trusted reference, computed once ── a worker plugin (every worker) ─┐
           └─ per submission: its path, bytes, sha256, the sandbox's limits ── submit ─┴─▶ worker: grade_task
                                                                                          │ grade_submission
           journal ◀── on_done ◀── checked as plain data ◀── the result as JSON text ◀────┘ (sandboxed child)

`--scheduler local` starts a `distributed.LocalCluster` here (worker processes, one thread each) bound to
127.0.0.1 and speaking only TLS with mutual authentication, under certificates made for this run and kept in
memory (`Security.temporary()` where `cryptography` is installed, else a CA and role certificates made with
`openssl`): nothing without them joins as a worker or a client. Any other value is the address of a running
scheduler: `tls://host:8786` with the certificate files (`--tls-ca-file/--tls-cert/--tls-key`, or Dask's
`distributed.comm.tls.*` configuration); a plain `tcp://` address is refused unless the instructor passes
`--insecure-cluster` (warned on every run, recorded in the results and the journal). Dask is imported only
inside this module's functions (and by cluster_plugin.py), which run only when `--scheduler` is given.

- The reference observations are computed once, by this process, from the solved notebook (trusted), and
  shipped to the workers in memory by a worker plugin (cluster_plugin.py), which the scheduler also gives to
  workers that join or restart mid-batch; they are not in Dask's data store, so never spilled to disk, and a
  worker never computes a CPU reference. A worker checks that it runs the same graders (the same
  `reference_key`) before it grades.
- The client's sandbox limits (and --insecure) travel with each task, so every worker grades under the same
  limits; a worker that cannot sandbox refuses, and the batch stops with its reason.
- A result comes back as JSON text and is checked as plain data against the result schema and the lesson
  (`journal.checked_result`) before it is recorded: a malformed or forged one is that submission's error row.
  (Dask itself unpickles its messages; over mutual TLS only holders of the cluster's certificates send any.)
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
from dataclasses import dataclass
from pathlib import Path

from graders.registry import Lesson
from graders.engine.results import LessonResult

from course_cli import settings
from course_cli.sandboxed import sandbox
from course_cli.classes.journal import checked_result, file_digest, result_to_dict, submission_bytes

MAX_WORKER_DEATHS = 2  # Dask's allowed-failures: a task may lose this many workers, then it is an error row
IN_FLIGHT = 500  # tasks submitted ahead of the results (at least 4 per worker thread): bounded client memory


class ClusterError(RuntimeError):
    """The cluster could not grade (no scheduler, a lost scheduler, workers with other graders)."""


# ----------------------------------------------------------------------------------------------------------
# Who may join: mutual TLS

CERT_DAYS = 7  # the certificates `make_certificates` makes (the deployment's; --scheduler local's live a run)


@dataclass(frozen=True)
class Access:
    """How this client reaches its cluster: the certificate files of a remote `tls://` scheduler (None: Dask's
    `distributed.comm.tls.*` configuration), or `insecure` for plain TCP (--insecure-cluster)."""

    ca_file: str | None = None
    cert: str | None = None
    key: str | None = None
    insecure: bool = False


def make_certificates(folder: Path, roles=("scheduler", "worker", "client"), days: int = CERT_DAYS) -> dict:
    """A certificate authority and one certificate per role signed by it, made with `openssl` (the commands of
    docs/deploying.md) in a private folder of its own, then written into `folder` (created private, 0700) as
    course_cli/atomic.py writes, mode 0600: a link planted at a certificate's name is replaced, never written
    through. {"ca": ca.pem, role: (role.pem, role.key)}."""
    import subprocess

    from course_cli.atomic import read_bytes, write_bytes

    folder = Path(folder)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if shutil.which("openssl") is None:
        raise ClusterError("making the cluster's certificates needs `openssl` (or the Python package "
                           "`cryptography`): install either, or give --insecure-cluster")
    work = Path(tempfile.mkdtemp(prefix="course-certs-"))  # 0700, a random name: openssl's own writes go here

    def openssl(*args: str) -> None:
        done = subprocess.run(["openssl", *args], cwd=work, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise ClusterError(f"openssl {args[0]} failed: {done.stderr.strip()[-300:]}")

    old = os.umask(0o077)  # the keys readable by their owner only
    try:
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
                "-days", str(days), "-subj", "/CN=attention-course-ca")
        names = ["ca.key", "ca.pem"]
        made: dict = {"ca": folder / "ca.pem"}
        for role in roles:
            openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{role}.key", "-out", f"{role}.csr",
                    "-subj", f"/CN=attention-course-{role}")
            openssl("x509", "-req", "-in", f"{role}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                    "-set_serial", str(int.from_bytes(os.urandom(8), "big")), "-out", f"{role}.pem",
                    "-days", str(days))
            names += [f"{role}.pem", f"{role}.key"]
            made[role] = (folder / f"{role}.pem", folder / f"{role}.key")
        for name in names:
            write_bytes(folder / name, read_bytes(work / name), mode=0o600)
    finally:
        os.umask(old)
        shutil.rmtree(work, ignore_errors=True)
    return made


def ephemeral_security():
    """A `Security` for a cluster this process starts: certificates made for it, held in memory only
    (`Security.temporary()`, or openssl's files read back and deleted), TLS required."""
    from distributed.security import Security

    try:
        return Security.temporary()
    except ImportError:  # no `cryptography`: the same with openssl
        pass
    folder = Path(tempfile.mkdtemp(prefix="course-tls-"))
    try:
        made = make_certificates(folder, days=2)
        pem = {role: tuple(Path(f).read_text() for f in made[role]) for role in ("scheduler", "worker", "client")}
        return Security(require_encryption=True, tls_ca_file=made["ca"].read_text(),
                        tls_scheduler_cert=pem["scheduler"][0], tls_scheduler_key=pem["scheduler"][1],
                        tls_worker_cert=pem["worker"][0], tls_worker_key=pem["worker"][1],
                        tls_client_cert=pem["client"][0], tls_client_key=pem["client"][1])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def security_for(scheduler: str, access: Access | None = None, make: bool = True):
    """The `Security` to reach `scheduler` with (None: plain TCP, only with access.insecure), or ClusterError
    naming the fix. `local`: ephemeral certificates, made only with make=True (as the cluster starts)."""
    from distributed.comm.addressing import parse_address
    from distributed.security import Security

    access = access or Access()
    given = [name for name, v in (("--tls-ca-file", access.ca_file), ("--tls-cert", access.cert),
                                  ("--tls-key", access.key)) if v]
    if scheduler == "local":
        if given:
            raise ClusterError(f"{', '.join(given)}: for a remote tls:// scheduler; --scheduler local makes "
                               f"its own certificates for the run")
        return None if access.insecure or not make else ephemeral_security()
    try:
        scheme = parse_address(scheduler, strict=False)[0]
    except (ValueError, TypeError) as exc:
        raise ClusterError(f"--scheduler {scheduler!r} is not a scheduler's address ({exc})") from None
    if scheme != "tls":
        if access.insecure:
            if given:
                raise ClusterError(f"{', '.join(given)}: for a tls:// scheduler, not {scheme}://")
            return None
        raise ClusterError(f"the scheduler {scheduler} is plain {scheme.upper()}: anyone who reaches it can join "
                           f"as a worker or a client and run code as you. Start it with TLS and give "
                           f"tls://HOST:PORT with --tls-ca-file, --tls-cert and --tls-key (docs/deploying.md), "
                           f"or pass --insecure-cluster to grade over plain TCP anyway")
    if access.insecure:
        raise ClusterError("--insecure-cluster is for a plain tcp:// scheduler; this one is tls://")
    sec = Security(require_encryption=True,
                   **{k: v for k, v in (("tls_ca_file", access.ca_file), ("tls_client_cert", access.cert),
                                        ("tls_client_key", access.key)) if v})
    missing = [opt for opt, v in (("--tls-ca-file", sec.tls_ca_file), ("--tls-cert", sec.tls_client_cert))
               if not v]
    if missing:
        raise ClusterError(f"a tls:// scheduler needs the cluster's certificates: give {' and '.join(missing)} "
                           f"(and --tls-key), or set distributed.comm.tls.ca-file and "
                           f"distributed.comm.tls.client.cert/.key in Dask's configuration (docs/deploying.md)")
    for opt, f in (("--tls-ca-file", sec.tls_ca_file), ("--tls-cert", sec.tls_client_cert),
                   ("--tls-key", sec.tls_client_key)):
        if f and "\n" not in f:
            try:
                Path(f).read_bytes()
            except OSError as exc:
                raise ClusterError(f"{opt} {f}: cannot be read ({exc.strerror})") from None
    try:
        sec.get_connection_args("client")  # the files are certificates and keys that go together
    except Exception as exc:
        raise ClusterError(f"the TLS certificate files cannot be used ({type(exc).__name__}: {exc})") from None
    return sec


def client_run() -> dict:
    """The client's run settings (the sandbox's limits, --insecure, the hidden checks' seed, fixed here) as data
    for its tasks; a worker grades under them (a limit left at its default, the process count, follows the
    worker's own cores)."""
    return settings.resolved().to_dict()


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
               reference, reference_key: str, run: dict | None = None) -> str:
    """Grade one submission on a worker with the client's reference (`reference`, or None: the one the
    ReferencePlugin gave this worker); the result as the JSON text of `journal.result_to_dict`."""
    from graders.registry import find_lesson

    from course_cli.sandboxed.grading import reference_key as key_of

    lesson = find_lesson(lesson_id)
    if lesson_id not in _WORKER_KEYS:
        _WORKER_KEYS[lesson_id] = key_of(lesson, "cpu")
    if _WORKER_KEYS[lesson_id] != reference_key:
        raise ClusterError(f"the worker on {socket.gethostname()} has other graders or solved notebooks than the "
                           f"client (installed at {Path(__file__).resolve().parents[2]}); install the same "
                           f"version of the course on every worker")
    with settings.using(settings.Run.from_dict(run) if run else settings.current()):
        return _grade_task(lesson, lesson_id, student, path, content, digest, reference, reference_key)


def _grade_task(lesson, lesson_id, student, path, content, digest, reference, reference_key) -> str:
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
        from course_cli.atomic import create_new

        create_new(here, content)
    try:
        text = json.dumps(result_to_dict(grade_submission(lesson, student, Path(here))))
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    if tmp is not None:  # the client's path, wherever it appears (the notebook field, messages)
        text = text.replace(json.dumps(here)[1:-1], json.dumps(path)[1:-1])
    return text


# ----------------------------------------------------------------------------------------------------------
# The client's side

def _worker_died_result(lesson: Lesson, path: str, exc: BaseException) -> LessonResult:
    from graders.engine.verdict import error_result  # lazy: verdict imports torch (4.9 s cold here)

    return error_result(lesson, path, f"the grader could not grade this submission: the Dask worker grading it "
                                      f"died {MAX_WORKER_DEATHS + 1} times (does it crash its worker?); not "
                                      f"retried further ({type(exc).__name__})")


def _forged_result(lesson: Lesson, path: str, exc: ValueError) -> LessonResult:
    from graders.engine.verdict import error_result  # lazy: verdict imports torch (4.9 s cold here)

    return error_result(lesson, path, f"the grader could not grade this submission: the Dask worker returned "
                                      f"a result that is not the result schema's ({str(exc)[:200]})")


# the scheduler's settings (for a LocalCluster; a remote scheduler is started with them, docs/deploying.md):
# a task may lose MAX_WORKER_DEATHS workers; a worker holds only the task it runs (so only that one is
# suspected when the worker dies)
SCHEDULER_CONFIG = {"distributed.scheduler.allowed-failures": MAX_WORKER_DEATHS,
                    "distributed.scheduler.worker-saturation": 1.0}


def local_cluster(workers: int, security=None):
    """A LocalCluster of `workers` processes with one thread each, as `--scheduler local` starts it: on
    127.0.0.1 only, over TLS with `security` (None: plain TCP, --insecure-cluster)."""
    import logging

    import dask
    from distributed import LocalCluster

    # no HTTP routes: Dask's plain-HTTP pages (the task names hold students' names) would be outside the TLS
    http = {"distributed.scheduler.http.routes": [], "distributed.worker.http.routes": []}
    with dask.config.set({**SCHEDULER_CONFIG, **http}):
        # memory_limit=0: nothing of the batch spilled to disk, no memory-based pauses or restarts; the
        # sandbox limits each grading child's memory instead
        return LocalCluster(n_workers=max(1, workers), threads_per_worker=1, processes=True, memory_limit=0,
                            host="127.0.0.1", protocol="tls://" if security is not None else "tcp://",
                            security=security, dashboard_address=None, worker_dashboard_address=None,
                            silence_logs=logging.ERROR)


def connect(scheduler: str, workers: int, access: Access | None = None):
    """(client, cluster or None): a LocalCluster of `workers` processes, or a running scheduler's client,
    over mutual TLS unless access.insecure (security_for)."""
    from distributed import Client

    security = security_for(scheduler, access)
    if scheduler == "local":
        cluster = local_cluster(workers, security)
        return Client(cluster, security=security), cluster
    try:
        return Client(scheduler, timeout=30, security=security), None
    except (OSError, TimeoutError, ValueError) as exc:
        tls = (" over TLS: is it started with --tls-ca-file/--tls-cert/--tls-key, and are this client's "
               "certificates signed by the same authority?") if security is not None else ""
        raise ClusterError(f"could not reach the Dask scheduler at {scheduler} ({exc}){tls}") from None


def grade_on_cluster(lesson: Lesson, submissions: list[tuple[str, Path]], scheduler, on_done=None,
                     workers: int = 2, digests: dict[str, str | None] | None = None,
                     task=grade_task, access: Access | None = None) -> dict[str, LessonResult]:
    """Grade every submission on Dask; `on_done(student, result)` after each one, in this thread, as results
    arrive. `scheduler`: "local", a scheduler's address (reached as `access` says), or a `distributed.Client`
    (used, not closed). `digests` are the submissions' sha256 if already known."""
    from distributed import Client
    from distributed.scheduler import KilledWorker

    from course_cli.sandboxed.grading import Reference, reference_key

    digests = dict(digests or {})
    key = reference_key(lesson, "cpu")
    settings.hidden_seed()  # drawn (or given) here, and shipped to the workers with the run's settings
    env = client_run()
    # the reference's child runs while the cluster starts (or the client connects)
    path, child = Reference.start(lesson, "cpu", trusted=True)
    try:
        client, cluster = (scheduler, None) if isinstance(scheduler, Client) else connect(scheduler, workers, access)
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
            # never through a link, bounded, at most journal.READ_LIMIT bytes (the batch refused the others);
            # None: graded where it is (the same NOT GRADED row as a local run gives)
            content = submission_bytes(Path(path))
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
                try:  # plain data of the result schema, or this submission's error row
                    result = checked_result(future.result(), lesson)
                except ValueError as bad:
                    result = _forged_result(lesson, str(path), bad)
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
