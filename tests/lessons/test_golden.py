"""No behaviour changed by a refactor: the verdicts of every lesson's solution, untouched stub and catalogued
mistakes, judged in process, equal the ones stored in tests/golden/verdicts.json (timings aside).

The stored file was produced by this test's `--update-golden` run before the restructure of issue 27, so it is
the old code's own output, not a hand-written expectation. A change that is meant to change a verdict (a new
check, a new mistake) regenerates it: `python -m pytest tests/lessons/test_golden.py --update-golden` (`-k lessonNN` for one lesson), and the diff of
verdicts.json is then part of the review.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graders.registry import LESSONS

GOLDEN = Path(__file__).parents[1] / "golden" / "verdicts.json"


def _normalise(result) -> dict:
    d = result.to_dict()
    d["notebook"] = Path(d.get("notebook", "")).name
    d.pop("timings", None)
    d.pop("seed", None)
    for ex in d["exercises"]:  # the result kinds (issue 27) are new data, not a changed verdict
        for c in ex["checks"]:
            c.pop("kind", None)
            c.pop("failure", None)
    return d


def lesson_verdicts(lesson, tmp_path: Path) -> dict:
    from harness import check_in_process, mistakes_of, with_mistake

    out = {"solution": _normalise(check_in_process(lesson, lesson.solution_path)),
           "stub": _normalise(check_in_process(lesson, lesson.student_path))}
    for mistake in mistakes_of(lesson):
        path = with_mistake(lesson, mistake, tmp_path)
        out[f"mistake:{mistake.id}"] = _normalise(check_in_process(lesson, path, [mistake.exercise]))
    return out


@pytest.mark.parametrize("lesson", LESSONS, ids=[l.id for l in LESSONS])
def test_verdicts_unchanged(lesson, tmp_path, request):
    got = json.loads(json.dumps(lesson_verdicts(lesson, tmp_path)))
    stored = json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}
    if request.config.getoption("--update-golden"):
        stored[lesson.id] = got
        GOLDEN.write_text(json.dumps(stored, indent=1, sort_keys=True) + "\n")
        return
    assert lesson.id in stored, "no stored verdicts: run with --update-golden"
    want = stored[lesson.id]
    assert sorted(got) == sorted(want)
    from harness import golden_differences
    for key in want:
        assert not golden_differences(got[key], want[key], key), f"{lesson.id} {key}: the verdict changed"


def test_every_stored_mistake_is_named_by_its_own_diagnosis():
    """The pinned verdicts grade each catalogued mistake as a student's notebook (its own run, not the reference
    child's observations of it): every one is named, so a check whose observations differ from run to run
    (sampling without a seed) cannot pass unnoticed into the golden file."""
    import json

    data = json.loads(GOLDEN.read_text())
    unnamed = [f"{lid}.{key.split(':', 1)[1]}" for lid, entries in data.items() for key, entry in entries.items()
               if key.startswith("mistake:") and not any(e.get("diagnosis_id") == key.split(":", 1)[1]
                                                          for e in entry["exercises"])]
    assert not unnamed, unnamed


def test_the_golden_comparison_forgives_printed_digits_not_verdicts():
    from harness import golden_differences

    f32 = "max error 1.572 (float32 inputs)"
    bf16 = "with bfloat16 inputs the max error is 1.572"
    assert not golden_differences(f32.replace("1.572", "1.570"), f32)  # 0.1 %
    assert golden_differences(f32.replace("1.572", "1.556"), f32)  # 1.02 %: float32 keeps that digit
    assert not golden_differences(bf16.replace("1.572", "1.556"), bf16)
    assert golden_differences(bf16.replace("1.572", "1.400"), bf16)  # 11 %
    assert golden_differences({"status": "failed", "message": f32}, {"status": "passed", "message": f32})
