"""The warm zygote imports, before it forks any check, what its lesson's checks import lazily (issue 33): a
module a forked check imports is imported again by every check, and lost with it. For each lesson, a fresh
process imports what the zygote imports (zygote.preload), takes the reference's draws from a forked process (a
warm check is handed them), then checks the solution in process (its probes, the reference's and the catalogued
mistakes'); a module it then imports from a heavy package fails the test, naming what to add to WARM_IMPORTS."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from graders.registry import LESSONS, ROOT

# the packages whose lazy imports cost a check tenths of a second to seconds (sympy 0.6 s, torch._dynamo 2 s)
HEAVY = ("torch", "sympy", "mpmath", "hypothesis", "numpy", "triton")

SCRIPT = r"""
import importlib, json, sys
sys.path[:0] = [{root!r}, {tests!r}]
import torch
from graders import engine
from graders.registry import find_lesson
from course_cli.sandboxed import child, zygote
lesson = find_lesson({lesson!r})
module = importlib.import_module(lesson.module)
zygote.preload(module)
import harness, os
from graders.engine import draws
# the reference's draws, made in a forked process (the server's part): a warm check is handed them
r, w = os.pipe()
if os.fork() == 0:
    harness.reference(lesson)
    os.write(w, json.dumps(draws.made()).encode())
    os._exit(0)
os.close(w)
data = b""
while chunk := os.read(r, 1 << 16):
    data += chunk
os.wait()
draws.given(json.loads(data))
before = set(sys.modules)
harness.check_in_process(lesson, lesson.solution_path)
print(json.dumps(sorted(set(sys.modules) - before)))
"""


@pytest.mark.parametrize("lesson", LESSONS, ids=[lesson.id for lesson in LESSONS])
def test_a_warm_check_imports_nothing_heavy_the_zygote_left_lazy(lesson):
    script = SCRIPT.format(root=str(ROOT), tests=str(ROOT / "tests"), lesson=lesson.id)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600,
                         cwd=str(ROOT))
    assert out.returncode == 0, out.stderr[-3000:]
    new = json.loads(out.stdout.strip().splitlines()[-1])
    heavy = [m for m in new if m.split(".")[0] in HEAVY]
    assert not heavy, (f"{lesson.id}'s check imports {len(heavy)} modules the zygote did not: add the first "
                       f"of these a probe imports to WARM_IMPORTS in {lesson.module}: {heavy[:12]}")
