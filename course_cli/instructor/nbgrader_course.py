"""The instructor's path: a ready nbgrader course, and the steps our config adds to nbgrader's pipeline.

`course nbgrader DIR` writes `nbgrader_config.py`, `source/<lesson>/<notebook>.ipynb` for every lesson
(the solved notebooks, already in nbgrader's source format) and a README. From there the instructor uses
nbgrader's own commands. The config replaces nbgrader's kernel execution in `nbgrader autograde`:

  StartCourseGrading   the course's grading of the submitted code (the same `Grading` as `course check`),
                       every cell of it inside the course's sandbox (bubblewrap; each submission forked from
                       its lesson's class zygote, as `course grade`'s); refuses to run unsandboxed unless
                       COURSE_INSECURE=1
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
import re
from pathlib import Path

from graders.registry import LESSONS, UnknownLesson, find_lesson

try:  # nbgrader is a dependency, but keep `course` importable without it
    from nbgrader.plugins import CsvExportPlugin
    from nbgrader.preprocessors import NbGraderPreprocessor, OverwriteCells
except ImportError:  # pragma: no cover
    NbGraderPreprocessor = OverwriteCells = CsvExportPlugin = object

COLLECT = '''\
# `nbgrader collect` copies each submission without following links (nbgrader's own copy follows them: a link to
# source/ would be collected as the solved notebook, with your rights); one that holds a link, a FIFO or a device
# is NOT GRADED, with the reason, in autograde and export
c.ExchangeFactory.collect = "course_cli.instructor.nbgrader_exchange.CourseExchangeCollect"
'''

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
''' + COLLECT


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
Re-running `course nbgrader` updates source/ and leaves everything else (gradebook, submissions) alone; a
config made before the course's link-refusing collect gets that setting added (the file before: `.bak`).
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

    from course_cli.atomic import create_new, write_bytes, write_text

    target.mkdir(parents=True, exist_ok=True)
    written, kept = [], []
    for lesson in LESSONS:
        dest = target / "source" / lesson.id / lesson.notebook
        dest.parent.mkdir(parents=True, exist_ok=True)
        write_bytes(dest, lesson.solution_path.read_bytes())  # no .bak here: nbgrader releases all of source/
        written.append(dest)
        write_text(dest.parent / RELEASE, json.dumps(release_record(lesson), indent=1) + "\n")
        written.append(dest.parent / RELEASE)
    updated, warnings = [], []
    for name, text in (("nbgrader_config.py", CONFIG.format(course_id=course_id)),
                       ("README.md", README.format(course_id=course_id))):
        path = target / name
        if os.path.lexists(path):
            kept.append(path)
        else:
            create_new(path, text.encode())  # FileExistsError for anything planted there since, a link included
            written.append(path)
    config = target / "nbgrader_config.py"
    if config in kept:
        why = add_collect(config)
        if why is None:
            updated.append(config)
        elif why:
            warnings.append(why)
    return {"written": written, "kept": kept, "updated": updated, "warnings": warnings}


_COLLECT_SET = re.compile(r"^\s*c\.ExchangeFactory\.collect\s*=\s*(.*?)\s*(#.*)?$", re.M)


def add_collect(config: Path) -> str | None:
    """An existing nbgrader_config.py made before the course set `ExchangeFactory.collect` (nbgrader's own
    collect then follows links in submissions): the setting (COLLECT) is appended, the file before kept as
    nbgrader_config.py.bak; None then. "" when it already sets the course's collect; a warning (the file left
    as it is) when it sets another one or cannot be read as a regular file."""
    from course_cli.atomic import read_bytes, write_text

    try:
        text = read_bytes(config, 1 << 20).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return (f"warning: {config.name} could not be read ({getattr(exc, 'strerror', None) or exc}): check that "
                f"it sets ExchangeFactory.collect as `course nbgrader` writes it, or nbgrader's collect follows "
                f"links in submissions")
    sets = [m.group(1) for m in _COLLECT_SET.finditer(text)]
    if any("CourseExchangeCollect" in v for v in sets[-1:]):
        return ""
    if sets:
        return (f"warning: {config.name} sets ExchangeFactory.collect = {sets[-1]}, not the course's "
                f"CourseExchangeCollect: that collect may follow links in submissions (a link to source/ is "
                f"collected as the solved notebook); see `course nbgrader`'s config for the line")
    write_text(config, text + ("" if text.endswith("\n") or not text else "\n") + "\n" + COLLECT, backup=True)
    return None


# ------------------------------------------------------------------------------------------------
# The steps nbgrader's autograde runs (configured above)

_IN_FLIGHT: dict[str, object] = {}
_NOTES: dict[str, list] = {}
_ADOPTED: dict[str, str] = {}  # student/assignment/notebook -> the note of a notebook graded under the lesson's name
_REFUSED: dict[str, tuple] = {}  # student/assignment/notebook -> why what arrived is not read (a link, a FIFO, a
                                 # bound): (the instructor's words, the student's), as `_arrival_words` gives them


def _unreadable(data: bytes) -> tuple[str, str] | None:
    """Why nbgrader could not read these bytes as a notebook (it reads every submission with nbformat, which
    raises, and nbgrader then drops that student's graded copy): (the instructor's words, the student's), each
    after the file's name; None when nbformat reads it. The same reading as nbgrader's: UTF-8, JSON, nbformat 4."""
    import json
    import warnings

    import nbformat

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        why = f"is not UTF-8 text (from byte {exc.start:,} on), so it is not a notebook"
        return why, why
    if not text.strip():
        why = "is empty (no text at all), so it is not a notebook"
        return why, why
    try:
        raw = json.loads(text)
    except RecursionError:
        why = "nests its JSON deeper than Python can parse, so it is not a notebook"
        return why, why
    except ValueError as exc:
        where = f"{exc.msg}, line {exc.lineno}, column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else exc
        return (f"is not valid JSON ({where}): a notebook cut short when it was saved, or not a notebook",
                f"is not valid JSON ({where}), so it could not be opened as a notebook; a save that was cut "
                f"short leaves a notebook like this")
    if not isinstance(raw, dict) or ("cells" not in raw and "worksheets" not in raw):
        why = "is JSON but not a Jupyter notebook (it has no cells)"
        return why, why
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nbformat.reads(text, as_version=4)
    except Exception as exc:  # noqa: BLE001 - nbformat raises several kinds for malformed notebooks
        said = str(exc).splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
        why = f"is JSON but not a notebook nbformat can read ({said})"
        return why, why
    return None


_OPEN_AND_SUBMIT = "Open it in Jupyter, save it, and submit it again; if it does not open, ask your instructor."


def _arrival_words(path: Path, exc: Exception, course: Path, aside: Path | None) -> tuple[str, str]:
    """Why a submission was not read when it arrived: (the instructor's words, for the export's note; the
    student's, for the feedback). Each from what is on disk (lstat of what arrived), not from the wording of
    the refusal, which is written for the seats where one message serves both."""
    import stat

    from course_cli.sandboxed.notebook import MAX_BYTES

    def rel(p: Path) -> str:
        try:
            return str(p.relative_to(course))
        except ValueError:
            return str(p)

    name, where = path.name, rel(path)
    moved = f"; moved, as it came, to {rel(aside)}" if aside is not None else ""
    here = path if os.path.lexists(path) or aside is None else aside  # (before or after it was set aside)
    try:
        st = os.lstat(here)
    except OSError:
        st = None
    if st is not None and stat.S_ISLNK(st.st_mode):
        try:
            target = os.readlink(here)
        except OSError:
            target = "?"
        return (f"{where} is a symbolic link to {target}, not a notebook: not read, so nothing of its target "
                f"was graded{moved}",
                f"What you submitted as {name} is a symbolic link to another file, not the notebook itself, so "
                f"it was not read. Submit the notebook file itself.")
    if st is not None and not stat.S_ISREG(st.st_mode):
        kind = ("a FIFO" if stat.S_ISFIFO(st.st_mode) else "a socket" if stat.S_ISSOCK(st.st_mode)
                else "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else "not a file")
        return (f"{where} is {kind}, not a regular file: not read{moved}",
                f"What you submitted as {name} is {kind}, not a notebook file, so it was not read. Submit the "
                f"notebook file itself.")
    if st is not None and max(st.st_size, st.st_blocks * 512) > MAX_BYTES:
        size = max(st.st_size, st.st_blocks * 512)
        return (f"{where} is {size:,} bytes, over the course's bound of {MAX_BYTES:,} bytes for a submission: "
                f"not read{moved}",
                f"Your {name} is {size:,} bytes, over the grader's limit of {MAX_BYTES:,} bytes, so it was not "
                f"read. Clear its outputs (Edit > Clear Outputs of All Cells), save it and submit it again.")
    if isinstance(exc, _Unreadable):
        return f"{where} {exc.instructor}{moved}", f"Your {name} {exc.student}. {_OPEN_AND_SUBMIT}"
    text = str(exc).replace(str(path), name)  # what the refusal says, without the instructor's folders
    return f"{where}: {text}{moved}", f"Your {name} was not read: {text}"


class _Unreadable(Exception):
    """A submission nbgrader would fail to read (`_unreadable`), in both wordings."""

    def __init__(self, instructor: str, student: str):
        super().__init__(instructor)
        self.instructor, self.student = instructor, student


_PUT_BACK: dict[str, tuple] = {}  # student/assignment/notebook -> (where an unreadable submission waits, its place)


def _put_back(student, assignment) -> None:
    """The unreadable submissions of this student's assignment back in submitted/, over their stand-ins."""
    for key in [k for k in _PUT_BACK if k.startswith(f"{student}/{assignment}/")]:
        aside, path = _PUT_BACK.pop(key)
        try:
            os.replace(aside, path)
        except OSError:
            pass  # it stays in refused/, and the stand-in still says why


def claimed_owners(folder: str | Path, student: str) -> tuple[set[int] | None, str | None]:
    """Whose files an inbound submission folder of `student` may hold, and why it is refused (or None). When
    `student` names a local account, the folder must be that user's (or the collecting user's own): a student
    who submits under a classmate's id (nbgrader's `--student`, or a renamed folder) makes a folder of their
    own, which nbgrader only warns about, then collects as the classmate's. Without such an account (ids from
    another authenticator) nbgrader's own check stands: (None, None)."""
    import pwd

    try:
        uid = pwd.getpwnam(student).pw_uid
    except (KeyError, TypeError, ValueError):
        return None, None
    owners = {uid, os.geteuid()}
    try:
        st = os.lstat(folder)
    except OSError as exc:
        return owners, f"{Path(folder).name} cannot be read ({exc.strerror})"
    if st.st_uid not in owners:
        try:
            by = pwd.getpwuid(st.st_uid).pw_name
        except KeyError:
            by = f"uid {st.st_uid}"
        return owners, (f"{Path(folder).name} claims to be {student}'s but is owned by {by}: a submission made "
                        f"under a classmate's id is never collected as theirs")
    return owners, None


def arrived_owner_refusal(path: str | Path, student: str) -> str | None:
    """For autograde: why submitted/<student>/<assignment>/<notebook> is not `student`'s (its folder or the
    file itself belongs to another local user than `student` and the grading user), or None. Collect copies
    as the grading user; a submitted/ that students write into directly is checked here instead."""
    path = Path(path)
    owners, why = claimed_owners(path.parent, student)
    if owners is None or why is not None:
        return why
    try:
        uid = os.lstat(path).st_uid
    except OSError:
        return None  # (what is missing is said by the read that follows)
    if uid in owners:
        return None
    import pwd

    try:
        by = pwd.getpwuid(uid).pw_name
    except KeyError:
        by = f"uid {uid}"
    return f"{path.name} is owned by {by}, not by {student}: a file another user put there is not graded as theirs"


def _check_arrived(notebooks: list) -> None:
    """What arrived in submitted/<student>/<assignment>/, read as every seat reads a submission
    (notebook.submission_bytes: a regular file in that folder, no link followed, bounded), then as nbgrader
    reads it (`_unreadable`). nbgrader would open each by name, following links (to source/'s solved notebook,
    a classmate's), and it fails on one that is not a notebook, dropping that student's graded copy (so no
    feedback either). A refused or unreadable one is set aside (`refuse_notebook`, with the instructor's words
    and the student's, `_arrival_words`), so nbgrader reads nothing of it; StartCourseGrading makes it NOT
    GRADED with the reason, and its feedback says why. A refused one stays in refused/ (the stand-in says why
    on any later run); an unreadable one, a regular file, is put back once nbgrader has read the stand-in, so
    `course grade submitted` grades what the student submitted. A notebook (or its folder) that belongs to
    another local user than the student it is filed under and the grading user is refused the same way
    (`arrived_owner_refusal`): a classmate's file planted under this student's id."""
    from course_cli.sandboxed.notebook import SubmissionRefused, submission_bytes

    for name in notebooks:
        path = Path(name)
        try:
            other = arrived_owner_refusal(path, path.parent.parent.name)  # a classmate's file under this id
            if other is not None:
                raise SubmissionRefused(other)
            why = _unreadable(submission_bytes(path, path.parent))
            if why is not None:
                raise _Unreadable(*why)
        except (SubmissionRefused, _Unreadable) as exc:
            course = path.parents[2].parent  # submitted/<student>/<assignment>/<notebook>
            aside = _aside(path)
            unreadable = isinstance(exc, _Unreadable)
            # (the words are read from what is at `path` before it moves: `_arrival_words` lstat's it there)
            instructor, student = _arrival_words(path, exc, course, None if unreadable else aside)
            refuse_notebook(path, instructor, student, say_moved=not unreadable)
            if unreadable:  # a regular file: put back once nbgrader has read the stand-in (StartCourseGrading),
                # so every other seat reading submitted/ (`course grade`) still finds what the student submitted
                _PUT_BACK[f"{path.parent.parent.name}/{path.parent.name}/{path.stem}"] = (aside, path)
        except Exception:
            pass  # nbgrader reports what it cannot read, as before


def _aside(path: Path) -> Path:
    """Where a refused submitted/<student>/<assignment>/<notebook> is kept: refused/<student>/<assignment>/."""
    course = path.parents[2].parent
    return course / "refused" / path.parent.parent.name / path.parent.name / path.name


def refuse_notebook(path: Path, why: str, student_words: str | None = None, say_moved: bool = True) -> None:
    """Make submitted/<student>/<assignment>/<notebook> NOT GRADED because of `why` (the instructor's words;
    `student_words` the student's, else the same; `say_moved`: whether `why` says where it went, false for one
    put back later): what is there is moved, as it came (a link stays a link), to
    refused/<student>/<assignment>/ in the course (an earlier one there kept as a backup, never overwritten),
    and the released notebook, recording why in metadata.course, takes its name (StartCourseGrading reads it).
    Used by autograde's check of what arrived and by the course's collect (nbgrader_exchange)."""
    import nbformat

    from course_cli.atomic import write_text

    course = path.parents[2].parent  # submitted/<student>/<assignment>/<notebook>
    if os.path.lexists(path):
        aside = _aside(path)
        aside.parent.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(aside):  # an earlier refusal of this student's: kept, never overwritten
            os.replace(aside, aside.with_name(f"{aside.name}.{os.lstat(aside).st_mtime_ns}.bak"))
        os.replace(path, aside)  # out of submitted/: nbgrader copies every file there
        moved = f"moved, as it came, to {aside.relative_to(course)}"
        if say_moved and moved not in why:
            why = f"{why} ({moved})"
    released = course / "release" / path.parent.name / path.name  # the course's own copy
    try:
        stand_in = nbformat.read(released, as_version=4)  # its cells: nbgrader's steps need them
    except Exception:
        stand_in = nbformat.v4.new_notebook()
    stand_in.metadata["course"] = {"refused": why, "refused_student": student_words or why}
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

            from course_cli.atomic import read_bytes

            prev = json.loads(read_bytes(mark, 1 << 16).decode("utf-8"))  # a link there is not followed
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
        _REFUSED[f"{folder.parent.name}/{folder.name}/{lesson.notebook.removesuffix('.ipynb')}"] = \
            _arrival_words(folder / pick, exc, folder.parents[2], None)
        return
    import json

    from course_cli.atomic import write_text

    write_text(folder / lesson.notebook, text)
    write_text(mark, json.dumps({"submitted": pick, "note": note}))
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

    from course_cli.atomic import read_bytes, write_bytes

    try:
        submitted = str(json.loads(read_bytes(mark, 1 << 16).decode("utf-8"))["submitted"])
    except (OSError, ValueError, KeyError, TypeError):
        return
    if submitted.endswith(".ipynb") and "/" not in submitted and submitted != lesson.notebook:
        write_bytes(graded.with_name(submitted.removesuffix(".ipynb") + ".html"), read_bytes(graded))


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
    """The course did not judge this notebook (NOT GRADED): every autograder cell gets an error and 0 points.
    `cause` is the instructor's words (the export's note, the autograde log); `student` the student's (the
    feedback: what happened to their notebook, and what they can do, without the instructor's folders)."""

    def __init__(self, cause: str, student: str | None = None):
        self.cause = cause
        self.student = student or cause


_NOT_YOURS = "This is not about your work: your instructor sees the same reason and can grade it again."


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


class _Deferred:
    """A grading to make when its verdict is asked for (`finish`)."""

    def __init__(self, finish):
        self.finish = finish


class StartCourseGrading(NbGraderPreprocessor):
    """Ready the course's sandboxed grading of this notebook's code (graded when ApplyCourseVerdict asks, each
    submission forked from its lesson's class zygote: course_cli/sandboxed/class_forks.py). A notebook the course
    cannot judge (refused when it arrived, an unknown lesson, another course version) is recorded as
    NotJudged or NOT GRADED, never left without a verdict."""

    def preprocess(self, nb, resources):
        from course_cli.sandboxed import class_forks, sandbox
        from course_cli.sandboxed.grading import Grading
        from course_cli.sandboxed.notebook import graded_cells

        key = _key(resources)
        nbg = resources.get("nbgrader") or {}
        _put_back(nbg.get("student"), nbg.get("assignment"))  # nbgrader has read the stand-ins by now
        lesson = _lesson_of(resources)
        course_meta = nb.metadata.get("course")
        refused = _REFUSED.pop(key, None)
        if refused is None and isinstance(course_meta, dict) and course_meta.get("refused"):
            refused = (str(course_meta["refused"]), str(course_meta.get("refused_student") or course_meta["refused"]))
        name = (resources.get("nbgrader") or {}).get("notebook")
        if lesson is None:
            _IN_FLIGHT[key] = NotJudged(
                f"the installed course ({course_version()}) has no lesson {name!r}: install the course version that "
                f"released this assignment, then autograde it again",
                f"The course installed where your notebook {name}.ipynb is graded has no lesson by that name. "
                f"{_NOT_YOURS}")
            return nb, resources
        if refused is not None:
            _IN_FLIGHT[key] = NotJudged(*refused)
            return nb, resources
        mismatch = _release_mismatch(lesson, resources)
        if mismatch is not None:
            _IN_FLIGHT[key] = NotJudged(mismatch, f"The course installed where your notebook {name}.ipynb is graded "
                                                  f"is not the one your assignment was released with. {_NOT_YOURS}")
            return nb, resources
        if lesson is not None:
            sandbox.require_sandbox()  # refuse to grade unprotected (unless COURSE_INSECURE=1)
            try:
                cells = graded_cells(nb)
            except Exception as exc:  # a notebook nbgrader accepted but the course cannot read
                _IN_FLIGHT[_key(resources)] = NotJudged(
                    f"the course cannot read the cells of {name}.ipynb: {exc}",
                    f"The cells of your notebook {name}.ipynb cannot be read ({exc}). {_OPEN_AND_SUBMIT}")
                return nb, resources
            notebook = resources["nbgrader"]["notebook"]
            # graded when ApplyCourseVerdict asks, forked from the lesson's class zygote (class_forks.py)
            _IN_FLIGHT[_key(resources)] = _Deferred(lambda: class_forks.graded(
                lesson, lambda runner: Grading(lesson, cells, notebook, trusted=True, runner=runner).finish()))
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
            return _not_judged(nb, grading, self.log, (resources.get("nbgrader") or {}).get("student")), resources
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
        from course_cli.settings import hidden_seed

        nb.metadata.setdefault("course", {})["hidden_seed"] = hidden_seed()  # COURSE_HIDDEN_SEED repeats this run
        self.log.info("course verdict for %s: %s/%s (hidden checks' seed %s: COURSE_HIDDEN_SEED=%s repeats this run)",
                      _key(resources), result.score, result.max_score, hidden_seed(), hidden_seed())
        return nb, resources


def _autograder_cell(cell) -> bool:
    """A cell nbgrader scores automatically: graded, not a solution cell (a test cell)."""
    nbg = cell.get("metadata", {}).get("nbgrader", {})
    return cell.get("cell_type") == "code" and isinstance(nbg, dict) and bool(nbg.get("grade")) \
        and not nbg.get("solution")


def _error_outputs(cause: str, head: str = "not judged: ") -> list:
    from nbformat.v4 import new_output

    from course_cli.safe_text import for_terminal

    line = for_terminal(f"{head}{cause}", 2000, newlines=False)
    return [new_output("stream", name="stderr", text=line + "\n"),
            new_output("error", ename="CourseNotJudged", evalue=line, traceback=[f"CourseNotJudged: {line}"])]


NOT_GRADED_ROLE = "not-graded"  # metadata.course.role of the cell that tells a NOT GRADED student why


def _not_judged(nb, why: NotJudged, log=None, student: str | None = None):
    """A notebook the course did not judge: every autograder cell an error (0 points), and a first cell
    "Not graded", both in the student's words (the feedback is made from this notebook); the instructor's
    words go to metadata.course.not_graded (the export's note) and the autograde log."""
    import textwrap

    from nbformat.v4 import new_markdown_cell

    from course_cli.safe_text import for_markdown, for_terminal

    for cell in nb.cells:
        if _autograder_cell(cell):
            cell.outputs = _error_outputs(why.student, "Not graded. ")
    nb.cells = [c for c in nb.cells if (c.get("metadata", {}).get("course") or {}).get("role") != NOT_GRADED_ROLE]
    text = textwrap.fill(for_markdown(why.student, 1500), 78, break_long_words=False, break_on_hyphens=False)
    nb.cells.insert(0, new_markdown_cell(f"**Not graded.** {text}", metadata={"course": {"role": NOT_GRADED_ROLE}}))
    meta = nb.metadata.setdefault("course", {})
    meta["not_graded"], meta["not_graded_student"] = why.cause, why.student
    if log is not None:
        log.error("NOT GRADED (0 points): %s: %s", for_terminal(student or "?", 200, newlines=False),
                  for_terminal(why.cause, 2000, newlines=False))
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
            self.log.error("%d submission(s) NOT GRADED: they are in %s with an empty score, each with its "
                           "cause in the note column; once a cause is fixed, `nbgrader autograde ASSIGNMENT "
                           "--student ID --force`, then export again.", len(ungraded), dest)

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

    @staticmethod
    def _failed(submitted: Path | None, name: str, assignment: str = "ASSIGNMENT", student: str = "ID") -> str:
        """The note of a submission nbgrader failed on in autograde (it then removes the graded copy): what is
        wrong with the submitted file, checked now as nbgrader reads it (`_unreadable`); when it reads, that,
        and the command that repeats the failure (the cause was not recorded)."""
        from course_cli.sandboxed.notebook import NotebookError, submission_bytes

        dropped = "nbgrader could not grade it and removed the graded copy"
        if submitted is None:
            return f"{name}: {dropped}"
        try:
            why = _unreadable(submission_bytes(submitted / name, submitted))
        except NotebookError as exc:
            return f"{_arrival_words(submitted / name, exc, submitted.parents[2], None)[0]}: {dropped}"
        if why is not None:
            return f"{name} {why[0]}: {dropped}"
        return (f"{name} reads as a notebook, but nbgrader stopped with an error on it in autograde and removed "
                f"the graded copy (the error was not recorded): `nbgrader autograde {assignment} --student "
                f"{student} --force` grades it again, or prints the error")

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
                return NOT_GRADED, ("submitted, but the gradebook has no grades for it: autograde has not run for "
                                    "this student, or stopped before it")
            return "not submitted", ""
        autograded = folder("autograded")
        for nb in submission.notebooks:
            if autograded is not None and not (autograded / f"{nb.name}.ipynb").is_file():
                return NOT_GRADED, self._failed(folder("submitted"), f"{nb.name}.ipynb", assignment, student)
            why = _not_graded_note(autograded / f"{nb.name}.ipynb") if autograded is not None else None
            if why:
                return NOT_GRADED, why
            if any(g.auto_score is None and g.manual_score is None and not g.needs_manual_grade
                   for g in nb.grades):
                return NOT_GRADED, f"{nb.name}.ipynb has autograder cells without a score"
        return "graded", ""
