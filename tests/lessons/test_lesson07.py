"""lesson07 beyond the generic tests: correct alternatives pass (another GELU spelling, the fused-QKV
attention layout, torch's own LayerNorm), torch's encoder layer is named as forbidden, and a block
whose parameters are not registered fails the training check."""

from __future__ import annotations

import pytest

from graders.registry import find_lesson
from harness import check_one, explain, with_code

pytestmark = pytest.mark.lesson07
L07 = find_lesson("lesson07")

MLP_WRITTEN_OUT = '''
class MLP(nn.Module):
    def __init__(self, d_model, expansion=4, dropout=0.0, bias=True):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_model * expansion, bias=bias)
        self.fc2 = nn.Linear(d_model * expansion, d_model, bias=bias)
        self.drop = nn.Dropout(p=dropout)

    def forward(self, x):
        h = self.fc1(x)
        h = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h.pow(3))))
        return self.drop(self.fc2(h))
'''

# A block on the fused layout (one qkv_proj, rows q, k, v) through F.scaled_dot_product_attention,
# with torch's nn.LayerNorm: a different but correct design, graded through the same weights.
BLOCK_FUSED = '''
class FusedAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        self.h, self.p = num_heads, dropout
        self.qkv_proj = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)

    def forward(self, x, mask=None):
        B, T, D = x.shape
        q, k, v = self.qkv_proj(x).split(D, dim=-1)
        q, k, v = (t.reshape(B, T, self.h, D // self.h).transpose(1, 2) for t in (q, k, v))
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.p if self.training else 0.0)
        return self.out_proj(o.transpose(1, 2).reshape(B, T, D))


class TransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, expansion=4, dropout=0.0, norm_first=True, causal=False, bias=True):
        super().__init__()
        self.norm_first, self.causal = norm_first, causal
        self.ln1 = nn.LayerNorm(d_model, bias=bias)
        self.attn = FusedAttention(d_model, num_heads, dropout, bias)
        self.ln2 = nn.LayerNorm(d_model, bias=bias)
        self.mlp = MLP(d_model, expansion=expansion, dropout=dropout, bias=bias)
        self.resid_drop = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        if self.causal:
            c = torch.tril(torch.ones(x.size(1), x.size(1), dtype=torch.bool, device=x.device))
            mask = c if mask is None else torch.logical_and(mask, c)
        if self.norm_first:
            x = x + self.resid_drop(self.attn(self.ln1(x), mask))
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.resid_drop(self.attn(x, mask)))
        return self.ln2(x + self.mlp(x))
'''

BLOCK_TORCH_LAYER = '''
class TransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, expansion=4, dropout=0.0, norm_first=True, causal=False, bias=True):
        super().__init__()
        self.causal = causal
        self.layer = nn.TransformerEncoderLayer(d_model, num_heads, expansion * d_model, dropout, batch_first=True,
                                                activation=lambda t: F.gelu(t, approximate="tanh"),
                                                norm_first=norm_first, bias=bias)

    def forward(self, x, mask=None):
        if self.causal:
            c = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool, device=x.device).tril()
            mask = c if mask is None else mask & c
        return self.layer(x, src_mask=None if mask is None else ~mask)
'''

# Parts kept in a plain list are invisible to .parameters(): the forward pass is right, training is not.
BLOCK_UNREGISTERED = '''
class TransformerBlock(nn.Module):
    def __init__(self, d_model, num_heads, expansion=4, dropout=0.0, norm_first=True, causal=False, bias=True):
        super().__init__()
        self.norm_first, self.causal = norm_first, causal
        self.ln1 = LayerNorm(d_model, bias=bias)
        self.attn = MultiHeadAttention(d_model, num_heads, dropout=dropout, bias=bias)
        self.ln2 = LayerNorm(d_model, bias=bias)
        self.parts = [MLP(d_model, expansion, dropout, bias)]  # a list, not an nn.ModuleList
        self.dropout = nn.Dropout(dropout)

    @property
    def mlp(self):
        return self.parts[0]

    def forward(self, x, mask=None):
        if self.causal:
            c = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool, device=x.device).tril()
            mask = c if mask is None else mask & c
        if self.norm_first:
            x = x + self.dropout(self.attn(self.ln1(x), mask=mask)[0])
            return x + self.mlp(self.ln2(x))
        x = self.ln1(x + self.dropout(self.attn(x, mask=mask)[0]))
        return self.ln2(x + self.mlp(x))
'''


@pytest.mark.MLP
def test_mlp_with_the_tanh_formula_written_out_is_accepted(tmp_path):
    ex = check_one(L07, with_code(L07, "MLP", MLP_WRITTEN_OUT, tmp_path), "MLP")
    assert ex.status == "passed", explain(ex)


@pytest.mark.TransformerBlock
def test_fused_qkv_layout_and_torch_layernorm_are_accepted(tmp_path):
    ex = check_one(L07, with_code(L07, "TransformerBlock", BLOCK_FUSED, tmp_path), "TransformerBlock")
    assert ex.status == "passed", explain(ex)


@pytest.mark.TransformerBlock
def test_torch_encoder_layer_is_named_as_forbidden(tmp_path):
    ex = check_one(L07, with_code(L07, "TransformerBlock", BLOCK_TORCH_LAYER, tmp_path), "TransformerBlock")
    assert ex.status == "failed", explain(ex)
    forbidden = [c for c in ex.checks if c.name == "uses no forbidden API"]
    assert forbidden[0].status == "failed" and "multi_head_attention_forward" in forbidden[0].message


@pytest.mark.TransformerBlock
def test_unregistered_parameters_fail_the_training_check(tmp_path):
    ex = check_one(L07, with_code(L07, "TransformerBlock", BLOCK_UNREGISTERED, tmp_path), "TransformerBlock")
    assert ex.status == "failed", explain(ex)
    trains = [c for c in ex.checks if "trains" in c.name]
    assert trains[0].status == "failed" and "mlp.fc1.weight" in trains[0].message, explain(ex)
    assert any("parameters" in c.message for c in ex.checks if c.status == "failed"), explain(ex)
