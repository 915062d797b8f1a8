"""Scoring rules. By default an exercise scores all its points when every check passes, else 0 — the rule
`course check` teaches and nbgrader's test cells apply. With partial credit (`course grade --partial`, and
`c.ApplyCourseVerdict.partial_credit = True` in the nbgrader config) an exercise that did not pass scores part
of its points, by its *public properties* (each public check of the exercise, over its device/dtype runs: a
property holds when every run of it passed):

- the exercise's first public check (its agreement with the reference, or what the registry's `Exercise.weights`
  say otherwise) weighs as much as all its other properties together, so a fundamental mistake (an inverted mask,
  a softmax over the wrong axis) that fails it keeps at most half of the points;
- the other properties weigh 1 each, unless `Exercise.weights` says otherwise;
- one more share, "right on fresh inputs", is earned only by passing: an exercise that did not pass never
  scores its full points;
- an exercise whose code is one of its catalogued mistakes (the diagnosis names it: a wrong answer students
  really write, such as an inverted mask, which fails few properties but is wrong at its core) scores at most
  KNOWN_MISTAKE_CAP of its points.

The hidden checks (the public properties on inputs drawn from the run's seed, and the input battery) decide
whether an exercise passed, but not its partial points: so an honest notebook's partial score is the same under
every hidden seed. Not counted: skipped checks (no GPU here) and the two constraints, "uses no forbidden API"
(using one scores 0) and "leaves its inputs unchanged". An unimplemented exercise scores 0. No torch here (a
lesson's checks are read only by `apply_partial`, which is handed them or imports the lesson's module).
"""

from __future__ import annotations

from .results import ExerciseResult, LessonResult

CONSTRAINTS = ("forbidden", "mutation")  # result kinds: rules on how, not checks of what
FRESH_SHARE = 1.0  # the weight of "right on fresh inputs", earned only by an exercise that passed
KNOWN_MISTAKE_CAP = 0.5  # the most of its points an exercise keeps when it is a catalogued mistake


def partial_points(ex: ExerciseResult, weights: dict[str, float] | None = None,
                   hidden: set[str] | frozenset = frozenset(), known_mistake: bool = False) -> float:
    """`ex`'s points under partial credit; `hidden`: the names of the exercise's hidden checks (not counted);
    `known_mistake`: the diagnosis names one of the exercise's catalogued mistakes."""
    if ex.status == "passed":
        return ex.max_points
    if ex.status == "not_implemented" or any(c.kind == "forbidden" and c.status == "failed"
                                             for c in ex.checks):
        return 0.0
    weights = weights or {}
    holds: dict[str, bool] = {}  # property (public check name) -> every run of it passed, in check order
    for c in ex.checks:
        if c.status == "skipped" or c.kind in CONSTRAINTS or c.name in hidden:
            continue
        holds[c.name] = holds.get(c.name, True) and c.status == "passed"
    if not holds:
        return 0.0
    names = list(holds)
    w = {n: float(weights.get(n, 1.0)) for n in names[1:]}
    w[names[0]] = float(weights.get(names[0], max(1.0, sum(w.values()))))
    total = sum(w.values()) + FRESH_SHARE
    passed = sum(w[n] for n in names if holds[n])
    share = passed / total
    if known_mistake:
        share = min(share, KNOWN_MISTAKE_CAP)
    return round(ex.max_points * share, 2)


def apply_partial(result: LessonResult, lesson, checks=None) -> LessonResult:
    """`result` with each exercise's points given by partial credit (in place; returned for convenience).
    `checks`: the lesson's declared checks (default: its module's CHECKS), to know the hidden ones."""
    mistakes: dict[str, set[str]] = {}
    module = getattr(lesson, "module", None)
    if module:
        import importlib

        mod = importlib.import_module(module)
        checks = mod.CHECKS if checks is None else checks
        for m in getattr(mod, "MISTAKES", ()):
            mistakes.setdefault(m.exercise, set()).add(m.message)
    checks = checks or []
    hidden: dict[str, set[str]] = {}
    for c in checks:
        if c.hidden:
            hidden.setdefault(c.exercise, set()).add(c.name)
    by_name = {e.name: e for e in lesson.exercises}
    for ex in result.exercises:
        spec = by_name.get(ex.id)
        ex.points = partial_points(ex, dict(spec.weights) if spec else None, hidden.get(ex.id, set()),
                                   bool(ex.diagnosis) and ex.diagnosis in mistakes.get(ex.id, set()))
    return result
