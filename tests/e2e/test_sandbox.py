"""Broken notebooks get the right status and a clear message, never an internal traceback."""

from __future__ import annotations

import json

import nbformat
import pytest

from course_cli.sandboxed import sandbox
from course_cli.sandboxed.grading import grade_notebook
from graders.registry import find_lesson
from harness import explain, with_code
from harness import set_limit

L01 = find_lesson("lesson01")
SOFTMAX = "softmax"
SDPA = "scaled_dot_product_attention"


@pytest.fixture
def short_limits(monkeypatch):
    set_limit(monkeypatch, "cell_timeout", 2.0)
    set_limit(monkeypatch, "exercise_timeout", 3.0)


def no_traceback(result):
    text = json.dumps(result.to_dict()) + " ".join(result.notes)
    assert "Traceback (most recent call last)" not in text
    assert 'File "/' not in text  # no frames of ours, only the student's cells


def test_not_json(tmp_path):
    p = tmp_path / "broken.ipynb"
    p.write_text('{"cells": [ {"cell_type": "code", "source": "x = 1"')
    result = grade_notebook(L01, p)
    assert {e.status for e in result.exercises} == {"error"}
    assert "not valid JSON" in result.exercises[0].reason
    no_traceback(result)


def test_json_but_not_a_notebook(tmp_path):
    p = tmp_path / "data.ipynb"
    p.write_text('{"hello": 1}')
    result = grade_notebook(L01, p)
    assert "not a Jupyter notebook" in result.exercises[0].reason


def test_missing_path_and_directory(tmp_path):
    assert "no notebook at" in grade_notebook(L01, tmp_path / "nope.ipynb").exercises[0].reason
    assert "is a directory" in grade_notebook(L01, tmp_path).exercises[0].reason


def test_syntax_error_names_cell_and_line(tmp_path):
    code = "def softmax(x, dim=-1):\n    e = x.exp(\n    return e\n"
    result = grade_notebook(L01, with_code(L01, SOFTMAX, code, tmp_path))
    ex = result.exercises[0]
    assert ex.status == "error", explain(ex)
    assert "SyntaxError" in ex.reason and "cell" in ex.reason and "line" in ex.reason
    # the other exercise, in its own cell, is still graded (it calls softmax, so it errors at call time)
    assert result.exercises[1].status == "error"
    assert "NameError" in result.exercises[1].reason
    no_traceback(result)


def test_deleted_function_is_named(tmp_path):
    nb = nbformat.read(with_code(L01, SOFTMAX, "# I deleted it", tmp_path), as_version=4)
    path = tmp_path / "deleted.ipynb"
    nbformat.write(nb, path)
    ex = grade_notebook(L01, path, [SOFTMAX]).exercises[0]
    assert ex.status == "not_implemented"
    assert "no cell defines `softmax`" in ex.reason


def test_renamed_function_is_named(tmp_path):
    code = "def my_softmax(x, dim=-1):\n    e = (x - x.amax(dim, keepdim=True)).exp()\n    return e / e.sum(dim, keepdim=True)\n"
    ex = grade_notebook(L01, with_code(L01, SOFTMAX, code, tmp_path), [SOFTMAX]).exercises[0]
    assert ex.status == "not_implemented" and "renamed" in ex.reason


def test_helper_in_a_cell_of_its_own_is_graded(tmp_path):
    nb = nbformat.read(L01.solution_path, as_version=4)
    from harness import solution_cell_index

    i = solution_cell_index(nb, SOFTMAX)
    nb.cells[i].source = "def softmax(x, dim=-1):\n    return _normalise(_shifted_exp(x, dim), dim)\n"
    nb.cells.insert(i, nbformat.v4.new_code_cell("def _shifted_exp(x, dim):\n    return (x - x.amax(dim, keepdim=True)).exp()"))
    nb.cells.insert(i + 1, nbformat.v4.new_code_cell("def _normalise(e, dim):\n    return e / e.sum(dim, keepdim=True)"))
    path = tmp_path / "split.ipynb"
    nbformat.write(nb, path)
    result = grade_notebook(L01, path)
    assert all(e.status == "passed" for e in result.exercises), [explain(e) for e in result.exercises]


def test_infinite_loop_inside_the_function_times_out(tmp_path, short_limits):
    code = "def softmax(x, dim=-1):\n    while True:\n        pass\n"
    result = grade_notebook(L01, with_code(L01, SOFTMAX, code, tmp_path), [SOFTMAX])
    ex = result.exercises[0]
    assert ex.status == "timeout", explain(ex)
    assert "time limit" in ex.reason
    no_traceback(result)


def test_infinite_loop_at_top_level_times_out_the_cell_and_grading_goes_on(tmp_path, short_limits):
    code = ("def softmax(x, dim=-1):\n    e = (x - x.amax(dim, keepdim=True)).exp()\n"
            "    return e / e.sum(dim, keepdim=True)\n\nwhile True:\n    pass\n")
    result = grade_notebook(L01, with_code(L01, SOFTMAX, code, tmp_path))
    assert result.exercises[0].status == "passed"  # defined before the loop
    assert any("time limit" in n for n in result.notes)


def test_memory_bomb_is_an_error_that_says_so(tmp_path, monkeypatch):
    set_limit(monkeypatch, "memory", 2 * 2**30)
    code = ("def softmax(x, dim=-1):\n    hog = []\n    while True:\n        hog.append(bytearray(2**27))\n")
    result = grade_notebook(L01, with_code(L01, SOFTMAX, code, tmp_path), [SOFTMAX])
    ex = result.exercises[0]
    assert ex.status == "error", explain(ex)
    assert "out of memory" in ex.reason
    no_traceback(result)


def test_sys_exit_in_a_cell_does_not_stop_grading(tmp_path):
    nb = nbformat.read(L01.solution_path, as_version=4)
    nb.cells.insert(2, nbformat.v4.new_code_cell("import sys\nsys.exit(0)"))
    path = tmp_path / "exit.ipynb"
    nbformat.write(nb, path)
    result = grade_notebook(L01, path)
    assert all(e.status == "passed" for e in result.exercises)
    assert any("sys.exit" in n for n in result.notes)


def test_os_exit_before_grading_is_an_error_not_a_pass(tmp_path):
    nb = nbformat.read(L01.solution_path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell('import os\nprint(\'{"score": 10}\')\nos._exit(0)'))
    path = tmp_path / "osexit.ipynb"
    nbformat.write(nb, path)
    result = grade_notebook(L01, path)
    assert {e.status for e in result.exercises} == {"error"}
    assert "ended the grading process" in result.exercises[0].reason
    assert result.score == 0


def test_magics_and_shell_escapes_are_skipped(tmp_path):
    nb = nbformat.read(L01.solution_path, as_version=4)
    nb.cells.insert(2, nbformat.v4.new_code_cell("%matplotlib inline\n!echo hi\nx_magic = 1"))
    nb.cells.insert(3, nbformat.v4.new_code_cell("%%timeit\nsum(range(10))"))
    path = tmp_path / "magics.ipynb"
    nbformat.write(nb, path)
    result = grade_notebook(L01, path)
    assert all(e.status == "passed" for e in result.exercises)
    assert not result.notes


def test_gpu_checks_run_when_the_parent_sees_cuda(monkeypatch):
    """The CPU child runs with CUDA hidden, so the parent decides whether the GPU child runs."""
    from course_cli.sandboxed import grading

    calls = []
    monkeypatch.setattr(grading, "cuda_available", lambda: True)
    monkeypatch.setattr(grading.Grading, "_add_gpu", lambda self, obs, ref: calls.append(sorted(obs)))
    result = grade_notebook(L01, L01.solution_path)
    assert calls == [[SDPA, SOFTMAX]]
    # with a GPU "present" but its child stubbed out, the cuda checks have no observations: not a pass
    cuda = [c for e in result.exercises for c in e.checks if c.device == "cuda"]
    assert cuda and all(c.status != "passed" for c in cuda)
