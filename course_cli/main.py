"""`course`: the command line. Each command parses, calls one function, renders with Rich.

torch is imported only by the commands that grade, and only while the sandboxed child starts.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from course_cli.safe_text import for_terminal, json_clean

from graders.registry import LESSONS, UnknownLesson, find_lesson


class CourseError(click.ClickException):
    """A clean, one-line error for the student: exit code 2, no traceback."""

    exit_code = 2


def _lesson(key: str):
    try:
        return find_lesson(key)
    except UnknownLesson as exc:
        raise CourseError(str(exc)) from None


def _workspace():
    """The workspace a command uses; outside any, say so (on stderr) and which one is used instead."""
    from course_cli.student.workspace import find_workspace, outside_note

    note = outside_note()
    if note:
        click.echo(f"note: {note}", err=True)
    return find_workspace()


def _workspace_or_fail():
    from course_cli.student.workspace import locate

    path, how = locate()
    if how == "clone":
        raise CourseError(f"no workspace here (no .course/ folder in {Path.cwd()} or above); make one with "
                          f"`course init DIR`, then run this command inside it")
    return path


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("attention-course")
    except PackageNotFoundError:
        return "unknown"


def _print_version(ctx: click.Context, _param, value: bool) -> None:
    if value and not ctx.resilient_parsing:  # read only when asked: importlib.metadata costs every command 30 ms
        click.echo(f"course, version {_version()}")
        ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", "-V", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version and exit.")
def cli() -> None:
    """The attention course: build the Transformer, lesson by lesson, and check it as you go.

    Example: course check lesson01
    """
    from course_cli.settings import Limits

    try:  # a limit set to something that is not a number: said here, before any command runs
        Limits.from_env()
    except ValueError as exc:
        raise CourseError(f"{exc} (see docs/architecture.md, Settings and environment variables)") from None


@cli.command("list")
def list_cmd() -> None:
    """List the lessons and their exercises (every name in full: they are what you type).

    Example: course list
    """
    from rich.padding import Padding
    from rich.text import Text

    from course_cli.render import make_console, plural

    console = make_console()
    console.print(Text("The attention course", style="bold"))
    for lesson in LESSONS:
        head = Text(f"{lesson.id}", style="bold").append(f" ({lesson.slug})").append(f" — {lesson.title}")
        head.append(f" · {plural(lesson.max_score, 'point')}", style="dim")
        console.print(head, overflow="fold")
        names = Text()
        for i, e in enumerate(lesson.exercises):
            if i:
                names.append(", ")
            names.append(e.name, style="cyan")
            names.append(f" ({e.points:g}" + (", challenge" if e.challenge else "") + ")", style="dim")
        console.print(Padding(names, (0, 0, 0, 2)), overflow="fold")
    console.print(Text("A lesson is named by its id, number or topic: lesson01, 1 and sdpa are the same.", style="dim"))


@cli.command()
@click.argument("lesson")
@click.argument("exercise", required=False)
@click.option("--notebook", "notebook", type=click.Path(exists=True, dir_okay=False),
              help="Grade this notebook file instead.")
@click.option("--solution", is_flag=True, help="Grade the course's solved notebook (the reference).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
@click.option("--detail", is_flag=True, help="Show every check that did not pass, not only the first.")
@click.option("--html", "html_file", type=click.Path(dir_okay=False),
              help="Also write the results, with figures, as a self-contained HTML page (a file already "
              "there is kept as FILE.bak).")
@click.option("-v", "--verbose", is_flag=True, help="Show every check, not only the failing ones.")
@click.option("--public", "public", is_flag=True, help="Only the public checks (as the notebook's check cells; "
              "GitHub Classroom's workflow uses this).")
@click.option("--cold", is_flag=True, help="Grade in a fresh sandbox, without the warm grader (as COURSE_WARM=0).")
def check(lesson: str, exercise: str | None, notebook: str | None, solution: bool, as_json: bool,
          detail: bool, html_file: str | None, verbose: bool, public: bool, cold: bool) -> None:
    """Grade a lesson's notebook: what passes, what fails, and why.

    Exit code 0 only when every exercise passes.

    Example: course check lesson01 softmax
    """
    from course_cli.student.workspace import find_workspace, notebook_path

    lesson_obj = _lesson(lesson)
    if exercise is not None:
        try:
            lesson_obj.exercise(exercise)
        except LookupError as exc:
            raise CourseError(str(exc)) from None
    if notebook and solution:
        raise CourseError("give either --notebook or --solution, not both")
    workspace = None if solution or notebook else _workspace()
    if solution:
        path = lesson_obj.solution_path
    elif notebook:
        path = click.format_filename(notebook)
    else:
        path = notebook_path(lesson_obj, workspace)
    if not cold:  # the warm grader imports torch while this process gets ready (the first check of a session)
        from course_cli.sandboxed.warm import start_early

        start_early(lesson_obj, path, workspace if workspace is not None else find_workspace())
    from course_cli.render import make_console, render_result
    from course_cli.sandboxed.sandbox import SandboxUnavailable, fallback_notice
    from course_cli.student.checking import check_and_record

    notice = fallback_notice()
    if notice and not as_json:
        click.echo(notice, err=True)
    try:
        result, warnings = check_and_record(lesson_obj, path, [exercise] if exercise else None, workspace, "cli",
                                            only_public=public, record_it=not solution and not notebook,
                                            warm=not cold)
    except SandboxUnavailable as exc:  # bubblewrap failed to start the child: an error, never a score
        raise CourseError(for_terminal(str(exc))) from None
    for w in warnings:
        click.echo(f"warning: {w}", err=True)
    if html_file:
        from course_cli.atomic import write_text
        from course_cli.render import lesson_html

        try:  # an unpredictable name, then renamed: a link at FILE is replaced, never written through
            write_text(html_file, lesson_html(result, lesson_obj.title), backup=True)
        except OSError as exc:
            raise CourseError(f"could not write {html_file}: {exc.strerror or exc}") from None
    if as_json:
        click.echo(json.dumps(json_clean(result.to_dict(), None), ensure_ascii=False))
    else:
        render_result(make_console(), result, lesson_obj.title, verbose, detail)
        if html_file:
            click.echo(f"wrote {html_file}")
    if result.not_graded:  # bad input: the message said it; a clean error's exit code, never a score
        if not as_json:
            for line in _renamed_here(lesson_obj, Path(path)):
                click.echo(for_terminal(line), err=True)
        sys.exit(CourseError.exit_code)
    sys.exit(0 if result.all_passed else 1)


def _renamed_here(lesson, path: Path) -> list[str]:
    """When the lesson's notebook is missing, the notebooks beside it that no lesson names (a renamed copy?)."""
    if path.exists() or not path.parent.is_dir():
        return []
    known = {l.notebook for l in LESSONS}
    try:
        others = sorted(p.name for p in path.parent.glob("*.ipynb") if p.name not in known and p.is_file())
    except OSError:
        return []
    if not others:
        return [f"`course reset {lesson.id}` writes a fresh copy of {lesson.notebook}"]
    return [f"{path.parent} has {', '.join(others[:3])}{' …' if len(others) > 3 else ''}: if you renamed "
            f"{lesson.notebook}, rename it back, or check it with `course check {lesson.id} --notebook FILE`"]


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print progress as JSON.")
def status(as_json: bool) -> None:
    """Show your progress across the course: per lesson your best points and your last attempt's.

    Example: course status
    """
    from rich.progress_bar import ProgressBar
    from rich.table import Table
    from rich.text import Text

    from course_cli.student.progress import ProgressStore
    from course_cli.render import make_console, status_text

    data = ProgressStore(_workspace()).load()
    rows = []
    for lesson in LESSONS:
        rec = data["lessons"].get(lesson.id, {"attempts": [], "best": {}})
        best = rec.get("best", {})
        points = sum(best.get(e.name, {}).get("points", 0.0) for e in lesson.exercises)
        last = rec["attempts"][-1]["time"] if rec["attempts"] else None
        latest = {}  # each exercise as its latest attempt left it (an attempt may check one exercise only)
        graded = [a for a in rec["attempts"] if not _not_graded(a)]
        for attempt in graded:
            latest.update(attempt.get("exercises", {}))
        last_points = sum(latest.get(e.name, {}).get("points", 0.0) for e in lesson.exercises)
        why = _not_graded(rec["attempts"][-1]) if rec["attempts"] else ""
        nxt = next((e.name for e in lesson.exercises if best.get(e.name, {}).get("status") != "passed"), None)
        rows.append({"lesson": lesson.id, "title": lesson.title, "points": points, "best_points": points,
                     "last_points": last_points if graded and not why else None, "max_points": lesson.max_score,
                     "last_not_graded": why or None,
                     "attempts": len(rec["attempts"]), "last_attempt": last, "next": nxt,
                     "exercises": {e.name: best.get(e.name, {}).get("status", "not_attempted")
                                   for e in lesson.exercises},
                     "public_passed": sorted(n for n, v in rec.get("best_public", {}).items()
                                             if v.get("status") == "passed")})
    if as_json:
        click.echo(json.dumps({"lessons": rows}))
        return
    from rich import box

    console = make_console()
    with_bar = console.width >= 100  # at 80 columns every name is whole, the bar left out
    table = Table(title="Your progress", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  caption="best: your best points per exercise over full checks (a run of the public checks only "
                  "never counts); last: where your latest attempts left each exercise", caption_justify="left")
    table.add_column("lesson", no_wrap=True)
    if with_bar:
        table.add_column("best", no_wrap=True)
    table.add_column("" if with_bar else "best", no_wrap=True, justify="right")
    table.add_column("last", no_wrap=True, justify="right")
    table.add_column("tries", no_wrap=True, justify="right")
    table.add_column("when", no_wrap=True)
    table.add_column("next", no_wrap=True)
    for r in rows:
        ago = _ago(r["last_attempt"]) if r["last_attempt"] else "never"
        if r["last_not_graded"]:
            last = Text("not graded", style="yellow")
        else:
            last = "–" if r["last_points"] is None else f"{r['last_points']:g}/{r['max_points']:g}"
        cells = [r["lesson"]]
        if with_bar:
            cells.append(ProgressBar(total=r["max_points"] or 1, completed=r["points"], width=8))
        cells += [f"{r['points']:g}/{r['max_points']:g}", last, str(r["attempts"]), ago,
                  r["next"] or status_text("passed")]
        table.add_row(*cells)
    console.print(table)
    for r in rows:
        if r["last_not_graded"]:
            console.print(Text(f"{r['lesson']}: your last check was not graded: ", style="yellow")
                          .append(for_terminal(r["last_not_graded"], 500)), overflow="fold")
    pending = next((r for r in rows if r["next"]), None)
    if pending:
        click.echo(f"Next up: {pending['lesson']} {pending['next']}  →  course check {pending['lesson']}")
    else:
        click.echo("Every exercise passes. Well done.")


def _not_graded(attempt: dict) -> str:
    """Why an attempt in the progress store was not graded ("" when it was): its own words, or for a store
    written before attempts said so, a score of null."""
    if attempt.get("not_graded"):
        return str(attempt["not_graded"])
    return "the notebook could not be read" if attempt.get("score", 0) is None else ""


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
    from course_cli.student.progress import ProgressStore

    lesson_obj = _lesson(lesson)
    try:
        ex = lesson_obj.exercise(exercise)
    except LookupError as exc:
        raise CourseError(str(exc)) from None
    store = ProgressStore(_workspace())
    ident = store.last_diagnosis(lesson_obj.id, ex.name)
    lead = _cause_hint(lesson_obj.id, ex.name, ident)
    shown = store.next_hint(lesson_obj.id, ex.name, len(ex.hints), cause=ident if lead else None)
    from course_cli.render import make_console, render_hints

    # wrapped at the terminal's width, code spans in bold
    render_hints(make_console(), ex.hints, shown, lead=lead, after=None if lead else _fact_hint(ident),
                 hint_command=f"course hint {lesson_obj.id} {ex.name}")


def _cause_hint(lesson: str, exercise: str, ident: str | None) -> str | None:
    """The hint written for the cause the last check named (`ident`, its diagnosis id): a catalogued mistake's
    own `hint`, else its operator family's or structural kind's (graders/engine/kinds.py `hint_for`). None for
    a fact, no diagnosis, or a mistake with no hint written (then the exercise's own hints, nothing made up)."""
    from graders.engine.kinds import hint_for, is_catalogued, is_cause

    if not is_cause(ident):
        return None
    if is_catalogued(ident):
        from course_cli.classes.batch import _catalogue

        found = next((m for m in _catalogue(lesson) if m.id == ident and m.exercise == exercise), None)
        return (getattr(found, "hint", "") or None) if found is not None else None
    return hint_for(ident)


def _fact_hint(ident: str | None) -> str | None:
    """What to look at for a fact the last check stated (said after the exercise's own hints, never first)."""
    from graders.engine.kinds import hint_for, is_fact

    return hint_for(ident) if is_fact(ident) else None


@cli.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False))
@click.option("--no-references", is_flag=True, help="Do not build the lessons' reference observations now "
              "(each lesson's first check builds its own; as COURSE_INIT_REFERENCES=0).")
def init(directory: str | None, no_references: bool) -> None:
    """Make a workspace: your own copy of every lesson notebook, and a progress store.

    Run it again after updating the course: new lessons are added, your notebooks are never overwritten.

    Example: course init ~/attention
    """
    from pathlib import Path

    from course_cli.student.workspace_ops import init as init_ws

    target = Path(directory or ".").resolve()
    copied, kept = init_ws(target)
    for p in copied:
        click.echo(f"added   {p}")
    for p in kept:
        click.echo(f"kept    {p} (yours, untouched)")
    if not no_references:
        _build_references()
    click.echo(f"Workspace ready in {target}. Next: cd there, `course lab`, then `course check lesson01`.")


def _build_references() -> None:
    """Every lesson's reference observations, once per course version, so no first check waits for one."""
    from course_cli.sandboxed import references

    if not references.wanted():
        return
    lessons = references.missing()
    if not lessons:
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from course_cli.render import make_console

    console = make_console(file=sys.stderr)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=False) as bar:
        task = bar.add_task("Building the lessons' reference observations (once per course version)",
                            total=len(lessons))

        def done(lesson, error):
            bar.advance(task)
            if error:
                bar.console.print(f"warning: {lesson.id}'s reference was not built ({error.splitlines()[0][:200]}); "
                                  f"its first check will try again")

        references.build(lessons, done)


def _next_lesson(workspace: Path):
    """The first lesson with an exercise not yet passed, by the workspace's progress (`course status`'s "Next
    up"); None when every exercise passes or the progress cannot be read."""
    from course_cli.student.progress import ProgressStore

    try:
        data = ProgressStore(workspace).load()
    except Exception:  # a damaged store is `course status`'s to report; here it only means no prestart
        return None
    for lesson in LESSONS:
        best = data.get("lessons", {}).get(lesson.id, {}).get("best", {})
        if any(best.get(e.name, {}).get("status") != "passed" for e in lesson.exercises):
            return lesson
    return None


@cli.command()
@click.argument("lesson", required=False)
@click.argument("lab_args", nargs=-1, type=click.UNPROCESSED)
@click.option("--no-browser", is_flag=True, help="Do not open a browser (a container, a remote machine): open the "
              "URL JupyterLab prints.")
@click.option("--port", type=click.IntRange(1, 65535), help="The port to serve on (default: JupyterLab's, 8888).")
@click.option("--ip", help="The address to listen on (default 127.0.0.1; 0.0.0.0 in a container, to reach it from "
              "outside).")
@click.option("--print-command", is_flag=True, help="Only print the command that would start JupyterLab.")
def lab(lesson: str | None, lab_args: tuple[str, ...], no_browser: bool, port: int | None, ip: str | None,
        print_command: bool) -> None:
    """Open JupyterLab on your workspace's lessons, as a student (no nbgrader instructor panels). As root (a
    container, a cloud machine) it passes --allow-root and says so; anything after `--` goes to JupyterLab.

    Example: course lab lesson01 --no-browser --ip 0.0.0.0 --port 8888 -- --ServerApp.token=mysecret
    """
    import os
    import shlex
    import shutil

    from course_cli.student.workspace import notebook_path
    from course_cli.student.workspace_ops import JUPYTER_DIR, jupyter_config, kernel_spec

    if lesson is not None and lesson.startswith("-"):  # `course lab -- --flag`: no lesson, only JupyterLab's flags
        lab_args, lesson = (lesson, *lab_args), None
    workspace = _workspace_or_fail()
    jupyter_config(workspace)
    target = notebook_path(_lesson(lesson), workspace) if lesson else workspace / "lessons"
    beside = Path(sys.executable).parent / "jupyter"  # the environment the course is installed in
    exe = str(beside) if beside.exists() else shutil.which("jupyter") or "jupyter"
    # the workspace's config first, ahead of the environment's (where nbgrader enables its instructor extensions)
    env = {"JUPYTER_CONFIG_DIR": str(workspace / JUPYTER_DIR), "JUPYTER_PREFER_ENV_PATH": "0"}
    # the kernels: this environment's Python with course_cli.kernel_warm loaded (a lesson notebook's kernel
    # starts that lesson's warm grader), ahead of any other python3 kernelspec
    data = kernel_spec(workspace, sys.executable)
    env["JUPYTER_PATH"] = os.pathsep.join([str(data), *filter(None, [os.environ.get("JUPYTER_PATH")])])
    argv = [exe, "lab", str(target)]
    if no_browser:
        argv.append("--no-browser")
    if port is not None:
        argv.append(f"--port={port}")
    if ip is not None:
        argv.append(f"--ip={ip}")
    if hasattr(os, "geteuid") and os.geteuid() == 0 and "--allow-root" not in lab_args:
        click.echo("course lab: running as root (uid 0, as in a container): starting JupyterLab with --allow-root",
                   err=True)
        argv.append("--allow-root")
    argv += list(lab_args)
    if print_command:
        click.echo(" ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " " + shlex.join(argv))
        return
    # the check cells' warm grader, loading while JupyterLab starts: for the lesson asked for, else the one
    # `course status` says is next (where a student who opens the lessons folder most likely goes on)
    warm_for = _lesson(lesson) if lesson else _next_lesson(workspace)
    if warm_for is not None:
        from course_cli.sandboxed.warm import prestart, stay_with

        stay_with(os.getpid())  # JupyterLab takes this process over: the server ends with it
        prestart(warm_for, workspace)
    os.execvpe(exe, argv, {**os.environ, **env})


@cli.command()
@click.argument("lesson")
@click.argument("exercise", required=False)
@click.option("--notebook", "notebook", type=click.Path(), help="Reset this notebook file instead of yours.")
def reset(lesson: str, exercise: str | None, notebook: str | None) -> None:
    """Restore an exercise's pristine cell, or the whole notebook; your current notebook is backed up first.

    Example: course reset lesson01 softmax
    """
    from pathlib import Path

    from course_cli.sandboxed.notebook import NotebookError
    from course_cli.student.workspace import notebook_path
    from course_cli.student.workspace_ops import reset as reset_nb

    lesson_obj = _lesson(lesson)
    workspace = _workspace()
    path = Path(notebook) if notebook else notebook_path(lesson_obj, workspace)
    from course_cli.student.open_lab import open_in, reload_advice

    if path.is_dir():  # never replaced: it may hold the student's work
        raise CourseError(f"{path} is a folder, not a notebook: move it aside, then run `course reset "
                          f"{lesson_obj.id}` again")
    try:
        click.echo(reset_nb(lesson_obj, path, workspace, exercise))
    except (LookupError, NotebookError) as exc:
        raise CourseError(str(exc)) from None
    except OSError as exc:
        raise CourseError(f"could not reset {path}: {exc.strerror or exc}") from None
    urls = open_in(path)  # JupyterLab never reloads it by itself: its next save would undo the reset
    if urls:
        click.echo(reload_advice(path, urls))


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

    from course_cli.student.watch import watch as watch_nb
    from course_cli.student.workspace import notebook_path

    lesson_obj = _lesson(lesson)
    if exercise is not None:
        try:
            lesson_obj.exercise(exercise)
        except LookupError as exc:
            raise CourseError(str(exc)) from None
    workspace = _workspace()
    path = Path(notebook) if notebook else notebook_path(lesson_obj, workspace)
    watch_nb(lesson_obj, path, workspace, [exercise] if exercise else None, interval, record=not notebook)


@cli.command()
@click.argument("lesson")
@click.option("--notebook", "notebook", type=click.Path(exists=True, dir_okay=False),
              help="Benchmark this notebook instead of yours.")
@click.option("--solution", is_flag=True, help="Benchmark the course's reference solution.")
def bench(lesson: str, notebook: str | None, solution: bool) -> None:
    """Time your code against torch's (on GPU: GB/s or TFLOP/s, and the ratio to torch).

    Example: course bench lesson05
    """
    from course_cli.sandboxed.grading import run_benchmark
    from course_cli.render import make_console, render_bench
    from course_cli.student.workspace import notebook_path

    lesson_obj = _lesson(lesson)
    path = lesson_obj.solution_path if solution else notebook or notebook_path(lesson_obj, _workspace())
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
@click.option("--out", "out", type=click.Path(dir_okay=False), help="Write results.json or results.csv "
              "(a file already there is kept as OUT.bak).")
@click.option("--student", "students", multiple=True, help="Grade only this student (repeatable); with --out, "
              "the file's other students are kept.")
@click.option("--insecure", is_flag=True, help="Grade even without the sandbox (bubblewrap): the submissions' code "
              "then runs as you, with your files and network. Recorded in the results.")
@click.option("--partial", is_flag=True, help="Partial credit: an exercise that did not pass scores its points in "
              "proportion to its passed checks (weighted as the registry says); default: all or nothing.")
@click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=None,
              help="The hidden checks' seed (default: drawn for this run, and kept in the JSON results): "
                   "give a past run's seed to repeat it exactly.")
@click.option("--scheduler", "scheduler", help="Grade on Dask distributed: a TLS scheduler's address "
              "(tls://host:8786), or `local` for a LocalCluster on this machine, over TLS with certificates "
              "made for the run (needs the `cluster` extra; docs/deploying.md).")
@click.option("--tls-ca-file", "tls_ca_file", type=click.Path(dir_okay=False), help="With --scheduler "
              "tls://...: the cluster's CA certificate (default: Dask's distributed.comm.tls.ca-file).")
@click.option("--tls-cert", "tls_cert", type=click.Path(dir_okay=False), help="With --scheduler tls://...: "
              "this client's certificate, signed by that CA (default: distributed.comm.tls.client.cert).")
@click.option("--tls-key", "tls_key", type=click.Path(dir_okay=False), help="With --scheduler tls://...: "
              "this client's private key (default: distributed.comm.tls.client.key).")
@click.option("--insecure-cluster", is_flag=True, help="Allow a plain tcp:// scheduler (or a plain-TCP "
              "--scheduler local): anyone who reaches its ports can join it and run code as you. Warned, "
              "and recorded in the results.")
@click.option("--workers", "workers", type=click.IntRange(min=1), help="With --scheduler local: worker "
              "processes (default: --jobs).")
@click.option("--journal", "journal", type=click.Path(dir_okay=False), help="The results journal, one line "
              "per graded submission as it arrives [default: OUT.journal with --out].")
@click.option("--resume", is_flag=True, help="Continue an interrupted batch (with its hidden seed): keep the "
              "journal's results, grade only the missing (or changed) submissions.")
@click.option("--roster", "roster", type=click.Path(exists=True, dir_okay=False), help="The class list, one "
              "student id a line (or a CSV whose first column is the id): who submitted nothing gets a "
              "`not submitted` row (NOT GRADED: no score, left out of the mean).")
def grade(submissions: str, lesson: str, jobs: int, out: str | None, students: tuple[str, ...],
          insecure: bool, partial: bool, seed: int | None, scheduler: str | None, workers: int | None,
          journal: str | None, resume: bool, roster: str | None = None, tls_ca_file: str | None = None,
          tls_cert: str | None = None, tls_key: str | None = None, insecure_cluster: bool = False) -> None:
    """Grade a class: a folder of submissions (nbgrader's submitted/<student>/<lesson>/, or a flat folder of
    notebooks), in parallel, each in its own sandbox, with pass rates and the most frequent mistakes.
    Exit code 0 when every submission was graded, 1 when the grader could not grade some (see its rows).
    Results are journalled as they arrive, so an interrupted batch continues with --resume.

    Example: course grade submitted/ --lesson lesson01 --jobs 2 --out results.csv
    (on Dask: course grade submitted/ --lesson lesson01 --scheduler tls://head:8786 --tls-ca-file ca.pem
    --tls-cert client.pem --tls-key client.key --out results.csv)
    """
    from pathlib import Path

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from course_cli.classes import grade as klass
    from course_cli.render import make_console
    from course_cli.sandboxed import sandbox
    from course_cli.settings import Limits, Run, current, using

    lesson_obj = _lesson(lesson)
    if journal is None and out:
        journal = out + ".journal"
    try:
        p = klass.plan(lesson_obj, Path(submissions), students, Path(roster) if roster else None,
                       Path(journal) if journal else None, resume, seed, scheduler, workers,
                       klass.access(tls_ca_file, tls_cert, tls_key, insecure_cluster))
    except klass.ClassError as exc:
        raise CourseError(str(exc)) from None
    if p.insecure_cluster:
        click.echo(klass.INSECURE_WARNING, err=True)
    sandbox.HIDDEN_PATHS.add(str(Path(submissions).resolve()))  # covered, should it lie inside a folder shown
    given = current()  # the environment's (COURSE_INSECURE, COURSE_HIDDEN_SEED), the options over it
    settings = Run(Limits.from_env(), insecure or given.insecure, p.seed if p.seed is not None else given.hidden_seed)
    with using(settings):
        from course_cli.settings import hidden_seed

        seed = hidden_seed()  # the hidden checks' inputs of this run
        try:
            sandbox.require_sandbox()
        except sandbox.SandboxUnavailable as exc:
            raise CourseError(str(exc)) from None
        if settings.insecure and not sandbox.bwrap_status()[0]:
            click.echo(f"warning: grading WITHOUT the sandbox (--insecure): {sandbox.bwrap_status()[1]}; every "
                       f"submission's code runs as you, with your files and network", err=True)
        for student, why in sorted({**p.renamed, **p.absent}.items()):
            click.echo(for_terminal(f"{student}: {why}"), err=True)
        if resume and not Path(journal).exists():
            click.echo(f"no journal at {journal} yet: grading every submission", err=True)
        console = make_console(file=sys.stderr)
        with Progress(TextColumn("grading {task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeRemainingColumn(), console=console, transient=False) as progress:
            task = progress.add_task(lesson_obj.id, total=len(p.submissions))
            try:
                results = klass.run(p, jobs, students, resume, partial, scheduler, workers,
                                    on_done=lambda s, r: progress.advance(task),
                                    on_resumed=lambda n: resumed(progress, task, n, journal))
            except klass.ClassError as exc:
                raise CourseError(str(exc)) from None
            except KeyboardInterrupt:
                progress.stop()
                click.echo(f"interrupted{f': the results so far are in {journal}; continue with --resume' if journal else ''}",
                           err=True)
                sys.exit(130)
    _render_class(lesson_obj, results, out, students, seed, p.insecure_cluster)


def _render_class(lesson_obj, results, out, students, seed, insecure_cluster: bool = False) -> None:
    """`course grade`'s output: the table of pass rates, the most frequent mistakes, the results files."""
    from pathlib import Path

    from rich.table import Table

    from course_cli.classes.batch import any_errors, summary, write
    from course_cli.render import make_console
    from course_cli.sandboxed import sandbox

    info = summary(results)
    out_console = make_console()
    apart = f" ({len(info['not_graded'])} NOT GRADED, not in the mean)" if info["not_graded"] else ""
    table = Table(title=f"{lesson_obj.id}: {info['students']} submissions graded{apart}, mean score "
                        f"{info['mean_score']:g}/{lesson_obj.max_score:g}", title_justify="left")
    for col in ("exercise", "passed", "pass rate", "other statuses"):
        table.add_column(col)
    for e in info["exercises"]:
        others = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in e["statuses"].items() if k != "passed")
        table.add_row(e["exercise"], str(e["passed"]), f"{e['pass_rate']:.0%}", others)
    out_console.print(table)
    if info["misconceptions"]:
        d = Table(title="Most frequent mistakes (what to re-teach; `course report` says who)", title_justify="left")
        d.add_column("students", justify="right")
        d.add_column("exercise")
        d.add_column("mistake", overflow="fold")
        for row in info["misconceptions"][:10]:
            d.add_row(str(row["students"]), row["exercise"], f"{row['id']}: {row['example']}")
        out_console.print(d)
    from course_cli.instructor.unnamed import shared

    same = shared(results, lesson_obj.id)
    if same:
        u = Table(title="Failures with no named cause, grouped by behaviour (the same checks fail with the same "
                        "messages)", title_justify="left")
        u.add_column("group", no_wrap=True)
        u.add_column("students", justify="right")
        u.add_column("what they share", overflow="fold")
        for g in same[:10]:
            u.add_row(g.id, str(len(g.who)), for_terminal(g.headline().split(": ", 1)[1], 400))
        out_console.print(u)
        if out and out.endswith(".json"):
            click.echo(f"a group as a draft catalogue entry: course draft-mistake {out} {same[0].id}")
    if out:
        try:
            write(results, Path(out), update=bool(students), insecure=not sandbox.bwrap_status()[0], seed=seed,
                  insecure_cluster=insecure_cluster)
        except (OSError, ValueError) as exc:  # a folder that is not there, a link at OUT with --student...
            raise CourseError(for_terminal(f"could not write {out}: {getattr(exc, 'strerror', None) or exc}")) from None
        click.echo(f"wrote {out}")
    if any_errors(results):
        bad = sorted(s for s, r in results.items() if any_errors({s: r}))
        click.echo(for_terminal(f"could not grade {len(bad)} submission(s): {', '.join(bad[:10])} (their rows say why)"),
                   err=True)
        sys.exit(1)


@cli.command()
@click.argument("results", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", "out", default="report.html", show_default=True, type=click.Path(dir_okay=False),
              help="The HTML page to write.")
@click.option("--progress", "progress", type=click.Path(exists=True, file_okay=False),
              help="A folder of the students' progress files (<student>/.course/progress.json): adds time-to-pass.")
@click.option("--anonymous", is_flag=True, help="Show no student's name anywhere on the page.")
@click.option("--help-below", "help_below", type=click.FloatRange(0, 1, max_open=False), default=0.6,
              show_default=True, help="Who needs help: graded students below this share of the lesson's points.")
def report(results: str, out: str, progress: str | None, anonymous: bool, help_below: float = 0.6) -> None:
    """Write a class report, one self-contained HTML page, from `course grade --out results.json`: the score
    histogram, pass rates, the most frequent mistakes, errors and timeouts, the exercises the class missed.

    Example: course report results.json --out report.html --progress collected/
    """
    from pathlib import Path

    from course_cli.instructor.report import write_report

    try:
        data = write_report(Path(results), Path(out), Path(progress) if progress else None, anonymous, help_below)
    except ValueError as exc:
        raise CourseError(str(exc)) from None
    flagged = ", ".join(o["exercise"] for o in data["outliers"]) or "none"
    click.echo(f"wrote {out}: {data['students']} submissions of {data['lesson']}, mean score "
               f"{data['mean_score']:g}/{data['max_score']:g}; exercises the class missed: {flagged}; "
               f"{len(data['needs_help'])} student(s) below {help_below:.0%} of the points")


@cli.command("draft-mistake")
@click.argument("results", type=click.Path(exists=True, dir_okay=False))
@click.argument("group")
@click.option("--out", "out", type=click.Path(dir_okay=False), help="The file to write [default: "
              "draft-<exercise>-<hex>.py]; an existing file is kept as <out>.bak first.")
def draft_mistake(results: str, group: str, out: str | None) -> None:
    """Write a group of failures with no named cause (`course grade` and `course report` list them) as a draft
    catalogue entry for the lesson's author: what the group's submissions do, the simplest failing check first,
    and one student's cell that defines the exercise (read from the submission as data, never run).

    Example: course draft-mistake results.json causal_mask:3f2a1c
    """
    from course_cli.classes.batch import load
    from course_cli.instructor.unnamed import draft, find_group

    try:
        lesson, res = load(Path(results))
        g = find_group(res, group, lesson)
    except (ValueError, LookupError) as exc:
        raise CourseError(for_terminal(str(exc), 2000)) from None
    target = Path(out or f"draft-{g.id.replace(':', '-')}.py")
    text = draft(g, res, lesson or "")
    from course_cli.atomic import write_text

    try:  # an unpredictable name, then renamed: a link at the target is replaced (kept as .bak), not followed
        write_text(target, text, backup=True)
    except OSError as exc:
        raise CourseError(f"could not write {target}: {exc.strerror or exc}") from None
    click.echo(for_terminal(f"wrote {target}: {g.headline()}", 1000))


@cli.command()
@click.argument("lesson")
@click.option("--out", "out", default="autograder.zip", show_default=True, type=click.Path(dir_okay=False),
              help="The zip to upload to Gradescope.")
def gradescope(lesson: str, out: str) -> None:
    """Build a Gradescope autograder for a lesson: upload the zip as a programming assignment's autograder
    (Ubuntu 22.04 base image, Gradescope's default; 24.04 works too). Each submission is graded as `course grade` grades it, one test per exercise.

    Example: course gradescope lesson01 --out autograder.zip
    """
    from pathlib import Path

    from course_cli.instructor.gradescope import build_zip

    lesson_obj = _lesson(lesson)
    try:
        names = build_zip(lesson_obj, Path(out))
    except OSError as exc:
        raise CourseError(f"could not write {out}: {exc.strerror or exc}") from None
    click.echo(f"wrote {out} ({len(names)} files) for {lesson_obj.id}: on Gradescope, create a programming "
               f"assignment worth {lesson_obj.max_score:g} points, keep the default Ubuntu 22.04 base image, upload "
               f"{Path(out).name} as its autograder; students submit {lesson_obj.notebook}")


@cli.command()
@click.argument("lessons", nargs=-1)
@click.option("--dir", "directory", default=".", show_default=True, type=click.Path(file_okay=False),
              help="The template repository to write .github/ into.")
@click.option("--package", "package", required=True,
              help="What `pip install` gets the course from on GitHub's runner: the student distribution "
                   "(a wheel URL or `attention-course @ git+https://...`), never the repository with solutions.")
@click.option("--notebooks", "notebooks", default="lessons", show_default=True,
              help="Where the notebooks sit in the students' repositories.")
def classroom(lessons: tuple[str, ...], directory: str, package: str, notebooks: str) -> None:
    """Write GitHub Classroom autograding into a template repository: a workflow that runs the public checks on
    every push (`course check LESSON --public --json`) and reports each exercise's points. No LESSONS: all.

    Example: course classroom lesson01 lesson02 --dir my-template --package "attention-course @ git+https://github.com/me/course-dist"
    """
    from pathlib import Path

    from course_cli.instructor.classroom import write as write_classroom

    chosen = [_lesson(k) for k in lessons] or list(LESSONS)
    target = Path(directory)
    try:
        done = write_classroom(target, chosen, package, notebooks)
    except ValueError as exc:  # --notebooks outside the repository: said at once, nothing written
        raise CourseError(str(exc)) from None
    for path, what in done:
        click.echo(f"{what:9} {path}")
    total = sum(l.max_score for l in chosen)
    click.echo(f"{len(chosen)} lesson(s), {total:g} points. Commit .github/ to the template repository; "
               f"GitHub Classroom picks up the workflow and shows each exercise's points.")


def resumed(progress, task, n: int, journal: str) -> None:
    progress.advance(task, n)
    if n:
        progress.console.print(f"{n} result{'s' if n != 1 else ''} kept from {journal}")


@cli.command("nbgrader")
@click.argument("directory", type=click.Path(file_okay=False))
@click.option("--course-id", default="attention-course", show_default=True, help="nbgrader's course id.")
@click.option("--pack/--no-pack", default=True, show_default=True,
              help="Also write the student distribution (what students install) into DIRECTORY/student-package.")
def nbgrader_cmd(directory: str, course_id: str, pack: bool) -> None:
    """Create (or update) a ready nbgrader course for instructors in DIRECTORY, and the student distribution
    to hand out (no solutions in it) in DIRECTORY/student-package.

    Then use nbgrader's own commands: generate_assignment, autograde, generate_feedback, export.

    Example: course nbgrader ~/teaching/attention
    """
    from pathlib import Path

    from course_cli.instructor.nbgrader_course import make_course

    target = Path(directory).resolve()
    try:
        done = make_course(target, course_id)
    except OSError as exc:  # a folder, or a file we may not replace, where a course file goes
        where = getattr(exc, "filename", None) or target
        raise CourseError(for_terminal(f"could not write {where}: {exc.strerror or exc}: move it aside and run "
                                       f"course nbgrader again")) from None
    for p in done["written"]:
        click.echo(f"wrote  {p.relative_to(target)}")
    for p in done["kept"]:
        if p in done["updated"]:
            click.echo(f"added  to {p.relative_to(target)}: ExchangeFactory.collect, the course's link-refusing "
                       f"collect (it was made before it; the file before is {p.name}.bak)")
        else:
            click.echo(f"kept   {p.relative_to(target)} (already there)")
    for line in done["warnings"]:
        click.echo(line, err=True)
    if pack:
        from course_cli.instructor.pack import make_pack

        dist = target / "student-package"
        if dist.exists() and any(dist.iterdir()):
            click.echo(f"kept   {dist.relative_to(target)} (already there; `course pack NEWDIR` makes a fresh one)")
        else:
            make_pack(dist)
            click.echo(f"wrote  {dist.relative_to(target)}/ (the student distribution: hand this out, never the "
                       f"course repository)")
    click.echo(f"Ready: cd {target} && nbgrader generate_assignment lesson01")


@cli.command()
@click.argument("directory", type=click.Path(file_okay=False))
def pack(directory: str) -> None:
    """Write the student distribution of a graded class into DIRECTORY: release notebooks, graders with the
    public checks only, the public checks' reference observations as data; no solutions, no hidden checks,
    no mistakes' code. Students install it with `pip install DIRECTORY`.

    Example: course pack ~/teaching/attention-student
    """
    from pathlib import Path

    from graders.registry import STUDENT_DISTRIBUTION

    from course_cli.instructor.pack import make_pack

    if STUDENT_DISTRIBUTION:
        raise CourseError("this is already the student distribution: run `course pack` from the course repository")
    try:
        done = make_pack(Path(directory).resolve())
    except FileExistsError as exc:
        raise CourseError(str(exc)) from None
    except OSError as exc:  # e.g. the folder was replaced by a link meanwhile: the rename into place refused
        raise CourseError(f"could not write {directory}: {exc.strerror or exc}") from None
    click.echo(f"wrote {done['target']}: {len(done['lessons'])} lessons; students install it with "
               f"`pip install {done['target']}`")


@cli.command(hidden=True)
@click.option("--check", "check_only", is_flag=True, help="Only report notebooks that are out of date.")
def build(check_only: bool) -> None:
    """Regenerate lessons/ from solutions/ with nbgrader's preprocessors (for course developers).

    Example: course build --check
    """
    from course_cli.instructor.build import build as build_all

    stale = build_all(check=check_only)
    for p in stale:
        click.echo(f"{'out of date' if check_only else 'wrote'}: {p}")
    if check_only and stale:
        sys.exit(1)
