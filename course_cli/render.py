"""Rich rendering of results: one table per lesson, details for what did not pass."""

from __future__ import annotations

import os
import sys

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

STYLE = {"passed": ("✓", "green"), "failed": ("✗", "red"), "error": ("!", "red"), "timeout": ("⏱", "yellow"),
         "not_implemented": ("·", "dim"), "skipped": ("–", "dim")}


def make_console(file=None, jupyter: bool = False) -> Console:
    """A console that respects NO_COLOR and plain (non-terminal) output; in a notebook, Rich's own HTML."""
    no_color = "NO_COLOR" in os.environ
    if jupyter:
        return Console(no_color=no_color, highlight=False)
    return Console(file=file or sys.stdout, no_color=no_color, highlight=False, soft_wrap=False)


def status_text(status: str) -> Text:
    mark, style = STYLE.get(status, ("?", ""))
    return Text(f"{mark} {status.replace('_', ' ')}", style=style)


def _points(p: float, m: float) -> str:
    return f"{p:g}/{m:g}"


def lesson_table(result, title: str = "") -> Table:
    table = Table(title=title or None, title_justify="left", show_lines=False, expand=False)
    table.add_column("exercise", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("points", justify="right", no_wrap=True)
    table.add_column("why", overflow="fold", max_width=90)
    for ex in result.exercises:
        why = Text(ex.reason if ex.status != "passed" else "")
        if ex.diagnosis:
            why.append("\nLikely mistake: ", style="bold yellow").append(ex.diagnosis)
        table.add_row(ex.id, status_text(ex.status), _points(ex.points, ex.max_points), why)
    return table


def check_details(ex) -> Table | None:
    rows = [c for c in ex.checks if c.status not in ("passed", "skipped")]
    if not rows:
        return None
    t = Table(title=f"{ex.id}: checks that did not pass", title_justify="left", box=None, padding=(0, 1))
    t.add_column("check", no_wrap=True)
    t.add_column("on", no_wrap=True, style="dim")
    t.add_column("status", no_wrap=True)
    t.add_column("message", overflow="fold", max_width=100)
    for c in rows:
        t.add_row(c.name, f"{c.device}/{c.dtype}", status_text(c.status), c.message)
    skipped = sum(c.status == "skipped" for c in ex.checks)
    if skipped:
        t.caption = f"{skipped} GPU check(s) skipped: no CUDA device here (skipped is not passed)"
    return t


def exercise_table(result, ex) -> Group:
    single = type(result)(result.lesson, result.notebook, [ex])
    parts = [lesson_table(single)]
    details = check_details(ex)
    if details is not None:
        parts.append(details)
    return Group(*parts)


def render_result(console: Console, result, lesson_title: str, verbose: bool = False) -> None:
    console.print(lesson_table(result, f"{result.lesson} — {lesson_title}   [dim]{result.notebook}[/dim]"))
    for ex in result.exercises:
        if ex.status != "passed" and ex.status != "not_implemented" or verbose:
            details = check_details(ex)
            if details is not None:
                console.print(details)
    for note in result.notes[:5]:
        console.print(Text("note: ", style="yellow").append(Text(note)))
    passed = sum(e.status == "passed" for e in result.exercises)
    style = "bold green" if result.all_passed else "bold"
    console.print(Text(f"Score {result.score:g}/{result.max_score:g} · {passed} of {len(result.exercises)} "
                       f"exercises passed", style=style))
    nxt = next((e for e in result.exercises if e.status != "passed"), None)
    if nxt is not None:
        console.print(Text(f"Next: {nxt.id} — `course hint {result.lesson} {nxt.id}` if you are stuck.", style="dim"))


def render_bench(console: Console, report: dict) -> None:
    table = Table(title=report.get("title"), title_justify="left")
    for col in report.get("columns", []):
        table.add_column(str(col), justify="right")
    for row in report.get("rows", []):
        table.add_row(*[f"{v:.4g}" if isinstance(v, float) else str(v) for v in row])
    console.print(table)
    for note in report.get("notes", []):
        console.print(Text(f"note: {note}", style="dim"))
