"""The mutation operators (graders/engine/mutations.py) on small sources: what each one produces, that every
mutant compiles and differs, that the order is fixed and the cap holds. Pure ast, no torch run."""

from __future__ import annotations

import ast

from graders.engine import mutations as M


def _by_op(src: str, name: str = "f") -> dict[str, list[M.Mutant]]:
    out: dict[str, list[M.Mutant]] = {}
    for m in M.mutants(src, name):
        out.setdefault(m.operator, []).append(m)
    return out


def _body(m: M.Mutant) -> str:
    return ast.unparse(ast.parse(m.source))


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
