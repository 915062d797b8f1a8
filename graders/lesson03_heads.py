"""Lesson 03 — heads: `split_heads`, `merge_heads`, `MultiHeadAttention`, `CausalSelfAttention`,
`repeat_kv`, `GroupedQueryAttention`.

Reads like the lesson: the layout helpers, then the modules in the order the notebook builds them,
then the known mistakes. Probes run in the sandboxed child (student code); judges run in the parent.

Modules are probed the same way throughout: build the student's module (after `ctx.manual_seed()`),
load seeded weights into it *by parameter name*, so the comparison never depends on how it initialises
itself, then call it on seeded inputs. Where a judge compares with torch (`nn.MultiheadAttention`,
SDPA's `enable_gqa=True`) or with the course's own `MultiHeadAttention`, it reads what the *reference*
child observed; the student child computes the same keys, but they are never read.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from .engine.compare import close, first_failure, tolerance
from .engine.checks import Arg, Domain
from .engine.probe import relaid
from .engine import CPU, CPU_AND_GPU, GPU_ONLY, Checks, Mistake, WrongResult, agrees_with, raises_value_error, same
from .interface import PASSED, arguments, layout_first, state_layout

CHECKS = Checks("lesson03")
# What this lesson's checks import lazily, imported once by the warm zygote (zygote.preload): nothing, since
# mha_vs_torch gives nn.MultiheadAttention its padding as an attn_mask (its key_padding_mask path imports sympy);
# tests/e2e/test_warm_imports.py names what is missing.
WARM_IMPORTS = ()

FORBIDDEN = {
    "MultiHeadAttention": (
        "torch.nn.MultiheadAttention",  # its forward is seen as the functional call below
        "torch.nn.functional.multi_head_attention_forward",
        "torch.nn.functional.scaled_dot_product_attention",
        "torch._native_multi_head_attention",
    ),
}


# ----------------------------------------------------------------------------------------------
# Helpers shared by the module probes


def _build(ctx, *args, **kwargs) -> nn.Module:
    """The student's module, constructed after seeding torch's global generator."""
    ctx.manual_seed()
    module = ctx.call(ctx.target, *args, **kwargs)
    if not isinstance(module, nn.Module):
        raise WrongResult(f"`{ctx.exercise}(...)` should build an nn.Module, but it gave a {type(module).__name__}")
    return module


def _weights(ctx, shapes: dict[str, tuple[int, ...]]) -> dict[str, torch.Tensor]:
    """Seeded values for the named parameters: weights ~ N(0, 1/fan_in), biases ~ N(0, 0.1²)."""
    return {name: ctx.randn(*shape, scale=1 / math.sqrt(shape[-1]) if len(shape) == 2 else 0.1)
            for name, shape in shapes.items()}


def _load(ctx, module: nn.Module, weights: dict[str, torch.Tensor], who: str | None = None) -> nn.Module:
    """Copy `weights` into `module` by parameter name, on the config's device and dtype, in eval mode."""
    who = who or f"`{ctx.exercise}`"
    params = dict(module.named_parameters())
    for name, w in weights.items():
        if name not in params:
            have = ", ".join(f"{n} {tuple(p.shape)}" for n, p in params.items()) or "none"
            raise WrongResult(f"{who} has no parameter `{name}` (its parameters: {have}); name the layers "
                              f"as the exercise asks, so weights load by name")
        if tuple(params[name].shape) != tuple(w.shape):
            raise WrongResult(f"{who}'s `{name}` has shape {tuple(params[name].shape)}, expected {tuple(w.shape)}")
    module.to(device=ctx.device, dtype=ctx.dtype)
    params = dict(module.named_parameters())
    with torch.no_grad():
        for name, w in weights.items():
            params[name].copy_(w)
    return module.eval()


def _tensor(ctx, result, what: str = "the output tensor (B, T, D)") -> torch.Tensor:
    if not isinstance(result, torch.Tensor):
        raise WrongResult(f"`{ctx.exercise}.forward` should return {what}, but it returned a {type(result).__name__}")
    return result


def _proj_shapes(d_model: int, kv_dim: int | None = None, bias: bool = True) -> dict[str, tuple[int, ...]]:
    kv_dim = d_model if kv_dim is None else kv_dim
    shapes = {}
    for name, out in (("q_proj", d_model), ("k_proj", kv_dim), ("v_proj", kv_dim), ("out_proj", d_model)):
        shapes[f"{name}.weight"] = (out, d_model)
        if bias:
            shapes[f"{name}.bias"] = (out,)
    return shapes


def _count(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _course_mha(ctx, d_model: int, num_heads: int, weights: dict, bias: bool = True):
    """The namespace's MultiHeadAttention carrying `weights`, or None when it cannot be built.

    Only the reference child's copy (the course's solved class) is ever judged; in the student's child
    this may fail (an unfinished MultiHeadAttention) without failing the exercise being checked."""
    try:
        mha = ctx.get("MultiHeadAttention")(d_model, num_heads, bias=bias)
        return _load(ctx, mha, weights, "MultiHeadAttention")
    except Exception:  # noqa: BLE001
        return None


# ----------------------------------------------------------------------------------------------
# Declared domains: shared pieces

_LAYOUTS = ("contiguous", "transposed", "strided")


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in text.split(", "))


def _same_at_dtype(scale: float = 3.0):
    """A domain judge: each tensor the reference observed matches at the tolerance of its own dtype (times
    `scale`); every other observation (a flag, None-ness) is equal."""
    def judge(s, r, ctx):
        for key, want in r.items():
            if isinstance(want, torch.Tensor):
                msg = close(s.get(key), want, key, tol=tolerance(want.dtype).scaled(scale))
            elif s.get(key) != want:
                msg = _FLAG_MESSAGES.get(key, f"{key}: {s.get(key)!r}, expected {want!r}")
            else:
                msg = None
            if msg:
                return msg
        return None
    return judge


_FLAG_MESSAGES = {
    "weights is None": "the second item of the pair should be the weights (B, H, Tq, Tk) with need_weights=True, "
                       "and None otherwise",
    "train differs from eval": "in training mode with dropout > 0 the output equals the eval-mode output: apply "
                               "dropout (to the attention weights) when self.training is True",
}


def _prepare(ctx, module, ex, first_call):
    """The module's state before the drawn call: another instance built after it (no shared global state), a
    call with other shapes first (no state kept from it)."""
    if ex.get("instances") == "a second one built after it":
        ctx.call(ctx.target, *ex["__other__"])
    if ex.get("calls") == "after a call with other shapes":
        first_call()
    return module


# ----------------------------------------------------------------------------------------------
# split_heads(x, num_heads) -> (B, H, T, D/H)


@CHECKS.probe("split_heads", "(B, T, D) → (B, H, T, D/H): head h holds features h·Dh … (h+1)·Dh − 1",
              same(), CPU_AND_GPU,
              rule="Head h owns features `h·Dh … (h+1)·Dh − 1` of every position")
def split_values(ctx):
    x = ctx.randn(2, 5, 24)  # (B, T, D)
    return {"output with num_heads=4": ctx.call(ctx.target, x, 4),  # (2, 4, 5, 6)
            "output with num_heads=3": ctx.call(ctx.target, x, num_heads=3)}  # (2, 3, 5, 8)


@CHECKS.probe("split_heads", "raises ValueError when D is not divisible by num_heads", raises_value_error(
    ("D=10, num_heads=4", "split_heads(x, num_heads) with D=10 and num_heads=4"),
    why="D must be divisible by num_heads"), CPU,
              rule="Raise `ValueError` (say which argument and why) when D is not divisible by `num_heads`")
def split_not_divisible(ctx):
    return {"D=10, num_heads=4": ctx.raised(ctx.target, ctx.randn(2, 5, 10), 4)}


# The declared domain of split_heads: one head and D heads (Dh = 1), a batch and a length of 1, a long sequence,
# x in float32, float64 or bfloat16, laid out any way.
SPLIT_DOMAIN = Domain(
    args=(Arg("B, T, D", ("2, 5, 24", "1, 1, 24", "3, 7, 8", "2, 300, 48")), Arg("num_heads", (4, 1, "D", 2))),
    dtypes=(("x", ("float32", "float64", "bfloat16")),), layouts=(("x", _LAYOUTS),), examples=4)


@CHECKS.domain("split_heads", SPLIT_DOMAIN, _same_at_dtype(1.0))
def split_domain(ctx, ex):
    B, T, Dm = _ints(ex["B, T, D"])
    x = relaid(ctx.randn(B, T, Dm).to(getattr(torch, ex["dtype of x"])), ex["layout of x"])
    return {"output": ctx.call(ctx.target, x, Dm if ex["num_heads"] == "D" else ex["num_heads"])}


# ----------------------------------------------------------------------------------------------
# merge_heads(x) -> (B, T, H·Dh)


@CHECKS.probe("merge_heads", "(B, H, T, Dh) → (B, T, H·Dh): the heads side by side per position",
              same(), CPU_AND_GPU,
              rule="It must work both on a contiguous input (what `weights @ v` returns) and on a transposed "
                   "view (what `split_heads` returns)")
def merge_values(ctx):
    x = ctx.randn(2, 4, 5, 6)  # (B, H, T, Dh), contiguous like the output of weights @ v
    y = ctx.randn(2, 5, 3, 8).transpose(1, 2)  # (B, H, T, Dh), a non-contiguous view like split_heads' output
    return {"output for a contiguous input": ctx.call(ctx.target, x),
            "output for a transposed (non-contiguous) input": ctx.call(ctx.target, y)}


# The declared domain of merge_heads: one head, Dh = 1, a batch and a length of 1, a long sequence; the input
# contiguous (as weights @ v gives it) or a transpose(1, 2) view of (B, T, H, Dh) (as split_heads gives it);
# float32, float64 or bfloat16, laid out any way.
MERGE_DOMAIN = Domain(
    args=(Arg("B, H, T, Dh", ("2, 4, 5, 6", "1, 1, 1, 6", "2, 1, 5, 6", "2, 6, 5, 1", "2, 8, 300, 4")),
          Arg("made as", ("a (B, H, T, Dh) tensor", "transpose(1, 2) of (B, T, H, Dh)"))),
    dtypes=(("x", ("float32", "float64", "bfloat16")),), layouts=(("x", _LAYOUTS),), examples=4)


@CHECKS.domain("merge_heads", MERGE_DOMAIN, _same_at_dtype(1.0))
def merge_domain(ctx, ex):
    B, H_, T, Dh = _ints(ex["B, H, T, Dh"])
    dt = getattr(torch, ex["dtype of x"])
    if ex["made as"] == "a (B, H, T, Dh) tensor":
        x = relaid(ctx.randn(B, H_, T, Dh).to(dt), ex["layout of x"])
    else:
        x = relaid(ctx.randn(B, T, H_, Dh).to(dt), ex["layout of x"]).transpose(1, 2)
    return {"output": ctx.call(ctx.target, x)}


# ----------------------------------------------------------------------------------------------
# MultiHeadAttention(d_model, num_heads, dropout=0.0, bias=True)
# forward(query, key=None, value=None, mask=None, need_weights=False) -> (output, weights | None)

D, H = 24, 4  # Dh = 6; with B = 2, Tq = 5, Tk = 7 every axis has its own size


def _mha(ctx, bias: bool = True, dropout: float = 0.0):
    """The student's MultiHeadAttention(D, H) carrying seeded weights, and those weights."""
    module = _build(ctx, D, H, dropout=dropout, bias=bias)
    weights = _weights(ctx, _proj_shapes(D, bias=bias))
    return _load(ctx, module, weights), weights


def _call_mha(ctx, module, *args, **kwargs):
    return ctx.unpack(ctx.call(module, *args, **kwargs), 2, "a pair (output, weights or None)")


def _torch_mha(ctx, weights: dict, bias: bool = True) -> nn.MultiheadAttention:
    """nn.MultiheadAttention(batch_first=True) carrying the same weights: in_proj = cat(q, k, v)."""
    m = nn.MultiheadAttention(D, H, bias=bias, batch_first=True)
    with torch.no_grad():
        m.in_proj_weight.copy_(torch.cat([weights[f"{p}.weight"] for p in ("q_proj", "k_proj", "v_proj")]))
        m.out_proj.weight.copy_(weights["out_proj.weight"])
        if bias:
            m.in_proj_bias.copy_(torch.cat([weights[f"{p}.bias"] for p in ("q_proj", "k_proj", "v_proj")]))
            m.out_proj.bias.copy_(weights["out_proj.bias"])
    return m.to(device=ctx.device, dtype=ctx.dtype).eval()


def _mha_inputs(ctx):
    query, key, value = ctx.randn(2, 5, D), ctx.randn(2, 7, D), ctx.randn(2, 7, D)  # (B, Tq, D), (B, Tk, D)
    allowed = ctx.bernoulli(5, 7, p=0.6)  # (Tq, Tk), True = may attend
    allowed[:, 0] = True  # every query sees at least one key
    lengths = torch.tensor([7, 4])
    padding = (torch.arange(7) < lengths[:, None]).view(2, 1, 1, 7).to(ctx.device)  # (B, 1, 1, Tk)
    return query, key, value, allowed, padding


def _self_attention(s, r, ctx):
    msg = same("output", scale=2)(s, r, ctx)
    if msg:
        return msg
    if not s["weights is None"]:
        return "with need_weights=False (the default) the second item of the pair should be None"
    return None


@CHECKS.probe("MultiHeadAttention", "self-attention (key and value None) matches the reference", _self_attention,
              CPU_AND_GPU,
              rule="In self-attention queries, keys and values all come from the same sequence: `forward(x)`")
def mha_self(ctx):
    module, _ = _mha(ctx)
    x = ctx.randn(2, 5, D)  # (B, T, D)
    out, weights = _call_mha(ctx, module, x)
    return {"output": out, "weights is None": weights is None}


@CHECKS.probe("MultiHeadAttention", "equals nn.MultiheadAttention(batch_first=True) with the same weights",
              agrees_with(("self-attention output", "torch self-attention output"),
                          ("cross-attention output (Tk ≠ Tq)", "torch cross-attention output"),
                          ("output with a (Tq, Tk) mask", "torch output with attn_mask"),
                          ("output with a (B, 1, 1, Tk) padding mask", "torch output with key_padding_mask"),
                          scale=3), CPU_AND_GPU,
              rule="PyTorch's `nn.MultiheadAttention` computes the same function with a different packaging")
def mha_vs_torch(ctx):
    module, weights = _mha(ctx)
    query, key, value, allowed, padding = _mha_inputs(ctx)
    obs = {
        "self-attention output": _call_mha(ctx, module, query)[0],
        "cross-attention output (Tk ≠ Tq)": _call_mha(ctx, module, query, key, value)[0],
        "output with a (Tq, Tk) mask": _call_mha(ctx, module, query, key, value, mask=allowed)[0],
        "output with a (B, 1, 1, Tk) padding mask": _call_mha(ctx, module, query, key, value, mask=padding)[0],
    }
    # torch's answer; its masks mean the opposite (True = may NOT attend)
    tm = _torch_mha(ctx, weights)
    with torch.no_grad():
        obs["torch self-attention output"] = tm(query, query, query, need_weights=False)[0]
        obs["torch cross-attention output"] = tm(query, key, value, need_weights=False)[0]
        obs["torch output with attn_mask"] = tm(query, key, value, attn_mask=~allowed, need_weights=False)[0]
        # key_padding_mask=~padding.view(2, 7), said as the (B * H, Tq, Tk) attn_mask torch merges it into: its
        # own path checks the mask with torch._check_with, which imports sympy (0.4-0.6 s of a first check)
        blocked = (~padding).expand(2, H, 5, 7).reshape(2 * H, 5, 7)
        obs["torch output with key_padding_mask"] = tm(query, key, value, attn_mask=blocked, need_weights=False)[0]
    return obs


def _per_head_weights(s, r, ctx):
    w, expected = s["weights"], r["torch per-head weights"]
    if not isinstance(w, torch.Tensor):
        return "with need_weights=True the second item should be the attention weights, a Tensor (B, H, Tq, Tk)"
    if w.shape != expected.shape:
        return (f"weights have shape {tuple(w.shape)}, expected (B, H, Tq, Tk) = {tuple(expected.shape)}: "
                f"one (Tq, Tk) map per head")
    return first_failure(close(w, expected, "weights (against nn.MultiheadAttention's, average_attn_weights=False)",
                               tol=ctx.tol.scaled(3)),
                         same("output", scale=2)(s, r, ctx))


@CHECKS.probe("MultiHeadAttention", "need_weights=True returns per-head weights (B, H, Tq, Tk)", _per_head_weights,
              CPU_AND_GPU,
              rule="`need_weights=True` returns the weights per head, `(B, H, Tq, Tk)`; otherwise the second "
                   "item is None")
def mha_weights(ctx):
    module, weights = _mha(ctx)
    query, key, value, allowed, _ = _mha_inputs(ctx)
    out, w = _call_mha(ctx, module, query, key, value, mask=allowed, need_weights=True)
    with torch.no_grad():
        _, tw = _torch_mha(ctx, weights)(query, key, value, attn_mask=~allowed, need_weights=True,
                                         average_attn_weights=False)
    return {"output": out, "weights": w, "torch per-head weights": tw}


def _param_count(s, r, ctx):
    for key in ("parameters, D=512, H=8, bias=False", "parameters, D=24, H=4, bias=True"):
        if s[key] != r[key]:
            return (f"{key}: {s[key]:,}, expected {r[key]:,} (four D×D projections, plus four D-vectors of bias "
                    f"when bias=True, whatever the number of heads)")
    return None


@CHECKS.probe("MultiHeadAttention", "parameter count: 4·D² (+ 4·D bias), independent of H", _param_count, CPU,
              rule="creates `q_proj`, `k_proj`, `v_proj`, `out_proj` (each `nn.Linear(d_model, d_model, "
                   "bias=bias)`")
def mha_params(ctx):
    big = _build(ctx, 512, 8, bias=False)
    small = _build(ctx, D, H)
    return {"parameters, D=512, H=8, bias=False": _count(big), "parameters, D=24, H=4, bias=True": _count(small)}


def _eval_with_dropout(s, r, tol, hint: str) -> str | None:
    """The eval-mode output of a module built with dropout=0.5 against the reference's; `hint` (dropout must do
    nothing in eval mode) only when the premise holds on these inputs: the same module built with dropout=0.0 is
    right in eval mode. When it is wrong too, the difference is not dropout's, and the message says so."""
    msg = close(s["eval output, dropout=0.5"], r["eval output, dropout=0.5"], "eval-mode output with dropout=0.5",
                tol=tol)
    if not msg:
        return None
    if close(s["eval output, dropout=0.0"], r["eval output, dropout=0.0"], "eval-mode output with dropout=0.0",
             tol=tol):
        return msg + " (with dropout=0.0 too: the difference is not dropout's)"
    return msg + hint


def _dropout(s, r, ctx):
    msg = _eval_with_dropout(s, r, ctx.tol, " (in eval mode dropout must do nothing)")
    if msg:
        return msg
    if not s["eval is repeatable"]:
        return "two eval-mode calls gave different outputs: dropout must be off in eval mode"
    if not s["train differs from eval"]:
        return ("in training mode with dropout=0.5 the output equals the eval-mode output: apply dropout to the "
                "attention weights when self.training is True (F.dropout(w, p, training=self.training))")
    return close(s["train output, dropout=0.0"], r["train output, dropout=0.0"],
                 "training-mode output with dropout=0.0", tol=ctx.tol)


@CHECKS.probe("MultiHeadAttention", "dropout on the attention weights in training mode only", _dropout, CPU,
              rule="Dropout on the attention weights, in training mode only")
def mha_dropout(ctx):
    x = ctx.randn(2, 5, D)
    module, _ = _mha(ctx, dropout=0.5)
    out_eval, out_eval2 = _call_mha(ctx, module, x)[0], _call_mha(ctx, module, x)[0]
    module.train()
    ctx.manual_seed()
    out_train = _call_mha(ctx, module, x)[0]
    plain, _ = _mha(ctx, dropout=0.0)
    plain_eval = _call_mha(ctx, plain, x)[0]
    plain.train()
    return {"eval output, dropout=0.5": out_eval, "eval is repeatable": bool(torch.equal(out_eval, out_eval2)),
            "train differs from eval": not torch.allclose(out_train, out_eval),
            "train output, dropout=0.0": _call_mha(ctx, plain, x)[0], "eval output, dropout=0.0": plain_eval}


def _dropout_on_weights(s, r, ctx):
    """The values are one-hot and the projections identities (plus a bias b after out_proj), so the output
    is b plus each head's weights: in training mode, dropout on the weights leaves out − b at 0 or at the
    eval-mode weights / (1 − p); dropout anywhere after out_proj would leave −b where it dropped."""
    p, b = r["p"], r["out_proj bias"]
    w_eval, w_train = s["eval output"] - b, s["train output"] - b
    tol = 1e-4
    dropped = w_train.abs() <= tol
    kept_ok = (w_train - w_eval / (1 - p)).abs() <= tol + 1e-3 * w_eval.abs()
    if not (dropped | kept_ok).all():
        i = tuple(int(j) for j in (~(dropped | kept_ok)).nonzero()[0])
        return (f"with dropout={p} in training mode, an entry of the attention weights (seen through one-hot values "
                f"and identity projections) is {w_train[i].item():.4g}, neither 0 nor the eval-mode weight "
                f"{w_eval[i].item():.4g} / (1 − p): apply dropout to the softmax weights, before weights @ v, and "
                f"nowhere after out_proj")
    live = w_eval.abs() > tol
    frac = float((dropped & live).sum()) / max(int(live.sum()), 1)
    if not 0.2 < frac < 0.8:
        return (f"with dropout={p} in training mode {frac:.0%} of the attention weights were dropped: about "
                f"{p:.0%} should be")
    return None


@CHECKS.probe("MultiHeadAttention", "dropout drops attention weights (where the zeros appear)", _dropout_on_weights,
              CPU, hidden=True,
              rule="Dropout on the attention weights, in training mode only (`F.dropout(w, p, "
                   "training=self.training)`")
def mha_dropout_placement(ctx):
    p, tk, dh = 0.5, 5, D // H
    module = _build(ctx, D, H, dropout=p)
    bias = torch.linspace(0.5, 1.5, D)
    weights = _weights(ctx, _proj_shapes(D))
    weights.update({"v_proj.weight": torch.eye(D), "v_proj.bias": torch.zeros(D),
                    "out_proj.weight": torch.eye(D), "out_proj.bias": bias})
    _load(ctx, module, {k: ctx.put(v) for k, v in weights.items()})
    value = torch.zeros(2, tk, D)
    for j in range(tk):  # key j's value is e_j inside every head, so head h's output is its weights
        value[:, j, j::dh] = 1.0
    query, key = ctx.randn(2, 4, D), ctx.randn(2, tk, D)
    out_eval = _call_mha(ctx, module, query, key, ctx.put(value))[0]
    module.train()
    ctx.manual_seed()
    out_train = _call_mha(ctx, module, query, key, ctx.put(value))[0]
    return {"eval output": out_eval, "train output": out_train, "out_proj bias": bias, "p": p}


@CHECKS.probe("MultiHeadAttention", "gradients reach every projection and the inputs", same(scale=10), CPU,
              hidden=True,
              rule="Gradients must reach every projection and the inputs")
def mha_grads(ctx):
    module, _ = _mha(ctx)
    query = ctx.randn(2, 5, D, requires_grad=True)
    key = ctx.randn(2, 7, D, requires_grad=True)
    out, _ = _call_mha(ctx, module, query, key, key)
    (out * ctx.randn(2, 5, D)).sum().backward()
    obs = {f"gradient of {n}": p.grad for n, p in module.named_parameters() if n.endswith("weight")}
    return {**obs, "gradient of query": query.grad, "gradient of key": key.grad}


# The declared domain of MultiHeadAttention: one head and D heads, bias=False, dropout 0 and 0.5 in eval
# and training mode (in training with dropout > 0: the output differs from eval mode, and back in eval mode it is
# the reference's), self-attention, cross-attention (Tk ≠ Tq both ways, one key, a long memory of 200) and value
# defaulting to key, every mask shape, need_weights, a batch of 1, a call with other shapes first, a second
# instance built after the first; query, key and value in float32 or float64, laid out any way.
MHA_DOMAIN = Domain(
    args=(Arg("d_model, num_heads", ("24, 4", "24, 1", "24, 24")), Arg("bias", (True, False)),
          Arg("dropout, mode", ("0.0, eval", "0.5, eval", "0.0, train", "0.5, train")),
          Arg("key, value", ("None, None", "given, given", "given, None")),
          Arg("Tq, Tk", ("5, 7", "7, 5", "1, 1", "3, 200")),
          Arg("mask", ("none", "(Tq, Tk)", "(B, 1, 1, Tk)", "(B, H, Tq, Tk)")), Arg("need_weights", (False, True)),
          Arg("B", (2, 1)), Arg("calls", ("one", "after a call with other shapes")),
          Arg("instances", ("one", "a second one built after it")), PASSED),
    dtypes=(("query, key, value", ("float32", "float64")),),
    layouts=(("query", _LAYOUTS), ("key", _LAYOUTS), ("value", ("contiguous", "transposed"))), examples=3)


def _attention_call(ctx, module, ex, call, eval_call=None):
    """The drawn call in the drawn mode: in training with dropout > 0, whether it differs from eval mode, then
    the eval-mode call (deterministic, compared with the reference)."""
    p, mode = ex["dropout, mode"].split(", ")
    if mode == "eval":
        return call(), {}
    module.train()
    if float(p) == 0.0:
        return call(), {}
    ctx.manual_seed()
    train = call()
    module.eval()
    ev = call()
    a, b = (train[0], ev[0]) if isinstance(train, tuple) else (train, ev)
    return ev, {"train differs from eval": bool(isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
                                                and a.shape == b.shape and not torch.allclose(a, b))}


@CHECKS.domain("MultiHeadAttention", MHA_DOMAIN, layout_first(_same_at_dtype(), who="MultiHeadAttention"))
def mha_domain(ctx, ex):
    d, h = _ints(ex["d_model, num_heads"])
    p = float(ex["dropout, mode"].split(", ")[0])
    dt = getattr(torch, ex["dtype of query, key, value"])
    a, kw = arguments(("dropout", "bias"), {"dropout": p, "bias": ex["bias"]}, {}, ex["passed"])
    module = _build(ctx, d, h, *a, **kw)
    layout = state_layout(module)
    module = _load(ctx, module, _weights(ctx, _proj_shapes(d, bias=ex["bias"])))
    module.to(dt)
    B = ex["B"]
    tq, tk = _ints(ex["Tq, Tk"])
    tk = tq if ex["key, value"] == "None, None" else tk
    query = relaid(ctx.randn(B, tq, d).to(dt), ex["layout of query"])
    key = relaid(ctx.randn(B, tk, d).to(dt), ex["layout of key"])
    value = relaid(ctx.randn(B, tk, d).to(dt), ex["layout of value"])
    given = {"None, None": {}, "given, given": {"key": key, "value": value}, "given, None": {"key": key}}[ex["key, value"]]
    if ex["need_weights"]:
        given["need_weights"] = True
    if ex["mask"] != "none":
        shape = {"(Tq, Tk)": (tq, tk), "(B, 1, 1, Tk)": (B, 1, 1, tk), "(B, H, Tq, Tk)": (B, h, tq, tk)}[ex["mask"]]
        mask = ctx.bernoulli(*shape, p=0.6)
        mask[..., 0] = True  # every query sees a key
        given["mask"] = mask
    args, kwargs = arguments(("key", "value", "mask", "need_weights"), given,
                             {"key": None, "value": None, "mask": None, "need_weights": False}, ex["passed"])
    args = (query, *args)
    ex = {**ex, "__other__": (16, 2)}
    _prepare(ctx, module, ex, lambda: _call_mha(ctx, module, ctx.randn(B + 1, tq + 2, d).to(dt)))
    (out, weights), extra = _attention_call(ctx, module, ex, lambda: _call_mha(ctx, module, *args, **kwargs))
    obs = {"output": out, "weights is None": weights is None, **extra, "state_dict": layout}
    if ex["need_weights"]:
        obs["weights"] = weights
    return obs


# ----------------------------------------------------------------------------------------------
# CausalSelfAttention(d_model, num_heads, dropout=0.0, bias=True): fused qkv_proj, forward(x, is_causal=True)


def _csa(ctx, d_model: int, num_heads: int, dropout: float = 0.0):
    module = _build(ctx, d_model, num_heads, dropout=dropout)
    weights = _weights(ctx, {"qkv_proj.weight": (3 * d_model, d_model), "qkv_proj.bias": (3 * d_model,),
                             "out_proj.weight": (d_model, d_model), "out_proj.bias": (d_model,)})
    return _load(ctx, module, weights), weights


def _split_qkv(weights: dict, d_model: int) -> dict:
    """The fused weights as MultiHeadAttention's four projections (rows ordered q, k, v)."""
    out = {"out_proj.weight": weights["out_proj.weight"], "out_proj.bias": weights["out_proj.bias"]}
    for name, w, b in zip(("q_proj", "k_proj", "v_proj"), weights["qkv_proj.weight"].split(d_model),
                          weights["qkv_proj.bias"].split(d_model)):
        out[f"{name}.weight"], out[f"{name}.bias"] = w, b
    return out


@CHECKS.probe("CausalSelfAttention", "equals MultiHeadAttention carrying the same weights with a causal mask",
              agrees_with(("output", "MultiHeadAttention output, causal mask"),
                          ("output with is_causal=True", "MultiHeadAttention output, causal mask"),
                          ("output with is_causal=False", "MultiHeadAttention output, no mask"), scale=3),
              CPU_AND_GPU,
              rule="With the same weights (split into q, k, v) it must equal your `MultiHeadAttention` with a "
                   "causal mask")
def csa_vs_mha(ctx):
    module, weights = _csa(ctx, D, H)
    x = ctx.randn(2, 5, D)  # (B, T, D)
    obs = {"output": _tensor(ctx, ctx.call(module, x)),
           "output with is_causal=True": _tensor(ctx, ctx.call(module, x, is_causal=True)),
           "output with is_causal=False": _tensor(ctx, ctx.call(module, x, is_causal=False))}
    mha = _course_mha(ctx, D, H, _split_qkv(weights, D))
    if mha is not None:
        causal = torch.ones(x.shape[1], x.shape[1], dtype=torch.bool, device=ctx.device).tril()  # (T, T)
        with torch.no_grad():
            obs["MultiHeadAttention output, causal mask"] = mha(x, mask=causal)[0]
            obs["MultiHeadAttention output, no mask"] = mha(x)[0]
    return obs


def _calls_sdpa(s, r, ctx):
    if not s["calls F.scaled_dot_product_attention"]:
        return ("forward never calls F.scaled_dot_product_attention: hand the (B, H, T, Dh) q, k, v to it with "
                "is_causal=True, so a GPU can run its flash kernel instead of a T×T score matrix")
    return same("output")(s, r, ctx)


@CHECKS.probe("CausalSelfAttention", "goes through F.scaled_dot_product_attention", _calls_sdpa, CPU,
              rule="returns the output `(B, T, D)`, computed through `F.scaled_dot_product_attention`")
def csa_uses_sdpa(ctx):
    module, _ = _csa(ctx, D, H)
    x = ctx.randn(3, 6, D)
    with ctx.recording(F.scaled_dot_product_attention) as rec:
        out = _tensor(ctx, ctx.call(module, x))
    return {"output": out, "calls F.scaled_dot_product_attention": rec.called(F.scaled_dot_product_attention)}


def _future(s, r, ctx):
    change = s["change in outputs before position 4"]
    if change > ctx.tol.atol * 10:
        return (f"changing the inputs at positions 4 and later moved the outputs at positions 0–3 by up to "
                f"{change:.3g}: a position must not see the future (is_causal=True by default)")
    return None


@CHECKS.probe("CausalSelfAttention", "the future does not change the past", _future, CPU, hidden=True,
              rule="changing later inputs must not change earlier outputs")
def csa_future(ctx):
    module, _ = _csa(ctx, D, H)
    x = ctx.randn(2, 9, D)
    y = torch.cat([x[:, :4], ctx.randn(2, 5, D, scale=3.0)], dim=1)  # same past, a different future
    a, b = _tensor(ctx, ctx.call(module, x)), _tensor(ctx, ctx.call(module, y))
    return {"change in outputs before position 4": float((a[:, :4] - b[:, :4]).abs().max())}


def _csa_dropout(s, r, ctx):
    msg = _eval_with_dropout(s, r, ctx.tol.scaled(2),
                             " (in eval mode dropout must do nothing: dropout_p=self.dropout if self.training else 0.0)")
    if msg:
        return msg
    if not s["train differs from eval"]:
        return ("in training mode with dropout=0.5 the output equals the eval-mode output: pass "
                "dropout_p=self.dropout when self.training is True")
    return None


@CHECKS.probe("CausalSelfAttention", "dropout in training mode only", _csa_dropout, CPU, hidden=True,
              rule="with dropout only in training mode")
def csa_dropout(ctx):
    module, _ = _csa(ctx, D, H, dropout=0.5)
    x = ctx.randn(2, 5, D)
    out_eval = _tensor(ctx, ctx.call(module, x))
    module.train()
    ctx.manual_seed()
    out_train = _tensor(ctx, ctx.call(module, x))
    plain, _ = _csa(ctx, D, H)
    return {"eval output, dropout=0.5": out_eval, "train differs from eval": not torch.allclose(out_train, out_eval),
            "eval output, dropout=0.0": _tensor(ctx, ctx.call(plain, x))}


def _fast_path_obs(ctx, module, x, backends: dict) -> dict:
    from torch.nn.attention import sdpa_kernel

    obs = {}
    for label, chosen in backends.items():
        try:
            with sdpa_kernel(chosen):
                obs[f"output on {label}"] = _tensor(ctx, ctx.call(module, x))
        except RuntimeError as exc:
            raise WrongResult(f"on {label} SDPA found no kernel for this call ({str(exc).splitlines()[0][:160]}): "
                              f"pass is_causal=True rather than a mask tensor, and q, k, v as (B, H, T, Dh) "
                              f"in the input's dtype") from None
    return obs


@CHECKS.probe("CausalSelfAttention", "runs on SDPA's flash and memory-efficient kernels (float16/bfloat16)",
              same(scale=2), GPU_ONLY,
              rule="Passing `is_causal=True` rather than a mask tensor matters: the flash kernel takes no "
                   "arbitrary mask")
def csa_fast_path(ctx):
    from torch.nn.attention import SDPBackend

    module, _ = _csa(ctx, 64, 4)  # Dh = 16: the fused kernels want a head size that is a multiple of 8
    x = ctx.randn(2, 37, 64)  # T = 37: not a multiple of any tile size
    return _fast_path_obs(ctx, module, x, {"the flash backend": [SDPBackend.FLASH_ATTENTION],
                                           "the memory-efficient backend": [SDPBackend.EFFICIENT_ATTENTION]})


# The declared domain of CausalSelfAttention: one head and D heads, bias=False, dropout in eval and training mode,
# is_causal omitted, True or False, a batch and a length of 1 and a long sequence, a call with other shapes
# first, a second instance built after the first; x in float32 or float64, laid out any way.
CSA_DOMAIN = Domain(
    args=(Arg("d_model, num_heads", ("24, 4", "24, 1", "24, 24", "64, 4")), Arg("bias", (True, False)),
          Arg("dropout, mode", ("0.0, eval", "0.5, eval", "0.0, train", "0.5, train")),
          Arg("is_causal", ("omitted", True, False)), Arg("B, T", ("2, 5", "1, 1", "3, 200")),
          Arg("calls", ("one", "after a call with other shapes")),
          Arg("instances", ("one", "a second one built after it")), PASSED),
    dtypes=(("x", ("float32", "float64")),), layouts=(("x", _LAYOUTS),), examples=3)


@CHECKS.domain("CausalSelfAttention", CSA_DOMAIN, layout_first(_same_at_dtype(), who="CausalSelfAttention"))
def csa_domain(ctx, ex):
    d, h = _ints(ex["d_model, num_heads"])
    p = float(ex["dropout, mode"].split(", ")[0])
    dt = getattr(torch, ex["dtype of x"])
    shapes = {"qkv_proj.weight": (3 * d, d), "out_proj.weight": (d, d)}
    if ex["bias"]:
        shapes.update({"qkv_proj.bias": (3 * d,), "out_proj.bias": (d,)})
    a, kw = arguments(("dropout", "bias"), {"dropout": p, "bias": ex["bias"]}, {}, ex["passed"])
    module = _build(ctx, d, h, *a, **kw)
    layout = state_layout(module)
    module = _load(ctx, module, _weights(ctx, shapes)).to(dt)
    B, T = _ints(ex["B, T"])
    x = relaid(ctx.randn(B, T, d).to(dt), ex["layout of x"])
    args, kwargs = arguments(("is_causal",), {} if ex["is_causal"] == "omitted" else {"is_causal": ex["is_causal"]},
                             {"is_causal": True}, ex["passed"])
    ex = {**ex, "__other__": (16, 2)}
    _prepare(ctx, module, ex, lambda: ctx.call(module, ctx.randn(B + 1, T + 2, d).to(dt)))
    out, extra = _attention_call(ctx, module, ex, lambda: _tensor(ctx, ctx.call(module, x, *args, **kwargs)))
    return {"output": out, **extra, "state_dict": layout}


# ----------------------------------------------------------------------------------------------
# repeat_kv(x, n_rep) -> (B, Hkv·n_rep, T, Dh): output head h uses KV head h // n_rep


@CHECKS.probe("repeat_kv", "output head h is KV head h // n_rep", same(), CPU_AND_GPU,
              rule="where output head h is input head `h // n_rep`")
def repeat_values(ctx):
    x = ctx.randn(2, 3, 5, 4)  # (B, Hkv, T, Dh)
    return {"output with n_rep=2": ctx.call(ctx.target, x, 2),
            "output with n_rep=4": ctx.call(ctx.target, x, n_rep=4),
            "output with n_rep=1": ctx.call(ctx.target, x, 1)}


# The declared domain of repeat_kv: one KV head, a batch and a length of 1, a long sequence, n_rep of 1 to 8,
# x in float32, float64 or bfloat16, laid out any way (split_heads hands it a transposed view).
REPEAT_DOMAIN = Domain(
    args=(Arg("B, Hkv, T, Dh", ("2, 3, 5, 4", "1, 1, 1, 4", "2, 1, 5, 4", "2, 2, 200, 8")), Arg("n_rep", (2, 1, 4, 8))),
    dtypes=(("x", ("float32", "float64", "bfloat16")),), layouts=(("x", _LAYOUTS),), examples=4)


@CHECKS.domain("repeat_kv", REPEAT_DOMAIN, _same_at_dtype(1.0))
def repeat_domain(ctx, ex):
    x = relaid(ctx.randn(*_ints(ex["B, Hkv, T, Dh"])).to(getattr(torch, ex["dtype of x"])), ex["layout of x"])
    return {"output": ctx.call(ctx.target, x, ex["n_rep"])}


# ----------------------------------------------------------------------------------------------
# GroupedQueryAttention(d_model, num_heads, num_kv_heads, bias=False), forward(x, is_causal=True)

GD, GH, GKV = 24, 6, 2  # Dh = 4, n_rep = 3; with B = 5 and T = 7 every axis has its own size


def _gqa(ctx, d_model: int = GD, num_heads: int = GH, num_kv_heads: int = GKV):
    module = _build(ctx, d_model, num_heads, num_kv_heads)
    weights = _weights(ctx, _proj_shapes(d_model, kv_dim=num_kv_heads * (d_model // num_heads), bias=False))
    return _load(ctx, module, weights), weights


def _sdpa_gqa(x: torch.Tensor, weights: dict, num_heads: int, num_kv_heads: int, is_causal: bool) -> torch.Tensor:
    """GQA computed by torch: SDPA's enable_gqa=True where this torch has it, repeat_interleave otherwise."""
    B, T, Dm = x.shape
    dh = Dm // num_heads
    q = (x @ weights["q_proj.weight"].T).view(B, T, num_heads, dh).transpose(1, 2)  # (B, H, T, Dh)
    k = (x @ weights["k_proj.weight"].T).view(B, T, num_kv_heads, dh).transpose(1, 2)  # (B, Hkv, T, Dh)
    v = (x @ weights["v_proj.weight"].T).view(B, T, num_kv_heads, dh).transpose(1, 2)  # (B, Hkv, T, Dh)
    try:
        out = F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, enable_gqa=True)
    except TypeError:  # a torch without enable_gqa
        n_rep = num_heads // num_kv_heads
        out = F.scaled_dot_product_attention(q, k.repeat_interleave(n_rep, 1), v.repeat_interleave(n_rep, 1),
                                             is_causal=is_causal)
    return out.transpose(1, 2).reshape(B, T, Dm) @ weights["out_proj.weight"].T  # (B, T, D)


@CHECKS.probe("GroupedQueryAttention", "agrees with F.scaled_dot_product_attention(enable_gqa=True)",
              agrees_with(("output", "torch output, causal"),
                          ("output with is_causal=True", "torch output, causal"),
                          ("output with is_causal=False", "torch output, not causal"), scale=3),
              CPU_AND_GPU,
              rule="It must agree with `F.scaled_dot_product_attention(..., enable_gqa=True)`")
def gqa_vs_sdpa(ctx):
    module, weights = _gqa(ctx)
    x = ctx.randn(5, 7, GD)  # (B, T, D)
    obs = {"output": _tensor(ctx, ctx.call(module, x)),
           "output with is_causal=True": _tensor(ctx, ctx.call(module, x, is_causal=True)),
           "output with is_causal=False": _tensor(ctx, ctx.call(module, x, is_causal=False))}
    with torch.no_grad():
        obs["torch output, causal"] = _sdpa_gqa(x, weights, GH, GKV, True)
        obs["torch output, not causal"] = _sdpa_gqa(x, weights, GH, GKV, False)
    return obs


@CHECKS.probe("GroupedQueryAttention", "num_kv_heads=1 is MQA; num_kv_heads=num_heads equals MultiHeadAttention",
              agrees_with(("output, num_kv_heads=1", "torch output, num_kv_heads=1"),
                          ("output, num_kv_heads=num_heads", "MultiHeadAttention output, causal mask"),
                          scale=3), CPU,
              rule="equal your `MultiHeadAttention` (causal mask, same weights) when `num_kv_heads = num_heads`")
def gqa_extremes(ctx):
    x = ctx.randn(5, 7, GD)
    mqa, mqa_weights = _gqa(ctx, GD, GH, 1)
    full, full_weights = _gqa(ctx, GD, GH, GH)
    obs = {"output, num_kv_heads=1": _tensor(ctx, ctx.call(mqa, x)),
           "output, num_kv_heads=num_heads": _tensor(ctx, ctx.call(full, x))}
    with torch.no_grad():
        obs["torch output, num_kv_heads=1"] = _sdpa_gqa(x, mqa_weights, GH, 1, True)
        mha = _course_mha(ctx, GD, GH, full_weights, bias=False)
        if mha is not None:
            obs["MultiHeadAttention output, causal mask"] = mha(x, mask=torch.ones(7, 7, dtype=torch.bool).tril())[0]
    return obs


def _gqa_count(s, r, ctx):
    for key in r:
        if s[key] != r[key]:
            return (f"{key}: {s[key]:,}, expected {r[key]:,} (q_proj and out_proj are D×D; k_proj and v_proj are "
                    f"(num_kv_heads·Dh)×D; no biases by default)")
    return None


@CHECKS.probe("GroupedQueryAttention", "parameter count: 2·D² + 2·D·num_kv_heads·Dh", _gqa_count, CPU,
              rule="creates `q_proj` (D → D), `k_proj` and `v_proj` (D → num_kv_heads · Dh) and `out_proj` (D → "
                   "D)")
def gqa_params(ctx):
    return {f"parameters, D=512, H=8, num_kv_heads={kv}": _count(_build(ctx, 512, 8, kv)) for kv in (8, 2, 1)}


@CHECKS.probe("GroupedQueryAttention", "gradients reach every projection", same(scale=10), CPU, hidden=True,
              rule="gradients must reach every projection and `x`")
def gqa_grads(ctx):
    module, _ = _gqa(ctx)
    x = ctx.randn(5, 7, GD, requires_grad=True)
    out = _tensor(ctx, ctx.call(module, x))
    (out * ctx.randn(5, 7, GD)).sum().backward()
    obs = {f"gradient of {n}": p.grad for n, p in module.named_parameters()}
    return {**obs, "gradient of x": x.grad}


@CHECKS.probe("GroupedQueryAttention", "runs on SDPA's fused kernels (float16/bfloat16)", same(scale=2), GPU_ONLY,
              rule="and run on the fused kernels")
def gqa_fast_path(ctx):
    from torch.nn.attention import SDPBackend

    module, _ = _gqa(ctx, 128, 8, 2)  # Dh = 16
    x = ctx.randn(2, 37, 128)
    return _fast_path_obs(ctx, module, x, {"the flash or memory-efficient backend":
                                           [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION]})


# The declared domain of GroupedQueryAttention: MQA (one KV head), MHA (as many as query heads), one head of
# each, bias=True, is_causal omitted, True or False, a batch and a length of 1 and a long sequence, a call with
# other shapes first, a second instance built after the first; x in float32 or float64, laid out any way.
GQA_DOMAIN = Domain(
    args=(Arg("d_model, num_heads, num_kv_heads", ("24, 6, 2", "24, 6, 1", "24, 6, 6", "16, 4, 2", "8, 1, 1")),
          Arg("bias", (False, True)), Arg("is_causal", ("omitted", True, False)), Arg("B, T", ("2, 7", "1, 1", "2, 200")),
          Arg("calls", ("one", "after a call with other shapes")),
          Arg("instances", ("one", "a second one built after it")), PASSED),
    dtypes=(("x", ("float32", "float64")),), layouts=(("x", _LAYOUTS),), examples=3)


@CHECKS.domain("GroupedQueryAttention", GQA_DOMAIN, layout_first(_same_at_dtype(), who="GroupedQueryAttention"))
def gqa_domain(ctx, ex):
    d, h, kv = _ints(ex["d_model, num_heads, num_kv_heads"])
    dt = getattr(torch, ex["dtype of x"])
    weights = _weights(ctx, _proj_shapes(d, kv_dim=kv * (d // h), bias=ex["bias"]))
    a, kw = arguments(("bias",), {"bias": ex["bias"]}, {}, ex["passed"])
    module = _build(ctx, d, h, kv, *a, **kw)
    layout = state_layout(module)
    module = _load(ctx, module, weights).to(dt)
    B, T = _ints(ex["B, T"])
    x = relaid(ctx.randn(B, T, d).to(dt), ex["layout of x"])
    args, kwargs = arguments(("is_causal",), {} if ex["is_causal"] == "omitted" else {"is_causal": ex["is_causal"]},
                             {"is_causal": True}, ex["passed"])
    _prepare(ctx, module, {**ex, "__other__": (16, 4, 1)}, lambda: ctx.call(module, ctx.randn(B + 1, T + 2, d).to(dt)))
    return {"output": _tensor(ctx, ctx.call(module, x, *args, **kwargs)), "state_dict": layout}


# ----------------------------------------------------------------------------------------------
# Known mistakes, each written as exact edits of the solved notebook's cell that defines its exercise
# (`engine.mistake_source` applies them, so a rename in the solution flows through; every `old` must
# occur exactly once, which tests/test_engine.py checks). Each is run on the same probes as the
# reference; a student whose observations match one is told its message.

MISTAKES = (
    Mistake("split_heads", "view_no_transpose", "`x.view(B, H, T, Dh)` keeps the memory order, so each 'head' gets "
            "whole feature vectors of a few positions: view as (B, T, H, Dh), then transpose(1, 2).",
            edits={"x.view(B, T, num_heads, D // num_heads).transpose(1, 2)":
                       "x.view(B, num_heads, T, D // num_heads)"},
            hint="Fill x with its feature index and print head 0 after your split: does each head hold a slice "
                 "of the features of every position, or whole feature vectors of a few positions?"),
    Mistake("merge_heads", "merge_no_transpose", "reshaping (B, H, T, Dh) straight to (B, T, H·Dh) mixes positions "
            "and heads: transpose(1, 2) back to (B, T, H, Dh) first, then reshape.",
            edits={"x.transpose(1, 2).reshape(": "x.reshape("},
            hint="Split and then merge a small tensor and compare it with the original: which axes must be "
                 "next to each other before the heads are put side by side?"),
    Mistake("MultiHeadAttention", "head_dim_is_d_model", "each head is as wide as the model (dh = D), which "
            "multiplies the parameters by H: split d_model into H heads of D/H features each.",
            edits={"num_heads, d_model // num_heads, dropout": "num_heads, d_model, dropout",
                   "q_proj = nn.Linear(d_model, d_model": "q_proj = nn.Linear(d_model, num_heads * d_model",
                   "k_proj = nn.Linear(d_model, d_model": "k_proj = nn.Linear(d_model, num_heads * d_model",
                   "v_proj = nn.Linear(d_model, d_model": "v_proj = nn.Linear(d_model, num_heads * d_model",
                   "out_proj = nn.Linear(d_model,": "out_proj = nn.Linear(num_heads * d_model,"},
            hint="Count your module's parameters for D = 512 and H = 8: should the count depend on H? How wide "
                 "is each head?"),
    Mistake("MultiHeadAttention", "no_out_proj", "the merged heads are returned without `out_proj`: apply the output "
            "projection after merge_heads, it mixes what the heads found.",
            edits={"self.out_proj(merge_heads(weights @ v))": "merge_heads(weights @ v)"},
            hint="Follow the merged heads to your return line: is every projection the text lists applied?"),
    Mistake("MultiHeadAttention", "scale_by_sqrt_d_model", "the scores are divided by √d_model; each head's dot "
            "product runs over Dh = D/H features, so divide by √Dh.",
            edits={"math.sqrt(self.head_dim)": "math.sqrt(self.num_heads * self.head_dim)"},
            hint="Each head's dot product runs over how many features? Check which size goes under the root."),
    Mistake("MultiHeadAttention", "averaged_weights", "the weights are averaged over the heads (B, Tq, Tk); return "
            "one map per head, (B, H, Tq, Tk).",
            edits={"(weights if need_weights else None)": "(weights.mean(dim=1) if need_weights else None)"},
            hint="Print the shape of the weights you return with need_weights=True: how many maps should there "
                 "be, one per head or one in all?"),
    Mistake("MultiHeadAttention", "value_defaults_to_query", "with `key` given and `value` None the values are "
            "taken from the query; attending over one memory means value is key: `value = key if value is None`.",
            edits={"value = key if value is None else value": "value = query if value is None else value"},
            hint="Call the module with key given and value None: which tensor should the values come from?"),
    Mistake("CausalSelfAttention", "bias_ignored", "`bias` is not passed to the projections, so bias=False still "
            "builds biases: give both nn.Linear layers bias=bias.",
            edits={"nn.Linear(d_model, 3 * d_model, bias=bias)": "nn.Linear(d_model, 3 * d_model)",
                   "self.out_proj = nn.Linear(d_model, d_model, bias=bias)": "self.out_proj = nn.Linear(d_model, d_model)"},
            hint="Build the module with bias=False and list its parameters: are there any biases left?"),
    Mistake("CausalSelfAttention", "qkv_interleaved", "the fused projection is split per head (q, k, v interleaved "
            "inside each head's slice); its output is [q | k | v], three blocks of D features: chunk(3, dim=-1) "
            "first, then split the heads.",
            edits={"self.qkv_proj(x).chunk(3, dim=-1)":
                       "split_heads(self.qkv_proj(x), self.num_heads).chunk(3, dim=-1)",
                   "q, k, v = (split_heads(t, self.num_heads) for t in (q, k, v))": "pass"},
            hint="Print how the fused projection's output is laid out: where do the q features end and the k "
                 "features begin, and does your split follow that?"),
    Mistake("CausalSelfAttention", "never_causal", "`is_causal` is not passed to F.scaled_dot_product_attention, so "
            "every position sees the future: pass is_causal=is_causal.",
            edits={"is_causal=is_causal)": "is_causal=False)"},
            hint="Change the input at a late position and see whether the outputs at earlier positions move. "
                 "Is causality asked for in your attention call?"),
    Mistake("repeat_kv", "tiled", "`repeat` tiles the heads (0, 1, 2, 0, 1, 2), giving query head h the KV head h % "
            "Hkv; heads must be grouped (0, 0, 1, 1, 2, 2): use repeat_interleave(n_rep, dim=1).",
            edits={"if n_rep == 1:": "return x.repeat(1, n_rep, 1, 1)\n    if n_rep == 1:"},
            hint="Print which KV head each output head copies for 2 KV heads and n_rep = 2: should copies of "
                 "one head sit side by side, or cycle?"),
    Mistake("GroupedQueryAttention", "gqa_bias_ignored", "the projections are built without biases whatever "
            "`bias` says: pass bias=bias to all four nn.Linear layers (bias=True must build q_proj.bias, ...).",
            edits={"self.q_proj = nn.Linear(d_model, d_model, bias=bias)": "self.q_proj = nn.Linear(d_model, d_model, bias=False)",
                   "self.k_proj = nn.Linear(d_model, num_kv_heads * head_dim, bias=bias)":
                       "self.k_proj = nn.Linear(d_model, num_kv_heads * head_dim, bias=False)",
                   "self.v_proj = nn.Linear(d_model, num_kv_heads * head_dim, bias=bias)":
                       "self.v_proj = nn.Linear(d_model, num_kv_heads * head_dim, bias=False)",
                   "self.out_proj = nn.Linear(d_model, d_model, bias=bias)": "self.out_proj = nn.Linear(d_model, d_model, bias=False)"},
            hint="Build the module with bias=True and list its parameters: does every projection have a bias?"),
    Mistake("GroupedQueryAttention", "tiled_kv", "the KV heads are tiled with `repeat` (h % Hkv) instead of grouped: "
            "query head h must use KV head h // n_rep, as repeat_kv or enable_gqa=True do.",
            edits={"repeat_kv(split_heads(self.k_proj(x), self.num_kv_heads), n_rep)":
                       "split_heads(self.k_proj(x), self.num_kv_heads).repeat(1, n_rep, 1, 1)",
                   "repeat_kv(split_heads(self.v_proj(x), self.num_kv_heads), n_rep)":
                       "split_heads(self.v_proj(x), self.num_kv_heads).repeat(1, n_rep, 1, 1)"},
            hint="Print which KV head each query head uses for 4 query heads and 2 KV heads: should "
                 "neighbouring query heads share one, or alternate?"),
)



# The input battery; the attention modules skip the offsets (engine.OFFSET_SCORES says why).
from .engine import OFFSET_SCORES  # noqa: E402

CHECKS.add_battery(skip={name: OFFSET_SCORES for name in ("MultiHeadAttention", "CausalSelfAttention",
                                                          "GroupedQueryAttention")})
