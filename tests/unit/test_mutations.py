"""The mutation operators (graders/engine/mutations.py) on small sources: what each one produces, that every
mutant compiles and differs, that the order is fixed and the cap holds. Pure ast, no torch run."""

from __future__ import annotations

import ast

from graders.engine import mutations as M
from mutation_sites import body as _body, by_op as _by_op




SDPA = '''
def f(q, k, v, mask=None):
    d_k = q.shape[-1]
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_k)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
'''

NORM = '''
def f(x, weight, eps=1e-5):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    xf = x.float()
    y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return (x - mean) / torch.sqrt(var + eps) + y
'''


def test_scale_variants_name_the_root():
    ops = _by_op(SDPA)
    assert "/ d_k" in _body(ops["scale-linear"][0]) and "sqrt" not in _body(ops["scale-linear"][0]).split("scores =")[1].split("\n")[0]
    assert "divided by d_k instead of √d_k" in ops["scale-linear"][0].sentence
    assert "math.sqrt(d_k)" not in _body(ops["scale-dropped"][0])
    assert "/ math.sqrt(d_k) / math.sqrt(d_k)" in _body(ops["scale-twice"][0])


def test_axis_keepdim_and_all_axes():
    ops = _by_op(NORM)
    assert any("x.mean(dim=-2, keepdim=True)" in _body(m) for m in ops["axis-changed"])
    assert any("x.mean(dim=-1)" in _body(m) for m in ops["axis-keepdim-dropped"])
    (both,) = [m for m in ops["axis-all-changed"]][:1]
    assert _body(both).count("dim=-2") == 2


def test_variance_eps_cast():
    ops = _by_op(NORM)
    assert "var = x.var(dim=-1, keepdim=True)" in _body(ops["variance-unbiased"][0])
    assert "population variance" in ops["variance-unbiased"][0].sentence
    bodies = [_body(m) for m in ops["eps-outside-root"]]
    assert any("(torch.sqrt(var) + eps)" in b for b in bodies)
    assert any("1 / (torch.sqrt(xf.pow(2).mean(-1, keepdim=True)) + eps)" in b for b in bodies)
    assert any("xf = x\n" in b for b in (_body(m) + "\n" for m in ops["cast-dropped"]))


def test_mask_neginf_default_arguments():
    ops = _by_op(SDPA)
    assert "masked_fill(mask, float('-inf'))" in _body(ops["mask-inverted"][0])
    assert "masked_fill(~mask, -1000000000.0)" in _body(ops["neginf-finite"][0])
    assert "masked_fill(~mask, 0.0)" in _body(ops["neginf-zero"][0])
    assert "if None is not None" in _body(ops["default-ignored"][0])
    assert "ignores the argument `mask`" in ops["default-ignored"][0].sentence
    assert any("weights @ v" not in _body(m) and "v @ weights" in _body(m) for m in ops["arguments-matmul-swapped"])


def test_diagonal_comparison_slice_sign_residual_repeat():
    src = '''
def f(x, t, w, n):
    m = torch.ones(t, t).tril(diagonal=w - t)
    keep = (x > t - w) & (x <= t)
    y = x[:, t:]
    y = y + g(y)
    return -x, m, keep, y.repeat_interleave(n, dim=1)
'''
    ops = _by_op(src)
    assert any("tril(diagonal=w - t - 1)" in _body(m) for m in ops["diagonal-minus-one"])
    assert any(".triu(" in _body(m) for m in ops["diagonal-triangle-swapped"])
    assert any("x >= t - w" in _body(m) for m in ops["comparison-boundary"])
    assert any("x > t - w" in _body(m) and "x <= t" not in _body(m) for m in ops["comparison-negated"])
    assert any("x[:, t - 1:]" in _body(m) for m in ops["slice-off-by-one"])
    assert any("return (x, m" in _body(m) for m in ops["sign-flipped"])
    assert any("y = g(y)" in _body(m) for m in ops["residual-dropped"])
    assert any("torch.cat([y] * n, dim=1)" in _body(m) for m in ops["repeat-tiled"])
    assert any("diagonal=t - w" in _body(m) for m in ops["sign-subtraction-reversed"])


def test_every_mutant_compiles_differs_in_a_fixed_order_under_the_cap():
    for src in (SDPA, NORM):
        a, b = M.mutants(src, "f"), M.mutants(src, "f")
        assert [m.source for m in a] == [m.source for m in b]
        original = ast.unparse(ast.parse(src))
        assert all(ast.unparse(ast.parse(m.source)) != original for m in a)
        assert len({m.source for m in a}) == len(a)
        for m in a:
            compile(m.source, "<m>", "exec")
    assert len(M.mutants(NORM, "f", cap=5)) == 5
    assert len({m.family for m in M.mutants(NORM, "f", cap=5)}) == 5  # round-robin: every family gets a turn
    assert M.mutants("def g(x):\n    return -x\n", "f") == []  # only the exercise's own definition
    assert M.mutants("def f(:", "f") == []


def test_validation_bounds_are_left_to_the_domains():
    src = 'def f(p):\n    if p < 0:\n        raise ValueError("p")\n    return p\n'
    assert not [m for m in M.mutants(src, "f") if m.family == "comparison"]


def test_a_mutant_id_is_stable_and_not_catalogued():
    from graders.engine.diagnosis import Named
    from graders.engine.kinds import diagnosis_id, is_catalogued

    text = Named("`scores` is divided by d_k instead of √d_k", "mutation:scale-linear")
    assert diagnosis_id(text) == "mutation:scale-linear"
    assert not is_catalogued("mutation:scale-linear")
    import copy
    import pickle

    assert pickle.loads(pickle.dumps(text)).ident == "mutation:scale-linear"
    assert copy.deepcopy(text).ident == "mutation:scale-linear"


HELPED = '''
def mask_of(t):
    return torch.ones(t, t).tril()


class Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x - x.mean(dim=-1, keepdim=True) - x.amax(dim=-1, keepdim=True)

    @staticmethod
    def backward(ctx, g):
        return g - g.mean(dim=-1, keepdim=True)


def unused(x):
    return x.tril()


def f(x):
    m = mask_of(x.shape[-1])
    return Fn.apply(x) * m
'''


def test_helpers_are_one_family_for_every_operator():
    """The definitions f hands work to (an autograd Function it applies, a function it calls) get every
    operator's sites, each sentence saying where; a definition f never calls gets none."""
    import ast as _ast

    tree = _ast.parse(HELPED)
    assert [h.name for h in M.helpers(M._scope(tree, "f"), M._parents(tree), "f")] == ["mask_of", "Fn"]
    ops = _by_op(HELPED)
    (swapped,) = [m for m in ops["diagonal-triangle-swapped"]]
    assert "torch.ones(t, t).triu()" in _body(swapped) and "x.tril()" in _body(swapped)  # `unused` untouched
    assert swapped.sentence.startswith("in `mask_of` (or wherever your `f` does that work): the result keeps the upper")
    terms = ops["term-dropped"]
    assert any("return x - x.amax(dim=-1, keepdim=True)" in _body(m) for m in terms)
    assert all(m.sentence.startswith("in `Fn` (or wherever your `f` does that work): ") for m in terms)
    redefined = _ast.parse(terms[0].source).body[-1]  # the changed Function, redefined right before f
    assert isinstance(redefined, _ast.If) and [n.name for n in redefined.body] == ["Fn", "f"]


def test_a_helpers_sites_sit_in_their_own_familys_turn():
    """Round-robin over the operators, each operator's sites in f before those in its helpers: a helper's
    term is among the first round's candidates (one per operator that fires), not after every other
    family's sites in the helper."""
    first_round = len(M.fired(HELPED, "f"))
    order = [m.family for m in M.mutants(HELPED, "f", cap=10_000)]
    assert "term" in order[:first_round] and len(order) > first_round



def test_a_finite_fill_comes_without_the_all_removed_rows_special_case():
    """-inf → -1e9 where the mask removes scores a softmax reads, with the fills by another mask (the rows with
    nothing left) left out; not where there is no other mask, nor where no softmax follows."""
    src = '''
def f(q, k, mask):
    scores = q @ k.transpose(-2, -1)
    scores = scores.masked_fill(~mask, float("-inf"))
    visible = mask.any(dim=-1, keepdim=True)
    scores = scores.masked_fill(~visible, 0.0)
    return torch.softmax(scores, dim=-1).masked_fill(~visible, 0.0)
'''
    (m,) = _by_op(src)["neginf-finite-unguarded"]
    b = _body(m)
    assert "scores.masked_fill(~mask, -1000000000.0)" in b and "~visible" not in b.replace("visible = ", "")
    assert "`scores` that ~mask removes are set to -1e9" in m.sentence and "by ~visible is left out" in m.sentence
    assert "neginf-finite-unguarded" not in _by_op(SDPA)  # one mask only
    assert "neginf-finite-unguarded" not in _by_op(src.replace("torch.softmax(scores, dim=-1)", "scores"))


def test_a_negated_test_of_a_branch_speaks_of_the_branch_not_of_positions():
    src = "def f(x, n, limit):\n    if n > limit:\n        x = x[-limit:]\n    return x[x > 0]\n"
    by = {_body(m).split("\n")[1].strip(): m.sentence for m in _by_op(src)["comparison-negated"]}
    assert "the wrong way round (<=): what runs under it runs in the cases it should skip" in by["if n <= limit:"]
    (other,) = [s for k, s in by.items() if k != "if n <= limit:"]
    assert "selects the positions it should leave out" in other


NESTED = '''
class Attn(nn.Module):
    def forward(self, x, causal):
        mask = torch.ones(4, 4, dtype=torch.bool).tril()
        y = F.scaled_dot_product_attention(x, x, x, attn_mask=mask)
        return F.scaled_dot_product_attention(y, y, y, is_causal=True)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = Attn()


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = [Block() for _ in range(2)]

    def forward(self, x):
        """x (..., D)."""
        for b in self.blocks:
            x = b.attn(x, mask=None)
        return x


class Unused(nn.Module):
    def forward(self, x):
        return F.scaled_dot_product_attention(x, x, x, attn_mask=self.m)
'''


def test_a_mask_left_out_is_looked_for_in_the_parts_the_exercise_builds():
    """nomask: a mask keyword (or is_causal=True) left out, in the exercise and in the classes of its cell it
    builds, in turn (a model's block's attention); never a mask of None, nor a class the exercise never builds."""
    import ast as _ast

    tree = _ast.parse(NESTED)
    assert [p.name for p in M.parts(M._scope(tree, "Model"), M._parents(tree), "Model")] == ["Block", "Attn"]
    ops = _by_op(NESTED, "Model")
    dropped, = ops["nomask-dropped"]
    redefined = _body(dropped).split("if True:")[1].split("class Model")[0]  # the changed Attn, right before Model
    assert "attn_mask" not in redefined.split("return")[0] and "is_causal=True" in redefined
    assert dropped.sentence.startswith("in `Attn` (or wherever your `Model` does that work): "
                                       "`F.scaled_dot_product_attention` in `y` gets no mask (attn_mask=mask")
    not_causal, = ops["nomask-not-causal"]
    assert "is_causal" not in _body(not_causal).split("if True:")[1].split("class Model")[0]
    assert "Unused" not in dropped.sentence + not_causal.sentence
    assert "nomask-dropped" not in _by_op(NESTED.replace("attn_mask=mask", "attn_mask=None"), "Model")


def test_an_assumed_rank_is_a_forward_that_unpacks_three_sizes():
    """rank-fixed: `B, T, D = x.shape` after the docstring of a forward whose first argument is x; none where
    the forward already unpacks x.shape."""
    ops = _by_op(NESTED, "Model")
    (m,) = ops["rank-fixed"]
    model = _body(m).split("class Model")[1]
    assert model.index('"""x (..., D)."""') < model.index("_rank_B, _rank_T, _rank_D = x.shape") \
        < model.index("for b in self.blocks")
    assert m.sentence.startswith("`Model.forward` assumes a 3-d x: it unpacks x.shape into exactly 3 sizes")
    unpacked = NESTED.replace('"""x (..., D)."""', '"""x (..., D)."""\n        B, T, D = x.shape')
    assert "rank-fixed" not in _by_op(unpacked, "Model")


def test_a_divisibility_test_that_also_rejects_the_two_sizes_equal():
    """guard-equal-rejected: `if a % b: raise` also raising where b == a, after every other site of the family."""
    src = ("def f(n_head, n_kv):\n    if n_kv < 1:\n        raise ValueError('n_kv')\n"
           "    if n_head % n_kv:\n        raise ValueError('n_head')\n    return n_head // n_kv\n")
    order = [m.operator for m in M.mutants(src, "f", cap=10_000) if m.family == "guard"]
    assert order[-1] == "guard-equal-rejected" and order.count("guard-equal-rejected") == 1
    (m,) = _by_op(src)["guard-equal-rejected"]
    assert "if n_head % n_kv or n_kv == n_head:" in _body(m)
    assert m.sentence.startswith("`n_kv` equal to `n_head` is rejected, where the text accepts it")
    assert "guard-equal-rejected" not in _by_op(src.replace("n_head % n_kv", "n_head % 2"))  # a constant: none


GAIN = '''
class Norm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * self.weight
'''


def test_a_gain_given_a_bias_beside_it():
    """parameter-extra-bias: `self.bias`, zeros like the gain, added (in the output's dtype) to what forward
    returns; none where the module has a bias already, nor for a weight that is not a gain of ones."""
    (m,) = _by_op(GAIN, "Norm")["parameter-extra-bias"]
    b = _body(m)
    assert "self.bias = nn.Parameter(torch.zeros_like(self.weight))" in b
    assert "_out = x * self.weight\n        return _out + self.bias.to(_out.dtype)" in b
    assert "parameter-extra-bias" not in _by_op(GAIN.replace("return x * self.weight",
                                                             "return x * self.weight + self.bias"), "Norm")
    assert "parameter-extra-bias" not in _by_op(GAIN.replace("torch.ones(dim)", "torch.empty(dim, dim)"), "Norm")


LAUNCH = '''
@triton.jit
def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(y_ptr + i, tl.load(x_ptr + i, mask=i < n).to(tl.float32) * 2.0, mask=i < n)


def double_triton(x, scale=2.0):
    y = torch.empty_like(x)
    n = x.shape[-1]
    _k[(1,)](x, y, n, BLOCK=triton.next_power_of_2(n))
    return y * math.sqrt(scale)
'''


def test_an_exercise_that_launches_a_kernel_is_mutated_only_where_the_kernel_stays_in_bounds():
    """kernel-bypassed: the lesson's torch version returned before any launch. Where the exercise launches a kernel,
    its own sites are the families that cannot hand the kernel other sizes or buffers (AT_LAUNCH_FAMILIES): no
    argument swapped, no size read from another axis, no keyword of the launch dropped."""
    ops = _by_op(LAUNCH, "double_triton")
    (m,) = ops["kernel-bypassed"]
    assert "def double_triton(x, scale=2.0):\n    return double(x, scale)\n" in _body(m)
    assert m.sentence.startswith("`double_triton` launches no Triton kernel: it returns double(x, scale)")
    assert {m.family for ms in ops.values() for m in ms} <= M.AT_LAUNCH_FAMILIES
    assert "scale-dropped" in ops and not any(k.startswith(("arguments", "sizeof", "keyword")) for k in ops)
    plain = _by_op(LAUNCH.replace("_k[(1,)](x, y, n, BLOCK=triton.next_power_of_2(n))", "y = _k(x, y, n)"),
                   "double_triton")
    assert "kernel-bypassed" not in plain and {"arguments-swapped", "size-from-start"} <= set(plain)


def test_two_counts_mixed_up_in_a_closed_form():
    """quantity-swapped: a count made of sizes replaced by another count computed before it (not one its own
    formula reads); none in a function with a loop (a tiled kernel's sizes and offsets)."""
    src = ("def f(V, D, L):\n    per_layer = 12 * D * D\n    params = V * D + L * per_layer\n"
           "    n_matmul = L * per_layer\n    return 6 * n_matmul, params\n")
    got = {_body(m).split("\n")[3].strip(): m.sentence for m in _by_op(src)["quantity-swapped"]}
    assert set(got) == {"n_matmul = params"}  # not for a count its own formula reads (per_layer)
    assert got["n_matmul = params"].startswith("`n_matmul` takes the value of `params`, computed before it, in "
                                               "place of its own count, L * per_layer")
    looped = src.replace("    return", "    for _ in range(2):\n        pass\n    return")
    assert "quantity-swapped" not in _by_op(looped)
