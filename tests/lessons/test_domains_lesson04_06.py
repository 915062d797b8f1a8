"""The declared domains of lessons 04-06 (issue 28, item 1) and issue 29's dtype rule for learned positions.

Each wrong implementation here passed every check these lessons had before their domains: a non-default or
edge input it mishandles (a 1-D x, a non-contiguous upstream gradient, a float32 weight under bfloat16
activations, a row wider than a hard-coded block, a strided weight, a (T, D) input, scale = 1 with a
stretching method). Each now fails the domain check alone, with the simplest failing input first in the
message, and a catalogued misconception keeps its own message as the diagnosis. The reference itself takes
every drawn example (a domain names only inputs the spec allows)."""

from __future__ import annotations

import importlib

import pytest

from graders.engine import mistake_source
from graders.engine.checks import CHECKS_OF
from graders.registry import find_lesson
from harness import check_one, explain, reference, with_code

L04, L05, L06 = (find_lesson(f"lesson0{n}") for n in (4, 5, 6))
DOMAIN = "over its declared domain (drawn examples, the simplest failure shown)"


def _mistake(lesson, mistake_id):
    return next(m for m in importlib.import_module(lesson.module).MISTAKES if m.id == mistake_id)


def _fails_only_the_domain(lesson, exercise, code, tmp_path, simplest: str):
    """Grade `code` as `exercise`: it fails, the domain check is its only failure, and that check's message
    starts with `fails for <simplest>` (the example with the fewest, smallest non-default choices)."""
    ex = check_one(lesson, with_code(lesson, exercise, code, tmp_path), exercise)
    failed = [c for c in ex.checks if c.status not in ("passed", "skipped")]
    assert ex.status == "failed", explain(ex)
    assert [c.name for c in failed] == [DOMAIN], explain(ex)
    assert failed[0].message.startswith(f"fails for {simplest}"), failed[0].message
    return ex


@pytest.mark.parametrize("lesson", [L04, L05, L06], ids=lambda l: l.id)
def test_the_reference_takes_every_drawn_example(lesson):
    """No drawn example is outside what the reference can do: a domain declares only valid inputs (an
    example the reference raises on is skipped by the judge, which would hide what the domain claims)."""
    _, obs = reference(lesson)
    declared = CHECKS_OF(importlib.import_module(lesson.module)).domains
    assert set(declared) == {e.name for e in lesson.exercises}
    for exercise, per_exercise in obs.items():
        domain_obs = [v for k, v in per_exercise["checks"].items() if k.startswith(DOMAIN)]
        assert domain_obs, f"{exercise}: no domain check ran"
        for o in domain_obs:
            assert o["examples"] >= 4, (exercise, o["examples"])
            raised = {k: v for k, v in o.items() if k.endswith(" raised")}
            assert not raised, f"{exercise}: the reference raised on drawn examples: {raised}"


# ----------------------------------------------------------------------------------------------
# lesson04


_MANUAL = '''
class LayerNormFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        mean = x.mean(dim=-1, keepdim=True)
        rstd = 1.0 / torch.sqrt(((x - mean) ** 2).mean(dim=-1, keepdim=True) + eps)
        x_hat = (x - mean) * rstd
        ctx.save_for_backward(x_hat, weight, rstd)
        return x_hat * weight + bias

    @staticmethod
    def backward(ctx, grad_out):
        x_hat, weight, rstd = ctx.saved_tensors
PARAMETER_GRADIENTS
        g = grad_out * weight
        grad_x = rstd * (g - g.mean(dim=-1, keepdim=True) - x_hat * (g * x_hat).mean(dim=-1, keepdim=True))
        return grad_x, grad_weight, grad_bias, None


def layer_norm_manual(x, weight, bias, eps=1e-5):
    return LayerNormFunction.apply(x, weight, bias, eps)
'''


@pytest.mark.lesson04
def test_manual_backward_summing_the_leading_axes_by_number_fails_for_a_1d_x(tmp_path):
    # sum(dim=()) sums every axis: for a single vector (D,) the parameter gradients become scalars
    code = _MANUAL.replace("PARAMETER_GRADIENTS", '''        rows = tuple(range(grad_out.dim() - 1))
        grad_weight = (grad_out * x_hat).sum(dim=rows)
        grad_bias = grad_out.sum(dim=rows)''')
    _fails_only_the_domain(L04, "layer_norm_manual", code, tmp_path, "leading dims=none")


@pytest.mark.lesson04
def test_manual_backward_that_views_the_upstream_gradient_fails_for_a_transposed_one(tmp_path):
    code = _MANUAL.replace("PARAMETER_GRADIENTS", '''        D = grad_out.shape[-1]
        rows = grad_out.view(-1, D)
        grad_weight = (rows * x_hat.reshape(-1, D)).sum(dim=0)
        grad_bias = rows.sum(dim=0)''')
    ex = _fails_only_the_domain(L04, "layer_norm_manual", code, tmp_path, "upstream gradient=transposed")
    assert "view size is not compatible" in next(c for c in ex.checks if c.name == DOMAIN).message


# ----------------------------------------------------------------------------------------------
# lesson05

_RMS_NORM = '''
def rms_norm(x, weight=None, eps=1e-6):
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight.float()
    return y.to(x.dtype)
'''


@pytest.mark.lesson05
def test_rms_norm_weight_after_the_cast_back_fails_for_a_float32_weight_and_is_named(tmp_path):
    mistake = _mistake(L05, "weight_after_cast")
    ex = _fails_only_the_domain(L05, "rms_norm", mistake_source(mistake), tmp_path,
                                "dtype of x, weight=bfloat16 x, float32 weight")
    assert ex.diagnosis == mistake.message, explain(ex)


@pytest.mark.lesson05
def test_rmsnorm_gain_applied_after_rms_norm_fails_under_mixed_precision(tmp_path):
    code = _RMS_NORM + '''

class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * rms_norm(x, eps=self.eps)  # bfloat16 x, float32 weight: a float32 result
'''
    # the simplest such example: x of magnitude 300, also given in float16 (a float32 result there too)
    ex = _fails_only_the_domain(L05, "RMSNorm", code, tmp_path, "scale of x=300.0")
    assert "output, x in float16" in next(c for c in ex.checks if c.name == DOMAIN).message, explain(ex)


_TRITON = '''
@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    mean_sq = tl.sum(x * x, axis=0) / n_cols
    y = x * tl.rsqrt(mean_sq + eps) * w
    tl.store(y_ptr + row * y_row_stride + cols, y, mask=mask)


def rms_norm_triton(x, weight, eps=1e-6):
    n_cols = x.shape[-1]
    rows = x.reshape(-1, n_cols).contiguous()
    y = torch.empty_like(rows)
    _rms_norm_kernel[(rows.shape[0],)](rows, WEIGHT, y, n_cols, rows.stride(0), y.stride(0), eps, BLOCK=BLOCK_SIZE)
    return y.view(x.shape)
'''


@pytest.mark.lesson05
def test_triton_kernel_with_a_fixed_block_fails_for_a_wide_row(tmp_path):
    # a block of 256 covers every row the old checks used (up to 129); a row of 1024 is mostly never written
    code = _TRITON.replace("WEIGHT", "weight.contiguous()").replace("BLOCK_SIZE", "256")
    _fails_only_the_domain(L05, "rms_norm_triton", code, tmp_path, "D=1024")


@pytest.mark.lesson05
def test_triton_kernel_reading_a_strided_weight_with_step_1_fails(tmp_path):
    code = _TRITON.replace("WEIGHT", "weight").replace("BLOCK_SIZE", "triton.next_power_of_2(n_cols)")
    _fails_only_the_domain(L05, "rms_norm_triton", code, tmp_path, "layout of weight=strided")


# ----------------------------------------------------------------------------------------------
# lesson06


@pytest.mark.lesson06
def test_learned_positions_reading_T_from_axis_1_fails_for_a_T_by_D_input_and_is_named(tmp_path):
    mistake = _mistake(L06, "T_from_axis_1")
    ex = _fails_only_the_domain(L06, "LearnedPositionalEmbedding", mistake_source(mistake), tmp_path,
                                "leading dims=none")
    assert ex.diagnosis == mistake.message, explain(ex)


@pytest.mark.lesson06
def test_rope_inv_freq_rejecting_scale_1_for_a_stretching_method_fails(tmp_path):
    code = '''
def rope_inv_freq(dim, base=10000.0, scale=1.0, method="none"):
    if method not in ("none", "linear", "ntk"):
        raise ValueError(f"unknown method={method!r}")
    if method != "none" and scale <= 1:
        raise ValueError(f"scale must be above 1 to stretch, got scale={scale}")
    if scale < 1:
        raise ValueError(f"scale={scale} < 1")
    if method == "ntk":
        base = base * scale ** (dim / (dim - 2))
    inv_freq = base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    return (inv_freq / scale if method == "linear" else inv_freq).float()
'''
    ex = _fails_only_the_domain(L06, "rope_inv_freq", code, tmp_path, "method=linear")
    assert "raised ValueError" in next(c for c in ex.checks if c.name == DOMAIN).message


@pytest.mark.lesson06
def test_learned_positions_are_told_one_dtype_only(tmp_path):
    """Issue 29: a table added without the cast gives float32 for bfloat16 x. Every check that fails it says
    the result must be bfloat16 (x's dtype), none that it must be float32; the reference keeps x's dtype."""
    code = '''
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len = max_len
        self.weight = nn.Parameter(torch.empty(max_len, d_model))
        nn.init.normal_(self.weight, mean=0.0, std=0.02)

    def forward(self, x, offset=0):
        T = x.shape[-2]
        if offset < 0 or offset + T > self.max_len:
            raise ValueError(f"positions {offset}..{offset + T - 1} do not fit max_len={self.max_len}")
        return x + self.weight[offset:offset + T]
'''
    ex = check_one(L06, with_code(L06, "LearnedPositionalEmbedding", code, tmp_path), "LearnedPositionalEmbedding")
    failed = {c.name: c.message for c in ex.checks if c.status == "failed"}
    assert set(failed) == {"bfloat16 inputs on the CPU", "float16 inputs on the CPU", DOMAIN}, explain(ex)
    assert failed[DOMAIN].startswith("fails for dtype of x=bfloat16"), failed[DOMAIN]
    for name, message in failed.items():
        assert "expected float32" not in message, (name, message)
    assert "expected bfloat16" in failed["bfloat16 inputs on the CPU"], failed["bfloat16 inputs on the CPU"]
    assert "expected bfloat16" in failed[DOMAIN], failed[DOMAIN]


@pytest.mark.lesson06
def test_the_shrunk_failure_prints_in_at_most_20_lines_at_80_columns(tmp_path):
    import io

    from rich.console import Console

    from course_cli import render
    from graders.engine.results import LessonResult

    mistake = _mistake(L06, "T_from_axis_1")
    ex = check_one(L06, with_code(L06, mistake.exercise, mistake_source(mistake), tmp_path), mistake.exercise)
    buf = io.StringIO()
    render.render_result(Console(file=buf, width=80, no_color=True, highlight=False, soft_wrap=False),
                         LessonResult("lesson06", "x.ipynb", [ex]), L06.title)
    out = buf.getvalue()
    assert "leading dims=none" in out
    assert out.count("\n") <= 20 and max(len(line.rstrip()) for line in out.splitlines()) <= 80, out
