"""`course grade`'s policy, apart from its command line: which submissions and students a run covers (the
roster, --student, renamed and missing notebooks), the run's settings (--insecure, the hidden seed, kept in the
journal for --resume), grading them (here or on Dask), and the rows of students with nothing to grade."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from graders.engine.results import LessonResult
from graders.registry import Lesson

from course_cli import settings


class ClassError(Exception):
    """The run cannot start or go on, said in one line for the instructor (the CLI prints it, exit 2)."""


# said on stderr by every `course grade --insecure-cluster` run (the results and the journal record it too)
INSECURE_WARNING = ("warning: grading on a plain-TCP Dask cluster (--insecure-cluster): anyone who can reach "
                    "its ports can join as a worker or a client, read the submissions and the reference, run "
                    "code as you and forge results")


def access(ca_file: str | None, cert: str | None, key: str | None, insecure: bool):
    """The command line's way to the cluster (cluster.Access), without importing Dask."""
    from course_cli.classes.cluster import Access

    return Access(ca_file, cert, key, insecure)


@dataclass
class ClassPlan:
    """What one `course grade` run covers, before anything is graded."""

    lesson: Lesson
    submissions: list[tuple[str, Path]]
    renamed: dict[str, str] = field(default_factory=dict)  # student -> the note every seat gives
    absent: dict[str, str] = field(default_factory=dict)  # student -> why there is nothing to grade
    journal: Path | None = None
    seed: int | None = None
    root: Path | None = None  # the class's folder: every submission is read as a regular file inside it
    access: object = None  # cluster.Access: how a --scheduler's cluster is reached (TLS, or --insecure-cluster)

    @property
    def insecure_cluster(self) -> bool:
        """Graded on a plain-TCP Dask cluster (--insecure-cluster): warned on every run, recorded."""
        return bool(self.access is not None and self.access.insecure)


def plan(lesson: Lesson, submissions: Path, students: tuple[str, ...] = (), roster: Path | None = None,
         journal: Path | None = None, resume: bool = False, seed: int | None = None,
         scheduler: str | None = None, workers: int | None = None, access=None) -> ClassPlan:
    """The run's plan; ClassError when its options or its folder cannot be graded (a plain-TCP scheduler
    without --insecure-cluster among them). `access`: cluster.Access, the --tls-* files and --insecure-cluster."""
    from course_cli.classes.batch import find_class

    subs, renamed, absent = find_class(submissions, lesson)
    if roster is not None:
        from course_cli.classes.batch import read_roster
        from graders.engine.results import NOT_SUBMITTED

        try:
            listed = read_roster(roster)
        except (OSError, UnicodeDecodeError) as exc:
            raise ClassError(f"could not read the roster {roster}: {exc}") from None
        for student in listed:
            if student not in absent and student not in {s for s, _ in subs}:
                absent[student] = NOT_SUBMITTED
    if students:
        subs = [s for s in subs if s[0] in students]
        absent = {k: v for k, v in absent.items() if k in students}
        missing = set(students) - {s[0] for s in subs} - set(absent)
        if missing:
            raise ClassError(f"no submission of {lesson.id} for: {', '.join(sorted(missing))}")
    if not subs and not absent:
        raise ClassError(f"no {lesson.notebook} under {submissions} (neither <student>/{lesson.id}/ folders nor "
                         f".ipynb files)")
    if workers and scheduler != "local":
        raise ClassError("--workers is for --scheduler local (the local pool takes --jobs; a running cluster has the "
                         "workers it was started with)")
    if resume and journal is None:
        raise ClassError("--resume needs the journal: give --out (its journal is OUT.journal) or --journal")
    if scheduler:
        try:
            import distributed  # noqa: F401 (only its presence is checked here)
        except ImportError:
            raise ClassError("--scheduler needs Dask distributed: pip install 'attention-course[cluster]'") from None
        from course_cli.classes.cluster import Access, ClusterError, security_for

        access = access or Access()
        try:
            security_for(scheduler, access, make=False)  # refused here, before anything is graded
        except ClusterError as exc:
            raise ClassError(str(exc)) from None
    elif access is not None and (access.insecure or access.ca_file or access.cert or access.key):
        raise ClassError("--tls-ca-file, --tls-cert, --tls-key and --insecure-cluster are for --scheduler")
    if seed is None and resume and journal is not None and journal.exists():
        from course_cli.classes.journal import journal_seed

        seed = journal_seed(journal)  # the interrupted run's hidden checks
    return ClassPlan(lesson, subs, renamed, absent, journal, seed, Path(submissions), access if scheduler else None)


def run(p: ClassPlan, jobs: int, students: tuple[str, ...] = (), resume: bool = False, partial: bool = False,
        scheduler: str | None = None, workers: int | None = None,
        on_done: Callable[[str, LessonResult], None] | None = None,
        on_resumed: Callable[[int], None] | None = None) -> dict[str, LessonResult]:
    """Grade the plan under the current run settings (course_cli/settings.py); every student's row, in order:
    the graded, then the NOT GRADED ones (nothing to grade), with the notes every seat gives."""
    from course_cli.classes.batch import grade_class
    from course_cli.classes.cluster import ClusterError
    from course_cli.classes.journal import Journal, JournalError
    from course_cli.safe_text import for_terminal
    from course_cli.sandboxed.grading import reference_key
    from course_cli.sandboxed.sandbox import SandboxUnavailable

    seed = settings.hidden_seed()
    lesson, journal = p.lesson, p.journal
    # re-grading some students (--student) adds their new results to the class's journal
    # (another lesson's or other graders' journal: started afresh, the old one kept as .bak)
    append = (bool(students) and not resume and journal is not None and journal.exists()
              and Journal.matches(journal, lesson.id, reference_key(lesson, "cpu"), seed))
    try:
        results = {} if not p.submissions else grade_class(
            lesson, p.submissions, jobs, on_done, scheduler, workers, journal, resume or append,
            on_resumed=on_resumed, regrade=set(students) if append else (), seed=seed, root=p.root,
            access=p.access)
    except (JournalError, OSError) as exc:
        raise ClassError(str(exc)) from None
    except SandboxUnavailable as exc:  # not graded: the sandbox could not start; nobody gets a 0 from it
        kept = f"; what was graded before is in {journal}: continue with --resume once it starts" if journal else ""
        raise ClassError(for_terminal(f"{exc}{kept}")) from None
    except ClusterError as exc:
        kept = f"; what was graded is in {journal}: continue with --resume" if journal else ""
        raise ClassError(f"{exc}{kept}") from None
    for student, why in p.renamed.items():
        if student in results:
            results[student].note = why  # the same words as every other seat's
    from graders.engine.verdict import missing_result  # lazy: verdict imports torch (4.9 s cold here)

    results = dict(sorted({**results, **{s: missing_result(lesson, why) for s, why in p.absent.items()}}.items()))
    if partial:
        from graders.engine.scoring import apply_partial

        for res in results.values():
            apply_partial(res, lesson)
    return results
