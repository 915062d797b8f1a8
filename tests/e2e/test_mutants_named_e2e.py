"""The slow half of tests/lessons/test_mutants_named.py: exercises whose mutants take longer to probe
(lesson 04's layer_norm, lesson 10's filter_logits), in process."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.slow

SLOW = [
    ("lesson04", "unbiased_variance", "mutation:variance-unbiased"),
    ("lesson04", "eps_outside_sqrt", "mutation:eps-outside-root"),
    # (lesson 04's mean_term_only, in the autograd Function layer_norm_manual delegates to, is named in process
    # with every candidate probed (benchmarks/mutation_coverage.py --withheld lesson04); in the 2 s budget per
    # exercise, with the merged engine's 40 candidates there, it is not reached: a known gap, issue 44)
    ("lesson10", "top_p_one_drops_tokens", "mutation:comparison-boundary"),
]


@pytest.mark.parametrize("lesson_id,mid,want", SLOW, ids=[c[1] for c in SLOW])
def test_a_withheld_catalogue_mistake_is_named_by_a_mutant(lesson_id, mid, want, tmp_path):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parents[1] / "lessons"))
    from test_mutants_named import named_by_a_mutant

    named_by_a_mutant(lesson_id, mid, want, tmp_path)
