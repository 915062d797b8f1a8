"""Public and hidden checks, as the student meets them: in the repository the check cell runs every check (as
`course check` does), in the student distribution the public ones with a note that the instructor's run draws
more; `course status`'s best counts only what a full check gave."""

from __future__ import annotations

import nbformat
import pytest

from course_cli.student.progress import ProgressStore
from graders.engine.results import PUBLIC_ONLY_NOTE, ExerciseResult, LessonResult
from graders.registry import find_lesson
from harness import mistakes_of, with_mistake

L01 = find_lesson("lesson01")


def _result(status: str, points: float, public_only: bool) -> LessonResult:
    return LessonResult("lesson01", "nb", [ExerciseResult("softmax", status, points, 1.0)], public_only=public_only)


def test_a_public_only_attempt_is_never_the_best(tmp_path):
    store = ProgressStore(tmp_path)
    store.record(_result("passed", 1.0, public_only=True))
    rec = store.load()["lessons"]["lesson01"]
    assert rec["best"].get("softmax") is None
    assert rec["best_public"]["softmax"]["status"] == "passed"
    assert [a["checks"] for a in rec["attempts"]] == ["public"]
    store.record(_result("failed", 0.0, public_only=False))  # a full check that fails: the best says failed
    assert store.load()["lessons"]["lesson01"]["best"]["softmax"] == {"points": 0.0, "status": "failed"}
    store.record(_result("passed", 1.0, public_only=False))
    assert store.load()["lessons"]["lesson01"]["best"]["softmax"] == {"points": 1.0, "status": "passed"}


def _check_cell(monkeypatch, tmp_path, path, distribution: bool):
    """The check cell `grade("lesson01", "softmax")` in process: the kernel's cells are the notebook's code cells,
    the report is captured instead of displayed (the same code path as in a kernel otherwise)."""
    import course_cli.incell as incell
    import graders.registry as registry
    from course_cli.sandboxed.notebook import graded_cells

    nb = nbformat.read(path, as_version=4)
    monkeypatch.setattr(incell, "kernel_cells", lambda: graded_cells(nb))
    shown, recorded = [], []
    monkeypatch.setattr(incell, "_display", lambda html, text: shown.append(text))
    monkeypatch.setattr(incell, "_record", recorded.append)
    monkeypatch.setattr(registry, "STUDENT_DISTRIBUTION", distribution)
    incell.grade("lesson01", "softmax")
    return shown[0], recorded[0]


@pytest.mark.slow
def test_the_check_cell_runs_every_check_in_the_repository(monkeypatch, tmp_path):
    """The issue's case: a softmax without the max shift said "passed (4/4)" in the check cell."""
    no_max = next(m for m in mistakes_of(L01) if m.id == "no_max")
    text, result = _check_cell(monkeypatch, tmp_path, with_mistake(L01, no_max, tmp_path), distribution=False)
    assert "softmax: failed" in text and PUBLIC_ONLY_NOTE not in text.replace("\n  ", " ").lower()
    assert not result.public_only
    names = [c.name for c in result.exercises[0].checks]
    assert any(n.endswith("(fresh inputs)") for n in names)  # the hidden twins ran too


@pytest.mark.slow
def test_the_distributions_check_cell_runs_the_public_ones_and_says_so(monkeypatch, tmp_path):
    no_max = next(m for m in mistakes_of(L01) if m.id == "no_max")
    text, result = _check_cell(monkeypatch, tmp_path, with_mistake(L01, no_max, tmp_path), distribution=True)
    assert "softmax: failed" in text  # the stability property is public: it fails here too
    assert PUBLIC_ONLY_NOTE in " ".join(text.split()).lower()
    assert result.public_only and not any(c.name.endswith("(fresh inputs)") for c in result.exercises[0].checks)
