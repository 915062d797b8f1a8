"""`course report` as an instructor's page: who needs help, with which misconception.

The page is parsed back and checked against the results JSON it was made from, with the page's rules restated
here from the JSON alone: every student's row and verdicts, every misconception's count (by its stable id:
the catalogued mistake's, or the structural kind, never the sentence), every cascade counted under the exercise
that caused it (registry `depends`), NOT GRADED and not-submitted counted apart, who needs help in order, and
the flagged exercise. Classes: the synthetic lesson 03 and lesson 01 classes of tests/classdata.py, made
`realistic` (cascades, structural diagnoses with each student's own numbers). The kinds are checked on the
real diagnosis rules, and a real graded mistake carries its catalogue id. The browser test (slow) renders the
page in headless Chromium, sorts a column, and finds no console error.
"""

from __future__ import annotations

import json
import statistics
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from classdata import synthetic_class
from course_cli.classes import batch
from course_cli.instructor.report import HELP_BELOW, MIN_FLAGGED, OUTLIER_GAP
from course_cli.main import cli
from graders.engine.kinds import CAUSES
from graders.registry import find_lesson



# ----------------------------------------------------------------------------------------------
# The page's rules, restated from the JSON


def expected(data: dict) -> dict:
    """What the page must show, computed from `course grade`'s JSON alone."""
    lesson = find_lesson(data["lesson"])
    deps = {e.name: e.depends for e in lesson.exercises}
    out = {"graded": 0, "not_graded": [], "not_submitted": [], "own_failures": Counter(), "cascaded": Counter(),
           "groups": {}, "cascade": {}, "students": {}, "scores": {}}
    for name, s in data["students"].items():
        exs = s["exercises"]
        if exs[0]["checks"][0]["name"] == "submission":
            cat = "not submitted"
            out["not_submitted"].append(name)
        elif any(e["status"] in ("error", "timeout") and e["checks"] and e["checks"][0]["name"] == "notebook"
                 for e in exs):
            cat = "NOT GRADED"
            out["not_graded"].append(name)
        else:
            cat = "graded"
            out["graded"] += 1
            out["scores"][name] = s["score"]
        cells = {}
        bad = {e["id"] for e in exs if e["status"] not in ("passed", "skipped")}
        for e in exs:
            cell = {"status": e["status"], "misconception": "", "cause": ""}
            if cat == "graded" and e["id"] in bad:
                cause = [d for d in deps[e["id"]] if d in bad] if e["status"] != "not_implemented" else []
                if cause:
                    cell["cause"] = ",".join(cause)
                    out["cascaded"][e["id"]] += 1
                else:
                    out["own_failures"][e["id"]] += 1
                    if e["status"] == "failed":
                        ident = e.get("diagnosis_id") or ("other" if e["diagnosis"] else "undiagnosed")
                        cell["misconception"] = ident
                        out["groups"].setdefault((e["id"], ident), []).append(name)
            cells[e["id"]] = cell
        out["students"][name] = {"category": cat, "score": s["score"] if cat == "graded" else None,
                                 "cells": cells}
    for (ex, ident), who in out["groups"].items():
        casc = Counter()
        for name in who:
            for e, cell in out["students"][name]["cells"].items():
                if ex in cell["cause"].split(","):
                    casc[e] += 1
        out["cascade"][ex, ident] = dict(casc)
    max_score = max(s["max_score"] for s in data["students"].values())
    order = list(data["students"])
    out["needs_help"] = sorted((n for n, sc in out["scores"].items() if sc < HELP_BELOW * max_score),
                               key=lambda n: (out["scores"][n], order.index(n)))
    rate = {e.name: out["own_failures"][e.name] / out["graded"] for e in lesson.exercises}
    out["flagged"] = {k for k, f in rate.items()
                      if f - statistics.mean(x for j, x in rate.items() if j != k) >= OUTLIER_GAP - 1e-9
                      and out["own_failures"][k] >= MIN_FLAGGED}
    return out


class Page(HTMLParser):
    """The page's data-attributes: by the id of the list or table they sit in; the students table's rows with
    their exercise cells."""

    def __init__(self):
        super().__init__()
        self.stack, self.by, self.ids, self.students, self._row = [], {}, {}, [], None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        data = {k[5:]: v for k, v in a.items() if k.startswith("data-")}
        owner = next((i for i in reversed(self.stack) if i), None)
        if tag not in ("br", "meta", "link", "img", "input", "hr"):
            self.stack.append(a.get("id"))
        if a.get("id"):
            self.ids[a["id"]] = data
        elif data and owner == "students" and tag == "tr":
            self._row = {**data, "cells": {}}
            self.students.append(self._row)
        elif data and owner == "students" and tag == "td" and "exercise" in data:
            self._row["cells"][data["exercise"]] = data
        elif data and tag in ("tr", "li"):
            self.by.setdefault(owner, []).append(data)

    def handle_endtag(self, tag):
        if self.stack:
            self.stack.pop()


def make(tmp: Path, klass: dict, *args: str) -> dict:
    results = tmp / "results.json"
    batch.write(klass, results)
    out = tmp / "report.html"
    r = CliRunner().invoke(cli, ["report", str(results), "--out", str(out), *args], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    page = Page()
    page.feed(out.read_text())
    return {"json": json.loads(results.read_text()), "page": page, "html": out.read_text(), "out": out,
            "output": r.output, "results": results}


CLASSES = {
    "lesson03": dict(n=40, lesson_id="lesson03", hard="MultiHeadAttention", realistic=True, not_submitted=2),
    # the class: the hardest exercise about 20 points above the rest (own failures: 23 here)
    "lesson03-20pts": dict(n=60, lesson_id="lesson03", hard="MultiHeadAttention", realistic=True, seed=6,
                           p_hard=0.42, p_other=0.12),
    "lesson01": dict(n=40, lesson_id="lesson01", hard="scaled_dot_product_attention", realistic=True,
                     not_submitted=1, seed=2),
}


@pytest.fixture(scope="module", params=list(CLASSES))
def made(request, tmp_path_factory):
    return make(tmp_path_factory.mktemp(request.param), synthetic_class(**CLASSES[request.param]))


# ----------------------------------------------------------------------------------------------
# The page against the JSON


def test_every_student_is_a_row_with_their_verdicts(made):
    want = expected(made["json"])
    rows = {r["student"]: r for r in made["page"].students}
    assert sorted(rows) == sorted(made["json"]["students"]) and len(made["page"].students) == len(rows)
    for name, w in want["students"].items():
        r = rows[name]
        assert r["category"] == w["category"], name
        assert r["score"] == ("" if w["score"] is None else f'{w["score"]:g}'), name
        if w["category"] != "graded":  # why, once, across the exercises' columns: no verdict per exercise
            assert r["cells"] == {}, name
            continue
        assert list(r["cells"]) == list(w["cells"])
        for ex, cell in w["cells"].items():
            got = r["cells"][ex]
            assert (got["status"], got["misconception"], got["cause"]) == \
                (cell["status"], cell["misconception"], cell["cause"]), (name, ex)
    # the default order: lowest score first (not submitted, then NOT GRADED, before every graded one)
    key = [(-2 if r["category"] == "not submitted" else -1) if r["score"] == "" else float(r["score"])
           for r in made["page"].students]
    assert key == sorted(key)


def test_not_graded_and_not_submitted_are_counted_apart(made):
    want = expected(made["json"])
    ov = made["page"].ids["overview"]
    assert int(ov["students"]) == len(made["json"]["students"])
    assert int(ov["graded"]) == want["graded"]
    assert int(ov["not-graded"]) == len(want["not_graded"]) and int(ov["not-submitted"]) == len(want["not_submitted"])
    assert [u["student"] for u in made["page"].by.get("not-graded", [])] == want["not_graded"]
    assert [u["student"] for u in made["page"].by.get("not-submitted", [])] == want["not_submitted"]
    assert float(ov["mean-score"]) == round(statistics.mean(want["scores"].values()), 3)
    for r in made["page"].by["pass-rates"]:
        assert int(r["students"]) == want["graded"]
        assert int(r["own-failures"]) == want["own_failures"][r["exercise"]]
        assert int(r["cascaded"]) == want["cascaded"][r["exercise"]]


def test_misconceptions_are_counted_by_id_with_their_cascades(made):
    want = expected(made["json"])
    rows = made["page"].by["misconceptions"]
    got = {(r["exercise"], r["misconception"]): r for r in rows}
    assert len(got) == len(rows) and set(got) == set(want["groups"])
    for key, who in want["groups"].items():
        assert int(got[key]["count"]) == len(who), key
        assert json.loads(got[key]["cascade"]) == want["cascade"][key], key
    order = [(r["fact"] == "1", -int(r["count"])) for r in rows]  # causes by count, then facts by count
    assert order == sorted(order)
    facts = {k for k in got if k[1].startswith("fact:") or k[1].startswith("structural:")
             and k[1] not in CAUSES}
    assert all(got[k]["fact"] == "1" for k in facts)  # a fact is never counted as a misconception
    # never split by the sentence: the structural NaN diagnoses, each with its own numbers, add up to one row
    texts = {e["diagnosis"] for s in made["json"]["students"].values() for e in s["exercises"]
             if e.get("diagnosis_id") == "structural:nan-rows"}
    assert len(texts) > 3
    assert sum(k[1] == "structural:nan-rows" for k in got) == len({k[0] for k in got if k[1] == "structural:nan-rows"})


def test_facts_are_grouped_after_the_causes_and_labelled_as_facts():
    from course_cli.instructor.report import report_data
    from graders.engine.results import CheckResult, ExerciseResult, LessonResult

    def student(ident: str, text: str) -> LessonResult:
        ok = ExerciseResult("softmax", "passed", 2.0, 2.0, [CheckResult("c", "passed")])
        bad = ExerciseResult("scaled_dot_product_attention", "failed", 0.0, 6.0,
                             [CheckResult("Tq ≠ Tk and dv ≠ dk", "failed", message="output differs")], text, ident)
        return LessonResult("lesson01", "lesson01_sdpa.ipynb", [ok, bad])

    fact = ("fact:scale", "`output` (all its values) are 2× the reference's on every failing input")
    results = {f"s{i}": student(*fact) for i in range(3)}
    results["t"] = student("divide_by_dk", "the scores are divided by dk instead of √dk")
    rows = report_data("lesson01", results)["misconceptions"]
    assert [(r["misconception"], r["fact"], r["label"]) for r in rows] == [
        ("divide_by_dk", False, "divide_by_dk"), ("fact:scale", True, "fact: scale")]  # 1 cause before 3 facts


def test_who_needs_help_first_lowest_scores_in_order(made):
    want = expected(made["json"])
    got = made["page"].by["needs-help"]
    assert [r["student"] for r in got] == want["needs_help"] and want["needs_help"]
    assert [float(r["score"]) for r in got] == sorted(float(r["score"]) for r in got)
    html = made["html"]
    assert html.index('id="needs-help"') < html.index('id="misconceptions"') < html.index('id="students"')
    assert f"below {HELP_BELOW * 100:.0f}% of the lesson's points" in html
    for r in got:  # what to look at first: the student's first exercise that failed on its own
        cells = next(p for p in made["page"].students if p["student"] == r["student"])["cells"]
        own = [e for e, c in cells.items() if c["status"] not in ("passed", "skipped") and not c["cause"]]
        assert r["first"] == own[0] and r["first-what"], r


def test_the_clearly_hardest_exercise_is_flagged_by_the_stated_rule(made):
    want = expected(made["json"])
    hard = next(c for c in CLASSES.values() if c["lesson_id"] == made["json"]["lesson"] and
                c["n"] == len(made["json"]["students"]))["hard"]
    assert {r["exercise"] for r in made["page"].by.get("outliers", [])} == want["flagged"] == {hard}
    assert f"at least {OUTLIER_GAP * 100:.0f} percentage points above" in made["html"]
    assert hard in made["output"]


def test_catalogued_mistakes_are_named_on_the_page(made):
    names = {m.id for m in __import__(find_lesson(made["json"]["lesson"]).module, fromlist=["MISTAKES"]).MISTAKES}
    shown = {r["misconception"] for r in made["page"].by["misconceptions"]}
    assert shown & names  # the page names the catalogue's mistakes, by their ids
    assert "structural:nan-rows" in shown


def test_anonymous_page_names_no_student(tmp_path):
    klass = synthetic_class(**CLASSES["lesson03"])
    m = make(tmp_path, klass, "--anonymous")
    assert not any(name in m["html"] for name in klass)
    assert {r["student"] for r in m["page"].students} == {f"student {i + 1}" for i in range(40)}


def test_results_written_before_ids_get_them_from_the_catalogue(tmp_path):
    """A results file without `diagnosis_id` (written before it existed): the ids are recovered."""
    klass = synthetic_class(**CLASSES["lesson03"])
    path = tmp_path / "old.json"
    batch.write(klass, path)
    data = json.loads(path.read_text())
    for s in data["students"].values():
        for e in s["exercises"]:
            e.pop("diagnosis_id")
    path.write_text(json.dumps(data))
    _, back = batch.load(path)
    for student, res in klass.items():
        assert [e.diagnosis_id for e in back[student].exercises] == [e.diagnosis_id for e in res.exercises]


# ----------------------------------------------------------------------------------------------
# The ids, on the real diagnosis rules


def test_structural_kinds_of_the_real_rules():
    import torch

    from graders.engine.diagnosis import explain
    from graders.engine.kinds import diagnosis_id

    torch.manual_seed(0)
    e = torch.randn(2, 3, 4, 4)
    nan3, nan5 = e.clone(), e.clone()
    nan3[0, 0, :3] = float("nan")
    nan5[1, 2, :] = float("nan")
    mask = torch.ones(2, 3, 4, 4, dtype=torch.bool)
    mask[0, 0, :3] = False  # the probe's mask: rows with nothing to attend to, where nan3 and nan5 have NaN
    mask[1, 2, :] = False
    cases = {
        "structural:nan-rows": [nan3, nan5],
        "structural:transposed": [e.transpose(-2, -1)],
        "structural:all-zeros": [torch.zeros_like(e)],
        "structural:wrong-dtype": [e.double()],
    }
    for want, tensors in cases.items():
        texts = [explain(a, e, r={"mask": mask}) for a in tensors]
        assert all(texts), want
        assert {diagnosis_id(t) for t in texts} == {want}, texts
    assert len({explain(nan3, e, r={"mask": mask}), explain(nan5, e, r={"mask": mask})}) == 2  # two sentences, one id
    assert diagnosis_id(explain(nan3, e)) == "structural:nan"  # no mask observed: the NaN is a fact, not a cause
    # the factor and the shift, said across every failing check (a fact family of their own)
    from graders.engine import CPU, Check
    from graders.engine.diagnosis import explain_exercise
    from graders.engine.results import CheckResult

    checks, results = [Check("x", "a", None, None, CPU)], [CheckResult("a", "failed", message="differs")]
    for want, tensors in {"fact:scale": [e * 8, e / 3], "fact:shift": [e + 0.5]}.items():
        texts = [explain_exercise(checks, {"a @ cpu/float32": {"out": a}}, {"a @ cpu/float32": {"out": e}}, results)
                 for a in tensors]
        assert {diagnosis_id(t) for t in texts} == {want}, texts
    # an earlier version's sentences keep their ids (results files written before the rewording)
    assert diagnosis_id("`output` is the reference times a constant factor, 8: a scale is applied twice, or "
                        "missing, or wrong") == "structural:scale"
    mask = torch.rand(4, 4) > 0.5
    assert diagnosis_id(explain(~mask, mask)) == "structural:mask-inverted"
    assert diagnosis_id("something no rule says") == "other" and diagnosis_id(None) is None


def test_a_graded_catalogued_mistake_carries_its_id(tmp_path):
    from harness import check_in_process, mistakes_of, with_mistake

    lesson = find_lesson("lesson01")
    mistake = next(m for m in mistakes_of(lesson) if m.id == "no_scaling")
    res = check_in_process(lesson, with_mistake(lesson, mistake, tmp_path), [mistake.exercise])
    (ex,) = res.exercises
    assert ex.status == "failed" and ex.diagnosis == mistake.message and ex.diagnosis_id == "no_scaling"
    assert ex.to_dict()["diagnosis_id"] == "no_scaling" and list(ex.to_dict())[-1] == "diagnosis_id"


# ----------------------------------------------------------------------------------------------
# In the browser


def test_the_class_summary_counts_misconceptions_by_id():
    """`course grade`'s summary (its JSON and its terminal table): one row per exercise and id, however many
    different sentences the students' structural diagnoses were."""
    klass = synthetic_class(**CLASSES["lesson03"])
    info = batch.summary(klass)
    want = Counter((ex.id, ex.diagnosis_id) for r in klass.values() for ex in r.exercises if ex.diagnosis)
    got = {(m["exercise"], m["id"]): m for m in info["misconceptions"]}
    assert {k: m["students"] for k, m in got.items()} == dict(want)
    nan = [k for k in got if k[1] == "structural:nan-rows"]
    texts = {(ex.id, ex.diagnosis) for r in klass.values() for ex in r.exercises
             if ex.diagnosis_id == "structural:nan-rows"}
    assert nan and len(texts) > len(nan)  # many sentences, one row per exercise
    assert [m["students"] for m in info["misconceptions"]] == sorted((m["students"] for m in info["misconceptions"]),
                                                                      reverse=True)


def test_a_hostile_student_name_stays_inside_the_data_block(tmp_path):
    """A student folder named `<!--<script>` (issue 45): escaped for the HTML script context, the data block
    still parses as the class's data, and the page's own sort script and footer are still elements of the page
    (before, `<!--<script>` in the JSON made the parser swallow them)."""
    klass = synthetic_class(**CLASSES["lesson01"])
    hostile = "<!--<script>x</script><script>alert(1)//\u2028&amp;"
    klass[hostile] = klass.pop(next(iter(klass)))
    m = make(tmp_path, klass)

    class Scripts(HTMLParser):
        def __init__(self):
            super().__init__()
            self.scripts, self._in = [], None

        def handle_starttag(self, tag, attrs):
            if tag == "script":
                self._in = dict(attrs)
                self.scripts.append([dict(attrs), ""])

        def handle_data(self, data):
            if self._in is not None:
                self.scripts[-1][1] += data

        def handle_endtag(self, tag):
            if tag == "script":
                self._in = None

    p = Scripts()
    p.feed(m["html"])
    assert len(p.scripts) == 2, [a for a, _ in p.scripts]  # the data block and the sort script, nothing more
    (attrs, blob), (_, sort) = p.scripts
    assert attrs.get("id") == "report-data" and not any(c in blob for c in "<>&\u2028\u2029")
    assert hostile in json.dumps(json.loads(blob), ensure_ascii=False)
    assert "querySelectorAll" in sort and "Written by" in m["html"].split(sort, 1)[1]
