"""Lesson 01 — scaled dot-product attention: `softmax` and `scaled_dot_product_attention`.

Reads like the lesson: softmax's probes and judges, then attention's, then the known mistakes.
Probes run in the sandboxed child (student code); judges run in the parent.
"""

from __future__ import annotations


import torch
import torch.nn.functional as F

from .engine.compare import close, tolerance
from .engine import CPU, CPU_AND_GPU, Checks, Mistake, agrees_with, same
from .engine.checks import Arg, Domain
from .engine.probe import relaid
from .interface import PASSED, arguments

CHECKS = Checks("lesson01")

FORBIDDEN = {
    "softmax": (
        "torch.softmax", "torch.nn.functional.softmax", "torch.Tensor.softmax", "torch.special.softmax",
        "torch.log_softmax", "torch.nn.functional.log_softmax", "torch.Tensor.log_softmax",
        "torch.special.log_softmax", "torch._softmax", "torch._log_softmax",
    ),
    "scaled_dot_product_attention": (
        "torch.nn.functional.scaled_dot_product_attention",
    ),
}


# ----------------------------------------------------------------------------------------------
# softmax(x, dim=-1)


@CHECKS.probe("softmax", "matches the reference on random inputs", same(), CPU_AND_GPU,
              rule="Write a numerically stable softmax along `dim`")
def softmax_random(ctx):
    x = ctx.randn(2, 3, 5, scale=3.0)  # (B, T, C)
    return {"output": ctx.call(ctx.target, x),
            "output with dim=-1": ctx.call(ctx.target, x, dim=-1)}


@CHECKS.probe("softmax", "works along any dim", same(), CPU_AND_GPU, rule="any shape and any `dim` (negative ones too)")
def softmax_any_dim(ctx):
    x = ctx.randn(4, 6, 5, scale=2.0)  # every axis a different size, so a wrong axis shows
    return {f"output with dim={d}": ctx.call(ctx.target, x, dim=d) for d in (0, 1, -2)}


def _rows_sum_to_one(s, r, ctx):
    out = s["output"]
    if not isinstance(out, torch.Tensor):
        return close(out, r["output"], "output")
    sums = out.double().sum(dim=r["dim"])
    ok = torch.allclose(sums, torch.ones_like(sums), atol=ctx.tol.atol * 10 + 1e-3 * (ctx.config.dtype != "float32"))
    if not ok:
        return (f"the weights along dim={r['dim']} should sum to 1, but their sums range from "
                f"{sums.min().item():.4g} to {sums.max().item():.4g} (normalise along the same dim you sum)")
    return None


@CHECKS.probe("softmax", "sums to 1 along dim", _rows_sum_to_one, CPU_AND_GPU,
              rule="Every output is positive and they sum to 1")
def softmax_sums(ctx):
    x = ctx.randn(3, 7, 9, scale=2.0)
    return {"output": ctx.call(ctx.target, x, dim=1), "dim": 1}


def _finite_then_same(s, r, ctx):
    out = s["output"]
    if isinstance(out, torch.Tensor) and not torch.isfinite(out).all():
        n = int((~torch.isfinite(out)).sum())
        return (f"inputs of magnitude ~1e4 gave {n} NaN/inf values: exp overflows, so subtract the "
                f"max along dim before exponentiating")
    return same("output")(s, r, ctx)


@CHECKS.probe("softmax", "huge magnitudes (±1e4) give no inf or NaN", _finite_then_same, CPU, hidden=True,
              rule="inputs as large as ±1e4 give no `inf` or `NaN`")
def softmax_huge(ctx):
    x = ctx.randn(4, 8, scale=1e4)
    return {"output": ctx.call(ctx.target, x)}


def _neg_inf_zero(s, r, ctx):
    out, where = s["output"], r["where"]
    if isinstance(out, torch.Tensor) and out.shape == where.shape:
        leaked = out[where]
        if leaked.numel() and (leaked != 0).any():
            return (f"entries that are -inf in the input must get weight exactly 0, got up to "
                    f"{leaked.abs().max().item():.3g}")
    return same("output")(s, r, ctx)


@CHECKS.probe("softmax", "-inf entries get weight 0", _neg_inf_zero, CPU_AND_GPU, hidden=True,
              rule="`-inf` entries get weight 0")
def softmax_neg_inf(ctx):
    x = ctx.randn(5, 6)
    where = ctx.bernoulli(5, 6, p=0.4)
    where[:, 0] = False  # keep one finite entry per row
    x = x.masked_fill(where, float("-inf"))
    return {"output": ctx.call(ctx.target, x), "where": where}


@CHECKS.probe("softmax", "gradients match", same(scale=10), CPU, hidden=True, rule="gradients must flow back to `x`")
def softmax_grad(ctx):
    x = ctx.randn(3, 4, 6, requires_grad=True)
    w = ctx.randn(3, 4, 6)
    out = ctx.call(ctx.target, x, dim=-1)
    (out * w).sum().backward()
    if x.grad is None:
        return {"gradient of x": None}
    return {"gradient of x": x.grad}


# The declared domain of softmax: any rank (1 to 4 dims), a row of one entry and a wide one (1000), `dim`
# omitted, given as -1, or any other axis (negative and positive), x in float32, float64 or bfloat16, laid out
# any way. Every example is called three times: random entries, with -inf entries, and with huge magnitudes
# (±1e4) along its dim, so stability and exact zeros are tested on every axis.
SOFTMAX_DOMAIN = Domain(
    args=(Arg("shape", ("2, 3, 5", "7", "4, 6", "2, 3, 4, 5", "1, 1", "3, 1000")),
          Arg("dim", ("omitted", -1, 0, 1, -2, 2)), PASSED),
    dtypes=(("x", ("float32", "float64", "bfloat16")),),
    layouts=(("x", ("contiguous", "transposed", "strided")),), examples=5)

_ENTRIES = ("random entries", "some entries -inf", "huge entries (±1e4)")


def _softmax_domain_judge(s, r, ctx):
    for key in _ENTRIES:
        out, ref = s.get(f"output, {key}"), r[f"output, {key}"]
        if isinstance(out, torch.Tensor) and out.shape == ref.shape and key == "some entries -inf":
            leaked = out[r["-inf at"]]
            if leaked.numel() and (leaked != 0).any():
                return (f"entries that are -inf in the input must get weight exactly 0, got up to "
                        f"{leaked.abs().max().item():.3g}")
        if isinstance(out, torch.Tensor) and not torch.isfinite(out).all() and torch.isfinite(ref).all():
            return (f"with {key}: {int((~torch.isfinite(out)).sum())} NaN/inf values where the reference has "
                    f"none")  # (why: a catalogued mistake or a mutant that reproduces it says)
        msg = close(out, ref, f"output, {key}", tol=tolerance(ref.dtype).scaled(2))
        if msg:
            return msg
    return None


@CHECKS.domain("softmax", SOFTMAX_DOMAIN, _softmax_domain_judge)
def softmax_domain(ctx, ex):
    shape = tuple(int(n) for n in ex["shape"].split(", "))
    d = -1 if ex["dim"] == "omitted" else ex["dim"]
    where = ctx.bernoulli(*shape, p=0.4)
    where.narrow(d, 0, 1).fill_(False)  # one finite entry along dim in every slice
    x = ctx.randn(*shape, scale=3.0)
    obs = {"-inf at": where}
    for key, xi in zip(_ENTRIES, (x, x.masked_fill(where, float("-inf")), x * 3e3)):
        xi = relaid(xi.to(getattr(torch, ex["dtype of x"])), ex["layout of x"])
        args, kwargs = arguments(("dim",), {} if ex["dim"] == "omitted" else {"dim": ex["dim"]}, {"dim": -1},
                                 ex["passed"])
        obs[f"output, {key}"] = ctx.call(ctx.target, xi, *args, **kwargs)
    return obs

# ----------------------------------------------------------------------------------------------
# scaled_dot_product_attention(q, k, v, mask=None) -> (output, weights)


def _attend(ctx, q, k, v, mask=None):
    result = ctx.call(ctx.target, q, k, v) if mask is None else ctx.call(ctx.target, q, k, v, mask=mask)
    return ctx.unpack(result, 2, "a pair (output, weights)")


@CHECKS.probe("scaled_dot_product_attention", "Tq ≠ Tk and dv ≠ dk", same(), CPU_AND_GPU,
              rule="`Tq` may differ from `Tk`, and `d_v` from `d_k`")
def sdpa_shapes(ctx):
    q = ctx.randn(2, 3, 4, 8)  # (B, H, Tq, dk)
    k = ctx.randn(2, 3, 6, 8)  # (B, H, Tk, dk)
    v = ctx.randn(2, 3, 6, 5)  # (B, H, Tk, dv)
    out, weights = _attend(ctx, q, k, v)
    return {"output": out, "weights": weights}


def _weights_sum_to_one(s, r, ctx):
    w = s["weights"]
    if not isinstance(w, torch.Tensor) or w.shape != r["weights"].shape:
        return close(w, r["weights"], "weights")
    sums = w.double().sum(-1)
    if not torch.allclose(sums, torch.ones_like(sums), atol=1e-4 if ctx.config.dtype == "float32" else 2e-2):
        return (f"each query's weights over the keys (the last axis) should sum to 1; the sums range from "
                f"{sums.min().item():.4g} to {sums.max().item():.4g}. Is the softmax taken over the keys?")
    return None


@CHECKS.probe("scaled_dot_product_attention", "each query's weights sum to 1", _weights_sum_to_one, CPU_AND_GPU,
              rule="`weights = softmax(q kᵀ / √d_k)` over the keys")
def sdpa_rows(ctx):
    q, k, v = ctx.randn(3, 7, 16), ctx.randn(3, 5, 16), ctx.randn(3, 5, 16)
    _, weights = _attend(ctx, q, k, v)
    return {"weights": weights}


@CHECKS.probe("scaled_dot_product_attention", "any number of leading dims", same(), CPU, hidden=True,
              rule="any number of leading dims (batch, heads, ...)")
def sdpa_leading(ctx):
    obs = {}
    for shape in [(), (2,), (2, 1, 3)]:
        q, k, v = ctx.randn(*shape, 4, 6), ctx.randn(*shape, 5, 6), ctx.randn(*shape, 5, 3)
        out, weights = _attend(ctx, q, k, v)
        obs[f"output for leading dims {shape}"] = out
        obs[f"weights for leading dims {shape}"] = weights
    return obs


def _masked(s, r, ctx):
    for name in ("weights (causal mask)", "weights (padding mask)"):
        w, allowed = s.get(name), r[name.replace("weights", "mask")]
        if isinstance(w, torch.Tensor) and w.shape == r[name].shape:
            blocked = ~allowed.expand(w.shape)
            leaked = blocked & ((w != 0) | w.isnan())
            if leaked.any():
                i = tuple(int(j) for j in leaked.nonzero()[0])
                return (f"{name}: {int(leaked.sum())} masked positions (mask False) got a nonzero or NaN weight, "
                        f"first at index {i} ({w[i].item():.3g}); they must get exactly 0 "
                        f"(True in the mask means 'may attend')")
    return same()(s, r, ctx)


@CHECKS.probe("scaled_dot_product_attention", "boolean mask: True means may attend", _masked, CPU_AND_GPU, hidden=True,
              rule="Positions where it is False must get weight exactly 0")
def sdpa_mask(ctx):
    q, k, v = ctx.randn(2, 2, 5, 8), ctx.randn(2, 2, 7, 8), ctx.randn(2, 2, 7, 4)
    causal = torch.ones(5, 7, dtype=torch.bool).tril(diagonal=2).to(ctx.device)  # (Tq, Tk), bottom-right
    padding = torch.tensor([[True] * 7, [True] * 4 + [False] * 3]).view(2, 1, 1, 7).to(ctx.device)  # (B, 1, 1, Tk)
    out_c, w_c = _attend(ctx, q, k, v, causal)
    out_p, w_p = _attend(ctx, q, k, v, padding)
    return {"output (causal mask)": out_c, "weights (causal mask)": w_c, "mask (causal mask)": causal,
            "output (padding mask)": out_p, "weights (padding mask)": w_p, "mask (padding mask)": padding}


@CHECKS.probe("scaled_dot_product_attention", "gradients match", same(scale=10), CPU, hidden=True,
              rule="Gradients must flow to `q`, `k` and `v`")
def sdpa_grads(ctx):
    q = ctx.randn(2, 4, 6, requires_grad=True)
    k = ctx.randn(2, 5, 6, requires_grad=True)
    v = ctx.randn(2, 5, 3, requires_grad=True)
    out, _ = _attend(ctx, q, k, v)
    (out * ctx.randn(2, 4, 3)).sum().backward()
    return {f"gradient of {n}": t.grad for n, t in (("q", q), ("k", k), ("v", v))}


@CHECKS.probe("scaled_dot_product_attention", "agrees with F.scaled_dot_product_attention",
              agrees_with("output", "output (masked)", scale=2, label="F.scaled_dot_product_attention"), CPU_AND_GPU,
              rule="When every query may see at least one key, your output must equal "
                   "`F.scaled_dot_product_attention(q, k, v, attn_mask=mask)`")
def sdpa_vs_torch(ctx):
    q, k, v = ctx.randn(1, 4, 9, 16), ctx.randn(1, 4, 11, 16), ctx.randn(1, 4, 11, 8)
    mask = ctx.bernoulli(9, 11, p=0.7)
    mask[:, 0] = True  # every query sees at least one key
    out, _ = _attend(ctx, q, k, v)
    out_m, _ = _attend(ctx, q, k, v, mask)
    # torch's own answer, computed here too; the judge only ever reads the reference child's copy
    return {"output": out, "output (masked)": out_m,
            "torch output": F.scaled_dot_product_attention(q, k, v),
            "torch output (masked)": F.scaled_dot_product_attention(q, k, v, attn_mask=mask)}


# The declared domain of attention: ranks 2 to 5 (no leading dim, batch, batch and heads, three), Tq ≠ Tk both
# ways, lengths of 1 and a long key axis (512), dv ≠ dk and dk = 1 or 64, masks of every broadcast shape, q, k, v
# in each floating dtype (the output and weights keep it), each of q, k, v and the mask laid out on its own.
# Every example is called twice: without a mask, and with the mask drawn; by keyword (`mask=` left out, then
# given), or positionally in the signature's order (`mask` None, then the mask: `(q, k, v, None)`).
SDPA_DOMAIN = Domain(
    args=(Arg("leading dims", ("2, 3", "none", "2", "2, 1, 3")),
          Arg("Tq, Tk", ("4, 6", "6, 4", "1, 1", "1, 7", "5, 5", "3, 512")),
          Arg("dk, dv", ("8, 5", "8, 8", "1, 3", "64, 2")),
          Arg("mask", ("(Tq, Tk)", "(B, 1, 1, Tk)", "(..., Tq, Tk)", "(Tk,)")), PASSED),
    dtypes=(("q, k, v", ("float32", "float64", "float16", "bfloat16")),),
    layouts=tuple((n, ("contiguous", "transposed", "strided")) for n in ("q", "k", "v", "mask")), examples=5)


def _sdpa_domain_judge(s, r, ctx):
    for key in ("output", "weights", "output, masked", "weights, masked"):
        msg = close(s.get(key), r[key], key, tol=tolerance(r[key].dtype).scaled(2))
        if msg:
            return msg
    return None


def _sdpa_mask(ctx, kind: str, lead: tuple, tq: int, tk: int) -> torch.Tensor:
    """A boolean mask of the kind named, broadcastable to (*lead, Tq, Tk); every query sees key 0 or more."""
    shape = {"(Tq, Tk)": (tq, tk), "(B, 1, 1, Tk)": (*lead[:1], *(1,) * (len(lead) - 1), 1, tk),
             "(..., Tq, Tk)": (*lead, tq, tk), "(Tk,)": (tk,)}[kind]
    m = ctx.bernoulli(*shape, p=0.6)
    m[..., 0] = True
    return m


@CHECKS.domain("scaled_dot_product_attention", SDPA_DOMAIN, _sdpa_domain_judge)
def sdpa_domain(ctx, ex):
    lead = () if ex["leading dims"] == "none" else tuple(int(n) for n in ex["leading dims"].split(", "))
    tq, tk = (int(n) for n in ex["Tq, Tk"].split(", "))
    dk, dv = (int(n) for n in ex["dk, dv"].split(", "))
    dt = getattr(torch, ex["dtype of q, k, v"])
    q, k, v = (relaid(ctx.randn(*lead, t, d).to(dt), ex[f"layout of {n}"])
               for n, t, d in (("q", tq, dk), ("k", tk, dk), ("v", tk, dv)))
    mask = relaid(_sdpa_mask(ctx, ex["mask"], lead, tq, tk), ex["layout of mask"])
    pairs = []
    for given in ({}, {"mask": mask}):
        args, kwargs = arguments(("mask",), given, {"mask": None}, ex["passed"])
        pairs.append(ctx.unpack(ctx.call(ctx.target, q, k, v, *args, **kwargs), 2, "a pair (output, weights)"))
    (out, weights), (out_m, weights_m) = pairs
    return {"output": out, "weights": weights, "output, masked": out_m, "weights, masked": weights_m}


# ----------------------------------------------------------------------------------------------
# Known mistakes, each written as exact edits of the solved notebook's cell that defines its exercise
# (`engine.mistake_source` applies them, so a rename in the solution flows through; every `old` must
# occur exactly once, which tests/test_engine.py checks). Each is run on the same probes as the
# reference; a student whose observations match one is told its message.

MISTAKES = (
    Mistake("softmax", "no_max", "exp overflows for large inputs: subtract the max along `dim` first (softmax(x − c) "
            "= softmax(x)).",
            edits={"shifted = x - x.amax(dim=dim, keepdim=True)": "shifted = x"},
            hint="What does exp(1000) give in float32? Subtracting the same number from every entry along "
                 "`dim` leaves the softmax unchanged: which number keeps every exponent at most 0?"),
    Mistake("softmax", "max_wrong_dim", "the max is taken over the last axis instead of `dim`, so the shift is not "
            "constant along `dim` and changes the result: take the max along `dim`.",
            edits={"x.amax(dim=dim,": "x.amax(dim=-1,"},
            hint="The shift must be one constant per slice along `dim`. Over which axis is yours computed when "
                 "`dim` is not the last one?"),
    Mistake("softmax", "sum_wrong_dim", "the normalising sum runs over the last axis instead of `dim`, so the "
            "weights along `dim` do not sum to 1.",
            edits={"e.sum(dim=dim,": "e.sum(dim=-1,"},
            hint="Print the sums of your result along `dim` for dim=0: they should all be 1. Which axis does "
                 "your normalising sum run over?"),
    Mistake("scaled_dot_product_attention", "no_scaling", "the scores are not divided by √dk, so the softmax is too "
            "peaked: divide q·kᵀ by math.sqrt(dk).",
            edits={" / math.sqrt(d_k)": ""},
            hint="Print the standard deviation of your scores for dk = 64: the softmax wants it near 1. What "
                 "divides it down to that size?"),
    Mistake("scaled_dot_product_attention", "divide_by_dk", "the scores are divided by dk instead of √dk: the "
            "variance of q·k grows like dk, so its standard deviation, √dk, is the right scale.",
            edits={"math.sqrt(d_k)": "d_k"},
            hint="The dot product of two random dk-vectors has variance dk. Which number brings its standard "
                 "deviation, not its variance, back to 1?"),
    Mistake("scaled_dot_product_attention", "softmax_over_queries", "the softmax runs over the query axis (-2); each "
            "query's weights must be normalised over the keys, the last axis.",
            edits={"softmax(scores, dim=-1)": "softmax(scores, dim=-2)"},
            hint="Each query distributes its attention over the keys. Print the sum of your weights over each "
                 "axis: which one sums to 1, and which one should?"),
    Mistake("scaled_dot_product_attention", "inverted_mask", "the mask is inverted: True means 'may attend', so fill "
            "the scores where the mask is False (~mask) with -inf.",
            edits={"masked_fill(~mask,": "masked_fill(mask,"},
            hint="In this course True in the mask means 'may attend'. Which positions does your code fill: the "
                 "allowed ones or the forbidden ones?"),
    Mistake("scaled_dot_product_attention", "mask_with_zero", "masked scores are set to 0, but exp(0) = 1 still "
            "gives them weight: fill them with -inf so exp gives exactly 0.",
            edits={'masked_fill(~mask, float("-inf"))': "masked_fill(~mask, 0.0)"},
            hint="A masked position must get weight exactly 0 after the softmax. What is exp of the value you "
                 "fill in?"),
    Mistake("scaled_dot_product_attention", "mask_after_softmax", "the mask is applied after the softmax, so the "
            "remaining weights no longer sum to 1: mask the scores before the softmax.",
            edits={'scores = scores.masked_fill(~mask, float("-inf"))': "pass",
                   "weights = softmax(scores, dim=-1)":
                       "weights = softmax(scores, dim=-1)\n"
                       "    weights = weights if mask is None else weights.masked_fill(~mask, 0.0)"},
            hint="Print the row sums of your weights with a mask: are they still 1? Think about whether the "
                 "mask belongs before or after the normalisation."),
    Mistake("scaled_dot_product_attention", "mask_large_negative", "masked scores are filled with −1e9, which "
            "float16 cannot hold (masked_fill overflows): fill them with float('-inf'), exact in every dtype.",
            edits={'masked_fill(~mask, float("-inf"))': "masked_fill(~mask, -1e9)"},
            hint="Run your code on float16 inputs with a mask. What is the largest magnitude float16 can hold, "
                 "and which fill value is exact in every dtype?"),
    Mistake("scaled_dot_product_attention", "float_mask_added", "the mask is added as a float32 bias "
            "((~mask).float() * −1e9), which turns float16 and bfloat16 scores into float32: keep the input's dtype "
            "by filling the scores where the mask is False with -inf (masked_fill).",
            edits={'scores = scores.masked_fill(~mask, float("-inf"))':
                       "scores = scores + (~mask).float() * -1e9"},
            hint="Print the dtype of your scores before and after masking, for float16 inputs: where does it "
                 "change?"),
    Mistake("scaled_dot_product_attention", "k_T", "`k.T` reverses every axis of a batched tensor; swap only the "
            "last two with `k.transpose(-2, -1)` (or `k.mT`).",
            edits={"k.transpose(-2, -1)": "k.T"},
            hint="Print `k.shape` and the shape of what you multiply q by, for a 4-dimensional k: which axes "
                 "should be swapped, and which does your code swap?"),
)



# The input battery; attention skips the offsets (engine.OFFSET_SCORES says why), softmax takes them.
from .engine import OFFSET_SCORES  # noqa: E402

CHECKS.add_battery(skip={"scaled_dot_product_attention": OFFSET_SCORES})
