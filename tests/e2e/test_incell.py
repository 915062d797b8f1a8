"""The check cells, run in a real Jupyter kernel (nbclient): the same graders, an HTML report inline, no
exception in a student's kernel (Run All goes on; nbgrader scores the cell from the verdict the course's
autograder step writes, tested in test_nbgrader.py), and the attempt recorded."""

from __future__ import annotations

import json

import nbclient
import nbformat
import pytest

from course_cli.sandboxed.notebook import is_demo
from graders.engine import mistake_source
from graders.registry import find_lesson
from harness import mistakes_of, solution_cell_index

pytestmark = [pytest.mark.lesson01, pytest.mark.slow]
L01 = find_lesson("lesson01")


def execute(nb, cwd):
    nb.cells = [c for c in nb.cells if not is_demo(c)]  # the demos are not under test here
    nbclient.NotebookClient(nb, timeout=180, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(cwd)}}).execute()
    outputs = {}
    for cell in nb.cells:
        gid = cell.metadata.get("nbgrader", {}).get("grade_id", "")
        if gid.startswith("test_"):
            outputs[gid.removeprefix("test_")] = cell.outputs
    return outputs


def text(outputs) -> str:
    parts = []
    for o in outputs:
        if o.output_type == "display_data":
            parts.append(o.data.get("text/plain", ""))
        elif o.output_type == "error":
            parts.append(f"{o.ename}: {o.evalue}")
        elif o.output_type == "stream":
            parts.append(o.text)
    return "\n".join(parts)


def errors(outputs):
    return [o for o in outputs if o.output_type == "error"]


def html(outputs) -> str:
    return "\n".join(o.data.get("text/html", "") for o in outputs if o.output_type == "display_data")


def test_solved_notebook_passes_in_a_kernel_and_records_progress(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    (ws / ".course").mkdir(parents=True)
    monkeypatch.setenv("COURSE_WORKSPACE", str(ws))
    outs = execute(nbformat.read(L01.solution_path, as_version=4), tmp_path)
    assert set(outs) == {"softmax", "scaled_dot_product_attention"}
    for name, o in outs.items():
        assert not errors(o), text(o)
        assert "passed" in text(o)
        assert "course-check passed" in html(o)  # an HTML report, which wraps to the output area
        assert "<svg" not in html(o)  # nothing is drawn when every check passes
    progress = json.loads((ws / ".course" / "progress.json").read_text())
    assert progress["lessons"]["lesson01"]["best"]["softmax"]["status"] == "passed"


def test_student_notebook_says_not_implemented_and_run_all_goes_on(tmp_path):
    nb = nbformat.read(L01.student_path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell("print('the last cell ran')"))
    outs = execute(nb, tmp_path)
    for name, o in outs.items():
        assert not errors(o), text(o)  # no exception, so Run All does not stop here
        assert "not implemented" in text(o) and "Traceback" not in text(o)
    assert "the last cell ran" in nb.cells[-1].outputs[0].text


def test_planted_mistake_shows_its_diagnosis_and_no_traceback(tmp_path):
    mistake = next(m for m in mistakes_of(L01) if m.id == "divide_by_dk")
    nb = nbformat.read(L01.solution_path, as_version=4)
    nb.cells[solution_cell_index(nb, mistake.exercise)].source = mistake_source(mistake)
    nb.cells.append(nbformat.v4.new_code_cell("check('scaled_dot_product_attention')"))  # any cell, no import
    outs = execute(nb, tmp_path)
    assert not errors(outs["softmax"])
    o = outs["scaled_dot_product_attention"]
    assert not errors(o) and "Likely mistake" in html(o) and "dk instead of √dk" in text(o)
    assert "incell.py" not in text(o) + html(o)
    last = nb.cells[-1].outputs
    assert not errors(last) and "dk instead of √dk" in text(last)
