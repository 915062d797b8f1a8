"""Where the student's work lives: the nearest folder (upwards, like git) holding `.course/`,
else the course's own clone. Notebooks are looked up in `lessons/` there, then in the folder itself.

A workspace found upwards is used only when it belongs to its user (the class of git's CVE-2022-24765):
`.course/` and the folders the course and `course lab` read from it (`.jupyter/` and its config and
kernelspec folders, `lessons/`) must be owned by the current user and not writable by group or others;
else UnsafeWorkspace, naming the folder and the fix, and nothing of it is read."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import click

from graders.registry import ROOT, Lesson

from course_cli import settings

MARKER = ".course"
# what the course reads from a workspace (relative to it): its marker, its notebooks, `course lab`'s Jupyter
# config (JUPYTER_CONFIG_DIR), data folder and kernelspecs (JUPYTER_PATH)
READ_FROM = (MARKER, "lessons", ".jupyter", ".jupyter/jupyter_server_config.d", ".jupyter/labconfig",
             ".jupyter/lab", ".jupyter/data", ".jupyter/data/kernels", ".jupyter/data/kernels/python3")


class UnsafeWorkspace(click.ClickException):
    """A `.course/` workspace (or a folder read from it) that its user does not own, or others may write."""


def unsafe_reason(folder: Path) -> str | None:
    """Why the course will not use the workspace `folder` (None: it may): the first of READ_FROM that is owned
    by another user, writable by group or others, or a link."""
    uid = os.geteuid()
    for rel in READ_FROM:
        p = folder / rel
        try:
            st = os.lstat(p)
        except FileNotFoundError:
            continue
        if stat.S_ISLNK(st.st_mode):
            return f"{p} is a symbolic link"
        if st.st_uid != uid:
            return f"{p} is owned by uid {st.st_uid}, not by you (uid {uid})"
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"{p} is writable by {'others' if st.st_mode & stat.S_IWOTH else 'its group'}"
    return None


def _refuse(folder: Path, why: str) -> UnsafeWorkspace:
    return UnsafeWorkspace(
        f"not using the workspace {folder}: {why}. Another user could have put it there (its Jupyter config "
        f"would run as you). If it is yours: `chown -R $USER {folder}/{MARKER} {folder}/.jupyter` and "
        f"`chmod -R go-w {folder}/{MARKER} {folder}/.jupyter {folder}/lessons`; else make your own with "
        f"`course init DIR` (or name one with COURSE_WORKSPACE)")


def locate(start: str | Path | None = None) -> tuple[Path, str]:
    """The workspace and how it was found: "env" (COURSE_WORKSPACE), "marker" (a `.course/` folder here or
    above) or "clone" (none found: the course's own clone)."""
    env = settings.workspace()
    if env:
        chosen = Path(env).resolve()
        why = unsafe_reason(chosen)
        if why:
            raise _refuse(chosen, why)
        return chosen, "env"
    here = Path(start or Path.cwd()).resolve()
    for d in (here, *here.parents):
        if (d / MARKER).is_dir() or (d / MARKER).is_symlink():
            why = unsafe_reason(d)
            if why:
                raise _refuse(d, why)
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
