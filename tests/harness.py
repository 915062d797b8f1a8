"""Test helpers shared by every lesson's tests: notebooks with one exercise swapped, graded end to end.

A lesson's mistake variants live beside its reference in graders/<lesson>.py; `with_code` turns one
into a fixture notebook (the solved notebook with that exercise's solution cell replaced), which is
then graded by the same path as `course check --notebook`.
"""

from __future__ import annotations

import copy
import importlib
import re
from pathlib import Path

import nbformat

from course_cli.grading import grade_notebook
from graders.engine import mistake_source
from graders.registry import Lesson


def solution_cell_index(nb, exercise: str) -> int:
    pattern = re.compile(rf"^\s*(def|class)\s+{re.escape(exercise)}\b", re.M)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code" and pattern.search(cell.source):
            return i
    raise LookupError(f"no cell defines {exercise}")


def with_code(lesson: Lesson, exercise: str, code: str, tmp_path: Path, name: str | None = None,
              base: Path | None = None) -> Path:
    """The solved notebook (or `base`) with `exercise`'s defining cell replaced by `code`."""
    nb = nbformat.read(base or lesson.solution_path, as_version=4)
    nb = copy.deepcopy(nb)
    nb.cells[solution_cell_index(nb, exercise)].source = code
    path = tmp_path / (name or f"{lesson.id}-{exercise}.ipynb")
    nbformat.write(nb, path)
    return path


def with_mistake(lesson: Lesson, mistake, tmp_path: Path) -> Path:
    return with_code(lesson, mistake.exercise, mistake_source(mistake), tmp_path, f"{lesson.id}-{mistake.id}.ipynb")


def mistakes_of(lesson: Lesson):
    return importlib.import_module(lesson.module).MISTAKES


def grade_one(lesson: Lesson, path: Path, exercise: str):
    """Grade only `exercise` of the notebook at `path`; returns its ExerciseResult."""
    result = grade_notebook(lesson, path, [exercise])
    (ex,) = result.exercises
    return ex


def explain(ex) -> str:
    lines = [f"{ex.id}: {ex.status} ({ex.points}/{ex.max_points}) diagnosis={ex.diagnosis!r}"]
    lines += [f"  {c.name} [{c.device}/{c.dtype}] {c.status}: {c.message}" for c in ex.checks if c.status != "skipped"]
    return "\n".join(lines)
