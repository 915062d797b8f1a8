"""Lesson 03 beyond the generic tests: correct alternatives are accepted, lesson-specific slips are
rejected with a useful message, and the solved modules keep the layout later lessons import."""

from __future__ import annotations

import pytest

from graders.parts import import_lesson
from graders.registry import find_lesson
from harness import check_in_process, check_one, explain, with_code

LESSON = find_lesson("lesson03")
pytestmark = pytest.mark.lesson03

ALTERNATIVES = {
    "split_heads": '''
def split_heads(x, num_heads):
    B, T, D = x.shape
    if D % num_heads:
        raise ValueError("num_heads must divide the last dimension")
    return x.reshape(B, T, num_heads, -1).permute(0, 2, 1, 3)
''',
    "merge_heads": '''
def merge_heads(x):
    return x.transpose(1, 2).flatten(2)
''',
    "MultiHeadAttention": '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        self.h = num_heads
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d_model, d_model, bias=bias) for _ in range(4))
        self.drop = nn.Dropout(dropout)

    def forward(self, query, key=None, value=None, mask=None, need_weights=False):
        if key is None:
            key = query
        if value is None:
            value = key
        B, Tq, D = query.shape
        Tk = key.shape[1]
        q = self.q_proj(query).view(B, Tq, self.h, D // self.h)   # (B, Tq, H, Dh), heads not moved
        k = self.k_proj(key).view(B, Tk, self.h, D // self.h)
        v = self.v_proj(value).view(B, Tk, self.h, D // self.h)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) * (D // self.h) ** -0.5
        if mask is not None:
            scores = torch.where(mask, scores, torch.tensor(float("-inf"), dtype=scores.dtype, device=scores.device))
        w = self.drop(torch.softmax(scores, dim=-1))
        out = torch.einsum("bhqk,bkhd->bqhd", w, v).reshape(B, Tq, D)
        return self.out_proj(out), (w if need_weights else None)
''',
    "CausalSelfAttention": '''
class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        self.n_head, self.p = num_heads, dropout
        self.qkv_proj = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, is_causal=True):
        B, T, C = x.size()
        q, k, v = self.qkv_proj(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, H, T, Dh)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.p if self.training else 0, is_causal=is_causal)
        return self.out_proj(y.transpose(1, 2).contiguous().view(B, T, C))
''',
    "repeat_kv": '''
def repeat_kv(x, n_rep):
    return torch.repeat_interleave(x, n_rep, dim=1)
''',
    "GroupedQueryAttention": '''
class GroupedQueryAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, bias=False):
        super().__init__()
        self.h, self.kv, self.dh = num_heads, num_kv_heads, d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, num_kv_heads * self.dh, bias=bias)
        self.v_proj = nn.Linear(d_model, num_kv_heads * self.dh, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, is_causal=True):
        q = split_heads(self.q_proj(x), self.h)
        k = split_heads(self.k_proj(x), self.kv)
        v = split_heads(self.v_proj(x), self.kv)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, enable_gqa=True)  # no copies
        return self.out_proj(merge_heads(y))
''',
}


def test_correct_alternatives_are_accepted(tmp_path):
    """permute/flatten/einsum/torch.where/nn.Dropout/split/repeat_interleave/enable_gqa all pass."""
    path = None
    for name, code in ALTERNATIVES.items():
        path = with_code(LESSON, name, code.strip("\n"), tmp_path, "alternatives.ipynb", base=path)
    result = check_in_process(LESSON, path)
    for ex in result.exercises:
        assert ex.status == "passed", explain(ex)


SLIPS = {
    # an assert is not the ValueError the exercise asks for
    "split_heads": '''
def split_heads(x, num_heads):
    B, T, D = x.shape
    assert D % num_heads == 0, "bad num_heads"
    return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)
''',
    # F.dropout without training=self.training is on in eval mode too
    "MultiHeadAttention": '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        self.num_heads, self.head_dim, self.dropout = num_heads, d_model // num_heads, dropout
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key=None, value=None, mask=None, need_weights=False):
        key = query if key is None else key
        value = key if value is None else value
        q, k, v = (split_heads(p(t), self.num_heads) for p, t in ((self.q_proj, query), (self.k_proj, key), (self.v_proj, value)))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask, float("-inf"))
        weights = F.dropout(scores.softmax(-1), self.dropout)
        return self.out_proj(merge_heads(weights @ v)), (weights if need_weights else None)
''',
    # correct values, but the softmax written out by hand: no fast path
    "CausalSelfAttention": '''
class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        self.num_heads, self.dropout = num_heads, dropout
        self.qkv_proj = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, is_causal=True):
        q, k, v = (split_heads(t, self.num_heads) for t in self.qkv_proj(x).chunk(3, dim=-1))
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
        if is_causal:
            T = x.shape[1]
            scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool, device=x.device).tril(), float("-inf"))
        w = F.dropout(scores.softmax(-1), self.dropout, self.training)
        return self.out_proj(merge_heads(w @ v))
''',
}


def test_lesson_specific_slips_are_rejected_with_a_reason(tmp_path):
    path = None
    for name, code in SLIPS.items():
        path = with_code(LESSON, name, code.strip("\n"), tmp_path, "slips.ipynb", base=path)
    result = check_in_process(LESSON, path, list(SLIPS))
    by_id = {ex.id: ex for ex in result.exercises}

    def failed(ex, check):
        (c,) = [c for c in ex.checks if c.name == check and c.device == "cpu"]
        assert c.status == "failed", explain(ex)
        return c.message

    ex = by_id["split_heads"]
    assert ex.status == "failed"
    assert "raised AssertionError" in failed(ex, "raises ValueError when D is not divisible by num_heads")

    ex = by_id["MultiHeadAttention"]
    assert ex.status == "failed"
    assert "eval mode" in failed(ex, "dropout on the attention weights in training mode only")

    ex = by_id["CausalSelfAttention"]
    assert ex.status == "failed"
    assert "never calls F.scaled_dot_product_attention" in failed(ex, "goes through F.scaled_dot_product_attention")
    assert all(c.status in ("passed", "skipped") for c in ex.checks
               if c.name != "goes through F.scaled_dot_product_attention"), explain(ex)


def test_mha_through_sdpa_is_forbidden(tmp_path):
    code = '''
class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        self.num_heads = num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=bias)
        self.k_proj = nn.Linear(d_model, d_model, bias=bias)
        self.v_proj = nn.Linear(d_model, d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, query, key=None, value=None, mask=None, need_weights=False):
        key = query if key is None else key
        value = key if value is None else value
        q, k, v = (split_heads(p(t), self.num_heads) for p, t in ((self.q_proj, query), (self.k_proj, key), (self.v_proj, value)))
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        w = None
        if need_weights:
            s = (q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]))
            w = (s if mask is None else s.masked_fill(~mask, float("-inf"))).softmax(-1)
        return self.out_proj(merge_heads(out)), w
'''
    ex = check_one(LESSON, with_code(LESSON, "MultiHeadAttention", code.strip("\n"), tmp_path), "MultiHeadAttention")
    assert ex.status == "failed", explain(ex)
    (c,) = [c for c in ex.checks if c.name == "uses no forbidden API"]
    assert c.status == "failed" and "scaled_dot_product_attention" in c.message


def test_solved_modules_keep_the_layout_later_lessons_load():
    """lesson07/08 import these by name: parameter names and the fused q, k, v row order."""
    import torch

    l03 = import_lesson("lesson03")
    mha = l03.MultiHeadAttention(32, 4)
    assert sorted(mha.state_dict()) == sorted(f"{p}.{w}" for p in ("q_proj", "k_proj", "v_proj", "out_proj")
                                               for w in ("weight", "bias"))
    out, w = mha(torch.randn(2, 5, 32))
    assert out.shape == (2, 5, 32) and w is None
    csa = l03.CausalSelfAttention(32, 4, bias=False)
    assert sorted(csa.state_dict()) == ["out_proj.weight", "qkv_proj.weight"]
    assert csa.qkv_proj.weight.shape == (96, 32)
    gqa = l03.GroupedQueryAttention(32, 4, 2)
    assert gqa.k_proj.weight.shape == (16, 32) and gqa.q_proj.bias is None
    with pytest.raises(ValueError, match="num_heads"):
        l03.split_heads(torch.randn(2, 3, 10), 4)


@pytest.mark.MultiHeadAttention
def test_dropout_after_the_output_projection_is_caught_by_where_the_zeros_are(tmp_path):
    from graders.engine import solved_cell

    code = solved_cell("lesson03", "MultiHeadAttention")
    code = code.replace("weights = F.dropout(weights, p=self.dropout, training=self.training)", "pass")
    code = code.replace("return out, (weights", "return F.dropout(out, self.dropout, self.training), (weights")
    assert "F.dropout(out" in code and "F.dropout(weights" not in code
    ex = check_one(LESSON, with_code(LESSON, "MultiHeadAttention", code, tmp_path), "MultiHeadAttention")
    failed = [c for c in ex.checks if c.status == "failed"]
    assert "dropout drops attention weights (where the zeros appear)" in [c.name for c in failed], explain(ex)
    (placement,) = [c for c in failed if c.name.startswith("dropout drops") and not c.name.endswith(" (fresh inputs)")]
    assert "nowhere after out_proj" in placement.message
