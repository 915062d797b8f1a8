"""Scoring rules. By default an exercise scores all its points when every check passes, else 0 — the rule
`course check` teaches and nbgrader's test cells apply. With partial credit (`course grade --partial`, and
`c.ApplyCourseVerdict.partial_credit = True` in the nbgrader config) an exercise that did not pass scores its
points in proportion to the weight of its passed checks (each check weighs 1 unless the registry's
`Exercise.weights` says otherwise). Not counted: skipped checks (no GPU here) and the two constraints, "uses
no forbidden API" (using one scores 0) and "leaves its inputs unchanged". An unimplemented exercise scores 0.
No torch here.
"""

from __future__ import annotations

from .results import ExerciseResult, LessonResult

CONSTRAINTS = ("forbidden", "mutation")  # result kinds: rules on how, not checks of what


def partial_points(ex: ExerciseResult, weights: dict[str, float] | None = None) -> float:
    if ex.status == "passed":
        return ex.max_points
    if ex.status == "not_implemented" or any(c.kind == "forbidden" and c.status == "failed"
                                             for c in ex.checks):
        return 0.0
    weights = weights or {}
    counted = [c for c in ex.checks if c.status != "skipped" and c.kind not in CONSTRAINTS]
    total = sum(weights.get(c.name, 1.0) for c in counted)
    if total <= 0:
        return 0.0
    passed = sum(weights.get(c.name, 1.0) for c in counted if c.status == "passed")
    return round(ex.max_points * passed / total, 2)


def apply_partial(result: LessonResult, lesson) -> LessonResult:
    """`result` with each exercise's points given by partial credit (in place; returned for convenience)."""
    by_name = {e.name: e for e in lesson.exercises}
    for ex in result.exercises:
        spec = by_name.get(ex.id)
        ex.points = partial_points(ex, dict(spec.weights) if spec else None)
    return result
