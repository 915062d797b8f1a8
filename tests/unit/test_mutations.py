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
