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
# dtype before an exception, and an exception before wrong values. "" for a message of no known kind.
FAILURES = ("shape", "dtype", "device", "exception", "values", "")

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

    def to_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "device": self.device,
                "dtype": self.dtype, "message": self.message, "kind": self.kind, "failure": self.failure}


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
# What students see of hidden checks: one policy, applied by every output a student reads (nbgrader's feedback,
# Gradescope's results; the distribution's `course check` runs no hidden check). README: "What students see of
# hidden checks". Hidden checks test public properties on inputs drawn from the run's seed, so their names and
# statuses are shown (a hidden twin's name is its public check's, marked "(fresh inputs)"), as are the points they
# cost and the diagnosis (a catalogued mistake's sentence, which quotes no input); their messages, which quote the
# drawn inputs' values, are not.

HIDDEN_MESSAGE = ("failed on inputs drawn for this grading run (their values are not shown); the public check "
                  "{prop!r} tests the same property: make your code right for every input it allows, not only "
                  "the public check's")


def for_students(result: "LessonResult", hidden: dict[tuple[str, str], str]) -> "LessonResult":
    """A copy of `result` as students may see it: each hidden check's message (`hidden`: {(exercise, check name):
    its property, the public check it shares}) replaced by HIDDEN_MESSAGE. Names, statuses, points, diagnoses
    unchanged."""
    import copy

    out = copy.deepcopy(result)
    for ex in out.exercises:
        for c in ex.checks:
            prop = hidden.get((ex.id, c.name))
            if prop is not None and c.status not in ("passed", "skipped"):
                c.message = HIDDEN_MESSAGE.format(prop=prop)
    return out
