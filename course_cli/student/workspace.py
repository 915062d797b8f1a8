"""Where the student's work lives: the nearest folder (upwards, like git) holding `.course/`,
else the course's own clone. Notebooks are looked up in `lessons/` there, then in the folder itself."""

from __future__ import annotations

import os
from pathlib import Path

from graders.registry import ROOT, Lesson

MARKER = ".course"


def locate(start: str | Path | None = None) -> tuple[Path, str]:
    """The workspace and how it was found: "env" (COURSE_WORKSPACE), "marker" (a `.course/` folder here or
    above) or "clone" (none found: the course's own clone)."""
    env = os.environ.get("COURSE_WORKSPACE")
    if env:
        return Path(env).resolve(), "env"
    here = Path(start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / MARKER).is_dir():
            return d, "marker"
    return ROOT, "clone"


def find_workspace(start: str | Path | None = None) -> Path:
    return locate(start)[0]


def outside_note(start: str | Path | None = None) -> str | None:
    """What to tell a student who runs a command outside any workspace (None inside one)."""
    path, how = locate(start)
    if how != "clone":
        return None
    return (f"no workspace here (no {MARKER}/ folder in {Path(start or Path.cwd()).resolve()} or above): using the "
            f"course's own clone, {path}. Make your own with `course init DIR`.")


def notebook_path(lesson: Lesson, workspace: Path) -> Path:
    for p in (workspace / "lessons" / lesson.notebook, workspace / lesson.notebook):
        if p.exists():
            return p
    return workspace / "lessons" / lesson.notebook
