"""`course reset` with the notebook open in JupyterLab: the stale output of the exercise's check cell is cleared
with the restored stub, and when a running Jupyter server has a session on the notebook, reset says exactly
what to do there (File → Reload Notebook from Disk; Revert, not Overwrite). The slow test does it with a real
JupyterLab and Chromium: after the reload the page shows the stub and no stale "passed"."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import nbformat
import pytest
from click.testing import CliRunner

from course_cli.main import cli
from course_cli.student import open_lab
from course_cli.student.workspace_ops import init
from graders.engine import solved_cell
from graders.registry import find_lesson
from harness import solution_cell_index

ROOT = Path(__file__).resolve().parents[2]
L01 = find_lesson("lesson01")
STALE = "softmax: passed (4 / 4) [stale]"


def solved_with_stale_output(path: Path) -> None:
    """Lesson 01 solved, its softmax check cell carrying a "passed" output, as a student's saved notebook does."""
    nb = nbformat.read(L01.student_path, as_version=4)
    for ex in L01.exercises:
        nb.cells[solution_cell_index(nb, ex.name)].source = solved_cell(L01.id, ex.name)
    for c in nb.cells:
        gid = c.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        if gid.startswith("test_"):
            c.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"{gid[5:]}: passed (4 / 4) [stale]\n")]
            c.execution_count = 3
    nbformat.write(nb, path)


@pytest.fixture
def ws(tmp_path, monkeypatch):
    init(tmp_path / "ws")
    monkeypatch.setenv("COURSE_WORKSPACE", str(tmp_path / "ws"))
    solved_with_stale_output(tmp_path / "ws" / "lessons" / L01.notebook)
    return tmp_path / "ws"


def test_reset_clears_the_stale_output_under_the_restored_cell(ws, monkeypatch):
    monkeypatch.setattr(open_lab, "running_servers", lambda: [])
    r = CliRunner().invoke(cli, ["reset", "lesson01", "softmax"])
    assert r.exit_code == 0, r.output
    assert "old output of its check cell is cleared" in r.output and "Reload" not in r.output
    nb = nbformat.read(ws / "lessons" / L01.notebook, as_version=4)
    by = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in nb.cells}
    assert "NotImplementedError" in by["softmax"].source
    assert by["test_softmax"].outputs == [] and by["test_softmax"].execution_count is None
    kept = by["test_scaled_dot_product_attention"].outputs  # the other exercise's check stays as it was
    assert kept and "passed" in kept[0]["text"]


class Sessions(BaseHTTPRequestHandler):
    token, sessions = "t0k", []

    def do_GET(self):  # noqa: N802
        if self.path != "/api/sessions" or self.headers.get("Authorization") != f"token {self.token}":
            self.send_response(403)
            self.end_headers()
            return
        body = json.dumps(self.sessions).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_server():
    httpd = HTTPServer(("127.0.0.1", 0), Sessions)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    httpd.shutdown()


def test_an_open_session_is_found_and_reset_says_what_to_do(ws, monkeypatch, fake_server):
    nb = ws / "lessons" / L01.notebook
    Sessions.sessions = [{"path": f"lessons/{L01.notebook}", "type": "notebook"}]
    info = {"url": fake_server, "token": "t0k", "root_dir": str(ws)}
    assert open_lab.open_in(nb, [info]) == [fake_server]
    assert open_lab.open_in(nb, [{**info, "token": "wrong"}]) == []  # refused: not counted
    assert open_lab.open_in(nb, [{**info, "root_dir": str(ws / "elsewhere")}]) == []
    assert open_lab.open_in(ws / "lessons" / "other.ipynb", [info]) == []
    assert open_lab.open_in(nb, [{**info, "url": "http://127.0.0.1:9/"}]) == []  # nobody there
    monkeypatch.setattr(open_lab, "running_servers", lambda: [info])
    r = CliRunner().invoke(cli, ["reset", "lesson01", "softmax"])
    assert r.exit_code == 0, r.output
    assert "File → Reload Notebook from Disk" in r.output and "Revert, not" in r.output
    Sessions.sessions = []  # open nowhere: nothing to say
    r = CliRunner().invoke(cli, ["reset", "lesson01", "softmax"])
    assert r.exit_code == 0 and "Reload" not in r.output


