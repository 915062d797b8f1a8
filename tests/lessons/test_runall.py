"""No code line of a student notebook is longer than MAX_LINE characters, so that no cell scrolls sideways in
JupyterLab at 1280 px with the sidebar open. (Run All of every stub notebook: tests/e2e/test_runall_e2e.py.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graders.registry import LESSONS

MAX_LINE = 100


def long_lines(path: Path) -> list[str]:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return [f"cell {i}: {len(line)} chars: {line[:60]}..." for i, c in enumerate(cells) if c["cell_type"] == "code"
            for line in "".join(c["source"]).splitlines() if len(line) > MAX_LINE]


@pytest.mark.parametrize("lesson", LESSONS, ids=[l.id for l in LESSONS])
def test_no_code_line_is_longer_than_the_limit(lesson):
    found = long_lines(lesson.student_path)
    assert not found, f"{lesson.notebook}: code lines over {MAX_LINE} characters:\n" + "\n".join(found)


def test_the_line_check_sees_a_long_line(tmp_path):
    path = tmp_path / "nb.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "source": ["x = 1\n", "y = " + "1 + " * 30 + "1"]},
                                          {"cell_type": "markdown", "source": ["w" * 200]}]}))
    assert len(long_lines(path)) == 1
