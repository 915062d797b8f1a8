"""The class summary as data: `course grade`'s JSON carries pass rates, diagnoses with the students they apply
to, errors and timeouts; the CSV has one TOTAL row per student. Built on a synthetic class (no grading)."""

from __future__ import annotations

import csv
import json
from collections import Counter

import pytest

from classdata import synthetic_class
from course_cli.classes import batch


@pytest.fixture(scope="module")
def klass():
    return synthetic_class(40)


def test_pass_rates_and_statuses_are_counted_from_the_results(klass):
    info = batch.summary(klass)
    assert info["students"] == 40
    assert info["mean_score"] == round(sum(r.score for r in klass.values()) / 40, 3)
    by = {e["exercise"]: e for e in info["exercises"]}
    assert list(by) == [ex.id for ex in next(iter(klass.values())).exercises]
    for name, e in by.items():
        statuses = Counter(next(x for x in r.exercises if x.id == name).status for r in klass.values())
        assert e["statuses"] == dict(statuses) and e["passed"] == statuses["passed"]
        assert e["pass_rate"] == round(statuses["passed"] / 40, 3)
    assert by["MultiHeadAttention"]["pass_rate"] < min(e["pass_rate"] for n, e in by.items() if n != "MultiHeadAttention")


def test_every_diagnosis_with_its_count_and_students(klass):
    info = batch.summary(klass)
    expected = {}
    for student, r in klass.items():
        for ex in r.exercises:
            if ex.diagnosis:
                expected.setdefault((ex.id, ex.diagnosis), []).append(student)
    got = {(d["exercise"], d["diagnosis"]): d for d in info["diagnoses"]}
    assert set(got) == set(expected) and len(got) >= 8  # every one of them
    for key, who in expected.items():
        assert got[key]["students"] == len(who) and got[key]["who"] == sorted(who)
    counts = [d["students"] for d in info["diagnoses"]]
    assert counts == sorted(counts, reverse=True)


def test_errors_and_timeouts_name_the_student_and_the_kind(klass):
    info = batch.summary(klass)
    want_err = {(s, ex.id) for s, r in klass.items() for ex in r.exercises if ex.status == "error"}
    want_to = {(s, ex.id) for s, r in klass.items() for ex in r.exercises if ex.status == "timeout"}
    assert {(e["student"], e["exercise"]) for e in info["errors"]} == want_err
    assert {(e["student"], e["exercise"]) for e in info["timeouts"]} == want_to and want_to
    broken = list(klass)[-1]  # the synthetic class's unreadable notebook
    kinds = {e["kind"] for e in info["errors"] if e["student"] == broken}
    assert kinds == {"grader"}
    assert {e["kind"] for e in info["errors"] if e["student"] != broken} == {"code"}
    assert all("not valid JSON" in e["reason"] for e in info["errors"] if e["student"] == broken)


def test_csv_has_a_total_row_per_student(klass, tmp_path):
    out = tmp_path / "results.csv"
    batch.write(klass, out)
    rows = list(csv.DictReader(out.open()))
    totals = {r["student"]: r for r in rows if r["exercise"] == batch.TOTAL}
    assert set(totals) == set(klass)
    n_ex = len(next(iter(klass.values())).exercises)
    assert len(rows) == 40 * (n_ex + 1)
    for student, r in klass.items():
        t = totals[student]
        assert float(t["points"]) == r.score == sum(float(x["points"]) for x in rows
                                                     if x["student"] == student and x["exercise"] != batch.TOTAL)
        assert float(t["max_points"]) == r.max_score
        assert t["status"] == ("passed" if r.all_passed else "incomplete")
        assert t["reason"] == f"{sum(e.status == 'passed' for e in r.exercises)} of {n_ex} exercises passed"


def test_json_carries_the_summary_and_reads_back(klass, tmp_path):
    out = tmp_path / "results.json"
    batch.write(klass, out)
    data = json.loads(out.read_text())
    assert list(data)[:2] == ["lesson", "students"] and "summary" in data
    assert data["summary"] == json.loads(json.dumps(batch.summary(klass)))
    lesson, back = batch.load(out)
    assert lesson == "lesson03"
    assert {s: r.to_dict() for s, r in back.items()} == {s: r.to_dict() for s, r in klass.items()}


def test_regrading_one_student_recomputes_the_summary(klass, tmp_path):
    out = tmp_path / "results.json"
    batch.write(klass, out)
    student = next(s for s, r in klass.items() if not r.all_passed and r.exercises[0].checks[0].name != "notebook")
    fixed = synthetic_class(1, hard=None, grader_errors=0, seed=3)
    (one,) = fixed.values()
    for ex in one.exercises:  # every exercise passes now
        ex.status, ex.points, ex.diagnosis = "passed", ex.max_points, None
    batch.write({student: one}, out, update=True)
    data = json.loads(out.read_text())
    merged = {**klass, student: one}
    assert set(data["students"]) == set(klass)
    assert data["summary"] == json.loads(json.dumps(batch.summary(dict(sorted(merged.items())))))
    assert all(student not in d["who"] for d in data["summary"]["diagnoses"])


def test_load_rejects_what_is_not_a_results_file(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"lesson": "lesson01"}')
    with pytest.raises(ValueError, match="is not the JSON"):
        batch.load(bad)
    bad.write_text("{ truncated")
    with pytest.raises(ValueError, match="is not the JSON"):
        batch.load(bad)
