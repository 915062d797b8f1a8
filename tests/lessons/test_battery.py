"""The standard input battery (graders/engine.py, BATTERY): every lesson's reference passes every entry it
keeps, or the lesson says why not; the inputs each entry changes; honest alternative softmax, LayerNorm and
RMSNorm implementations pass every entry, and the failures the numeric-stress entries exist for fail them,
each with its own message."""

from __future__ import annotations

import importlib

import pytest
import torch

from conftest import marks
from graders.engine import BATTERY, ENTRIES, Checks, Config, ProbeContext, probe_exercise
from graders.registry import LESSONS, find_lesson
from harness import check_one, explain, reference, with_code

LESSON_CASES = [pytest.param(l, marks=marks(l), id=l.id) for l in LESSONS]
CPU32 = Config("cpu", "float32")


def _takes_floating_input(module, ns, exercise: str) -> bool:
    """Is `exercise` given a floating-point tensor by any of its checks (on the usual inputs)?"""
    for check in module.CHECKS.of(exercise):
        if check.variant or CPU32 not in check.configs:
            continue
        ctx = ProbeContext(ns, exercise, CPU32, 0)
        try:
            check.probe(ctx)
        except Exception:  # noqa: BLE001 - a probe that fails on seed 0 still drew what it drew
            pass
        if ctx.took_floating:
            return True
    return False


@pytest.mark.parametrize("lesson", LESSON_CASES)
def test_every_entry_is_a_check_or_skipped_with_a_reason(lesson):
    module = importlib.import_module(lesson.module)
    for ex in lesson.exercises:
        kept = {c.name for c in module.CHECKS.of(ex.name) if c.variant}
        for v in BATTERY:
            why = module.CHECKS.battery_skipped.get((ex.name, v.name))
            assert (v.name in kept) != bool(why), (lesson.id, ex.name, v.name, why)
            assert why is None or len(why) > 20, f"{lesson.id} {ex.name} skips {v.name!r} with no real reason: {why!r}"


@pytest.mark.parametrize("lesson", LESSON_CASES)
def test_the_reference_passes_every_entry_it_keeps(lesson):
    """No entry is dropped silently: the reference's observation of every kept entry is not an error, and is
    "inapplicable" only for an exercise that takes no floating-point tensor at all (a lesson whose probe cannot
    take an entry opts out with a reason, or picks a `base` check that can)."""
    module = importlib.import_module(lesson.module)
    ns, ref = reference(lesson)
    for ex in lesson.exercises:
        for check in module.CHECKS.of(ex.name):
            if not check.variant:
                continue
            obs = ref[ex.name]["checks"][check.key(check.configs[0])]
            assert "__error__" not in obs, (lesson.id, ex.name, check.name, obs["__error__"]["message"])
            if "__inapplicable__" in obs:
                assert not _takes_floating_input(module, ns, ex.name), (
                    f"{lesson.id} {ex.name}: {check.name!r} changes none of its inputs, but the exercise takes "
                    f"floating-point tensors: pick a `base` check it changes, or skip it with a reason")


# ----------------------------------------------------------------------------------------------
# What each entry does to the inputs


def _ctx(entry: str) -> ProbeContext:
    return ProbeContext({}, "f", CPU32, 0, variant=ENTRIES[entry])


def test_batch_and_length_entries_set_the_batch_or_sequence_axis_to_one():
    batch, length = _ctx("a batch of 1"), _ctx("sequences of length 1")
    assert batch.randn(2, 3, 5, 8).shape == (1, 3, 5, 8) and length.randn(2, 3, 5, 8).shape == (2, 3, 1, 8)
    assert batch.rand(4, 6, 7).shape == (1, 6, 7) and length.rand(4, 6, 7).shape == (4, 1, 7)
    # a mask's last two axes are queries and keys: both become 1, so it still fits q and k
    assert batch.bernoulli(2, 1, 5, 7).shape == (1, 1, 5, 7) and length.bernoulli(2, 1, 5, 7).shape == (2, 1, 1, 1)
    # weight matrices and vectors keep their shapes
    for ctx in (batch, length):
        assert ctx.randn(6, 4).shape == (6, 4) and ctx.randn(9).shape == (9,)
    # a tensor the probe made is cut to the same shape, contiguous, and keeps its first values
    t = torch.randn(2, 3, 5, 8)
    cut = length.put(t)
    assert cut.shape == (2, 3, 1, 8) and cut.is_contiguous() and torch.equal(cut, t[:, :, :1])
    assert batch.put(torch.ones(2, 3, 4, dtype=torch.bool)).shape == (1, 3, 4)
    assert length.put(torch.arange(5)).shape == (5,)  # integer positions are left alone


def test_an_entry_that_changes_nothing_is_inapplicable():
    ctx = _ctx("a batch of 1")
    ctx.randn(1, 3, 5)  # already a batch of 1
    ctx.randn(6, 4)
    assert ctx.changed == 0 and ctx.drawn == 2
    ctx.randn(2, 3, 5)
    assert ctx.changed == 1
    stress = _ctx("tiny inputs (scaled by 1e-4)")
    stress.randn(6, 4)  # a weight matrix is no data
    assert stress.changed == 0


def test_stress_entries_change_the_data_not_the_weights():
    plain = ProbeContext({}, "f", CPU32, 0)
    x, w = plain.randn(2, 3, 5), plain.randn(5, 5)
    for name, expected in (("inputs offset by +1000", x + 1e3), ("very negative inputs (about -400)", x - 400),
                           ("tiny inputs (scaled by 1e-4)", x * 1e-4)):
        ctx = _ctx(name)
        assert torch.equal(ctx.randn(2, 3, 5), expected), name
        assert torch.equal(ctx.randn(5, 5), w), name  # 2-D: a weight, left alone
    rows = _ctx("tiny inputs (scaled by 1e-4)")
    assert torch.equal(rows.randn(2, 3, 5), x * 1e-4) and torch.equal(rows.randn(5, 5, data=True), w * 1e-4)
    assert torch.equal(_ctx("inputs offset by +1000").randn(2, 3, 5, data=False), x)


def test_add_battery_refuses_unknown_exercises_and_entries():
    class Module:
        CHECKS = Checks("lesson_test")

    Module.CHECKS.probe("f", "values", lambda s, r, ctx: None)(lambda ctx: {"x": ctx.randn(2, 3, 4)})
    with pytest.raises(ValueError, match="no battery entry"):
        Module.CHECKS.add_battery(skip={"f": {"batch of one": "a typo of the entry's name"}})
    with pytest.raises(ValueError, match="'g'"):
        Module.CHECKS.add_battery(skip={"g": "no such exercise"})


# ----------------------------------------------------------------------------------------------
# Honest alternatives pass every entry; the failures the entries exist for fail them, with their message

SOFTMAX_ALTERNATIVES = {
    # (at least float32: in bfloat16 the log-sum-exp of a row whose largest entries tie at ±1e4 rounds back to the
    # max, spacing 64 there, and the row sums to 2; the domain's bfloat16 huge-entry examples draw such ties)
    "through logsumexp": '''
def softmax(x, dim=-1):
    xf = x.to(torch.promote_types(x.dtype, torch.float32))
    return torch.exp(xf - torch.logsumexp(xf, dim=dim, keepdim=True)).to(x.dtype)
''',
    "max by .max(), times the reciprocal of the sum": '''
def softmax(x, dim=-1):
    e = torch.exp(x - x.max(dim=dim, keepdim=True).values)
    return e * e.sum(dim=dim, keepdim=True).reciprocal()
''',
    "computed in float64, returned in x's dtype": '''
def softmax(x, dim=-1):
    y = x.double()
    e = (y - y.amax(dim=dim, keepdim=True)).exp()
    return (e / e.sum(dim=dim, keepdim=True)).to(x.dtype)
''',
}

LAYER_NORM_ALTERNATIVES = {
    "var_mean and rsqrt": '''
def layer_norm(x, weight=None, bias=None, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, keepdim=True, unbiased=False)
    out = (x - mean) * torch.rsqrt(var + eps)
    if weight is not None:
        out = out * weight
    return out if bias is None else out + bias
''',
    "centred once, then torch.addcmul": '''
def layer_norm(x, weight=None, bias=None, eps=1e-5):
    xc = x - x.mean(-1, keepdim=True)
    out = xc / (xc * xc).mean(-1, keepdim=True).add(eps).sqrt()
    if weight is None and bias is None:
        return out
    w = weight if weight is not None else torch.ones_like(out[..., 0, None])
    b = bias if bias is not None else torch.zeros_like(out[..., 0, None])
    return torch.addcmul(b, out, w)
''',
    "statistics in float32 for half inputs, as torch does": '''
def layer_norm(x, weight=None, bias=None, eps=1e-5):
    h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    mean = h.mean(-1, keepdim=True)
    var = (h - mean).square().mean(-1, keepdim=True)
    out = (h - mean) / torch.sqrt(var + eps)
    if weight is not None:
        out = out * weight.to(h.dtype)
    if bias is not None:
        out = out + bias.to(h.dtype)
    return out.to(x.dtype)
''',
}

RMS_NORM_ALTERNATIVES = {
    "in x's own dtype, divided by the root": '''
def rms_norm(x, weight=None, eps=1e-6):
    h = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    y = h / torch.sqrt((h * h).mean(-1, keepdim=True) + eps)
    return (y if weight is None else y * weight.to(h.dtype)).to(x.dtype)
''',
    "the norm, scaled by sqrt(D)": '''
def rms_norm(x, weight=None, eps=1e-6):
    h = x.float()
    ms = torch.linalg.vector_norm(h, dim=-1, keepdim=True) ** 2 / h.shape[-1]
    y = h * (ms + eps).rsqrt()
    if weight is not None:
        y = y * weight.float()
    return y.to(x.dtype)
''',
    "weight applied after casting back, as Llama does": '''
def rms_norm(x, weight=None, eps=1e-6):
    h = x.to(torch.float32)
    y = (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return y if weight is None else (y.float() * weight.float()).to(x.dtype)
''',
}

ALTERNATIVES = [pytest.param(lid, ex, code, marks=marks(find_lesson(lid), ex), id=f"{ex}: {label}")
                for lid, ex, table in (("lesson01", "softmax", SOFTMAX_ALTERNATIVES),
                                       ("lesson04", "layer_norm", LAYER_NORM_ALTERNATIVES),
                                       ("lesson05", "rms_norm", RMS_NORM_ALTERNATIVES))
                for label, code in table.items()]


@pytest.mark.parametrize("lid, exercise, code", ALTERNATIVES)
def test_honest_alternatives_pass_every_entry(lid, exercise, code, tmp_path):
    lesson = find_lesson(lid)
    ex = check_one(lesson, with_code(lesson, exercise, "import torch\n" + code, tmp_path), exercise)
    battery = {c.name for c in ex.checks} & set(ENTRIES)
    assert battery >= {"inputs offset by +1000", "very negative inputs (about -400)", "tiny inputs (scaled by 1e-4)",
                       "a batch of 1", "sequences of length 1"}, explain(ex)
    assert ex.status == "passed", explain(ex)


WRONG = [
    ("lesson01", "softmax", "no max subtracted", '''
def softmax(x, dim=-1):
    e = x.exp()
    return e / e.sum(dim=dim, keepdim=True)
''', ("very negative inputs (about -400)", "inputs offset by +1000")),
    ("lesson04", "layer_norm", "variance as E[x²] − E[x]²", '''
def layer_norm(x, weight=None, bias=None, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = (x * x).mean(-1, keepdim=True) - mean * mean
    out = (x - mean) / torch.sqrt(var + eps)
    if weight is not None:
        out = out * weight
    return out if bias is None else out + bias
''', ("inputs offset by +1000",)),
    ("lesson04", "layer_norm", "eps outside the square root", '''
def layer_norm(x, weight=None, bias=None, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    out = (x - mean) / (((x - mean) ** 2).mean(-1, keepdim=True).sqrt() + eps)
    if weight is not None:
        out = out * weight
    return out if bias is None else out + bias
''', ("tiny inputs (scaled by 1e-4)",)),
    ("lesson05", "rms_norm", "eps outside the square root", '''
def rms_norm(x, weight=None, eps=1e-6):
    xf = x.to(torch.promote_types(x.dtype, torch.float32))
    y = xf / (xf.pow(2).mean(-1, keepdim=True).sqrt() + eps)
    if weight is not None:
        y = y * weight.float()
    return y.to(x.dtype)
''', ("tiny inputs (scaled by 1e-4)",)),
    ("lesson01", "scaled_dot_product_attention", "a bare .squeeze() of the result", '''
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1).squeeze()
    return (weights @ v).squeeze(), weights
''', ("a batch of 1", "sequences of length 1")),
]


@pytest.mark.parametrize("lid, exercise, code, entries",
                         [pytest.param(lid, ex, code, entries, marks=marks(find_lesson(lid), ex), id=f"{ex}: {label}")
                          for lid, ex, label, code, entries in WRONG])
def test_the_failures_each_entry_exists_for_fail_it_with_its_message(lid, exercise, code, entries, tmp_path):
    lesson = find_lesson(lid)
    ex = check_one(lesson, with_code(lesson, exercise, "import torch\n" + code, tmp_path), exercise)
    checks = {c.name: c for c in ex.checks}
    for entry in entries:
        assert checks[entry].status == "failed", explain(ex)
        assert checks[entry].message.startswith(ENTRIES[entry].message + ": "), checks[entry].message
