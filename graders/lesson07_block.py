"""Lesson 07 — the transformer block: `MLP` and `TransformerBlock`.

Reads like the lesson: helpers that copy one set of seeded weights into the student's modules and into
torch's own `nn.TransformerEncoderLayer`, then the MLP's probes and judges, then the block's, then the
known mistakes. Probes run in the sandboxed child (student code); judges run in the parent and compare
with what the *reference* child observed, torch's layer included.
"""

from __future__ import annotations

import zlib

import torch
import torch.nn as nn
import torch.nn.functional as F

from .engine.compare import close
from .engine import CPU, CPU_AND_GPU, Checks, Mistake, WrongResult, same
from .engine.checks import Arg, Domain
from .engine.probe import relaid
from .interface import PASSED, arguments, layout_first, state_layout

CHECKS = Checks("lesson07")
# What this lesson's checks import lazily (a tril on the meta device imports symbolic_shapes, `with
# torch.device("meta")` torch.utils._device; not torch._dynamo, which engine.probe.defer_dynamo spares every
# seat), imported once by the warm zygote (zygote.preload); tests/e2e/test_warm_imports.py names what is missing.
WARM_IMPORTS = ("torch.fx.experimental.symbolic_shapes", "torch.utils._device")

# torch's own encoder layer (and nn.MultiheadAttention under it) would make the block trivial.
# With a torch function mode active its fast path is off, so every route goes through the first name.
FORBIDDEN = {
    "TransformerBlock": (
        "torch.nn.functional.multi_head_attention_forward",
        "torch._transformer_encoder_layer_fwd",
        "torch._native_multi_head_attention",
    ),
}


# ----------------------------------------------------------------------------------------------
# Helpers: seeded weights, copied by name into the student's modules and into torch's layer


def tanh_gelu(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x, approximate="tanh")


def _tol(ctx):
    """float32: a different order of operations; float16/bfloat16: a whole block against float32."""
    return ctx.tol.scaled(2 if ctx.config.dtype == "float32" else 8)


def _linear(ctx, n_out: int, n_in: int, bias: bool) -> dict:
    w = {"weight": ctx.randn(n_out, n_in, scale=n_in ** -0.5, dtype=torch.float32)}
    if bias:
        w["bias"] = ctx.randn(n_out, scale=0.1, dtype=torch.float32)
    return w


def _norm(ctx, d: int, bias: bool) -> dict:
    w = {"weight": 1 + ctx.randn(d, scale=0.2, dtype=torch.float32)}  # not all ones, so ln1/ln2 swaps show
    if bias:
        w["bias"] = ctx.randn(d, scale=0.1, dtype=torch.float32)
    return w


def mlp_weights(ctx, d: int, hidden: int, bias: bool = True) -> dict:
    return {"fc1": _linear(ctx, hidden, d, bias), "fc2": _linear(ctx, d, hidden, bias)}


def block_weights(ctx, d: int, hidden: int, bias: bool = True) -> dict:
    """One block's weights in float32, drawn from the check's seed: the same in every child."""
    return {"ln1": _norm(ctx, d, bias), "q_proj": _linear(ctx, d, d, bias), "k_proj": _linear(ctx, d, d, bias),
            "v_proj": _linear(ctx, d, d, bias), "out_proj": _linear(ctx, d, d, bias), "ln2": _norm(ctx, d, bias),
            **mlp_weights(ctx, d, hidden, bias)}


class Unloadable(Exception):
    """The student's module does not have the parameter the test weights go into."""


def _put(module: nn.Module, path: str, values: dict, owner: str) -> None:
    """Copy values["weight"] (and values["bias"]) into `module.<path>`."""
    part = module
    for name in path.split("."):
        part = getattr(part, name, None)
        if part is None:
            raise Unloadable(f"{owner} has no `{path}`")
    for key in ("weight", "bias"):
        param, value = getattr(part, key, None), values.get(key)
        if value is None and isinstance(param, torch.Tensor):
            raise Unloadable(f"`{path}.{key}` exists, but bias=False asks for no biases")
        if value is None:
            continue
        if not isinstance(param, torch.Tensor):
            raise Unloadable(f"`{path}` has no `{key}` parameter")
        if tuple(param.shape) != tuple(value.shape):
            raise Unloadable(f"`{path}.{key}` has shape {tuple(param.shape)}, expected {tuple(value.shape)}")
        with torch.no_grad():
            param.copy_(value)


def load_mlp(mlp: nn.Module, W: dict) -> None:
    _put(mlp, "fc1", W["fc1"], "your MLP")
    _put(mlp, "fc2", W["fc2"], "your MLP")


def block_layout(block: nn.Module) -> list[str]:
    """The block's state_dict layout (interface.state_layout), a fused `attn.qkv_proj` read as the three
    projections it holds (rows q, k, v): either attention of lesson 03 is the block's `attn`."""
    out = []
    for entry in state_layout(block):
        name, shape = entry.split(" ", 1)
        if name.startswith("attn.qkv_proj."):
            dims = [int(n) for n in shape.strip("()").split(",") if n.strip()]
            one = str((dims[0] // 3, *dims[1:]))
            out += [f"attn.{p}.{name.rsplit('.', 1)[1]} {one}" for p in ("q_proj", "k_proj", "v_proj")]
        else:
            out.append(entry)
    return out


def load_block(block: nn.Module, W: dict) -> None:
    """Copy W into the student's block, whichever attention layout it chose: lesson03's
    MultiHeadAttention (q_proj, k_proj, v_proj, out_proj) or the fused one (qkv_proj, out_proj)."""
    owner = "your TransformerBlock"
    _put(block, "ln1", W["ln1"], owner)
    attn = getattr(block, "attn", None)
    if attn is None:
        raise Unloadable(f"{owner} has no `attn`")
    if all(hasattr(attn, n) for n in ("q_proj", "k_proj", "v_proj")):
        for name in ("q_proj", "k_proj", "v_proj"):
            _put(block, f"attn.{name}", W[name], owner)
    elif hasattr(attn, "qkv_proj"):  # rows ordered q, k, v
        fused = {key: torch.cat([W[n][key] for n in ("q_proj", "k_proj", "v_proj")]) for key in W["q_proj"]}
        _put(block, "attn.qkv_proj", fused, owner)
    else:
        raise Unloadable(f"{owner}'s `attn` has neither q_proj/k_proj/v_proj nor a fused qkv_proj")
    _put(block, "attn.out_proj", W["out_proj"], owner)
    _put(block, "ln2", W["ln2"], owner)
    _put(block, "mlp.fc1", W["fc1"], owner)
    _put(block, "mlp.fc2", W["fc2"], owner)


def torch_layer(W: dict, d: int, num_heads: int, hidden: int, norm_first: bool, bias: bool = True,
                device="cpu") -> nn.TransformerEncoderLayer:
    """torch's encoder layer in float32 carrying the same weights (the reference side of every check)."""
    layer = nn.TransformerEncoderLayer(d, num_heads, dim_feedforward=hidden, dropout=0.0, activation=tanh_gelu,
                                       batch_first=True, norm_first=norm_first, bias=bias, device=device)
    names = {"norm1": "ln1", "self_attn.out_proj": "out_proj", "norm2": "ln2", "linear1": "fc1", "linear2": "fc2"}
    state = {f"self_attn.in_proj_{key}": torch.cat([W[n][key] for n in ("q_proj", "k_proj", "v_proj")])
             for key in W["q_proj"]}
    state.update({f"{theirs}.{key}": value for theirs, ours in names.items() for key, value in W[ours].items()})
    layer.load_state_dict(state, strict=True)
    return layer.eval()


def _build(ctx, *args, **kwargs) -> nn.Module:
    ctx.manual_seed()
    module = ctx.target(*args, **kwargs)
    if not isinstance(module, nn.Module):
        raise WrongResult(f"`{ctx.exercise}(...)` should build an nn.Module, got a {type(module).__name__}")
    return module


def _ready(ctx, module: nn.Module) -> nn.Module:
    return module.to(device=ctx.device, dtype=ctx.dtype).eval()


def _unloadable(s: dict) -> str | None:
    if "cannot load weights" in s:
        return (f"the test weights could not be copied into your module: {s['cannot load weights']}. "
                f"Keep the names the lesson gives (ln1, attn, ln2, mlp; fc1, fc2), sized as asked")
    return None


def _dtype_kept(s: dict, r: dict, key: str) -> str | None:
    out, ref = s.get(key), r[key]
    if isinstance(out, torch.Tensor) and out.dtype != ref.dtype:
        return (f"{key} has dtype {str(out.dtype).removeprefix('torch.')}, expected "
                f"{str(ref.dtype).removeprefix('torch.')} (keep the input's dtype)")
    return None


def like_float32(*pairs: tuple[str, str], what: str = "the float32 reference") -> callable:
    """A judge: each observation `key` matches the reference child's float32 observation `ref_key`
    (torch's layer, or the MLP written out in float32) within the config's tolerance."""
    def judge(s, r, ctx):
        msg = _unloadable(s)
        if msg:
            return msg
        for key, ref_key in pairs:
            msg = _dtype_kept(s, r, key) or close(s.get(key), r[ref_key], f"{key} against {what}",
                                                  tol=_tol(ctx), check_dtype=False)
            if msg:
                return msg
        return None
    return judge


# ----------------------------------------------------------------------------------------------
# MLP(d_model, expansion=4, dropout=0.0, bias=True): fc1 -> tanh-GELU -> fc2 -> dropout


def _mlp_float32(x: torch.Tensor, W: dict) -> torch.Tensor:
    x = x.float()
    h = tanh_gelu(F.linear(x, W["fc1"]["weight"], W["fc1"].get("bias")))
    return F.linear(h, W["fc2"]["weight"], W["fc2"].get("bias"))


@CHECKS.probe("MLP", "fc1 → tanh-GELU → fc2, as GPT-2", like_float32(("output", "float32 output")),
              CPU_AND_GPU, rule="between them GELU with the tanh approximation")
def mlp_values(ctx):
    d = 24
    W = mlp_weights(ctx, d, 4 * d)
    mlp = _build(ctx, d)
    try:
        load_mlp(mlp, W)
    except Unloadable as exc:
        return {"cannot load weights": str(exc)}
    x = ctx.randn(2, 5, d, scale=2.0)  # (B, T, D): pre-activations reach |x| ≈ 3, where the two GELUs differ most
    return {"output": ctx.call(_ready(ctx, mlp), x), "float32 output": _mlp_float32(x, W)}


def _shape(module, path: str):
    for name in path.split("."):
        module = getattr(module, name, None)
    return list(module.shape) if isinstance(module, torch.Tensor) else "missing"


def _width(s, r, ctx):
    for key, ref in r.items():
        if isinstance(ref, torch.Tensor):
            msg = close(s.get(key), ref, key, tol=_tol(ctx))
        elif s.get(key) != ref:
            msg = f"{key}: expected {ref}, got {s.get(key)}"
        else:
            msg = None
        if msg:
            if "shape" in key:
                msg += " (the hidden width is expansion · d_model: fc1 maps D → expansion·D, fc2 maps it back)"
            elif "biases" in key:
                msg += " (with bias=False neither fc1 nor fc2 has a bias: pass bias=bias to nn.Linear)"
            return msg
    return None


@CHECKS.probe("MLP", "hidden width is expansion · d_model; bias=False has no biases", _width, CPU,
              rule="`fc1 = nn.Linear(d_model, expansion * d_model, bias=bias)` and "
                   "`fc2 = nn.Linear(expansion * d_model, d_model, bias=bias)`")
def mlp_width(ctx):
    obs = {}
    for d, expansion, bias in ((20, 3, False), (20, 2, True)):
        mlp = _build(ctx, d, expansion=expansion, bias=bias)
        tag = f"(d_model={d}, expansion={expansion}, bias={bias})"
        obs[f"fc1.weight shape {tag}"] = _shape(mlp, "fc1.weight")
        obs[f"fc2.weight shape {tag}"] = _shape(mlp, "fc2.weight")
        obs[f"has biases {tag}"] = any(n.endswith("bias") for n, _ in mlp.named_parameters())
        obs[f"number of parameters {tag}"] = sum(p.numel() for p in mlp.parameters())
    return obs


_EVAL_HINT = (". Two eval-mode calls gave different outputs, so dropout is active in eval mode: use nn.Dropout "
              "modules (they follow .eval()) or pass training=self.training to F.dropout")


def _equal(a, b) -> bool:
    return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a, b)


def _dropout_mlp(s, r, ctx):
    msg = _unloadable(s) or close(s.get("output in eval mode"), r["output in eval mode"], "output in eval mode",
                                  tol=_tol(ctx))
    if msg:
        return msg + _EVAL_HINT if s.get("eval mode is repeatable") is False else msg
    train, ev, p = s.get("output in training mode"), s["output in eval mode"], r["p"]
    if not isinstance(train, torch.Tensor) or train.shape != ev.shape:
        return close(train, r["output in training mode"], "output in training mode")
    dropped = train == 0
    kept_ok = torch.allclose(train[~dropped], ev[~dropped] / (1 - p), rtol=1e-4, atol=1e-5)
    frac = dropped.double().mean().item()
    if not kept_ok or not (p - 0.2 < frac < p + 0.2):
        return (f"with dropout={p} in training mode, each output should be either 0 or the eval-mode output "
                f"divided by 1 − p (dropout on fc2's output, nothing else random); {frac:.0%} of outputs were 0"
                + ("" if kept_ok else " and the others do not match eval-output / (1 − p)"))
    return None


@CHECKS.probe("MLP", "dropout after fc2, active in training mode only", _dropout_mlp, CPU,
              rule="dropout after `fc2` and nowhere else in the MLP, active in training mode only")
def mlp_dropout(ctx):
    d, p = 24, 0.4
    W = mlp_weights(ctx, d, 2 * d)
    mlp = _build(ctx, d, expansion=2, dropout=p)
    try:
        load_mlp(mlp, W)
    except Unloadable as exc:
        return {"cannot load weights": str(exc)}
    x = ctx.randn(2, 5, d)
    mlp = _ready(ctx, mlp)
    ctx.manual_seed()
    out_eval = ctx.call(mlp, x)
    again = ctx.call(mlp, x)  # the random generator has moved on: only dropout could change the output
    mlp.train()
    ctx.manual_seed()
    return {"output in eval mode": out_eval, "eval mode is repeatable": _equal(out_eval, again),
            "output in training mode": ctx.call(mlp, x), "p": p}


@CHECKS.probe("MLP", "gradients match", same(scale=10), CPU, hidden=True,
              rule="gradients must flow back to `x` and to the weights of `fc1` and `fc2`")
def mlp_grads(ctx):
    d = 12
    W = mlp_weights(ctx, d, 4 * d)
    mlp = _build(ctx, d)
    try:
        load_mlp(mlp, W)
    except Unloadable as exc:
        return {"cannot load weights": str(exc)}
    x = ctx.randn(3, 4, d, requires_grad=True)
    out = ctx.call(_ready(ctx, mlp), x)
    (out * ctx.randn(3, 4, d)).sum().backward()
    return {"gradient of x": x.grad, "gradient of fc1.weight": mlp.fc1.weight.grad,
            "gradient of fc2.weight": mlp.fc2.weight.grad}


def _own_draws(ctx, ex: dict) -> None:
    """Draw this example's inputs from a seed of its own (the check's seed and the example), so that an example
    where the student's code stopped half-way (an exception) does not shift the draws of the examples after it."""
    ctx.gen.manual_seed(ctx.seed + zlib.crc32(repr(sorted(ex.items())).encode()))


def _observed_like(s, r, ctx, hints: dict | None = None) -> str | None:
    """A drawn example's judge: every observation the reference made, tensors within `_tol` (dtype kept),
    the rest equal. `hints`: {key: words added when that observation differs}."""
    msg = _unloadable(s)
    if msg:
        return msg
    for key, ref in r.items():
        if key in ("example", "choice"):
            continue
        got = s.get(key)
        if isinstance(ref, torch.Tensor):
            msg = close(got, ref, key, tol=_tol(ctx))
        elif got != ref:
            msg = f"{key}: expected {ref!r}, got {got!r}"
        if msg:
            return msg + (hints or {}).get(key, "")
    return None


def _dropout_obs(out_train: torch.Tensor, out_eval: torch.Tensor, p: float) -> dict:
    """What dropout=p in training mode must do to a module whose only randomness is dropout on its output:
    every output 0 or eval / (1 − p); about p of them 0 (told only where there are enough to count)."""
    if not isinstance(out_train, torch.Tensor) or not isinstance(out_eval, torch.Tensor) \
            or out_train.shape != out_eval.shape:
        return {"output in training mode": out_train}
    dropped = out_train == 0
    kept_ok = torch.allclose(out_train[~dropped], out_eval[~dropped] / (1 - p), rtol=1e-4, atol=1e-5)
    frac = dropped.double().mean().item()
    return {"training mode: each output 0 or eval-output / (1 − p)": bool(kept_ok),
            "training mode: about p of the outputs are 0": abs(frac - p) < 0.15 if dropped.numel() >= 200 else "n/a"}


_MLP_HINTS = {
    "output": " (the MLP maps (..., d_model) to (..., d_model): any number of leading dims, each position on its "
              "own; take sizes from x itself)",
    "training mode: each output 0 or eval-output / (1 − p)": " (dropout after fc2 only, as nn.Dropout does it)",
    "training mode: about p of the outputs are 0": " (nn.Dropout(dropout) drops a fraction p in training mode)",
    "output in training mode": " (dropout=0.0 in training mode drops nothing: the output equals eval mode's)",
}

# The declared domain of MLP: every __init__ argument, with its edges (a width of 1, expansion 1, no bias);
# dropout in eval and training mode; x of any rank (the MLP acts on the last dim), one long row of positions;
# float32 and float64 and any layout of x; a second call on another shape and a second MLP built between;
# inputs 100x larger (an activation must not overflow where the reference is stable).
MLP_DOMAIN = Domain(
    args=(Arg("d_model", (24, 1, 64)), Arg("expansion", (4, 1, 3)), Arg("bias", (True, False)),
          Arg("dropout, mode", ("0.0, eval", "0.3, eval", "0.0, train", "0.3, train")),
          Arg("shape of x", ("(B, T, D)", "(D,)", "(T, D)", "(B, H, T, D)")), Arg("T", (5, 1, 300)),
          Arg("calls", ("one", "after a call on another shape", "after another MLP was built")),
          Arg("scale of x", (1.0, 100.0)), PASSED),
    dtypes=(("x", ("float32", "float64")),), layouts=(("x", ("contiguous", "transposed", "strided")),), examples=5)


@CHECKS.domain("MLP", MLP_DOMAIN, layout_first(lambda s, r, ctx: _observed_like(s, r, ctx, _MLP_HINTS), who="MLP"))
def mlp_domain(ctx, ex):
    _own_draws(ctx, ex)
    d, expansion, T = ex["d_model"], ex["expansion"], ex["T"]
    p, mode = ex["dropout, mode"].split(", ")
    p, dtype = float(p), getattr(torch, ex["dtype of x"])
    W = mlp_weights(ctx, d, expansion * d, ex["bias"])
    args, kwargs = arguments(("expansion", "dropout", "bias"), {"expansion": expansion, "dropout": p, "bias": ex["bias"]},
                             {}, ex["passed"])
    mlp = _build(ctx, d, *args, **kwargs)
    layout = {"state_dict": state_layout(mlp)}
    try:
        load_mlp(mlp, W)
    except Unloadable as exc:
        return {"cannot load weights": str(exc)}
    mlp = mlp.to(dtype=dtype).eval()
    shape = {"(B, T, D)": (2, T, d), "(D,)": (d,), "(T, D)": (T, d), "(B, H, T, D)": (2, 3, T, d)}[ex["shape of x"]]
    # scale 100: pre-activations in the hundreds, where a GELU written with exp (tanh as (e^2z − 1)/(e^2z + 1))
    # overflows to inf/inf = NaN and F.gelu stays exact
    x = relaid(ctx.randn(*shape, dtype=dtype, scale=ex["scale of x"]), ex["layout of x"])
    if ex["calls"] == "after a call on another shape":
        ctx.call(mlp, ctx.randn(3, 2, d, dtype=dtype))
    elif ex["calls"] == "after another MLP was built":
        _build(ctx, d + 3, expansion=expansion + 1, dropout=0.5, bias=not ex["bias"])
    out_eval = ctx.call(mlp, x)
    if mode == "eval":
        return {"output": out_eval, **layout}
    mlp.train()
    ctx.manual_seed()
    out_train = ctx.call(mlp, x)
    if p == 0.0:
        return {"output": out_eval, "output in training mode": out_train, **layout}
    return {"output": out_eval, **_dropout_obs(out_train, out_eval, p), **layout}


# ----------------------------------------------------------------------------------------------
# TransformerBlock(d_model, num_heads, expansion=4, dropout=0.0, norm_first=True, causal=False, bias=True)
# Pre-LN: x + attn(ln1(x)), then x + mlp(ln2(x)).  Post-LN: ln1(x + attn(x)), then ln2(x + mlp(x)).


def _block_vs_torch(ctx, B: int, T: int, d: int, heads: int, expansion: int = 4, norm_first: bool = True,
                    causal: bool = False, bias: bool = True, lengths: list[int] | None = None) -> dict:
    """The student's block and torch's layer, same weights, same input; optional causal and padding masks."""
    hidden = expansion * d
    W = block_weights(ctx, d, hidden, bias)
    block = _build(ctx, d, heads, expansion=expansion, norm_first=norm_first, causal=causal, bias=bias)
    x = ctx.randn(B, T, d)  # (B, T, D)
    allowed = torch.ones(T, T, dtype=torch.bool, device=ctx.device)  # (T, T)
    if causal:
        allowed = allowed.tril()
    padding = None
    if lengths is not None:
        valid = torch.arange(T, device=ctx.device) < torch.tensor(lengths, device=ctx.device)[:, None]  # (B, T)
        padding = valid.view(B, 1, 1, T)  # (B, 1, 1, T), True = may attend
        allowed = (allowed & padding).expand(B, heads, T, T).reshape(B * heads, T, T)  # torch's 3-D layout
    # torch's bool masks mean the opposite (True = blocked); its key_padding_mask path imports torch._dynamo
    src_mask = ~allowed if (causal or padding is not None) else None
    obs = {"number of parameters": sum(p.numel() for p in block.parameters())}
    layer = torch_layer(W, d, heads, hidden, norm_first, bias, ctx.device)
    obs["torch number of parameters"] = sum(p.numel() for p in layer.parameters())
    with torch.no_grad():
        obs["torch output"] = layer(x.float(), src_mask=src_mask)
    try:
        load_block(block, W)
    except Unloadable as exc:
        try:  # run it anyway, so that a forbidden API inside is still named
            ctx.call(_ready(ctx, block), x)
        except Exception:
            pass
        return {**obs, "cannot load weights": str(exc)}
    block = _ready(ctx, block)
    obs["output"] = ctx.call(block, x) if padding is None else ctx.call(block, x, mask=padding)
    return obs


def like_torch(s, r, ctx):
    """Every "torch output ..." the reference child observed against the student's "output ..."."""
    pairs = [(key.removeprefix("torch "), key) for key in r if key.startswith("torch output")]
    msg = like_float32(*pairs, what="nn.TransformerEncoderLayer with the same weights")(s, r, ctx)
    if msg:
        return msg
    mine, theirs = s.get("number of parameters"), r["torch number of parameters"]
    if mine != theirs:
        return (f"your block has {mine} parameters, nn.TransformerEncoderLayer of the same size {theirs}: "
                f"is a part registered twice, or one left out?")
    return None


@CHECKS.probe("TransformerBlock", "pre-LN (norm_first=True) equals nn.TransformerEncoderLayer(norm_first=True)",
              like_torch, CPU_AND_GPU,
              rule="`norm_first=True`: pre-LN; `norm_first=False`: post-LN — the formulas of section 3")
def block_pre_ln(ctx):
    return _block_vs_torch(ctx, B=2, T=7, d=24, heads=4, norm_first=True)


@CHECKS.probe("TransformerBlock", "post-LN (norm_first=False) equals nn.TransformerEncoderLayer(norm_first=False)",
              like_torch, CPU_AND_GPU,
              rule="`norm_first=True`: pre-LN; `norm_first=False`: post-LN — the formulas of section 3")
def block_post_ln(ctx):
    return _block_vs_torch(ctx, B=2, T=7, d=24, heads=4, norm_first=False)


@CHECKS.probe("TransformerBlock", "expansion=3 and bias=False", like_torch, CPU,
              rule="`LayerNorm(d_model, bias=bias)` twice, "
                   "`MultiHeadAttention(d_model, num_heads, dropout=dropout, bias=bias)` (it returns a pair: keep "
                   "the output), and your `MLP(d_model, expansion, dropout, bias)`")
def block_expansion(ctx):
    return _block_vs_torch(ctx, B=3, T=5, d=20, heads=5, expansion=3, bias=False)


@CHECKS.probe("TransformerBlock", "causal=True equals nn.TransformerEncoderLayer with a causal mask", like_torch,
              CPU, rule="With `causal=True` the block also builds the lower-triangular `(T, T)` mask itself")
def block_causal(ctx):
    return _block_vs_torch(ctx, B=2, T=9, d=16, heads=2, norm_first=False, causal=True)


def _future(s, r, ctx):
    msg = _unloadable(s)
    if msg:
        return msg
    before, after = s.get("outputs at positions ≤ 4"), s.get("the same outputs after changing x[:, 5:]")
    msg = close(before, r["outputs at positions ≤ 4"], "outputs at positions ≤ 4", tol=_tol(ctx))
    if isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor) and before.shape == after.shape:
        change = (after - before).abs().max().item()
        if change > 1e-5:
            return (f"with causal=True, changing the tokens after position 4 changed the outputs at positions ≤ 4 "
                    f"by up to {change:.3g}: query i may attend only to keys j ≤ i (combine a lower-triangular "
                    f"mask with any mask passed in)")
    return msg


@CHECKS.probe("TransformerBlock", "causal: future tokens do not change past outputs", _future, CPU,
              rule="so position i never reads positions after i")
def block_future(ctx):
    d, t = 16, 4
    W = block_weights(ctx, d, 4 * d)
    block = _build(ctx, d, 2, causal=True)
    try:
        load_block(block, W)
    except Unloadable as exc:
        return {"cannot load weights": str(exc)}
    block = _ready(ctx, block)
    x = ctx.randn(3, 9, d)  # (B, T, D)
    x2 = x.clone()
    x2[:, t + 1:] = ctx.randn(3, 9 - t - 1, d)
    out1, out2 = ctx.call(block, x), ctx.call(block, x2)
    for out in (out1, out2):
        if not isinstance(out, torch.Tensor) or out.shape != x.shape:
            raise WrongResult(f"the block should return a Tensor shaped like its input {tuple(x.shape)}")
    return {"outputs at positions ≤ 4": out1[:, :t + 1], "the same outputs after changing x[:, 5:]": out2[:, :t + 1]}


@CHECKS.probe("TransformerBlock", "padding mask (True = may attend), alone and with causal=True", like_torch, CPU,
              hidden=True,
              rule="passes `mask` to attention unchanged: boolean, broadcastable to `(B, H, T, T)`, True = may attend")
def block_padding(ctx):
    obs = {}
    for tag, norm_first, causal in (("padding", True, False), ("padding and causal", False, True)):
        o = _block_vs_torch(ctx, B=3, T=8, d=20, heads=4, norm_first=norm_first, causal=causal, lengths=[8, 5, 3])
        if "cannot load weights" in o:
            return o
        obs.update({f"output ({tag})": o["output"], f"torch output ({tag})": o["torch output"],
                    "number of parameters": o["number of parameters"],
                    "torch number of parameters": o["torch number of parameters"]})
    return obs


def _dropout_block(s, r, ctx):
    msg = like_float32(("output in eval mode", "torch output"),
                       what="nn.TransformerEncoderLayer (dropout does nothing in eval mode)")(s, r, ctx)
    if msg:
        return msg + _EVAL_HINT if s.get("eval mode is repeatable") is False else msg
    if not s.get("training mode changes the output"):
        return (f"with dropout={r['p']} in training mode the block's output equals its eval-mode output: apply "
                f"dropout to the attention branch's output and inside the MLP (after fc2)")
    return None


@CHECKS.probe("TransformerBlock", "dropout: active in training mode, off in eval mode", _dropout_block, CPU,
              rule="All of it must switch off in evaluation")
def block_dropout(ctx):
    d, p = 16, 0.25
    W = block_weights(ctx, d, 4 * d)
    block = _build(ctx, d, 4, dropout=p)
    x = ctx.randn(2, 6, d)
    with torch.no_grad():
        ref = torch_layer(W, d, 4, 4 * d, True)(x)
    try:
        load_block(block, W)
    except Unloadable as exc:
        return {"cannot load weights": str(exc), "torch output": ref, "p": p}
    block = _ready(ctx, block)
    ctx.manual_seed()
    out_eval = ctx.call(block, x)
    again = ctx.call(block, x)  # the random generator has moved on: only dropout could change the output
    block.train()
    ctx.manual_seed()
    out_train = ctx.call(block, x)
    changed = (isinstance(out_eval, torch.Tensor) and isinstance(out_train, torch.Tensor)
               and out_eval.shape == out_train.shape and bool(((out_train - out_eval).abs() > 1e-4).any()))
    return {"output in eval mode": out_eval, "eval mode is repeatable": _equal(out_eval, again), "torch output": ref,
            "training mode changes the output": changed, "p": p}


def _branch_dropout(s, r, ctx):
    msg = _unloadable(s)
    if msg:
        return msg
    key = "rows of the attention branch's output dropped element by element"
    share, ref = s.get(key), r[key]
    if not isinstance(share, (int, float)):
        return f"{key}: the block's output could not be compared with its input ({share!r})"
    if ref >= 0.9 and share < 0.5:
        return (f"training mode scaled whole rows of the attention branch (dropout on the weights only; {share:.0%} "
                f"of rows had single elements dropped, the reference {ref:.0%}). Also drop the attention branch's "
                f"output before it is added to the stream (section 4, site 2)")
    return None


@CHECKS.probe("TransformerBlock", "dropout on the attention branch's output, before the add (one token, the MLP "
              "branch zeroed)", _branch_dropout, CPU,
              rule="on the **attention branch's output**, before it is added to the stream")
def block_attention_branch_dropout(ctx):
    """With T = 1 and one head, dropout on the attention weights scales a row's branch output as a whole (the
    weight is 0 or 1/(1-p)); dropout on the branch's output drops its elements one by one. The MLP's fc2 and
    the out projection's bias are zero, so the block adds only the attention branch (pre-LN)."""
    d, p = 16, 0.5
    W = block_weights(ctx, d, 4 * d)
    W["fc2"] = {k: torch.zeros_like(v) for k, v in W["fc2"].items()}
    W["out_proj"]["bias"] = torch.zeros_like(W["out_proj"]["bias"])
    block = _build(ctx, d, 1, dropout=p)
    try:
        load_block(block, W)
    except Unloadable as exc:
        return {"cannot load weights": str(exc)}
    block = _ready(ctx, block)
    x = ctx.randn(64, 1, d)  # 64 sequences of one token
    key = "rows of the attention branch's output dropped element by element"
    base = ctx.call(block, x)
    block.train()
    ctx.manual_seed()
    out = ctx.call(block, x)
    if not (isinstance(base, torch.Tensor) and isinstance(out, torch.Tensor) and base.shape == out.shape == x.shape):
        return {key: "not a tensor shaped like the input"}
    a, b = (base - x).double(), (out - x).double()  # the branch's output, eval and training
    seen = a.abs() > 1e-3
    ratio = torch.where(seen, b / torch.where(seen, a, torch.ones_like(a)), torch.zeros_like(a))
    big = torch.where(seen, ratio, torch.full_like(ratio, -1e9)).amax(-1)
    small = torch.where(seen, ratio, torch.full_like(ratio, 1e9)).amin(-1)
    rows = seen.any(-1) & (b.abs() > 1e-6).any(-1)  # rows whose attention weight was dropped add nothing: left out
    return {key: float(((big - small) > 0.1)[rows].float().mean()) if rows.any() else 0.0}


def _trains(s, r, ctx):
    msg = _unloadable(s)
    if msg:
        return msg
    for name in ("pre-LN", "post-LN"):
        frozen = s.get(f"weights training left unchanged ({name})")
        if frozen:
            return (f"training a 2-block {name} stack of your TransformerBlock left {', '.join(frozen)} unchanged: "
                    f"the optimiser never saw them. Register every part as a module attribute (or nn.ModuleList, "
                    f"never a plain list) and let the gradient reach it (nothing detached)")
        key = f"losses ({name})"
        mine, ref = s.get(key), r[key]
        if not isinstance(mine, torch.Tensor) or mine.shape != ref.shape:
            return close(mine, ref, key)
        if not torch.isfinite(mine).all():
            return f"{key}: the loss became NaN or inf at step {int((~torch.isfinite(mine)).nonzero()[0])}"
        fell, ref_fell = (mine[0] - mine[-1]).item(), (ref[0] - ref[-1]).item()
        if fell < 0.9 * ref_fell:
            return (f"a 2-block {name} stack of your TransformerBlock, trained {len(ref)} Adam steps on random "
                    f"tokens, went from loss {mine[0]:.3f} to {mine[-1]:.3f}; the reference's went from "
                    f"{ref[0]:.3f} to {ref[-1]:.3f} with the same weights and data. Does the gradient reach every "
                    f"parameter (registered as module attributes, nothing detached)?")
    return None


def _adam_step(params, moments, step: int, lr: float, betas=(0.9, 0.999), eps=1e-8) -> None:
    """Adam, written out: torch.optim's first import costs seconds, more than the whole check."""
    with torch.no_grad():
        for p, (m, v) in zip(params, moments):
            if p.grad is None:
                continue
            m.lerp_(p.grad, 1 - betas[0])
            v.mul_(betas[1]).addcmul_(p.grad, p.grad, value=1 - betas[1])
            p -= lr * (m / (1 - betas[0] ** step)) / ((v / (1 - betas[1] ** step)).sqrt() + eps)
            p.grad = None


@CHECKS.probe("TransformerBlock", "a stack of your blocks trains (loss falls as the reference's does)", _trains,
              CPU,
              rule="trains a small stack of your blocks: its loss must fall at least 90% as far as the reference "
                   "block's")
def block_trains(ctx):
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny tensors: one thread is fastest, and immune to busy neighbours
    try:
        return _train_stacks(ctx)
    finally:
        torch.set_num_threads(threads)


def _train_stacks(ctx) -> dict:
    V, T, B, d, heads, steps = 13, 6, 4, 16, 2, 25
    tokens = torch.randint(V, (B, T), generator=ctx.gen)
    targets = torch.randint(V, (B, T), generator=ctx.gen).flatten()
    obs = {}
    for norm_first in (True, False):
        emb = nn.Parameter(ctx.randn(V, d))  # (V, D)
        head = nn.Parameter(ctx.randn(V, d, scale=d ** -0.5))  # (V, D)
        blocks, weights = [], []
        for _ in range(2):
            block = _build(ctx, d, heads, norm_first=norm_first)
            weights.append(block_weights(ctx, d, 4 * d))
            try:
                load_block(block, weights[-1])
            except Unloadable as exc:
                return {"cannot load weights": str(exc)}
            blocks.append(block.train())
        params = list(dict.fromkeys([emb, head, *(p for b in blocks for p in b.parameters())]))
        moments = [(torch.zeros_like(p), torch.zeros_like(p)) for p in params]
        losses = []
        for step in range(1, steps + 1):
            x = emb[tokens]  # (B, T, D)
            for block in blocks:  # recorded (forbidden APIs, in-place edits) on the first step only: it is slow
                x = ctx.call(block, x) if step == 1 else block(x)
            loss = F.cross_entropy((x @ head.T).flatten(0, 1), targets)  # logits (B·T, V)
            loss.backward()
            _adam_step(params, moments, step, lr=1e-2)
            losses.append(loss.detach())
        name = "pre-LN" if norm_first else "post-LN"
        obs[f"losses ({name})"] = torch.stack(losses)
        obs[f"weights training left unchanged ({name})"] = sorted({path for block, W in zip(blocks, weights)
                                                                   for path in _unchanged(block, W)})
    return obs


def _unchanged(block: nn.Module, W: dict) -> list[str]:
    """The block's weights (by the lesson's names) that still hold the values loaded before training."""
    out = []
    for path in ("ln1", "attn.out_proj", "ln2", "mlp.fc1", "mlp.fc2"):
        part = block
        for name in path.split("."):
            part = getattr(part, name)
        weight = getattr(part, "weight")
        if torch.equal(weight.detach().to(W[path.split(".")[-1]]["weight"]), W[path.split(".")[-1]]["weight"]):
            out.append(f"{path}.weight")
    return out


@CHECKS.probe("TransformerBlock", "gradients match", same(scale=10), CPU, hidden=True,
              rule="gradients must flow back to `x` and to every parameter")
def block_grads(ctx):
    d = 24
    W = block_weights(ctx, d, 4 * d)
    block = _build(ctx, d, 3)
    try:
        load_block(block, W)
    except Unloadable as exc:
        return {"cannot load weights": str(exc)}
    block = _ready(ctx, block)
    x = ctx.randn(2, 5, d, requires_grad=True)
    out = ctx.call(block, x)
    (out * ctx.randn(2, 5, d)).sum().backward()
    return {"gradient of x": x.grad, "gradient of ln1.weight": block.ln1.weight.grad,
            "gradient of mlp.fc1.weight": block.mlp.fc1.weight.grad}


_BLOCK_HINTS = {
    "output": " (compared with the reference block carrying the same weights on the same input; a tensor the "
              "block makes, such as the causal mask, is made on x's device, device=x.device)",
    "output in training mode": " (with dropout=0.0 training mode drops nothing; with the branches' output "
                               "projections zeroed, dropout may act only on what the branches add, never on the "
                               "residual stream itself)",
    "training mode changes the output": " (dropout > 0 must act in training mode, on the attention branch's output "
                                        "and inside the MLP)",
}


def _block_mask(ctx, kind, B: int, T: int):
    if kind is None:
        return None
    if kind == "padding (B, 1, 1, T)":
        lengths = torch.tensor([T, max(1, T // 2)][:B])  # the second row padded
        return (torch.arange(T) < lengths[:, None]).view(B, 1, 1, T).to(ctx.device)
    allowed = (torch.rand(T, T, generator=ctx.gen) < 0.6) | torch.eye(T, dtype=torch.bool)  # every query sees itself
    return allowed.to(ctx.device)


# The declared domain of TransformerBlock: every __init__ argument and its edges (one head, heads of width 1,
# expansion 1, no bias, pre-LN and post-LN), dropout in eval and training mode (with the branches' outputs
# zeroed, training mode is deterministic: dropout may only touch what the branches add), the masks forward
# takes (none, padding (B, 1, 1, T), a (T, T) pattern), a batch of 1, one position and a long row, x in
# float32/float64 and any layout, and repeated calls with another length or after another block was built;
# torch's default device set to meta (x on the CPU) shows a tensor made without device=x.device, as a GPU would.
# causal=True comes first: it is the block a decoder (lesson 08) stacks, and a causal mask made once, in the
# first call, shows only on a causal block called again.
BLOCK_DOMAIN = Domain(
    args=(Arg("d_model, num_heads", ("24, 4", "16, 1", "8, 8")), Arg("expansion", (4, 1, 3)),
          Arg("norm_first", (True, False)), Arg("causal", (True, False)), Arg("bias", (True, False)),
          Arg("dropout, mode", ("0.0, eval", "0.3, eval", "0.0, train", "0.3, train",
                                "0.3, train, branches zeroed")),
          Arg("mask", (None, "padding (B, 1, 1, T)", "(T, T)")), Arg("B", (2, 1)), Arg("T", (7, 1, 64)),
          Arg("calls", ("one", "after a call with a longer T", "after a call with a shorter T",
                        "after another block was built")),
          Arg("default device", ("cpu", "meta")), PASSED),
    dtypes=(("x", ("float32", "float64")),), layouts=(("x", ("contiguous", "transposed", "strided")),), examples=5)


@CHECKS.domain("TransformerBlock", BLOCK_DOMAIN,
               layout_first(lambda s, r, ctx: _observed_like(s, r, ctx, _BLOCK_HINTS), who="TransformerBlock"))
def block_domain(ctx, ex):
    _own_draws(ctx, ex)
    d, heads = (int(n) for n in ex["d_model, num_heads"].split(", "))
    B, T, expansion, bias = ex["B"], ex["T"], ex["expansion"], ex["bias"]
    p, mode = ex["dropout, mode"].split(", ", 1)
    p, dtype = float(p), getattr(torch, ex["dtype of x"])
    W = block_weights(ctx, d, expansion * d, bias)
    if mode == "train, branches zeroed":
        W["out_proj"] = {k: torch.zeros_like(v) for k, v in W["out_proj"].items()}
        W["fc2"] = {k: torch.zeros_like(v) for k, v in W["fc2"].items()}
    args, kwargs = arguments(("expansion", "dropout", "norm_first", "causal", "bias"), {
        "expansion": expansion, "dropout": p, "norm_first": ex["norm_first"], "causal": ex["causal"], "bias": bias},
        {}, ex["passed"])
    block = _build(ctx, d, heads, *args, **kwargs)
    layout = {"state_dict": block_layout(block)}
    try:
        load_block(block, W)
    except Unloadable as exc:
        return {"cannot load weights": str(exc)}
    block = block.to(dtype=dtype).eval()
    x = relaid(ctx.randn(B, T, d, dtype=dtype), ex["layout of x"])
    mask = _block_mask(ctx, ex["mask"], B, T)
    if ex["calls"] == "after another block was built":
        _build(ctx, d + heads, heads, expansion=expansion + 1, dropout=0.5, norm_first=not ex["norm_first"],
               causal=not ex["causal"], bias=not bias)
    elif ex["calls"] != "one":
        ctx.call(block, ctx.randn(B, T + 5 if "longer" in ex["calls"] else max(1, T - 3), d, dtype=dtype))
    kwargs = {} if mask is None else {"mask": mask}
    if ex["default device"] == "meta":  # x stays on the CPU: a tensor made without device=x.device lands on meta
        with torch.device("meta"):
            return {"output": ctx.call(block, x, **kwargs), **layout}
    out_eval = ctx.call(block, x, **kwargs)
    if mode == "eval":
        return {"output": out_eval, **layout}
    block.train()
    ctx.manual_seed()
    out_train = ctx.call(block, x, **kwargs)
    if p == 0.0 or mode == "train, branches zeroed":
        return {"output": out_eval, "output in training mode": out_train, **layout}
    changed = (isinstance(out_train, torch.Tensor) and isinstance(out_eval, torch.Tensor)
               and out_train.shape == out_eval.shape and bool(((out_train - out_eval).abs() > 1e-4).any()))
    return {"output": out_eval, "training mode changes the output": changed if x.numel() >= 100 else "n/a", **layout}


# ----------------------------------------------------------------------------------------------
# Known mistakes, each written as exact edits of the solved notebook's cell that defines its exercise
# (`engine.mistake_source` applies them, so a rename in the solution flows through; every `old` must
# occur exactly once, which tests/test_engine.py checks). Each is run on the same probes as the
# reference; a student whose observations match one is told its message.

MISTAKES = (
    Mistake("MLP", "mlp_exact_gelu", "nn.GELU() / F.gelu(x) is the exact, erf-based GELU; GPT-2 uses the tanh "
            'approximation: F.gelu(x, approximate="tanh").',
            edits={'F.gelu(self.fc1(x), approximate="tanh")': "F.gelu(self.fc1(x))"},
            hint="There are two GELUs, the exact one and a tanh approximation. Which one does GPT-2 use, and "
                 "which one does your call compute by default?"),
    Mistake("MLP", "mlp_relu", "the activation is ReLU; this MLP uses GELU with the tanh approximation, F.gelu(x, "
            'approximate="tanh").',
            edits={'F.gelu(self.fc1(x), approximate="tanh")': "F.relu(self.fc1(x))"},
            hint="Which activation does GPT-2's MLP use? Compare your activation's output with it at a few "
                 "negative inputs."),
    Mistake("MLP", "mlp_wrong_expansion", "the hidden width is fixed at 4 · d_model; it must be expansion · d_model "
            "for the `expansion` passed in.",
            edits={"hidden = expansion * d_model": "hidden = 4 * d_model"},
            hint="Build the MLP with expansion = 3 and print the shape of fc1's weight: does the hidden width "
                 "follow the argument?"),
    Mistake("MLP", "mlp_dropout_in_eval", "F.dropout(x, p) defaults to training=True, so it drops even in eval mode: "
            "use an nn.Dropout module (or pass training=self.training).",
            edits={"self.dropout = nn.Dropout(dropout)": "self.p = dropout",
                   "self.dropout(self.fc2(h))": "F.dropout(self.fc2(h), self.p)"},
            hint="Put the module in eval mode, run the same input twice and compare: does dropout still act?"),
    Mistake("MLP", "mlp_assumes_3d", "the MLP unpacks B, T, D = x.shape, so it takes only 3-D inputs; it acts on "
            "the last dim alone: apply fc1 and fc2 to x as it comes, (..., d_model) in and out.",
            edits={'h = F.gelu(self.fc1(x), approximate="tanh")  # (..., expansion·D)':
                   'B, T, D = x.shape\n        h = F.gelu(self.fc1(x.reshape(B * T, D)), approximate="tanh")',
                   "return self.dropout(self.fc2(h))  # (..., D)": "return self.dropout(self.fc2(h)).view(B, T, D)"},
            hint="Call your MLP on a 2-D input, (N, d_model): does anything in it assume exactly three axes?"),
    Mistake("TransformerBlock", "causal_mask_made_once", "the causal mask is built once, at the first call's length, "
            "and reused: build it in forward from this x's length, T = x.shape[1], at every call.",
            edits={"            T = x.shape[1]\n            causal = torch.ones(T, T, dtype=torch.bool, device=x.device)"
                   ".tril()  # (T, T)\n":
                   "            if not hasattr(self, \"causal_mask\"):  # made once, at the first call's length\n"
                   "                T = x.shape[1]\n"
                   "                self.causal_mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()\n"
                   "            causal = self.causal_mask\n"},
            hint="Call the block with causal=True on one length, then on another: is the mask rebuilt for the "
                 "new length?"),
    Mistake("TransformerBlock", "causal_mask_on_cpu", "the causal mask is made without device=, so on the CPU: on a "
            "GPU (or any device but the CPU) the block fails. Make it where x is: torch.ones(T, T, dtype=torch.bool, "
            "device=x.device).",
            edits={"causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()  # (T, T)":
                   "causal = torch.ones(T, T, dtype=torch.bool).tril()  # (T, T)"},
            hint="Print the device of your causal mask when x is on another device: where is the mask made?"),
    Mistake("TransformerBlock", "dropout_on_residual_stream", "dropout is applied to the residual stream, dropout(x + "
            "attn(...)); it belongs on the branch's output only, x + dropout(attn(ln1(x))), so what earlier layers "
            "wrote is never dropped.",
            edits={"x = x + self.dropout(self.attn(self.ln1(x), mask=mask)[0])  # (B, T, D)":
                   "x = self.dropout(x + self.attn(self.ln1(x), mask=mask)[0])  # (B, T, D)"},
            hint="In training mode, which tensor does your dropout act on: the branch's output only, or the "
                 "sum that carries the earlier layers' work?"),
    Mistake("TransformerBlock", "ln_after_add", "in pre-LN the LayerNorm normalises only the branch's input, x + "
            "attn(ln1(x)); writing x = ln1(x) first puts the normalised value on the residual stream, so ln2 then "
            "acts after the add, as in post-LN.",
            edits={"x = x + self.dropout(self.attn(self.ln1(x), mask=mask)[0])":
                       "x = self.ln1(x)\n            x = x + self.dropout(self.attn(x, mask=mask)[0])",
                   "x = x + self.mlp(self.ln2(x))": "x = self.ln2(x)\n            x = x + self.mlp(x)"},
            hint="Follow x through a pre-LN forward: is the normalised value only the branch's input, or does "
                 "it replace x on the residual stream?"),
    Mistake("TransformerBlock", "post_ln_for_pre_ln", "norm_first=True asks for pre-LN, x + attn(ln1(x)) then x + "
            "mlp(ln2(x)), but the block always computes post-LN, ln1(x + attn(x)).",
            edits={"if self.norm_first:": "if False:  # always post-LN"},
            hint="Build the block with norm_first=True and with norm_first=False: does your forward compute "
                 "anything different?"),
    Mistake("TransformerBlock", "no_residual", "the residual connections are missing: each sub-layer's output must "
            "be added to its input (x + attn(...), x + mlp(...)), not replace it.",
            edits={"x = x + self.dropout(self.attn(self.ln1(x)": "x = self.dropout(self.attn(self.ln1(x)",
                   "x = x + self.mlp(self.ln2(x))": "x = self.mlp(self.ln2(x))",
                   "self.ln1(x + self.dropout(": "self.ln1(self.dropout(",
                   "self.ln2(x + self.mlp(x))": "self.ln2(self.mlp(x))"},
            hint="Follow x through your forward: is each sub-layer's output added to its input, or does it "
                 "replace it?"),
    Mistake("TransformerBlock", "block_wrong_expansion", "the block's MLP ignores `expansion` (it always uses 4×): "
            "pass expansion on, MLP(d_model, expansion, dropout, bias).",
            edits={"MLP(d_model, expansion, dropout, bias)": "MLP(d_model, dropout=dropout, bias=bias)"},
            hint="Build the block with expansion = 3 and print the shape of its MLP's first weight: does the "
                 "argument reach the MLP?"),
    Mistake("TransformerBlock", "block_dropout_in_eval", "F.dropout(x, p) defaults to training=True, so the block "
            "drops activations in eval mode too: use an nn.Dropout module (or training=self.training).",
            edits={"self.dropout = nn.Dropout(dropout)": "self.p = dropout",
                   "self.dropout(self.attn(self.ln1(x), mask=mask)[0])":
                       "F.dropout(self.attn(self.ln1(x), mask=mask)[0], self.p)",
                   "self.dropout(self.attn(x, mask=mask)[0])": "F.dropout(self.attn(x, mask=mask)[0], self.p)"},
            hint="Put the block in eval mode, run the same input twice and compare: does dropout still act?"),
    Mistake("TransformerBlock", "causal_ignored", "causal=True is ignored: build a lower-triangular boolean mask "
            "(True = may attend) and combine it with any mask passed in.",
            edits={"if self.causal:": "if False:  # causal ignored"},
            hint="Build the block with causal=True, change the input at a late position, and see whether "
                 "earlier outputs move."),
)


CHECKS.add_battery()
