"""Every student notebook runs top to bottom (Run All) with its exercises still stubs.

A student who opens a lesson and presses Run All must reach the end: a demo cell that uses an unwritten
exercise prints the course's one-line notice (`course_cli.incell.demo`), a check cell reports
not_implemented, and nothing raises. The test starts a real python3 kernel per notebook (nbclient, no
browser) and fails on any error output.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from graders.registry import LESSONS, ROOT

NOTICE = "This demo uses an exercise above that is not written yet"


def run_all(notebook: Path, workdir: Path, timeout: int = 600) -> tuple[list[str], int]:
    """Execute a copy of `notebook` in `workdir`; returns ('cell N: Error: message', ...) and the notices."""
    import nbformat
    from nbclient import NotebookClient

    copy = workdir / notebook.name
    shutil.copy(notebook, copy)
    nb = nbformat.read(copy, as_version=4)
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
           "MPLBACKEND": "Agg"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits them: this checkout's course, no display
    try:
        NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                       resources={"metadata": {"path": str(workdir)}}).execute()
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    errors, notices = [], 0
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                errors.append(f"cell {i}: {out.get('ename')}: {out.get('evalue')}")
            elif out.get("output_type") == "stream" and NOTICE in out.get("text", ""):
                notices += 1
    return errors, notices


@pytest.mark.parametrize("lesson", LESSONS, ids=[l.id for l in LESSONS])
def test_run_all_of_the_stub_notebook_reaches_the_end(lesson, tmp_path):
    errors, _ = run_all(lesson.student_path, tmp_path)
    assert not errors, f"{lesson.notebook}: Run All stops:\n" + "\n".join(errors)

