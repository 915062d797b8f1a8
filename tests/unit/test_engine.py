"""The engine's own rules, fast and in process: known mistakes as edits of the solved source."""

from __future__ import annotations

import importlib

import pytest

from graders.engine import Mistake, mistake_source, solved_cell
from graders.registry import LESSONS

ALL_MISTAKES = [pytest.param(l, m, id=f"{l.id}-{m.id}") for l in LESSONS
                for m in importlib.import_module(l.module).MISTAKES]


@pytest.mark.parametrize("lesson, mistake", ALL_MISTAKES)
def test_every_mistake_builds_from_the_solved_source(lesson, mistake):
    """Each edit's `old` occurs exactly once (mistake_source raises otherwise), the result differs from the
    solved cell, still defines the exercise and compiles."""
    src = mistake_source(mistake, lesson.id)
    if mistake.edits:
        assert src != solved_cell(lesson.id, mistake.exercise)
    compile(src, f"<mistake {mistake.id}>", "exec", dont_inherit=True)
    assert f"def {mistake.exercise}" in src or f"class {mistake.exercise}" in src


def test_an_edit_that_does_not_match_exactly_once_is_refused():
    lesson = LESSONS[0]
    name = lesson.exercises[0].name
    with pytest.raises(ValueError, match="matches 0 times"):
        mistake_source(Mistake(name, "x", "m", edits={"no such text anywhere": "y"}), lesson.id)
    cell = solved_cell(lesson.id, name)
    common = next(tok for tok in ("(", ")", ",", "=") if cell.count(tok) > 1)
    with pytest.raises(ValueError, match=f"matches {cell.count(common)} times"):
        mistake_source(Mistake(name, "x", "m", edits={common: "y"}), lesson.id)


def test_a_mistake_is_either_edits_or_an_implementation():
    with pytest.raises(ValueError):
        Mistake("softmax", "x", "m")
    with pytest.raises(ValueError):
        Mistake("softmax", "x", "m", impl=len, edits={"a": "b"})


# ----------------------------------------------------------------------------------------------
# compare.close: what differs, said so a tensor person can act on it

import torch  # noqa: E402

from graders.engine import compare  # noqa: E402


def test_close_passes_within_tolerance_and_names_what_differs():
    e = torch.arange(6.0).view(2, 3)
    assert compare.close(e + 1e-7, e) is None
    assert "shape (3, 2), expected (2, 3)" in compare.close(e.view(3, 2), e)
    assert "dtype float64, expected float32" in compare.close(e.double(), e)
    assert compare.close(e.double(), e, check_dtype=False) is None
    assert "should be a Tensor" in compare.close([1, 2], e)
    msg = compare.close(torch.where(e == 4, torch.tensor(float("nan")), e), e)
    assert "1 NaN values" in msg and "(1, 1)" in msg
    msg = compare.close(torch.where(e == 2, torch.tensor(float("inf")), e), e)
    assert "1 infinite values" in msg and "(0, 2)" in msg
    bad = e.clone()
    bad[1, 2] += 0.5
    msg = compare.close(bad, e)
    assert "at 1 of 6 positions" in msg and "max abs error 0.5 at index (1, 2)" in msg
    assert str(compare.tolerance("float32")) in msg  # the tolerance used, and why


def test_close_on_masks_says_where():
    e = torch.tensor([[True, False], [True, True]])
    msg = compare.close(~e, e)
    assert "differs at 4 of 4 positions" in msg and "index (0, 0)" in msg


def test_tolerance_follows_the_dtype():
    t = {d: compare.tolerance(d) for d in ("float64", "float32", "float16", "bfloat16")}
    assert t["float64"].atol < t["float32"].atol < t["float16"].atol < t["bfloat16"].atol
    assert compare.tolerance(torch.float16).atol == t["float16"].atol
    assert compare.tolerance("float32").scaled(10).atol == 10 * t["float32"].atol


# ----------------------------------------------------------------------------------------------
# The status rules: an exercise is the worst of its checks; the verdict rules of graders/verdict.py

from graders.engine.results import CheckResult, exercise_status  # noqa: E402
from graders.engine.verdict import StudentRun, absent, judge_lesson  # noqa: E402


@pytest.mark.parametrize("statuses, expected", [
    (["passed", "passed"], "passed"), (["passed", "failed"], "failed"), (["failed", "error"], "error"),
    (["error", "timeout"], "timeout"), (["timeout", "not_implemented"], "not_implemented"),
    (["skipped", "passed"], "passed"), (["skipped"], "skipped")])
def test_an_exercise_is_the_worst_of_its_checks(statuses, expected):
    assert exercise_status([CheckResult("c", s) for s in statuses]) == expected


CELLS = [{"index": 2, "source": "def softmax(x, dim=-1):\n    raise NotImplementedError"},
         {"index": 4, "source": "def helper():\n    pass"}]


@pytest.mark.parametrize("obs, run, status, words", [
    (None, StudentRun({}, death="the notebook ran past 60 s", timed_out=True), "timeout", "past 60 s"),
    (None, StudentRun({}, death="killed: out of memory"), "error", "out of memory"),
    ({"missing": True}, StudentRun({}, [{"index": 2, "status": "error", "error": "NameError: torch"}]), "error",
     "its cell failed: NameError: torch"),
    ({"missing": True}, StudentRun({}, [{"index": 2, "status": "ok"}]), "error", "after running cell 2"),
])
def test_why_an_exercise_has_no_observations(obs, run, status, words):
    why = absent("softmax", obs, run, CELLS)
    assert why.status == status and words in why.message


def test_no_reason_when_observations_exist_or_no_cell_defines_it():
    assert absent("softmax", {"checks": {}}, StudentRun({}), CELLS) is None
    assert absent("missing_name", {"missing": True}, StudentRun({}), CELLS) is None


def _lesson01():
    from graders.registry import find_lesson

    lesson = find_lesson("lesson01")
    return lesson, importlib.import_module(lesson.module)


def test_judge_lesson_statuses_from_what_the_child_left():
    lesson, module = _lesson01()
    ref = {e.name: {"checks": {}} for e in lesson.exercises}
    cells = [{"index": 1, "source": "def scaled_dot_product_attention(q, k, v, mask=None):\n    pass"}]
    run = StudentRun({"softmax": {"missing": True}, "scaled_dot_product_attention": None},
                     death="the notebook ran past its time limit", timed_out=True)
    result = judge_lesson(lesson, module, run, ref, {}, cells)
    assert [e.status for e in result.exercises] == ["not_implemented", "timeout"]
    assert result.exercises[1].checks[0].name == "ran"
    assert "the notebook ran past its time limit" in result.notes
    run = StudentRun({"softmax": {"checks": {}, "timeout": True, "forbidden": [], "mutated": [],
                                  "message": "ran longer than 30 s"}, "scaled_dot_product_attention": None})
    res = judge_lesson(lesson, module, run, ref, {}, []).exercises
    assert res[0].status == "timeout" and res[0].points == 0
    assert res[1].status == "timeout" and "did not reach" in res[1].checks[0].message


# ----------------------------------------------------------------------------------------------
# The diagnosis: a mistake matches on its observations, never on an exception type alone

from graders.engine import CPU, Check, Config, same  # noqa: E402
from graders.engine.diagnosis import _matches, diagnose  # noqa: E402


def _err(msg):
    return {"__error__": {"kind": "error", "type": "RuntimeError", "message": msg}}


def test_two_mistakes_raising_the_same_type_are_told_apart():
    check = Check("f", "c", lambda ctx: {}, same(), CPU)
    cfg = Config("cpu", "float32")
    ref = {"output": torch.ones(3)}
    student = _err("RuntimeError: size mismatch for wte.weight\n  at cell 3, line 7: model.load_state_dict(sd)")
    same_error = _err("RuntimeError: size mismatch for wte.weight")
    other_error = _err("RuntimeError: Missing key(s) in state_dict: lm_head.weight")
    assert _matches(check, cfg, student, same_error, ref)
    assert not _matches(check, cfg, student, other_error, ref)


def test_diagnose_names_the_mistake_whose_observations_match():
    check = Check("f", "c", lambda ctx: {}, same(), CPU)
    key = check.key(Config("cpu", "float32"))
    ref = {"output": torch.ones(3)}

    class Module:
        MISTAKES = (Mistake("f", "doubled", "doubles", edits={"a": "b"}),
                    Mistake("f", "negated", "negates", edits={"a": "c"}))

    mistakes = {"doubled": {"checks": {key: {"output": torch.full((3,), 2.0)}}},
                "negated": {"checks": {key: {"output": -torch.ones(3)}}}}
    failed = [CheckResult("c", "failed")]
    student = {key: {"output": -torch.ones(3)}}
    assert diagnose(Module, "f", [check], student, {key: ref}, mistakes, failed) == "negates"
    student = {key: {"output": torch.zeros(3)}}  # wrong, but like no known mistake
    assert diagnose(Module, "f", [check], student, {key: ref}, mistakes, failed) != "negates"


# ----------------------------------------------------------------------------------------------
# The standard input battery

from graders.engine import BATTERY  # noqa: E402
from graders.engine.probe import _relaid  # noqa: E402


def test_relaid_inputs_keep_their_values_in_another_layout():
    t = torch.randn(2, 3, 5)
    tr, st = _relaid(t, "transposed"), _relaid(t, "strided")
    assert torch.equal(tr, t) and torch.equal(st, t)
    assert not tr.is_contiguous() and tr.stride(-1) != 1
    assert not st.is_contiguous() and st.stride(-1) == 1 and st.stride(-2) > t.shape[-1]


def test_every_exercise_of_lessons_01_to_07_gets_the_battery():
    """Every entry, unless the lesson skips it with a reason (tests/test_battery.py holds the reasons to account)."""
    from graders.registry import find_lesson

    for lid in ("lesson01", "lesson02", "lesson03", "lesson04", "lesson05", "lesson06", "lesson07"):
        module = importlib.import_module(find_lesson(lid).module)
        for ex in find_lesson(lid).exercises:
            names = {c.name for c in module.CHECKS.of(ex.name) if c.variant}
            skipped = {entry for (name, entry) in module.CHECKS.battery_skipped if name == ex.name}
            assert names | skipped == {v.name for v in BATTERY} and not names & skipped, (lid, ex.name)


def test_a_float32_result_for_other_dtypes_fails_the_dtype_entries(tmp_path):
    from graders.registry import find_lesson
    from harness import check_one, explain, with_code

    lesson = find_lesson("lesson01")
    code = ("def softmax(x, dim=-1):\n    x = x.float()  # always float32\n"
            "    e = (x - x.amax(dim=dim, keepdim=True)).exp()\n    return e / e.sum(dim=dim, keepdim=True)\n")
    ex = check_one(lesson, with_code(lesson, "softmax", code, tmp_path), "softmax")
    failed = {c.name: c.message for c in ex.checks if c.status == "failed"}
    domain = "over its declared domain (drawn examples, the simplest failure shown)"
    assert set(failed) == {"float64 inputs", "bfloat16 inputs on the CPU", "float16 inputs on the CPU", domain}, \
        explain(ex)
    assert "has dtype float32, expected float64" in failed["float64 inputs"]
    assert failed[domain].startswith("fails for dtype of x=float64")  # the simplest of the drawn dtypes


def test_a_stub_is_not_implemented_even_when_the_probe_catches_its_error():
    """lesson 08's `generate` stub was reported *failed* ("should raise ValueError, but it raised
    NotImplementedError") by a probe that observes exceptions: ctx.call remembers the NotImplementedError."""
    from graders.engine import Checks, probe_exercise, raises_value_error

    class Module:
        CHECKS = Checks("lesson_test")

    @Module.CHECKS.probe("f", "raises ValueError", raises_value_error(("bad", "f(-1)")))
    def probe(ctx):
        try:
            ctx.call(ctx.target, -1)
        except Exception as exc:  # noqa: BLE001 - a probe that observes whatever was raised
            return {"bad": {"raised": type(exc).__name__, "message": str(exc)}}
        return {"bad": {"raised": "nothing", "message": ""}}

    def stub(x):
        raise NotImplementedError()

    obs = probe_exercise(Module, {"f": stub}, "f", CPU)
    (only,) = obs["checks"].values()
    assert only["__error__"]["kind"] == "not_implemented"


def test_an_output_on_the_wrong_device_fails_and_is_named():
    """clean() brings observations to the CPU, but where a tensor came from is kept: an output left on the CPU
    for CUDA inputs (a planted observation: no GPU here) fails its check with the device named, and the
    structural diagnosis says so."""
    import torch

    from graders.engine.diagnosis import explain_obs
    from graders.engine import Check, Config, same
    from graders.engine.probe import _off_device
    from graders.engine.verdict import _verdict

    cuda = Config("cuda", "float16")
    check = Check("x", "matches", None, same(), (cuda,))
    out = torch.ones(3)
    student = {"output": out, "__devices__": {"output": "cpu"}}  # what the child sends for a CPU output
    reference = {"output": out}
    res = _verdict(check, cuda, student, reference)
    assert res.status == "failed" and "`output` is on cpu, but the inputs were on cuda" in res.message
    assert "device" in explain_obs(student, reference)
    # the reference itself off the probe's device (a probe that moves results): the student is not blamed
    assert _verdict(check, cuda, student, {"output": out, "__devices__": {"output": "cpu"}}).status == "passed"
    assert _off_device({"output": out, "n": 3}, torch.device("cuda")) == {"output": "cpu"}
    assert _off_device({"output": out}, torch.device("cpu")) == {}


def test_draws_handed_over_are_used_without_hypothesis(monkeypatch):
    """A student's child given the reference child's draws (its job's "draws") uses them and never imports
    Hypothesis; draws that do not fit the domain's shape are drawn again."""
    import sys

    from graders.engine import draws
    from graders.engine.checks import Arg, Domain

    domain = Domain(args=(Arg("a", (1, 2, 3)), Arg("b", ("x", "y"))), tensors=False, examples=2)
    made = draws.draw_examples(domain, 7)  # drawn here (Hypothesis)
    handed = draws.made()
    key = draws._key(domain, 7)
    assert handed[key] == [list(p) for p in made]
    try:
        draws.given(handed)
        monkeypatch.setitem(sys.modules, "hypothesis", None)  # importing it now would fail
        assert draws.draw_examples(domain, 7) == made
        draws.given({key: [[5, 0]]})  # index 5 is outside a: ignored
        assert key not in draws._GIVEN
    finally:
        draws.given({})


def test_tied_largest_errors_are_reported_at_their_first_index():
    """Errors that tie but for rounding (a uniform row) name the first of them, the same on every CPU."""
    import torch

    from graders.engine.compare import close

    expected = torch.full((2, 6), 1 / 6)
    actual = torch.full((2, 6), 0.25)
    actual[1, 3] = torch.nextafter(actual[1, 3], torch.tensor(1.0))  # one float32 step larger: argmax names (1, 3)
    msg = close(actual, expected, "weights")
    assert "max abs error 0.08333 at index (0, 0)" in msg, msg
    actual[1, 3] = 0.5  # a real maximum is still found
    assert "at index (1, 3)" in close(actual, expected, "weights")


def test_close_agrees_with_torch_isclose_on_every_value_kind():
    """compare.close passes exactly when torch.isclose (equal_nan=True) holds everywhere: numbers near and
    far, NaN against NaN and against numbers, infinities of either sign."""
    gen = torch.Generator().manual_seed(0)
    specials = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, 1.0, -1.0])
    for trial in range(400):
        e = torch.randn(3, 4, generator=gen)
        a = e + torch.randn(3, 4, generator=gen) * 10.0 ** float(torch.randint(-8, 1, (), generator=gen))
        for t in (a, e):
            if torch.rand((), generator=gen) < 0.5:
                idx = torch.randint(0, 12, (2,), generator=gen)
                t.view(-1)[idx] = specials[torch.randint(0, 6, (2,), generator=gen)]
        tol = compare.tolerance(torch.float32)
        want = bool(torch.isclose(a.double(), e.double(), rtol=tol.rtol, atol=tol.atol, equal_nan=True).all())
        assert (compare.close(a, e) is None) == want, (trial, a, e)


from graders.engine.probe import ProbeContext, seed_global  # noqa: E402


def test_seed_global_draws_what_torch_manual_seed_draws():
    """seed_global skips torch.manual_seed's queued seedings of absent accelerators (1 ms a call), never its
    numbers: the global generator gives the same draws either way, and so does a module's initialisation."""
    for seed in (0, 7, 2**40 + 3):
        torch.manual_seed(seed)
        want = (torch.randn(5), torch.nn.Linear(3, 2).weight.detach().clone(), torch.randint(0, 9, (4,)))
        torch.manual_seed(seed + 1)  # something else in between
        seed_global(seed)
        got = (torch.randn(5), torch.nn.Linear(3, 2).weight.detach().clone(), torch.randint(0, 9, (4,)))
        assert all(torch.equal(a, b) for a, b in zip(got, want))
    ctx = ProbeContext({}, "x", CPU[0], 11)
    ctx.manual_seed()
    a = torch.rand(3)
    torch.manual_seed(11)
    assert torch.equal(a, torch.rand(3))


def test_a_call_without_watched_functions_still_sees_a_stub_and_an_edit_in_place():
    """ctx.call without forbidden functions to watch runs the code under no torch function mode (it cost lesson
    08's probes 0.3 s); it still remembers a NotImplementedError and notices an input changed in place."""
    ctx = ProbeContext({}, "x", CPU[0], 0)
    assert not ctx.watched

    def edits(t):
        t.add_(1)
        return t

    ctx.call(edits, torch.zeros(2))
    assert ctx.mutated == ["argument 1"]

    def stub(t):
        raise NotImplementedError

    with pytest.raises(NotImplementedError):
        ctx.call(stub, torch.zeros(2))
    assert ctx.not_implemented is not None
