"""The layout, layer, statistic and argument operators (graders/engine/mutations_shape.py) on small sources:
what each one produces and says, that they are registered after mutations.py's own, and that a family fires
only where its pattern is. Pure ast, no torch run."""

from __future__ import annotations

import ast
import types

from graders.engine import mutations as M
from mutation_sites import body as _body, by_op as _by_op
from graders.engine import mutations_shape as S




HEADS = '''
def f(x, n):
    B, T, D = x.shape
    y = x.view(B, T, n, D // n).transpose(1, 2)
    z = y.transpose(1, 2).reshape(B, T, D)
    s = y @ y.transpose(-2, -1)
    r = y[:, :, None].expand(B, n, 3, T, D // n).reshape(B, n * 3, T, D // n)
    return z, s, r, repeat_kv(y, 3)
'''

MODULE = '''
class f(nn.Module):
    def __init__(self, d_model: int, num_heads: int, bias: bool = True):
        super().__init__()
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.qkv_proj = nn.Linear(d_model, 3 * d_model, bias=bias)
        self.out_proj = nn.Linear(d_model, d_model, bias=bias)
        self.gain = nn.Parameter(torch.ones(d_model))

    def forward(self, x: torch.Tensor, key: torch.Tensor | None = None, value: torch.Tensor | None = None,
                is_causal: bool = True):
        value = key if value is None else value
        q, k, v = self.qkv_proj(x).chunk(3, dim=-1)
        q, k, v = (split_heads(t, self.num_heads) for t in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        weights = scores.softmax(dim=-1)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal)
        return self.out_proj(merge_heads(out)) * self.gain, weights
'''

NORMS = '''
def f(x, w, mask, dim, eps=1e-6):
    xf = x.float()
    shifted = x - x.amax(dim=dim, keepdim=True)
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    y = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    g = w * (y - y.mean(dim=-1, keepdim=True) - x * (y * x).mean(dim=-1, keepdim=True))
    ones = torch.ones(4, 4, device=x.device).tril(diagonal=x.shape[-1] - 4)
    s = y.masked_fill(~mask, 0.0)
    visible = mask.any(dim=-1, keepdim=True)
    s = s.masked_fill(~visible, 1.0)
    return s.softmax(dim=-1).masked_fill(~visible, 0.0), shifted, var, g, ones
'''


def test_registered_after_the_engines_own_with_hints():
    assert M.OPERATORS[-len(S.OPERATORS):] == S.OPERATORS
    assert len(set(M.OPERATORS)) == len(M.OPERATORS)
    families = {m.family for src, name in ((HEADS, "f"), (MODULE, "f"), (NORMS, "f")) for m in M.mutants(src, name, 1000)}
    assert families - set(M.FAMILY_HINTS) == set()  # every family `course hint` may follow has a hint
    from graders.engine.kinds import hint_for

    assert hint_for("mutation:layer-skipped") == S.HINTS["layer"]


def test_layout_transposes_views_and_copies():
    ops = _by_op(HEADS)
    (viewed,) = ops["layout-viewed-transposed"]
    assert "y = x.view(B, n, T, D // n)\n" in _body(viewed) + "\n"
    assert "(B, n, T, D // n) instead of (B, T, n, D // n)" in viewed.sentence
    (merged,) = ops["layout-transpose-dropped"]
    assert "z = y.reshape(B, T, D)" in _body(merged) and "transpose(1, 2) before it" in merged.sentence
    (reversed_,) = ops["layout-reversed"]
    assert "s = y @ y.T" in _body(reversed_) and "reverses every axis" in reversed_.sentence
    (tiled,) = ops["repeat-expand-tiled"]
    assert "y[:, None, :].expand(B, 3, n, T, D // n)" in _body(tiled)
    (helper,) = ops.get("repeat-helper-tiled") or ops["gqa-tiled"]  # (the same edit: whichever family came first)
    assert "y.repeat(1, 3, 1, 1)" in _body(helper) and ("`repeat_kv`" in helper.sentence
                                                         or "tiled (0, 1, 0, 1" in helper.sentence)


def test_module_layer_scale_fallback_flag_split_parameter():
    ops = _by_op(MODULE)
    (skipped,) = ops["layer-skipped"]
    assert "return (merge_heads(out) * self.gain, weights)" in _body(skipped)
    assert skipped.sentence.startswith("`out_proj` is never applied")
    (size,) = ops["scale-size"]  # only self.* counts for a self.* size
    assert "math.sqrt(self.num_heads * self.head_dim)" in _body(size)
    assert "divided by √(self.num_heads · self.head_dim) instead of √self.head_dim" in size.sentence
    fallbacks = {m.sentence for m in ops["default-fallback"]}
    assert "when `value` is None it is taken from `x`, not from `key`" in fallbacks
    assert not any("is_causal" in s for s in fallbacks)  # a flag is no tensor to fall back on
    flags = {m.sentence: _body(m) for m in ops["default-flag-constant"]}
    bias = next(b for s, b in flags.items() if s.startswith("`bias`"))
    assert bias.count("bias=False") == 2  # every layer it is passed to, at once
    causal = next(s for s in flags if s.startswith("`is_causal`"))
    assert "always gets is_causal=False" in causal
    (split,) = ops["layout-split-before-chunk"]
    assert "q, k, v = split_heads(self.qkv_proj(x), self.num_heads).chunk(3, dim=-1)\n        pass" in _body(split)
    (plain,) = ops["parameter-plain"]
    assert "self.gain = torch.ones(d_model)" in _body(plain)
    (zero,) = ops["parameter-init"]
    assert "nn.Parameter(torch.zeros(d_model))" in _body(zero) and "starts at zeros instead of ones" in zero.sentence
    (avg,) = ops["returned-averaged"]
    assert "weights.mean(dim=1))" in _body(avg)


def test_axes_terms_statistics_device_fill_diagonal():
    ops = _by_op(NORMS)
    assert any("x.amax(dim=-1, keepdim=True)" in _body(m) for m in ops["axis-last"])
    (zero,) = ops["axis-zero"]
    assert _body(zero).count("dim=0") == 5 and "dim=dim" in _body(zero)  # every -1, not the variable
    whole, along = sorted(ops["axis-whole"], key=lambda m: "along `dim`" in m.sentence)
    assert "var = ((x - mean) ** 2).mean()" in _body(whole)
    # a reduction along a variable `dim`, alone, over the whole tensor
    assert "shifted = x - x.amax()" in _body(along) and "runs over the whole tensor, not along `dim`" in along.sentence
    assert _body(along).count("dim=-1") == ast.unparse(ast.parse(NORMS)).count("dim=-1")  # the others unchanged
    # a softmax is no statistic; nor is a mask's any(): over the whole tensor it reads as "no row handled"
    assert "softmax(dim=-1)" in _body(whole) and "mask.any(dim=-1, keepdim=True)" in _body(whole)
    dropped = {m.sentence: _body(m) for m in ops["term-dropped"]}
    assert any("shifted = x\n" in b + "\n" for b in dropped.values())
    assert any("g = w * (y - y.mean(dim=-1, keepdim=True))" in b for b in dropped.values())
    assert any("g = w * y\n" in b + "\n" for b in (_body(m) for m in ops["term-only-first"]))
    (mean_abs,) = ops["statistic-mean-abs"]
    assert "1 / (xf.abs().mean(dim=-1, keepdim=True) + eps)" in _body(mean_abs)
    centred = {_body(m) for m in ops["statistic-centred"]}
    assert any("xf = x.float() - x.float().mean(dim=-1, keepdim=True)" in b for b in centred)
    (device,) = ops["device-dropped"]
    assert "torch.ones(4, 4).tril" in _body(device)
    fills = {m.sentence: _body(m) for m in ops["fill-dropped"]}
    vis = next(b for s, b in fills.items() if "~visible" in s)
    assert "~visible" not in vis.split("visible = ")[1].split("\n", 1)[1]  # both fills with that mask, at once
    assert "y.masked_fill(~mask, 0.0)" in vis
    # (the same edit may be claimed first by mutations_module's keyword family: both sentences name the offset)
    (offset,) = ops.get("diagonal-offset-dropped") or ops["keyword-dropped"]
    assert ".tril()" in _body(offset) and "x.shape[-1] - 4" in offset.sentence


def test_families_fire_only_where_their_pattern_is():
    src = "def f(x, y):\n    return x * y + 1\n"
    assert M.mutants(src, "f") == []
    plain = "def f(x):\n    return torch.softmax(x, dim=-1)\n"
    assert not [m for m in M.mutants(plain, "f") if m.operator in ("axis-zero", "axis-whole", "term-dropped")]
    one_mask = "def f(s, m):\n    return s.masked_fill(~m, 0.0)\n"
    assert "fill" not in {m.family for m in M.mutants(one_mask, "f")}  # the mask ignored is `default`'s


def test_every_mutant_compiles_and_differs():
    for src in (HEADS, MODULE, NORMS):
        original = ast.unparse(ast.parse(src))
        ms = M.mutants(src, "f", cap=1000)
        assert len({m.source for m in ms}) == len(ms)
        for m in ms:
            compile(m.source, "<m>", "exec")
            assert ast.unparse(ast.parse(m.source)) != original


SDPA = '''
def f(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = softmax(scores, dim=-1)
    return weights @ v
'''

CELL = '''
class Fn(torch.autograd.Function):
    @staticmethod
    def backward(ctx, g):
        x_hat, = ctx.saved_tensors
        return g - g.mean(dim=-1, keepdim=True) - x_hat * (g * x_hat).mean(dim=-1, keepdim=True)


def norm(x, w=None):
    dims = (0, *range(2, x.dim()))
    y = x.float() * x.float().mean(dim=dims)
    if w is not None:
        y = y * w.float()
    return y.to(x.dtype)


def f(x):
    return Fn.apply(x)


def g(x, w):
    return norm(x, w)
'''


def test_fills_multiplied_added_after_the_softmax():
    ops = _by_op(SDPA)
    (mult,) = ops["fill-multiplied"]
    assert "scores = scores + (~mask).to(scores.dtype) * float('-inf')" in _body(mult)
    assert "0 × -inf, which is NaN" in mult.sentence
    (bias,) = ops["fill-float-bias"]
    assert "scores = scores + (~mask).float() * -1000000000.0" in _body(bias)
    (after,) = ops["fill-after-softmax"]
    body = _body(after)
    assert "        scores = scores\n" in body + "\n"
    assert "weights = softmax(scores, dim=-1).masked_fill(~mask, 0.0) if mask is not None else softmax(scores, " \
           "dim=-1)" in body
    assert "no longer sum to 1" in after.sentence


def test_a_helper_the_exercise_delegates_to_is_mutated_in_a_redefinition():
    ops = _by_op(CELL, "f")
    dropped = [m for m in ops["term-dropped"]]
    assert dropped and all("class Fn" in _body(m).split("def f(")[0].split("if True:")[1] for m in dropped)
    assert any("return g - g.mean(dim=-1, keepdim=True)\n" in _body(m) + "\n" for m in dropped)
    assert {m.family for m in M.mutants(CELL, "f", 1000)} >= {"term", "axis"}  # mutations.py's own too
    ops = _by_op(CELL, "g")  # `return norm(x, w)`: norm is mutated, Fn is not
    (order,) = ops["cast-after-product"]
    assert "return y.to(x.dtype) * w" in _body(order) and "y = y * w.float()" not in _body(order).split("if True:")[1]
    (kept,) = ops["axis-kept-other"]
    assert "dims = tuple(range(1, x.dim()))" in _body(kept) and "leaves out axis 0 instead of axis 1" in kept.sentence
    redefined = [_body(m).split("if True:")[1] for ms in ops.values() for m in ms if "if True:" in _body(m)]
    assert redefined and not any("class Fn" in r for r in redefined)
    ns: dict = {}
    fake = types.SimpleNamespace(autograd=types.SimpleNamespace(Function=object))
    exec(compile(order.source, "<m>", "exec"), {"torch": fake}, ns)  # the redefinition runs: g sees the new norm
    assert "norm" in ns and "g" in ns


def test_each_operator_speaks_only_for_the_families_it_declares():
    for src in (HEADS, MODULE, NORMS, SDPA, CELL):
        tree = ast.parse(src)
        for name in ("f", "g"):
            nodes = M._scope(tree, name)
            for op in S.OPERATORS:
                declared = getattr(op, "families", [op.__name__.removeprefix("op_")])
                for _, _, operator, sentence in op(nodes, M._parents(tree), {"exercise": name}):
                    assert operator.split("-", 1)[0] in declared, (op.__name__, operator)
                    assert len(sentence) < 240 and "\n" not in sentence


GUARDS = '''
def f(x: torch.Tensor, y: torch.Tensor, window: int, p: float):
    if window < 1:
        raise ValueError(f"window must be at least 1, got {window}")
    if not 0.0 <= p < 1.0:
        raise ValueError(f"p must be in [0, 1), got {p}")
    if x.shape[-1] > 4:
        print("wide")
    D = x.shape[-1]
    return x / math.sqrt(D) + y[..., :D] / D
'''


def test_a_validation_missing_or_its_bound_flipped_says_which_way():
    ops = _by_op(GUARDS)
    missing = {m.sentence: _body(m) for m in ops["guard-missing"]}
    assert len(missing) == 2  # the two `if ...: raise`, not the `if` that prints
    assert any("`window`" in s and "if False:" in b for s, b in missing.items())
    bounds = {m.sentence: _body(m) for m in ops["guard-boundary"]}
    said = "\n".join(bounds)
    assert "`window` exactly at its limit `1` is rejected" in said  # window < 1 → window <= 1 rejects 1
    assert "`p` exactly at its limit `0.0` is rejected" in said  # under `not`: 0.0 < p rejects 0.0
    assert "`p` exactly at its limit `1.0` is accepted, where the text rejects it with a ValueError" in said
    assert any("if not 0.0 <= p <= 1.0:" in b for b in bounds.values())
    # a bound comes before the whole validation missing (mutations.py keeps the first of equal observations)
    order = [m.operator for m in M.mutants(GUARDS, "f", cap=1000) if m.family == "guard"]
    assert order.index("guard-boundary") < order.index("guard-missing")


def test_a_size_read_from_another_tensor_or_axis():
    ops = _by_op(GUARDS)
    bodies = [_body(m) for m in ops["sizeof-other"]]
    assert any("D = y.shape[-1]" in b for b in bodies)
    # one use of a name holding a size, the other uses left
    assert any("x / math.sqrt(x.shape[-2]) + y[..., :D] / D" in b for b in bodies)
    assert "sizeof" in M.FAMILY_HINTS and "guard" in M.FAMILY_HINTS


SIBLINGS = '''
class f(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.q_proj = nn.Linear(d, d)
        self.k_proj = nn.Linear(d, d)
        self.ln1 = LayerNorm(d)
        self.ln2 = LayerNorm(d)
        self.head = nn.Embedding(3, d)

    def forward(self, x: torch.Tensor):
        q, k = self.q_proj(x), self.k_proj(x)
        return self.ln2(self.ln1(q @ k.mT)), self.head(x)
'''


def test_a_layer_used_in_place_of_another_of_its_kind():
    sites = [(m.sentence, _body(m)) for m in M.mutants(SIBLINGS, "f", cap=1000) if m.family == "sibling"]
    said = "\n".join(s for s, _ in sites)
    # the layer built just before comes first: a line copied from the one above
    assert sites[0][0].startswith("`q, k` goes through `self.q_proj` where `self.k_proj` belongs")
    assert "q, k = (self.q_proj(x), self.q_proj(x))" in sites[0][1]
    assert "`self.ln1` where `self.ln2` belongs" in said and "`self.ln2` where `self.ln1` belongs" in said
    assert "self.head" not in said  # no other layer of its kind


def test_an_input_changed_in_place_only_while_it_is_the_callers():
    src = '''
def f(x: torch.Tensor, n: int):
    y = x - x.amax(dim=-1, keepdim=True)
    x = x * 2
    z = x + y
    return z
'''
    (m,) = [m for m in M.mutants(src, "f", cap=1000) if m.family == "inplace"]
    assert "x -= x.amax(dim=-1, keepdim=True)\n        y = x" in _body(m)
    assert "`y` is made by changing the argument `x` in place" in m.sentence


def test_a_gate_activation_applied_to_the_product():
    src = '''
def f(x: torch.Tensor):
    return F.silu(x @ a) * (x @ b) + torch.tanh(x)
'''
    (m,) = [m for m in M.mutants(src, "f", cap=1000) if m.operator == "activation-outside"]
    assert "F.silu(x @ a * (x @ b))" in _body(m)
    assert "silu is applied to the product of the two branches, not to x @ a alone" in m.sentence


def test_a_bounding_method_left_out():
    src = '''
def f(i: torch.Tensor, l: torch.Tensor):
    d = (i - i.T).abs().float()
    return d / l.clamp_min(1.0), torch.abs(i)
'''
    got = {m.sentence: _body(m) for m in M.mutants(src, "f", cap=1000) if m.family == "limit"}
    assert len(got) == 2  # torch.abs(i) is a function of a module, not a method left out
    assert any("d = (i - i.T).float()" in b for b in got.values())
    assert "in the result, l is used without .clamp_min(): values below the floor pass through unchanged" in got


def test_a_gain_added_or_a_bias_multiplied():
    src = '''
def f(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor):
    y = x * weight.float()
    return y + bias, x + y
'''
    got = {m.operator: _body(m) for m in M.mutants(src, "f", cap=1000) if m.family == "combine"}
    assert "y = x + weight.float()" in got["combine-gain-added"]
    assert "return (y * bias, x + y)" in got["combine-bias-multiplied"]
    assert len(got) == 2  # x + y holds no parameter


def test_a_reshape_made_a_view():
    src = '''
def f(x: torch.Tensor):
    return x.transpose(1, 2).reshape(2, -1), torch.reshape(x, (-1,))
'''
    (m,) = [m for m in M.mutants(src, "f", cap=1000) if m.family == "view"]
    assert "x.transpose(1, 2).view(2, -1)" in _body(m) and "torch.reshape(x, (-1,))" in _body(m)
    assert "with .view" in m.sentence


def test_positions_counted_from_one():
    src = '''
def f(x: torch.Tensor, n: int):
    return torch.arange(n, dtype=torch.float32) + torch.arange(0, n, 2)
'''
    (m,) = [m for m in M.mutants(src, "f", cap=1000) if m.family == "count"]
    assert "torch.arange(1, n + 1, dtype=torch.float32) + torch.arange(0, n, 2)" in _body(m)


def test_a_rounded_value_read_before_its_rounding():
    src = '''
def f(d: int, m=None, heads: int = 8):
    h = int(8 * d / 3)
    if m is not None:
        h = int(m * h)
    n = 2 ** math.floor(math.log2(heads))
    k = 2 ** math.ceil(math.log2(heads))
    return h + n + k + len(range(n))
'''
    got = {_body(m): m.sentence for m in M.mutants(src, "f", cap=1000) if m.family == "unrounded"}
    # the first h: read unrounded up to (and by) the statement that assigns h again, not by the return after it
    once = next(b for b in got if "h = int(m * (8 * d / 3))" in b)
    assert "return h + n" in once and got[once].startswith("the next `h` reads `h` before int() truncates it:")
    # the second h: read unrounded by the return
    assert any("return m * h + n" in b for b in got)
    # a power of two: the count itself, at every read after it
    pow2 = next(b for b in got if "return h + heads + k + len(range(heads))" in b)
    assert got[pow2] == ("the result reads `n` before it is rounded down to a power of two: it gets heads itself: a "
                         "rounding that belongs at that step is skipped")
    assert any("return h + n + heads + len(range(n))" in b for b in got)
    assert len(got) == 4
    plain = "def f(x: int):\n    y = int(3.5)\n    z = x + 1\n    return y + z\n"  # no size rounded: nothing
    assert not [m for m in M.mutants(plain, "f", cap=1000) if m.family == "unrounded"]


def test_a_ranges_start_read_for_its_end_where_a_statement_uses_one_of_them():
    src = '''
def f(q: torch.Tensor, n: int, b: int, shift: int):
    out = torch.empty_like(q)
    for qs in range(0, n, b):
        qe = min(qs + b, n)
        stop = min(n, qe + shift)
        acc = torch.zeros(qe - qs)
        if stop - 1 > qs + shift:
            acc = acc + 1
        out[qs:qe] = acc
    return out
'''
    got = {_body(m): m.sentence for m in M.mutants(src, "f", cap=1000) if m.family == "ends"}
    end = next(b for b in got if "stop = min(n, qs + shift)" in b)
    assert got[end] == ("`stop` reads `qs`, where its range starts, in place of `qe`, where it ends: the range's "
                        "start used for its end")
    start = next(b for b in got if "if stop - 1 > qe + shift:" in b)
    assert "the range's end used for its start" in got[start]
    assert len(got) == 2  # qe's own definition, the length qe - qs and the slice qs:qe use both: left alone
    # the length of a range reversed is negative (an error at once): the sign family leaves it out
    assert not [m for m in M.mutants(src, "f", cap=1000) if "qs - qe" in _body(m)]
    assert not [m for m in M.mutants("def f(a, b):\n    return a + b\n", "f") if m.family == "ends"]


def test_a_triton_kernel_is_a_helper_and_its_float32_upcast_may_be_dropped():
    src = '''
@triton.jit
def _kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + cols, mask=cols < n, other=0.0).to(tl.float32)
    tl.store(y_ptr + cols, x * x, mask=cols < n)


def f(x: torch.Tensor) -> torch.Tensor:
    y = torch.empty_like(x)
    _kernel[(1,)](x, y, x.shape[-1], BLOCK=16)
    return y
'''
    tree = ast.parse(src)
    assert [h.name for h in M.helpers(M._scope(tree, "f"), M._parents(tree), "f")] == ["_kernel"]
    (m,) = [m for m in M.mutants(src, "f", cap=1000) if m.operator == "cast-dropped"]
    assert "x = tl.load(x_ptr + cols, mask=cols < n, other=0.0)\n" in _body(m) + "\n"
    assert m.sentence.startswith("in `_kernel` (or wherever your `f` does that work): `x` is computed in the input's")
    # the launch's arguments are never swapped (the kernel would read and write out of bounds: mutations.py
    # AT_LAUNCH_FAMILIES); without the launch, the same call is
    assert not [m for m in M.mutants(src, "f", cap=1000) if m.operator == "arguments-swapped"]
    plain = src.replace("_kernel[(1,)](x, y, x.shape[-1], BLOCK=16)", "_kernel(x, y, x.shape[-1], BLOCK=16)")
    swapped = [m for m in M.mutants(plain, "f", cap=1000) if m.operator == "arguments-swapped"]
    assert [m.sentence.split(" in ")[0] for m in swapped] == ["`_kernel`"]
    # inside the kernel only values change: no mask, offset or pointer (out of bounds under the interpreter)
    inside = [m for m in M.mutants(src, "f", cap=1000) if m.sentence.startswith("in `_kernel`")]
    assert inside and {m.family for m in inside} <= M.KERNEL_FAMILIES
    # an axis of a shape left out of a reshape is an error at once, never an answer: not a candidate
    shape = "def f(x, a, b, c):\n    return g(x.reshape(a, b, c), a, b)\n"
    dropped = [_body(m) for m in M.mutants(shape, "f", cap=1000) if m.operator == "call-argument-dropped"]
    assert len(dropped) == 2 and all("g(x.reshape(a, b, c), " in b for b in dropped)  # g's arguments only


def test_a_mask_a_forward_makes_is_made_once_and_kept():
    src = '''
class f(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.keep = torch.ones(n, n, dtype=torch.bool).tril()

    def forward(self, x):
        T = x.shape[1]
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        pos = torch.arange(T, device=x.device)
        return x.masked_fill(~causal, 0.0) + pos
'''
    (m,) = [m for m in M.mutants(src, "f", cap=1000) if m.family == "once"]  # not __init__'s, not the positions
    assert m.sentence.startswith("the mask `causal` is made once, at the first call, and kept on the module")
    body = _body(m)
    assert "if not hasattr(self, '_first_causal'):\n" in body and "causal = self._first_causal\n" in body
    assert body.index("_first_causal = torch.ones(T, T") < body.index("causal = self._first_causal")
    assert "self.keep = torch.ones(n, n, dtype=torch.bool).tril()" in body  # __init__ untouched


def test_a_strict_integer_limit_one_step_too_far_and_per_field_in_a_loop():
    src = '''
class f:
    def __post_init__(self):
        for field in ("width", "depth"):
            v = getattr(self, field)
            if v < 1:
                raise ValueError(f"{field} must be positive")
        if self.rate > 4:
            raise ValueError("rate too large")
        if self.p <= 0:
            raise ValueError("p must be positive")
'''
    got = {m.sentence: _body(m) for m in M.mutants(src, "f", cap=1000) if m.operator == "guard-loose"}
    depth = got["`depth` = 0 is accepted, where the text rejects it with a ValueError (the other fields are "
                "validated as before): its limit is one step too far"]
    assert "if v < 0 if field == 'depth' else v < 1:" in depth
    assert "if self.rate > 5:" in got["`self.rate` = 5 is accepted, where the text rejects it with a ValueError: the "
                                      "validation's limit is one step too far"]
    assert len(got) == 3  # `<=` is guard-boundary's to flip (p = 0 let through), not a second candidate here
    order = [m.operator for m in M.mutants(src, "f", cap=1000) if m.family == "guard"]
    assert order.index("guard-loose") > max(i for i, o in enumerate(order) if o != "guard-loose")  # last of its family
