"""Results of grading: plain dataclasses with a pinned JSON layout (see docs/architecture.md).

No torch here: the CLI renders and stores these without importing it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

STATUSES = ("passed", "failed", "error", "timeout", "not_implemented", "skipped")

# An exercise's status is the worst of its checks' statuses, in this order (skipped checks do not count).
_SEVERITY = {"not_implemented": 5, "timeout": 4, "error": 3, "failed": 2, "passed": 1, "skipped": 0}


@dataclass(frozen=True)
class Absent:
    """Why an exercise has no observations to judge: the status it gets, and the message saying why
    (graders/verdict.py decides; `check` names the one check result it is reported as)."""

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

    def to_dict(self) -> dict:
        return {"name": self.name, "status": self.status, "device": self.device,
                "dtype": self.dtype, "message": self.message}


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

    @property
    def score(self) -> float:
        return float(round(sum(e.points for e in self.exercises), 4))

    @property
    def max_score(self) -> float:
        return float(round(sum(e.max_points for e in self.exercises), 4))

    @property
    def all_passed(self) -> bool:
        return bool(self.exercises) and all(e.status == "passed" for e in self.exercises)

    def to_dict(self) -> dict:
        return {"lesson": self.lesson, "notebook": self.notebook, "score": self.score,
                "max_score": self.max_score, "exercises": [e.to_dict() for e in self.exercises]}


def exercise_status(checks: list[CheckResult]) -> str:
    counted = [c.status for c in checks if c.status != "skipped"]
    if not counted:
        return "skipped"
    return max(counted, key=_SEVERITY.__getitem__)
