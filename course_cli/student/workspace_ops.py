"""Operations on the student's workspace that write notebooks: init, reset, backups.

Nothing here overwrites a student's notebook without first copying it to `.course/backups/`. Every file is
written through course_cli/atomic.py: a link planted at a notebook's or a backup's name is never written through.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from graders.registry import LESSONS, Lesson

from course_cli.student.workspace import MARKER


def backup(notebook: Path, workspace: Path) -> Path:
    """Copy `notebook` (whatever its state) to `.course/backups/<name>-<timestamp>.ipynb`: a new file, created
    only where nothing is (a link planted at that name is skipped over, never written through)."""
    from course_cli.atomic import create_new

    folder = workspace / MARKER / "backups"
    folder.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    data, st = notebook.read_bytes(), notebook.stat()
    n = 1
    while True:
        target = folder / (f"{notebook.stem}-{stamp}.ipynb" if n == 1 else f"{notebook.stem}-{stamp}-{n}.ipynb")
        try:
            create_new(target, data, mode=st.st_mode & 0o777)
        except FileExistsError:
            n += 1
            continue
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns), follow_symlinks=False)  # the notebook's times
        return target


def _pristine(lesson: Lesson):
    """The released student notebook (lessons/, which `course build --check` keeps in step with solutions/);
    built afresh only when it is missing: nbgrader's preprocessors take seconds to import."""
    from course_cli.sandboxed.notebook import _nbformat

    nbformat = _nbformat()  # without the IRI checker jsonschema would load: a second of grammar building

    if lesson.student_path.exists():
        return nbformat.read(lesson.student_path, as_version=4)
    from course_cli.instructor.build import student_notebook

    return nbformat.reads(student_notebook(lesson), as_version=4)


def _find(nb, exercise: str) -> int | None:
    pattern = re.compile(rf"^\s*(def|class)\s+{re.escape(exercise)}\b", re.M)
    by_meta = [i for i, c in enumerate(nb.cells)
               if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == exercise]
    if by_meta:
        return by_meta[0]
    by_text = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and pattern.search(c.source)]
    return by_text[-1] if by_text else None


def reset(lesson: Lesson, notebook: Path, workspace: Path, exercise: str | None = None) -> str:
    """Restore the pristine notebook, or one exercise's pristine cell; returns what was done, in words."""
    from course_cli.sandboxed.notebook import _nbformat

    nbformat = _nbformat()  # without the IRI checker jsonschema would load: a second of grammar building

    from course_cli.atomic import write_text
    from course_cli.sandboxed.notebook import NotebookError, read_notebook

    pristine = _pristine(lesson)
    saved = backup(notebook, workspace) if notebook.exists() else None
    kept = f"your notebook is backed up as {saved}" if saved else "there was no notebook to back up"
    if exercise is None:
        notebook.parent.mkdir(parents=True, exist_ok=True)
        write_text(notebook, nbformat.writes(pristine) + "\n")
        return f"Restored {notebook.name} to its pristine state; {kept}."
    lesson.exercise(exercise)
    try:
        nb = read_notebook(notebook)
    except NotebookError as exc:
        raise NotebookError(f"{exc}\nTo restore the whole notebook: course reset {lesson.id}") from None
    fresh = pristine.cells[_find(pristine, exercise)]
    i = _find(nb, exercise)
    if i is not None:
        nb.cells[i] = fresh
        where = f"cell {i + 1}"
    else:  # deleted: put it back just before its check cell, or at its original place
        tests = [j for j, c in enumerate(nb.cells)
                 if c.get("metadata", {}).get("nbgrader", {}).get("grade_id") == f"test_{exercise}"]
        i = tests[0] if tests else min(_find(pristine, exercise), len(nb.cells))
        nb.cells.insert(i, fresh)
        where = f"a new cell {i + 1} (it had been deleted)"
    from graders.engine.notebook import defines

    partners = [e.name for e in lesson.exercises if e.name != exercise and defines(fresh.source, e.name)]
    cleared = clear_check_outputs(nb, [exercise, *partners])
    write_text(notebook, nbformat.writes(nb) + "\n")
    also = f" (and {', '.join(f'`{p}`' for p in partners)}, which share{'s' if len(partners) == 1 else ''} its cell)" \
        if partners else ""
    stale = f" The old output of its check cell is cleared ({cleared} cell{'s' if cleared != 1 else ''})." \
        if cleared else ""
    return f"Restored `{exercise}`{also} in {where} of {notebook.name}; {kept}.{stale}"


def clear_check_outputs(nb, exercises: list[str]) -> int:
    """Empty the outputs of the exercises' check cells (nbgrader grade_id `test_<exercise>`), whose old "passed"
    would otherwise stand under the restored stub; returns how many cells had outputs."""
    ids = {f"test_{e}" for e in exercises}
    n = 0
    for c in nb.cells:
        if c.cell_type == "code" and c.get("metadata", {}).get("nbgrader", {}).get("grade_id") in ids:
            if c.get("outputs") or c.get("execution_count"):
                n += 1
            c.outputs, c.execution_count = [], None
    return n


# A student's JupyterLab, as `course lab` starts it (JUPYTER_CONFIG_DIR=<workspace>/.jupyter and
# JUPYTER_PREFER_ENV_PATH=0, so that this config wins over the environment's, where nbgrader enables itself): nbgrader's
# instructor UI (the Formgrader, the "Create Assignment" panel, its menu and course list) is not shown;
# grading runs in the check cells and `course check`.
NBGRADER_LAB_EXTENSION = "@jupyter/nbgrader"
NBGRADER_SERVER_EXTENSIONS = ("nbgrader.server_extensions.formgrader", "nbgrader.server_extensions.course_list",
                              "nbgrader.server_extensions.assignment_list",
                              "nbgrader.server_extensions.validate_assignment")
JUPYTER_DIR = ".jupyter"


def jupyter_config(target: Path) -> list[Path]:
    """Write the workspace's Jupyter config (student view: no nbgrader instructor UI); returns what was written.
    A file the student changed is left alone."""
    import json

    from course_cli.atomic import write_text

    files = {
        target / JUPYTER_DIR / "jupyter_server_config.d" / "attention-course.json":
            {"ServerApp": {"jpserver_extensions": {name: False for name in NBGRADER_SERVER_EXTENSIONS}}},
        target / JUPYTER_DIR / "labconfig" / "page_config.json":
            {"disabledExtensions": {NBGRADER_LAB_EXTENSION: True}},
        # no Jupyter news toast ("Would you like to receive official Jupyter news?") and no update check: the
        # server fetches no feed, and the student's settings say Never (a file of its own, so that a
        # workspace made before it gets it too)
        target / JUPYTER_DIR / "jupyter_server_config.d" / "attention-course-quiet.json":
            {"LabApp": {"news_url": None, "check_for_updates_class": "jupyterlab.NeverCheckForUpdate"}},
        target / JUPYTER_DIR / "lab" / "user-settings" / "@jupyterlab" / "apputils-extension" /
        "notification.jupyterlab-settings": {"fetchNews": "false", "checkForUpdates": False},
    }
    written = []
    for path, data in files.items():
        if path.exists():
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps(data, indent=2) + "\n")
        written.append(path)
    return written


def kernel_spec(target: Path, python: str) -> Path:
    """The workspace's Jupyter data folder (`course lab` puts it first on JUPYTER_PATH), holding a `python3`
    kernelspec: `python` (the course's environment) with the course_cli.kernel_warm extension. Rewritten on
    every `course lab`, so it follows the environment it runs from; returns the folder."""
    import json

    from course_cli.atomic import write_text

    data = target / JUPYTER_DIR / "data"
    spec = data / "kernels" / "python3" / "kernel.json"
    want = {"argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}", "--ext=course_cli.kernel_warm"],
            "display_name": "Python 3 (ipykernel)", "language": "python", "metadata": {"debugger": True}}
    try:
        if not spec.exists() or json.loads(spec.read_text()) != want:
            spec.parent.mkdir(parents=True, exist_ok=True)
            write_text(spec, json.dumps(want, indent=1) + "\n")
    except (OSError, ValueError):
        pass  # an unreadable or unwritable spec: the lab starts with the environment's own python3 kernel
    return data


def init(target: Path) -> tuple[list[Path], list[Path]]:
    """Make `target` a workspace: `.course/`, every lesson's notebook in `lessons/`, and a student's Jupyter
    config in `.jupyter/`. Existing notebooks are never touched (a newer course only adds the lessons you lack;
    whatever is at a notebook's name, a link included, is kept and never written through)."""
    from course_cli.atomic import create_new

    (target / MARKER).mkdir(parents=True, exist_ok=True)
    (target / "lessons").mkdir(exist_ok=True)
    jupyter_config(target)
    copied, kept = [], []
    for lesson in LESSONS:
        dest = target / "lessons" / lesson.notebook
        try:
            create_new(dest, lesson.student_path.read_bytes())
        except FileExistsError:
            kept.append(dest)
        else:
            copied.append(dest)
    return copied, kept
