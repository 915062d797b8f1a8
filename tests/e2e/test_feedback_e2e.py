"""test_feedback, end to end: the tests of tests/unit/test_feedback.py that start a child (the slow tier)."""

from __future__ import annotations

import io
import statistics
import pytest
from rich.console import Console
from course_cli import render
from graders.registry import find_lesson
from graders.engine.results import CheckResult, ExerciseResult, LessonResult
from test_feedback import _cli, _planted_mask_leak, _sdpa_with, lesson01, printed  # noqa: F401 (helpers and fixtures shared with the fast tests)


@pytest.mark.slow
def test_one_mistake_prints_at_most_20_lines_at_80_columns(sandbox_matrix):
    """Every catalogued mistake of lessons 01-03, planted alone in the solved notebook: `course check` output
    (every exercise graded; the session's warm gradings of them, tests/harness.py SandboxMatrix.whole)."""
    from harness import mistakes_of

    counts = {}
    planted = [(lid, m) for lid in ("lesson01", "lesson02", "lesson03") for m in mistakes_of(find_lesson(lid))]
    for lid, m in planted:
        result = sandbox_matrix.whole(find_lesson(lid), m)
        out = printed(result, 80)
        counts[f"{lid}/{m.id}"] = out.count("\n")
        assert max(len(l.rstrip()) for l in out.splitlines()) <= 80, out
        failed = [e for e in result.exercises if e.status != "passed"]
        assert failed, f"{lid}/{m.id} passed"
        if failed[0].diagnosis:  # under its label: a cause as the likely mistake, a fact as what the numbers show
            assert render.diagnosis_label(failed[0].diagnosis_id, failed[0].diagnosis).strip() in out
    print(f"lines at 80 columns over {len(counts)} mistakes: max {max(counts.values())}, "
          f"mean {statistics.mean(counts.values()):.1f}")
    assert max(counts.values()) <= 20, sorted(counts.items(), key=lambda kv: -kv[1])[:5]


@pytest.mark.slow
def test_end_to_end_swapped_outputs_are_named_not_k_T(tmp_path):
    ex = _sdpa_with("return weights, weights @ v", tmp_path)
    assert ex.status != "passed"
    assert "wrong order" in ex.diagnosis and "k.T" not in ex.diagnosis


@pytest.mark.slow
def test_end_to_end_weights_times_k_is_not_told_k_T(tmp_path):
    ex = _sdpa_with("return weights @ k, weights", tmp_path)
    assert ex.status != "passed" and "k.T" not in (ex.diagnosis or "")
    assert "has shape" in render.check_message(render.first_failure(ex))  # the plain shape message comes first


@pytest.mark.slow
def test_end_to_end_all_zeros_and_a_constant_factor(tmp_path):
    zeros = _sdpa_with("return torch.zeros(*q.shape[:-1], v.shape[-1]), weights", tmp_path / "z")
    assert "all zeros" in zeros.diagnosis and "k.T" not in zeros.diagnosis
    doubled = _sdpa_with("return 2 * (weights @ v), weights", tmp_path / "d")
    # no catalogued edit reproduces `2 * (weights @ v)`: a fact the numbers show, never a cause
    assert doubled.diagnosis_id == "fact:scale" and "2× the reference's on every failing input" in doubled.diagnosis


def test_init_writes_a_student_jupyter_config_without_nbgrader_instructor_ui(tmp_path, monkeypatch):
    import json

    from click.testing import CliRunner

    from course_cli.main import cli
    from course_cli.student.workspace_ops import init

    init(tmp_path / "ws")
    lab = json.loads((tmp_path / "ws" / ".jupyter" / "labconfig" / "page_config.json").read_text())
    assert lab["disabledExtensions"]["@jupyter/nbgrader"] is True
    server = json.loads((tmp_path / "ws" / ".jupyter" / "jupyter_server_config.d" / "attention-course.json").read_text())
    assert server["ServerApp"]["jpserver_extensions"]["nbgrader.server_extensions.formgrader"] is False
    monkeypatch.setenv("COURSE_WORKSPACE", str(tmp_path / "ws"))
    r = CliRunner().invoke(cli, ["lab", "lesson01", "--print-command"])
    assert r.exit_code == 0 and f"JUPYTER_CONFIG_DIR={tmp_path / 'ws' / '.jupyter'}" in r.output
    assert "JUPYTER_PREFER_ENV_PATH=0" in r.output  # else the environment's nbgrader config wins
    assert "lesson01_sdpa.ipynb" in r.output


def test_did_you_mean_for_a_misspelt_lesson_or_exercise():
    r = _cli("check", "mask")
    assert r.exit_code == 2 and "did you mean 'masks'?" in r.output
    r = _cli("check", "lesson01", "sofmax")
    assert r.exit_code == 2 and "did you mean 'softmax'?" in r.output and "Traceback" not in r.output
    r = _cli("hint", "lesson03", "merge_head")
    assert r.exit_code == 2 and "did you mean 'merge_heads'?" in r.output


def test_a_missing_notebook_file_is_a_usage_error(tmp_path):
    r = _cli("check", "lesson01", "--notebook", str(tmp_path / "nowhere.ipynb"))
    assert r.exit_code == 2 and "does not exist" in r.output


def test_list_never_truncates_a_name_the_student_types(monkeypatch):
    import re

    from graders.registry import LESSONS

    monkeypatch.setenv("COLUMNS", "50")
    out = _cli("list").output
    words = set(re.findall(r"[A-Za-z_0-9]+", out))
    for lesson in LESSONS:
        assert lesson.id in words and lesson.slug in words
        for e in lesson.exercises:
            assert e.name in words, e.name
    assert "…" not in out


def test_status_labels_the_best_and_the_last_attempt(tmp_path, monkeypatch):
    import json

    from course_cli.student.progress import ProgressStore

    ws = tmp_path / "ws"
    (ws / ".course").mkdir(parents=True)
    monkeypatch.setenv("COURSE_WORKSPACE", str(ws))
    store = ProgressStore(ws)
    good = LessonResult("lesson01", "nb", [ExerciseResult("softmax", "passed", 4, 4),
                                           ExerciseResult("scaled_dot_product_attention", "passed", 6, 6)])
    worse = LessonResult("lesson01", "nb", [ExerciseResult("softmax", "failed", 0, 4)])
    store.record(good)
    store.record(worse)  # the last attempt broke softmax; the best is kept
    row = json.loads(_cli("status", "--json").output)["lessons"][0]
    assert row["best_points"] == 10 and row["last_points"] == 6 and row["attempts"] == 2
    monkeypatch.setenv("COLUMNS", "100")
    out = _cli("status").output
    assert "best" in out and "last" in out and "10/10" in out and "6/10" in out


def test_outside_a_workspace_commands_say_which_workspace_they_use(tmp_path, monkeypatch):
    monkeypatch.delenv("COURSE_WORKSPACE", raising=False)
    monkeypatch.chdir(tmp_path)
    r = _cli("status")
    assert r.exit_code == 0 and "no workspace here" in r.output and "course init" in r.output
    r = _cli("lab")
    assert r.exit_code == 2 and "course init" in r.output
    (tmp_path / ".course").mkdir()
    assert "no workspace here" not in _cli("status").output


def test_file_commands_do_not_import_torch(tmp_path):
    import subprocess
    import sys

    from course_cli.student.workspace_ops import init
    from graders.registry import ROOT

    init(tmp_path / "ws")
    script = ("import sys\nfrom course_cli.main import cli\n"
              "for args in (['reset', 'lesson01', 'softmax'], ['list'], ['status'], ['hint', 'lesson01', 'softmax'],"
              " ['init', '.']):\n"
              "    try:\n        cli(args, standalone_mode=False)\n    except SystemExit:\n        pass\n"
              "heavy = [m for m in ('torch', 'nbgrader', 'matplotlib') if m in sys.modules]\n"
              "print('HEAVY', heavy)\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path / "ws", capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                              "COURSE_INIT_REFERENCES": "0"},  # `init` builds no references (that needs torch)
                         timeout=120)
    assert "HEAVY []" in out.stdout, out.stdout + out.stderr
    assert "Restored `softmax`" in out.stdout


def test_watch_with_an_exercise_grades_and_reports_only_that_one(tmp_path, monkeypatch):
    import course_cli.sandboxed.grading as grading
    from course_cli.student import watch

    seen = []

    def fake(lesson, path, exercises=None, **kw):
        seen.append(exercises)
        raise KeyboardInterrupt  # one round, then Ctrl-C

    monkeypatch.setattr(grading, "grade_notebook", fake)
    nb = tmp_path / "lesson01_sdpa.ipynb"
    nb.write_text("{}")
    watch.watch(find_lesson("lesson01"), nb, tmp_path, ["softmax"], interval=0.01, debounce=0.01)
    assert seen == [["softmax"]]
    r = _cli("watch", "lesson01", "sofmax", "--notebook", str(nb))
    assert r.exit_code == 2 and "did you mean 'softmax'?" in r.output


@pytest.mark.slow
def test_lesson02_window_below_one_is_graded_as_its_text_says(tmp_path):
    from harness import grade_one, with_code

    from graders.engine import solved_cell

    lesson = find_lesson("lesson02")
    src = solved_cell("lesson02", "sliding_window_mask")
    guard = [l for l in src.splitlines(keepends=True) if "window < 1" in l or "raise ValueError" in l]
    assert len(guard) == 2
    path = with_code(lesson, "sliding_window_mask", "".join(l for l in src.splitlines(keepends=True)
                                                            if l not in guard), tmp_path)
    ex = grade_one(lesson, path, "sliding_window_mask")
    assert ex.status == "failed"
    assert any(c.name == "a window below 1 raises ValueError" and c.status == "failed" and
               "raised nothing" in c.message for c in ex.checks)
    assert grade_one(lesson, lesson.solution_path, "sliding_window_mask").status == "passed"


def test_nbgrader_verdict_carries_the_report_and_its_figure_and_scores_zero():
    from course_cli.instructor.nbgrader_course import verdict_outputs
    from graders.engine.diagnosis import attach_figure

    checks, s, r = _planted_mask_leak()
    results = [CheckResult("boolean mask", "failed", message="weights differ")]
    attach_figure(checks, s, r, results)
    ex = ExerciseResult("scaled_dot_product_attention", "failed", 0, 6, results, "the mask is applied after")
    shown, error = verdict_outputs(ex, "lesson01")
    assert "<svg" in shown["data"]["text/html"] and "Likely mistake" in shown["data"]["text/html"]
    assert error["output_type"] == "error"  # nbgrader gives the cell 0 points
    ok = ExerciseResult("to_additive", "passed", 1, 1, [CheckResult("x", "passed")])
    (only,) = verdict_outputs(ok, "lesson02")
    assert "(1/1 point)" in only["data"]["text/plain"]
