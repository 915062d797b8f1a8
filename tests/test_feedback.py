"""Feedback a student takes in at a glance: one failure, one message; structural diagnoses; cascades;
the notebook's HTML; the terminal commands as a student types them (issue 17)."""

from __future__ import annotations

import io
import statistics

import pytest
from rich.console import Console

from course_cli import render
from graders.registry import find_lesson
from graders.results import CheckResult, ExerciseResult, LessonResult

TOL = "atol=1e-05, rtol=1e-04 (float32, with room for a different order of summation; on cpu)"
VALUES = ("output differs from the reference at 119 of 120 positions: max abs error 0.4684 at index (0, 0, 0, 4) "
          "(expected -0.5913, got -0.1229), max rel error 69.78; first bad index (0, 0, 0, 0) (expected 1.266, "
          f"got 0.8743); tolerance {TOL}")


def printed(result: LessonResult, width: int = 80, **kw) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, no_color=True, highlight=False, soft_wrap=False)
    render.render_result(console, result, find_lesson(result.lesson).title, **kw)
    return buf.getvalue()


def flat(text: str) -> str:
    return " ".join(text.split())


def lesson01(sdpa_checks, diagnosis=None, status="failed") -> LessonResult:
    return LessonResult("lesson01", "lessons/lesson01_sdpa.ipynb", [
        ExerciseResult("softmax", "passed", 4, 4, [CheckResult("sums to 1", "passed")]),
        ExerciseResult("scaled_dot_product_attention", status, 0, 6, sdpa_checks, diagnosis)])


# ------------------------------------------------------------------------------------------------
# 1. One failure, one message


def test_shape_is_told_before_an_exception_and_values():
    checks = [CheckResult("values", "failed", message=VALUES),
              CheckResult("gradients match", "error", message="RuntimeError: grad can be implicitly created only "
                                                              "for scalar outputs"),
              CheckResult("Tq ≠ Tk", "failed", message="output has shape (2, 3, 4, 6), expected (2, 3, 4, 5)"),
              CheckResult("dtype", "failed", message="output has dtype float64, expected float32 (keep the "
                                                     "input's dtype)")]
    ex = ExerciseResult("scaled_dot_product_attention", "error", 0, 6, checks)
    order = [c.name for c in render.failing_checks(ex)]
    assert order == ["Tq ≠ Tk", "dtype", "gradients match", "values"]
    out = printed(lesson01(checks, status="error"))
    assert "output has shape (2, 3, 4, 6), expected (2, 3, 4, 5)" in out
    assert "RuntimeError" not in out  # told once, under --detail
    assert "3 more checks failed: course check lesson01 scaled_dot_product_attention --detail" in flat(out)


def test_tolerance_is_said_once_and_the_message_once():
    checks = [CheckResult(f"check {i}", "failed", message=VALUES) for i in range(5)]
    out = printed(lesson01(checks, "the scores are divided by dk instead of √dk"))
    assert out.count("atol=1e-05") == 1
    assert out.count("differs at 119 of 120 positions") == 1
    assert out.count("Likely mistake") == 1 and "√dk" in out
    assert "4 more checks failed" in out


def test_detail_lists_every_failing_check_and_the_same_error_once():
    checks = [CheckResult(f"check {i}", "error", message=f"RuntimeError: size of tensor a ({i + 2}) must match")
              for i in range(6)]
    out = printed(lesson01(checks, status="error"), detail=True)
    assert all(f"check {i}" in out for i in range(6))
    assert out.count("RuntimeError") == 2  # the summary's and the detail's one group of six
    assert "6 checks, the same message" in flat(out)


def test_narrow_terminals_stack_and_wide_ones_get_a_table():
    checks = [CheckResult("values", "failed", message=VALUES)]
    narrow, wide = printed(lesson01(checks), 60), printed(lesson01(checks), 120)
    assert "┃" not in narrow and "┃" in wide
    assert max(len(l.rstrip()) for l in narrow.splitlines()) <= 60
    # the message is wrapped at words into the width, not squeezed into a few characters per line
    message = [l for l in narrow.splitlines() if l.startswith("  ") and l.strip()]
    assert len(message) >= 2 and max(len(l.rstrip()) for l in message) > 50


def test_values_message_is_one_sentence_with_the_first_bad_index():
    assert render.shorten(render.split_tolerance(VALUES)[0]) == (
        "output differs at 119 of 120 positions; first at (0, 0, 0, 0): expected 1.266, got 0.8743 "
        "(max abs error 0.4684)")
    assert render.split_tolerance(VALUES)[1] == TOL


def test_points_are_singular_for_one():
    assert render.plural(1, "point") == "1 point" and render.plural(2, "point") == "2 points"
    ex = ExerciseResult("to_additive", "passed", 1, 1, [])
    assert "(1/1 point)" in render.exercise_plain(ex, "lesson02") and "1 points" not in render.exercise_html(ex, "lesson02")


def _planted_outputs():
    from harness import mistakes_of, with_mistake
    import tempfile
    from pathlib import Path

    from course_cli.grading import grade_notebook

    for lid in ("lesson01", "lesson02", "lesson03"):
        lesson = find_lesson(lid)
        for m in mistakes_of(lesson):
            path = with_mistake(lesson, m, Path(tempfile.mkdtemp(prefix="fb-")))
            yield lid, m, grade_notebook(lesson, path)


@pytest.mark.slow
def test_one_mistake_prints_at_most_20_lines_at_80_columns():
    """Every catalogued mistake of lessons 01-03, planted alone in the solved notebook: `course check` output."""
    counts = {}
    for lid, m, result in _planted_outputs():
        out = printed(result, 80)
        counts[f"{lid}/{m.id}"] = out.count("\n")
        assert max(len(l.rstrip()) for l in out.splitlines()) <= 80, out
        failed = [e for e in result.exercises if e.status != "passed"]
        assert failed, f"{lid}/{m.id} passed"
        if failed[0].diagnosis:
            assert "Likely mistake" in out
    print(f"lines at 80 columns over {len(counts)} mistakes: max {max(counts.values())}, "
          f"mean {statistics.mean(counts.values()):.1f}")
    assert max(counts.values()) <= 20, sorted(counts.items(), key=lambda kv: -kv[1])[:5]
