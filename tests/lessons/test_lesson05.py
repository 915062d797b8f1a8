"""Lesson 05 beyond the generic tests: correct alternatives pass, the Triton check wants a real kernel
that writes the output, and benchmark() returns a table."""

from __future__ import annotations

import pytest

from graders.registry import find_lesson
from harness import check_in_process, check_one, explain, with_code

LESSON = find_lesson("lesson05")
pytestmark = pytest.mark.lesson05

RMS_NORM_ALTERNATIVES = {
    # 1 / sqrt instead of rsqrt, .to(torch.float32) instead of .float()
    "one_over_sqrt": '''
def rms_norm(x, weight=None, eps=1e-6):
    h = x.to(torch.float32)
    rms = torch.sqrt(torch.mean(h * h, dim=-1, keepdim=True) + eps)
    out = h / rms
    return (out if weight is None else out * weight.to(torch.float32)).to(x.dtype)
''',
    # LLaMA's reference code: cast back to x's dtype first, then multiply by the weight
    "llama_style": '''
def rms_norm(x, weight=None, eps=1e-6):
    variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
    hidden = (x.to(torch.float32) * torch.rsqrt(variance + eps)).to(x.dtype)
    return hidden if weight is None else weight.to(x.dtype) * hidden
''',
}


RMSNORM_WITHOUT_HELPER = '''
class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        h = hidden_states.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return (self.weight.float() * h).to(hidden_states.dtype)
'''


# A different but correct kernel: contiguous rows only (so no stride argument), 1/sqrt instead of
# rsqrt, other names, the grid from a lambda.
TRITON_ALTERNATIVE = '''
@triton.jit
def rmsnorm_row(X, W, Y, N, eps, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = tl.arange(0, BLOCK_SIZE)
    m = offs < N
    xs = tl.load(X + pid * N + offs, mask=m, other=0.0)
    xf = xs.to(tl.float32)
    var = tl.sum(xf * xf, axis=0) / N
    normed = xf / tl.sqrt(var + eps)
    ws = tl.load(W + offs, mask=m, other=0.0).to(tl.float32)
    tl.store(Y + pid * N + offs, normed * ws, mask=m)


def rms_norm_triton(x, weight, eps=1e-6):
    x2d = x.contiguous().view(-1, x.shape[-1])
    out = torch.empty_like(x2d)
    n = x2d.shape[1]
    grid = lambda meta: (x2d.shape[0],)
    rmsnorm_row[grid](x2d, weight.contiguous(), out, n, eps, BLOCK_SIZE=triton.next_power_of_2(n))
    return out.reshape(x.shape)
'''


@pytest.mark.rms_norm
def test_llama_style_rms_norm_passes(tmp_path):
    path = with_code(LESSON, "rms_norm", RMS_NORM_ALTERNATIVES["llama_style"], tmp_path)
    ex = check_one(LESSON, path, "rms_norm")
    assert ex.status == "passed", explain(ex)


PURE_TORCH = '''
def rms_norm_triton(x, weight, eps=1e-6):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)
'''

# launches a kernel, but the answer it returns is torch's
DECOY_KERNEL = '''
@triton.jit
def _copy(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs, mask=offs < n), mask=offs < n)


def rms_norm_triton(x, weight, eps=1e-6):
    scratch = torch.empty_like(weight)
    _copy[(1,)](weight, scratch, weight.numel(), BLOCK=triton.next_power_of_2(weight.numel()))
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * scratch.float()).to(x.dtype)
'''


def _kernel_check(ex):
    return next(c for c in ex.checks if c.name == "a Triton kernel computes the output" and c.device == "cpu")


KERNEL_LEFT_AS_STUB = '''
@triton.jit
def _rms_norm_kernel(x_ptr, w_ptr, y_ptr, n_cols, x_row_stride, y_row_stride, eps, BLOCK: tl.constexpr):
    raise NotImplementedError()


def rms_norm_triton(x, weight, eps=1e-6):
    rows = x.reshape(-1, x.shape[-1]).contiguous()
    y = torch.empty_like(rows)
    _rms_norm_kernel[(rows.shape[0],)](rows, weight, y, rows.shape[1], rows.stride(0), y.stride(0), eps,
                                       BLOCK=triton.next_power_of_2(rows.shape[1]))
    return y.view(x.shape)
'''


def test_benchmark_on_cpu_returns_a_table():
    from graders import lesson05_rmsnorm
    from graders.parts import import_lesson

    ns = vars(import_lesson("lesson05"))
    report = lesson05_rmsnorm.benchmark(ns, "cpu")
    assert report["columns"][:4] == ["shape", "yours (ms)", "torch (ms)", "ratio"]
    assert len(report["rows"]) == 3
    for row in report["rows"]:
        assert len(row) == len(report["columns"])
        assert all(isinstance(v, float) and v > 0 for v in row[1:])
    assert any("interpreter" in n for n in report["notes"])


def test_benchmark_reports_an_unfinished_exercise():
    from graders import lesson05_rmsnorm

    def rms_norm(x, weight=None, eps=1e-6):
        raise NotImplementedError()

    report = lesson05_rmsnorm.benchmark({"rms_norm": rms_norm}, "cpu")
    assert report["rows"][0][1] == "—"
    assert any("not implemented" in n for n in report["notes"])
