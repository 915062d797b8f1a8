"""The instructor's path: a ready nbgrader course, and the steps our config adds to nbgrader's pipeline.

`course nbgrader DIR` writes `nbgrader_config.py`, `source/<lesson>/<notebook>.ipynb` for every lesson
(the solved notebooks, already in nbgrader's source format) and a README. From there the instructor uses
nbgrader's own commands. The config adds three steps to `nbgrader autograde`, where nbgrader has none:

  StartCourseGrading   before the kernel runs: starts the course's sandboxed grading of the submitted
                       code (the same `Grading` as `course check`), in parallel with the kernel
  ExecuteSkippingDemos nbgrader's Execute, minus demo cells (plots, training runs: not graded)
  ApplyCourseVerdict   after the kernel: each autograder cell's outputs are *replaced* by the verdict
                       computed outside the kernel; nbgrader's SaveAutoGrades then reads them as usual

So a student cell that patches torch, the graders or builtins in the shared kernel changes nothing: the
score never depends on what the kernel printed. Feedback runs ClearHiddenTests, so the hidden test
lines are not in the HTML (the checks' code never was: it lives in graders/).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from graders.registry import LESSONS, UnknownLesson, find_lesson

try:  # nbgrader is a dependency, but keep `course` importable without it
    from nbgrader.preprocessors import Execute, NbGraderPreprocessor
except ImportError:  # pragma: no cover
    Execute = NbGraderPreprocessor = object

CONFIG = '''\
"""nbgrader configuration for the attention course (written by `course nbgrader`; edit freely)."""
import os

from course_cli.nbgrader_course import ApplyCourseVerdict, ExecuteSkippingDemos, StartCourseGrading
from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, ClearHiddenTests, GetGrades,
                                    IgnorePattern, LimitOutput, SaveAutoGrades)

# The check cells' grade() calls are not needed inside nbgrader's kernel: the verdict is computed outside it.
os.environ["COURSE_NBGRADER"] = "1"

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = {course_id!r}
c.Execute.timeout = {cell_timeout}            # seconds per cell in nbgrader's kernel
c.Execute.kernel_name = "python3"
c.ClearSolutions.code_stub = {{"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}}
c.OverwriteCells.add_missing_cells = True   # a deleted autograder cell comes back, from the source
c.Autograde.autograde_preprocessors = [
    StartCourseGrading,        # the course's sandboxed grading starts, in parallel with the kernel
    ExecuteSkippingDemos,
    IgnorePattern,
    ClearMetadataPreprocessor,
    LimitOutput,
    ApplyCourseVerdict,        # autograder cells' outputs := the verdict computed outside the kernel
    SaveAutoGrades,
    AssignLatePenalties,
    CheckCellMetadata,
]
c.GenerateFeedback.preprocessors = [GetGrades, ClearHiddenTests, CSSHTMLHeaderPreprocessor]
'''

README = '''\
# {course_id}: an nbgrader course made by `course nbgrader`

Every lesson of the attention course is an assignment here (`source/<lesson>/`). Use nbgrader as usual:

    nbgrader generate_assignment lesson01            # release/lesson01/: stubs, no solutions, no hidden tests
    # students work on release/..., you collect into submitted/<student>/lesson01/
    nbgrader autograde lesson01                      # the course's graders decide the points
    nbgrader generate_feedback lesson01              # feedback/: what failed and why; no hidden tests
    nbgrader export                                  # grades.csv

The autograder cells call the course's graders; the verdict is computed in a sandboxed process outside
the notebook's kernel, so a notebook cannot talk its way into points, and `course check` gives the same
points for the same notebook. Students need the `attention-course` package in their environment.
Re-running `course nbgrader` updates source/ and leaves everything else (gradebook, submissions) alone.
'''


def make_course(target: Path, course_id: str = "attention-course", cell_timeout: int = 120) -> dict:
    """Create or update an nbgrader course in `target`; returns what was written and what was kept."""
    target.mkdir(parents=True, exist_ok=True)
    written, kept = [], []
    for lesson in LESSONS:
        dest = target / "source" / lesson.id / lesson.notebook
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(lesson.solution_path, dest)
        written.append(dest)
    for name, text in (("nbgrader_config.py", CONFIG.format(course_id=course_id, cell_timeout=cell_timeout)),
                       ("README.md", README.format(course_id=course_id))):
        path = target / name
        if path.exists():
            kept.append(path)
        else:
            path.write_text(text)
            written.append(path)
    return {"written": written, "kept": kept}


# ------------------------------------------------------------------------------------------------
# The steps nbgrader's autograde runs (configured above)

_IN_FLIGHT: dict[str, object] = {}


def _lesson_of(resources) -> object | None:
    name = (resources.get("nbgrader") or {}).get("notebook") or ""
    try:
        return find_lesson(name)
    except UnknownLesson:
        return None


def _key(resources) -> str:
    nbg = resources.get("nbgrader") or {}
    return f"{nbg.get('student')}/{nbg.get('assignment')}/{nbg.get('notebook')}"


class StartCourseGrading(NbGraderPreprocessor):
    """Start the course's sandboxed grading of this notebook's code (returns at once)."""

    def preprocess(self, nb, resources):
        from .grading import Grading
        from .notebook import graded_cells

        lesson = _lesson_of(resources)
        if lesson is not None:
            cwd = (resources.get("metadata") or {}).get("path") or None
            _IN_FLIGHT[_key(resources)] = Grading(lesson, graded_cells(nb), resources["nbgrader"]["notebook"], cwd=cwd,
                                                   trusted=True)
        return nb, resources


class ExecuteSkippingDemos(Execute):
    """nbgrader's Execute, except for demo cells (metadata course.role == "demo"), which are not graded."""

    def preprocess_cell(self, cell, resources, index):
        from .notebook import is_demo

        if is_demo(cell):
            return cell, resources
        return super().preprocess_cell(cell, resources, index)


class ApplyCourseVerdict(NbGraderPreprocessor):
    """Replace each autograder cell's outputs with the course's verdict for its exercise."""

    def preprocess(self, nb, resources):
        grading = _IN_FLIGHT.pop(_key(resources), None)
        if grading is None:
            return nb, resources
        result = grading.finish()
        by_id = {e.id: e for e in result.exercises}
        from .render import blocked_by

        blockers = blocked_by(result.lesson, result)
        for cell in nb.cells:
            gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
            if cell.cell_type == "code" and gid.startswith("test_") and gid[5:] in by_id:
                cell.outputs = verdict_outputs(by_id[gid[5:]], result.lesson, blockers.get(gid[5:]))
        self.log.info("course verdict for %s: %s/%s", _key(resources), result.score, result.max_score)
        return nb, resources


def verdict_outputs(ex, lesson: str = "", blockers: list[str] | None = None) -> list:
    """The outputs of an autograder cell, as the course judged the exercise: the report a student sees in
    the notebook (HTML with its figure, and plain text), and an error output when it did not pass (nbgrader
    then gives the cell 0 points; a student's own kernel does not raise, so Run All goes on)."""
    from nbformat.v4 import new_output

    from .render import exercise_html, exercise_plain

    outputs = [new_output("display_data", data={"text/plain": exercise_plain(ex, lesson, blockers),
                                                "text/html": exercise_html(ex, lesson, blockers)})]
    if ex.status != "passed":
        line = f"{ex.id}: {ex.status.replace('_', ' ')} — {ex.reason}"
        outputs.append(new_output("error", ename="AssertionError", evalue=line,
                                  traceback=[f"AssertionError: {line}"]))
    return outputs


def in_nbgrader_kernel() -> bool:
    return os.environ.get("COURSE_NBGRADER") == "1"
