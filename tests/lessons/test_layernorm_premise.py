"""Lesson 04's LayerNorm invariance check, LN(a·x + b) = LN(x), says that the statistics span more than the row
only when its premise holds on the check's own inputs (issue 44): row (0, 0) normalised alone differs from the
same row inside the batch. Otherwise it states which of the shift and the scale alone changes the output. A
LayerNorm that never subtracts the mean keeps its rows independent: it used to be told "the mean and variance must
be each row's own", the wrong line. Graded in process (tests/harness.py), as the reference child grades."""

from __future__ import annotations

from graders.engine import solved_cell
from graders.registry import find_lesson
from harness import check_one, mistakes_of, with_code, with_mistake

L04 = find_lesson("lesson04")
CHECK = "LN(a·x + b) = LN(x) for a > 0"
SPANS = "uses more than that row's own features"
MEAN = "    out = (x - mean) / torch.sqrt(var + eps)  # (..., D)"


def _affine_message(ex) -> str:
    (check,) = [c for c in ex.checks if c.name == CHECK]
    assert check.status == "failed", (check.status, [c.name for c in ex.checks if c.status == "failed"])
    return check.message


def _variant(tmp_path, old: str, new: str):
    src = solved_cell(L04.id, "layer_norm")
    assert src.count(old) == 1, old
    return check_one(L04, with_code(L04, "layer_norm", src.replace(old, new), tmp_path), "layer_norm")


def test_a_layernorm_that_keeps_the_mean_is_told_the_shift_changes_it_not_that_its_rows_mix(tmp_path):
    msg = _affine_message(_variant(tmp_path, MEAN, "    out = x / torch.sqrt(var + eps)  # (..., D)"))
    assert "Shifting each row by b alone changes it too; scaling each row by a alone does not." in msg, msg
    assert SPANS not in msg and "each row's own" not in msg, msg


def test_a_layernorm_divided_by_the_variance_is_told_the_scale_changes_it(tmp_path):
    msg = _affine_message(_variant(tmp_path, MEAN, "    out = (x - mean) / (var + eps)  # (..., D)"))
    assert "Shifting each row by b alone does not; scaling each row by a alone changes it too." in msg, msg
    assert SPANS not in msg, msg


def test_statistics_over_other_rows_are_named_where_the_row_alone_differs(tmp_path):
    told = 0
    for m in [m for m in mistakes_of(L04) if m.exercise == "layer_norm" and m.id in ("batch_dim", "all_dims")]:
        msg = _affine_message(check_one(L04, with_mistake(L04, m, tmp_path), m.exercise))
        assert SPANS in msg, (m.id, msg)
        told += 1
    assert told == 2


def test_the_broken_rule_leads_not_a_check_whose_rule_the_code_keeps(tmp_path):
    """Issue 44 item 4: a LayerNorm that keeps the mean normalises each sample on its own, so "one sample alone =
    the same sample in a batch" fails only as a comparison with the reference; the check whose rule it breaks,
    LN(a·x + b) = LN(x), is told first (its failure kind "property"), and its message compares the code's outputs
    with each other, never calling them the reference."""
    from course_cli.render import failing_checks

    ex = _variant(tmp_path, MEAN, "    out = x / torch.sqrt(var + eps)  # (..., D)")
    first, *rest = failing_checks(ex)
    assert (first.name, first.failure) == (CHECK, "property"), [(c.name, c.failure) for c in failing_checks(ex)]
    assert "LN(a·x + b) against LN(x) differs at " in first.message and "the reference" not in first.message
    alone = next(c for c in rest if c.name == "one sample alone = the same sample in a batch")
    assert alone.failure == "values" and "the reference" in alone.message  # its rule holds: a plain comparison
    # a LayerNorm whose statistics span the batch breaks that check's own rule: said as the rule, a property
    (m,) = [m for m in mistakes_of(L04) if m.id == "batch_dim"]
    ex = check_one(L04, with_mistake(L04, m, tmp_path), m.exercise)
    alone = next(c for c in ex.checks if c.name == "one sample alone = the same sample in a batch")
    assert alone.failure == "property" and alone.message.startswith("one sample normalised on its own must give")
