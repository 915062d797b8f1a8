"""The check cells, run in a real Jupyter kernel (nbclient): the same graders, a Rich table inline,
AssertionError on failure (so nbgrader scores the cell 0), and the attempt recorded."""

from __future__ import annotations

import json

import nbclient
import nbformat
import pytest

from course_cli.notebook import is_demo
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


def test_solved_notebook_passes_in_a_kernel_and_records_progress(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    (ws / ".course").mkdir(parents=True)
    monkeypatch.setenv("COURSE_WORKSPACE", str(ws))
    outs = execute(nbformat.read(L01.solution_path, as_version=4), tmp_path)
    assert set(outs) == {"softmax", "scaled_dot_product_attention"}
    for name, o in outs.items():
        assert not errors(o), text(o)
        assert "passed" in text(o)
        assert any("text/html" in x.get("data", {}) for x in o)  # Rich renders HTML in JupyterLab
    progress = json.loads((ws / ".course" / "progress.json").read_text())
    assert progress["lessons"]["lesson01"]["best"]["softmax"]["status"] == "passed"


def test_student_notebook_says_not_implemented(tmp_path):
    outs = execute(nbformat.read(L01.student_path, as_version=4), tmp_path)
    for name, o in outs.items():
        (err,) = errors(o)
        assert err.ename == "AssertionError" and "not implemented" in err.evalue
        assert "Traceback" not in err.evalue


def test_planted_mistake_shows_its_diagnosis(tmp_path):
    mistake = next(m for m in mistakes_of(L01) if m.id == "divide_by_dk")
    nb = nbformat.read(L01.solution_path, as_version=4)
    nb.cells[solution_cell_index(nb, mistake.exercise)].source = mistake_source(mistake)
    outs = execute(nb, tmp_path)
    assert not errors(outs["softmax"])
    o = outs["scaled_dot_product_attention"]
    assert errors(o) and "Likely mistake" in errors(o)[0].evalue
    assert "dk instead of √dk" in text(o)
