"""test_tamper, end to end: the tests of tests/unit/test_tamper.py that start a child (the slow tier)."""

from __future__ import annotations

import json
import nbformat
import pytest
import torch
from course_cli.sandboxed import sandbox
from course_cli.sandboxed.grading import grade_notebook
from graders.engine import clean
from graders.registry import find_lesson
from test_tamper import L01, POISON, TAMPERS, notebook, short_limits  # noqa: F401 (helpers and fixtures shared with the fast tests)


@pytest.mark.parametrize("name", list(TAMPERS))
def test_tampering_never_passes_a_wrong_softmax(name, tmp_path, short_limits):
    result = grade_notebook(L01, notebook(tmp_path, TAMPERS[name], name), ["softmax"])
    (ex,) = result.exercises
    assert ex.status != "passed" and ex.points == 0, (name, ex.status, result.notes)
    text = json.dumps(result.to_dict())
    assert "Traceback (most recent call last)" not in text


def test_observations_cannot_carry_code(tmp_path):
    """What the parent reads is data: torch.load(weights_only=True) refuses pickled objects."""
    import os

    class Payload:
        def __reduce__(self):
            return (os.system, ("echo pwned",))

    path = tmp_path / "obs-softmax.pt"
    torch.save({"checks": {"x": Payload()}}, path)
    with pytest.raises(Exception):
        torch.load(path, weights_only=True)
    from course_cli.sandboxed.grading import _load

    assert _load(path) is None


def test_a_poisoned_reference_cache_cannot_pass_a_class_submission(tmp_path, monkeypatch):
    """Class grading never reads the disk cache; and inside the sandbox a submission cannot even see it, so
    course check's cache holds too (without bubblewrap, course check's own cache is the student's to fool)."""
    from click.testing import CliRunner

    from course_cli.sandboxed import grading
    from course_cli.main import cli
    from graders.engine import mistake_source
    from harness import mistakes_of, solution_cell_index

    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path / "cache"))  # the parent and its children alike
    grading._TRUSTED.clear()
    grade_notebook(L01, L01.solution_path)  # fill the disk cache
    mistake = next(m for m in mistakes_of(L01) if m.id == "no_scaling")
    nb = nbformat.read(L01.solution_path, as_version=4)
    nb.cells[solution_cell_index(nb, mistake.exercise)].source = mistake_source(mistake)
    nb.cells.insert(2, nbformat.v4.new_code_cell(POISON))
    subs = tmp_path / "subs"
    subs.mkdir()
    nbformat.write(nb, subs / "mallory.ipynb")
    out = tmp_path / "r.json"
    r = CliRunner().invoke(cli, ["grade", str(subs), "--lesson", "1", "--out", str(out)], catch_exceptions=False)
    assert r.exit_code == 0
    verdict = json.loads(out.read_text())["students"]["mallory"]
    assert verdict["score"] == 4.0  # softmax only: the poisoned cache was not used
    from course_cli.sandboxed import sandbox

    expected = 4.0 if sandbox.bwrap_status()[0] else 10.0  # unsandboxed, the attack on the cache is real
    assert grade_notebook(L01, subs / "mallory.ipynb").score == expected
    # and the next class run still judges against a fresh reference
    r = CliRunner().invoke(cli, ["grade", str(subs), "--lesson", "1", "--out", str(out)], catch_exceptions=False)
    assert json.loads(out.read_text())["students"]["mallory"]["score"] == 4.0
