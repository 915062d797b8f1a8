"""The IPython extension `course lab`'s kernels load: a lesson notebook's kernel starts that lesson's warm grader.

`course lab` puts a python3 kernelspec of the workspace's first on JUPYTER_PATH, with `--ext` naming this module.
JupyterLab names the notebook to its kernel in JPY_SESSION_NAME; for a lesson notebook the warm grader starts
then, so that the notebook's first check cell finds it warm. It never raises and never waits: a kernel starts as
it would without it."""

from __future__ import annotations

import os
from pathlib import Path


def lesson_of(session: str):
    """The lesson whose notebook `session` (a notebook's path) is, by file name; None for any other file."""
    from graders.registry import LESSONS

    name = Path(session).name
    return next((lesson for lesson in LESSONS if lesson.notebook == name), None) if name else None


def load_ipython_extension(ip) -> None:  # noqa: ARG001 (IPython's signature)
    try:
        lesson = lesson_of(os.environ.get("JPY_SESSION_NAME", ""))
        if lesson is None:
            return
        from course_cli.sandboxed.warm import prestart, stay_with
        from course_cli.student.workspace import find_workspace

        stay_with(os.getpid())  # the grader ends with this kernel (or when idle), as the check cell's does
        prestart(lesson, find_workspace(), detach=False)  # a kernel has threads: no fork, a child in its own session
    except Exception:  # noqa: BLE001 - a warm grader is a convenience; the check cell starts one anyway
        pass
