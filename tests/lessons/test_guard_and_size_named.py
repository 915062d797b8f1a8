"""The appended families of graders/engine/mutations_shape.py, graded in process with the engine's mutants (issue 44
item 2): an argument's validation missing or off by one at its limit (`guard`), a size read from another tensor
or axis (`sizeof`), a reduction along `dim` run over the whole tensor (`axis-whole`). Each planted mistake is
named by its family's sentence; its near miss (the same change plus an unrelated one) is named by no mutant."""

from __future__ import annotations

from graders.engine import solved_cell
from graders.registry import find_lesson
from harness import check_one, with_code


def _edit(src: str, old: str, new: str) -> str:
    assert src.count(old) == 1, old
    return src.replace(old, new)


def _graded(lesson_id: str, exercise: str, src: str, tmp_path, name: str, named: str | None = None):
    """The exercise graded with `src` in place; `named`: the diagnosis id it must fail with."""
    lesson = find_lesson(lesson_id)
    ex = check_one(lesson, with_code(lesson, exercise, src, tmp_path, name), exercise, mutants=True)
    assert ex.status == "failed"
    if named:
        assert ex.diagnosis_id == named, (ex.diagnosis_id, ex.diagnosis)
    return ex


def test_a_missing_validation_is_named_and_its_near_miss_is_not(tmp_path):
    src = solved_cell("lesson06", "rope_inv_freq")
    guard = ("    if method not in (\"none\", \"linear\", \"ntk\"):\n"
             "        raise ValueError(f\"method must be 'none', 'linear' or 'ntk', got method={method!r}\")\n")
    planted = _edit(src, guard, "")
    ex = _graded("lesson06", "rope_inv_freq", planted, tmp_path, "a.ipynb", "mutation:guard-missing")
    assert "`method`" in ex.diagnosis and "ValueError" in ex.diagnosis
    # the near miss: the same validation gone, and the linear stretch divides by the square of the scale
    near = _edit(planted, "inv_freq = inv_freq / scale", "inv_freq = inv_freq / scale ** 2")
    ex = _graded("lesson06", "rope_inv_freq", near, tmp_path, "b.ipynb")
    assert not str(ex.diagnosis_id or "").startswith("mutation:"), ex.diagnosis


def test_a_bound_off_by_one_says_which_way_and_its_near_miss_is_not_named(tmp_path):
    src = solved_cell("lesson10", "LlamaConfig")
    planted = _edit(src, "if self.window is not None and self.window < 1:",
                    "if self.window is not None and self.window <= 1:")
    ex = _graded("lesson10", "LlamaConfig", planted, tmp_path, "c.ipynb", "mutation:guard-boundary")
    assert "`self.window` exactly at its limit `1`" in ex.diagnosis and "is rejected, where the text accepts it: the validation's bound is too strict there" in ex.diagnosis
    # under a `not`, the same flip accepts the value at the limit
    flipped = _edit(src, "if not self.norm_eps > 0:", "if not self.norm_eps >= 0:")
    ex = _graded("lesson10", "LlamaConfig", flipped, tmp_path, "d.ipynb", "mutation:guard-boundary")
    assert "`self.norm_eps` exactly at its limit `0`" in ex.diagnosis and "is accepted, where the text rejects it" in ex.diagnosis
    # a bound off by two is rejected at the limit too, and the sentence claims no more than that
    two = _edit(src, "if self.window is not None and self.window < 1:", "if self.window is not None and self.window < 3:")
    ex = _graded("lesson10", "LlamaConfig", two, tmp_path, "e.ipynb")
    assert "off by one" not in (ex.diagnosis or "")
    # the near miss: the same flip, raising a message that no longer names the field (another observation on the
    # same input); nothing is named
    near = _edit(planted, 'raise ValueError(f"window must be None or a positive integer, got {self.window!r}")',
                 'raise ValueError("bad configuration")')
    ex = _graded("lesson10", "LlamaConfig", near, tmp_path, "f.ipynb")
    assert not str(ex.diagnosis_id or "").startswith("mutation:"), ex.diagnosis


def test_a_size_from_another_axis_is_named_and_its_near_miss_is_not(tmp_path):
    src = solved_cell("lesson01", "scaled_dot_product_attention")
    planted = _edit(src, "d_k = q.shape[-1]", "d_k = q.shape[-2]")
    ex = _graded("lesson01", "scaled_dot_product_attention", planted, tmp_path, "h.ipynb", "mutation:sizeof-other")
    assert "q's axis -2" in ex.diagnosis
    near = _edit(planted, "return weights @ v, weights", "return weights @ v, weights * 1.5")
    ex = _graded("lesson01", "scaled_dot_product_attention", near, tmp_path, "g.ipynb")
    assert not str(ex.diagnosis_id or "").startswith("mutation:"), ex.diagnosis
