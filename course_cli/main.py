"""`course`: the command line. Each command parses, calls one function, renders with Rich.

torch is imported only by the commands that grade, and only while the sandboxed child starts.
"""

from __future__ import annotations

import json
import sys
import time

import click

from graders.registry import LESSONS, UnknownLesson, find_lesson


class CourseError(click.ClickException):
    """A clean, one-line error for the student: exit code 2, no traceback."""

    exit_code = 2


def _lesson(key: str):
    try:
        return find_lesson(key)
    except UnknownLesson as exc:
        raise CourseError(str(exc)) from None


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("attention-course")
    except PackageNotFoundError:
        return "unknown"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(_version(), "--version", "-V", prog_name="course")
def cli() -> None:
    """The attention course: build the Transformer, lesson by lesson, and check it as you go.

    Example: course check lesson01
    """


@cli.command("list")
def list_cmd() -> None:
    """List the lessons and their exercises.

    Example: course list
    """
    from rich.table import Table

    from .render import make_console

    table = Table(title="The attention course", title_justify="left")
    table.add_column("lesson", no_wrap=True)
    table.add_column("title")
    table.add_column("exercises")
    table.add_column("points", justify="right")
    for lesson in LESSONS:
        names = ", ".join(e.name + (" (challenge)" if e.challenge else "") for e in lesson.exercises)
        table.add_row(f"{lesson.id} ({lesson.slug})", lesson.title, names, f"{lesson.max_score:g}")
    make_console().print(table)


@cli.command()
@click.argument("lesson")
@click.argument("exercise", required=False)
@click.option("--notebook", "notebook", type=click.Path(dir_okay=True), help="Grade this notebook file instead.")
@click.option("--solution", is_flag=True, help="Grade the course's solved notebook (the reference).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.option("-v", "--verbose", is_flag=True, help="Show every check, not only the failing ones.")
def check(lesson: str, exercise: str | None, notebook: str | None, solution: bool, as_json: bool,
          verbose: bool) -> None:
    """Grade a lesson's notebook: what passes, what fails, and why.

    Exit code 0 only when every exercise passes.

    Example: course check lesson01 softmax
    """
    from .grading import grade_notebook
    from .render import make_console, render_result
    from .workspace import find_workspace, notebook_path

    lesson_obj = _lesson(lesson)
    if exercise is not None:
        try:
            lesson_obj.exercise(exercise)
        except LookupError as exc:
            raise CourseError(str(exc)) from None
    if notebook and solution:
        raise CourseError("give either --notebook or --solution, not both")
    workspace = find_workspace()
    if solution:
        path = lesson_obj.solution_path
    elif notebook:
        path = click.format_filename(notebook)
    else:
        path = notebook_path(lesson_obj, workspace)
    result = grade_notebook(lesson_obj, path, [exercise] if exercise else None)
    if not solution and not notebook:
        from .progress import ProgressStore

        store = ProgressStore(workspace)
        try:
            store.record(result)
        except OSError as exc:
            click.echo(f"warning: could not record progress ({exc})", err=True)
        for w in store.warnings:
            click.echo(f"warning: {w}", err=True)
    if as_json:
        click.echo(json.dumps(result.to_dict(), ensure_ascii=False))
    else:
        render_result(make_console(), result, lesson_obj.title, verbose)
    sys.exit(0 if result.all_passed else 1)


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print progress as JSON.")
def status(as_json: bool) -> None:
    """Show your progress across the course.

    Example: course status
    """
    from rich.progress_bar import ProgressBar
    from rich.table import Table

    from .progress import ProgressStore
    from .render import make_console, status_text
    from .workspace import find_workspace

    data = ProgressStore(find_workspace()).load()
    rows = []
    for lesson in LESSONS:
        rec = data["lessons"].get(lesson.id, {"attempts": [], "best": {}})
        best = rec.get("best", {})
        points = sum(best.get(e.name, {}).get("points", 0.0) for e in lesson.exercises)
        last = rec["attempts"][-1]["time"] if rec["attempts"] else None
        nxt = next((e.name for e in lesson.exercises if best.get(e.name, {}).get("status") != "passed"), None)
        rows.append({"lesson": lesson.id, "title": lesson.title, "points": points, "max_points": lesson.max_score,
                     "attempts": len(rec["attempts"]), "last_attempt": last, "next": nxt,
                     "exercises": {e.name: best.get(e.name, {}).get("status", "not_attempted")
                                   for e in lesson.exercises}})
    if as_json:
        click.echo(json.dumps({"lessons": rows}))
        return
    table = Table(title="Your progress", title_justify="left")
    table.add_column("lesson", no_wrap=True, min_width=8)
    table.add_column("progress", no_wrap=True, min_width=10)
    table.add_column("points", no_wrap=True, justify="right", min_width=6)
    table.add_column("tries", no_wrap=True, justify="right", min_width=5)
    table.add_column("last", no_wrap=True, min_width=10)
    table.add_column("next", overflow="ellipsis", no_wrap=True, min_width=12, max_width=24)
    for r in rows:
        ago = _ago(r["last_attempt"]) if r["last_attempt"] else "never"
        bar = ProgressBar(total=r["max_points"] or 1, completed=r["points"], width=10)
        table.add_row(r["lesson"], bar, f"{r['points']:g}/{r['max_points']:g}",
                      str(r["attempts"]), ago, r["next"] or status_text("passed"))
    make_console().print(table)
    pending = next((r for r in rows if r["next"]), None)
    if pending:
        click.echo(f"Next up: {pending['lesson']} {pending['next']}  →  course check {pending['lesson']}")
    else:
        click.echo("Every exercise passes. Well done.")


def _ago(t: float) -> str:
    s = max(0, time.time() - t)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= size:
            return f"{s // size:.0f} {unit} ago"
    return "just now"


@cli.command()
@click.argument("lesson")
@click.argument("exercise")
def hint(lesson: str, exercise: str) -> None:
    """Reveal the next hint for an exercise (each call shows one more).

    Example: course hint lesson01 softmax
    """
    from .progress import ProgressStore
    from .workspace import find_workspace

    lesson_obj = _lesson(lesson)
    try:
        ex = lesson_obj.exercise(exercise)
    except LookupError as exc:
        raise CourseError(str(exc)) from None
    store = ProgressStore(find_workspace())
    shown = store.next_hint(lesson_obj.id, ex.name, len(ex.hints))
    for i in range(shown):
        click.echo(f"Hint {i + 1}/{len(ex.hints)}: {ex.hints[i]}\n")
    if shown == len(ex.hints):
        click.echo("That was the last hint.")


@cli.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False))
def init(directory: str | None) -> None:
    """Make a workspace: your own copy of every lesson notebook, and a progress store.

    Run it again after updating the course: new lessons are added, your notebooks are never overwritten.

    Example: course init ~/attention
    """
    from pathlib import Path

    from .workspace_ops import init as init_ws

    target = Path(directory or ".").resolve()
    copied, kept = init_ws(target)
    for p in copied:
        click.echo(f"added   {p}")
    for p in kept:
        click.echo(f"kept    {p} (yours, untouched)")
    click.echo(f"Workspace ready in {target}. Next: cd there, `jupyter lab lessons/`, then `course check lesson01`.")


@cli.command()
@click.argument("lesson")
@click.argument("exercise", required=False)
@click.option("--notebook", "notebook", type=click.Path(), help="Reset this notebook file instead of yours.")
def reset(lesson: str, exercise: str | None, notebook: str | None) -> None:
    """Restore an exercise's pristine cell, or the whole notebook; your current notebook is backed up first.

    Example: course reset lesson01 softmax
    """
    from pathlib import Path

    from .notebook import NotebookError
    from .workspace import find_workspace, notebook_path
    from .workspace_ops import reset as reset_nb

    lesson_obj = _lesson(lesson)
    workspace = find_workspace()
    path = Path(notebook) if notebook else notebook_path(lesson_obj, workspace)
    try:
        click.echo(reset_nb(lesson_obj, path, workspace, exercise))
    except (LookupError, NotebookError) as exc:
        raise CourseError(str(exc)) from None


@cli.command()
@click.argument("lesson")
@click.argument("exercise", required=False)
@click.option("--notebook", "notebook", type=click.Path(), help="Watch this notebook file instead of yours.")
@click.option("--interval", default=0.5, show_default=True, help="Seconds between looks at the file.")
def watch(lesson: str, exercise: str | None, notebook: str | None, interval: float) -> None:
    """Re-check a lesson every time its notebook is saved (Ctrl-C to stop).

    Example: course watch lesson01
    """
    from pathlib import Path

    from .watch import watch as watch_nb
    from .workspace import find_workspace, notebook_path

    lesson_obj = _lesson(lesson)
    workspace = find_workspace()
    path = Path(notebook) if notebook else notebook_path(lesson_obj, workspace)
    watch_nb(lesson_obj, path, workspace, [exercise] if exercise else None, interval, record=not notebook)


@cli.command()
@click.argument("lesson")
@click.option("--notebook", "notebook", type=click.Path(), help="Benchmark this notebook instead of yours.")
@click.option("--solution", is_flag=True, help="Benchmark the course's reference solution.")
def bench(lesson: str, notebook: str | None, solution: bool) -> None:
    """Time your code against torch's (on GPU: GB/s or TFLOP/s, and the ratio to torch).

    Example: course bench lesson05
    """
    from .grading import run_benchmark
    from .render import make_console, render_bench
    from .workspace import find_workspace, notebook_path

    lesson_obj = _lesson(lesson)
    path = lesson_obj.solution_path if solution else notebook or notebook_path(lesson_obj, find_workspace())
    try:
        reports = run_benchmark(lesson_obj, path)
    except (LookupError, RuntimeError) as exc:
        raise CourseError(str(exc)) from None
    console = make_console()
    for report in reports:
        render_bench(console, report)


@cli.command()
@click.argument("submissions", type=click.Path(exists=True, file_okay=False))
@click.option("--lesson", "lesson", required=True, help="The lesson the submissions are for.")
@click.option("--jobs", "-j", default=2, show_default=True, help="Submissions graded at once.")
@click.option("--out", "out", type=click.Path(dir_okay=False), help="Write results.json or results.csv.")
@click.option("--student", "students", multiple=True, help="Grade only this student (repeatable); with --out, "
              "the file's other students are kept.")
@click.option("--scheduler", "scheduler", help="Grade on Dask distributed: a scheduler's address "
              "(tcp://host:8786), or `local` for a LocalCluster on this machine (needs the `cluster` extra).")
@click.option("--workers", "workers", type=click.IntRange(min=1), help="With --scheduler local: worker "
              "processes (default: --jobs).")
@click.option("--journal", "journal", type=click.Path(dir_okay=False), help="The results journal, one line "
              "per graded submission as it arrives [default: OUT.journal with --out].")
@click.option("--resume", is_flag=True, help="Continue an interrupted batch: keep the journal's results, "
              "grade only the missing (or changed) submissions.")
def grade(submissions: str, lesson: str, jobs: int, out: str | None, students: tuple[str, ...],
          scheduler: str | None, workers: int | None, journal: str | None, resume: bool) -> None:
    """Grade a class: a folder of submissions (nbgrader's submitted/<student>/<lesson>/, or a flat folder of
    notebooks), in parallel, with pass rates and the most frequent mistakes. Results are journalled as they
    arrive, so an interrupted batch continues with --resume.

    Example: course grade submitted/ --lesson lesson01 --jobs 2 --out results.csv
    (on Dask: course grade submitted/ --lesson lesson01 --scheduler tcp://head:8786 --out results.csv)
    """
    from pathlib import Path

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
    from rich.table import Table

    from .batch import find_submissions, grade_class, summary, write
    from .cluster import ClusterError  # (Dask is imported only when a cluster is used)
    from .grading import reference_key
    from .journal import Journal, JournalError
    from .render import make_console

    lesson_obj = _lesson(lesson)
    subs = find_submissions(Path(submissions), lesson_obj)
    if students:
        subs = [s for s in subs if s[0] in students]
        missing = set(students) - {s[0] for s in subs}
        if missing:
            raise CourseError(f"no submission of {lesson_obj.id} for: {', '.join(sorted(missing))}")
    if not subs:
        raise CourseError(f"no {lesson_obj.notebook} under {submissions} (neither <student>/{lesson_obj.id}/ "
                          f"folders nor .ipynb files)")
    if workers and scheduler != "local":
        raise CourseError("--workers is for --scheduler local (the local pool takes --jobs; a running cluster "
                          "has the workers it was started with)")
    if journal is None and out:
        journal = out + ".journal"
    if resume and journal is None:
        raise CourseError("--resume needs the journal: give --out (its journal is OUT.journal) or --journal")
    if resume and not Path(journal).exists():
        click.echo(f"no journal at {journal} yet: grading every submission", err=True)
    if scheduler:
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise CourseError("--scheduler needs Dask distributed: pip install 'attention-course[cluster]'") from None
    console = make_console(file=sys.stderr)
    with Progress(TextColumn("grading {task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeRemainingColumn(), console=console, transient=False) as progress:
        task = progress.add_task(lesson_obj.id, total=len(subs))
        # re-grading some students (--student) adds their new results to the class's journal
        # (another lesson's or other graders' journal: started afresh, the old one kept as .bak)
        append = (bool(students) and not resume and journal is not None and Path(journal).exists()
                  and Journal.matches(Path(journal), lesson_obj.id, reference_key(lesson_obj, "cpu")))
        try:
            results = grade_class(lesson_obj, subs, jobs, lambda s, r: progress.advance(task), scheduler, workers,
                                  Path(journal) if journal else None, resume or append,
                                  on_resumed=lambda n: resumed(progress, task, n, journal),
                                  regrade=set(students) if append else ())
        except (JournalError, OSError) as exc:
            raise CourseError(str(exc)) from None
        except ClusterError as exc:
            kept = f"; what was graded is in {journal}: continue with --resume" if journal else ""
            raise CourseError(f"{exc}{kept}") from None
        except KeyboardInterrupt:
            progress.stop()
            click.echo(f"interrupted{f': the results so far are in {journal}; continue with --resume' if journal else ''}",
                       err=True)
            sys.exit(130)
    info = summary(results)
    out_console = make_console()
    table = Table(title=f"{lesson_obj.id}: {info['students']} submissions, mean score {info['mean_score']:g}/"
                        f"{lesson_obj.max_score:g}", title_justify="left")
    for col in ("exercise", "passed", "pass rate", "other statuses"):
        table.add_column(col)
    for e in info["exercises"]:
        others = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in e["statuses"].items() if k != "passed")
        table.add_row(e["exercise"], str(e["passed"]), f"{e['pass_rate']:.0%}", others)
    out_console.print(table)
    if info["diagnoses"]:
        d = Table(title="Most frequent mistakes (what to re-teach)", title_justify="left")
        d.add_column("students", justify="right")
        d.add_column("exercise")
        d.add_column("mistake", overflow="fold")
        for row in info["diagnoses"]:
            d.add_row(str(row["students"]), row["exercise"], row["diagnosis"])
        out_console.print(d)
    if out:
        write(results, Path(out), update=bool(students))
        click.echo(f"wrote {out}")


def resumed(progress, task, n: int, journal: str) -> None:
    progress.advance(task, n)
    if n:
        progress.console.print(f"{n} result{'s' if n != 1 else ''} kept from {journal}")


@cli.command("nbgrader")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--course-id", default="attention-course", show_default=True, help="nbgrader's course id.")
def nbgrader_cmd(directory: str, course_id: str) -> None:
    """Create (or update) a ready nbgrader course for instructors in DIRECTORY.

    Then use nbgrader's own commands: generate_assignment, autograde, generate_feedback, export.

    Example: course nbgrader ~/teaching/attention
    """
    from pathlib import Path

    from .nbgrader_course import make_course

    target = Path(directory).resolve()
    done = make_course(target, course_id)
    for p in done["written"]:
        click.echo(f"wrote  {p.relative_to(target)}")
    for p in done["kept"]:
        click.echo(f"kept   {p.relative_to(target)} (already there)")
    click.echo(f"Ready: cd {target} && nbgrader generate_assignment lesson01")


@cli.command(hidden=True)
@click.option("--check", "check_only", is_flag=True, help="Only report notebooks that are out of date.")
def build(check_only: bool) -> None:
    """Regenerate lessons/ from solutions/ with nbgrader's preprocessors (for course developers).

    Example: course build --check
    """
    from .build import build as build_all

    stale = build_all(check=check_only)
    for p in stale:
        click.echo(f"{'out of date' if check_only else 'wrote'}: {p}")
    if check_only and stale:
        sys.exit(1)
