"""`course hint` after a failed check starts from the hint of the cause that check reproduced (issue 44 item 3):
a catalogued mistake's own hint, or a reproduced mutant's operator family's; a fact, or no diagnosis, starts
from the exercise's first hint as before. The id comes from the attempt `course check` recorded."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from course_cli.main import cli
from course_cli.student.progress import ProgressStore
from graders.engine.results import CheckResult, ExerciseResult, LessonResult
from graders.registry import find_lesson

L01 = find_lesson("lesson01")
SDPA = L01.exercise("scaled_dot_product_attention")


@pytest.fixture
def workspace(tmp_path, monkeypatch):
    ws = tmp_path / "ws"
    (ws / ".course").mkdir(parents=True)
    monkeypatch.setenv("COURSE_WORKSPACE", str(ws))
    monkeypatch.setenv("COLUMNS", "80")
    return ws


def _record(ws, ident: str | None, status: str = "failed") -> None:
    check = CheckResult("Tq ≠ Tk and dv ≠ dk", status, message="" if status == "passed" else "output differs")
    ex = ExerciseResult(SDPA.name, status, 0.0 if status != "passed" else 3.0, 3.0, [check],
                        diagnosis="some sentence" if ident else None, diagnosis_id=ident)
    ProgressStore(ws).record(LessonResult("lesson01", "01.ipynb", [ex]))


def _hint() -> str:
    r = CliRunner().invoke(cli, ["hint", "lesson01", SDPA.name], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    return " ".join(r.output.split())  # the words, whatever the wrapping


def _words(text: str) -> str:
    return " ".join(text.replace("`", "").split())


def _catalogued():
    import graders.lesson01_sdpa as module

    return next(m for m in module.MISTAKES if m.id == "divide_by_dk")


def test_a_catalogued_mistake_leads_with_its_own_hint(workspace):
    mistake = _catalogued()
    assert mistake.hint and mistake.hint not in SDPA.hints
    _record(workspace, mistake.id)
    first = _hint()
    assert first.startswith("From your last check's likely mistake: " + _words(mistake.hint))
    assert _words(SDPA.hints[0]) not in first  # the generic first hint waits for the next call
    second = _hint()
    assert second.startswith("From your last check's likely mistake: ")
    assert f"Hint 1/{len(SDPA.hints)}: " + _words(SDPA.hints[0]) in second  # then the usual sequence


def test_a_reproduced_mutant_leads_with_its_operator_familys_hint(workspace):
    from graders.engine.mutations import FAMILY_HINTS

    _record(workspace, "mutation:scale-twice")
    out = _hint()
    assert out.startswith("From your last check's likely mistake: " + _words(FAMILY_HINTS["scale"]))


@pytest.mark.parametrize("ident", ["fact:scale", "structural:transposed", None, "other"])
def test_a_fact_or_no_diagnosis_starts_from_the_first_generic_hint(workspace, ident):
    _record(workspace, ident)
    out = _hint()
    assert out.startswith(f"Hint 1/{len(SDPA.hints)}: " + _words(SDPA.hints[0]))
    assert "likely mistake" not in out


def test_a_passed_exercise_has_no_cause_to_follow(workspace):
    _record(workspace, "mutation:scale-twice")
    _record(workspace, None, status="passed")
    assert _hint().startswith("Hint 1/")


def test_a_catalogued_mistake_with_no_hint_written_falls_back_to_the_exercise_hints(workspace, monkeypatch):
    import dataclasses

    import course_cli.classes.batch as batch

    bare = dataclasses.replace(_catalogued(), hint="")
    monkeypatch.setitem(batch._CATALOGUES, "lesson01", (bare,))
    _record(workspace, bare.id)
    assert _hint().startswith("Hint 1/")


def test_the_attempt_records_the_diagnosis_id_and_old_stores_still_read(workspace):
    _record(workspace, "mutation:axis-changed")
    data = json.loads((workspace / ".course" / "progress.json").read_text())
    entry = data["lessons"]["lesson01"]["attempts"][-1]["exercises"][SDPA.name]
    assert entry == {"status": "failed", "points": 0.0, "diagnosis_id": "mutation:axis-changed"}
    # a store written before ids were recorded: no id, the generic hints
    for attempt in data["lessons"]["lesson01"]["attempts"]:
        for e in attempt["exercises"].values():
            e.pop("diagnosis_id", None)
    (workspace / ".course" / "progress.json").write_text(json.dumps(data))
    assert ProgressStore(workspace).last_diagnosis("lesson01", SDPA.name) is None
    assert _hint().startswith("Hint 1/")


def test_every_operator_family_and_structural_cause_has_a_hint():
    from graders.engine import mutations
    from graders.engine.kinds import CAUSES, HINTS_BY_KIND, hint_for, is_cause
    from graders.engine.mutations import FAMILY_HINTS

    families = {f for op in mutations.OPERATORS for f in getattr(op, "families", [op.__name__.removeprefix("op_")])}
    assert families == set(FAMILY_HINTS)
    for family in families:
        assert is_cause(f"mutation:{family}-x") and hint_for(f"mutation:{family}-x") == FAMILY_HINTS[family]
    for ident in CAUSES:
        assert hint_for(ident), ident
    assert set(HINTS_BY_KIND) >= {f"mutation:{f}" for f in families}


def test_the_student_distribution_keeps_each_mistakes_hint():
    import ast
    import importlib

    from course_cli.sandboxed.child_build import strip_grader

    module = importlib.import_module(L01.module)
    text = strip_grader(open(module.__file__).read(), module.MISTAKES)
    calls = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "Mistake"]
    shipped = {c.args[1].value: next((k.value.value for k in c.keywords if k.arg == "hint"), "") for c in calls}
    assert shipped == {m.id: m.hint for m in module.MISTAKES} and all(shipped.values())
