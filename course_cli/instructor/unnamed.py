"""What the class does that the course does not yet name: failing submissions with no reproduced cause, grouped by behaviour.

A class is graded with one hidden seed, so two submissions that behave the same fail the same checks with the
same messages on the same inputs. An exercise that failed on its own (not because an exercise it calls failed
too) and whose diagnosis is no catalogued mistake (none, `other`, or a structural fact) is keyed by its failing
checks: each check's name, status and message, with paths and students' names taken out. Submissions with the
same key form a group; `course grade` and `course report` show the groups of two or more ("7 students: same
unnamed mistake in `causal_mask`, differs first at …"), and `course draft-mistake` writes a group's simplest
example and one student's defining cell (read from the submission as data, never run) as a draft catalogue entry
for the lesson's author.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from graders.engine.kinds import is_catalogued

MIN_SHARED = 2  # a group shown as shared: at least this many students


@dataclass
class Group:
    id: str  # `<exercise>:<6 hex digits>`, stable for the same behaviour in the same run
    exercise: str
    who: list[str] = field(default_factory=list)
    checks: list[tuple[str, str, str]] = field(default_factory=list)  # (name, status, message), told order
    diagnosis_id: str | None = None  # a structural fact they share, if any (never a cause)

    @property
    def first(self) -> str:
        """The simplest failing check, said in one line: where the behaviour differs first."""
        from course_cli.render import shorten, split_tolerance

        if not self.checks:
            return ""
        name, status, message = self.checks[0]
        text = shorten(split_tolerance(message or status.replace("_", " "))[0]).splitlines()[0]
        return f"{name}: {text}"

    def headline(self) -> str:
        n = len(self.who)
        return (f"{n} student{'s' if n != 1 else ''}: same unnamed mistake in `{self.exercise}`, differs first at "
                f"{self.first}")

    def to_dict(self) -> dict:
        return {"id": self.id, "exercise": self.exercise, "students": len(self.who), "who": list(self.who),
                "first": self.first, "checks": [list(c) for c in self.checks], "diagnosis_id": self.diagnosis_id}


_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][^\s\"'`:,;()<>\\/]+){2,}")


def _plain(message: str, names: list[str]) -> str:
    """A message without what differs from student to student for the same behaviour: paths, names."""
    text = _PATH.sub(lambda m: re.split(r"[\\/]", m.group(0))[-1], message or "")
    for n in sorted((n for n in names if n), key=len, reverse=True):
        text = re.sub(rf"(?<![\w]){re.escape(n)}(?![\w])", "<student>", text)
    return text


def unnamed(ex) -> bool:
    """Failed, with no reproduced cause named (no diagnosis, `other`, or a structural fact)."""
    return ex.status == "failed" and not is_catalogued(ex.diagnosis_id)


def groups(results: dict, lesson: str | None = None) -> list[Group]:
    """Every behaviour among the unnamed failures of graded submissions, the largest group first (then by
    exercise order, then id); each group's students in the results' order."""
    from course_cli.render import blocked_by, failing_checks

    names = sorted(results)
    found: dict[str, Group] = {}
    order: dict[str, int] = {}
    for s in names:
        res = results[s]
        if getattr(res, "not_graded", ""):
            continue
        blockers = blocked_by(res.lesson or lesson or "", res)
        for i, ex in enumerate(res.exercises):
            order.setdefault(ex.id, i)
            if not unnamed(ex) or ex.id in blockers:
                continue
            checks = [(c.name, c.status, _plain(c.message, names)) for c in failing_checks(ex)]
            key = repr((ex.id, checks))
            gid = f"{ex.id}:{hashlib.sha1(key.encode()).hexdigest()[:6]}"
            g = found.setdefault(gid, Group(gid, ex.id, checks=checks, diagnosis_id=ex.diagnosis_id))
            g.who.append(s)
            if g.diagnosis_id != ex.diagnosis_id:
                g.diagnosis_id = None
    return sorted(found.values(), key=lambda g: (-len(g.who), order.get(g.exercise, 99), g.id))


def shared(results: dict, lesson: str | None = None) -> list[Group]:
    return [g for g in groups(results, lesson) if len(g.who) >= MIN_SHARED]


def find_group(results: dict, ident: str, lesson: str | None = None) -> Group:
    """The group whose id is `ident` (or starts with it, when that is unique); LookupError saying which exist."""
    every = groups(results, lesson)
    hits = [g for g in every if g.id == ident] or [g for g in every if g.id.startswith(ident)]
    if len(hits) == 1:
        return hits[0]
    known = ", ".join(f"{g.id} ({len(g.who)})" for g in every[:12]) or "none: every failure has a named cause"
    why = "matches several groups" if hits else "is no group of unnamed failures in these results"
    raise LookupError(f"{ident!r} {why}; the groups: {known}")


def student_cell(notebook: str, exercise: str) -> str | None:
    """The source of the submission's cell that defines `exercise`, read from the notebook as data (never
    run); None when the notebook cannot be read or has no such cell."""
    from course_cli.sandboxed.notebook import read_notebook
    from graders.engine.notebook import defining_cell, source_of

    if not notebook:
        return None
    try:
        nb = read_notebook(notebook)
        cells = nb.get("cells", []) if isinstance(nb, dict) else nb.cells
    except Exception:  # noqa: BLE001 - moved, unreadable, not a notebook: the draft says so instead
        return None
    cell = defining_cell(list(cells), exercise)
    return None if cell is None else source_of(cell)


def draft(group: Group, results: dict, lesson: str) -> str:
    """A draft catalogue entry (Python text for the lesson's grader module) for a group: its observations as
    comments, one student's defining cell, and a `Mistake` with the parts only the author can write left as
    TODO. The student's code is quoted, never run."""
    import json

    lines = [f"# Draft catalogue entry for {lesson}: {group.headline()}",
             f"# group {group.id}; {len(group.who)} submission(s) of one grading run behave the same.",
             "# What they do (the failing checks, in the order a student is told them; the first is the simplest):"]
    for name, status, message in group.checks:
        text = message.replace("\n", " ")
        lines.append(f"#   - {name} [{status}]: {text[:600]}")
    if group.diagnosis_id:
        lines.append(f"# The grader states a fact about them ({group.diagnosis_id}), no cause.")
    code, whose = None, None
    for s in group.who:
        code = student_cell(results[s].notebook, group.exercise)
        if code is not None:
            whose = s
            break
    lines.append("#")
    if code is None:
        lines.append("# No submission of the group could be read back (moved since grading?): write the impl by hand.")
    else:
        lines.append(f"# One student's cell that defines `{group.exercise}` (from {Path(results[whose].notebook).name},"
                     " quoted as data; it was never run here).")
        lines.append("# Reduce it to the mistake, as `edits` of the solved cell or as an `impl`:")
        lines += ["#   " + line for line in code.splitlines()]
    lines += ["", "Mistake(", f"    {json.dumps(group.exercise)},",
              f"    {json.dumps(group.exercise.lower() + '_TODO')},  # TODO: a short id for the mistake",
              "    \"TODO: one sentence: what the code does wrong, and what to do instead\",",
              "    edits={\"TODO: a line of the solved cell\": \"TODO: that line with the mistake\"},",
              "),", ""]
    return "\n".join(lines)
