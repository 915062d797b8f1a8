"""Hidden checks add inputs, never properties (the contract's rule, docs: README "What students see of hidden
checks"): every property a hidden check tests is also tested by a public check of the same exercise, and a hidden
check draws other inputs than its public twin (from the run's seed in class grading)."""

from __future__ import annotations

import importlib

import pytest

from graders.engine.checks import CPU, HIDDEN_TWIN, Check, Checks, hidden_only
from graders.registry import LESSONS


@pytest.mark.parametrize("lesson", LESSONS, ids=[l.id for l in LESSONS])
def test_no_property_is_tested_only_by_a_hidden_check(lesson):
    checks = importlib.import_module(lesson.module).CHECKS
    bad = [f"{c.exercise}: {c.name!r}" for c in hidden_only(checks)]
    assert not bad, f"{lesson.id}: properties only hidden checks test: {bad}"
    assert any(c.hidden for c in checks), "the lesson has hidden checks (the battery at least)"


def test_lesson01s_stability_is_public():
    """The issue's case: a softmax without the max shift passed the check cell because stability was hidden."""
    checks = importlib.import_module("graders.lesson01_sdpa").CHECKS.of("softmax")
    public = [c.name for c in checks if not c.hidden]
    assert "huge magnitudes (±1e4) give no inf or NaN" in public
    twin = next(c for c in checks if c.name == "huge magnitudes (±1e4) give no inf or NaN" + HIDDEN_TWIN)
    assert twin.hidden and twin.property == "huge magnitudes (±1e4) give no inf or NaN"


def test_a_hidden_only_property_is_found():
    """The rule can fail: a hidden check with no public check of its property is reported."""
    judge = lambda s, r, ctx: None  # noqa: E731
    probe = lambda ctx: {}  # noqa: E731
    checks = [Check("f", "matches", probe, judge), Check("f", "stable", probe, judge, CPU, hidden=True)]
    assert [c.name for c in hidden_only(checks)] == ["stable"]
    checks.append(Check("f", "stable, again", probe, judge, CPU, hidden=True, property="matches"))
    assert [c.name for c in hidden_only(checks)] == ["stable"]  # declared as the public one's: fine
    other = [Check("g", "stable", probe, judge)]  # the same name for another exercise does not count
    assert [c.name for c in hidden_only(checks + other)] == ["stable"]


def test_hidden_declares_a_public_check_and_its_twin_on_other_draws():
    from graders.engine.probe import seed_for

    checks = Checks("lessonXX")
    checks.probe("f", "stable", lambda s, r, ctx: None, hidden=True)(lambda ctx: {})
    public, twin = checks
    assert (public.hidden, twin.hidden) == (False, True)
    assert (public.probe, public.judge) == (twin.probe, twin.judge) and twin.property == public.name
    cfg = CPU[0]
    seeds = {seed_for("lessonXX", public, cfg), seed_for("lessonXX", twin, cfg),
             seed_for("lessonXX", twin, cfg, 1), seed_for("lessonXX", twin, cfg, 2)}
    assert len(seeds) == 4  # fixed public draws; the twin's own, and fresh ones per run seed
    assert seed_for("lessonXX", public, cfg, 1) == seed_for("lessonXX", public, cfg)  # public: fixed
