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

import os
import shutil
from pathlib import Path

from graders.registry import LESSONS, UnknownLesson, find_lesson

try:  # nbgrader is a dependency, but keep `course` importable without it
    from nbgrader.plugins import CsvExportPlugin
    from nbgrader.preprocessors import NbGraderPreprocessor, OverwriteCells
except ImportError:  # pragma: no cover
    NbGraderPreprocessor = OverwriteCells = CsvExportPlugin = object

CONFIG = '''\
"""nbgrader configuration for the attention course (written by `course nbgrader`; edit freely)."""
import os

from course_cli.instructor.nbgrader_course import (ApplyCourseVerdict, CourseOverwriteCells, RepairCells,
                                                   StartCourseGrading, adopt_renamed,
                                                   feedback_under_submitted_names)
from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (AssignLatePenalties, CheckCellMetadata, ClearHiddenTests, ClearOutput,
                                    DeduplicateIds, GetGrades, IgnorePattern, LimitOutput, OverwriteKernelspec,
                                    SaveAutoGrades)

# The check cells' grade() calls are not needed inside nbgrader's kernel: the verdict is computed outside it.
os.environ["COURSE_NBGRADER"] = "1"
# Every submission is graded inside the course's sandbox (bubblewrap); without it, autograde refuses to run.
# To grade anyway, unprotected (the submissions' code then runs as you, with your files and network):
# os.environ["COURSE_INSECURE"] = "1"

c = get_config()  # noqa: F821
c.CourseDirectory.course_id = {course_id!r}
c.ClearSolutions.code_stub = {{"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}}
c.CourseOverwriteCells.add_missing_cells = True   # a deleted autograder cell comes back, from the source
# a notebook submitted under another name is graded as the lesson's, with the note every seat gives
# ("submitted as X, expected Y"), as `course grade` and Gradescope do
c.Autograde.pre_convert_hook = adopt_renamed
# ... and its feedback is also written under the name it was submitted as: what `nbgrader fetch_feedback` asks for
c.GenerateFeedback.post_convert_hook = feedback_under_submitted_names
c.Autograde.sanitize_preprocessors = [
    ClearOutput,
    DeduplicateIds,
    RepairCells,               # what DeduplicateIds leaves half-marked, and malformed marks, made plain (a note each)
    OverwriteKernelspec,
    CourseOverwriteCells,      # nbgrader's OverwriteCells; a test cell that differs only by its hidden tests is
                               # restored silently, so the checksum warning means a cell the student changed
    CheckCellMetadata,
]
# c.ApplyCourseVerdict.partial_credit = True  # points in proportion to passed checks (course grade --partial)
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
# nbgrader's CSV export plus a status and a note per row: a submission nbgrader failed on (its autograde log
# says why) is exported as NOT GRADED with no score, never as a 0 that looks like a missing submission
c.ExportApp.plugin_class = "course_cli.instructor.nbgrader_course.CourseExport"
# `nbgrader collect` copies each submission without following links (nbgrader's own copy follows them: a link to
# source/ would be collected as the solved notebook, with your rights); one that holds a link, a FIFO or a device
# is NOT GRADED, with the reason, in autograde and export
c.ExchangeFactory.collect = "course_cli.instructor.nbgrader_exchange.CourseExchangeCollect"
'''

README = '''\
# {course_id}: an nbgrader course made by `course nbgrader`

Every lesson of the attention course is an assignment here (`source/<lesson>/`). Use nbgrader as usual:

    nbgrader generate_assignment lesson01            # release/lesson01/: stubs, no solutions, no hidden tests
    # students work on release/..., you collect into submitted/<student>/lesson01/
    nbgrader autograde lesson01                      # the course's graders decide the points
    nbgrader generate_feedback lesson01              # feedback/: what failed and why; no hidden tests
    nbgrader export                                  # grades.csv, with a status column: a submission nbgrader
                                                     # failed on is NOT GRADED (no score), never a silent 0

The autograder cells call the course's graders; the verdict is computed in a sandboxed process outside
the notebook's kernel, so a notebook cannot talk its way into points, and `course check` gives the same
points for the same notebook. Students need the `attention-course` package in their environment.
Re-running `course nbgrader` updates source/ and leaves everything else (gradebook, submissions) alone.
'''


RELEASE = "course-release.json"  # beside each source notebook: what the course that released it was


def course_version() -> str:
    """The installed course's version (pyproject's, else the installed package's)."""
    import tomllib

    from graders.registry import ROOT

    try:
        return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    except (OSError, KeyError, ValueError):
        import importlib.metadata

        return importlib.metadata.version("attention-course")


def release_record(lesson) -> dict:
    """What an assignment needs of the course that grades it: its version, the lesson, its exercises' points."""
    return {"course": course_version(), "lesson": lesson.id,
            "exercises": {ex.name: float(ex.points) for ex in lesson.exercises}}


def make_course(target: Path, course_id: str = "attention-course") -> dict:
    """Create or update an nbgrader course in `target`; returns what was written and what was kept. Beside each
    source notebook, `course-release.json` records the course version the assignment needs: nbgrader copies it
    into every autograded folder (from source/, never from the student), and a course of another version or
    with other exercises refuses to judge the cells (0 points, a note naming both), never full points."""
    import json

    from course_cli.atomic import write_text

    target.mkdir(parents=True, exist_ok=True)
    written, kept = [], []
    for lesson in LESSONS:
        dest = target / "source" / lesson.id / lesson.notebook
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(lesson.solution_path, dest)
        written.append(dest)
        write_text(dest.parent / RELEASE, json.dumps(release_record(lesson), indent=1) + "\n")
        written.append(dest.parent / RELEASE)
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
_NOTES: dict[str, list] = {}
_ADOPTED: dict[str, str] = {}  # student/assignment/notebook -> the note of a notebook graded under the lesson's name
_REFUSED: dict[str, str] = {}  # student/assignment/notebook -> why what arrived is not read (a link, a FIFO, a bound)


def _check_arrived(notebooks: list) -> None:
    """What arrived in submitted/<student>/<assignment>/, read as every seat reads a submission
    (notebook.submission_bytes: a regular file in that folder, no link followed, bounded). nbgrader would open
    each by name, following links (to source/'s solved notebook, a classmate's). A refused one is set aside
    (`refuse_notebook`), so nbgrader reads nothing of it; StartCourseGrading makes it NOT GRADED with the reason,
    on this run and any later one."""
    from course_cli.sandboxed.notebook import SubmissionRefused, submission_bytes

    for name in notebooks:
        path = Path(name)
        try:
            submission_bytes(path, path.parent)
        except SubmissionRefused as exc:
            refuse_notebook(path, str(exc))
        except Exception:
            pass  # nbgrader reports what it cannot read, as before


def refuse_notebook(path: Path, why: str) -> None:
    """Make submitted/<student>/<assignment>/<notebook> NOT GRADED because of `why`: what is there is moved, as it
    came (a link stays a link), to refused/<student>/<assignment>/ in the course, and the released notebook,
    recording why in metadata.course.refused, takes its name (StartCourseGrading reads it). Used by autograde's
    check of what arrived and by the course's collect (nbgrader_exchange)."""
    import nbformat

    from course_cli.atomic import write_text

    course = path.parents[2].parent  # submitted/<student>/<assignment>/<notebook>
    if os.path.lexists(path):
        aside = course / "refused" / path.parent.parent.name / path.parent.name / path.name
        aside.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, aside)  # out of submitted/: nbgrader copies every file there
        why = f"{why} (moved, as it came, to {aside.relative_to(course)})"
    released = course / "release" / path.parent.name / path.name  # the course's own copy
    try:
        stand_in = nbformat.read(released, as_version=4)  # its cells: nbgrader's steps need them
    except Exception:
        stand_in = nbformat.v4.new_notebook()
    stand_in.metadata["course"] = {"refused": why}
    write_text(path, nbformat.writes(stand_in))


def adopt_renamed(assignment=None, student=None, notebooks=None, **_) -> None:
    """nbgrader's Autograde pre-convert hook. First, what arrived is checked (`_check_arrived`): a submission
    that is a link, a FIFO or over a bound is not read by nbgrader and is NOT GRADED. Then, when a student's
    folder has no notebook by the lesson's name but one the course's policy grades
    (`graders.engine.notebook.pick_notebook`: the only one, or the only one named like the lesson's), a copy of
    it is written under the lesson's name (the submitted file is kept), carrying the policy's note, and graded
    in its place. nbgrader alone skips it as an unknown notebook (NOT GRADED)."""

    from graders.engine.notebook import pick_notebook
    from course_cli.sandboxed.notebook import NotebookError, submission_bytes

    if not notebooks:
        return
    folder = Path(notebooks[0]).parent
    _check_arrived(notebooks)
    try:
        lesson = find_lesson(folder.name)
    except UnknownLesson:
        return
    names = [Path(n).name for n in notebooks]
    pick, note = pick_notebook(names, lesson.notebook)
    mark = folder / ADOPTED_MARK
    if (pick is None or not note) and mark.is_file():  # graded again (--force): the copy under the lesson's name
        try:  # is ours, and the submission is still the renamed file
            import json

            prev = json.loads(mark.read_text(encoding="utf-8"))
            pick, note = str(prev["submitted"]), str(prev["note"])
        except (OSError, ValueError, KeyError, TypeError):
            return
        if pick not in names:
            return
    elif pick is None or not note:
        return
    try:
        text = submission_bytes(folder / pick, folder).decode("utf-8", "replace")
    except NotebookError as exc:
        _REFUSED[f"{folder.parent.name}/{folder.name}/{lesson.notebook.removesuffix('.ipynb')}"] = str(exc)
        return
    (folder / lesson.notebook).write_text(text, encoding="utf-8")
    import json

    mark.write_text(json.dumps({"submitted": pick, "note": note}), encoding="utf-8")
    # kept here, not in the notebook: RepairCells drops every note a submission's metadata brings
    # (nbgrader passes the ids as given on its command line, "*" often: the folder submitted/<student>/<lesson> says)
    _ADOPTED[f"{folder.parent.name}/{folder.name}/{lesson.notebook.removesuffix('.ipynb')}"] = note
    notebooks[:] = [str(folder / lesson.notebook)] + [n for n in notebooks
                                                      if Path(n).name not in (pick, lesson.notebook)]


ADOPTED_MARK = ".course-adopted.json"  # beside a renamed submission: which file the lesson's copy was made from


def feedback_under_submitted_names(assignment=None, student=None, notebooks=None, **_) -> None:
    """nbgrader's GenerateFeedback post-convert hook: a renamed submission's feedback, written under the lesson's
    name, is copied under the name the student submitted, which is the one `nbgrader release_feedback` hashes
    and `fetch_feedback` looks for (else that student never receives it). Course folders in nbgrader's default
    layout (autograded/, feedback/, submitted/ side by side); elsewhere it does nothing."""
    if not notebooks:
        return
    autograded = Path(notebooks[0]).parent  # <course>/autograded/<student>/<assignment>
    if len(autograded.parents) < 3:
        return
    root, who, what = autograded.parents[2], autograded.parent.name, autograded.name
    try:
        lesson = find_lesson(what)
    except UnknownLesson:
        return
    mark = root / "submitted" / who / what / ADOPTED_MARK
    graded = root / "feedback" / who / what / (lesson.notebook.removesuffix(".ipynb") + ".html")
    if not (mark.is_file() and graded.is_file()):
        return
    import json

    try:
        submitted = str(json.loads(mark.read_text(encoding="utf-8"))["submitted"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    if submitted.endswith(".ipynb") and "/" not in submitted and submitted != lesson.notebook:
        shutil.copyfile(graded, graded.with_name(submitted.removesuffix(".ipynb") + ".html"))


def _lesson_of(resources) -> object | None:
    name = (resources.get("nbgrader") or {}).get("notebook") or ""
    try:
        return find_lesson(name)
    except UnknownLesson:
        return None


def _key(resources) -> str:
    nbg = resources.get("nbgrader") or {}
    return f"{nbg.get('student')}/{nbg.get('assignment')}/{nbg.get('notebook')}"


def _note(nb, text: str) -> None:
    """A grading note for this submission, kept in the notebook's metadata until the verdict step shows it.
    Only the course's own repairs write here: RepairCells drops whatever notes the submission brought."""
    if not isinstance(nb.metadata.get("course"), dict):
        nb.metadata["course"] = {}
    if not isinstance(nb.metadata["course"].get("notes"), list):
        nb.metadata["course"]["notes"] = []
    nb.metadata["course"]["notes"].append(text)


class RepairCells(NbGraderPreprocessor):
    """Cells nbgrader's own steps would crash on, made plain, each with a note: grading marks that are not a
    JSON object, and marks without a grade id (DeduplicateIds leaves a copied cell's marks empty, which makes
    OverwriteCells.add_missing_cells fail with KeyError: 'grade_id')."""

    def preprocess(self, nb, resources):
        # the first step that notes anything: notes a submission brought in its own metadata are not ours
        course = nb.metadata.get("course")
        if isinstance(course, dict):
            course.pop("notes", None)
        elif course is not None:
            del nb.metadata["course"]
        adopted = _ADOPTED.pop(_key(resources), None)
        if adopted:
            _note(nb, adopted)
        for i, cell in enumerate(nb.cells, start=1):
            meta = cell.get("metadata")
            if not isinstance(meta, dict):
                cell["metadata"] = {}
                _note(nb, f"cell {i} had malformed metadata; it was graded as a plain cell")
                continue
            nbg = meta.get("nbgrader", None)
            if nbg is None:
                continue
            if not isinstance(nbg, dict) or not nbg.get("grade_id"):
                del meta["nbgrader"]
                kind = "copied" if isinstance(nbg, dict) else "malformed"
                _note(nb, f"cell {i} carried {kind} grading marks; it was graded as a plain cell "
                          f"(the original cell was graded)")
        return nb, resources


def _release_source(source: str) -> str:
    """A test cell's source as students receive it: the hidden tests' region removed (ClearHiddenTests)."""
    import re

    return re.sub(r"[ \t]*### BEGIN HIDDEN TESTS.*?### END HIDDEN TESTS[ \t]*\n?", "", source, flags=re.S).strip()


class CourseOverwriteCells(OverwriteCells):
    """nbgrader's OverwriteCells, except that a locked cell whose source is its release form (the source minus
    the hidden tests, which ClearHiddenTests removed before the students got it) is restored without the
    'checksum has changed' warning: that warning is then only for a cell the student really changed."""

    def preprocess_cell(self, cell, resources, cell_index):
        from nbgrader.api import MissingEntry

        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id and cell.metadata.nbgrader.get("locked"):
            try:
                source_cell = self.gradebook.find_source_cell(grade_id, self.notebook_id, self.assignment_id)
            except MissingEntry:
                source_cell = None
            if source_cell is not None and cell.source.strip() == _release_source(source_cell.source):
                cell.source = source_cell.source
        return super().preprocess_cell(cell, resources, cell_index)

    def report_change(self, name, attr, old, new):
        super().report_change(name, attr, old, new)
        if attr != "checksum":
            self._changes.append(f"cell {name}: its {attr} was changed (should be {old}, got {new}); restored")
        else:
            self._changes.append(f"cell {name} was edited; it was restored from the source")

    def preprocess(self, nb, resources):
        self._changes = []
        nb, resources = super().preprocess(nb, resources)
        for change in self._changes:
            _note(nb, change)
        return nb, resources


class NotJudged:
    """The course did not judge this notebook: every autograder cell gets an error and 0 points, with `cause`."""

    def __init__(self, cause: str):
        self.cause = cause


def _release_mismatch(lesson, resources) -> str | None:
    """Why the installed course may not judge this assignment (None when it may): the course-release.json that
    nbgrader copied from source/ into the autograded folder names another version or other exercises."""
    import json

    folder = (resources.get("metadata") or {}).get("path") or ""
    path = Path(folder) / RELEASE
    try:
        wanted = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return (f"the assignment does not record the course version it was released with (no {RELEASE} "
                f"in source/{lesson.id}/): run `course nbgrader` again, then `nbgrader generate_assignment "
                f"{lesson.id} --force`")
    except (OSError, ValueError) as exc:
        return f"the assignment's {RELEASE} cannot be read ({exc})"
    have = release_record(lesson)
    if not isinstance(wanted, dict) or wanted.get("course") != have["course"]:
        got = wanted.get("course") if isinstance(wanted, dict) else None
        return (f"the assignment was released with course {got}, and course {have['course']} is installed: "
                f"grade with the course it was released with, or release it again with this one")
    if wanted.get("exercises") != have["exercises"]:
        return (f"the assignment's exercises ({wanted.get('exercises')}) are not those of the installed course's "
                f"{lesson.id} ({have['exercises']})")
    return None


class StartCourseGrading(NbGraderPreprocessor):
    """Start the course's sandboxed grading of this notebook's code (returns at once). A notebook the course
    cannot judge (refused when it arrived, an unknown lesson, another course version) is recorded as
    NotJudged or NOT GRADED, never left without a verdict."""

    def preprocess(self, nb, resources):
        from course_cli.sandboxed.grading import Grading, _error_result
        from course_cli.sandboxed.notebook import graded_cells

        from course_cli.sandboxed import sandbox
        key = _key(resources)
        lesson = _lesson_of(resources)
        course_meta = nb.metadata.get("course")
        refused = _REFUSED.pop(key, None) or (course_meta.get("refused") if isinstance(course_meta, dict) else None)
        if lesson is None:
            name = (resources.get("nbgrader") or {}).get("notebook")
            _IN_FLIGHT[key] = NotJudged(f"the installed course ({course_version()}) has no lesson {name!r}: "
                                        f"install the course version that released this assignment")
            return nb, resources
        if refused is not None:
            _IN_FLIGHT[key] = _error_result(lesson, resources["nbgrader"]["notebook"], refused, not_graded=True)
            return nb, resources
        mismatch = _release_mismatch(lesson, resources)
        if mismatch is not None:
            _IN_FLIGHT[key] = NotJudged(mismatch)
            return nb, resources
        if lesson is not None:
            sandbox.require_sandbox()  # refuse to grade unprotected (unless COURSE_INSECURE=1)
            try:
                cells = graded_cells(nb)
            except Exception as exc:  # a notebook nbgrader accepted but the course cannot read
                from course_cli.sandboxed.grading import _error_result

                _IN_FLIGHT[_key(resources)] = _error_result(
                    lesson, resources["nbgrader"]["notebook"], f"this notebook cannot be graded: {exc}",
                    not_graded=True)
                return nb, resources
            _IN_FLIGHT[_key(resources)] = Grading(lesson, cells, resources["nbgrader"]["notebook"], trusted=True)
            notes = (nb.metadata.get("course") or {}).get("notes") or []
            _NOTES[_key(resources)] = [str(n) for n in notes] if isinstance(notes, list) else []
        return nb, resources


try:
    from traitlets import Bool
except ImportError:  # pragma: no cover
    Bool = lambda *a, **k: None  # noqa: E731


class ApplyCourseVerdict(NbGraderPreprocessor):
    """Replace each autograder cell's outputs with the course's verdict for its exercise."""

    partial_credit = Bool(False, help="Partial credit (graders/scoring.py): an exercise that did not pass scores "
                                      "in proportion to its passed checks, as `course grade --partial`.").tag(config=True)

    def preprocess(self, nb, resources):
        grading = _IN_FLIGHT.pop(_key(resources), None)
        if grading is None:
            grading = NotJudged("the course's grading step (StartCourseGrading) did not run for this notebook: "
                                "check nbgrader_config.py's autograde_preprocessors")
        if isinstance(grading, NotJudged):
            return _not_judged(nb, grading.cause, self.log), resources
        result = grading.finish() if hasattr(grading, "finish") else grading
        notes = _NOTES.pop(_key(resources), [])
        student = (resources.get("nbgrader") or {}).get("student")
        from course_cli.safe_text import for_markdown, for_terminal

        for note in notes:
            self.log.warning("%s: %s", for_terminal(student, 200, newlines=False), for_terminal(note, newlines=False))
        if notes:  # the student (feedback) and the instructor (autograded notebook) see what was repaired
            from nbformat.v4 import new_markdown_cell

            nb.cells.insert(0, new_markdown_cell("**Grading notes**\n\n" + "\n".join(f"- {for_markdown(n, 1000)}" for n in notes),
                                                 metadata={"course": {"role": "grading-notes"}}))
        if self.partial_credit:
            from graders.engine.scoring import apply_partial

            lesson = _lesson_of(resources)
            if lesson is not None:
                apply_partial(result, lesson)
        lesson = _lesson_of(resources)
        if lesson is not None:  # what students see of hidden checks: the README's policy, as Gradescope applies it
            import importlib

            from graders.engine.checks import hidden_properties
            from graders.engine.results import for_students

            result = for_students(result, hidden_properties(importlib.import_module(lesson.module).CHECKS))
        by_id = {e.id: e for e in result.exercises}
        from course_cli.render import blocked_by

        blockers = blocked_by(result.lesson, result)
        for cell in nb.cells:
            gid = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
            if cell.cell_type == "code" and gid.startswith("test_") and gid[5:] in by_id:
                cell.outputs = verdict_outputs(by_id[gid[5:]], result.lesson, blockers.get(gid[5:]))
            elif _autograder_cell(cell):  # a graded cell the course has no exercise for: never full points
                cell.outputs = _error_outputs(f"the course did not judge this cell ({gid or 'no grade id'}): the "
                                              f"installed {result.lesson} has no such exercise")
        if result.not_graded:  # the export says NOT GRADED with this reason, never a score
            nb.metadata.setdefault("course", {})["not_graded"] = str(result.not_graded)
        from course_cli.sandboxed.grading import hidden_seed

        nb.metadata.setdefault("course", {})["hidden_seed"] = hidden_seed()  # COURSE_HIDDEN_SEED repeats this run
        self.log.info("course verdict for %s: %s/%s (hidden checks' seed %s: COURSE_HIDDEN_SEED=%s repeats this run)",
                      _key(resources), result.score, result.max_score, hidden_seed(), hidden_seed())
        return nb, resources


def _autograder_cell(cell) -> bool:
    """A cell nbgrader scores automatically: graded, not a solution cell (a test cell)."""
    nbg = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "code" and isinstance(nbg, dict) and bool(nbg.get("grade")) \
        and not nbg.get("solution")


def _error_outputs(cause: str) -> list:
    from nbformat.v4 import new_output

    from course_cli.safe_text import for_terminal

    line = for_terminal(f"not judged: {cause}", 2000, newlines=False)
    return [new_output("stream", name="stderr", text=line + "\n"),
            new_output("error", ename="CourseNotJudged", evalue=line, traceback=[f"CourseNotJudged: {line}"])]


def _not_judged(nb, cause: str, log=None):
    """Every autograder cell of a notebook the course did not judge: an error (0 points) naming the cause."""
    for cell in nb.cells:
        if _autograder_cell(cell):
            cell.outputs = _error_outputs(cause)
    nb.metadata.setdefault("course", {})["not_graded"] = cause
    if log is not None:
        log.error("NOT GRADED (0 points): %s", cause)
    return nb


def verdict_outputs(ex, lesson: str = "", blockers: list[str] | None = None) -> list:
    """The outputs of an autograder cell, as the course judged the exercise: the report a student sees in
    the notebook (HTML with its figure, and plain text), and an error output when it did not pass (nbgrader
    then gives the cell 0 points; a student's own kernel does not raise, so Run All goes on)."""
    from nbformat.v4 import new_output

    from course_cli.render import exercise_html, exercise_plain

    outputs = [new_output("display_data", data={"text/plain": exercise_plain(ex, lesson, blockers),
                                                "text/html": exercise_html(ex, lesson, blockers)})]
    if ex.status != "passed" and ex.points > 0:  # partial credit: nbgrader scores a numeric result as the points
        outputs.append(new_output("execute_result", data={"text/plain": repr(float(ex.points))}, execution_count=1))
    elif ex.status != "passed":
        from course_cli.safe_text import for_terminal

        line = for_terminal(f"{ex.id}: {ex.status.replace('_', ' ')} — {ex.reason}", 2000, newlines=False)
        outputs.append(new_output("error", ename="AssertionError", evalue=line,
                                  traceback=[f"AssertionError: {line}"]))
    return outputs


def in_nbgrader_kernel() -> bool:
    return os.environ.get("COURSE_NBGRADER") == "1"


# ------------------------------------------------------------------------------------------------
# The export: every submission accounted for

NOT_GRADED = "NOT GRADED"


def _not_graded_note(path: Path) -> str | None:
    """The reason an autograded notebook's verdict step recorded for not grading it (None: graded)."""
    import json

    try:
        meta = json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
    except (OSError, ValueError, AttributeError):
        return None
    course = meta.get("course") if isinstance(meta, dict) else None
    why = course.get("not_graded") if isinstance(course, dict) else None
    return str(why) if why else None


def _csv_cell(value):
    """One cell of the export: a number as it is, any other text through course_cli.safe_text.for_csv (controls
    escaped, a leading =, +, -, @, tab or CR neutralised): a student id or a name is the student's text."""
    from course_cli.safe_text import for_csv

    try:
        float(value)
        return value
    except (TypeError, ValueError):
        return for_csv(value) if isinstance(value, str) else value


class CourseExport(CsvExportPlugin):
    """nbgrader's CSV export (the same columns, in the same order) with `status` and `note` added. When
    nbgrader fails on a submission (a notebook that is not JSON, say) it logs the error, removes that
    student's autograded notebook and goes on; its own export then gives the student 0, the same as a
    student who never submitted. Here such a row says NOT GRADED, with an empty score, and the export
    names every one of them in the terminal. Statuses: graded, not submitted, NOT GRADED. Written with the csv
    module, each text cell through course_cli.safe_text.for_csv (a student id is the student's text)."""

    KEYS = ["assignment", "duedate", "timestamp", "student_id", "last_name", "first_name", "email", "raw_score",
            "late_submission_penalty", "score", "max_score"]  # nbgrader's CsvExportPlugin's, in its order

    def export(self, gradebook) -> None:
        import csv
        import io

        from course_cli.safe_text import for_terminal

        # nbgrader's own plugin writes each row with str.format, unquoted: a student id holding a comma or a
        # quote shifts the row's columns (and its lookup finds no submission). Rows are built here from the
        # gradebook as nbgrader builds them, and written with the csv module, each text cell through for_csv
        dest = Path(self.to or "grades.csv")
        self.log.info("Exporting grades to %s", dest)
        students, assignments = [str(x) for x in self.student], [str(x) for x in self.assignment]
        rows, ungraded = [], []
        for assignment in gradebook.assignments:
            if assignments and assignment.name not in assignments:
                continue
            for student in gradebook.students:
                if students and student.id not in students:
                    continue
                row = self._row(gradebook, assignment, student)
                row["status"], row["note"] = self._status(gradebook, assignment.name, student.id)
                if row["status"] == NOT_GRADED:
                    row["raw_score"] = row["score"] = row["late_submission_penalty"] = ""
                    ungraded.append(f"{student.id} ({assignment.name}): {row['note']}")
                rows.append(row)
        from course_cli.atomic import write_text

        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=self.KEYS + ["status", "note"])
        writer.writeheader()
        writer.writerows([{k: _csv_cell(v) for k, v in row.items()} for row in rows])
        write_text(dest, out.getvalue())
        for line in ungraded:
            self.log.error("%s: %s", NOT_GRADED, for_terminal(line, 2000, newlines=False))
        if ungraded:
            self.log.error("%d submission(s) NOT GRADED: they are in %s with an empty score. Fix what the "
                           "autograde log names for each, then run `nbgrader autograde ASSIGNMENT --student ID "
                           "--force` and export again.", len(ungraded), dest)

    @staticmethod
    def _row(gradebook, assignment, student) -> dict:
        """nbgrader's export row for one student and assignment: its values as nbgrader writes them (str, None
        as ''); a student without a submission scores 0.0, as there."""
        from nbgrader.api import MissingEntry

        row = {"assignment": assignment.name, "duedate": assignment.duedate, "student_id": student.id,
               "last_name": student.last_name, "first_name": student.first_name, "email": student.email,
               "max_score": assignment.max_score}
        try:
            sub = gradebook.find_submission(assignment.name, student.id)
        except MissingEntry:
            row.update(timestamp="", raw_score=0.0, late_submission_penalty=0.0, score=0.0)
        else:
            penalty = sub.late_submission_penalty
            row.update(timestamp=sub.timestamp, raw_score=sub.score, late_submission_penalty=penalty,
                       score=max(0.0, sub.score - penalty))
        return {k: "" if row[k] is None else str(row[k]) for k in CourseExport.KEYS}

    def _status(self, gradebook, assignment: str, student: str) -> tuple[str, str]:
        from nbgrader.api import MissingEntry

        coursedir = getattr(self.parent, "coursedir", None)

        def folder(kind: str) -> Path | None:
            if coursedir is None:
                return None
            return Path(coursedir.format_path(getattr(coursedir, f"{kind}_directory"), student, assignment))

        try:
            submission = gradebook.find_submission(assignment, student)
        except MissingEntry:
            submitted = folder("submitted")
            if submitted is not None and submitted.is_dir() and any(submitted.glob("*.ipynb")):
                return NOT_GRADED, "submitted, but never autograded (nbgrader failed before grading it)"
            return "not submitted", ""
        autograded = folder("autograded")
        for nb in submission.notebooks:
            if autograded is not None and not (autograded / f"{nb.name}.ipynb").is_file():
                return NOT_GRADED, (f"nbgrader failed on {nb.name}.ipynb in autograde (its log says why) "
                                    "and removed the graded copy")
            why = _not_graded_note(autograded / f"{nb.name}.ipynb") if autograded is not None else None
            if why:
                return NOT_GRADED, why
            if any(g.auto_score is None and g.manual_score is None and not g.needs_manual_grade
                   for g in nb.grades):
                return NOT_GRADED, f"{nb.name}.ipynb has autograder cells without a score"
        return "graded", ""
