"""The module and decoding families (graders/engine/mutations_module.py) on small sources: what each one
produces and says. Pure ast, no torch run; that they name the lessons' withheld catalogue mistakes is
benchmarks/mutation_coverage.py's measure (docs/benchmarks.md)."""

from __future__ import annotations

import ast

from graders.engine import mutations as M
from mutation_sites import body as _body, by_op as _by_op
from graders.engine import mutations_module as MM




# An identical source claimed by another module's family earlier in the round-robin (mutations_shape.py):
# one mutant per source, under the family that made it first; both sentences say the same edit.
SAME_EDIT = {"offset-dropped": ("term-dropped",)}


def _any(ops, op: str, text: str, absent: str | None = None) -> M.Mutant:
    for m in ops.get(op, []) + [m for alt in SAME_EDIT.get(op, ()) for m in ops.get(alt, [])]:
        b = _body(m)
        if text in b and (absent is None or absent not in b):
            return m
    raise AssertionError(f"no {op} mutant with {text!r}: {[_body(m) for m in ops.get(op, [])]}")


BLOCK = '''
class f(nn.Module):
    def __init__(self, d, hidden, eps=1e-5, bias=False):
        super().__init__()
        self.ln1 = RMSNorm(d, eps=eps)
        self.ln2 = RMSNorm(d, eps=eps)
        self.gate_proj = nn.Linear(d, hidden, bias=False)
        self.up_proj = nn.Linear(d, hidden, bias=False)
        self.drop = nn.Dropout(0.1)
        self.pre = True

    def forward(self, x, cache=None, layer_idx=0, start=None):
        if self.pre:
            x = x + self.drop(self.attn(self.ln1(x), cache, layer_idx, start))
        h = F.silu(self.gate_proj(x)) * self.up_proj(x)
        return x + self.mlp(self.ln2(x)) + h
'''


def test_norm_order_dropout_and_activation_in_a_block():
    ops = _by_op(BLOCK)
    post = _any(ops, "norm-post-all", "x = self.ln1(x + self.drop(self.attn(x, cache, layer_idx, start)))")
    assert "self.ln2(x + self.mlp(x))" in _body(post) and "post-norm" in post.sentence
    assert "x = self.ln1(x) + self.drop(" in _body(_any(ops, "norm-stream", "x = self.ln1(x) + self.drop("))
    _any(ops, "norm-dropped", "self.attn(x, cache")
    _any(ops, "norm-twice", "self.ln1(self.ln1(x))")
    m = _any(ops, "dropout-in-eval", "torch.nn.functional.dropout(self.attn(self.ln1(x), cache, layer_idx, start), "
                                     "self.drop.p)")
    assert "eval mode" in m.sentence
    _any(ops, "dropout-on-stream", "self.drop(x + self.attn(")
    m = _any(ops, "activation-moved", "h = self.gate_proj(x) * F.silu(self.up_proj(x))")
    assert "silu is applied to self.up_proj(x) instead of self.gate_proj(x)" in m.sentence
    _any(ops, "activation-swapped", "F.relu(self.gate_proj(x))")


def test_branch_keyword_and_call_arguments():
    ops = _by_op(BLOCK)
    _any(ops, "branch-never", "if False:")
    every = _any(ops, "keyword-dropped-everywhere", "self.gate_proj = nn.Linear(d, hidden)\n")
    assert "self.up_proj = nn.Linear(d, hidden)\n" in _body(every) and "bias=False" in every.sentence
    _any(ops, "keyword-dropped", "self.ln1 = RMSNorm(d)\n")
    m = _any(ops, "call-argument-dropped", "self.attn(self.ln1(x), cache, layer_idx)")
    assert "without `start`" in m.sentence
    src = "def f(a, cache, data=None):\n    y = a if cache is None else cache(a)\n    if data is not None and " \
          "len(data) < 3:\n        y = y + 1\n    return g(a, expansion, dropout, bias)\n"
    ops = _by_op(src)
    _any(ops, "branch-ifexp-else", "y = cache(a)")
    _any(ops, "branch-clause-dropped", "if data is not None:")
    _any(ops, "call-argument-dropped", "g(a, dropout=dropout, bias=bias)")


ROPE = '''
def f(x, positions, base=10000.0):
    D = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, D, 2, dtype=torch.float32) / D)
    angles = positions.to(x.device, torch.float32)[..., None] * inv_freq
    cos, sin = angles.cos(), angles.sin()
    a, b = x[..., 0::2].float(), x[..., 1::2].float()
    rotated = torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1)
    return rotated.flatten(-2).to(x.dtype)
'''


def test_rope_layouts_trig_exponent_and_positions():
    ops = _by_op(ROPE)
    half = _any(ops, "rope-layout-half", "torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)")
    b = _body(half)
    assert "x[..., :x.shape[-1] // 2]" in b and "x[..., x.shape[-1] // 2:]" in b and "rotated.to(x.dtype)" in b
    assert "half-split" in half.sentence
    back = _body(half).replace("def f", "def g")
    inter = _by_op(back, "g")["rope-layout-interleaved"][0]
    assert "torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)" in _body(inter)
    _any(ops, "rope-sin-cos-swapped", "a * sin - b * cos")
    _any(ops, "rope-exponent-i", "torch.arange(D // 2, dtype=torch.float32)")
    _any(ops, "rope-positions-ignored", "torch.arange(x.shape[-2], device=x.device).to(x.device")
    src = "def f(x):\n    q = split(x)\n    k = split(x)\n    v = split(x)\n    q, k = (rope(t) for t in (q, k))\n" \
          "    return q, k, v\n"
    m = _any(_by_op(src), "rope-applied-to-more", "q, k, v = (rope(t) for t in (q, k, v))")
    assert "applied to v as well" in m.sentence


ONLINE = '''
def f(x, k, block):
    s = s * torch.exp(m - m_new) + torch.exp(x - m_new).sum(dim=-1)
    m_safe = m_new.masked_fill(m_new == float("-inf"), 0.0)
    acc.mul_(alpha).baddbmm_(p, v)
    shift = Tk - Tq
    i = torch.arange(t_q)[:, None] + (t_k - t_q)
    pos = torch.arange(start, start + T, device=x.device)
    keys = k[..., -self.window:, :]
    width = n * ((h + m - 1) // m)
    top = probs.amax(dim=-1, keepdim=True)
    before = p.cumsum(dim=-1) - p
    flops = 4 * b * h * d
    T = x.shape[-2]
    param.copy_(ours[name])
    k, v = repeat_kv(k, n), repeat_kv(v, n)
    base = base * scale ** (dim / (dim - 2))
    inv = inv / scale
    model.train(was)
    return s
'''


def test_online_offset_window_and_the_rest():
    ops = _by_op(ONLINE)
    m = _any(ops, "online-not-rescaled", "s = s + torch.exp(x - m_new)")
    assert "old maximum" in m.sentence
    _any(ops, "online-not-rescaled", "acc.baddbmm_(p, v)")
    _any(ops, "online-guard-dropped", "m_safe = m_new\n")
    _any(ops, "offset-zero", "shift = 0")
    _any(ops, "offset-dropped", "i = torch.arange(t_q)[:, None]\n")
    _any(ops, "offset-from-zero", "pos = torch.arange(T, device=x.device)")
    m = _any(ops, "window-oldest", "keys = k[..., :self.window, :]")
    assert "the first self.window positions are kept" in m.sentence
    _any(ops, "rounding-down", "width = n * (h // m)")
    _any(ops, "reduction-swapped", "top = probs.sum(dim=-1, keepdim=True)")
    _any(ops, "reduction-cumsum-inclusive", "before = p.cumsum(dim=-1)\n")
    _any(ops, "factor-halved", "flops = 2 * b * h * d")
    _any(ops, "size-from-start", "T = x.shape[1]")
    _any(ops, "copy-rebound", "param.data = ours[name]")
    _any(ops, "gqa-tiled", "k, v = (k.repeat(1, n, 1, 1), v.repeat(1, n, 1, 1))")
    m = _any(ops, "ratio-inverted", "scale ** ((dim - 2) / dim)")
    assert "upside down: (dim - 2) / dim, not dim / (dim - 2)" in m.sentence  # the terms grouped as computed
    _any(ops, "ratio-multiplied", "inv = inv * scale")
    _any(ops, "step-missing", "pass")


def test_every_family_has_a_hint_and_the_modules_compose():
    families = {op.__name__.removeprefix("op_") for op in MM.MODULE_OPERATORS}
    assert families == set(MM.MODULE_HINTS)
    assert set(MM.MODULE_OPERATORS) <= set(M.OPERATORS)
    assert all(M.FAMILY_HINTS[f] == MM.MODULE_HINTS[f] for f in families)
    for src in (BLOCK, ROPE, ONLINE):
        for m in M.mutants(src, "f", cap=10_000):
            assert m.family in M.FAMILY_HINTS, m.operator
            compile(m.source, "<m>", "exec")
            assert len(max(m.sentence.split("\n"), key=len)) < 400


def test_a_helper_the_cell_defines_is_mutated_in_place_before_the_exercise():
    src = '''
def window_mask(t, window=None):
    i = torch.arange(t)[:, None]
    j = torch.arange(t)[None, :]
    mask = j <= i
    if window is not None:
        mask = mask & (j > i - window)
    return mask


class f(nn.Module):
    def forward(self, x):
        return x.masked_fill(~window_mask(x.shape[-1], self.window), 0.0)
'''
    ops = _by_op(src)
    m = _any(ops, "comparison-boundary", "mask = mask & (j >= i - window)")
    assert m.sentence.startswith("in `window_mask` (or wherever your `f` does that work): ")
    last = ast.parse(m.source).body[-1]  # the changed helper, redefined just before the exercise
    assert isinstance(last, ast.If) and [type(n) for n in last.body] == [ast.FunctionDef, ast.ClassDef]
    assert "j >= i - window" in ast.unparse(last.body[0]) and "j > i - window" in ast.unparse(ast.parse(m.source).body[0])


def test_order_topk_and_rows_from_an_offset():
    src = '''
def f(logits, top_k, offset=0):
    kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[..., -1:]
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    w = weight[offset:offset + T]
    return torch.tensor(sorted_probs)
'''
    ops = _by_op(src)
    _any(ops, "topk-one-more", "min(top_k + 1, logits.shape[-1])")
    _any(ops, "order-unsorted", "sorted_probs, order = (probs, torch.arange(probs.shape[-1], device=probs.device)"
                                ".expand_as(probs))")
    _any(ops, "order-reversed", "return torch.tensor(sorted_probs).flip(0)")
    _any(ops, "offset-from-zero", "w = weight[:T]")


def test_a_tied_weight_copied_and_a_temperature_after_the_softmax():
    src = '''
class f(nn.Module):
    def __init__(self, v, d):
        super().__init__()
        self.wte = nn.Embedding(v, d)
        self.lm_head = nn.Linear(d, v, bias=False)
        self.lm_head.weight = self.wte.weight
        nn.init.normal_(self.wte.weight, std=0.02)

    def forward(self, logits, temperature):
        logits = logits / temperature
        probs = torch.softmax(logits, dim=-1)
        return probs
'''
    ops = _by_op(src)
    m = _any(ops, "tie-copied", "nn.init.normal_(self.wte.weight, std=0.02)\n        self.lm_head.weight = "
                                "nn.Parameter(self.wte.weight.detach().clone())")
    assert "not the same Parameter" in m.sentence
    m = _any(ops, "softmax-divided-after", "probs = torch.softmax(logits, dim=-1) / temperature",
             absent="logits = logits / temperature")
    assert "after the softmax" in m.sentence
    # a call that is a statement of its own is named by itself, not "in the result"
    assert all(" in the result" not in m.sentence for m in ops.get("keyword-dropped", []))
