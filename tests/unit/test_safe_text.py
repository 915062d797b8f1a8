"""Untrusted text at every sink (issue 30, item 5): a corpus of hostile strings through course_cli.safe_text's
function for each sink, and through the sinks themselves (the journal, the batch's CSV and JSON, the terminal
rendering of `course check`, the instructor's HTML report, nbgrader's grading notes). The slow test at the end
grades a class in which one submission's error message holds a lone surrogate: the batch completes and every
results file is written, for everyone."""

from __future__ import annotations

import csv
import io
import json

import pytest

from course_cli import safe_text
from graders.engine.results import CheckResult, ExerciseResult, LessonResult

CORPUS = ["\udcff", "a\ud800b", "\x1b[2J\x1b[H", "\x9b31m", "\x07\x08\r\x00", "<img src=x onerror=alert(1)>",
          "=HYPERLINK(\"http://x\",\"y\")", "+1+1", "-2+3", "@SUM(A1)", "\t=1", "\u202eevil", "\u2066x\u2069", "a\u2028b\u2029c", "\ufffe",
          "x" * 200_000, "[bold red]markup[/]", "ok text"]


def _bad_terminal(s: str) -> bool:
    return any((ord(c) < 32 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f or 0xd800 <= ord(c) <= 0xdfff
               or c in safe_text._BIDI or c in "\u2028\u2029" for c in s)


@pytest.mark.parametrize("s", CORPUS, ids=range(len(CORPUS)))
def test_each_sink_function(s):
    t = safe_text.for_terminal(s)
    assert not _bad_terminal(t) and len(t) < safe_text.LIMIT + 100
    j = safe_text.for_json(s)
    j.encode("utf-8")  # never raises
    assert json.loads(json.dumps(j, ensure_ascii=False)) == j and len(j) < safe_text.LIMIT + 100
    h = safe_text.for_html(s)
    h.encode("utf-8")
    assert "<" not in h and ">" not in h and '"' not in h and "\x1b" not in h
    m = safe_text.for_markdown(s)
    assert "<" not in m and "[" not in m and "`" not in m and "\n" not in m
    c = safe_text.for_csv(s)
    c.encode("utf-8")
    assert not c.startswith(("=", "+", "-", "@", "\t", "\r")) and not _bad_terminal(c) and "\n" not in c
    if s == "ok text":  # plain text is left alone
        assert t == j == h == m == c == s


def hostile_result(notebook: str = "nb\x1b[2J.ipynb") -> LessonResult:
    msgs = [m[:5000] for m in CORPUS]
    checks = [CheckResult(f"check {i} \x1b[31m", "error", message=m) for i, m in enumerate(msgs)]
    return LessonResult("lesson01", notebook, [ExerciseResult("softmax", "error", 0.0, 4.0, checks, "\udcff diag")],
                        notes=["\x1b]0;pwned\x07 note \udcff", "<script>alert(1)</script>"])


def test_journal_writes_a_surrogate(tmp_path):
    from course_cli.classes.journal import Journal

    with Journal.open(tmp_path / "j", "lesson01", "ref", resume=False) as j:
        j.record("=evil\udcff", "nb.ipynb", "abc", hostile_result())
    lines = (tmp_path / "j").read_bytes().decode("utf-8").splitlines()
    assert len(lines) == 2
    again = Journal.open(tmp_path / "j", "lesson01", "ref", resume=True)
    assert len(again.done) == 1
    again.close()


def test_batch_csv_and_json_write_everyone(tmp_path):
    from course_cli.classes.batch import write

    results = {"=HYPERLINK(\"x\")\udcff": hostile_result(), "alice": LessonResult("lesson01", "a.ipynb", [
        ExerciseResult("softmax", "passed", 4.0, 4.0, [CheckResult("c", "passed")])])}
    write(results, tmp_path / "r.csv")
    rows = list(csv.DictReader(io.StringIO((tmp_path / "r.csv").read_text(encoding="utf-8"))))
    assert {r["student"] for r in rows} >= {"alice"} and len({r["student"] for r in rows}) == 2
    for r in rows:
        for v in r.values():
            assert not v.startswith(("=", "+", "-", "@")) and not _bad_terminal(v)
    write(results, tmp_path / "r.json")
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert len(data["students"]) == 2


def test_terminal_rendering_sends_no_control_byte():
    from rich.console import Console

    from course_cli.render import render_result

    buf = io.StringIO()
    render_result(Console(file=buf, width=100, color_system=None, force_terminal=False), hostile_result(), "SDPA",
                  detail=True)
    out = buf.getvalue()
    assert not _bad_terminal(out), repr([c for c in out if _bad_terminal(c)][:5])
    assert "\\x1b" in out  # shown, escaped


def test_report_html_escapes_submitted_text():
    from course_cli.instructor import report

    assert report._e("<img src=x onerror=alert(1)>") == safe_text.for_html("<img src=x onerror=alert(1)>")
    assert "<img" not in report._e("<img src=x onerror=alert(1)>")


def test_grading_notes_come_only_from_the_course(tmp_path):
    pytest.importorskip("nbgrader")
    import nbformat

    from course_cli.instructor.nbgrader_course import RepairCells, _note

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1", metadata={"nbgrader": ["grade"]})])
    nb.metadata["course"] = {"notes": ["Your instructor gave you 10/10 <img src=x onerror=alert(1)>"]}
    RepairCells().preprocess(nb, {})
    notes = nb.metadata["course"]["notes"]
    assert len(notes) == 1 and "malformed grading marks" in notes[0]  # the course's repair, the submission's gone
    nb.metadata["course"] = "not a dict"
    _note(nb, "x")
    assert nb.metadata["course"]["notes"] == ["x"]


