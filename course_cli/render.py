"""Rendering results: per exercise its status, one message, the likely mistake, and where to look next.

The rule is *one failure, one message*: an exercise that did not pass shows the first failing check (shape,
dtype and exceptions before values, since a wrong shape explains every value after it; then the check that
explains most, `explains`), the likely mistake when a cause was reproduced ("Likely mistake:") or the facts
about the numbers when none was ("What the numbers show:", never under the other label), and "N more
checks failed" with the command that lists them (`--detail`). The tolerance is said once, under the results,
not in every message. The terminal layout is a table at 90 columns or more, and stacks
(status line, then the message wrapped to the width) below that, instead of squeezing columns.

`exercise_html` is the same report as HTML for a notebook's output area: it wraps to the area's width and puts
the other failing checks in a collapsed section. No torch here: results are plain data (graders/engine/results.py).
"""

from __future__ import annotations

import html
import os
import re
import sys

from rich.console import Console, Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from graders.engine.kinds import is_fact, structural_kind
from graders.engine.results import HIDDEN_MESSAGE

STYLE = {"passed": ("✓", "green"), "failed": ("✗", "red"), "error": ("!", "red"), "timeout": ("⏱", "yellow"),
         "not_implemented": ("·", "dim"), "skipped": ("–", "dim")}

WIDE = 90  # at this many columns or more the results are a table; below, they stack

_TOLERANCE = re.compile(r"[;,]?\s*tolerance (atol=[^,]+, rtol=[^\s;]+(?: \([^)]*\))?)")


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


def plural(n: float, word: str) -> str:
    """`1 point`, `2 points`, `0.5 points`."""
    return f"{n:g} {word}" + ("" if n == 1 else "s")


# ------------------------------------------------------------------------------------------------
# Which check to show, and its message without the tolerance


def split_tolerance(message: str) -> tuple[str, str | None]:
    """The message without its tolerance clause, and the clause (None when it has none)."""
    m = _TOLERANCE.search(message)
    if not m:
        return message, None
    return (message[:m.start()] + message[m.end():]).rstrip(" ;,"), m.group(1)


_VALUES = re.compile(r"^(?P<what>.*?) differs from the reference at (?P<n>\d+) of (?P<total>\d+) positions: "
                     r"max abs error (?P<abs>\S+) at index (?P<worst>\([^)]*\)) \(expected [^,]+, got [^)]+\), "
                     r"max rel error \S+; first bad index (?P<first>\([^)]*\)) \(expected (?P<fe>[^,]+), "
                     r"got (?P<fg>[^)]+)\)(?P<rest>.*)$", re.S)


def shorten(message: str) -> str:
    """A value comparison said in one sentence: how many positions, the first bad one, the largest error."""
    m = _VALUES.match(message)
    if not m:
        return message
    return (f"{m['what']} differs at {m['n']} of {m['total']} positions; first at {m['first']}: expected "
            f"{m['fe']}, got {m['fg']} (max abs error {m['abs']}){m['rest']}")


def _rank(c) -> int:
    """The order failures are told in: what stops the code from running first, then shape, dtype, exceptions,
    values. (A wrong shape makes every later comparison fail too, so it is the one to fix first.)"""
    if c.status in ("not_implemented", "timeout"):
        return 0
    return {"shape": 1, "dtype": 2, "device": 2}.get(c.failure) or (3 if c.status == "error" else 4)


# A check's message that compares values with a reference (a whole result, position by position, or a number
# or shape against the expected one), as the judges word it, or that is about what a bad input must raise; a
# message that does neither states a broken rule about the result itself ("each query's weights should sum
# to 1", "40 masked positions got a nonzero weight").
_COMPARISON = re.compile(r"\bthe reference\b|\(against |\bdiffers at \d+ of \d+ positions|\bexpected\b|\braise")
_FIX_FIRST = re.compile(r"\bfix `[^`]+`(?: and `[^`]+`)* first\b")
HIDDEN_TWIN = " (fresh inputs)"  # graders/engine/checks.py HIDDEN_TWIN: a public check's property on fresh draws
DOMAIN = "over its declared domain"  # graders/engine/checks.py Checks.domain's check name
_HIDDEN_SAID = HIDDEN_MESSAGE.split("{", 1)[0]  # what students read of a hidden check's message


def explains(c) -> tuple[int, int, int, int, float]:
    """Which of two failing checks of one rank explains more (smaller first): a check that says a part it
    calls fails ("fix `X` first"); a check the lesson declared, before the same property on other inputs (its
    hidden twin's fresh draws, the drawn examples over the domain, the input battery's changed inputs, all
    after the declared checks in the results); a rule stated about the result (rows summing to 1, a mask
    respected, the code's own outputs against each other: failure "property") before a comparison with a
    reference; a comparison of the forward values before one of
    gradients, which a wrong forward makes wrong too; of two still alike, the one that observed fewer values
    (`CheckResult.size`, 0 unknown: last), whose input is the simpler."""
    msg = c.message or ""
    first = msg.split("\n", 1)[0]
    derived = (c.name.endswith(HIDDEN_TWIN) or c.name.startswith(DOMAIN) or _battery_entry(c)
               or msg.startswith(_HIDDEN_SAID))
    comparison = c.failure != "property" and bool(_COMPARISON.search(first))
    gradient = comparison and bool(re.search(r"\bgradients? (?:of \S+ )?differs?\b", first))
    size = getattr(c, "size", 0) or float("inf")
    return (0 if _FIX_FIRST.search(msg) else 1, int(derived), int(comparison), int(gradient), size)


def _battery_entry(c) -> bool:
    """Whether `c` is an entry of the standard input battery: its message says first what its inputs changed
    ("with float64 inputs ...: <the base check's message>", graders/engine/checks.py BATTERY)."""
    return (c.message or "").startswith("with ") and ": " in (c.message or "") and c.kind == "check"


def failing_checks(ex) -> list:
    """The checks that did not pass, in the order they are told: by rank (what stops the code, shape, dtype,
    exceptions, values), then by what explains more (`explains`), then as the lesson declares them."""
    rows = [c for c in ex.checks if c.status not in ("passed", "skipped")]
    own = ex.status in ("not_implemented", "timeout")  # the exercise's own status first
    return sorted(rows, key=lambda c: (_rank(c), own and c.status != ex.status, explains(c)))


def first_failure(ex):
    rows = failing_checks(ex)
    return rows[0] if rows else None


def _where(c) -> str:
    return "" if (c.device, c.dtype) == ("cpu", "float32") else f" [{c.device}/{c.dtype}]"


_HIDDEN_ONLY_HEAD = "passes the public checks; fails "


def check_message(c) -> str:
    """`check name: message`, the tolerance left out (it is said once); the first line of a long message."""
    msg, _ = split_tolerance(c.message or c.status.replace("_", " "))
    lines = shorten(msg).splitlines() or [""]
    first = lines[0]
    if len(lines) > 1 and lines[1].startswith("  at "):  # the student's own line, for exceptions
        first += " (" + lines[-1].strip().removeprefix("at ") + ")"
    if c.kind in ("absent", "grader") or first.startswith(_HIDDEN_ONLY_HEAD):
        return first  # (the hidden-only line names its checks itself)
    return f"{c.name}{_where(c)}: {first}"


def blocked_by(lesson_id: str, result) -> dict[str, list[str]]:
    """Exercises that failed while an exercise they call (registry `depends`) failed too: {name: [deps]}."""
    from graders.registry import find_lesson

    try:
        lesson = find_lesson(lesson_id)
    except LookupError:
        return {}
    bad = {e.id for e in result.exercises if e.status not in ("passed", "skipped")}
    out = {}
    for e in result.exercises:
        if e.id not in bad or e.status == "not_implemented":  # its own message says where it stops
            continue
        try:
            deps = getattr(lesson.exercise(e.id), "depends", ())
        except LookupError:
            continue
        failing = [d for d in deps if d in bad]
        if failing:
            out[e.id] = failing
    return out


def _code(names: list[str]) -> str:
    return " and ".join(f"`{n}`" for n in names)


def summary_parts(ex, lesson: str, blockers: list[str] | None = None,
                  detail: bool = False) -> list[tuple[str, str, str]]:
    """The lines that explain one exercise that did not pass: (label, text, style) triples. An exercise
    whose dependency fails too gets one line, pointing back at it (its own checks are under --detail)."""
    if ex.status == "passed":
        return []
    if blockers:
        return [("", blocker_line(blockers), "bold")]
    rows = failing_checks(ex)
    parts: list[tuple[str, str, str]] = []
    if ex.status == "not_implemented" and rows and rows[0].status == "not_implemented":
        msg = split_tolerance(rows[0].message or "not implemented")[0].splitlines()[0]
        return [("", msg, "")]  # one line: every other check fails for the same reason
    if rows:
        parts.append(("", check_message(rows[0]), ""))
    else:
        parts.append(("", ex.reason or ex.status.replace("_", " "), ""))
    if ex.diagnosis:
        parts.append((diagnosis_label(ex.diagnosis_id, ex.diagnosis), ex.diagnosis, "bold yellow"))
    if len(rows) > 1 and not detail:
        parts.append(("", f"{len(rows) - 1} more {'check' if len(rows) == 2 else 'checks'} failed: "
                          f"`course check {lesson} {ex.id} --detail`", "dim"))
    return parts


LIKELY = "Likely mistake: "  # a cause the engine reproduced (a catalogued mistake, a mutant) or checked
FACTS = "What the numbers show: "  # a fact about the student's numbers, said where no cause was shown


def diagnosis_label(ident: str | None, text: str | None = None) -> str:
    """The label a diagnosis is shown under: LIKELY for a cause, FACTS for a fact (graders/engine/kinds.py
    `is_fact`; a results file written before ids were stored is read by its sentence)."""
    return FACTS if is_fact(ident or (structural_kind(text) if text else None)) else LIKELY


def blocker_line(blockers: list[str]) -> str:
    return f"fix {_code(blockers)} first: {'it fails' if len(blockers) == 1 else 'they fail'} too"


def _styled(text: str, style: str = "") -> Text:
    """`code` spans in bold, without their backticks (a terminal has no other way to show code)."""
    out = Text()
    for i, piece in enumerate(text.split("`")):
        out.append(piece, style=("bold " + style).strip() if i % 2 else style)
    return out


def _parts_text(parts) -> Text:
    out = Text()
    for i, (label, text, style) in enumerate(parts):
        if i:
            out.append("\n")
        if label:
            out.append(label, style=style or "bold")
            out.append_text(_styled(text))
        else:
            out.append_text(_styled(text, style))
    return out


def tolerances(result, detail: bool = False) -> list[str]:
    """The distinct tolerance clauses of the messages shown (all failing checks' with `detail`)."""
    seen = []
    for ex in result.exercises:
        rows = failing_checks(ex) if detail else failing_checks(ex)[:1]
        for c in rows:
            tol = split_tolerance(c.message or "")[1]
            if tol and tol not in seen:
                seen.append(tol)
    return seen


def _tolerance_line(tols: list[str]) -> Text | None:
    """The tolerance, said once: the first message's (checks that allow more say so with `--detail`)."""
    if not tols:
        return None
    return Text(f"Values are compared within {tols[0]}.", style="dim")


# ------------------------------------------------------------------------------------------------
# The terminal


def lesson_table(result, title: str = "", blockers: dict | None = None, detail: bool = False) -> Table:
    """The wide layout: one row per exercise, one explanation each."""
    blockers = blockers if blockers is not None else blocked_by(result.lesson, result)
    table = Table(title=title or None, title_justify="left", show_lines=False, expand=False)
    table.add_column("exercise", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("points", justify="right", no_wrap=True)
    table.add_column("why", overflow="fold", min_width=40)
    for ex in result.exercises:
        why = _parts_text(summary_parts(ex, result.lesson, blockers.get(ex.id), detail))
        table.add_row(ex.id, status_text(ex.status), _points(ex.points, ex.max_points), why)
    return table


def _stacked(console: Console, result, blockers: dict, detail: bool = False) -> None:
    """The narrow layout: a status line per exercise, then its explanation indented, wrapped to the width."""
    width = min(max((len(e.id) for e in result.exercises), default=0), 32)
    swidth = max((len(e.status) for e in result.exercises), default=0)
    for ex in result.exercises:
        mark, style = STYLE.get(ex.status, ("?", ""))
        line = Text(f"{mark} ", style=style)
        line.append(ex.id.ljust(width), style="bold")
        line.append(f"  {ex.status.replace('_', ' '):<{swidth}}", style=style)
        line.append(f" {_points(ex.points, ex.max_points):>5}")
        if ex.id in blockers:  # one line if it fits: the exercise to fix first
            pointer = _styled(blocker_line(blockers[ex.id]), "bold")
            if len(line) + 2 + len(pointer) <= console.width:
                console.print(line.append("  ").append_text(pointer), overflow="fold")
            else:
                console.print(line, overflow="fold")
                console.print(Padding(pointer, (0, 0, 0, 2)), overflow="fold")
            continue
        console.print(line, overflow="fold")
        parts = summary_parts(ex, result.lesson, blockers.get(ex.id), detail)
        if parts:
            console.print(Padding(_parts_text(parts), (0, 0, 0, 2)), overflow="fold")


def detail_groups(ex) -> list[tuple[list, str]]:
    """The failing checks of `ex` grouped by message (numbers aside: the same error on other sizes is one),
    each group with the first check's message, tolerance left out."""
    groups: dict[str, tuple[list, str]] = {}
    for c in failing_checks(ex):
        msg = split_tolerance(c.message or c.status.replace("_", " "))[0]
        key = re.sub(r"-?\d+(\.\d+)?(e[-+]?\d+)?", "#", msg)
        groups.setdefault(key, ([], msg))[0].append(c)
    return list(groups.values())


def check_details(ex, lesson: str = "") -> Group | None:
    """Every check of `ex` that did not pass, the same message said once (`--detail`)."""
    groups = detail_groups(ex)
    if not groups:
        return None
    n = sum(len(cs) for cs, _ in groups)
    parts = [Text(f"{ex.id}: {plural(n, 'check')} did not pass", style="bold")]
    for cs, msg in groups:
        mark, style = STYLE.get(cs[0].status, ("?", ""))
        head = Text(f"{mark} ", style=style).append("; ".join(f"{c.name}{_where(c)}" for c in cs), style="bold")
        if len(cs) > 1:
            head.append(f" ({len(cs)} checks, the same message)", style="dim")
        parts += [head, Padding(Text(msg), (0, 0, 0, 2))]
    skipped = sum(c.status == "skipped" for c in ex.checks)
    if skipped:
        parts.append(Text(f"{plural(skipped, 'GPU check')} skipped: no CUDA device here (skipped is not passed)",
                          style="dim"))
    return Group(*parts)


def terminal_safe(result):
    """A copy of `result` whose every string that came from the notebook or its child (the notebook's name,
    notes, check messages, diagnoses) is safe for the terminal (course_cli.safe_text.for_terminal)."""
    import copy
    import dataclasses

    from course_cli.safe_text import for_terminal

    safe = copy.copy(result)
    safe.notebook = for_terminal(result.notebook, 1000, newlines=False)
    safe.notes = [for_terminal(n) for n in result.notes]
    safe.exercises = []
    for ex in result.exercises:
        e = copy.copy(ex)
        e.checks = [dataclasses.replace(c, name=for_terminal(c.name, 300), message=for_terminal(c.message))
                    for c in ex.checks]
        e.diagnosis = for_terminal(ex.diagnosis) if ex.diagnosis else ex.diagnosis
        safe.exercises.append(e)
    return safe


def render_result(console: Console, result, lesson_title: str, verbose: bool = False,
                  detail: bool = False) -> None:
    """`course check`: the lesson's results, one message per exercise; `detail` adds every failing check."""
    result = terminal_safe(result)
    detail = detail or verbose
    blockers = blocked_by(result.lesson, result)
    head = Text(f"{result.lesson} — {lesson_title}", style="bold")
    if result.not_graded:  # nothing was graded: why, once (it names the notebook), and no score
        console.print(head, overflow="fold")
        console.print(Text("NOT GRADED: ", style="bold yellow").append(result.not_graded.strip()), overflow="fold")
        return
    head.append(f"  {result.notebook}", style="dim")
    console.print(head, overflow="fold")
    if console.width >= WIDE:
        console.print(lesson_table(result, blockers=blockers, detail=detail))
    else:
        _stacked(console, result, blockers, detail)
    if detail:
        for ex in result.exercises:
            if ex.status not in ("passed", "not_implemented") or verbose:
                text = check_details(ex, result.lesson)
                if text is not None:
                    console.print(text)
    tol = _tolerance_line(tolerances(result, detail))
    if tol is not None:
        console.print(tol, overflow="fold")
    for note in result.notes[:3]:
        console.print(Text("note: ", style="yellow").append(Text(note.strip().splitlines()[0] if note.strip()
                                                                 else note)), overflow="fold")
    if len(result.notes) > 3:
        console.print(Text(f"({len(result.notes) - 3} more notes)", style="dim"))
    passed = sum(e.status == "passed" for e in result.exercises)
    style = "bold green" if result.all_passed else "bold"
    score = Text(f"Score {result.score:g}/{result.max_score:g} · {passed} of {len(result.exercises)} "
                 f"exercises passed", style=style)
    skipped = sum(c.status == "skipped" for e in result.exercises for c in e.checks)
    if skipped and not detail:
        score.append(f" · {plural(skipped, 'GPU check')} skipped (no CUDA here)", style="dim")
    console.print(score, overflow="fold")
    nxt = next((e for e in result.exercises if e.status != "passed"), None)
    if nxt is not None:
        first = blockers.get(nxt.id, [nxt.id])[0]
        console.print(_styled(f"Stuck? `course hint {result.lesson} {first}`", "dim"), overflow="fold")


def render_bench(console: Console, report: dict) -> None:
    from course_cli.safe_text import for_terminal

    def safe(v, limit: int = 200) -> Text:  # what the benchmark's child wrote: text, never markup or escapes
        return Text(for_terminal(v, limit, newlines=False))

    table = Table(title=safe(report.get("title") or ""), title_justify="left")
    for col in report.get("columns", []):
        table.add_column(safe(col), justify="right")
    for row in report.get("rows", []):
        table.add_row(*[f"{v:.4g}" if isinstance(v, float) else safe(v) for v in row])
    console.print(table)
    for note in report.get("notes", []):
        console.print(Text(f"note: {for_terminal(note, 1000)}", style="dim"))


# ------------------------------------------------------------------------------------------------
# The notebook (and `course check --html`)

CSS = """
.course-check{font-family:var(--jp-ui-font-family,system-ui,sans-serif);font-size:var(--jp-content-font-size1,14px);
  line-height:1.45;max-width:100%;box-sizing:border-box;overflow-wrap:anywhere;word-break:normal;white-space:normal;
  border-left:4px solid #bbb;padding:4px 10px;margin:2px 0}
.course-check.passed{border-color:#2e7d32}.course-check.failed,.course-check.error{border-color:#c62828}
.course-check.timeout{border-color:#f9a825}
.course-check .head{font-weight:600}.course-check .mark-passed{color:#2e7d32}
.course-check .mark-failed,.course-check .mark-error{color:#c62828}
.course-check .likely{background:#fff8e1;color:#222;padding:2px 6px;border-radius:3px;margin:3px 0}
.course-check .facts{background:#eef3f8;color:#222;padding:2px 6px;border-radius:3px;margin:3px 0}
.course-check .dim{color:#666}.course-check code{font-size:95%;white-space:normal}
.course-check details summary{cursor:pointer;color:#444}.course-check ul{margin:2px 0 2px 18px;padding:0}
.course-check .figure{max-width:100%;overflow:hidden}.course-check .figure svg{max-width:100%;height:auto}
"""


def _inline_code(text: str) -> str:
    """Escape `text` (course_cli.safe_text.for_html: control and bidirectional characters removed) and turn `x`
    into <code>x</code>."""
    from course_cli.safe_text import for_html

    parts = for_html(text, None).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def exercise_html(ex, lesson: str, blockers: list[str] | None = None, figures: bool = True,
                  style: bool = True) -> str:
    """One exercise's report as HTML that wraps to the width of the output area."""
    mark = STYLE.get(ex.status, ("?", ""))[0]
    out = [f'<div class="course-check {html.escape(ex.status)}">']
    if style:
        out.insert(0, f"<style>{CSS}</style>")
    out.append(f'<div class="head"><span class="mark-{html.escape(ex.status)}">{mark}</span> '
               f'<code>{html.escape(ex.id)}</code>: {html.escape(ex.status.replace("_", " "))} '
               f'({_points(ex.points, ex.max_points)} {"point" if ex.max_points == 1 else "points"})</div>')
    for label, text, _ in summary_parts(ex, lesson, blockers):
        if label in (LIKELY, FACTS):
            kind = "likely" if label == LIKELY else "facts"
            out.append(f'<div class="{kind}"><b>{label.strip()}</b> {_inline_code(text)}</div>')
        elif label:
            out.append(f"<div><b>{_inline_code(label)}</b>{_inline_code(text)}</div>")
        elif "--detail" in text:
            continue  # the collapsed section below replaces the command
        else:
            out.append(f"<div>{_inline_code(text)}</div>")
    rows = failing_checks(ex)
    rest = rows if blockers else [] if ex.status == "not_implemented" else rows[1:]
    if rest:
        items = "".join(f"<li>{_inline_code(check_message(c))}</li>" for c in rest)
        out.append(f"<details><summary>{len(rest)} more {'check' if len(rest) == 1 else 'checks'} "
                   f"failed</summary><ul>{items}</ul></details>")
    tols = [t for t in (split_tolerance(c.message or "")[1] for c in rows) if t]
    if tols:
        out.append(f'<div class="dim">Values are compared within {html.escape(tols[0])}.</div>')
    skipped = sum(c.status == "skipped" for c in ex.checks)
    if skipped and ex.status == "passed":
        out.append(f'<div class="dim">{plural(skipped, "GPU check")} skipped: no CUDA device here.</div>')
    if figures and ex.status != "passed":
        from course_cli.figures import exercise_figures

        for svg in exercise_figures(ex, rows):
            out.append(f'<div class="figure">{svg}</div>')
    out.append("</div>")
    return "".join(out)


def exercise_plain(ex, lesson: str, blockers: list[str] | None = None) -> str:
    """The same report as plain text (a notebook's text/plain, nbgrader's feedback)."""
    mark = STYLE.get(ex.status, ("?", ""))[0]
    lines = [f"{mark} {ex.id}: {ex.status.replace('_', ' ')} ({_points(ex.points, ex.max_points)} "
             f"{'point' if ex.max_points == 1 else 'points'})"]
    lines += [f"  {label}{text}" for label, text, _ in summary_parts(ex, lesson, blockers)]
    return "\n".join(lines)


def lesson_html(result, lesson_title: str) -> str:
    """A self-contained page for a lesson's results (`course check L --html FILE`)."""
    from course_cli.safe_text import for_html

    blockers = blocked_by(result.lesson, result)
    body = "".join(exercise_html(ex, result.lesson, blockers.get(ex.id), style=False) for ex in result.exercises)
    passed = sum(e.status == "passed" for e in result.exercises)
    title = html.escape(f"{result.lesson} — {lesson_title}")
    return (f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<style>body{{max-width:60rem;margin:1rem auto;padding:0 1rem;font-family:system-ui,sans-serif}}"
            f"{CSS}</style></head><body><h1>{title}</h1><p class=\"dim\">{for_html(result.notebook, None)}</p>"
            f"{body}<p><b>Score {result.score:g}/{result.max_score:g}</b> · {passed} of {len(result.exercises)} "
            f"exercises passed</p></body></html>")


def render_hints(console: Console, hints: tuple[str, ...] | list[str], shown: int, lead: str | None = None,
                 after: str | None = None, hint_command: str = "") -> None:
    """`course hint`: the first `shown` hints, each wrapped by Rich at the console's width (between words, never
    inside a `code` span's token) with its code spans in bold, then a line when the last one has been shown.
    `lead`: the hint of the cause the last check named, said first (the exercise's hints follow, one more per
    call); `after`: what to look at for a fact the last check stated, said after them."""
    if lead:
        line = Text("From your last check's likely mistake: ", style="bold")
        line.append_text(_styled(lead))
        console.print(line, overflow="fold", soft_wrap=False)
        console.print()
        if not shown and hint_command:
            console.print(_styled(f"For the exercise's own hints, run `{hint_command}` again.", "dim"),
                          overflow="fold")
            return
    for i in range(shown):
        line = Text(f"Hint {i + 1}/{len(hints)}: ", style="bold")
        line.append_text(_styled(hints[i]))
        console.print(line, overflow="fold", soft_wrap=False)
        console.print()
    if after:
        line = Text("What your last check's numbers suggest: ", style="bold")
        line.append_text(_styled(after))
        console.print(line, overflow="fold", soft_wrap=False)
        console.print()
    if shown == len(hints):
        console.print("That was the last hint.")
