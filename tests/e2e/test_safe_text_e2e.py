"""test_safe_text, end to end: the tests of tests/unit/test_safe_text.py that start a child (the slow tier)."""

from __future__ import annotations

import csv
import io
import json
import pytest
from course_cli import safe_text
from graders.engine.results import CheckResult, ExerciseResult, LessonResult


@pytest.mark.slow
def test_a_surrogate_in_an_error_message_does_not_cancel_the_batch(tmp_path):
    import nbformat
    from click.testing import CliRunner

    from course_cli.main import cli
    from course_cli.sandboxed import sandbox
    from graders.registry import find_lesson

    if not sandbox.bwrap_status()[0]:
        pytest.skip("bubblewrap unavailable")
    L01 = find_lesson("lesson01")
    subs = tmp_path / "subs"
    for student in ("alice", "mallory\x1b[2J"):
        (subs / student / "lesson01").mkdir(parents=True)
    nbformat.write(nbformat.read(L01.solution_path, as_version=4), subs / "alice" / "lesson01" / L01.notebook)
    nb = nbformat.read(L01.student_path, as_version=4)
    nb.cells.append(nbformat.v4.new_code_cell(
        'def softmax(x, dim=-1):\n    raise RuntimeError("bad \\udcff \\x1b[2J <img src=x onerror=alert(1)> =1+1")\n'))
    nbformat.write(nb, subs / "mallory\x1b[2J" / "lesson01" / L01.notebook)
    for out in ("r.csv", "r.json"):
        r = CliRunner().invoke(cli, ["grade", str(subs), "--lesson", "lesson01", "--out", str(tmp_path / out)])
        assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
        assert "\x1b" not in r.output
        assert (tmp_path / out).stat().st_size > 0
        journal = (tmp_path / (out + ".journal")).read_text(encoding="utf-8").splitlines()
        assert len(journal) == 3  # header + both students
    rows = list(csv.DictReader(io.StringIO((tmp_path / "r.csv").read_text(encoding="utf-8"))))
    totals = {r["student"]: float(r["points"]) for r in rows if r["exercise"] == "TOTAL"}
    assert totals["alice"] == 10.0 and len(totals) == 2
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert data["students"]["alice"]["score"] == 10.0 and len(data["students"]) == 2
