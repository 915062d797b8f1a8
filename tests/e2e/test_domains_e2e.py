"""test_domains, end to end: the tests of tests/lessons/test_domains.py that start a child (the slow tier)."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
import pytest
from graders.engine.checks import CHECKS_OF
from graders.engine.probe import draw_examples
from graders.registry import LESSONS, find_lesson
from harness import check_one, explain, reference, with_code
from test_domains import DECLARED  # noqa: F401 (helpers and fixtures shared with the fast tests)


def test_the_draws_depend_on_the_seed_only():
    lesson, exercise, domain = DECLARED[0]
    code = ("import importlib;from graders.engine.checks import CHECKS_OF;from graders.engine.probe import "
            f"draw_examples;d=CHECKS_OF(importlib.import_module({lesson.module!r})).domains[{exercise!r}][0];"
            "print(draw_examples(d, 99))")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert other == str(draw_examples(domain, 99))
    assert draw_examples(domain, 99) != draw_examples(domain, 100)
