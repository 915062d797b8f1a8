"""One runner for every seat (issue 46): graders.engine.runner.run_notebook runs a notebook's cells and probes in
the sandboxed child (cold or warm: course_cli/sandboxed/child.py calls it), in process for the tests
(tests/harness.py) and for an earlier lesson's parts (graders/parts.py); `Grading` differs only in its runner.
Here the in-process runner (course_cli.sandboxed.grading.InProcess, trusted code only) goes through the same
`Grading` seam, files and read-back as a sandboxed child, with no process started (the fast tier's guard)."""

from __future__ import annotations

import pytest

from course_cli.sandboxed.grading import Grading, InProcess
from course_cli.sandboxed.notebook import graded_cells, read_notebook
from graders.registry import find_lesson
from harness import check_in_process, mistakes_of, with_mistake

L01 = find_lesson("lesson01")


def _grade(path, exercises=None, only_public=False):
    return Grading(L01, graded_cells(read_notebook(path)), str(path), exercises, only_public, trusted=True,
                   runner=InProcess()).finish()


def test_the_solution_passes_through_the_grading_seam_in_process():
    result = _grade(L01.solution_path)
    assert [e.status for e in result.exercises] == ["passed"] * len(L01.exercises), result.to_dict()


@pytest.mark.parametrize("mistake", mistakes_of(L01)[:3], ids=lambda m: m.id)
def test_the_seam_and_the_harness_give_one_verdict(mistake, tmp_path):
    """A known mistake, graded through Grading (the child's run, its files, the read-back, the reference child's
    mistakes loop) and through the harness (the runner called directly): the same checks' results, and it
    fails. (Public checks: trusted grading draws its hidden checks' inputs from this run's seed, the harness
    from the fixed seeds.)"""
    path = with_mistake(L01, mistake, tmp_path)
    seam = _grade(path, [mistake.exercise], only_public=True).exercises[0]
    key = lambda c: (c.name, c.device, c.dtype)  # noqa: E731
    harness = {key(c): c for c in check_in_process(L01, path, [mistake.exercise]).exercises[0].checks}
    assert seam.status != "passed" and seam.checks
    assert [(key(c), c.status, c.message) for c in seam.checks] == \
        [(key(c), harness[key(c)].status, harness[key(c)].message) for c in seam.checks]


def test_a_cell_error_is_reported_by_the_one_rule(tmp_path):
    """run_cells's rule (the child's): sys.exit in a cell is an error with why, and grading goes on."""
    from graders.engine.runner import namespace, run_cells

    ns = namespace()
    reports = run_cells([{"index": 1, "source": "import sys\nsys.exit(3)"}, {"index": 2, "source": "x = 1"},
                         {"index": 3, "source": "%%time\nboom"}], ns)
    assert reports[0]["status"] == "error" and "sys.exit(3)" in reports[0]["error"]
    assert reports[1] == {"index": 2, "status": "ok"} and ns["x"] == 1
    assert reports[2]["status"] == "skipped"


def test_a_failing_check_follows_up_on_the_exercise_that_fails_not_on_one_that_calls_it(tmp_path, monkeypatch):
    """grading.follow_up (the candidates the reference child's budget left) is asked for the failing exercise
    whose cause was not named, never for one that fails because a part it calls fails ("fix X first"); class
    grading (trusted: its reference in memory) asks too, saying so (the follow-up then probes with the class's
    hidden seed and keeps what it finds in that memory)."""
    from course_cli.sandboxed import grading

    asked = []
    monkeypatch.setattr(grading, "follow_up", lambda lesson, reference, exercises, screen=None, trusted=False:
                        asked.append((exercises, trusted)) or [])
    monkeypatch.setattr(grading.Reference, "next_candidate", lambda self, exercise: 0)  # every one left
    monkeypatch.setenv("COURSE_MUTANT_BUDGET", "0")  # the reference probes no candidate: none can name it
    monkeypatch.setattr(grading, "_TRUSTED", {})  # (a reference kept by an earlier test has its mutants)
    path = _unnamed_softmax_mistake(tmp_path)
    result = Grading(L01, graded_cells(read_notebook(path)), str(path), only_public=True,
                     runner=InProcess()).finish()
    statuses = {e.id: e.status for e in result.exercises}
    assert statuses == {"softmax": "failed", "scaled_dot_product_attention": "failed"}
    assert asked == [(["softmax"], False)]  # scaled_dot_product_attention calls softmax: not followed up
    asked.clear()
    Grading(L01, graded_cells(read_notebook(path)), str(path), only_public=True, trusted=True,
            runner=InProcess()).finish()
    assert asked == [(["softmax"], True)]


def _unnamed_softmax_mistake(tmp_path):
    """softmax with one of its mutation candidates in place, one that fails both exercises and that the catalogue
    and the structural rules do not name (so only a mutant could)."""
    from graders.engine import mutations
    from graders.engine.kinds import is_cause
    from graders.engine.mistakes import solved_cell
    from harness import with_code

    cands = mutations.mutants(solved_cell(L01.id, "softmax"), "softmax", mutations.CAP)
    for n in range(len(cands) - 1, -1, -1):
        path = with_code(L01, "softmax", cands[n].source, tmp_path, f"candidate-{n}.ipynb")
        softmax, sdpa = check_in_process(L01, path).exercises
        if softmax.status == sdpa.status == "failed" and not is_cause(softmax.diagnosis_id):
            return path
    raise AssertionError("every candidate of softmax is named without the mutants, or passes")
