"""The instructor's path: a ready nbgrader course, and the steps our config adds to nbgrader's pipeline.

`course nbgrader DIR` writes `nbgrader_config.py`, `source/<lesson>/<notebook>.ipynb` for every lesson
(the solved notebooks, already in nbgrader's source format) and a README. From there the instructor uses
nbgrader's own commands. The config replaces nbgrader's kernel execution in `nbgrader autograde`:

  StartCourseGrading   the course's grading of the submitted code (the same `Grading` as `course check`),
                       every cell of it inside the course's sandbox (bubblewrap); refuses to run unsandboxed
                       unless COURSE_INSECURE=1
  ApplyCourseVerdict   each autograder cell's outputs are *replaced* by the verdict computed in the sandbox;
                       nbgrader's SaveAutoGrades then reads them as usual

nbgrader's `Execute` step is not in the pipeline: it would run the student's cells in a Jupyter kernel as the
instructor's own user, with no limits, no sandbox, and a shared kernel the student's cells can patch. So no
student code runs outside the sandbox, and the score never depends on anything a kernel printed. Feedback
runs ClearHiddenTests, so the hidden test lines are not in the HTML (the checks' code never was: it lives in
graders/).
"""

from __future__ import annotations

import html
import os
import shutil
from pathlib import Path

from graders.registry import LESSONS, UnknownLesson, find_lesson

try:  # nbgrader is a dependency, but keep `course` importable without it
    from nbgrader.preprocessors import NbGraderPreprocessor
except ImportError:  # pragma: no cover
    NbGraderPreprocessor = object

CONFIG = '''\
"""nbgrader configuration for the attention course (written by `course nbgrader`; edit freely)."""
import os

from course_cli.nbgrader_course import ApplyCourseVerdict, StartCourseGrading
from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, ClearHiddenTests, GetGrades,
                                    IgnorePattern, LimitOutput, SaveAutoGrades)

# The check cells' grade() calls are not needed inside nbgrader's kernel: the verdict is computed outside it.
os.environ["COURSE_NBGRADER"] = "1"
# Every submission is graded inside the course's sandbox (bubblewrap); without it, autograde refuses to run.
# To grade anyway, unprotected (the submissions' code then runs as you, with your files and network):
# os.environ["COURSE_INSECURE"] = "1"

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = {course_id!r}
c.ClearSolutions.code_stub = {{"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}}
c.OverwriteCells.add_missing_cells = True   # a deleted autograder cell comes back, from the source
c.Autograde.autograde_preprocessors = [
    StartCourseGrading,        # the course's grading, in its sandbox (nbgrader's Execute is left out: it
                               # would run the student's cells in a kernel as you, with no limits)
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


def make_course(target: Path, course_id: str = "attention-course") -> dict:
    """Create or update an nbgrader course in `target`; returns what was written and what was kept."""
    target.mkdir(parents=True, exist_ok=True)
    written, kept = [], []
    for lesson in LESSONS:
        dest = target / "source" / lesson.id / lesson.notebook
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(lesson.solution_path, dest)
        written.append(dest)
    for name, text in (("nbgrader_config.py", CONFIG.format(course_id=course_id)),
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

        from . import sandbox

        lesson = _lesson_of(resources)
        if lesson is not None:
            sandbox.require_sandbox()  # refuse to grade unprotected (unless COURSE_INSECURE=1)
            try:
                cells = graded_cells(nb)
            except Exception as exc:  # a notebook nbgrader accepted but the course cannot read
                from .grading import _error_result

                _IN_FLIGHT[_key(resources)] = _error_result(
                    lesson, resources["nbgrader"]["notebook"], f"this notebook cannot be graded: {exc}")
                return nb, resources
            _IN_FLIGHT[_key(resources)] = Grading(lesson, cells, resources["nbgrader"]["notebook"], trusted=True)
        return nb, resources


class ApplyCourseVerdict(NbGraderPreprocessor):
    """Replace each autograder cell's outputs with the course's verdict for its exercise."""

    def preprocess(self, nb, resources):
        grading = _IN_FLIGHT.pop(_key(resources), None)
        if grading is None:
            return nb, resources
        result = grading.finish() if hasattr(grading, "finish") else grading
        by_id = {e.id: e for e in result.exercises}
        for cell in nb.cells:
            gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
            if cell.cell_type == "code" and gid.startswith("test_") and gid[5:] in by_id:
                cell.outputs = verdict_outputs(by_id[gid[5:]])
        from .grading import hidden_seed

        self.log.info("course verdict for %s: %s/%s (hidden checks' seed %s: COURSE_HIDDEN_SEED=%s repeats this run)",
                      _key(resources), result.score, result.max_score, hidden_seed(), hidden_seed())
        return nb, resources


def verdict_outputs(ex) -> list:
    """The outputs of an autograder cell, as the course judged the exercise: a readable report, and an
    error output when it did not pass (nbgrader then gives the cell 0 points)."""
    from nbformat.v4 import new_output

    lines = [f"{ex.id}: {ex.status.replace('_', ' ')} ({ex.points:g}/{ex.max_points:g} points)"]
    for c in ex.checks:
        if c.status not in ("passed", "skipped"):
            lines.append(f"  ✗ {c.name} [{c.device}/{c.dtype}]: {c.message}")
    skipped = sum(c.status == "skipped" for c in ex.checks)
    passed = sum(c.status == "passed" for c in ex.checks)
    lines.append(f"  {passed} checks passed" + (f", {skipped} GPU checks skipped (no CUDA here)" if skipped else ""))
    if ex.diagnosis:
        lines.append(f"  Likely mistake: {ex.diagnosis}")
    text = "\n".join(lines)
    rows = "".join(f"<li>{html.escape(l.strip())}</li>" for l in lines[1:])
    outputs = [new_output("display_data", data={
        "text/plain": text,
        "text/html": f"<p><b>{html.escape(lines[0])}</b></p><ul>{rows}</ul>"})]
    if ex.status != "passed":
        outputs.append(new_output("error", ename="AssertionError", evalue=f"{ex.id}: {ex.status.replace('_', ' ')} — {ex.reason}",
                                  traceback=[f"AssertionError: {ex.id} did not pass: {ex.reason}"]))
    return outputs


def in_nbgrader_kernel() -> bool:
    return os.environ.get("COURSE_NBGRADER") == "1"
