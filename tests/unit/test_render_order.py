"""The first failing check a student sees is the one that explains (issue 44 item 4): among failures of one
rank (what stops the code, shape, dtype, exceptions, values) a part's "fix `X` first" leads, a check the
lesson declared comes before the same property on other inputs (hidden twin, drawn domain, input battery), a
rule stated about the result (rows summing to 1, a mask respected) before a comparison with a reference, and
a forward comparison before a gradient one; ties keep the declared order, so the order is deterministic.
And a fact is never shown under "Likely mistake"."""

from __future__ import annotations

import itertools

from course_cli.render import exercise_html, exercise_plain, failing_checks, first_failure, summary_parts
from graders.engine.results import HIDDEN_MESSAGE, CheckResult, ExerciseResult

COMPARE = ("output differs from the reference at 120 of 120 positions: max abs error 1.58 at index (1, 1, 2, 0) "
           "(expected 0.1, got 0.9), max rel error 3; first bad index (0, 0, 0, 0) (expected 0.2, got 0.3)")
ROWS = "each query's weights over the keys (the last axis) should sum to 1; the sums range from 0.22 to 1.39"
MASK = "weights (causal mask): 40 masked positions (mask False) got a nonzero or NaN weight, first at (0, 0, 0, 3)"
GRAD = ("gradient of q differs from the reference at 48 of 48 positions: max abs error 0.65 at index (0, 3, 4) "
        "(expected 0.1, got 0.2), max rel error 2; first bad index (0, 0, 0) (expected 0.1, got 0.2)")


def _ex(*checks, status="failed") -> ExerciseResult:
    return ExerciseResult("scaled_dot_product_attention", status, 0.0, 3.0, list(checks))


def _c(name, message, status="failed", failure="values") -> CheckResult:
    return CheckResult(name, status, message=message, failure=failure)


def test_a_rule_about_the_result_leads_over_a_comparison_with_the_reference():
    # softmax over the queries: the comparison is declared first, the rows-sum-to-1 rule names what broke
    ex = _ex(_c("Tq ≠ Tk and dv ≠ dk", COMPARE), _c("each query's weights sum to 1", ROWS),
             _c("gradients match", GRAD))
    assert first_failure(ex).name == "each query's weights sum to 1"
    assert [c.name for c in failing_checks(ex)] == ["each query's weights sum to 1", "Tq ≠ Tk and dv ≠ dk",
                                                    "gradients match"]
    assert summary_parts(ex, "lesson01")[0][1].startswith("each query's weights sum to 1: ")


def test_a_mask_rule_leads_over_a_whole_module_comparison():
    whole = _c("agrees with F.scaled_dot_product_attention", "output (masked) (against F.scaled_dot_product_"
               "attention) has 32 NaN values where the reference has numbers; first at index (0, 0, 1, 0)")
    ex = _ex(whole, _c("boolean mask: True means may attend", MASK))
    assert first_failure(ex).name == "boolean mask: True means may attend"


def test_what_a_bad_input_must_raise_and_a_shape_against_the_expected_one_are_not_rules_about_the_result():
    raises = _c("ValueError for a checkpoint of another size", "loading a checkpoint with n_embd=40 into a model "
                "with n_embd=32 should raise ValueError, but it raised RuntimeError: size mismatch")
    copied = _c("dropout after fc2", "the test weights could not be copied into your module: `fc1.weight` has "
                "shape (96, 24), expected (48, 24)")
    ex = _ex(_c("every weight lands in place", COMPARE), raises, copied)
    assert [c.name for c in failing_checks(ex)] == ["every weight lands in place", raises.name, copied.name]


def test_a_forward_comparison_leads_over_a_gradient_comparison():
    ex = _ex(_c("gradients match", GRAD), _c("matches the reference on random inputs", COMPARE))
    assert first_failure(ex).name == "matches the reference on random inputs"


def test_a_declared_check_leads_over_the_same_property_on_other_inputs():
    twin = _c("boolean mask: True means may attend (fresh inputs)", MASK)
    battery = _c("a batch of 1", "with a batch of one (the inputs' leading axis has size 1) the result must keep "
                 "that axis: " + MASK)
    domain = _c("over its declared domain (drawn examples, the simplest failure shown)",
                "fails for T=1 (3 of 30 drawn examples fail): " + MASK)
    hidden = _c("tiny inputs (scaled by 1e-4)", HIDDEN_MESSAGE.format(prop="matches the reference"))
    declared = _c("Tq ≠ Tk and dv ≠ dk", COMPARE)
    ex = _ex(twin, battery, domain, hidden, declared)
    assert first_failure(ex).name == "Tq ≠ Tk and dv ≠ dk"


def test_a_part_that_fails_first_leads():
    part = _c("what it calls is written", "your `MultiHeadAttention` calls `split_heads`, which is not written "
              "yet (it raises NotImplementedError): fix `split_heads` first")
    ex = _ex(_c("each query's weights sum to 1", ROWS), part)
    assert first_failure(ex).name == "what it calls is written"


def test_what_stops_the_code_and_a_wrong_shape_still_come_first():
    shape = _c("need_weights=True returns per-head weights", "weights have shape (2, 5, 7), expected (2, 4, 5, 7)",
               failure="shape")
    error = _c("any number of leading dims", "RuntimeError: size mismatch", status="error", failure="exception")
    ex = _ex(_c("each query's weights sum to 1", ROWS), error, shape)
    assert [c.name for c in failing_checks(ex)][:2] == [shape.name, error.name]


def test_the_order_is_the_same_whatever_order_equal_checks_come_in_and_ties_keep_the_declared_order():
    checks = [_c("rows", ROWS), _c("mask", MASK), _c("compare", COMPARE), _c("grad", GRAD),
              _c("twin (fresh inputs)", MASK)]
    orders = {tuple(c.name for c in failing_checks(_ex(*p)))[:1] for p in itertools.permutations(checks)}
    assert len(orders) == 2  # rows or mask first, as declared: both state a rule about the result
    assert [c.name for c in failing_checks(_ex(*checks))] == ["rows", "mask", "compare", "grad",
                                                               "twin (fresh inputs)"]


# ----------------------------------------------------------------------------------------------
# A fact is never a likely mistake


def _diagnosed(text: str, ident: str | None) -> ExerciseResult:
    ex = _ex(_c("Tq ≠ Tk and dv ≠ dk", COMPARE))
    ex.diagnosis, ex.diagnosis_id = text, ident
    return ex


FACT = "`output` (all its values) are 2× the reference's on every failing input"
CAUSE = "the scores are divided by dk instead of √dk"
LIKELY, FACTS = "Likely mistake: ", "What the numbers show: "


def test_a_fact_is_said_under_its_own_label_in_every_rendering():
    for ident in ("fact:scale", None):  # None: a results file written before ids were stored
        ex = _diagnosed(FACT, ident)
        labels = [label for label, _, _ in summary_parts(ex, "lesson01")]
        assert FACTS in labels and LIKELY not in labels
        plain, page = exercise_plain(ex, "lesson01"), exercise_html(ex, "lesson01", figures=False)
        assert "Likely mistake" not in plain and "What the numbers show: " + FACT in plain
        assert "Likely mistake" not in page and 'class="facts"' in page and "What the numbers show:" in page


def test_a_reproduced_cause_keeps_the_likely_mistake_label():
    for ident in ("divide_by_dk", "mutation:scale-linear", "structural:nan-rows"):
        ex = _diagnosed(CAUSE, ident)
        assert "Likely mistake: " + CAUSE in exercise_plain(ex, "lesson01")
        assert 'class="likely"' in exercise_html(ex, "lesson01", figures=False)


def test_a_structural_statement_that_is_not_a_cause_is_a_fact():
    ex = _diagnosed("`output` is the reference transposed", "structural:transposed")
    assert "What the numbers show: " in exercise_plain(ex, "lesson01")


def test_gradescope_and_classroom_feedback_use_the_same_labels(tmp_path):
    import json

    from course_cli.instructor.classroom import verdict
    from course_cli.instructor.gradescope import _feedback

    assert "What the numbers show: " + FACT in _feedback(_diagnosed(FACT, "fact:scale"))
    assert "Likely mistake" not in _feedback(_diagnosed(FACT, "fact:scale"))
    assert "Likely mistake: " + CAUSE in _feedback(_diagnosed(CAUSE, "divide_by_dk"))
    path = tmp_path / "lesson01.json"
    path.write_text(json.dumps({"exercises": [_diagnosed(FACT, "fact:scale").to_dict()]}))
    code, text = verdict(path, "scaled_dot_product_attention")
    assert code == 1 and "What the numbers show: " in text and "Likely mistake" not in text


def test_the_class_report_labels_facts_as_facts():
    from course_cli.instructor.report import misconception_label

    assert misconception_label("fact:scale", None) == "fact: scale"
    assert misconception_label("structural:transposed", None) == "fact: transposed"
    assert misconception_label("structural:nan-rows", None) == "nan-rows (structural)"
    assert misconception_label("mutation:scale-twice", None) == "scale-twice (reproduced edit)"
    assert misconception_label("divide_by_dk", None) == "divide_by_dk"


def test_of_two_alike_failures_the_one_on_the_smaller_input_leads():
    # two declared comparisons with the reference: the one that observed fewer values leads, whatever the
    # declared order; a check whose size is unknown (0) comes after both
    big, small, unknown = (CheckResult(n, "failed", message=COMPARE, failure="values", size=s)
                           for n, s in (("batch of 4, T=64", 4 * 64 * 16), ("T=3", 3 * 16), ("odd sizes", 0)))
    for order in itertools.permutations([big, small, unknown]):
        assert [c.name for c in failing_checks(_ex(*order))] == ["T=3", "batch of 4, T=64", "odd sizes"]
    # size orders only what is otherwise alike: a rule about the result still leads over a smaller comparison
    rows = CheckResult("each query's weights sum to 1", "failed", message=ROWS, size=10**6)
    assert first_failure(_ex(small, rows)).name == rows.name


def test_the_size_travels_through_json_and_a_hidden_check_keeps_none_of_it():
    from course_cli.classes.journal import checked_result, result_to_dict
    from graders.engine.results import LessonResult, for_students
    from graders.registry import find_lesson
    import json

    lesson = find_lesson("lesson01")
    ex = lesson.exercises[0]
    shown = CheckResult("T=3", "failed", message=COMPARE, failure="values", size=48)
    hidden = CheckResult("T=3 (fresh inputs)", "failed", message=COMPARE, failure="values", size=4096,
                         hidden="T=3")
    res = LessonResult("lesson01", "nb.ipynb", [ExerciseResult(ex.name, "failed", 0.0, float(ex.points),
                                                               [shown, hidden])])
    back = checked_result(json.dumps(result_to_dict(res)), lesson)
    assert [c.size for c in back.exercises[0].checks] == [48, 4096]
    assert [c.size for c in for_students(res).exercises[0].checks] == [48, 0]
    bad = result_to_dict(res)
    bad["exercises"][0]["checks"][0]["size"] = -1
    try:
        checked_result(json.dumps(bad), lesson)
    except ValueError as exc:
        assert "negative size" in str(exc)
    else:
        raise AssertionError("a negative size was taken")
