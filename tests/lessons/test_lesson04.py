"""lesson04 beyond the generic tests: correct alternatives pass, built-in normalisations are named as
forbidden, a layer_norm_manual that leans on autograd is told so, and later lessons can import LayerNorm.

To keep the lesson's tests fast, each test grades one notebook carrying several swapped-in cells."""

from __future__ import annotations

import pytest
import torch


from graders.registry import find_lesson
from harness import check_in_process, explain, with_code

pytestmark = pytest.mark.lesson04
L04 = find_lesson("lesson04")

ALTERNATIVES = {
    "layer_norm": '''
def layer_norm(x, weight=None, bias=None, eps=1e-5):
    var, mean = torch.var_mean(x, dim=-1, keepdim=True, correction=0)
    y = (x - mean) * torch.rsqrt(var + eps)
    y = y if weight is None else y * weight
    return y if bias is None else y + bias
''',
    "LayerNorm": '''
class LayerNorm(nn.Module):
    def __init__(self, normalized_shape: int, eps=1e-5, elementwise_affine=True, bias=True):
        super().__init__()
        self.eps = eps
        self.register_parameter("weight", nn.Parameter(torch.ones(normalized_shape)) if elementwise_affine else None)
        self.register_parameter("bias", nn.Parameter(torch.zeros(normalized_shape))
                                if elementwise_affine and bias else None)

    def forward(self, x):
        mu = x.mean(-1, keepdim=True)
        sigma2 = x.var(-1, keepdim=True, unbiased=False)
        y = (x - mu) / (sigma2 + self.eps).sqrt()
        if self.weight is not None:
            y = y * self.weight
        if self.bias is not None:
            y = y + self.bias
        return y
''',
    "batch_norm": '''
def batch_norm(x, eps=1e-5):
    C = x.shape[1]
    xc = x.transpose(0, 1).reshape(C, -1)  # (C, N·positions)
    mean = xc.mean(dim=1)
    var = xc.var(dim=1, unbiased=False)
    shape = (1, C) + (1,) * (x.dim() - 2)
    return (x - mean.view(shape)) / torch.sqrt(var.view(shape) + eps)
''',
    "group_norm": '''
def group_norm(x, num_groups, eps=1e-5):
    N, C, *rest = x.shape
    if C % num_groups:
        raise ValueError(f"C={C} is not divisible by num_groups={num_groups}")
    xg = x.view(N, num_groups, C // num_groups, *rest)
    dims = tuple(range(2, xg.dim()))
    mean = xg.mean(dim=dims, keepdim=True)
    var = xg.var(dim=dims, keepdim=True, correction=0)
    return ((xg - mean) / (var + eps).sqrt()).view_as(x)
''',
    "layer_norm_manual": '''
class _LN(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps):
        mean = x.mean(-1, keepdim=True)
        var = x.var(-1, keepdim=True, unbiased=False)
        rstd = (var + eps).rsqrt()
        ctx.save_for_backward(x, mean, rstd, weight)
        return (x - mean) * rstd * weight + bias

    @staticmethod
    def backward(ctx, dy):
        x, mean, rstd, weight = ctx.saved_tensors
        D = x.shape[-1]
        x_hat = (x - mean) * rstd
        dxhat = dy * weight
        dx = (D * dxhat - dxhat.sum(-1, keepdim=True) - x_hat * (dxhat * x_hat).sum(-1, keepdim=True)) * rstd / D
        flat = dy.reshape(-1, D)
        return dx, (flat * x_hat.reshape(-1, D)).sum(0), flat.sum(0), None


def layer_norm_manual(x, weight, bias, eps=1e-5):
    return _LN.apply(x, weight, bias, eps)
''',
}


def _notebook(codes: dict, tmp_path, name: str):
    path = None
    for exercise, code in codes.items():
        path = with_code(L04, exercise, code, tmp_path, name=name, base=path)
    return path


def test_correct_alternatives_are_accepted(tmp_path):
    result = check_in_process(L04, _notebook(ALTERNATIVES, tmp_path, "alternatives.ipynb"))
    for ex in result.exercises:
        assert ex.status == "passed", explain(ex)


WRONG = {
    # a built-in normalisation through a reshape: group_norm with one group per row is a layer_norm
    "layer_norm": '''
def layer_norm(x, weight=None, bias=None, eps=1e-5):
    D = x.shape[-1]
    y = F.group_norm(x.reshape(-1, 1, D), 1, eps=eps).reshape(x.shape)
    y = y if weight is None else y * weight
    return y if bias is None else y + bias
''',
    "LayerNorm": '''
class LayerNorm(nn.LayerNorm):
    pass
''',
    # right values, but autograd's backward rather than the student's own
    "layer_norm_manual": '''
def layer_norm_manual(x, weight, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias
''',
    # right values, but no ValueError for a num_groups that does not divide C
    "group_norm": '''
def group_norm(x, num_groups, eps=1e-5):
    xg = x.reshape(x.shape[0], num_groups, -1)
    mean = xg.mean(-1, keepdim=True)
    var = xg.var(-1, keepdim=True, unbiased=False)
    return ((xg - mean) / torch.sqrt(var + eps)).reshape(x.shape)
''',
}


def test_wrong_kinds_of_answer_are_named(tmp_path):
    result = check_in_process(L04, _notebook(WRONG, tmp_path, "wrong.ipynb"), list(WRONG))
    by_id = {ex.id: ex for ex in result.exercises}
    for name in ("layer_norm", "LayerNorm"):
        ex = by_id[name]
        assert ex.status == "failed", explain(ex)
        forbidden = next(c for c in ex.checks if c.name == "uses no forbidden API")
        assert forbidden.status == "failed" and "_norm" in forbidden.message, explain(ex)
        # (group_norm refuses a single value per group: the domain's single vector of D=1 may show it)
        assert all(c.status in ("passed", "skipped") or c.name.startswith("over its declared domain")
                   and "D=1" in c.message for c in ex.checks if c is not forbidden), explain(ex)

    ex = by_id["layer_norm_manual"]
    assert ex.status == "failed", explain(ex)
    failed = [c for c in ex.checks if c.status == "failed"]
    assert [c.name for c in failed] == ["is a torch.autograd.Function with its own backward"], explain(ex)
    assert "torch.autograd.Function" in failed[0].message

    ex = by_id["group_norm"]
    assert ex.status == "failed", explain(ex)
    failed = [c for c in ex.checks if c.status == "failed"]
    assert [c.name for c in failed] == ["num_groups that does not divide C raises ValueError"], explain(ex)
    assert "raise ValueError" in failed[0].message


def test_later_lessons_can_import_the_solved_layer_norm():
    from graders.parts import import_lesson

    ln = import_lesson("lesson04").LayerNorm(16)
    ref = torch.nn.LayerNorm(16)
    with torch.no_grad():
        ref.weight.normal_()
        ref.bias.normal_()
    ln.load_state_dict(ref.state_dict())
    x = torch.randn(2, 3, 16)
    torch.testing.assert_close(ln(x), ref(x))
