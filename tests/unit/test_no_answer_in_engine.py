"""The engine's modules are in every child build a student's code can read (tests/e2e/test_child_build.py walks
it from inside the sandbox, in the slow tier): none of them may hold a solved line or a catalogued mistake's
edit of any lesson. Twice a docstring of a mutation module quoted one (lesson 05's `weight.float()`, a line of
lesson 05's solution) and only the slow tier found it; this is the same needle list, on the engine's files, here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
from test_child_build import GENERIC, KNOWN, needles  # noqa: E402  (one needle list, the slow test's)

ENGINE = sorted((ROOT / "graders" / "engine").glob("*.py"))


@pytest.mark.parametrize("path", ENGINE, ids=[p.stem for p in ENGINE])
def test_an_engine_module_holds_no_answer(path):
    text = path.read_text()
    found = [(line, why) for line, why in needles(1).items()
             if line in text and line not in GENERIC and (path.stem, line) not in KNOWN]
    assert not found, f"{path.name} holds what a student's child must not read: {found[:5]}"
