"""The verdict rules: from what a grading left behind to a LessonResult, in one place.

`judge_lesson` takes the student's observations (one dict per exercise, None where the child never
wrote them), the cells' reports, how the child ended and the reference's observations, and decides
each exercise's status: missing (not_implemented), timeout, error or failed, each with a typed reason
(`Absent`), then hands exercises with observations to `engine.judge_exercise`. course_cli/grading.py
only starts the children, reads their files and calls this; the in-process test harness calls it too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .notebook import defining_cell
from .results import Absent, CheckResult, ExerciseResult, LessonResult


@dataclass
class StudentRun:
    """What the student's child left behind."""

    observations: dict[str, dict | None]  # exercise -> observations; None: never written
    cell_reports: list[dict] = field(default_factory=list)  # cells.json: {"index", "status", "error"?}
    death: str | None = None  # why the child ended early, in words (None: it finished)
    timed_out: bool = False  # the child as a whole ran past its time limit


def absent(name: str, obs: dict | None, run: StudentRun, cells: list[dict]) -> Absent | None:
    """Why exercise `name` has no observations, or None when it has them (or when the engine's own
    defaults apply: never reached -> timeout, defined nowhere -> not_implemented)."""
    if obs is not None and not obs.get("missing"):
        return None
    failed = {c["index"]: c for c in run.cell_reports if c.get("status") not in ("ok", "skipped")}
    cell = defining_cell(cells, name)
    if obs is None and run.death:
        if run.timed_out:
            return Absent("timeout", run.death, check="ran")
        return Absent("error", run.death)
    if cell and cell["index"] in failed:
        return Absent("error", f"`{name}` is not defined because its cell failed: {failed[cell['index']]['error']}")
    if cell:
        return Absent("error", f"`{name}` is not defined after running cell {cell['index']}")
    return None


def judge_lesson(lesson, module, run: StudentRun, reference: dict[str, dict], reference_mistakes: dict[str, dict],
                 cells: list[dict], notebook: str = "", exercises: list | None = None, gpu: bool = False,
                 only_public: bool = False) -> LessonResult:
    """The lesson's result: `exercises` (registry Exercise entries; default all of the lesson's) judged
    from the student's run against the reference's observations and the known mistakes'."""
    from .engine import judge_exercise

    result = LessonResult(lesson.id, notebook)
    result.notes += [c["error"] for c in run.cell_reports if c.get("status") not in ("ok", "skipped")]
    if run.death:
        result.notes.append(run.death)
    for ex in exercises if exercises is not None else lesson.exercises:
        obs = run.observations.get(ex.name)
        why = absent(ex.name, obs, run, cells)
        if why is not None and why.check == "ran":
            result.exercises.append(ExerciseResult(ex.name, why.status, 0.0, float(ex.points),
                                                   [CheckResult(why.check, why.status, message=why.message)]))
            continue
        if obs is not None and obs.get("timeout"):
            res = judge_exercise(module, ex, obs, reference[ex.name], {}, gpu, only_public=only_public)
            res.status, res.points, res.diagnosis = "timeout", 0.0, None
            if not any(c.status == "timeout" for c in res.checks):
                res.checks.append(CheckResult("time limit", "timeout", message=obs.get("message", "")))
            result.exercises.append(res)
            continue
        mistakes = {m.id: reference_mistakes[m.id] for m in getattr(module, "MISTAKES", ())
                    if m.exercise == ex.name and m.id in reference_mistakes}
        result.exercises.append(judge_exercise(module, ex, obs, reference[ex.name], mistakes, gpu, why,
                                               only_public))
    return result
