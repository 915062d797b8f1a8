"""The slow half of tests/lessons/test_mutants_named.py: exercises whose mutants take longer to probe
(lesson 04's layer_norm and its autograd Function, lesson 09's flash_attention, lesson 10's filter_logits), in
process."""

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
    # lesson 09's flash_attention: its tiled loop makes about 570 000 torch calls over the candidates, each through
    # the forbidden-call recorders (15-20 s; the fast tier's costliest test when it sat there)
    ("lesson09", "diagonal_skipped", "mutation:ends-swapped"),
]


@pytest.mark.parametrize("lesson_id,mid,want", SLOW, ids=[c[1] for c in SLOW])
def test_a_withheld_catalogue_mistake_is_named_by_a_mutant(lesson_id, mid, want, tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "lessons"))
    from test_mutants_named import named_by_a_mutant

    named_by_a_mutant(lesson_id, mid, want, tmp_path)

