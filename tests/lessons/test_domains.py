"""The exercises' declared domains (issue 28, item 1): coverage, determinism, the simplest failing input.

Coverage is enforced on every exercise that declares a domain: every argument of the reference's signature
(a class's __init__ and forward) is named by the domain, every argument and config field is given each of
its non-default values in a drawn example with everything else at its default, and every dtype and layout
is varied on one tensor argument alone. The draws are the same in two processes (the student's and the
reference's children) because they depend on the seed only. An escape of the old checks (rope_base
ignored) fails with the simplest input that shows it, in at most 20 lines at 80 columns."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys

import pytest

from graders.engine.checks import CHECKS_OF
from graders.engine.probe import draw_examples
from graders.registry import LESSONS, find_lesson
from harness import check_one, explain, reference, with_code

DECLARED = [(lesson, exercise, domain) for lesson in LESSONS
            for exercise, domains in CHECKS_OF(importlib.import_module(lesson.module)).domains.items()
            for domain in domains]
IDS = [f"{l.id}-{e}" for l, e, _ in DECLARED]


def test_the_lessons_07_to_10_escape_classes_have_domains():
    declared = {(l.id, e) for l, e, _ in DECLARED}
    for want in [("lesson09", "online_logsumexp"), ("lesson09", "flash_attention"),
                 ("lesson10", "LlamaAttention"), ("lesson10", "filter_logits")]:
        assert want in declared


def _parameters(obj) -> set[str]:
    """What a caller gives the exercise: a function's parameters; a class's __init__'s and those of the method
    a caller then calls (forward, or update for a cache); a dataclass's fields."""
    import dataclasses

    if dataclasses.is_dataclass(obj):
        return {f.name for f in dataclasses.fields(obj)}
    if inspect.isclass(obj):
        names = set(inspect.signature(obj.__init__).parameters)
        for method in ("forward", "update"):
            if hasattr(obj, method):
                names |= set(inspect.signature(getattr(obj, method)).parameters)
                break
    else:
        names = set(inspect.signature(obj).parameters)
    return names - {"self", "args", "kwargs"}


@pytest.mark.parametrize("lesson, exercise, domain", DECLARED, ids=IDS)
def test_the_domain_names_every_argument(lesson, exercise, domain):
    ns, _ = reference(lesson)
    named = {part.split(".")[0] for name, _ in domain.choices() for part in name.removeprefix("dtype of ")
             .removeprefix("layout of ").split(", ")}  # "config.rope_base" names the argument config
    # a tensor argument is named by its dtype or layout; x/logits/q/k/v are the drawn tensors themselves
    missing = _parameters(ns[exercise]) - named
    assert not missing, f"{exercise}: the domain never draws {sorted(missing)}"


@pytest.mark.parametrize("lesson, exercise, domain", DECLARED, ids=IDS)
def test_every_value_is_drawn_with_the_rest_at_default(lesson, exercise, domain):
    picks = draw_examples(domain, seed=1234)
    choices = domain.choices()
    for j, (name, values) in enumerate(choices):
        for v in range(1, len(values)):
            alone = tuple(v if i == j else 0 for i in range(len(choices)))
            assert alone in picks, f"{exercise}: {name}={values[v]!r} is never drawn alone"
    assert any(sum(c > 0 for c in p) >= 2 for p in picks), "no drawn combination"
    if domain.tensors:
        assert any(n.startswith("dtype of") or n.startswith("layout of") for n, _ in choices), \
            f"{exercise}: no dtype or layout varied"
    else:
        assert not any(n.startswith(("dtype of", "layout of")) for n, _ in choices), \
            f"{exercise}: a domain without tensors varies a dtype or layout"


def test_every_exercise_declares_its_domain():
    """Issue 28: every exercise of every lesson is tested over a declared domain."""
    declared = {(l.id, e) for l, e, _ in DECLARED}
    missing = [f"{l.id}.{e.name}" for l in LESSONS for e in l.exercises if (l.id, e.name) not in declared]
    assert not missing, f"{len(missing)} exercises declare no domain: {', '.join(missing)}"


@pytest.mark.lesson10
def test_rope_base_ignored_fails_with_the_simplest_input_and_is_named(tmp_path):
    from graders.engine import mistake_source

    L10 = find_lesson("lesson10")
    module = importlib.import_module(L10.module)
    mistake = next(m for m in module.MISTAKES if m.id == "attn_rope_base_ignored")
    ex = check_one(L10, with_code(L10, "LlamaAttention", mistake_source(mistake), tmp_path), "LlamaAttention")
    assert ex.status == "failed", explain(ex)
    failed = [c for c in ex.checks if c.status == "failed"]
    assert [c.name for c in failed] == ["over its declared domain (drawn examples, the simplest failure shown)"]
    assert failed[0].message.startswith("fails for rope_base=500000.0"), failed[0].message
    assert ex.diagnosis == mistake.message


@pytest.mark.lesson10
def test_the_shrunk_failure_prints_in_at_most_20_lines_at_80_columns(tmp_path):
    import io

    from rich.console import Console

    from course_cli import render
    from graders.engine import mistake_source
    from graders.engine.results import LessonResult

    L10 = find_lesson("lesson10")
    module = importlib.import_module(L10.module)
    mistake = next(m for m in module.MISTAKES if m.id == "attn_rope_base_ignored")
    ex = check_one(L10, with_code(L10, "LlamaAttention", mistake_source(mistake), tmp_path), "LlamaAttention")
    buf = io.StringIO()
    render.render_result(Console(file=buf, width=80, no_color=True, highlight=False, soft_wrap=False),
                         LessonResult("lesson10", "x.ipynb", [ex]), L10.title)
    out = buf.getvalue()
    assert "rope_base=500000.0" in out
    assert out.count("\n") <= 20 and max(len(l.rstrip()) for l in out.splitlines()) <= 80, out


def test_running_out_of_memory_ends_a_drawn_check_at_its_first_example():
    """Any other exception is that example's failure; a MemoryError (or torch's out-of-memory) is raised
    out of the check, so that a memory bomb is set off once, not once per drawn example."""
    from types import SimpleNamespace

    from graders.engine.checks import Arg, Domain
    from graders.engine.draws import domain_probe

    domain = Domain((Arg("n", (1, 2, 3)),), tensors=False, examples=4)
    calls = []

    def run(ctx, example, exc):
        calls.append(example)
        raise exc

    ctx = SimpleNamespace(seed=7)
    obs = domain_probe(domain, lambda c, e: run(c, e, ValueError("bad n")))(ctx)
    assert obs["examples"] > 1 and len(calls) == obs["examples"]
    assert all(obs[f"#{i} raised"] == "ValueError: bad n" for i in range(obs["examples"]))
    for exc in (MemoryError(), RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")):
        calls.clear()
        with pytest.raises(type(exc)):
            domain_probe(domain, lambda c, e: run(c, e, exc))(ctx)
        assert len(calls) == 1


def test_two_memory_errors_in_a_row_end_an_exercise_and_one_does_not():
    """A memory bomb fills the cap on every check, a second or more each: after two in a row the exercise's
    other checks are not run, and they read as errors (not the timeout that twenty bombs would reach). One
    memory error alone (a big input) leaves the other checks to run."""
    from graders.engine import probe_exercise
    from graders.registry import LESSONS
    from harness import _configs, judge_in_process, reference

    lesson = LESSONS[0]
    module = importlib.import_module(lesson.module)
    name = lesson.exercises[0].name
    ns = reference(lesson)[0]
    right, calls = ns[name], []

    def bomb(*args, **kwargs):
        calls.append(1)
        raise MemoryError("cannot allocate")

    obs = probe_exercise(module, {**ns, name: bomb}, name, _configs(module))
    assert obs["out_of_memory"] and len(calls) == 2 and len(obs["checks"]) == 2
    res = judge_in_process(lesson, name, obs)
    assert res.status == "error"
    assert not any(c.status == "timeout" for c in res.checks)
    assert sum("not run: the checks before it ran out of memory" in c.message for c in res.checks) > 5

    state = {"n": 0}

    def once(*args, **kwargs):  # out of memory on its first call only
        state["n"] += 1
        if state["n"] == 1:
            raise MemoryError("cannot allocate")
        return right(*args, **kwargs)

    obs = probe_exercise(module, {**ns, name: once}, name, _configs(module))
    assert not obs.get("out_of_memory")
    res = judge_in_process(lesson, name, obs)
    assert res.status == "error"
    ran = [c.status for c in res.checks if c.status != "skipped"]
    assert ran.count("error") == 1 and ran.count("passed") == len(ran) - 1, ran
