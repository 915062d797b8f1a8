"""The results journal of a class grading: one JSON line per submission, written (flushed and fsync'd) as
each result arrives, so that an interrupted `course grade` (Ctrl-C, a killed client, a lost cluster)
continues with `--resume`, grading only what is missing.

    {"journal": 1, "lesson": "lesson01", "reference": "<grading.reference_key>"}        the header
    {"student": "alice", "notebook": "...", "sha256": "...", "result": {...}}            one per submission

A line counts on resume only if it parses (the torn last line of a killed run is dropped) and its
submission's file still has the same sha256 (a resubmitted notebook is graded again). A journal written by
another lesson or another version of the graders (another reference key) is refused, not mixed in.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import stat
from pathlib import Path

from graders.engine.results import CheckResult, ExerciseResult, LessonResult

from course_cli.sandboxed.notebook import MAX_BYTES, NotebookError
from course_cli.sandboxed.notebook import submission_bytes as _read_submission

FORMAT = 1


class JournalError(ValueError):
    """A journal that cannot be resumed; the message says why and what to do."""


# The most of a submission the batch's own process reads (to hash it, to ship it to a worker): the bound of
# the grader's reader (course_cli/sandboxed/notebook.py MAX_BYTES); over it the submission is hashed as None,
# never shipped, and its grading says why it is NOT GRADED.
READ_LIMIT = MAX_BYTES


def submission_bytes(path: Path, root: Path | None = None) -> bytes | None:
    """A submission's bytes as every seat reads them (notebook.submission_bytes: a regular file inside `root`,
    no link followed, a FIFO never blocking, at most READ_LIMIT bytes), or None when it is refused or cannot be
    read: the grading itself says why."""
    try:
        return _read_submission(path, root)
    except (OSError, NotebookError):
        return None


def file_digest(path: Path, root: Path | None = None) -> str | None:
    """The sha256 of a submission's bytes, or None if the batch does not read it (`submission_bytes`: it is
    graded, as an error or NOT GRADED row, and never taken from a journal)."""
    data = submission_bytes(path, root)
    return None if data is None else hashlib.sha256(data).hexdigest()


def result_to_dict(result: LessonResult) -> dict:
    """`LessonResult.to_dict()` plus the notes: everything needed to rebuild the result exactly."""
    return {**result.to_dict(), "notes": list(result.notes)}


def _fields(cls, data: dict) -> dict:
    names = {f.name for f in dataclasses.fields(cls)}
    return {k: v for k, v in data.items() if k in names}


def result_from_dict(data: dict) -> LessonResult:
    """The inverse of `result_to_dict` (derived keys such as score are recomputed, not read)."""
    exercises = [ExerciseResult(**{**_fields(ExerciseResult, e),
                                   "checks": [CheckResult(**_fields(CheckResult, c)) for c in e["checks"]]})
                 for e in data["exercises"]]
    return LessonResult(**{**_fields(LessonResult, data), "exercises": exercises})


MAX_RESULT_CHARS = 8 * 2**20  # a result's JSON text from a worker (a lesson's largest is a few hundred KiB)
_TOP = {"lesson": str, "notebook": str, "exercises": list, "notes": list, "score": (int, float, type(None)),
        "max_score": (int, float), "not_graded": str, "note": str, "public_only": bool}
_EXERCISE = {"id": str, "status": str, "points": (int, float), "max_points": (int, float), "checks": list,
             "diagnosis": (str, type(None)), "diagnosis_id": (str, type(None))}
_CHECK = {"name": str, "status": str, "device": str, "dtype": str, "message": str, "kind": str, "failure": str, "size": int}


def _plain(obj: object, what: str, schema: dict, required: tuple[str, ...]) -> dict:
    if type(obj) is not dict:
        raise ValueError(f"{what} is not an object")
    extra = sorted(set(obj) - set(schema))
    absent = [k for k in required if k not in obj]
    if extra or absent:
        raise ValueError(f"{what}: unknown fields {extra[:5]}" if extra else f"{what}: no {absent[0]}")
    for k, v in obj.items():
        if type(v) is bool and schema[k] is not bool or not isinstance(v, schema[k]):
            raise ValueError(f"{what}.{k} is a {type(v).__name__}")
    return obj


def checked_result(text: object, lesson) -> LessonResult:
    """A worker's result (its JSON text) as a LessonResult, only when it is plain data of the result schema
    for `lesson` (the fields and types of graders.engine.results, the lesson's exercises once each at their
    points, known statuses and kinds, at most MAX_RESULT_CHARS): else ValueError, that submission's error."""
    from graders.engine.results import FAILURES, KINDS, NOT_GRADED, STATUSES

    if type(text) is not str:
        raise ValueError(f"the result is a {type(text).__name__}, not JSON text")
    if len(text) > MAX_RESULT_CHARS:
        raise ValueError(f"the result is {len(text)} characters (at most {MAX_RESULT_CHARS})")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"the result is not JSON ({exc})") from None
    _plain(data, "result", _TOP, ("lesson", "notebook", "exercises", "notes"))
    if data["lesson"] != lesson.id:
        raise ValueError(f"the result is of {data['lesson']!r}, not {lesson.id}")
    if not all(type(n) is str for n in data["notes"]):
        raise ValueError("result.notes holds a non-string")
    points = {ex.name: float(ex.points) for ex in lesson.exercises}
    seen = set()
    for i, e in enumerate(data["exercises"]):
        _plain(e, f"exercise {i}", _EXERCISE, ("id", "status", "points", "max_points", "checks"))
        if e["id"] not in points or e["id"] in seen:
            raise ValueError(f"exercise {i}: {str(e['id'])[:80]!r} is not one of {lesson.id}'s, once")
        seen.add(e["id"])
        if e["status"] not in STATUSES + (NOT_GRADED,):
            raise ValueError(f"exercise {e['id']}: unknown status {e['status'][:40]!r}")
        if e["max_points"] != points[e["id"]] or not 0 <= e["points"] <= e["max_points"]:
            raise ValueError(f"exercise {e['id']}: {e['points']} of {e['max_points']} points "
                             f"(the lesson gives {points[e['id']]:g})")
        for j, c in enumerate(e["checks"]):
            _plain(c, f"exercise {e['id']} check {j}", _CHECK, ("name", "status"))
            if c["status"] not in STATUSES or c.get("kind", "check") not in KINDS \
                    or c.get("failure", "") not in FAILURES or c.get("size", 0) < 0:
                raise ValueError(f"exercise {e['id']} check {j}: unknown status, kind or failure, or a negative size")
    return result_from_dict(data)


def journal_seed(path: Path) -> int | None:
    """The hidden seed a journal's run was graded with (None if it has none or is not a journal)."""
    from course_cli.atomic import open_regular

    try:
        with os.fdopen(open_regular(path), "rb") as f:  # a link at its name is not followed
            seed = json.loads(f.readline()).get("seed")
    except (OSError, ValueError, AttributeError):
        return None
    return seed if isinstance(seed, int) else None


class Journal:
    """Append-only; `record` returns once the line is on disk."""

    def __init__(self, path: Path, header: dict, done: dict[str, dict]):
        self.path, self.header, self.done = Path(path), header, done
        self._f = None

    @classmethod
    def open(cls, path: Path, lesson: str, reference: str, resume: bool, seed: int | None = None,
             insecure_cluster: bool = False) -> "Journal":
        """Start a journal at `path`, or with resume=True continue the one there. Starting afresh over an
        existing journal keeps it as `<path>.bak`. `seed`: the run's hidden checks' seed (resumed alike).
        insecure_cluster: graded on a plain-TCP Dask cluster (--insecure-cluster), said in the header, and in a
        line of its own when a run resumes a journal with it."""
        path = Path(path)
        header = {"journal": FORMAT, "lesson": lesson, "reference": reference}
        if seed is not None:
            header["seed"] = seed
        if insecure_cluster:
            header["insecure_cluster"] = True
        done: dict[str, dict] = {}
        if path.exists() and resume:
            from course_cli.atomic import open_regular

            try:  # appended to only through this descriptor: a link at its name is refused, never followed
                f = os.fdopen(open_regular(path, os.O_RDWR), "r+b")
            except OSError as exc:
                raise JournalError(f"{path}: cannot resume from it: {exc.strerror}; grade without --resume (a "
                                   f"new journal replaces it, and what is there is kept as {path.name}.bak)") from None
            try:
                raw = f.read()
            except BaseException:
                f.close()
                raise
            try:
                done = _entries(path, raw, lesson, reference, seed)
            except BaseException:
                f.close()
                raise
            journal = cls(path, header, done)
            journal._f = f
            journal._f.truncate(raw.rfind(b"\n") + 1)  # drop the torn line, append after the whole ones
            journal._f.seek(0, os.SEEK_END)
            if insecure_cluster:
                journal._write({"insecure_cluster": True})  # (no student: skipped on resume)
            return journal
        from course_cli.atomic import create_for_append

        path.parent.mkdir(parents=True, exist_ok=True)
        journal = cls(path, header, done)
        # the header written under an unpredictable name, renamed over `path` (a link there is replaced, not
        # followed; what was there kept as .bak), and every later line appended through that same descriptor
        journal._f = create_for_append(path, journal._line(header), backup=True)
        return journal

    @classmethod
    def matches(cls, path: Path, lesson: str, reference: str, seed: int | None = None) -> bool:
        """Can the journal at `path` be resumed for this lesson, these graders and this seed?"""
        try:
            cls.open(path, lesson, reference, resume=True, seed=seed).close()
            return True
        except (JournalError, OSError):
            return False

    def finished(self, student: str, digest: str | None) -> LessonResult | None:
        """The journalled result of `student`, if it was graded from the same bytes."""
        entry = self.done.get(student)
        if entry is None or digest is None or entry.get("sha256") != digest:
            return None
        return entry["result"]

    def record(self, student: str, notebook: str, digest: str | None, result: LessonResult) -> None:
        entry = {"student": student, "notebook": notebook, "sha256": digest, "result": result_to_dict(result)}
        self._write(entry)
        self.done[student] = {**entry, "result": result}

    @staticmethod
    def _line(obj: dict) -> bytes:
        from course_cli.safe_text import json_clean

        # a submission's text may hold a lone surrogate: escaped, so the line is always written; U+2028/U+2029
        # as JSON escapes, so a reader that splits lines as str.splitlines does reads one entry a line
        line = json.dumps(json_clean(obj, None), ensure_ascii=False)
        return line.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").encode() + b"\n"

    def _write(self, obj: dict) -> None:
        self._f.write(self._line(obj))
        self._f.flush()
        os.fsync(self._f.fileno())

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def __enter__(self) -> "Journal":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _entries(path: Path, raw: bytes, lesson: str, reference: str, seed: int | None) -> dict[str, dict]:
    """The journalled entries by student, after checking the header is this run's (JournalError if not)."""
    done: dict[str, dict] = {}
    lines = raw.split(b"\n")
    if raw and not raw.endswith(b"\n"):
        lines = lines[:-1]  # the line a killed run was writing
    try:
        old = json.loads(lines[0])
    except (ValueError, IndexError):
        raise JournalError(f"{path} is not a results journal; grade without --resume "
                           f"(it will be kept as {path.name}.bak)") from None
    if not isinstance(old, dict) or old.get("journal") != FORMAT:
        raise JournalError(f"{path} is not a results journal of this version of the course")
    if old.get("lesson") != lesson:
        raise JournalError(f"{path} is the journal of {old.get('lesson')}, not {lesson}")
    if old.get("reference") != reference:
        raise JournalError(f"{path} was written with other graders or another solved notebook (the "
                           f"course changed since); grade afresh, without --resume")
    if old.get("seed") != seed:
        raise JournalError(f"{path} was graded with the hidden seed {old.get('seed')}, not {seed}: "
                           f"resume without --seed (or with --seed {old.get('seed')})")
    for line in lines[1:]:
        try:
            entry = json.loads(line)
            entry["result"] = result_from_dict(entry["result"])
            done[entry["student"]] = entry
        except (ValueError, KeyError, TypeError):
            continue  # a damaged line: that student is graded again
    return done
