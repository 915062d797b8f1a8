"""A follow-up screens the candidates on the student's failing check before running their whole battery
(course_cli/sandboxed/grading.py follow_up, graders/engine/mutations.py probe_mutants `screen`): a candidate
whose observation on that one check rules it out (graders/engine/diagnosis.py rules_out) cannot be the student's
mistake, so the cause named is the one every candidate probed whole would name, for a fraction of the work.

Computed in this process (tests/harness.py: the child's own runner and the engine's judging); no child starts."""

from __future__ import annotations

import pytest

import harness
from course_cli.sandboxed import grading
from graders.engine import judge_exercise
from graders.engine.diagnosis import mistake_fits
from graders.engine.mutations import probe_mutants
from graders.engine.results import LessonResult
from graders.registry import find_lesson

L01 = find_lesson("lesson01")
EXERCISES = ["softmax"]  # (scaled_dot_product_attention's candidates probed whole cost the fast tier 13 s more)


def _students(exercise: str, n: int = 4) -> list[tuple[str, dict]]:
    """Students whose code is one of the exercise's kept candidates (their observations are the candidate's),
    spread over the candidates' order."""
    kept = harness.mutant_observations(L01, exercise)
    keys = sorted(kept, key=lambda k: int(k.rsplit(":", 1)[1]))
    step = max(1, len(keys) // n)
    return [(k, kept[k]) for k in keys[::step][:n]]


def _judged(exercise: str, obs: dict):
    """(the exercise's result judged without mutants, the screen grading.screens picks for it)."""
    result = harness.judge_in_process(L01, exercise, obs)
    lesson_result = LessonResult(L01.id, "", [result])
    module = __import__(L01.module, fromlist=["CHECKS"])
    return result, grading.screens(module, {exercise: obs}, lesson_result, [exercise]).get(exercise)


@pytest.mark.parametrize("exercise", EXERCISES)
def test_the_screen_never_rules_out_a_candidate_that_fits_and_the_same_cause_is_named(exercise):
    module = __import__(L01.module, fromlist=["CHECKS"])
    ns, ref = harness.reference(L01)
    configs = harness._configs(module)
    full = harness.mutant_observations(L01, exercise)  # every candidate probed whole
    checks = module.CHECKS.of(exercise)
    ruled_out_some = 0
    for key, student in _students(exercise):
        result, screen = _judged(exercise, student)
        assert result.status in ("failed", "error") and screen is not None, key
        screened: dict = {}
        kept, counts = probe_mutants(module, ns, exercise, configs, ref[exercise], budget=float("inf"),
                                     only=list(range(harness._MUTANT_COUNTS[L01.id, exercise]["candidates"])),
                                     screen=screen, on_screened=lambda k, seen: screened.__setitem__(k, seen))
        status = {(c.name, c.device, c.dtype): c.status for c in result.checks}
        fitting = {k for k, m in full.items()
                   if mistake_fits(checks, student["checks"], ref[exercise]["checks"], m["checks"], status) > 0}
        assert key in fitting and fitting <= set(kept), (key, fitting - set(kept))
        assert counts["screened"] + len(counts["probed"]) == counts["candidates"]
        assert set(screened) >= {k for k in full if k not in kept}  # what each gave on the check is kept
        ruled_out_some += counts["screened"] > 0
        # the cause named from the screened probe is the one every candidate probed whole names
        named = judge_exercise(module, L01.exercise(exercise), student, ref[exercise], kept, gpu=False)
        named_full = judge_exercise(module, L01.exercise(exercise), student, ref[exercise], full, gpu=False)
        assert named.diagnosis_id == named_full.diagnosis_id and named.diagnosis_id.startswith("mutation:"), key
    assert ruled_out_some == len(_students(exercise))  # the screen does work: each student's ruled some out


def test_a_candidate_screened_out_for_this_student_starts_no_child_and_another_student_s_probes_only_what_is_open(
        tmp_path, monkeypatch):
    """The parent screens cached candidates itself: when each is ruled out by what it gave on the student's check,
    no child starts; for a student it does not rule out, the child is asked for those candidates only."""
    module = __import__(L01.module, fromlist=["CHECKS"])
    ns, ref = harness.reference(L01)
    exercise = "softmax"
    (_, first), (_, second) = _students(exercise, 2)[:2]
    _, screen = _judged(exercise, first)
    total = harness._MUTANT_COUNTS[L01.id, exercise]["candidates"]
    screened: dict = {}
    kept, counts = probe_mutants(module, ns, exercise, harness._configs(module), ref[exercise], budget=float("inf"),
                                 only=list(range(total)), screen=screen,
                                 on_screened=lambda k, seen: screened.__setitem__(int(k.rsplit(":", 1)[1]), seen))
    open_ = {n: seen for n, seen in screened.items() if n not in counts["probed"]}
    assert open_
    reference = grading.Reference(ref, {**kept, grading.screened_key(exercise): {"checks": {}, "screened": open_}},
                                  mutation={exercise: {"candidates": total, "next": total, "skipped": 0}})
    reference.path = tmp_path / "cache.pt"
    assert reference.unprobed(exercise) and reference.next_candidate(exercise) is None
    asked = []

    class Started(Exception):
        pass

    def start(*args, job_extra=None, **kwargs):
        asked.append(job_extra["mutant_follow"])
        raise Started

    monkeypatch.setattr(grading.sandbox, "start", start)
    assert grading.follow_up(L01, reference, [exercise], {exercise: screen}) == []
    assert asked == []  # every open candidate ruled out by its cached observation: no child
    _, other = _judged(exercise, second)
    with pytest.raises(Started):
        grading.follow_up(L01, reference, [exercise], {exercise: other})
    (plan,) = asked
    want = sorted(n for n, seen in open_.items()
                  if not (other[0] in seen and grading._rules_out(module, exercise, other, seen, reference)))
    assert plan[exercise]["candidates"] == want and want


def test_a_follow_up_child_that_dies_on_a_candidate_keeps_what_came_before(tmp_path, monkeypatch):
    """A candidate that kills the follow-up's child (lesson 05's Triton kernels under the interpreter) counts as
    broken and is never asked for again; the candidates before it stand (screened ones keep what they gave, the
    one probed whole joins the mistakes), and those after it stay open for the next follow-up."""
    import json
    import torch

    module = __import__(L01.module, fromlist=["CHECKS"])
    _, ref = harness.reference(L01)
    exercise = "softmax"
    (key, student), = _students(exercise, 1)
    _, screen = _judged(exercise, student)
    s_key = screen[0]
    total = 12
    reference = grading.Reference(ref, {grading.screened_key(exercise): {"checks": {}, "screened": {
        2: {"another check @ cpu/float32": {"x": 1}}}}},
        mutation={exercise: {"candidates": total, "next": 5, "skipped": total - 5}})
    reference.path = tmp_path / "cache.pt"
    files = tmp_path / "child"
    files.mkdir()

    class Died:
        timed_out = False

        def __init__(self):
            self.files = files

        def wait(self):
            pass

        def json(self, name):
            return json.loads((files / name).read_text())

        def death(self):
            return "killed by signal 11 (SIGSEGV)"

        def cleanup(self):
            pass

    asked = []

    def start(*args, job_extra=None, **kwargs):
        plan = job_extra["mutant_follow"]
        asked.append(plan[exercise]["candidates"])
        # candidates 2 and 5 screened (5 ruled out), 6 probed whole and kept, 7 killed the child
        torch.save({"checks": {s_key: {"y": torch.ones(2)}}}, files / f"screened-{exercise}-002.pt")
        torch.save({"checks": {s_key: {"y": torch.zeros(2)}}}, files / f"screened-{exercise}-005.pt")
        torch.save({"checks": {s_key: student["checks"][s_key]}}, files / f"screened-{exercise}-006.pt")
        torch.save({**student, "mutant": {"exercise": exercise, "operator": "op", "sentence": "s"}},
                   files / f"mutant-{exercise}-006.pt")
        (files / "mutants.json").write_text(json.dumps({exercise: {
            "candidates": total, "tried": 1, "kept": 1, "screened": 2, "broken": 0, "skipped": 0, "probed": [6],
            "at": 7, "done": False}}))
        return Died()

    monkeypatch.setattr(grading.sandbox, "start", start)
    monkeypatch.setattr(grading, "_save_follow_up", lambda *a: None)
    assert grading.follow_up(L01, reference, [exercise], {exercise: screen}) == [exercise]
    assert asked == [[2, *range(5, total)]]
    screened = reference.screened(exercise)
    assert set(screened) == {2, 5}  # 6 probed whole, 7 broken: neither open; 8-11 never reached: still unprobed
    assert set(screened[2]) == {"another check @ cpu/float32", s_key}  # what each check gave, kept side by side
    assert f"mutant:{exercise}:006" in reference.mistakes
    counts = reference.mutation[exercise]
    assert counts["next"] == 8 and counts["skipped"] == total - 8 and counts["broken"] == 1
    assert reference.next_candidate(exercise) == 8


def test_a_wider_alternative_is_named_only_when_the_checks_cannot_tell_it_from_the_candidate(monkeypatch):
    """A test turned the wrong way round and the block under it gone can look the same to the checks (lesson 08's
    generate: a cache rebuilt whenever it is NOT full is a cache rebuilt never, once the outputs are compared):
    then the sentence named is the one true of both (`branch-skipped`), never a test the student may not have
    written; when the checks tell them apart, the candidate's own sentence stands."""
    import ast

    from graders.engine import mutations
    from graders.engine.mistakes import solved_cell

    (negated,) = [m for m in mutations.mutants(solved_cell("lesson08", "generate"), "generate") if m.alternative]
    assert negated.operator == "comparison-negated" and negated.alternative[1] == "branch-skipped"
    assert "if False:" in negated.alternative[0] and "> block_size" not in negated.alternative[0]
    assert ast.parse(negated.source) and "<= block_size" in negated.source

    module = __import__(L01.module, fromlist=["CHECKS"])
    ns, ref = harness.reference(L01)
    source = solved_cell(L01.id, "softmax")
    wrong = source.replace("amax", "amin")  # a candidate that fails the checks
    assert wrong != source
    same = mutations.Mutant(wrong, "made-up", "its own sentence", (wrong, "wider", "the wider sentence"))
    other = mutations.Mutant(wrong.replace("(", "( ", 1), "made-up", "its own sentence",
                             (source, "wider", "the wider sentence"))  # the alternative passes: told apart
    for candidate, operator in ((same, "wider"), (other, "made-up")):
        monkeypatch.setattr(mutations, "mutants", lambda *a, candidate=candidate, **k: [candidate])
        kept, _ = probe_mutants(module, ns, "softmax", harness._configs(module), ref["softmax"], budget=float("inf"))
        (obs,) = kept.values()
        assert obs["mutant"]["operator"] == operator
        assert obs["mutant"]["sentence"] == {"wider": "the wider sentence", "made-up": "its own sentence"}[operator]


def test_candidates_the_checks_cannot_tell_apart_are_named_together_never_the_first_alone(monkeypatch):
    """Two changes with the same observations on every check (merged: only the first is kept) and two kept
    mutants that fit a student's failed checks equally well: the student's outputs are each one's, so the
    diagnosis says every such change (at most three), not whichever came first in the candidates' order."""
    from graders.engine import mutations
    from graders.engine.mistakes import solved_cell

    module = __import__(L01.module, fromlist=["CHECKS"])
    ns, ref = harness.reference(L01)
    source = solved_cell(L01.id, "softmax")
    wrong = source.replace("amax", "amin")  # fails the checks (a shift by the minimum overflows)
    assert wrong != source
    first = mutations.Mutant(wrong, "made-up", "the first sentence", None)
    twin = mutations.Mutant(wrong.replace("(", "( ", 1), "other-op", "the twin's sentence", None)
    again = mutations.Mutant(wrong.replace("(", "(  ", 1), "made-up", "the first sentence", None)  # said already
    monkeypatch.setattr(mutations, "mutants", lambda *a, **k: [first, twin, again])
    recorded: dict = {}
    kept, counts = probe_mutants(module, ns, "softmax", harness._configs(module), ref["softmax"],
                                 budget=float("inf"), on_kept=recorded.__setitem__)
    (k, obs), = kept.items()
    assert counts["merged"] == 2 and obs["mutant"]["sentence"] == "the first sentence"
    assert obs["mutant"]["also"] == [{"operator": "other-op", "sentence": "the twin's sentence", "n": 1}]
    assert recorded[k]["mutant"]["also"] == obs["mutant"]["also"]  # the child's file holds the alias too

    student = {kk: v for kk, v in obs.items() if kk != "mutant"}
    named = judge_exercise(module, L01.exercise("softmax"), student, ref["softmax"], kept, gpu=False)
    assert named.diagnosis_id == "mutation:made-up"
    assert "the first sentence" in named.diagnosis and "the twin's sentence" in named.diagnosis

    # two kept mutants that fit as many of the student's failed checks: both said, in the candidates' order
    other = {"checks": obs["checks"], "mutant": {"exercise": "softmax", "operator": "third-op",
                                                 "sentence": "the third sentence"}}
    both = {k: {**obs, "mutant": {kk: v for kk, v in obs["mutant"].items() if kk != "also"}},
            mutations.key("softmax", 99): other}
    named = judge_exercise(module, L01.exercise("softmax"), student, ref["softmax"], both, gpu=False)
    assert "the first sentence" in named.diagnosis and "the third sentence" in named.diagnosis
    alone = judge_exercise(module, L01.exercise("softmax"), student, ref["softmax"],
                           {k: both[k]}, gpu=False)
    assert alone.diagnosis == "the first sentence"  # one change that fits: said alone, as before


def test_changes_said_together_come_in_the_candidates_order_whichever_was_found_first():
    """A follow-up can find an earlier candidate after a later one (the reference child's budget reached the later
    on this machine): the sentences are said in the candidates' order, and the id is the earliest's, so a faster
    machine or another seat says the same words."""
    from graders.engine.diagnosis import _Reproduced
    from graders.engine.kinds import diagnosis_id

    late_first = {"operator": "op-b", "sentence": "B", "n": 5,
                  "also": [{"operator": "op-a", "sentence": "A", "n": 2}, {"operator": "op-c", "sentence": "C", "n": 9}]}
    early_first = {"operator": "op-a", "sentence": "A", "n": 2,
                   "also": [{"operator": "op-c", "sentence": "C", "n": 9}, {"operator": "op-b", "sentence": "B", "n": 5}]}
    said = [_Reproduced(m).message for m in (late_first, early_first)]
    assert said[0] == said[1] == "A (or, with the same outputs on every input checked: B; or C)"
    assert diagnosis_id(said[0]) == diagnosis_id(said[1]) == "mutation:op-a"
