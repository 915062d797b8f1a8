"""A check cell runs what `course check` runs: the kernel's history without the lesson's demo cells.

A student who ran the demos (plots, timings, lesson 10's small training runs) has them in the kernel's history;
the grader never runs a demo from a notebook file (`graded_cells`), so the check cell must not either: found
with a real browser, where lesson 10's first check cell took 24 s (its demos ran again in every check)."""

from __future__ import annotations

import json

import course_cli.incell as incell
from course_cli.instructor.build import guard_demo
from graders.engine.notebook import is_demo
from graders.registry import find_lesson

L10 = find_lesson("lesson10")


def _cells(path):
    return json.loads(path.read_text())["cells"]


def test_the_kernels_demo_cells_are_left_out_and_the_rest_kept_in_order(monkeypatch):
    solved = [c for c in _cells(L10.solution_path) if c["cell_type"] == "code"]
    demos = [c for c in solved if is_demo(c)]
    assert demos, "lesson 10 has demo cells"
    student_demos = [c for c in _cells(L10.student_path) if c["cell_type"] == "code" and is_demo(c)]
    history = [{"index": i, "source": "".join(c["source"])} for i, c in enumerate(solved + student_demos)]
    monkeypatch.setattr(incell, "kernel_cells", lambda: history)
    kept = incell.graded_kernel_cells(L10)
    assert [c["source"] for c in kept] == ["".join(c["source"]) for c in solved if not is_demo(c)]
    # a demo the student edited (so no notebook holds its text) still runs: only the lesson's own demos are known
    edited = {"index": 99, "source": "".join(demos[0]["source"]) + "\nprint('mine')"}
    monkeypatch.setattr(incell, "kernel_cells", lambda: history + [edited])
    assert incell.graded_kernel_cells(L10)[-1] == edited


def test_the_demo_guard_course_build_writes_is_the_one_left_out():
    guarded = guard_demo("print(SwiGLU)\n", {"SwiGLU"})
    assert guarded.startswith(incell.DEMO_GUARD)
