"""The classes of wrong code that passed every check (issue 44, item 6), one uncatalogued variant per class.

Each test grades a small wrong variant nobody catalogued (a missing float32 upcast in a module that computes
on its own, a top-k that breaks a tie the other way, a `start=0` read as "no start", a table of positions
capped, an activation that overflows, a parameter renamed, a config field moved ...) and asserts that it now
fails, on the check added for its class, while a correct alternative written another way passes. Each
variant was graded before the check was added and passed (said per test). The reference passing, the stub
`not_implemented` and every catalogued mistake rejected are tests/lessons/test_golden.py's."""

from __future__ import annotations

import importlib

import pytest

from graders.engine import mistake_source
from graders.registry import find_lesson
from harness import check_one, explain, with_code

DOMAIN = "over its declared domain (drawn examples, the simplest failure shown)"


def _grade(lesson, exercise, code, tmp_path, name=None):
    return check_one(lesson, with_code(lesson, exercise, code, tmp_path, name), exercise)


def _failed(ex) -> dict[str, str]:
    return {c.name: c.message for c in ex.checks if c.status not in ("passed", "skipped")}


def _mistake(lesson, mistake_id):
    return next(m for m in importlib.import_module(lesson.module).MISTAKES if m.id == mistake_id)


def _solved_cell(lesson, exercise) -> str:
    import nbformat

    from harness import solution_cell_index

    nb = nbformat.read(lesson.solution_path, as_version=4)
    return nb.cells[solution_cell_index(nb, exercise)].source


# ----------------------------------------------------------------------------------------------
# lesson 05: the "no float32 upcast" mistake in the RMSNorm module (float16 inputs whose squares overflow)

L05 = find_lesson("lesson05")
_RMS_OWN = '''
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        scale = x.pow(2).mean(-1, keepdim=True).add(self.eps).rsqrt()
        return (x * scale * self.weight).type_as(x)
'''
_RMS_UPCAST = _RMS_OWN.replace("scale = x.pow(2)", "xf = x.float()\n        scale = xf.pow(2)").replace(
    "(x * scale * self.weight).type_as(x)", "(xf * scale * self.weight.float()).type_as(x)")


@pytest.mark.lesson05
def test_rmsnorm_module_without_the_float32_upcast_fails_on_float16_above_256(tmp_path):
    """Before: the module's checks never gave float16 inputs above 256, so a module computing x² in float16
    passed (this variant, and the catalogued `module_no_upcast`)."""
    ex = _grade(L05, "RMSNorm", _RMS_OWN, tmp_path)
    failed = _failed(ex)
    assert "float16 inputs above 256 give finite results (compute in float32)" in failed, explain(ex)
    assert "upcast x to float32" in failed["float16 inputs above 256 give finite results (compute in float32)"]
    ok = _grade(L05, "RMSNorm", _RMS_UPCAST, tmp_path, "upcast.ipynb")
    assert ok.status == "passed", explain(ok)
    m = _mistake(L05, "module_no_upcast")
    named = check_one(L05, with_code(L05, "RMSNorm", mistake_source(m), tmp_path, "m.ipynb"), "RMSNorm")
    assert named.status == "failed" and named.diagnosis == m.message, explain(named)


# ----------------------------------------------------------------------------------------------
# ties at the k-th value: the contract leaves them open, so no fixed example may have one (lessons 08, 10)

L08, L10 = find_lesson("lesson08"), find_lesson("lesson10")
_KEEP_EXACTLY_K = ("kth = torch.topk(out, min(top_k, out.shape[-1]), dim=-1).values[..., -1:]  # (..., 1)\n"
                   "        out = out.masked_fill(out < kth, float(\"-inf\"))",
                   "keep = torch.topk(out, min(top_k, out.shape[-1]), dim=-1).indices  # exactly k, ties broken\n"
                   "        out = torch.full_like(out, float(\"-inf\")).scatter(-1, keep, out.gather(-1, keep))")


@pytest.mark.lesson10
def test_filter_logits_fixed_rows_have_no_tie_at_k_and_no_total_at_p():
    """The fixed rows' probabilities: no two equal (so no tie at any k), and no running total of the sorted
    probabilities, and no min_p threshold, within float32 rounding of a p the checks ask for."""
    import torch

    module = importlib.import_module(L10.module)
    probs = torch.tensor(module._PROBS, dtype=torch.float64)
    for row in probs:
        assert len(set(row.tolist())) == row.numel(), row
        totals = row.sort(descending=True).values.cumsum(0)
        for p in (0.6, 0.9, 0.5):
            assert (totals - p).abs().min() > 1e-3, (row, p)
        for min_p in (0.5, 0.2):
            assert (row - min_p * row.max()).abs().min() > 1e-3, (row, min_p)


@pytest.mark.lesson10
def test_filter_logits_top_k_keeping_exactly_k_passes(tmp_path):
    """A correct top-k that keeps exactly k tokens (topk's indices, a tie broken either way) passes. Before:
    the fixed row (0.70, 0.05, 0.10, 0.05, 0.10) tied at k = 2, and this top-k, which keeps one of the two
    0.10s, failed "top_k keeps the k largest logits"."""
    old, new = _KEEP_EXACTLY_K
    cell = _solved_cell(L10, "filter_logits")
    assert old in cell
    ex = _grade(L10, "filter_logits", cell.replace(old, new), tmp_path)
    assert ex.status == "passed", explain(ex)


_GEN_OLD = "kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]  # (B, 1)"


@pytest.mark.lesson08
def test_generate_top_k_keeping_exactly_k_passes(tmp_path):
    """Lesson 08's top-k check draws a prompt without a tie at the k-th logit, and the domain accepts a tied
    token either way: a generate whose top-k keeps exactly k tokens (by index) passes."""
    cell = _solved_cell(L08, "generate")
    assert _GEN_OLD in cell
    line = next(l for l in cell.splitlines() if _GEN_OLD in l)
    indent = line[:len(line) - len(line.lstrip())]
    nxt = cell.splitlines()[cell.splitlines().index(line) + 1]
    new = (f"{indent}keep = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).indices\n"
           f"{indent}logits = torch.full_like(logits, float('-inf')).scatter(1, keep, logits.gather(1, keep))")
    code = cell.replace(line + "\n" + nxt, new)
    assert code != cell, nxt
    ex = _grade(L08, "generate", code, tmp_path)
    assert ex.status == "passed", explain(ex)


# ----------------------------------------------------------------------------------------------
# an argument whose valid values include 0, passed 0 (lesson 10's `start`: 0 is a start, not "no start")


@pytest.mark.lesson10
def test_llama_attention_reading_start_0_as_no_start_fails_the_domain(tmp_path):
    """Before: the domain gave `start` only 7, so `if not start:` (0 read as "take len(cache)") passed. Now
    start=0 with 3 positions cached is drawn, and the simplest failing example names it."""
    cell = _solved_cell(L10, "LlamaAttention")
    assert cell.count("if start is None:") == 1
    ex = _grade(L10, "LlamaAttention", cell.replace("if start is None:", "if not start:"), tmp_path)
    failed = _failed(ex)
    assert list(failed) == [DOMAIN], explain(ex)
    assert failed[DOMAIN].startswith("fails for start=given: 0, 3 cached"), failed[DOMAIN]


# ----------------------------------------------------------------------------------------------
# magnitudes at the edge of the float range where the reference is stable (lesson 07's GELU)

L07 = find_lesson("lesson07")
_GELU_EXP = ('h = F.gelu(self.fc1(x), approximate="tanh")',
             "z = self.fc1(x)\n"
             "        u = 0.7978845608028654 * (z + 0.044715 * z ** 3)\n"
             "        h = 0.5 * z * (1 + (torch.exp(2 * u) - 1) / (torch.exp(2 * u) + 1))  # tanh, by hand")
_GELU_TANH = ('h = F.gelu(self.fc1(x), approximate="tanh")',
              "z = self.fc1(x)\n"
              "        h = 0.5 * z * (1 + torch.tanh(0.7978845608028654 * (z + 0.044715 * z ** 3)))")


@pytest.mark.lesson07
def test_mlp_whose_gelu_overflows_fails_on_large_inputs(tmp_path):
    """Before: a tanh-GELU written with exp (inf/inf = NaN once the pre-activation passes ~44) failed only
    hidden battery entries (inputs offset by ±1000 and float16), whose inputs a student never sees; the public
    checks drew inputs of scale ~2. Now the public domain draws x 100x larger and names it; the same formula
    with torch.tanh passes."""
    cell = _solved_cell(L07, "MLP")
    ex = _grade(L07, "MLP", cell.replace(*_GELU_EXP), tmp_path)
    failed = _failed(ex)
    assert DOMAIN in failed, explain(ex)
    assert failed[DOMAIN].startswith("fails for scale of x=100.0"), failed[DOMAIN]
    ok = _grade(L07, "MLP", cell.replace(*_GELU_TANH), tmp_path, "tanh.ipynb")
    assert ok.status == "passed", explain(ok)
