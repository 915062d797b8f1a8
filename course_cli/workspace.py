"""Where the student's work lives: the nearest folder (upwards, like git) holding `.course/`,
else the course's own clone. Notebooks are looked up in `lessons/` there, then in the folder itself."""

from __future__ import annotations

import os
from pathlib import Path

from graders.registry import ROOT, Lesson

MARKER = ".course"


def find_workspace(start: str | Path | None = None) -> Path:
    env = os.environ.get("COURSE_WORKSPACE")
    if env:
        return Path(env).resolve()
    here = Path(start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / MARKER).is_dir():
            return d
    return ROOT


def notebook_path(lesson: Lesson, workspace: Path) -> Path:
    for p in (workspace / "lessons" / lesson.notebook, workspace / lesson.notebook):
        if p.exists():
            return p
    return workspace / "lessons" / lesson.notebook
