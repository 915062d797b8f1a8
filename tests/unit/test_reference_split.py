"""A cached reference keeps each exercise's mistakes in a file of its own, read only when that exercise fails
(issue 44's cost: lesson 10's 192 mistakes took 3.4 s to read whole on every check, passing or not).

The cache is written from observations computed in this process (tests/harness.py: the child's own runner), so
no sandbox starts here; course_cli/sandboxed/grading.py reads it back as a check does."""

from __future__ import annotations

import pickle

import pytest

import harness
from course_cli.sandboxed import grading
from graders.engine.verdict import StudentRun, judge_lesson
from graders.registry import find_lesson

L01 = find_lesson("lesson01")


@pytest.fixture(scope="module")
def observations():
    module = __import__(L01.module, fromlist=["MISTAKES"])
    _, ref = harness.reference(L01)
    mistakes = {m.id: harness.mistake_observations(L01, m) for m in module.MISTAKES}
    mistakes.update(harness.mutant_observations(L01, "softmax"))
    return module, ref, mistakes


def _cache(tmp_path, observations):
    module, ref, mistakes = observations
    path = tmp_path / "lesson01-cpu-key.pt"
    grading._write_cache(L01, path, {"exercises": ref, "mistakes": mistakes, "mutation": {}}, {})
    return path


def _judge(module, reference, student_obs):
    return judge_lesson(L01, module, StudentRun(student_obs, []), reference.exercises, reference.mistakes_of, [])


def test_each_exercise_s_mistakes_go_to_a_file_of_their_own(tmp_path, observations):
    module, ref, mistakes = observations
    path = _cache(tmp_path, observations)
    names = {m.exercise for m in module.MISTAKES}
    assert names == {e.name for e in L01.exercises}
    for name in names:
        own = grading._read_mistakes(grading._mistakes_path(path, name))
        assert set(own) == {k for k in mistakes if k in {m.id for m in module.MISTAKES if m.exercise == name}
                            or k.startswith(f"mutant:{name}:")}
    reference = grading.Reference.finish(L01, path, None)
    assert reference.mistakes == {} and set(reference.unread) == names


def test_a_passing_check_reads_no_mistake_and_a_failing_one_only_its_exercise_s(tmp_path, observations):
    module, ref, mistakes = observations
    reference = grading.Reference.finish(L01, _cache(tmp_path, observations), None)
    result = _judge(module, reference, ref)
    assert all(e.status == "passed" for e in result.exercises)
    assert set(reference.unread) == {e.name for e in L01.exercises}  # nothing read

    no_max = next(m for m in module.MISTAKES if m.id == "no_max")
    student = {**ref, no_max.exercise: harness.mistake_observations(L01, no_max)}
    result = _judge(module, reference, student)
    failed = [e for e in result.exercises if e.status != "passed"]
    assert [e.id for e in failed] == [no_max.exercise] and failed[0].diagnosis_id == "no_max"
    assert set(reference.unread) == {e.name for e in L01.exercises} - {no_max.exercise}
    # the same verdict and diagnosis as from every mistake held in memory
    whole = judge_lesson(L01, module, StudentRun(student, []), ref, mistakes, [])
    assert result.to_dict() == whole.to_dict()


def test_a_damaged_mistakes_file_costs_the_diagnosis_never_the_verdict(tmp_path, observations):
    module, ref, mistakes = observations
    path = _cache(tmp_path, observations)
    reference = grading.Reference.finish(L01, path, None)
    no_max = next(m for m in module.MISTAKES if m.id == "no_max")
    grading._mistakes_path(path, no_max.exercise).write_bytes(b"not an archive")
    student = {**ref, no_max.exercise: harness.mistake_observations(L01, no_max)}
    (res,) = [e for e in _judge(module, reference, student).exercises if e.id == no_max.exercise]
    assert res.status == "failed" and res.diagnosis_id != "no_max"
    assert not path.exists()  # the next check computes the reference afresh


def test_a_missing_mistakes_file_makes_the_cache_unusable(tmp_path, observations, monkeypatch):
    path = _cache(tmp_path, observations)
    grading._mistakes_path(path, "softmax").unlink()
    started = []
    monkeypatch.setattr(grading.Reference, "start", lambda *a, **k: started.append(a) or (None, None))
    import types

    recomputed = types.SimpleNamespace()  # (what the recomputation made: this process's own reference)
    recomputed.for_one_grading = lambda: recomputed  # (one grading's copy of it: itself, to be recognised)
    monkeypatch.setattr(grading, "_TRUSTED", {(L01.id, "cpu", grading.settings.hidden_seed()): recomputed})
    assert grading.Reference.finish(L01, path, None) is recomputed and started and not path.exists()


def test_a_pickled_reference_carries_every_mistake_and_no_path(tmp_path, observations):
    _, _, mistakes = observations
    reference = grading.Reference.finish(L01, _cache(tmp_path, observations), None)
    copy = pickle.loads(pickle.dumps(reference))
    assert copy.unread == {} and set(copy.mistakes) == set(mistakes)


def test_probing_from_a_later_candidate_gives_the_same_observations_and_says_where_it_stopped():
    """What a follow-up probes (course_cli/sandboxed/grading.py follow_up): from candidate `start` on, each
    kept candidate's observations are the full run's; counts["next"] is past the last."""
    from graders.engine.mutations import _identical, probe_mutants

    module = __import__(L01.module, fromlist=["CHECKS"])
    ns, ref = harness.reference(L01)
    configs = harness._configs(module)
    full, counts = probe_mutants(module, ns, "softmax", configs, ref["softmax"], budget=float("inf"))
    start = counts["candidates"] // 2
    later, later_counts = probe_mutants(module, ns, "softmax", configs, ref["softmax"], budget=float("inf"),
                                        start=start)
    assert later and later_counts["start"] == start and later_counts["next"] == counts["candidates"]
    assert later_counts["tried"] + later_counts["broken"] == counts["candidates"] - start
    for k, obs in later.items():
        assert int(k.rsplit(":", 1)[1]) >= start
        assert k in full and _identical(obs["checks"], full[k]["checks"]) or \
            any(_identical(obs["checks"], f["checks"]) for f in full.values())  # merged into an earlier one there
    # a budget that runs out says where the follow-up goes on
    none, none_counts = probe_mutants(module, ns, "softmax", configs, ref["softmax"], budget=0)
    assert none == {} and none_counts["skipped"] == none_counts["candidates"] and none_counts["next"] == 0
    reference = grading.Reference({}, {}, mutation={"softmax": none_counts, "scaled_dot_product_attention": counts})
    assert reference.next_candidate("softmax") == 0 and reference.next_candidate("scaled_dot_product_attention") is None


def test_a_child_that_died_on_a_candidate_keeps_what_came_before_and_goes_on_after_it():
    """mutants.json as a reference child leaves it when a candidate kills it (a Triton kernel writing out of bounds
    under the interpreter: lesson 05's rms_norm_triton, probed past the budget): the exercise it died in counts
    that candidate broken and goes on after it; finished exercises stand; nothing else is a death."""
    report = {"rms_norm": {"candidates": 17, "tried": 17, "skipped": 0, "next": 17, "done": True},
              "rms_norm_triton": {"candidates": 27, "tried": 3, "kept": 2, "broken": 0, "skipped": 24, "at": 3,
                                  "done": False}}
    counts, died = grading._mutation_progress(report)
    assert died == ["rms_norm_triton"]
    assert counts["rms_norm_triton"]["next"] == 4 and counts["rms_norm_triton"]["skipped"] == 23
    assert counts["rms_norm_triton"]["broken"] == 1 and counts["rms_norm"] == report["rms_norm"]
    assert grading.Reference({}, {}, mutation=counts).next_candidate("rms_norm_triton") == 4
    assert grading._mutation_progress({"rms_norm": report["rms_norm"]})[1] == []
    assert grading._mutation_progress("not a report") == ({}, [])


def test_one_grading_s_copy_shares_the_observations_and_owns_what_a_grading_writes(tmp_path, observations):
    """`Reference.for_one_grading` (each warm check's and each class-graded student's copy): the tensors are the
    reference's own objects (judging only reads them: test_reference_untouched.py), the dicts a grading writes
    (an exercise's or a mistake's "checks", the mistakes, the counts) are the copy's, and `origin` is the
    reference, which a follow-up's mutants reach too."""
    import torch

    reference = grading.Reference.finish(L01, _cache(tmp_path, observations), None)
    mine = reference.for_one_grading()
    assert mine.origin is reference and mine.unread == {} and reference.unread == {}  # (read whole first)
    for ours, theirs in ((mine.exercises, reference.exercises), (mine.mistakes, reference.mistakes)):
        assert ours.keys() == theirs.keys() and ours is not theirs
        for k in theirs:
            if isinstance(theirs[k].get("checks"), dict):
                assert ours[k]["checks"] is not theirs[k]["checks"]
                for key, obs in theirs[k]["checks"].items():
                    assert ours[k]["checks"][key] is obs  # shared, not copied
    shared = [v for e in reference.exercises.values() for o in e["checks"].values() if isinstance(o, dict)
              for v in o.values() if isinstance(v, torch.Tensor)]
    assert shared  # (the assertions above looked at tensors)
    exercise = next(iter(mine.exercises))
    mine.exercises[exercise]["checks"]["a GPU check"] = {}  # what Grading._add_gpu writes
    mine.mistakes["mutation:softmax:999"] = {"checks": {}}  # what a follow-up adds (to the origin too, itself)
    mine.mutation["softmax"] = {"candidates": 1}
    assert "a GPU check" not in reference.exercises[exercise]["checks"]
    assert "mutation:softmax:999" not in reference.mistakes and "softmax" not in reference.mutation
