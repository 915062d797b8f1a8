"""Issue 45 item 6: every submission gets a row in `course grade`, whatever its metadata holds. Solved notebooks
(each would score full marks) with one cell's `metadata.course` a string, a list or null, or its `metadata` (or
the notebook's) a string, are NOT GRADED with the reason in the CSV and the JSON, beside an honest one graded
as usual. Graded once to JSON (journalled), then to CSV by resuming that journal: nothing is graded twice."""

from __future__ import annotations

import csv
import json

import pytest
from click.testing import CliRunner

from course_cli.main import cli
from graders.registry import find_lesson

L01 = find_lesson("lesson01")
SOLVED = json.loads(L01.solution_path.read_text(encoding="utf-8"))
CODE = next(i for i, c in enumerate(SOLVED["cells"]) if c["cell_type"] == "code")  # the first code cell


def _with(change, cell=True):
    nb = json.loads(json.dumps(SOLVED))
    change(nb["cells"][CODE] if cell else nb)
    return nb


WHY = f"cell {CODE + 1} has malformed metadata.course (not a JSON object)"
MALFORMED = {  # student: (the notebook, what its row's reason says)
    "course_string": (_with(lambda c: c["metadata"].__setitem__("course", "demo")), WHY),
    "course_list": (_with(lambda c: c["metadata"].__setitem__("course", ["role", "demo"])), WHY),
    "course_null": (_with(lambda c: c["metadata"].__setitem__("course", None)), WHY),
    "metadata_string": (_with(lambda c: c.__setitem__("metadata", "role: demo")),
                        f"cell {CODE + 1} has malformed metadata (not a JSON object)"),
    "notebook_metadata_string": (_with(lambda nb: nb.__setitem__("metadata", "x"), cell=False),
                                 "the notebook's metadata is malformed (not a JSON object)"),
}


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("malformed")
    subs = tmp / "subs"
    subs.mkdir()
    (subs / "honest.ipynb").write_text(json.dumps(SOLVED), encoding="utf-8")
    for student, (nb, _) in MALFORMED.items():
        (subs / f"{student}.ipynb").write_text(json.dumps(nb), encoding="utf-8")
    journal = tmp / "class.journal"
    base = ["grade", str(subs), "--lesson", L01.id, "--jobs", "1", "--journal", str(journal)]
    first = CliRunner().invoke(cli, [*base, "--out", str(tmp / "results.json")])
    again = CliRunner().invoke(cli, [*base, "--resume", "--out", str(tmp / "results.csv")])
    return tmp, first, again


@pytest.mark.slow
def test_each_malformed_notebook_is_a_not_graded_row_with_its_reason(graded):
    tmp, first, again = graded
    for r in (first, again):
        assert r.exception is None or isinstance(r.exception, SystemExit), r.output
        assert "Traceback" not in r.output
    assert "6 results kept" in again.output  # every row from the journal: nothing graded twice
    students = json.loads((tmp / "results.json").read_text())["students"]
    rows = {(r["student"], r["exercise"]): r for r in csv.DictReader((tmp / "results.csv").open(encoding="utf-8"))}
    assert set(students) == {"honest", *MALFORMED} == {s for s, _ in rows}
    for student, (_, cell) in MALFORMED.items():
        assert cell in students[student]["not_graded"], students[student]
        assert students[student]["score"] is None  # no score: never a 0 that reads as graded
        row = rows[(student, "TOTAL")]
        assert row["status"] == "NOT GRADED" and cell in row["reason"] and row["points"] == ""
        assert [e for s, e in rows if s == student] == ["TOTAL"]  # one row, no per-exercise zeros
    honest = students["honest"]
    assert not honest.get("not_graded") and honest["score"] == honest["max_score"] == L01.max_score
    assert rows[("honest", "TOTAL")]["status"] == "passed"
    assert float(rows[("honest", "TOTAL")]["points"]) == L01.max_score
    summary = json.loads((tmp / "results.json").read_text())["summary"]
    assert summary["students"] == 1 and sorted(x["student"] for x in summary["not_graded"]) == sorted(MALFORMED)
