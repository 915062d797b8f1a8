"""Hidden checks disclose nothing but their name and points to students (issue 45, item 3).

A planted softmax is right on every public input and wrong only on one the hidden battery draws (inputs scaled
by 1e-4: it halves its output when every entry is that small). Graded in process, the instructor's result holds
the hidden check's numbers, a diagnosis read off the hidden observations and a figure of the hidden example;
what each student seat shows (the JSON and terminal text of `course check`/the check cell, Gradescope's
results.json, the outputs nbgrader's feedback shows) holds none of them, and says "passes the public checks;
fails 1 hidden check (...)". The sandboxed seats end to end: tests/e2e/test_hidden_disclosure_e2e.py.
"""

from __future__ import annotations

import copy
import io
import json
import re

import nbformat
import pytest

import graders.lesson01_sdpa as g
from graders.engine.checks import hidden_properties
from graders.engine.results import LessonResult, for_students
from graders.registry import find_lesson
from harness import check_in_process, with_code

L01 = find_lesson("lesson01")
HIDDEN = "tiny inputs (scaled by 1e-4)"  # the battery entry the plant fails (graders/engine/checks.py BATTERY)
HIDDEN_MAP = hidden_properties(g.CHECKS)  # what nbgrader and Gradescope pass
HIDDEN_NAMES = {name for _, name in HIDDEN_MAP}
LINE = f"passes the public checks; fails 1 hidden check ({HIDDEN})"  # the words

# Right wherever the public checks look (their inputs are never all below 1e-2), wrong on the hidden battery's
# tiny inputs: a submission that answers differently only under a hidden check.
PLANT = '''def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """Softmax of `x` along `dim`, stable for large magnitudes."""
    shifted = x - x.amax(dim=dim, keepdim=True)
    e = shifted.exp()
    out = e / e.sum(dim=dim, keepdim=True)
    if x.abs().amax() < 1e-2:
        out = out * 0.5
    return out
'''


def planted_notebook(folder):
    return with_code(L01, "softmax", PLANT, folder, name=L01.notebook)


@pytest.fixture(scope="module")
def full(tmp_path_factory) -> LessonResult:
    """The instructor's result of the planted notebook (every check, everything kept)."""
    return check_in_process(L01, planted_notebook(tmp_path_factory.mktemp("plant")), ["softmax"])


def secrets(result: LessonResult) -> list[str]:
    """What the hidden checks gave the instructor's result, that no student may read: the failing hidden
    checks' messages, every number in them (values, indices, sizes), the diagnosis when no public check failed
    (then it can only come from hidden observations), and the hidden figure's data."""
    out = []
    for ex in result.exercises:
        hidden = [c for c in ex.checks if c.name in HIDDEN_NAMES and c.status == "failed"]
        public_failed = [c for c in ex.checks if c.name not in HIDDEN_NAMES and c.status not in ("passed", "skipped")]
        for c in hidden:
            out.append(c.message)
            out += sorted(set(re.findall(r"\d+\.\d+|\(\d+, \d+, \d+\)", c.message)))
            fig = getattr(c, "figure", None)
            if fig:
                out += [json.dumps(fig["student"])[:40], json.dumps(fig["reference"])[:40]]
        if ex.diagnosis and not public_failed:
            out.append(ex.diagnosis)
    return out


def test_the_plant_fails_only_a_hidden_check_and_the_instructor_sees_everything(full):
    """The premise (else the other tests show nothing): only the hidden check fails, and the instructor's copy
    has its message with numbers, a diagnosis derived from it and a figure of the hidden example."""
    (ex,) = full.exercises
    failing = [c for c in ex.checks if c.status not in ("passed", "skipped")]
    assert [c.name for c in failing] == [HIDDEN] and HIDDEN in HIDDEN_NAMES
    assert re.search(r"expected \d\.\d+, got \d\.\d+", failing[0].message)
    assert ex.diagnosis and "0.5" in ex.diagnosis  # the factor, read off the hidden observations
    assert getattr(failing[0], "figure", None)
    assert len(secrets(full)) >= 4


def test_what_a_student_sees_is_the_hidden_checks_names_and_statuses(full):
    shown = for_students(full, HIDDEN_MAP)
    (ex,) = shown.exercises
    line = LINE
    assert ex.diagnosis is None and ex.diagnosis_id is None
    assert full.exercises[0].public_diagnosis == (None, None)  # the public checks alone say nothing: all pass
    assert ex.status == "failed" and ex.points == 0.0 and ex.max_points == full.exercises[0].max_points
    row = next(c for c in ex.checks if c.name == HIDDEN)
    assert row.status == "failed" and row.message == line and row.failure == "" and not hasattr(row, "figure")
    text = json.dumps(shown.to_dict(), ensure_ascii=False)  # `course check --json`
    assert line in text
    assert not [s for s in secrets(full) if s in text]
    assert full.exercises[0].diagnosis and full.exercises[0].checks  # the instructor's copy is unchanged
    assert "expected" in next(c for c in full.exercises[0].checks if c.name == HIDDEN).message


def test_the_terminal_and_the_check_cell_show_none_of_it(full):
    from course_cli.render import exercise_html, exercise_plain, make_console, render_result

    shown = for_students(full, HIDDEN_MAP)
    (ex,) = shown.exercises
    buf = io.StringIO()
    render_result(make_console(file=buf), shown, L01.title, verbose=True, detail=True)
    cell = exercise_html(ex, L01.id) + exercise_plain(ex, L01.id)  # the check cell's HTML and text
    for text in (" ".join(buf.getvalue().split()), cell):
        assert "passes the public checks; fails 1 hidden check" in text
        assert f"{HIDDEN}: passes the public" not in text  # the line names its checks once, not "name: ..."
        assert not [s for s in secrets(full) if s in text]
    assert "<svg" not in cell and "Likely mistake" not in cell


def test_gradescope_results_show_none_of_it(full):
    from course_cli.instructor.gradescope import gradescope_results, hidden_names

    result = LessonResult(L01.id, L01.notebook, list(full.exercises))
    data = gradescope_results(L01, result, hidden_names(L01))
    text = json.dumps(data, ensure_ascii=False)
    assert LINE in text
    assert not [s for s in secrets(full) if s in text]
    assert "Likely mistake" not in text
    by = {t["name"]: t for t in data["tests"]}
    assert by["softmax"]["score"] == 0.0 and by["softmax"]["max_score"] == L01.exercise("softmax").points


def test_a_result_read_back_from_json_is_redacted_by_the_seat_s_names(full):
    """nbgrader and Gradescope name the hidden checks (the lesson's CHECKS) for a result that lost the engine's
    marks: the rule still holds, and a diagnosis the engine did not split is dropped (it may be a hidden one)."""
    from course_cli.classes.journal import result_from_dict
    from course_cli.instructor.gradescope import hidden_names

    back = result_from_dict(json.loads(json.dumps(full.to_dict())))
    assert back.exercises[0].diagnosis and not any(getattr(c, "hidden", "") for c in back.exercises[0].checks)
    shown = for_students(back, hidden_names(L01))
    text = json.dumps(shown.to_dict(), ensure_ascii=False)
    assert shown.exercises[0].diagnosis is None and LINE in text
    assert not [s for s in secrets(full) if s in text]


def test_nbgrader_feedback_shows_none_of_it(full):
    """ApplyCourseVerdict writes the check cell's outputs that the autograded notebook keeps and nbgrader's
    generate_feedback renders: HTML (with the figure when there is one) and text."""
    from course_cli.instructor import nbgrader_course as nc

    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("grade('lesson01', 'softmax')")
    cell.metadata["nbgrader"] = {"grade_id": "test_softmax", "grade": True, "solution": False, "points": 4}
    nb.cells.append(cell)
    resources = {"nbgrader": {"notebook": "lesson01_sdpa", "student": "s1", "assignment": "lesson01"}}
    nc._IN_FLIGHT[nc._key(resources)] = LessonResult(L01.id, L01.notebook, list(full.exercises))
    nb, _ = nc.ApplyCourseVerdict().preprocess(nb, resources)
    text = json.dumps(nb.cells[0].outputs, ensure_ascii=False)
    assert "passes the public checks; fails 1 hidden check" in text
    assert not [s for s in secrets(full) if s in text]
    assert "<svg" not in text and "Likely mistake" not in text
    assert any(o.get("output_type") == "error" for o in nb.cells[0].outputs)  # still 0 points in nbgrader


def test_a_public_failure_keeps_its_public_diagnosis(tmp_path):
    """A mistake the public checks see: the student's diagnosis is the one the public checks alone give, the
    hidden rows keep their names and statuses only."""
    from harness import mistakes_of, with_mistake

    m = next(m for m in mistakes_of(L01) if m.id == "no_scaling")
    full = check_in_process(L01, with_mistake(L01, m, tmp_path), [m.exercise])
    (ex,) = for_students(full, HIDDEN_MAP).exercises
    assert ex.diagnosis and ex.diagnosis == full.exercises[0].public_diagnosis[0]
    for c in ex.checks:
        if c.name in HIDDEN_NAMES and c.status == "failed":
            assert not re.search(r"\d\.\d", c.message) and c.failure == "" and not hasattr(c, "figure")
    assert "passes the public checks" not in json.dumps(for_students(full, HIDDEN_MAP).to_dict())



def test_the_redaction_is_idempotent_and_a_hidden_timeout_reads_as_one(full):
    """A seat may redact a result another seat already redacted; a hidden check that ran out of time says that,
    in the same words whatever its inputs were."""
    from graders.engine.results import HIDDEN_STATUS

    once = for_students(full, HIDDEN_MAP)
    assert for_students(once, HIDDEN_MAP).to_dict() == once.to_dict()
    slow = copy.deepcopy(full)
    (ex,) = slow.exercises
    row = next(c for c in ex.checks if c.name == HIDDEN)
    row.status, row.message, ex.status = "timeout", "ran past 3.0 s on shape (4, 777, 64)", "timeout"
    shown = for_students(slow, HIDDEN_MAP)
    assert next(c for c in shown.exercises[0].checks if c.name == HIDDEN).message == LINE
    public = next(c for c in ex.checks if c.name == "gradients match")
    public.status, public.message = "failed", "gradients differ"
    shown = for_students(slow, HIDDEN_MAP)
    assert next(c for c in shown.exercises[0].checks if c.name == HIDDEN).message == HIDDEN_STATUS["timeout"]
    assert "777" not in json.dumps(shown.to_dict())
