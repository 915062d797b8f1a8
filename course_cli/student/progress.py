"""The progress store: every attempt of every lesson, in `<workspace>/.course/progress.json`.

Writes are atomic (course_cli/atomic.py: an unpredictable temporary name created exclusively, fsync, rename)
under an exclusive lock (its file opened without following a link), so a crash mid-write
leaves the previous version whole and concurrent `course check` runs lose no attempt. A store that
cannot be read is moved aside (never deleted) and a fresh one started.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path

VERSION = 1


class ProgressStore:
    def __init__(self, workspace: Path):
        self.dir = Path(workspace) / ".course"
        self.path = self.dir / "progress.json"
        self.warnings: list[str] = []

    @contextmanager
    def _locked(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.dir / "progress.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "r+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _read(self) -> dict:
        try:
            data = json.loads(self.path.read_text())
            if not isinstance(data, dict) or not isinstance(data.get("lessons"), dict):
                raise ValueError("not a progress store")
            return data
        except FileNotFoundError:
            return {"version": VERSION, "lessons": {}}
        except (ValueError, OSError):
            aside = self.path.with_name(f"progress.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{time.time_ns() % 10**9:09d}.json")
            try:
                os.replace(self.path, aside)
            except OSError:
                pass
            self.warnings.append(f"the progress store was unreadable; kept it as {aside.name} and started afresh")
            return {"version": VERSION, "lessons": {}}

    def _write(self, data: dict) -> None:
        from course_cli.atomic import write_text

        write_text(self.path, json.dumps(data, indent=1), mode=0o600)  # mkstemp's name, then rename

    def load(self) -> dict:
        with self._locked():
            return self._read()

    def record(self, result, source: str = "cli") -> None:
        """Append one attempt (a LessonResult) to its lesson's history. Only a full check (every check, as
        `course check` runs them in the repository) can be the best: an attempt from the public checks only
        (the distribution, `--public`) is kept in the history, marked "public", and its passes in
        `best_public`, never in `best`."""
        public = bool(getattr(result, "public_only", False))
        attempt = {"time": time.time(), "source": source, "score": result.score, "max_score": result.max_score,
                   "checks": "public" if public else "all",
                   "exercises": {e.id: _exercise_entry(e) for e in result.exercises}}
        if getattr(result, "not_graded", ""):  # could not be graded: the attempt says why, and holds no score
            attempt.update(score=None, not_graded=result.not_graded, exercises={})
        with self._locked():
            data = self._read()
            lesson = data["lessons"].setdefault(result.lesson, {"attempts": [], "best": {}, "hints": {}})
            lesson["attempts"].append(attempt)
            if attempt.get("not_graded"):  # nothing to compare with the best
                self._write(data)
                return
            if public:
                seen = lesson.setdefault("best_public", {})
                for e in result.exercises:
                    if e.status == "passed" or e.id not in seen:
                        seen[e.id] = {"points": e.points, "status": e.status}
                self._write(data)
                return
            for e in result.exercises:
                prev = lesson["best"].get(e.id, {"points": 0.0, "status": "not_attempted"})
                if e.points > prev["points"] or prev["status"] != "passed" and e.status == "passed":
                    lesson["best"][e.id] = {"points": e.points, "status": e.status}
                elif prev["status"] != "passed":
                    lesson["best"][e.id] = {"points": prev["points"], "status": e.status}
            self._write(data)

    def next_hint(self, lesson: str, exercise: str, available: int, cause: str | None = None) -> int:
        """Count one more hint revealed (up to `available`); returns how many are now revealed. With `cause`
        (the id of the last check's likely mistake, whose hint `course hint` shows first), the first call
        for that cause reveals nothing more: its hint is the step (kept per exercise in "cause_hints")."""
        with self._locked():
            data = self._read()
            rec = data["lessons"].setdefault(lesson, {"attempts": [], "best": {}, "hints": {}})
            hints = rec.setdefault("hints", {})
            if cause is not None:
                seen = rec.setdefault("cause_hints", {})
                if seen.get(exercise) != cause:
                    seen[exercise] = cause
                    self._write(data)
                    return hints.get(exercise, 0)
            hints[exercise] = min(available, hints.get(exercise, 0) + 1)
            self._write(data)
            return hints[exercise]

    def last_diagnosis(self, lesson: str, exercise: str) -> str | None:
        """The diagnosis id of `exercise` in the last attempt that graded it (None when it passed there, had
        no diagnosis, or the attempt was written before ids were recorded)."""
        rec = self.load()["lessons"].get(lesson, {})
        for attempt in reversed(rec.get("attempts", [])):
            entry = (attempt.get("exercises") or {}).get(exercise)
            if isinstance(entry, dict):
                ident = entry.get("diagnosis_id")
                return ident if isinstance(ident, str) and entry.get("status") != "passed" else None
        return None


def _exercise_entry(e) -> dict:
    """An exercise of an attempt: its status and points, and the id of its diagnosis when it has one
    (graders/engine/kinds.py; what `course hint` starts from). Stores written before ids have none."""
    entry = {"status": e.status, "points": e.points}
    if getattr(e, "diagnosis_id", None) and e.status != "passed":
        entry["diagnosis_id"] = e.diagnosis_id
    return entry
