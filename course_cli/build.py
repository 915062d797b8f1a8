"""Deriving the student notebooks in lessons/ from the solved sources in solutions/.

An ordered list of nbgrader's own preprocessors, as `nbgrader generate_assignment` applies them:
ClearSolutions turns each `### BEGIN SOLUTION` region into `raise NotImplementedError()`,
ClearHiddenTests drops `### BEGIN HIDDEN TESTS` regions from the check cells, ClearOutput empties
outputs. Only the order matters (solutions before hidden tests: a check cell holds no solution).
"""

from __future__ import annotations

from pathlib import Path

from graders.registry import LESSONS, Lesson


def student_notebook(lesson: Lesson) -> str:
    """The student notebook's text, derived from the lesson's solved source."""
    import nbformat
    from nbgrader.preprocessors import ClearHiddenTests, ClearOutput, ClearSolutions

    nb = nbformat.read(lesson.solution_path, as_version=4)
    resources: dict = {}
    for step in (ClearSolutions(), ClearHiddenTests(), ClearOutput()):
        nb, resources = step.preprocess(nb, resources)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.execution_count = None
            cell.outputs = []
    return nbformat.writes(nb) + "\n"


def build(lessons=LESSONS, check: bool = False) -> list[Path]:
    """Write (or, with check=True, compare) every lesson's student notebook; returns those that differ."""
    stale = []
    for lesson in lessons:
        text = student_notebook(lesson)
        path = lesson.student_path
        current = path.read_text() if path.exists() else None
        if current != text:
            stale.append(path)
            if not check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
    return stale
