"""Judging only reads the reference's observations: a warm server keeps one reference per lesson in memory and
hands it to every check without copying it, and class grading hands its trusted reference to every student the
same way (course_cli/sandboxed/grading.py, `Reference.for_one_grading`: a deep copy cost 0.75-1.0 s a check), so
a judge or a diagnosis that wrote into it would change the next student's verdict.

For lesson 01 here (the other lessons in tests/e2e/test_warm_reference.py, the slow tier: 10-145 s each on a
loaded 2-core machine), each catalogued mistake's observations are judged as a student's (every failing path: the
checks, the catalogue's match, the structural diagnosis, the public diagnosis), then the solved notebook's own
(every passing path); the reference and the mistakes' observations must be exactly as they were."""

from __future__ import annotations

import copy
import importlib

import torch

from graders.engine import judge_exercise
from graders.registry import find_lesson
from harness import mistake_observations, reference


def differences(a, b, where: str = "") -> list[str]:
    """Where `a` and `b` differ: dict keys, list items, tensors (dtype, shape, values with NaN equal to NaN)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return [f"{where}: a tensor and a {type(b if isinstance(a, torch.Tensor) else a).__name__}"]
        if a.dtype != b.dtype or a.shape != b.shape:
            return [f"{where}: {a.dtype} {tuple(a.shape)} became {b.dtype} {tuple(b.shape)}"]
        same = a == b
        if a.is_floating_point() or a.is_complex():
            same |= torch.isnan(a) & torch.isnan(b)
        return [] if bool(same.all()) else [f"{where}: values changed"]
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{where}: keys {sorted(map(str, a.keys() ^ b.keys()))} added or removed"]
        return [d for k in a for d in differences(a[k], b[k], f"{where}/{k}")]
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if type(a) is not type(b) or len(a) != len(b):
            return [f"{where}: {type(a).__name__} of {len(a)} became {type(b).__name__} of {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{where}[{i}]")]
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return []
    return [] if type(a) is type(b) and a == b else [f"{where}: {a!r} became {b!r}"]


def test_the_comparison_sees_a_change():
    obs = {"checks": {"k": {"out": torch.tensor([1.0, float("nan")]), "shape": [2]}}}
    assert differences(obs, copy.deepcopy(obs)) == []
    changed = copy.deepcopy(obs)
    changed["checks"]["k"]["out"][0] = 2.0
    assert differences(obs, changed) == ["/checks/k/out: values changed"]
    changed = copy.deepcopy(obs)
    changed["checks"]["k"]["shape"].append(1)
    assert differences(obs, changed) == ["/checks/k/shape: list of 1 became list of 2"]
    changed = copy.deepcopy(obs)
    changed["checks"]["k"].pop("shape")
    assert differences(obs, changed) == ["/checks/k: keys ['shape'] added or removed"]


def test_judging_leaves_the_reference_as_it_was():
    judging_leaves_the_reference_as_it_was(find_lesson("lesson01"))


def judging_leaves_the_reference_as_it_was(lesson) -> None:
    module = importlib.import_module(lesson.module)
    _, ref = reference(lesson)
    mistakes = {m.id: mistake_observations(lesson, m) for m in module.MISTAKES}
    before = copy.deepcopy((ref, mistakes))
    judged = 0
    for m in module.MISTAKES:
        ex = find_lesson(lesson.id).exercise(m.exercise)
        theirs = {k: v for k, v in mistakes.items() if next(x for x in module.MISTAKES if x.id == k).exercise == ex.name}
        student = copy.deepcopy(mistakes[m.id])  # what a student with this mistake left: theirs to change
        result = judge_exercise(module, ex, student, ref[ex.name], theirs, gpu=False)
        judged += result.status != "passed"
    for ex in lesson.exercises:
        mine = {k: v for k, v in mistakes.items() if next(x for x in module.MISTAKES if x.id == k).exercise == ex.name}
        assert judge_exercise(module, ex, copy.deepcopy(ref[ex.name]), ref[ex.name], mine, gpu=False).status == "passed"
    assert judged == len(module.MISTAKES)  # every mistake went down a failing path
    assert differences(before, (ref, mistakes)) == []
