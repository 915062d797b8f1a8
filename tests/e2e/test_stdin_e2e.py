"""`input()` in a graded notebook gets the same EOFError note wherever the cell is and whatever stdin the grader
was given (issue 27: on one Debian 12 machine the hostile corpus's `reads_stdin` case left no note).

The grader runs in a process of its own, its stdin a terminal (a pty), a pipe that carries text, or closed; the
notebook asks for input twice, before the first exercise's cell (where the hostile fixture puts it) and after
the last cell. Each time both exercises pass and both cells' notes name the EOFError and why.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from course_cli.sandboxed import sandbox
from graders.registry import ROOT, find_lesson

pytestmark = pytest.mark.slow
L01 = find_lesson("lesson01")

GRADE = """
import json, sys
from pathlib import Path
from course_cli.sandboxed.grading import grade_notebook
from graders.registry import find_lesson
r = grade_notebook(find_lesson("lesson01"), Path(sys.argv[1]))
print("RESULT " + json.dumps({"status": {e.id: e.status for e in r.exercises}, "notes": r.notes}))
"""


def _notebook(tmp: Path) -> Path:
    nb = nbformat.read(L01.solution_path, as_version=4)
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "def softmax" in c.source)
    nb.cells.insert(first, nbformat.v4.new_code_cell("name = input('your name? ')"))
    nb.cells.append(nbformat.v4.new_code_cell("again = input()"))
    path = tmp / "asks.ipynb"
    nbformat.write(nb, path)
    return path


def _grade(path: Path, stdin: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COURSE_WARM": "0"}
    argv = [sys.executable, "-c", GRADE, str(path)]
    if stdin == "pty":
        parent, child = pty.openpty()
        try:
            r = subprocess.run(argv, stdin=child, capture_output=True, text=True, env=env, timeout=600)
        finally:
            os.close(child)
            os.close(parent)
    elif stdin == "pipe":
        r = subprocess.run(argv, input="alice\n" * 1000, capture_output=True, text=True, env=env, timeout=600)
    else:  # closed: the grader starts with no fd 0 at all
        r = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=600,
                           preexec_fn=lambda: os.close(0))
    line = next((l for l in r.stdout.splitlines() if l.startswith("RESULT ")), None)
    assert line, r.stdout[-2000:] + r.stderr[-2000:]
    return json.loads(line[len("RESULT "):])


@pytest.mark.skipif(not sandbox.bwrap_status()[0], reason="needs the sandbox (bubblewrap)")
@pytest.mark.parametrize("stdin", ["pty", "pipe", "closed"])
def test_input_is_an_eof_note_wherever_the_cell_and_whatever_stdin(stdin, tmp_path):
    got = _grade(_notebook(tmp_path), stdin)
    assert got["status"] == {e.name: "passed" for e in L01.exercises}, got
    eof = [n for n in got["notes"] if n.startswith("EOFError") and "no keyboard" in n]
    assert len(eof) == 2, got["notes"]  # the cell before the exercises and the last cell, each named
    assert any("your name?" in n for n in eof) and any("again = input()" in n for n in eof), eof
