"""Lesson 04 — LayerNorm, and what it is not: `layer_norm`, `LayerNorm`, `batch_norm`, `group_norm` and
the challenge `layer_norm_manual` (a torch.autograd.Function with a hand-written backward).

Reads like the lesson: each exercise's probes beside their judges, then the known mistakes.
Probes run in the sandboxed child (student code); judges run in the parent. Where torch has the same
operation, the probe also records torch's answer ("torch ..." keys) and the judge compares the student
against it; only the reference child's copy of those values is ever read.
"""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


from .engine.checks import Arg, Domain
from .engine.compare import broken_rule, close, tolerance
from .engine.probe import relaid
from .interface import PASSED, arguments
from .engine import CPU, CPU_AND_GPU, Checks, Config, Mistake, agrees_with, median_ms, raises_value_error, same

CHECKS = Checks("lesson04")
# What this lesson's checks import lazily (nn.MultiheadAttention's mask check imports sympy),
# imported once by the warm zygote (zygote.preload); tests/e2e/test_warm_imports.py names what is missing.
WARM_IMPORTS = ("torch.fx.experimental.symbolic_shapes", "torch._subclasses.schema_check_mode")

# Every built-in normalisation: any one of them turns any of these exercises into a reshape
# (group_norm over x.view(N, G, -1) is a layer_norm; layer_norm of a transposed x is a batch_norm; ...).
_NORMS = (
    "torch.nn.functional.layer_norm", "torch.nn.LayerNorm", "torch.layer_norm", "torch.native_layer_norm",
    "torch.nn.functional.batch_norm", "torch.batch_norm", "torch.native_batch_norm",
    "torch.nn.functional.group_norm", "torch.group_norm", "torch.native_group_norm",
    "torch.nn.functional.instance_norm", "torch.instance_norm",
    "torch.nn.functional.rms_norm", "torch.rms_norm",
)
FORBIDDEN = {name: _NORMS for name in ("layer_norm", "LayerNorm", "batch_norm", "group_norm", "layer_norm_manual")}

FLOAT64 = (Config("cpu", "float64"),)


def _half(ctx) -> bool:
    return ctx.config.dtype in ("float16", "bfloat16")


def against_torch(*keys: str, scale: float = 1.0, note: str = ""):
    """A judge: each student observation `key` matches torch's answer, recorded as `torch key` by the
    reference child. Half precision gets twice the tolerance: torch accumulates LayerNorm in float32."""
    return agrees_with(*keys, scale=scale, half_scale=2, label="torch", note=note)


def _grads(*tensors):
    return [t.grad for t in tensors]


# ----------------------------------------------------------------------------------------------
# Declared domains (one check per exercise over the inputs its spec allows): shared helpers


def _dims(text: str) -> tuple[int, ...]:
    """"2, 3" -> (2, 3); "none" -> ()."""
    return () if text == "none" else tuple(int(n) for n in text.split(","))


def _laid(t: torch.Tensor, layout: str) -> torch.Tensor:
    """`t` in `layout`; a vector "strided" is a view of every other entry of a longer one."""
    if t.dim() == 1 and layout == "strided":
        wide = torch.zeros(2 * t.shape[0], dtype=t.dtype, device=t.device)
        wide[0::2] = t
        return wide[0::2]
    return relaid(t, layout)


def _same_at_dtype(*keys: str, scale: float = 1.0):
    """A domain judge: each observation `key` matches the reference's, in the reference's dtype, within the
    tolerance of that dtype (float32's for float32 and float64: computing a float64 input in float32 inside
    is not wrong), times `scale`."""
    def judge(s, r, ctx):
        for k in keys or [k for k, v in r.items() if isinstance(v, torch.Tensor)]:
            if k not in r:
                continue  # not observed on this example
            ref = r[k]
            half = isinstance(ref, torch.Tensor) and ref.dtype in (torch.float16, torch.bfloat16)
            tol = tolerance(ref.dtype).scaled(2) if half else ctx.tol
            msg = close(s.get(k), ref, k, tol=tol.scaled(scale))
            if msg:
                return msg
        return None
    return judge


_XDTYPES = ("float32", "float64", "bfloat16")
_LAYOUTS = ("contiguous", "transposed", "strided")


# ----------------------------------------------------------------------------------------------
# layer_norm(x, weight=None, bias=None, eps=1e-5): normalise over the last dim


@CHECKS.probe("layer_norm", "matches F.layer_norm, with and without weight and bias", against_torch(),
              CPU_AND_GPU,
              rule="then multiply by `weight` and add `bias` when they are given")
def layer_norm_random(ctx):
    x = ctx.randn(2, 3, 7, scale=2.0) + 1.5  # (B, T, D): a mean and a scale far from 0 and 1
    w, b = ctx.randn(7), ctx.randn(7)  # (D,)
    obs = {}
    for label, kw in (("with weight and bias", dict(weight=w, bias=b)), ("without weight or bias", {}),
                      ("with weight only", dict(weight=w)), ("with bias only", dict(bias=b))):
        obs[f"output {label}"] = ctx.call(ctx.target, x, **kw)
        obs[f"torch output {label}"] = F.layer_norm(x, (7,), kw.get("weight"), kw.get("bias"))
    return obs


@CHECKS.probe("layer_norm", "2-D and 4-D inputs: any number of leading dims", against_torch(), CPU_AND_GPU,
              hidden=True,
              rule="`x` has any number of leading dims, `(..., D)`")
def layer_norm_shapes(ctx):
    obs = {}
    for shape in ((5, 9), (2, 3, 4, 9)):
        x = ctx.randn(*shape, scale=1.5)
        w, b = ctx.randn(9), ctx.randn(9)
        obs[f"output for shape {shape}"] = ctx.call(ctx.target, x, weight=w, bias=b)
        obs[f"torch output for shape {shape}"] = F.layer_norm(x, (9,), w, b)
    return obs


def _own(msg: str) -> str:
    """A comparison of the code's outputs with each other: what it is compared with is its own output, named in
    the message, not the reference."""
    return msg.replace(" differs from the reference at ", " differs at ", 1)


def _affine_invariant(s, r, ctx):
    """LN(a·x + b) = LN(x). A failure states what the numbers show: which of the shift and the scale alone changes
    the output, and, only when the check's own row normalised alone differs from itself inside the batch, that the
    statistics come from more than the row (a LayerNorm that never subtracts the mean keeps its rows independent:
    it is told that the shift changes its output, not that its statistics span other rows)."""
    base = s.get("output of x")
    tol = ctx.tol.scaled(2)
    msg = close(s.get("output of a·x + b"), base, "LN(a·x + b) against LN(x)", tol=tol)
    if not (msg and isinstance(base, torch.Tensor)):
        return same("output of x")(s, r, ctx)
    text = ("shifting and scaling each row (a > 0 and b constant along the last axis) must not change LayerNorm's "
            "output, but yours changes: " + _own(msg) + ".")
    parts = {key: s.get(key) for key in ("output of x + b", "output of a·x")}
    if all(isinstance(v, torch.Tensor) and v.shape == base.shape for v in parts.values()):
        shift, scale = (close(v, base, key, tol=tol) for key, v in parts.items())
        text += (f" Shifting each row by b alone {'changes it too' if shift else 'does not'}; scaling each row by a "
                 f"alone {'changes it too' if scale else 'does not'}.")
    row = s.get("output of row (0, 0) alone")
    if isinstance(row, torch.Tensor) and base.dim() >= 2 and row.shape == base[:1, :1].shape \
            and close(row, base[:1, :1], "row (0, 0) alone against in the batch", tol=tol):
        text += (" Row (0, 0) normalised on its own gives another output than inside the batch: yours uses more "
                 "than that row's own features (LayerNorm's mean and variance come from the last axis only).")
    return broken_rule(text)


@CHECKS.probe("layer_norm", "LN(a·x + b) = LN(x) for a > 0", _affine_invariant, CPU,
              rule="with a > 0 and b the same across that row")
def layer_norm_affine(ctx):
    x = ctx.randn(4, 5, 16, scale=2.0)  # (B, T, D)
    a = ctx.rand(4, 5, 1) * 2 + 1  # (B, T, 1): one positive scale per row, in [1, 3)
    b = ctx.randn(4, 5, 1, scale=3.0)  # (B, T, 1): one shift per row
    return {"output of x": ctx.call(ctx.target, x), "output of a·x + b": ctx.call(ctx.target, a * x + b),
            "output of x + b": ctx.call(ctx.target, x + b), "output of a·x": ctx.call(ctx.target, a * x),
            "output of row (0, 0) alone": ctx.call(ctx.target, x[:1, :1])}


def _sample_alone(s, r, ctx):
    alone, inside = s.get("sample 2 alone"), s.get("sample 2 in the batch")
    msg = close(alone, inside, "sample 2 alone against sample 2 in the batch", tol=ctx.tol)
    if msg and isinstance(inside, torch.Tensor):
        return broken_rule("one sample normalised on its own must give what it gives inside a batch of 5: "
                           + _own(msg) + ". LayerNorm's statistics come from each token's own features, never from "
                           "other samples.")
    return same("sample 2 in the batch")(s, r, ctx)


@CHECKS.probe("layer_norm", "one sample alone = the same sample in a batch", _sample_alone, CPU,
              rule="normalises each token on its own, over its features")
def layer_norm_alone(ctx):
    x = ctx.randn(5, 3, 8) + ctx.randn(5, 1, 1, scale=2.0)  # (B, T, D), each sample shifted differently
    return {"sample 2 alone": ctx.call(ctx.target, x[2:3]),  # (1, T, D)
            "sample 2 in the batch": ctx.call(ctx.target, x)[2:3]}


@CHECKS.probe("layer_norm", "eps = 0.1: where eps sits shows", against_torch(
    note=" (with a variance this small, eps matters: it goes inside the square root, √(var + eps))"), CPU,
              rule="`eps` inside the square root, whatever its size")
def layer_norm_eps(ctx):
    x = ctx.randn(3, 4, 6, scale=0.3)  # variance ≈ 0.09, comparable to eps
    w, b = ctx.randn(6), ctx.randn(6)
    return {"output with eps=0.1": ctx.call(ctx.target, x, eps=0.1),
            "torch output with eps=0.1": F.layer_norm(x, (6,), eps=0.1),
            "output with eps=0.1, weight and bias": ctx.call(ctx.target, x, weight=w, bias=b, eps=0.1),
            "torch output with eps=0.1, weight and bias": F.layer_norm(x, (6,), w, b, eps=0.1)}


@CHECKS.probe("layer_norm", "gradients match", against_torch(scale=10), CPU, hidden=True,
              rule="Gradients must flow to `x`, `weight` and `bias`")
def layer_norm_grads(ctx):
    x = ctx.randn(3, 4, 7, requires_grad=True)
    w, b = ctx.randn(7, requires_grad=True), ctx.randn(7, requires_grad=True)
    g = ctx.randn(3, 4, 7)  # the gradient arriving from above
    (ctx.call(ctx.target, x, weight=w, bias=b) * g).sum().backward()
    xt, wt, bt = (t.detach().clone().requires_grad_() for t in (x, w, b))
    (F.layer_norm(xt, (7,), wt, bt) * g).sum().backward()
    names = ("gradient of x", "gradient of weight", "gradient of bias")
    return {**dict(zip(names, _grads(x, w, b))), **{f"torch {n}": t for n, t in zip(names, _grads(xt, wt, bt))}}


# The declared domain of layer_norm: any leading dims (none: a single vector), a row of one feature and a wide
# one (1024), weight and bias each given or not, eps from tiny to large (0.5: where it goes shows), inputs
# whose variance is below eps, x in float32, float64 or bfloat16 (weight and bias in x's dtype), any layout of
# x and of weight; the arguments by keyword or in the signature's order.
LN_DOMAIN = Domain(
    args=(Arg("leading dims", ("2, 3", "none", "2, 2, 3")), Arg("D", (8, 1, 1024)),
          Arg("weight", ("given", None)), Arg("bias", ("given", None)), Arg("eps", (1e-5, 1e-12, 0.5)),
          Arg("scale of x", (2.0, 1e-3)), PASSED),
    dtypes=(("x", _XDTYPES),), layouts=(("x", _LAYOUTS), ("weight", ("contiguous", "strided"))), examples=5)


@CHECKS.domain("layer_norm", LN_DOMAIN, _same_at_dtype("output"))
def layer_norm_domain(ctx, ex):
    dtype, D = getattr(torch, ex["dtype of x"]), ex["D"]
    # the mean off 0 by half the spread (a float32 mean of 1 under a spread of 1e-3 would cost honest code its
    # digits: x − mean cancels)
    x = ctx.randn(*_dims(ex["leading dims"]), D, scale=ex["scale of x"]) + 0.5 * ex["scale of x"]
    x = relaid(x.to(dtype), ex["layout of x"])
    w = _laid(ctx.randn(D).to(dtype), ex["layout of weight"]) if ex["weight"] else None
    b = ctx.randn(D).to(dtype) if ex["bias"] else None
    args, kwargs = arguments(("weight", "bias", "eps"), {"weight": w, "bias": b, "eps": ex["eps"]}, {}, ex["passed"])
    return {"output": ctx.call(ctx.target, x, *args, **kwargs)}


# ----------------------------------------------------------------------------------------------
# class LayerNorm(nn.Module): __init__(normalized_shape, eps=1e-5, elementwise_affine=True, bias=True)


def _keys(module) -> list[str]:
    return sorted(module.state_dict().keys())


def _init(s, r, ctx):
    if s.get("state dict keys") != r["state dict keys"]:
        return (f"the state dict has keys {s.get('state dict keys')}, nn.LayerNorm(10) has {r['state dict keys']}: "
                f"make `weight` and `bias` nn.Parameter attributes with exactly those names")
    for name, value in (("weight", 1.0), ("bias", 0.0)):
        t = s.get(name)
        if not isinstance(t, torch.Tensor) or t.shape != r[name].shape:
            return close(t, r[name], name)
        if not torch.all(t == value):
            extra = (" A gain of 0 sets every output to the bias and stops every gradient to the input."
                     if name == "weight" else "")
            return (f"`{name}` should start at {value:g} everywhere, but its values range from "
                    f"{t.min().item():.4g} to {t.max().item():.4g}.{extra}")
    return against_torch("output at init")(s, r, ctx)


@CHECKS.probe("LayerNorm", "weight ones and bias zeros at init, named as in nn.LayerNorm", _init, CPU,
              rule="`nn.LayerNorm(D)` holds γ as `weight` and β as `bias`, initialised to **ones** and **zeros**")
def LayerNorm_init(ctx):
    ctx.manual_seed()
    m = ctx.call(ctx.target, 10)
    x = ctx.randn(3, 4, 10, scale=2.0)  # (B, T, D)
    return {"state dict keys": _keys(m), "weight": getattr(m, "weight", None), "bias": getattr(m, "bias", None),
            "output at init": ctx.call(m, x), "torch output at init": nn.LayerNorm(10)(x)}


def _torch_layer_norm(ctx, d, **kw):
    """nn.LayerNorm(d, **kw) with random (seeded) parameters, on the check's device and dtype."""
    ref = nn.LayerNorm(d, **kw).to(ctx.device, ctx.dtype)
    with torch.no_grad():
        for p in ref.parameters():
            p.copy_(ctx.randn(*p.shape))
    return ref


@CHECKS.probe("LayerNorm", "loads nn.LayerNorm's state dict and matches its output", against_torch(), CPU_AND_GPU,
              rule="`LayerNorm(D).load_state_dict(nn.LayerNorm(D).state_dict())` must work, for every "
                   "combination of options, and give the same outputs")
def LayerNorm_load(ctx):
    ref = _torch_layer_norm(ctx, 12)
    ctx.manual_seed()
    m = ctx.call(ctx.target, 12)
    m.load_state_dict(ref.state_dict())
    m = m.to(ctx.device, ctx.dtype)
    x = ctx.randn(2, 5, 12, scale=2.0)  # (B, T, D)
    return {"output": ctx.call(m, x), "torch output": ref(x)}


def _variants(s, r, ctx):
    for label in ("bias=False", "elementwise_affine=False"):
        if s.get(f"state dict keys ({label})") != r[f"state dict keys ({label})"]:
            return (f"LayerNorm(9, {label}) has state dict keys {s.get(f'state dict keys ({label})')}, "
                    f"nn.LayerNorm(9, {label}) has {r[f'state dict keys ({label})']}: a part that is switched off "
                    f"is not a parameter (set the attribute to None)")
    return against_torch()(s, r, ctx)


@CHECKS.probe("LayerNorm", "bias=False and elementwise_affine=False, as in nn.LayerNorm", _variants, CPU,
              rule="`elementwise_affine=False` gives no γ and no β at all, and `bias=False` keeps γ but drops β")
def LayerNorm_variants(ctx):
    x = ctx.randn(2, 5, 9, scale=2.0)  # (B, T, D)
    obs = {}
    for label, kw in (("bias=False", dict(bias=False)), ("elementwise_affine=False", dict(elementwise_affine=False))):
        ref = _torch_layer_norm(ctx, 9, **kw)
        ctx.manual_seed()
        m = ctx.call(ctx.target, 9, **kw)
        obs[f"state dict keys ({label})"] = _keys(m)
        m.load_state_dict(ref.state_dict())
        obs[f"output ({label})"] = ctx.call(m, x)
        obs[f"torch output ({label})"] = ref(x)
    return obs


@CHECKS.probe("LayerNorm", "uses its eps (eps=0.1)", against_torch(), CPU, hidden=True,
              rule="your `layer_norm` does the work, with the module's `eps`")
def LayerNorm_eps(ctx):
    ref = _torch_layer_norm(ctx, 8, eps=0.1)
    ctx.manual_seed()
    m = ctx.call(ctx.target, 8, eps=0.1)
    m.load_state_dict(ref.state_dict())
    x = ctx.randn(3, 5, 8, scale=0.3)
    return {"output with eps=0.1": ctx.call(m, x), "torch output with eps=0.1": ref(x)}


@CHECKS.probe("LayerNorm", "gradients reach weight, bias and the input", against_torch(scale=10), CPU, hidden=True,
              rule="Gradients must reach `weight`, `bias` and `x`")
def LayerNorm_grads(ctx):
    ref = _torch_layer_norm(ctx, 6)
    ctx.manual_seed()
    m = ctx.call(ctx.target, 6)
    m.load_state_dict(ref.state_dict())
    x = ctx.randn(2, 3, 6, requires_grad=True)
    g = ctx.randn(2, 3, 6)
    (ctx.call(m, x) * g).sum().backward()
    xt = x.detach().clone().requires_grad_()
    (ref(xt) * g).sum().backward()
    return {"gradient of x": x.grad, "torch gradient of x": xt.grad,
            "gradient of weight": getattr(m.weight, "grad", None) if hasattr(m, "weight") else None,
            "torch gradient of weight": ref.weight.grad,
            "gradient of bias": getattr(m.bias, "grad", None) if hasattr(m, "bias") else None,
            "torch gradient of bias": ref.bias.grad}


# The declared domain of LayerNorm: every __init__ argument (normalized_shape from 1 to 1024, eps, no bias, no
# affine at all) and forward's x with any leading dims, in float32, float64 or bfloat16 (the module cast to
# x's dtype), any layout; calls repeated with another batch and length, and a second instance alongside (no
# state kept from a call, none shared between instances).
LAYERNORM_DOMAIN = Domain(
    args=(Arg("normalized_shape", (8, 1, 1024)), Arg("eps", (1e-5, 0.5)), Arg("elementwise_affine", (True, False)),
          Arg("bias", (True, False)), Arg("leading dims", ("2, 3", "none", "1, 5, 2")),
          Arg("calls", ("one", "then another shape", "beside a second instance")), PASSED),
    dtypes=(("x", _XDTYPES),), layouts=(("x", _LAYOUTS),), examples=5)


@CHECKS.domain("LayerNorm", LAYERNORM_DOMAIN, _same_at_dtype("output", "output of the second call"))
def LayerNorm_domain(ctx, ex):
    dtype, D = getattr(torch, ex["dtype of x"]), ex["normalized_shape"]
    kw = dict(eps=ex["eps"], elementwise_affine=ex["elementwise_affine"], bias=ex["bias"])

    def build():
        ref = _torch_layer_norm(ctx, D, **kw)
        ctx.manual_seed()
        args, kwargs = arguments(("eps", "elementwise_affine", "bias"), kw, {}, ex["passed"])
        m = ctx.call(ctx.target, D, *args, **kwargs)
        m.load_state_dict(ref.state_dict())
        return m.to(dtype)

    m = build()
    x = relaid((ctx.randn(*_dims(ex["leading dims"]), D, scale=2.0) + 1.0).to(dtype), ex["layout of x"])
    second = ctx.randn(3, 1, D).to(dtype)  # another batch and length
    if ex["calls"] == "one":
        return {"output": ctx.call(m, x)}
    if ex["calls"] == "beside a second instance":
        other = build()  # its own parameters (the seeded draws go on): they must not leak into m
        ctx.call(other, second)
        return {"output": ctx.call(m, x), "output of the second call": ctx.call(other, second)}
    return {"output": ctx.call(m, x), "output of the second call": ctx.call(m, second)}


# ----------------------------------------------------------------------------------------------
# batch_norm(x, eps=1e-5): training-mode statistics over (N, C, *), per channel, no affine


def _bn_torch(x, eps=1e-5):
    return F.batch_norm(x, None, None, training=True, eps=eps)


@CHECKS.probe("batch_norm", "matches F.batch_norm(training=True) on (N, C), (N, C, L) and (N, C, H, W)",
              against_torch(), CPU_AND_GPU,
              rule="It must match `F.batch_norm(x, None, None, training=True, eps=eps)`")
def batch_norm_random(ctx):
    obs = {}
    for shape in ((6, 5), (4, 5, 7), (3, 5, 4, 6)):  # (N, C), (N, C, L), (N, C, H, W)
        x = ctx.randn(*shape, scale=2.0) + 1.0
        obs[f"output for shape {shape}"] = ctx.call(ctx.target, x)
        obs[f"torch output for shape {shape}"] = _bn_torch(x)
    return obs


def _batch_dependent(s, r, ctx):
    alone, inside = s.get("sample 0 alone"), s.get("sample 0 in the batch")
    if (isinstance(alone, torch.Tensor) and isinstance(inside, torch.Tensor) and alone.shape == inside.shape
            and close(alone, inside, "", tol=ctx.tol) is None):
        return ("sample 0 normalised alone gives the same output as inside the batch of 4: your statistics come "
                "from each sample on its own. BatchNorm's mean and variance for channel c are taken over every "
                "sample and every position, dims (0, 2, 3, ...).")
    return same("sample 0 alone", "sample 0 in the batch")(s, r, ctx)


@CHECKS.probe("batch_norm", "a sample's output depends on the rest of the batch (unlike LayerNorm)",
              _batch_dependent, CPU,
              rule="A sample's output depends on the other samples")
def batch_norm_alone(ctx):
    x = ctx.randn(4, 3, 5, 6) + ctx.randn(4, 1, 1, 1, scale=2.0)  # (N, C, H, W), samples shifted differently
    return {"sample 0 alone": ctx.call(ctx.target, x[:1]), "sample 0 in the batch": ctx.call(ctx.target, x)[:1]}


@CHECKS.probe("batch_norm", "eps = 0.1: where eps sits shows", against_torch(), CPU,
              rule="and normalise with them (eps inside the square root)")
def batch_norm_eps(ctx):
    x = ctx.randn(5, 3, 4, scale=0.3)  # (N, C, L), variance comparable to eps
    return {"output with eps=0.1": ctx.call(ctx.target, x, eps=0.1),
            "torch output with eps=0.1": _bn_torch(x, eps=0.1)}


@CHECKS.probe("batch_norm", "gradients match", against_torch(scale=10), CPU, hidden=True,
              rule="Gradients must flow back to `x`")
def batch_norm_grads(ctx):
    x = ctx.randn(4, 3, 5, requires_grad=True)
    g = ctx.randn(4, 3, 5)
    (ctx.call(ctx.target, x) * g).sum().backward()
    xt = x.detach().clone().requires_grad_()
    (_bn_torch(xt) * g).sum().backward()
    return {"gradient of x": x.grad, "torch gradient of x": xt.grad}


# The declared domain of batch_norm: (N, C), (N, C, L) and (N, C, H, W), a batch of one sample (statistics over
# its positions alone) and one channel, eps tiny to large, inputs whose variance is below eps, float32, float64
# or bfloat16, any layout. (The spec's batch_norm is training-mode statistics only: no running averages,
# momentum or eval mode to draw.)
BN_DOMAIN = Domain(
    args=(Arg("N, C, positions", ("4, 3, 5", "6, 3", "2, 3, 4, 5", "1, 3, 7", "4, 1, 5", "8, 16, 64")),
          Arg("eps", (1e-5, 0.5)), Arg("scale of x", (2.0, 1e-3)), PASSED),
    dtypes=(("x", _XDTYPES),), layouts=(("x", _LAYOUTS),), examples=4)


@CHECKS.domain("batch_norm", BN_DOMAIN, _same_at_dtype("output"))
def batch_norm_domain(ctx, ex):
    x = ctx.randn(*_dims(ex["N, C, positions"]), scale=ex["scale of x"]) + 0.5 * ex["scale of x"]
    x = relaid(x.to(getattr(torch, ex["dtype of x"])), ex["layout of x"])
    args, kwargs = arguments(("eps",), {"eps": ex["eps"]}, {}, ex["passed"])
    return {"output": ctx.call(ctx.target, x, *args, **kwargs)}


# ----------------------------------------------------------------------------------------------
# group_norm(x, num_groups, eps=1e-5): (N, C, *), statistics per sample and group of channels, no affine


@CHECKS.probe("group_norm", "matches F.group_norm for several num_groups", against_torch(), CPU_AND_GPU,
              rule="It must match `F.group_norm(x, num_groups, eps=eps)`")
def group_norm_random(ctx):
    obs = {}
    x = ctx.randn(2, 6, 4, 5, scale=2.0) + 1.0  # (N, C, H, W)
    for g in (1, 2, 3, 6):
        obs[f"output for shape (2, 6, 4, 5), num_groups={g}"] = ctx.call(ctx.target, x, num_groups=g)
        obs[f"torch output for shape (2, 6, 4, 5), num_groups={g}"] = F.group_norm(x, g)
    x3 = ctx.randn(3, 8, 7)  # (N, C, L)
    obs["output for shape (3, 8, 7), num_groups=4"] = ctx.call(ctx.target, x3, num_groups=4)
    obs["torch output for shape (3, 8, 7), num_groups=4"] = F.group_norm(x3, 4)
    return obs


@CHECKS.probe("group_norm", "a group is a run of neighbouring channels", against_torch(
    note=". Group g holds channels g·C/G to (g+1)·C/G − 1: view x as (N, G, C/G, ...), not (N, C/G, G, ...)."), CPU,
              rule="Split the C channels into `num_groups` runs of C/G **neighbouring** channels")
def group_norm_contiguous(ctx):
    # channel c is centred near 2c, so putting channels 0, 2, 4 together instead of 0, 1, 2 shows at once
    x = ctx.randn(2, 6, 10) + 2.0 * torch.arange(6.0).view(1, 6, 1)  # (N, C, L)
    return {"output with num_groups=2": ctx.call(ctx.target, x, num_groups=2),
            "torch output with num_groups=2": F.group_norm(x, 2)}


@CHECKS.probe("group_norm", "num_groups that does not divide C raises ValueError", raises_value_error(
    ("num_groups=4, C=6", "group_norm(x, num_groups=4) with C=6", "num_groups"),
    why="num_groups must divide the number of channels"), CPU,
              rule="Raise `ValueError` naming `num_groups` when it does not divide C")
def group_norm_bad(ctx):
    return {"num_groups=4, C=6": ctx.raised(ctx.target, ctx.randn(2, 6, 5), num_groups=4)}


@CHECKS.probe("group_norm", "eps = 0.1: where eps sits shows", against_torch(), CPU, hidden=True,
              rule="and normalise with them (eps inside the square root)")
def group_norm_eps(ctx):
    x = ctx.randn(2, 6, 3, scale=0.3)
    return {"output with eps=0.1": ctx.call(ctx.target, x, num_groups=3, eps=0.1),
            "torch output with eps=0.1": F.group_norm(x, 3, eps=0.1)}


@CHECKS.probe("group_norm", "gradients match", against_torch(scale=10), CPU, hidden=True,
              rule="Gradients must flow back to `x`")
def group_norm_grads(ctx):
    x = ctx.randn(2, 6, 5, requires_grad=True)
    g = ctx.randn(2, 6, 5)
    (ctx.call(ctx.target, x, num_groups=3) * g).sum().backward()
    xt = x.detach().clone().requires_grad_()
    (F.group_norm(xt, 3) * g).sum().backward()
    return {"gradient of x": x.grad, "torch gradient of x": xt.grad}


# The declared domain of group_norm: num_groups at its edges (1: one group of every channel, C: one channel a
# group) and between, (N, C), (N, C, L) and (N, C, H, W) inputs, a batch of one, eps tiny to large, inputs
# whose variance is below eps, float32, float64 or bfloat16, any layout.
GN_DOMAIN = Domain(
    args=(Arg("C, num_groups", ("6, 3", "6, 1", "6, 6", "8, 2", "32, 8")), Arg("positions", ("5", "none", "3, 4")),
          Arg("N", (2, 1)), Arg("eps", (1e-5, 0.5)), Arg("scale of x", (2.0, 1e-3)), PASSED),
    dtypes=(("x", _XDTYPES),), layouts=(("x", _LAYOUTS),), examples=4)


@CHECKS.domain("group_norm", GN_DOMAIN, _same_at_dtype("output"))
def group_norm_domain(ctx, ex):
    C, G = _dims(ex["C, num_groups"])
    # channel c centred near c (in units of the spread): a group taken from the wrong channels shows
    x = ctx.randn(ex["N"], C, *_dims(ex["positions"]), scale=ex["scale of x"])
    x = x + ex["scale of x"] * torch.arange(float(C)).view(1, C, *[1] * (x.dim() - 2))
    x = relaid(x.to(getattr(torch, ex["dtype of x"])), ex["layout of x"])
    args, kwargs = arguments(("num_groups", "eps"), {"num_groups": G, "eps": ex["eps"]}, {}, ex["passed"])
    return {"output": ctx.call(ctx.target, x, *args, **kwargs)}


# ----------------------------------------------------------------------------------------------
# Challenge: layer_norm_manual(x, weight, bias, eps=1e-5) through a torch.autograd.Function


@CHECKS.probe("layer_norm_manual", "forward matches F.layer_norm (2-D, 3-D and 4-D inputs)", against_torch(),
              CPU_AND_GPU,
              rule="`forward`: the same output as `layer_norm(x, weight, bias, eps)`")
def manual_forward(ctx):
    obs = {}
    for shape in ((5, 9), (2, 4, 9), (2, 3, 4, 9)):
        x = ctx.randn(*shape, scale=2.0) + 1.0
        w, b = ctx.randn(9), ctx.randn(9)
        obs[f"output for shape {shape}"] = ctx.call(ctx.target, x, w, b)
        obs[f"torch output for shape {shape}"] = F.layer_norm(x, (9,), w, b)
    return obs


def _is_function(s, r, ctx):
    if not s.get("custom Function"):
        return (f"the output's grad_fn is {s.get('grad_fn')}, which autograd built from your forward's operations: "
                f"write a class that subclasses torch.autograd.Function with static forward and backward "
                f"methods, and return YourFunction.apply(x, weight, bias, eps)")
    return None


@CHECKS.probe("layer_norm_manual", "is a torch.autograd.Function with its own backward", _is_function, CPU,
              rule="Complete `LayerNormFunction` so that `layer_norm_manual` computes LayerNorm over the last "
                   "axis with your own backward")
def manual_is_function(ctx):
    x = ctx.randn(3, 4, requires_grad=True)
    w, b = ctx.randn(4, requires_grad=True), ctx.randn(4, requires_grad=True)
    out = ctx.call(ctx.target, x, w, b)
    fn = getattr(out, "grad_fn", None)
    return {"custom Function": isinstance(fn, torch.autograd.function.BackwardCFunction),
            "grad_fn": type(fn).__name__ if fn is not None else "None (no gradient at all)"}


def _gradcheck(s, r, ctx):
    if s.get("gradcheck") != "passed":
        return (f"torch.autograd.gradcheck failed in float64 (input 0 is x, 1 is weight, 2 is bias): "
                f"{s.get('gradcheck')}. Your backward disagrees with finite differences of your forward.")
    return None


@CHECKS.probe("layer_norm_manual", "passes torch.autograd.gradcheck in float64", _gradcheck, FLOAT64,
              rule="Checked with `torch.autograd.gradcheck` in float64")
def manual_gradcheck(ctx):
    from torch.autograd.gradcheck import GradcheckError

    x = ctx.randn(2, 3, 5, requires_grad=True)  # float64 in this config
    w, b = ctx.randn(5, requires_grad=True), ctx.randn(5, requires_grad=True)
    target = ctx.target
    try:
        ctx.call(torch.autograd.gradcheck, lambda x, w, b: target(x, w, b, eps=1e-5), (x, w, b))
    except GradcheckError as exc:
        return {"gradcheck": str(exc).strip().splitlines()[0].rstrip(",")}
    return {"gradcheck": "passed"}


@CHECKS.probe("layer_norm_manual", "gradients match autograd's", against_torch(scale=10), CPU,
              rule="`backward`: return `(grad_x, grad_weight, grad_bias, None)` from the formulas above")
def manual_grads(ctx):
    x = ctx.randn(3, 4, 7, scale=2.0, requires_grad=True)
    w, b = ctx.randn(7, requires_grad=True), ctx.randn(7, requires_grad=True)
    g = ctx.randn(3, 4, 7)
    ctx.call(lambda: (ctx.target(x, w, b) * g).sum().backward())
    xt, wt, bt = (t.detach().clone().requires_grad_() for t in (x, w, b))
    (F.layer_norm(xt, (7,), wt, bt) * g).sum().backward()
    names = ("gradient of x", "gradient of weight", "gradient of bias")
    return {**dict(zip(names, _grads(x, w, b))), **{f"torch {n}": t for n, t in zip(names, _grads(xt, wt, bt))}}


@CHECKS.probe("layer_norm_manual", "eps = 0.1 in forward and backward", against_torch(scale=10), CPU, hidden=True,
              rule="`eps` is any positive number (checked from 1e-5 to 0.5)")
def manual_eps(ctx):
    x = ctx.randn(4, 6, scale=0.3, requires_grad=True)
    w, b = ctx.randn(6, requires_grad=True), ctx.randn(6, requires_grad=True)
    g = ctx.randn(4, 6)
    out = ctx.call(ctx.target, x, w, b, eps=0.1)
    ctx.call(lambda: (out * g).sum().backward())
    xt, wt, bt = (t.detach().clone().requires_grad_() for t in (x, w, b))
    out_t = F.layer_norm(xt, (6,), wt, bt, eps=0.1)
    (out_t * g).sum().backward()
    return {"output with eps=0.1": out, "torch output with eps=0.1": out_t,
            "gradient of x with eps=0.1": x.grad, "torch gradient of x with eps=0.1": xt.grad}


# The declared domain of layer_norm_manual: forward and backward over any leading dims (none: one vector), a
# wide row (1024), eps tiny to large, float32 or float64, x, weight and bias laid out any way, and an upstream
# gradient that is not contiguous (as a transpose or a slice downstream hands back).
MANUAL_DOMAIN = Domain(
    args=(Arg("leading dims", ("3, 4", "none", "2, 2, 3")), Arg("D", (7, 1024)), Arg("eps", (1e-5, 0.5)),
          Arg("upstream gradient", ("contiguous", "transposed"))),
    dtypes=(("x", ("float32", "float64")),),
    layouts=(("x", _LAYOUTS), ("weight, bias", ("contiguous", "strided"))), examples=4)


@CHECKS.domain("layer_norm_manual", MANUAL_DOMAIN, _same_at_dtype(
    "output", "gradient of x", "gradient of weight", "gradient of bias", scale=10))
def manual_domain(ctx, ex):
    dtype, D = getattr(torch, ex["dtype of x"]), ex["D"]
    shape = (*_dims(ex["leading dims"]), D)
    x = relaid((ctx.randn(*shape, scale=2.0) + 1.0).to(dtype), ex["layout of x"]).requires_grad_()
    w = _laid(ctx.randn(D).to(dtype), ex["layout of weight, bias"]).requires_grad_()
    b = _laid(ctx.randn(D).to(dtype), ex["layout of weight, bias"]).requires_grad_()
    g = relaid(ctx.randn(*shape).to(dtype), ex["upstream gradient"])
    out = ctx.call(ctx.target, x, w, b, eps=ex["eps"])
    ctx.call(lambda: out.backward(g))
    return {"output": out, "gradient of x": x.grad, "gradient of weight": w.grad, "gradient of bias": b.grad}


# ----------------------------------------------------------------------------------------------
# Known mistakes, each written as exact edits of the solved notebook's cell that defines its exercise
# (`engine.mistake_source` applies them, so a rename in the solution flows through; every `old` must
# occur exactly once, which tests/test_engine.py checks). Each is run on the same probes as the
# reference; a student whose observations match one is told its message.

MISTAKES = (
    Mistake("layer_norm", "unbiased_variance", "the variance divides by D − 1 (torch's default `x.var()`); LayerNorm "
            "uses the population variance, dividing by D: `unbiased=False` or `correction=0`.",
            edits={"var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)": "var = x.var(dim=-1, keepdim=True)"},
            hint="Which variance does LayerNorm use: divided by the number of features, or by one less? Check "
                 "what your variance call does by default."),
    Mistake("layer_norm", "eps_outside_sqrt", "eps is added to the standard deviation; it belongs inside the square "
            "root: (x − mean) / √(var + eps).",
            edits={"torch.sqrt(var + eps)": "(torch.sqrt(var) + eps)"},
            hint="Where does eps go: inside the square root, or added after it? Try a row whose entries are "
                 "all nearly equal."),
    Mistake("layer_norm", "batch_dim", "the mean and variance are taken over the batch axis (dim 0); LayerNorm "
            "normalises each token over its own features, the last axis (dim=-1).",
            edits={"x.mean(dim=-1,": "x.mean(dim=0,",
                   "((x - mean) ** 2).mean(dim=-1,": "((x - mean) ** 2).mean(dim=0,"},
            hint="Over which axis are your mean and variance taken? LayerNorm gives each token statistics of "
                 "its own features."),
    Mistake("layer_norm", "all_dims", "the mean and variance are taken over the whole tensor; LayerNorm takes one "
            "mean and variance per row, over the last axis only (dim=-1, keepdim=True).",
            edits={"x.mean(dim=-1, keepdim=True)": "x.mean()",
                   "((x - mean) ** 2).mean(dim=-1, keepdim=True)": "((x - mean) ** 2).mean()"},
            hint="How many means does your code compute for a (B, T, D) input: one per row, or one for the "
                 "whole tensor?"),
    Mistake("LayerNorm", "zero_weight", "`weight` starts at 0, so every output is the bias and no gradient reaches "
            "the input: initialise the gain with torch.ones (and the bias with zeros).",
            edits={"nn.Parameter(torch.ones(normalized_shape))": "nn.Parameter(torch.zeros(normalized_shape))"},
            hint="Print your module's output and input gradient right after construction: what should the gain "
                 "start at so the layer passes its normalised input through?"),
    Mistake("LayerNorm", "plain_tensors", "`weight` and `bias` are plain tensors, so they are not parameters: they "
            "are not trained, not in the state dict, and not moved by .to(); wrap them in nn.Parameter.",
            edits={"nn.Parameter(torch.ones(normalized_shape))": "torch.ones(normalized_shape)",
                   "nn.Parameter(torch.zeros(normalized_shape))": "torch.zeros(normalized_shape)"},
            hint="List your module's parameters and its state dict's keys: are the gain and the bias in them?"),
    Mistake("batch_norm", "per_sample_stats", "the statistics are computed per sample (over C and the spatial dims); "
            "BatchNorm's are per channel, over the batch and spatial dims: dims (0, 2, 3, ...).",
            edits={"dims = (0, *range(2, x.dim()))": "dims = tuple(range(1, x.dim()))"},
            hint="For a (N, C, H, W) input, over which axes are BatchNorm's statistics taken? Normalise one "
                 "sample alone and compare it with the same sample inside the batch."),
    Mistake("batch_norm", "bn_unbiased_variance", "the variance divides by n − 1; BatchNorm normalises with the "
            "population variance (divide by n = N·H·W…): `unbiased=False` or `correction=0`.",
            edits={"var = ((x - mean) ** 2).mean(dim=dims, keepdim=True)": "var = x.var(dim=dims, keepdim=True)"},
            hint="Which variance does BatchNorm normalise with: divided by n, or by n − 1? Check your variance "
                 "call's default."),
    Mistake("group_norm", "strided_groups", "the groups take every G-th channel (x viewed as (N, C/G, G, ...)); a "
            "group is a run of C/G neighbouring channels: view x as (N, G, C/G, ...) or (N, G, -1).",
            edits={"x.reshape(N, num_groups, -1)": "x.reshape(N, C // num_groups, num_groups, -1)",
                   "xg.mean(dim=-1,": "xg.mean(dim=(1, 3),",
                   "((xg - mean) ** 2).mean(dim=-1,": "((xg - mean) ** 2).mean(dim=(1, 3),"},
            hint="Print which channels land in group 0 for C = 6 and 3 groups: neighbouring channels, or every "
                 "third one?"),
    Mistake("layer_norm_manual", "constant_stats", "the backward treats the mean and the standard deviation as "
            "constants (grad_x = g·weight/σ); both depend on x, which adds −mean(ĝ) − x̂·mean(ĝ·x̂) inside the "
            "bracket.",
            edits={"rstd * (g - g.mean(dim=-1, keepdim=True) - x_hat * (g * x_hat).mean(dim=-1, keepdim=True))":
                       "rstd * g"},
            hint="Both the mean and the standard deviation depend on x. Does your backward take their "
                 "dependence into account, or treat them as constants?"),
    Mistake("layer_norm_manual", "mean_term_only", "the backward subtracts mean(ĝ) for the mean but forgets the "
            "variance's term −x̂·mean(ĝ·x̂), with ĝ = grad_out·weight.",
            edits={" - x_hat * (g * x_hat).mean(dim=-1, keepdim=True))": ")"},
            hint="Compare your gradient with autograd's on a small input: the mean's term is there, but what "
                 "does the variance's dependence on x add?"),
)


# ----------------------------------------------------------------------------------------------
# `course bench lesson04`: your layer_norm against F.layer_norm


def benchmark(ns: dict, device: str) -> dict:
    fn = ns["layer_norm"]
    rows = []
    for shape in ((4096, 768), (8192, 4096)):
        x = torch.randn(*shape, device=device)
        w, b = torch.randn(shape[-1], device=device), torch.randn(shape[-1], device=device)

        mine = median_ms(fn, x, w, b)
        theirs = median_ms(F.layer_norm, x, (shape[-1],), w, b)
        gbs = 2 * x.numel() * x.element_size() / (mine * 1e-3) / 1e9  # read x once, write y once
        rows.append([str(shape), round(mine, 3), round(theirs, 3), round(mine / theirs, 2), round(gbs, 1)])
    return {"title": "layer_norm: yours against F.layer_norm", "columns": ["shape", "yours (ms)", "torch (ms)",
            "ratio", "GB/s (yours)"], "rows": rows,
            "notes": ["a layer_norm written with separate torch ops reads and writes x several times; "
                      "torch's fused kernel does it once"]}


# The battery re-runs LayerNorm's state-dict check (its first check compares with a float32 nn.LayerNorm).
# batch_norm and group_norm take (N, C, *) inputs, whose axis -2 is channels or height, not a sequence.
_NOT_A_SEQUENCE = "its inputs are (N, C, *): axis -2 is the channels or the height, not a sequence"
CHECKS.add_battery(base={"LayerNorm": "loads nn.LayerNorm's state dict and matches its output"},
                   skip={"batch_norm": {"sequences of length 1": _NOT_A_SEQUENCE},
                         "group_norm": {"sequences of length 1": _NOT_A_SEQUENCE}})
