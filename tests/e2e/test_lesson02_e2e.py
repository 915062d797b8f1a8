"""test_lesson02, end to end: the tests of tests/lessons/test_lesson02.py that start a child (the slow tier)."""

from __future__ import annotations

import subprocess
import sys
import pytest
from graders.registry import ROOT, find_lesson
from harness import check_in_process, check_one, explain, with_code
pytestmark = pytest.mark.lesson02


def test_grader_imports_without_dynamo():
    # causal_lower_right pulls in torch._dynamo (slow): only the probes that need it import it, when they run
    code = "import sys, graders.lesson02_masks; print('torch._dynamo' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
    import graders.lesson02_masks as g
    lower_right = [c for c in g.CHECKS if "causal_lower_right" in c.name]
    # one property, public with its hidden twin (issue 29: hidden checks add inputs, never properties)
    assert lower_right and any(c.hidden for c in lower_right) and any(not c.hidden for c in lower_right)
    assert len({c.property for c in lower_right}) == 1


def test_grading_lesson01_never_imports_dynamo():
    """The first call through a dispatch mode would import torch._dynamo (seconds, inside the first exercise's
    time limit) unless the mode says it compiles nothing (graders.engine.probe.RecordingMode)."""
    code = ("import sys; sys.path.insert(0, 'tests'); from harness import check_in_process; "
            "from graders.registry import find_lesson; L = find_lesson('lesson01'); "
            "r = check_in_process(L, L.solution_path); "
            "print({e.status for e in r.exercises}, 'torch._dynamo' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "{'passed'} False", out.stdout + out.stderr[-2000:]
