"""Markers from the registry: `pytest -m "lesson01 and softmax"` selects what `course check lesson01 softmax` runs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
# In-process probes (tests/harness.py) run Triton kernels on the CPU, as the sandboxed child does: the
# interpreter must be chosen before anything imports triton (torch._dynamo does). Children set their own.
os.environ.setdefault("TRITON_INTERPRET", "1")

from graders.registry import LESSONS  # noqa: E402


def pytest_configure(config):
    names = set()
    for lesson in LESSONS:
        names.add(lesson.id)
        names.update(e.name for e in lesson.exercises)
    for name in sorted(names):
        config.addinivalue_line("markers", f"{name}: checks of {name} (from graders/registry.py)")
    config.addinivalue_line("markers", "slow: end-to-end runs over several notebooks")


def marks(lesson, exercise=None):
    out = [getattr(pytest.mark, lesson.id)]
    if exercise:
        out.append(getattr(pytest.mark, exercise))
    return out


@pytest.fixture(autouse=True)
def _isolated_workspace(tmp_path, monkeypatch):
    """No test writes progress into the developer's clone."""
    monkeypatch.setenv("COURSE_WORKSPACE", str(tmp_path / "workspace"))
