"""Results of grading: plain dataclasses with a pinned JSON layout (see docs/architecture.md).

No torch here: the CLI renders and stores these without importing it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# Said wherever only the public checks ran (the student distribution's check cell and `course check`).
PUBLIC_ONLY_NOTE = ("these are the public checks; your instructor's run draws more inputs for the same "
                    "properties (the hidden checks), from a seed of its own")

NOT_GRADED = "not_graded"  # an exercise of a submission that was not graded (LessonResult.not_graded says why)
NOT_SUBMITTED = "not submitted"  # the reason of a roster's student with no submission

STATUSES = ("passed", "failed", "error", "timeout", "not_implemented", "skipped")

# What a check result is, as a type (never told from its name or its message):
#   check      a probe and its judge            absent   the exercise had nothing to judge (not defined, its
#   forbidden  the forbidden-API rule                    cell failed, the time ran out): why, in one result
#   mutation   the inputs-unchanged rule        grader   the notebook could not be graded at all (unreadable,
#                                                        the sandbox failed): not the student's code
KINDS = ("check", "absent", "grader", "forbidden", "mutation")
# How a failed check failed (the judge's message says, `compare.Failure.what`): the feedback shows a wrong shape or
# dtype before an exception, and an exception before wrong values. "property": values that break a rule the code's
# own outputs must keep between them (LN(a·x + b) = LN(x)), which feedback tells before a comparison with the
# reference (compare.broken_rule). "" for a message of no known kind.
FAILURES = ("shape", "dtype", "device", "exception", "values", "property", "")

# An exercise's status is the worst of its checks' statuses, in this order (skipped checks do not count).
_SEVERITY = {"not_implemented": 5, "timeout": 4, "error": 3, "failed": 2, "passed": 1, "skipped": 0}


@dataclass(frozen=True)
class Absent:
    """Why an exercise has no observations to judge: the status it gets, and the message saying why
    (graders/engine/verdict.py decides; `check` names the one check result it is reported as)."""

    status: str  # "not_implemented", "error" or "timeout"
    message: str
    check: str = "defined"


@dataclass
class CheckResult:
    name: str
    status: str
    device: str = "cpu"
    dtype: str = "float32"
    message: str = ""
    kind: str = "check"  # one of KINDS
    failure: str = ""  # one of FAILURES, for a failed check
    # How many values the check observed (the reference's observations, for a check that ran; 0: unknown). Of
    # two equally telling failures the feedback leads with the smaller: the simplest input explains best.
    size: int = 0
    # A hidden check's property (the name of the public check it shares); "" for a public check. Set by the
    # engine (verdict.judge_exercise); not in the JSON layout: `for_students` reads it.
    hidden: str = field(default="", compare=False)

    def to_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "device": self.device,
                "dtype": self.dtype, "message": self.message, "kind": self.kind, "failure": self.failure,
                "size": self.size}


@dataclass
class ExerciseResult:
    id: str
    status: str
    points: float
    max_points: float
    checks: list[CheckResult] = field(default_factory=list)
    diagnosis: str | None = None
    # the diagnosis's stable id (graders/engine/kinds.py): a catalogued mistake's id, `structural:<kind>`, `other`
    diagnosis_id: str | None = None
    # The diagnosis as the public checks alone give it, (text, id), computed by the engine beside the one above
    # (which the hidden checks' observations may decide); None: not computed. Not in the JSON layout: what
    # students see (`for_students`) takes it in place of `diagnosis`.
    public_diagnosis: "tuple[str | None, str | None] | None" = field(default=None, compare=False, repr=False)

    @property
    def reason(self) -> str:
        """One line: why the exercise did not pass (empty when it did)."""
        if self.status == "passed":
            return ""
        for c in self.checks:
            if c.status == self.status:
                return c.message.splitlines()[0] if c.message else c.name
        return self.status

    def to_dict(self) -> dict:
        return {"id": self.id, "status": self.status, "points": self.points,
                "max_points": self.max_points, "checks": [c.to_dict() for c in self.checks],
                "diagnosis": self.diagnosis, "diagnosis_id": self.diagnosis_id}


@dataclass
class LessonResult:
    lesson: str
    notebook: str
    exercises: list[ExerciseResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. cells that failed to run
    public_only: bool = False  # the public checks only (the distribution, `--public`): not a full check
    # Why this submission was NOT GRADED (a notebook that is not JSON or cannot be read, or nothing submitted):
    # no score, left out of a class's means, counted apart. Empty: graded.
    not_graded: str = ""
    # What every seat says about the submission itself, in the same words (a renamed notebook's
    # `graders.engine.notebook.renamed_note`): in the JSON, the CSV's TOTAL row, nbgrader's and Gradescope's feedback.
    note: str = ""


    @property
    def score(self) -> float | None:
        if self.not_graded:
            return None
        return float(round(sum(e.points for e in self.exercises), 4))

    @property
    def max_score(self) -> float:
        return float(round(sum(e.max_points for e in self.exercises), 4))

    @property
    def all_passed(self) -> bool:
        return bool(self.exercises) and all(e.status == "passed" for e in self.exercises)

    def to_dict(self) -> dict:
        d = {"lesson": self.lesson, "notebook": self.notebook, "score": self.score,
             "max_score": self.max_score, "exercises": [e.to_dict() for e in self.exercises]}
        if self.not_graded:
            d["not_graded"] = self.not_graded  # (only then: the graded layout is unchanged)
        if self.note:
            d["note"] = self.note
        return d


def exercise_status(checks: list[CheckResult]) -> str:
    counted = [c.status for c in checks if c.status != "skipped"]
    if not counted:
        return "skipped"
    return max(counted, key=_SEVERITY.__getitem__)


# ----------------------------------------------------------------------------------------------
# What students see of hidden checks: one policy, applied at every seat a student reads (`course check`, the
# check cell and `course watch` through course_cli/sandboxed/warm.py's grade_notebook/grade_cells, nbgrader's
# feedback, Gradescope's results). README: "What students see of hidden checks". A hidden check shows its name,
# its status and the points its exercise scores; nothing derived from its observations: no message (it quotes
# the drawn inputs' values and sizes), no failure kind, no figure, and a diagnosis only as the public checks
# alone give it (the engine's `public_diagnosis`). An exercise that passes every public check and fails hidden
# ones reads HIDDEN_ONLY. Instructors (`course grade`, its JSON, CSV and report) see everything.

HIDDEN_MESSAGE = ("failed on inputs drawn for this grading run (their values are not shown); the public check "
                  "{prop!r} tests the same property: make your code right for every input it allows, not only "
                  "the public check's")
# A hidden check's message by its status, in place of its own (failed and error: HIDDEN_MESSAGE)
HIDDEN_STATUS = {"timeout": "ran out of time on inputs drawn for this grading run",
                 "not_implemented": "not implemented yet: it raises NotImplementedError"}
HIDDEN_ONLY = "passes the public checks; fails {n} hidden check{s} ({names})"


def hidden_only_line(names: list[str]) -> str:
    """An exercise's line when only hidden checks failed: "passes the public checks; fails N hidden checks
    (names)"."""
    names = list(dict.fromkeys(names))
    return HIDDEN_ONLY.format(n=len(names), s="" if len(names) == 1 else "s", names=", ".join(names))


def for_students(result: "LessonResult", hidden: dict[tuple[str, str], str] | None = None) -> "LessonResult":
    """A copy of `result` as students may see it. A check is hidden when the engine marked it
    (`CheckResult.hidden`) or `hidden` names it ({(exercise, check name): its property}, for a result read back
    from JSON). Each hidden check keeps its name and status, nothing else it observed (not even its size); the exercise's diagnosis is
    the public checks' alone (None when the engine did not compute it and a hidden check ran); an exercise whose
    only failing checks are hidden says so (HIDDEN_ONLY) in its first failing check's message. Points unchanged."""
    import copy

    out = copy.deepcopy(result)
    hidden = hidden or {}
    for ex in out.exercises:
        rows = []
        for c in ex.checks:
            prop = c.hidden or hidden.get((ex.id, c.name))
            if prop:
                c.hidden = prop
                rows.append(c)
        if ex.public_diagnosis is not None:
            ex.diagnosis, ex.diagnosis_id = ex.public_diagnosis
        elif rows:
            ex.diagnosis = ex.diagnosis_id = None
            ex.public_diagnosis = (None, None)  # (so that a second pass keeps what the first showed)
        failing = [c for c in rows if c.status not in ("passed", "skipped")]
        for c in rows:
            if hasattr(c, "figure"):
                del c.figure
            c.failure, c.size = "", 0
            if c.status == "passed":
                c.message = ""
            elif c.status != "skipped":
                c.message = HIDDEN_STATUS.get(c.status) or HIDDEN_MESSAGE.format(prop=c.hidden)
        public_failing = [c for c in ex.checks if not c.hidden and c.status not in ("passed", "skipped")]
        if failing and not public_failing:
            first = next((c for c in failing if c.status == ex.status), failing[0])
            first.message = hidden_only_line([c.name for c in failing])
    return out
