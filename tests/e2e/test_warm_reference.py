"""tests/unit/test_reference_untouched.py for every lesson but lesson 01 (which the fast tier checks): judging
only reads the reference a warm server shares among its checks."""

from __future__ import annotations

import pytest

from graders.registry import LESSONS
from test_reference_untouched import judging_leaves_the_reference_as_it_was

OTHERS = [l for l in LESSONS if l.id != "lesson01"]


@pytest.mark.slow
@pytest.mark.parametrize("lesson", OTHERS, ids=[l.id for l in OTHERS])
def test_judging_leaves_the_reference_as_it_was(lesson):
    judging_leaves_the_reference_as_it_was(lesson)
