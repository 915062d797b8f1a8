"""Lessons 07 and 08 over their declared domains (issue 28, item 1): wrong code the checks before the domains
passed, each failing only the domain check, with the simplest input that shows it in the message, and named
by its catalogued mistake where it is one; implementations the spec allows (top-k keeping exactly k or
every tie at the k-th value, issue 29) pass every check."""

from __future__ import annotations

import importlib
import inspect

import pytest

from graders.engine import mistake_source
from graders.engine.checks import CHECKS_OF
from graders.registry import find_lesson
from harness import check_one, explain, reference, with_code

L07, L08 = find_lesson("lesson07"), find_lesson("lesson08")
DOMAIN_CHECK = "over its declared domain (drawn examples, the simplest failure shown)"


def _mistake(lesson, mistake_id):
    return next(m for m in importlib.import_module(lesson.module).MISTAKES if m.id == mistake_id)


def _only_the_domain_fails(ex, simplest: str):
    assert ex.status == "failed", explain(ex)
    failed = {c.name for c in ex.checks if c.status == "failed"}
    assert failed <= {DOMAIN_CHECK, DOMAIN_CHECK + " (fresh inputs)"} and DOMAIN_CHECK in failed, explain(ex)
    message = next(c.message for c in ex.checks if c.name == DOMAIN_CHECK and c.status == "failed")
    assert message.startswith(f"fails for {simplest}"), message
    return message


# (lesson, mistake id, the simplest failing example as the message names it)
CATALOGUED = [
    (L07, "mlp_assumes_3d", "shape of x=(D,)"),
    (L07, "causal_mask_made_once", "calls=after a call with a longer T"),
    (L07, "dropout_on_residual_stream", "dropout, mode=0.3, train, branches zeroed"),
]


@pytest.mark.parametrize("lesson, mistake_id, simplest", CATALOGUED, ids=[m for _, m, _ in CATALOGUED])
def test_an_escape_of_the_old_checks_fails_the_domain_and_is_named(lesson, mistake_id, simplest, tmp_path):
    mistake = _mistake(lesson, mistake_id)
    ex = check_one(lesson, with_code(lesson, mistake.exercise, mistake_source(mistake), tmp_path), mistake.exercise)
    _only_the_domain_fails(ex, simplest)
    assert ex.diagnosis == mistake.message, explain(ex)
