"""`course init` builds every lesson's reference observations once per course version
(course_cli/sandboxed/references.py), so that no lesson's first check waits for its reference child."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from course_cli.main import cli
from course_cli.sandboxed import grading, references
from graders.registry import LESSONS, find_lesson

L01 = find_lesson("lesson01")


def test_init_builds_the_missing_references_with_a_progress_bar(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("COURSE_INIT_REFERENCES", "1")
    assert [l.id for l in references.missing()] == [l.id for l in LESSONS if l.solution_path.exists()]
    built = []

    def fake_build(lessons, on_done, jobs=None):
        for l in lessons:
            built.append(l.id)
            on_done(l, None if l.id != "lesson02" else "it failed\nsecond line")
        return {}

    monkeypatch.setattr(references, "build", fake_build)
    r = CliRunner().invoke(cli, ["init", str(tmp_path / "ws")], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert built == [l.id for l in references.missing()]
    assert "reference observations" in r.output and "lesson02's reference was not built (it failed)" in r.output
    built.clear()
    r = CliRunner().invoke(cli, ["init", str(tmp_path / "ws2"), "--no-references"], catch_exceptions=False)
    assert r.exit_code == 0 and not built
    monkeypatch.setenv("COURSE_INIT_REFERENCES", "0")
    r = CliRunner().invoke(cli, ["init", str(tmp_path / "ws3")], catch_exceptions=False)
    assert r.exit_code == 0 and not built


@pytest.mark.slow
def test_a_built_reference_is_what_the_first_check_uses(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_CACHE_DIR", str(tmp_path / "cache"))
    assert L01 in references.missing()
    done = []
    assert references.build([L01], lambda l, e: done.append((l.id, e))) == {}
    assert done == [("lesson01", None)] and L01 not in references.missing()
    path, child = grading.Reference.start(L01, "cpu")
    assert child is None and path.exists()  # the first check starts no reference child
    assert grading.grade_notebook(L01, L01.solution_path).all_passed
