"""Feedback a student takes in at a glance: one failure, one message; structural diagnoses; cascades;
the notebook's HTML; the terminal commands as a student types them (issue 17)."""

from __future__ import annotations

import io
import statistics

import pytest
from rich.console import Console

from course_cli import render
from graders.registry import find_lesson
from graders.engine.results import CheckResult, ExerciseResult, LessonResult

TOL = "atol=1e-05, rtol=1e-04 (float32, with room for a different order of summation; on cpu)"
VALUES = ("output differs from the reference at 119 of 120 positions: max abs error 0.4684 at index (0, 0, 0, 4) "
          "(expected -0.5913, got -0.1229), max rel error 69.78; first bad index (0, 0, 0, 0) (expected 1.266, "
          f"got 0.8743); tolerance {TOL}")


def printed(result: LessonResult, width: int = 80, **kw) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, no_color=True, highlight=False, soft_wrap=False)
    render.render_result(console, result, find_lesson(result.lesson).title, **kw)
    return buf.getvalue()


def flat(text: str) -> str:
    return " ".join(text.split())


def lesson01(sdpa_checks, diagnosis=None, status="failed") -> LessonResult:
    return LessonResult("lesson01", "lessons/lesson01_sdpa.ipynb", [
        ExerciseResult("softmax", "passed", 4, 4, [CheckResult("sums to 1", "passed")]),
        ExerciseResult("scaled_dot_product_attention", status, 0, 6, sdpa_checks, diagnosis)])


# ------------------------------------------------------------------------------------------------
# 1. One failure, one message


def test_shape_is_told_before_an_exception_and_values():
    checks = [CheckResult("values", "failed", message=VALUES, failure="values"),
              CheckResult("gradients match", "error", message="RuntimeError: grad can be implicitly created only "
                                                              "for scalar outputs", failure="exception"),
              CheckResult("Tq ≠ Tk", "failed", message="output has shape (2, 3, 4, 6), expected (2, 3, 4, 5)",
                          failure="shape"),
              CheckResult("dtype", "failed", message="output has dtype float64, expected float32 (keep the "
                                                     "input's dtype)", failure="dtype")]
    ex = ExerciseResult("scaled_dot_product_attention", "error", 0, 6, checks)
    order = [c.name for c in render.failing_checks(ex)]
    assert order == ["Tq ≠ Tk", "dtype", "gradients match", "values"]
    out = printed(lesson01(checks, status="error"))
    assert "output has shape (2, 3, 4, 6), expected (2, 3, 4, 5)" in out
    assert "RuntimeError" not in out  # told once, under --detail
    assert "3 more checks failed: course check lesson01 scaled_dot_product_attention --detail" in flat(out)


def test_tolerance_is_said_once_and_the_message_once():
    checks = [CheckResult(f"check {i}", "failed", message=VALUES) for i in range(5)]
    out = printed(lesson01(checks, "the scores are divided by dk instead of √dk"))
    assert out.count("atol=1e-05") == 1
    assert out.count("differs at 119 of 120 positions") == 1
    assert out.count("Likely mistake") == 1 and "√dk" in out
    assert "4 more checks failed" in out


def test_detail_lists_every_failing_check_and_the_same_error_once():
    checks = [CheckResult(f"check {i}", "error", message=f"RuntimeError: size of tensor a ({i + 2}) must match")
              for i in range(6)]
    out = printed(lesson01(checks, status="error"), detail=True)
    assert all(f"check {i}" in out for i in range(6))
    assert out.count("RuntimeError") == 2  # the summary's and the detail's one group of six
    assert "6 checks, the same message" in flat(out)


def test_narrow_terminals_stack_and_wide_ones_get_a_table():
    checks = [CheckResult("values", "failed", message=VALUES)]
    narrow, wide = printed(lesson01(checks), 60), printed(lesson01(checks), 120)
    assert "┃" not in narrow and "┃" in wide
    assert max(len(l.rstrip()) for l in narrow.splitlines()) <= 60
    # the message is wrapped at words into the width, not squeezed into a few characters per line
    message = [l for l in narrow.splitlines() if l.startswith("  ") and l.strip()]
    assert len(message) >= 2 and max(len(l.rstrip()) for l in message) > 50


def test_values_message_is_one_sentence_with_the_first_bad_index():
    assert render.shorten(render.split_tolerance(VALUES)[0]) == (
        "output differs at 119 of 120 positions; first at (0, 0, 0, 0): expected 1.266, got 0.8743 "
        "(max abs error 0.4684)")
    assert render.split_tolerance(VALUES)[1] == TOL


def test_points_are_singular_for_one():
    assert render.plural(1, "point") == "1 point" and render.plural(2, "point") == "2 points"
    ex = ExerciseResult("to_additive", "passed", 1, 1, [])
    assert "(1/1 point)" in render.exercise_plain(ex, "lesson02") and "1 points" not in render.exercise_html(ex, "lesson02")


# ------------------------------------------------------------------------------------------------
# 2. Structural diagnoses, on planted answers


def _ref(*shape, seed=0):
    import torch

    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_structural_transposed_and_permuted_axes():
    from graders.engine.diagnosis import explain

    e = _ref(2, 3, 4, 4)
    assert "with its last two axes swapped" in explain(e.transpose(-2, -1), e, "weights")
    e = _ref(2, 3, 4, 5)
    assert "every axis reversed" in explain(e.permute(3, 2, 1, 0), e) and "transpose(-2, -1)" in explain(e.permute(3, 2, 1, 0), e)
    assert "permute(0, 2, 1, 3)" in explain(e.permute(0, 2, 1, 3), e)


def test_structural_constant_factor_named_and_constant_shift():
    """A factor (or shift) is said as a fact about every failing check of the exercise, never from one
    tensor alone (tests/unit/test_structural_near_miss.py plants the near misses)."""
    import math

    from graders.engine import CPU, Check
    from graders.engine.diagnosis import explain, explain_exercise, relation, simple_factor
    from graders.engine.compare import tolerance
    from graders.engine.results import CheckResult

    e = _ref(3, 4, 5)
    tol = tolerance("float32")
    assert relation(e / math.sqrt(8), e, tol)[0] == "×" and abs(relation(e / math.sqrt(8), e, tol)[1] - 0.3536) < 1e-4
    assert explain(e * 8, e) is None  # one tensor cannot show the factor holds on every failing input
    checks = [Check("f", "a", None, None, CPU)]
    results = [CheckResult("a", "failed", message="differs")]
    msg = explain_exercise(checks, {"a @ cpu/float32": {"output": e / math.sqrt(8)}},
                           {"a @ cpu/float32": {"output": e}}, results)
    assert "0.3536× (= 1/√8) the reference's on every failing input" in msg
    msg = explain_exercise(checks, {"a @ cpu/float32": {"output": e + 0.5}}, {"a @ cpu/float32": {"output": e}},
                           results)
    assert "the reference's +0.5 on every failing input" in msg
    assert simple_factor(0.125) == "1/8" and simple_factor(0.7) is None


def test_structural_right_except_at_masked_positions():
    import torch

    from graders.engine.diagnosis import explain

    scores = _ref(2, 5, 7)
    mask = torch.ones(5, 7, dtype=torch.bool).tril(2)
    e = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    leaky = e.clone()
    leaky[~mask.expand_as(e)] = 0.05  # masked weights leak; the allowed ones are right
    msg = explain(leaky, e, "weights (causal mask)", r={"mask (causal mask)": mask})
    assert f"wrong at {2 * int((~mask).sum())} of the {2 * int((~mask).sum())} masked positions" in msg
    # without a mask among the observations, the reference's exact zeros are said as a fact, no mask named
    a = e.clone()
    a[~mask.expand_as(a)] = 0.01
    msg = explain(a, e, "weights")
    assert "only at" in msg and "where the reference is exactly 0" in msg and "mask" not in msg
    # wrong only where the mask allows: the masking is right (a fact), no guess at the mask's meaning
    b = e.clone()
    b[mask.expand_as(b)] += 1
    msg = explain(b, e, "weights (causal mask)", r={"mask (causal mask)": mask})
    assert "matches the reference at every masked position" in msg and "other way round" not in msg


def test_structural_all_zeros_and_nan_rows():
    import torch

    from graders.engine.diagnosis import explain

    e = _ref(2, 4, 6)
    assert "all zeros" in explain(torch.zeros_like(e), e)
    a = e.clone()
    a[1, 2] = float("nan")
    msg = explain(a, e)
    assert "6 NaN values" in msg and "starting at index (1, 2, 0)" in msg and "1 complete rows" in msg
    assert "attend" not in msg  # no mask among the observations: no row "with nothing to attend to"
    mask = torch.ones(4, 6, dtype=torch.bool)
    mask[2] = False  # query 2 sees no key
    assert "nothing to attend to" in explain(a, e, "output", r={"mask": mask})
    b = e.clone()
    b[0, 0, 3] = float("inf")
    assert "1 Inf values" in explain(b, e) and "(0, 0, 3)" in explain(b, e)


def test_structural_wrong_dtype_and_wrong_shape_same_values():
    import torch

    from graders.engine.diagnosis import explain, explain_obs

    e = _ref(3, 4)
    assert "dtype float64 instead of float32" in explain(e.double(), e)
    assert "dtype float64" in explain_obs({"output": e.double()}, {"output": e})
    mask = torch.ones(4, 4, dtype=torch.bool).tril()
    assert "return a bool tensor" in explain(mask.float(), mask)
    assert "reversed along axis -2" in explain(e.flip(0), e)
    assert "right values in the wrong shape (12,)" in explain(e.reshape(12), e)


def test_structural_outputs_in_the_wrong_order():
    from graders.engine.diagnosis import explain_obs

    out, w = _ref(2, 4, 4, seed=1), _ref(2, 4, 4, seed=2).softmax(-1)
    msg = explain_obs({"output": w, "weights": out}, {"output": out, "weights": w})
    assert "`output` holds what `weights` should be" in msg and "wrong order" in msg


def test_structural_masks_inverted_shifted_and_too_permissive():
    import torch

    from graders.engine.diagnosis import explain

    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    assert "inverted" in explain(~causal, causal, "mask")
    assert "shifted by one" in explain(torch.ones(5, 5, dtype=torch.bool).tril(1), causal, "mask")
    wide = torch.ones(6, 6, dtype=torch.bool).tril() & ~torch.ones(6, 6, dtype=torch.bool).tril(-3)
    assert "too permissive" in explain(torch.ones(6, 6, dtype=torch.bool).tril(), wide, "mask")


def test_structural_right_only_for_the_first_tile():
    from graders.engine.diagnosis import explain

    e = _ref(2, 10, 4)
    a = e.clone()
    a[:, 8:] = 0.0  # a last partial tile (rows 8, 9 of 10) never written
    assert "matches the reference up to index 7 along axis -2" in explain(a, e)


def test_structural_right_only_when_tq_equals_tk():
    from graders.engine.diagnosis import explain_exercise
    from graders.engine import CPU, Check
    from graders.engine.results import CheckResult

    square, wide = _ref(2, 4, 4), _ref(2, 4, 6)
    checks = [Check("sdpa", "square", None, None, CPU), Check("sdpa", "Tq ≠ Tk", None, None, CPU)]
    s = {"square @ cpu/float32": {"weights": square}, "Tq ≠ Tk @ cpu/float32": {"weights": wide * 2 + 1}}
    r = {"square @ cpu/float32": {"weights": square}, "Tq ≠ Tk @ cpu/float32": {"weights": wide}}
    results = [CheckResult("square", "passed"), CheckResult("Tq ≠ Tk", "failed", message="differs")]
    assert "passes every check where Tq = Tk and fails every one where Tq ≠ Tk" in explain_exercise(checks, s, r,
                                                                                                      results)


def test_catalogued_exception_needs_the_same_message_not_only_the_same_type():
    from graders.engine.diagnosis import _strict
    from graders.engine import CPU, Check

    check = Check("sdpa", "shapes", None, None, CPU)
    err = lambda m: {"__error__": {"kind": "error", "type": "RuntimeError", "message": m}}  # noqa: E731
    k_t = err("RuntimeError: The size of tensor a (3) must match the size of tensor b (6) at non-singleton "
              "dimension 1\n  at cell 11, line 2: scores = q @ k.T")
    same_but_numbers = err("RuntimeError: The size of tensor a (3) must match the size of tensor b (6) at "
                           "non-singleton dimension 1\n  at cell 3, line 5: s = q @ k.T")  # the same, elsewhere
    other = err("RuntimeError: mat1 and mat2 shapes cannot be multiplied (12x6 and 5x4)")
    raised_by_the_probe = err("RuntimeError: The size of tensor a (5) must match the size of tensor b (3) at "
                              "non-singleton dimension 2")  # e.g. a swapped (weights, output) used by the probe
    assert _strict(check, CPU[0], same_but_numbers, k_t, {})
    assert not _strict(check, CPU[0], other, k_t, {})
    assert not _strict(check, CPU[0], raised_by_the_probe, k_t, {})
    at = lambda where: err(f"TypeError: <function f at {where}> is not a tensor")  # noqa: E731
    assert _strict(check, CPU[0], at("0x7f00aa"), at("0x7f11bb"), {})  # addresses aside


def _sdpa_with(return_line: str, tmp_path):
    from harness import grade_one, with_code

    from graders.engine import solved_cell

    lesson = find_lesson("lesson01")
    src = solved_cell("lesson01", "scaled_dot_product_attention")
    assert "return weights @ v, weights" in src
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = with_code(lesson, "scaled_dot_product_attention", src.replace("return weights @ v, weights", return_line),
                     tmp_path)
    return grade_one(lesson, path, "scaled_dot_product_attention")


# ------------------------------------------------------------------------------------------------
# 3. Cascades point back


def test_registry_depends_names_exercises_of_the_same_lesson():
    from graders.registry import LESSONS

    mha = find_lesson("lesson03").exercise("MultiHeadAttention")
    assert set(mha.depends) == {"split_heads", "merge_heads"}
    for lesson in LESSONS:
        names = [e.name for e in lesson.exercises]
        for e in lesson.exercises:
            assert set(e.depends) <= set(names[:names.index(e.name)]), (lesson.id, e.name)  # earlier ones only


def test_a_failing_dependency_is_named_first():
    bad = [CheckResult("values", "failed", message=VALUES)]
    good = [CheckResult("values", "passed")]
    result = LessonResult("lesson03", "nb", [
        ExerciseResult("split_heads", "passed", 1, 1, good),
        ExerciseResult("merge_heads", "failed", 0, 1, bad, "reshaping straight to (B, T, H·Dh) mixes positions"),
        ExerciseResult("MultiHeadAttention", "failed", 0, 4, bad * 3),
        ExerciseResult("repeat_kv", "passed", 1, 1, good),
        ExerciseResult("GroupedQueryAttention", "failed", 0, 3, bad)])
    assert render.blocked_by("lesson03", result) == {"MultiHeadAttention": ["merge_heads"],
                                                     "GroupedQueryAttention": ["merge_heads"]}
    out = printed(result)
    assert flat(out).count("fix merge_heads first") == 2
    assert "course hint lesson03 merge_heads" in out  # the next step is the root cause
    html = render.exercise_html(result.exercises[2], "lesson03", ["merge_heads"], figures=False)
    assert "fix <code>merge_heads</code> first" in html


# ------------------------------------------------------------------------------------------------
# 4. The notebook


def test_notebook_report_is_html_that_wraps_with_a_collapsed_rest():
    checks = [CheckResult("Tq ≠ Tk", "failed", message=VALUES), CheckResult("masks", "failed", message=VALUES),
              CheckResult("grads", "error", message="RuntimeError: boom")]
    ex = ExerciseResult("scaled_dot_product_attention", "error", 0, 6, checks, "the scores are divided by `dk`")
    page = render.exercise_html(ex, "lesson01", figures=False)
    assert "white-space:normal" in page and "overflow-wrap:anywhere" in page and "<pre" not in page
    assert "<details><summary>2 more checks failed</summary>" in page
    assert page.count("atol=1e-05") == 1 and "<code>dk</code>" in page
    assert "Traceback" not in page


# ------------------------------------------------------------------------------------------------
# 6. Pictures where a person would look


def _planted_mask_leak():
    import torch

    from graders.engine import CPU, Check

    mask = torch.ones(5, 7, dtype=torch.bool).tril(2)
    w = _ref(2, 5, 7).masked_fill(~mask, float("-inf")).softmax(-1)
    leaky = w.clone()
    leaky[0, 1, 4] = 0.2  # a masked cell (key 4 > query 1 + 2) that got weight
    checks = [Check("sdpa", "boolean mask", None, None, CPU)]
    key = "boolean mask @ cpu/float32"
    s = {key: {"output (causal mask)": _ref(2, 5, 3), "weights (causal mask)": leaky, "mask (causal mask)": mask}}
    r = {key: {"output (causal mask)": _ref(2, 5, 3, seed=9), "weights (causal mask)": w, "mask (causal mask)": mask}}
    return checks, s, r


def test_a_failing_matrix_carries_a_figure_with_the_leak_and_the_first_bad_cell():
    from course_cli.figures import exercise_figures
    from graders.engine.diagnosis import attach_figure

    checks, s, r = _planted_mask_leak()
    results = [CheckResult("boolean mask", "failed", message="weights differ")]
    attach_figure(checks, s, r, results)
    fig = results[0].figure
    assert fig["what"] == "weights (causal mask)"  # the weights, a matrix a person reads, before the output
    assert fig["index"] == [0] and fig["first"] == [1, 4] and fig["leaked"][1][4] == 1
    assert sum(map(sum, fig["leaked"])) == 1
    ex = ExerciseResult("scaled_dot_product_attention", "failed", 0, 6, results)
    (svg,) = exercise_figures(ex)
    assert svg.startswith("<svg") and svg.count('class="leaked"') == 3  # outlined in all three panels
    assert 'class="first-bad"' in svg and "yours" in svg and "reference" in svg and "difference" in svg
    page = render.lesson_html(LessonResult("lesson01", "nb", [ex]), "Scaled dot-product attention")
    assert page.startswith("<!doctype html>") and "<svg" in page and "http" not in page.replace(
        "http://www.w3.org/2000/svg", "")  # self-contained


def test_the_figure_is_of_the_check_told_first_and_names_another_check_when_it_is_not():
    """A rule the code's outputs break leads the report (render.failing_checks); a figure of a later comparison
    under it says whose picture it is (lesson 04's mean-keeping LayerNorm: the lead was LN(a·x + b) = LN(x), the
    picture one of the comparisons)."""
    from course_cli.figures import exercise_figures

    fig = {"student": [[1.0, 2.0]], "reference": [[1.0, 3.0]], "what": "output", "first": [0, 1]}
    rule = CheckResult("shift and scale", "failed", message="LN(a·x + b) = LN(x) for a > 0: broken", failure="property")
    comparison = CheckResult("output with weight", "failed", message="differs from the reference at 3 of 8 positions",
                             failure="values")
    comparison.figure = fig
    ex = ExerciseResult("layer_norm", "failed", 0, 4, [comparison, rule])
    told = render.failing_checks(ex)
    assert told[0] is rule  # the broken rule leads
    (svg,) = exercise_figures(ex, told)
    assert "another failing check, output with weight:" in svg
    page = render.exercise_html(ex, "lesson04")
    assert page.index("LN(a·x + b)") < page.index("<svg") and "another failing check, output with weight" in page
    rule.figure = dict(fig, what="shifted output")  # the lead has a figure: that one, and no such words
    (svg,) = exercise_figures(ex, render.failing_checks(ex))
    assert "shifted output" in svg and "another failing check" not in svg


def test_nothing_is_drawn_when_every_check_passes():
    from course_cli.figures import exercise_figures

    checks, s, r = _planted_mask_leak()
    ok = ExerciseResult("scaled_dot_product_attention", "passed", 6, 6, [CheckResult("boolean mask", "passed")])
    ok.checks[0].figure = {"student": [[1]], "reference": [[0]]}
    assert exercise_figures(ok) == [] and "<svg" not in render.exercise_html(ok, "lesson01")


# ------------------------------------------------------------------------------------------------
# 7. The terminal commands, as a student types them


def _cli(*args, **kw):
    from click.testing import CliRunner

    from course_cli.main import cli

    return CliRunner().invoke(cli, list(args), **kw)


@pytest.mark.parametrize("key", ["lesson1", "lesson01", "LESSON1", "1", "01", "sdpa"])
def test_lesson_names_a_student_types(key):
    assert find_lesson(key).id == "lesson01"


def test_not_implemented_is_one_line():
    checks = [CheckResult(f"check {i}", "not_implemented", message="not implemented yet: it raises "
                                                                    "NotImplementedError (cell 3, line 4)")
              for i in range(3)]
    ex = ExerciseResult("softmax", "not_implemented", 0, 4, checks)
    assert render.summary_parts(ex, "lesson01") == [
        ("", "not implemented yet: it raises NotImplementedError (cell 3, line 4)", "")]
    assert "more check" not in render.exercise_html(ex, "lesson01")


def test_a_misspelt_check_is_one_line_without_the_course_traceback():
    from course_cli.incell import CheckError, check

    with pytest.raises(CheckError) as info:
        check("sofmax")
    assert "did you mean 'softmax'?" in str(info.value)
    (line,) = info.value._render_traceback_()  # what IPython shows instead of a traceback
    assert "sofmax" in line and "incell.py" not in line


def test_the_failure_kind_comes_from_where_the_comparison_was_made():
    """The feedback order reads the result's kind, recorded by compare.close as it made the message, even when a
    judge wraps that message in words of its own; a message of no known origin has no kind (told last)."""
    import torch

    from graders.engine import CPU, Check, same
    from graders.engine.verdict import _verdict

    def wrapped(s, r, ctx):
        msg = same("out")(s, r, ctx)
        return f"with a mask: {msg}" if msg else None

    ref = {"out": torch.zeros(2, 3)}
    for obs, want in (({"out": torch.zeros(2, 4)}, "shape"), ({"out": torch.zeros(2, 3, dtype=torch.float64)}, "dtype"),
                      ({"out": torch.ones(2, 3)}, "values")):
        res = _verdict(Check("x", "c", None, wrapped), CPU[0], obs, ref)
        assert (res.status, res.failure) == ("failed", want), res
    plain = _verdict(Check("x", "c", None, lambda s, r, ctx: "has shape (9,), said by hand"), CPU[0], ref, ref)
    assert plain.failure == ""
