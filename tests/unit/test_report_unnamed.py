"""The class sees what the course does not yet name (issue 44 item 5) and the report says who needs help (issue 47
item 6): unnamed failures grouped by behaviour in `course grade`'s output and the report, `course draft-mistake`
writing a group as a draft catalogue entry with one student's cell (read as data), and every student below the
instructor's line with what to look at first."""

from __future__ import annotations

import json

import nbformat
from click.testing import CliRunner

from course_cli.classes import batch
from course_cli.instructor.report import report_data
from course_cli.instructor.unnamed import groups, shared
from course_cli.main import cli
from graders.engine.results import CheckResult, ExerciseResult, LessonResult
from graders.registry import find_lesson

L = find_lesson("lesson02")
WRONG = "def causal_mask(t_q, t_k=None, device=None):\n    return 'the student wrote this'  # UNIQUE-MARK\n"


def student(tmp, name, failing=None, diagnosis=None, ident=None, missing=(), note="", code=WRONG):
    nb = tmp / name / L.notebook
    nb.parent.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)]), nb)
    res = LessonResult(L.id, str(nb), note=note)
    for e in L.exercises:
        if e.name == "causal_mask" and failing:
            checks = [CheckResult(n, "failed", message=m.replace("STUDENT", str(nb))) for n, m in failing]
            res.exercises.append(ExerciseResult(e.name, "failed", 0.0, float(e.points), checks, diagnosis, ident))
        elif e.name in missing:
            res.exercises.append(ExerciseResult(e.name, "not_implemented", 0.0, float(e.points), [
                CheckResult("defined", "not_implemented", message="raises NotImplementedError", kind="absent")]))
        else:
            res.exercises.append(ExerciseResult(e.name, "passed", float(e.points), float(e.points),
                                                [CheckResult("ok", "passed")]))
    return res


SAME = [("T=3 mask", "mask differs at 2 of 9 positions; first at index (0, 1): expected False, got True"),
        ("T=5 mask", "mask differs at 4 of 25 positions (seen in STUDENT)")]
OTHER = [("T=3 mask", "mask differs at 3 of 9 positions; first at index (0, 2): expected False, got True")]


def klass(tmp):
    k = {s: student(tmp, s, SAME) for s in ("ana", "ben", "cai")}  # the same unnamed behaviour
    k["dev"] = student(tmp, "dev", OTHER)  # a behaviour of its own
    k["eve"] = student(tmp, "eve", OTHER[:1], "the mask keeps the future", "triu")  # a named cause
    rest = [e.name for e in L.exercises if e.name != "causal_mask"]
    k["fay"] = student(tmp, "fay", missing=rest[:2])  # passes what she tried, the rest not attempted
    k["gus"] = student(tmp, "gus", note=f"submitted as lesson02 (1).ipynb, graded as {L.notebook}")
    return k


def test_the_same_unnamed_behaviour_is_one_group(tmp_path):
    k = klass(tmp_path)
    every = groups(k, L.id)
    assert [(g.exercise, g.who) for g in every] == [("causal_mask", ["ana", "ben", "cai"]), ("causal_mask", ["dev"])]
    top = shared(k, L.id)
    assert len(top) == 1 and top[0].who == ["ana", "ben", "cai"]
    line = top[0].headline()
    assert line.startswith("3 students: same unnamed mistake in `causal_mask`, differs first at T=3 mask: ")
    assert "(0, 1): expected False, got True" in line


def test_draft_mistake_writes_the_group_and_a_students_cell(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    k = klass(tmp_path)
    batch.write(k, tmp_path / "results.json")
    gid = shared(k, L.id)[0].id
    r = CliRunner().invoke(cli, ["draft-mistake", str(tmp_path / "results.json"), gid], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    text = (tmp_path / f"draft-{gid.replace(':', '-')}.py").read_text()
    assert "UNIQUE-MARK" in text and "3 students: same unnamed mistake in `causal_mask`" in text
    assert "Mistake(" in text and "expected False, got True" in text
    bad = CliRunner().invoke(cli, ["draft-mistake", str(tmp_path / "results.json"), "nope"])
    assert bad.exit_code == 2 and gid in bad.output and "Traceback" not in bad.output


def test_the_report_names_everyone_below_the_line_and_what_to_look_at(tmp_path):
    k = klass(tmp_path)
    data = report_data(L.id, k, help_below=0.9)
    rows = {r["student"]: r for r in data["per_student"]}
    max_score = L.max_score
    want = sorted((s for s, res in k.items() if res.score < 0.9 * max_score), key=lambda s: (k[s].score, s))
    assert data["needs_help"] == want and "fay" in want and "gus" not in want
    assert rows["fay"]["look_first"]["what"] == "not attempted"
    assert rows["eve"]["look_first"]["what"] == "named cause: triu"
    gid = shared(k, L.id)[0].id
    assert gid in rows["ana"]["look_first"]["what"] and rows["ana"]["look_first"]["group"] == gid
    assert rows["dev"]["look_first"]["what"] == "no named cause; its first failing check"
    assert [u["id"] for u in data["unnamed"]] == [gid]
    assert data["renamed"] == [{"student": "gus", "note": k["gus"].note}]
    assert report_data(L.id, k)["needs_help"] == [s for s in want if k[s].score < 0.6 * max_score]


def test_course_grade_output_shows_the_groups(tmp_path, monkeypatch):
    from course_cli.sandboxed import sandbox

    monkeypatch.setattr(sandbox, "_BWRAP", (True, ""))  # bwrap usable, not probed: the fast tier starts no process
    from course_cli.main import _render_class

    k = klass(tmp_path)
    monkeypatch.setattr("sys.argv", ["course"])
    r = CliRunner().invoke(cli, ["list"])  # a console for Rich in CliRunner's capture
    assert r.exit_code == 0
    import io
    import contextlib

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        try:
            _render_class(L, k, str(tmp_path / "results.json"), (), 1)
        except SystemExit:
            pass
    out = buf.getvalue()
    assert "grouped by behaviour" in out and shared(k, L.id)[0].id in out
    assert "course draft-mistake" in out
    assert json.loads((tmp_path / "results.json").read_text())["students"]
