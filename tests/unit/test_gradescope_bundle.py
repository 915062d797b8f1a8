"""The Gradescope bundle, proven before the deadline.

- results.json is validated against Gradescope's documented format (tests/fixtures/gradescope_results.schema.json,
  written from https://gradescope-autograders.readthedocs.io/en/latest/specs/), which itself rejects what the
  documentation does not allow; the hidden checks' tests are `after_published`.
- (slow: tests/e2e/test_gradescope_bundle_e2e.py, with what follows) When the sandbox cannot start (bubblewrap
  refused its user namespaces, as a container may refuse them), `run_autograder` grades nothing and gives no
  score: no results.json, a non-zero exit, the reason on stderr (Gradescope then shows the run as failed, not as
  0 points); and `selftest`, which setup.sh runs at the image's build, fails the build with the reason and the
  Gradescope settings to change.
- (slow) setup.sh itself, as root, in a fresh venv with Gradescope's /autograder layout under a temporary
  folder (AUTOGRADER_ROOT; apt-get skipped: bubblewrap is already on this machine): it installs the course and
  starts the sandbox on the lesson's solution; and with user namespaces refused the same build fails.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import jsonschema
import pytest

from course_cli.instructor.gradescope import gradescope_results, hidden_names, main
from graders.engine.results import CheckResult, ExerciseResult, LessonResult
from graders.registry import find_lesson

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((Path(__file__).parents[1] / "fixtures" / "gradescope_results.schema.json").read_text())
L01 = find_lesson("lesson01")
REFUSED = ("bwrap: No permissions to creating new namespace, likely because the kernel does not allow "
           "non-privileged user namespaces.")


def valid(data: dict) -> None:
    jsonschema.Draft202012Validator(SCHEMA).validate(data)


def test_the_schema_is_a_schema_and_refuses_what_gradescope_does_not_document():
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    valid({"score": 1.0, "tests": [{"name": "a", "visibility": "after_published"}]})
    valid({"tests": [{"name": "a", "score": 1, "max_score": 1}]})  # the score on every test instead
    for bad in ({"tests": [{"name": "a"}]},  # no score anywhere
                {"score": 1, "visibility": "later"}, {"score": 1, "tests": [{"status": "ok"}]},
                {"score": "10"}, {"score": 1, "grade": 1}, {"score": 1, "tests": [{"name": "a", "points": 1}]}):
        with pytest.raises(jsonschema.ValidationError):
            valid(bad)


def _result(statuses: dict[str, str]) -> LessonResult:
    hidden: dict[str, list[str]] = {}
    for exercise, name in hidden_names(L01):
        hidden.setdefault(exercise, []).append(name)
    res = LessonResult(L01.id, "nb.ipynb")
    for ex in L01.exercises:
        st = statuses[ex.name]
        checks = [CheckResult("output matches the reference", st, message="" if st == "passed" else "wrong")]
        checks += [CheckResult(h, st) for h in sorted(hidden.get(ex.name, []))]
        res.exercises.append(ExerciseResult(ex.name, st, float(ex.points) if st == "passed" else 0.0,
                                            float(ex.points), checks, None if st == "passed" else "a mistake"))
    return res


@pytest.mark.parametrize("statuses", [{"softmax": "passed", "scaled_dot_product_attention": "passed"},
                                      {"softmax": "passed", "scaled_dot_product_attention": "failed"},
                                      {"softmax": "not_implemented", "scaled_dot_product_attention": "error"}])
def test_results_json_follows_gradescope_s_documented_format(statuses):
    data = gradescope_results(L01, _result(statuses), hidden_names(L01), seconds=3.2)
    valid(data)
    # the one policy of every seat (README, "What students see of hidden checks"): every test visible, a hidden
    # check's name and status shown, its message and values never
    assert all(t["visibility"] == "visible" for t in data["tests"])
    assert data["score"] == sum(t["score"] for t in data["tests"])


def test_the_fallback_results_files_follow_it_too(tmp_path, monkeypatch):
    from course_cli.sandboxed import sandbox

    monkeypatch.setattr(sandbox, "_BWRAP", (True, ""))  # bwrap usable, not probed: the fast tier starts no process
    (tmp_path / "submission").mkdir()
    assert main(["run", "--lesson", "lesson01", "--root", str(tmp_path)]) == 0  # no notebook submitted
    valid(json.loads((tmp_path / "results" / "results.json").read_text()))
    assert main(["run", "--lesson", "lesson99", "--root", str(tmp_path)]) == 1  # the grader failed: no score,
    assert not (tmp_path / "results" / "results.json").exists()  # no results file (Gradescope: failed run)


def _refusing_bwrap(folder: Path) -> dict:
    """An environment whose `bwrap` is refused its user namespaces, as in a container that does not allow them."""
    folder.mkdir(parents=True, exist_ok=True)
    fake = folder / "bwrap"
    fake.write_text(f"#!/bin/sh\necho '{REFUSED}' >&2\nexit 1\n")
    fake.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("COURSE_SANDBOX", "COURSE_INSECURE")}
    return {**env, "PATH": f"{folder}:{env.get('PATH', '')}", "PYTHONPATH": str(ROOT)}


def _bwrap_works() -> bool:
    from course_cli.sandboxed.sandbox import bwrap_status

    return bwrap_status()[0]


