"""The slow half of tests/lessons/test_mutants_named.py: exercises whose mutants take longer to probe
(lesson 04's layer_norm and its autograd Function, lesson 10's filter_logits), in process; and the probe's
reuse of the reference's observations, checked against probing every check."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

SLOW = [
    ("lesson04", "unbiased_variance", "mutation:variance-unbiased"),
    ("lesson04", "eps_outside_sqrt", "mutation:eps-outside-root"),
    # in the autograd Function layer_norm_manual hands its work to (mutations.py `helpers`): the term family's
    # sites there take the term family's turn, within the cap
    ("lesson04", "mean_term_only", "mutation:term-dropped"),
    ("lesson10", "top_p_one_drops_tokens", "mutation:comparison-boundary"),
]


@pytest.mark.parametrize("lesson_id,mid,want", SLOW, ids=[c[1] for c in SLOW])
def test_a_withheld_catalogue_mistake_is_named_by_a_mutant(lesson_id, mid, want, tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "lessons"))
    from test_mutants_named import named_by_a_mutant

    named_by_a_mutant(lesson_id, mid, want, tmp_path)


def test_reused_observations_are_what_probing_every_check_gives(monkeypatch):
    """A check that never calls the function a mutant changes gets the reference's observation, not a probe
    (mutations.py `_reach`): for layer_norm_manual's first candidates (changes in forward and in backward),
    the kept mutants and every observation are the same as with every check probed, and some were reused."""
    import importlib

    import harness
    from graders.engine import mutations as M
    from graders.engine.mistakes import solved_cell
    from graders.registry import find_lesson

    lesson = find_lesson("lesson04")
    module = importlib.import_module(lesson.module)
    ns, ref = harness.reference(lesson)
    args = (module, ns, "layer_norm_manual", harness._configs(module), ref["layer_norm_manual"])
    cands = M.mutants(solved_cell("lesson04", "layer_norm_manual"), "layer_norm_manual", cap=14)
    assert {"LayerNormFunction.forward", "LayerNormFunction.backward"} <= {m.within for m in cands}
    kept, counts = M.probe_mutants(*args, budget=float("inf"), cap=14)
    assert counts["reused"] > 0
    monkeypatch.setattr(M, "_reach", lambda *a, **k: None)
    every, counts_every = M.probe_mutants(*args, budget=float("inf"), cap=14)
    assert "reused" not in counts_every and kept.keys() == every.keys() and kept
    for k in kept:
        assert M._identical(kept[k]["checks"], every[k]["checks"]), k
        assert kept[k]["mutated"] == every[k]["mutated"] and kept[k]["mutant"] == every[k]["mutant"]
