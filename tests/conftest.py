"""Markers from the registry (`pytest -m "lesson01 and softmax"` selects what `course check lesson01 softmax`
runs) and the two test tiers.

The default run is the fast tier: the graders probed and judged in process (tests/harness.py), unit tests.
The slow tier is end to end: sandboxed children, real nbgrader, a browser, the CLI in a subprocess, the
hostile corpus. A test is slow when it is marked `@pytest.mark.slow` or lives in a module of END_TO_END.

    python -m pytest -q -n auto            # the fast tier (slow tests deselected)
    python -m pytest -q -n auto -m slow    # the slow tier
    python -m pytest -q -n auto --all-tiers  # both
A `-m` expression of your own (e.g. `-m lesson03`) selects across both tiers, and so does naming test files
(`python -m pytest tests/test_gpu.py`).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
# In-process probes (tests/harness.py) run Triton kernels on the CPU, as the sandboxed child does: the
# interpreter must be chosen before anything imports triton (torch._dynamo does). Children set their own.
os.environ.setdefault("TRITON_INTERPRET", "1")
# Tests grade cold unless they ask for the warm grader (tests/test_warm.py): a warm server per temporary
# workspace would outlive the test that started it.
os.environ.setdefault("COURSE_WARM", "0")
os.environ.setdefault("COURSE_INIT_REFERENCES", "0")  # `course init` in a test does not build every reference

from graders.registry import LESSONS  # noqa: E402


# Modules whose tests are end to end as a whole (each starts sandboxed children, nbgrader, a browser, a
# cluster or the CLI in a subprocess): all their tests are in the slow tier.
END_TO_END = {
    "test_sandbox", "test_tamper", "test_hostile", "test_attacks", "test_nbgrader", "test_gpu",
    "test_instructor_guide", "test_browser", "test_determinism", "test_student", "test_batch", "test_cli",
    "test_progress", "test_incell", "test_cluster", "test_classroom", "test_gradescope", "test_report",
    "test_summary", "test_triton_compat", "test_lesson08", "test_lesson09", "test_lesson10",
}


def pytest_addoption(parser):
    parser.addoption("--all-tiers", action="store_true", help="run the slow tier too (end-to-end tests)")
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite tests/golden/ from this run (a change meant to change verdicts)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.module.__name__.rsplit(".", 1)[-1] in END_TO_END:
            item.add_marker(pytest.mark.slow)
    if config.getoption("--all-tiers") or config.getoption("markexpr"):
        return
    if config.args and all(".py" in a for a in config.args):
        return  # test files named on the command line run whole, both tiers
    fast = [i for i in items if i.get_closest_marker("slow") is None]
    if len(fast) < len(items):
        config.hook.pytest_deselected(items=[i for i in items if i.get_closest_marker("slow") is not None])
        items[:] = fast


def pytest_configure(config):
    names = set()
    for lesson in LESSONS:
        names.add(lesson.id)
        names.update(e.name for e in lesson.exercises)
    for name in sorted(names):
        config.addinivalue_line("markers", f"{name}: checks of {name} (from graders/registry.py)")
    config.addinivalue_line("markers", "slow: end to end (the sandbox, nbgrader, a browser, the CLI); run with "
                            "-m slow or --all-tiers")


def marks(lesson, exercise=None):
    out = [getattr(pytest.mark, lesson.id)]
    if exercise:
        out.append(getattr(pytest.mark, exercise))
    return out


@pytest.fixture(autouse=True)
def _isolated_workspace(tmp_path, monkeypatch):
    """No test writes progress into the developer's clone."""
    monkeypatch.setenv("COURSE_WORKSPACE", str(tmp_path / "workspace"))
