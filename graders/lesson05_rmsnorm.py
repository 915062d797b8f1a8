"""Lesson 05 — RMSNorm: `rms_norm`, `RMSNorm` and the Triton kernel `rms_norm_triton`.

Reads like the lesson: the function's probes and judges, the module's, the Triton kernel's (with a
launch counter that proves a kernel really ran), the known mistakes, then `benchmark()`.
Probes run in the sandboxed child (student code); judges run in the parent.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch
import torch.nn as nn
import torch.nn.functional as F


from .engine.checks import Arg, Domain
from .engine.compare import close, tolerance
from .engine.probe import relaid
from .engine import CPU, CPU_AND_GPU, Checks, Config, Mistake, agrees_with, median_ms, same
from .interface import PASSED, arguments

CHECKS = Checks("lesson05")
# What this lesson's checks import lazily (triton, and its interpreter's code generator for a kernel),
# imported once by the warm zygote (zygote.preload); tests/e2e/test_warm_imports.py names what is missing.
WARM_IMPORTS = ("triton", "triton.compiler.code_generator")

_NORM_APIS = ("torch.nn.functional.rms_norm", "torch.rms_norm", "torch.nn.RMSNorm")
FORBIDDEN = {
    "rms_norm": _NORM_APIS,
    "RMSNorm": _NORM_APIS,
    "rms_norm_triton": _NORM_APIS,
}

CPU_HALF = (Config("cpu", "float16"),)
CPU_LOW = (Config("cpu", "float16"), Config("cpu", "bfloat16"))
HALF_ANYWHERE = (Config("cpu", "float16"), Config("cuda", "float16"))


def _finite_then_same(*keys: str):
    """A judge for inputs above 256 in float16: inf/NaN/zeros there mean x² overflowed."""
    def judge(s, r, ctx):
        for key in keys:
            out, ref = s.get(key), r[key]
            if isinstance(out, torch.Tensor) and out.shape == ref.shape:
                bad = ~torch.isfinite(out.double())
                zeroed = (out == 0) & (ref != 0)
                if bad.any() or zeroed.float().mean() > 0.5:
                    what = (f"{int(bad.sum())} inf/NaN values" if bad.any()
                            else f"{int(zeroed.sum())} of {out.numel()} values that are exactly 0")
                    return (f"{key}: float16 inputs of magnitude up to ~1000 gave {what}. In float16, x² "
                            f"overflows to inf once |x| ≥ 256 (65504 is the largest float16): upcast x to "
                            f"float32 before squaring, and cast the result back at the end")
        return same(*keys)(s, r, ctx)
    return judge


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


def _dtypes(text: str) -> tuple[torch.dtype, torch.dtype]:
    """"bfloat16" -> x and weight in bfloat16; "bfloat16 x, float32 weight" -> each its own."""
    if "," not in text:
        return getattr(torch, text), getattr(torch, text)
    x, w = (part.split()[0] for part in text.split(","))
    return getattr(torch, x), getattr(torch, w)


def _same_at_dtype(*keys: str, scale: float = 1.0):
    """A domain judge: each observation `key` matches the reference's, in the reference's dtype, within the
    tolerance of that dtype (float32's for float32 and float64: the spec computes in float32), times `scale`."""
    def judge(s, r, ctx):
        for k in keys:
            if k not in r:
                continue  # not observed on this example
            ref = r[k]
            half = isinstance(ref, torch.Tensor) and ref.dtype in (torch.float16, torch.bfloat16)
            msg = close(s.get(k), ref, k, tol=(tolerance(ref.dtype) if half else ctx.tol).scaled(scale))
            if msg:
                return msg
        return None
    return judge


_LAYOUTS = ("contiguous", "transposed", "strided")
# x and weight in one dtype, or each in its own (the output is x's dtype either way)
_XW_DTYPES = ("float32", "float64", "bfloat16", "float16", "bfloat16 x, float32 weight", "float32 x, bfloat16 weight")


# ----------------------------------------------------------------------------------------------
# rms_norm(x, weight=None, eps=1e-6)


@CHECKS.probe("rms_norm", "matches the reference on random inputs, with and without weight", same(), CPU_AND_GPU,
              rule="x / sqrt(mean(x²) + eps), times weight when one is given")
def rms_norm_random(ctx):
    x = ctx.randn(2, 3, 10, scale=2.0)  # (B, T, D)
    w = ctx.randn(10)  # (D,)
    return {"output with weight": ctx.call(ctx.target, x, w),
            "output with weight=None": ctx.call(ctx.target, x),
            "output with weight=None passed by keyword": ctx.call(ctx.target, x, weight=None)}


@CHECKS.probe("rms_norm", "normalises over the last axis only, any leading dims", same(), CPU, hidden=True,
              rule="any number of leading dims (none: a single vector)")
def rms_norm_leading(ctx):
    obs = {}
    for shape in [(9,), (4, 7), (2, 3, 5, 6)]:
        x, w = ctx.randn(*shape, scale=1.5), ctx.randn(shape[-1])
        obs[f"output for shape {shape}"] = ctx.call(ctx.target, x, w)
    return obs


@CHECKS.probe("rms_norm", "eps goes inside the square root (tiny inputs, a large eps)", same(), CPU,
              rule="eps goes inside the square root, whatever its size")
def rms_norm_eps(ctx):
    tiny = ctx.randn(3, 8, scale=1e-3)  # mean(x²) ~ 1e-6, the size of eps: where eps shows
    x, w = ctx.randn(4, 6), ctx.randn(6)
    return {"output for inputs ~1e-3": ctx.call(ctx.target, tiny),
            "output with eps=0.25": ctx.call(ctx.target, x, w, eps=0.25)}


@CHECKS.probe("rms_norm", "float16 inputs above 256 give finite results (compute in float32)",
              _finite_then_same("output"), HALF_ANYWHERE, rule="float16 inputs above 256 must give finite results")
def rms_norm_large_half(ctx):
    x = ctx.randn(5, 12, scale=300.0)  # float16: x² > 65504 for most rows
    w = ctx.randn(12)
    return {"output": ctx.call(ctx.target, x, w)}


@CHECKS.probe("rms_norm", "returns the input's dtype (float16, bfloat16)", same(), CPU_LOW,
              rule="compute in float32 and return a tensor of x's dtype")
def rms_norm_dtype(ctx):
    x, w = ctx.randn(3, 16, scale=3.0), ctx.randn(16)
    return {"output": ctx.call(ctx.target, x, w)}


@CHECKS.probe("rms_norm", "gradients match", same(scale=10), CPU, hidden=True,
              rule="let gradients flow to x and weight")
def rms_norm_grad(ctx):
    x = ctx.randn(3, 4, 7, requires_grad=True)
    w = ctx.randn(7, requires_grad=True)
    out = ctx.call(ctx.target, x, w)
    (out * ctx.randn(3, 4, 7)).sum().backward()
    return {"gradient of x": x.grad, "gradient of weight": w.grad}


@CHECKS.probe("rms_norm", "agrees with F.rms_norm", agrees_with("output", "output with eps=0.1", scale=2,
                                                                  label="F.rms_norm"), CPU_AND_GPU,
              rule="yours must still agree with F.rms_norm(x, x.shape[-1:], weight, eps)")
def rms_norm_vs_torch(ctx):
    x, w = ctx.randn(6, 32, scale=2.0), ctx.randn(32)
    # torch's own answer, computed here too; the judge only ever reads the reference child's copy
    return {"output": ctx.call(ctx.target, x, w), "output with eps=0.1": ctx.call(ctx.target, x, w, eps=0.1),
            "torch output": F.rms_norm(x, (32,), w, 1e-6),
            "torch output with eps=0.1": F.rms_norm(x, (32,), w, 0.1)}


# The declared domain of rms_norm: any leading dims (none: one vector), a row of one feature and a wide one
# (1024), weight given or not, eps from the default to 0.5, inputs from ~1e-3 (mean(x²) below eps) to ~300
# (x² overflows float16), x and weight in float32, float64, bfloat16 or float16, together or each in its own
# dtype (the output is x's), x and weight laid out any way.
RMS_DOMAIN = Domain(
    args=(Arg("leading dims", ("2, 3", "none", "2, 2, 3")), Arg("D", (16, 1, 1024)),
          Arg("weight", ("given", None)), Arg("eps", (1e-6, 0.5)), Arg("scale of x", (2.0, 1e-3, 300.0)), PASSED),
    dtypes=(("x, weight", _XW_DTYPES),), layouts=(("x", _LAYOUTS), ("weight", ("contiguous", "strided"))),
    examples=5)


@CHECKS.domain("rms_norm", RMS_DOMAIN, _same_at_dtype("output"))
def rms_norm_domain(ctx, ex):
    xd, wd = _dtypes(ex["dtype of x, weight"])
    D = ex["D"]
    x = relaid(ctx.randn(*_dims(ex["leading dims"]), D, scale=ex["scale of x"]).to(xd), ex["layout of x"])
    w = _laid(ctx.randn(D).to(wd), ex["layout of weight"]) if ex["weight"] else None
    args, kwargs = arguments(("weight", "eps"), {"weight": w, "eps": ex["eps"]}, {}, ex["passed"])
    return {"output": ctx.call(ctx.target, x, *args, **kwargs)}


# ----------------------------------------------------------------------------------------------
# class RMSNorm(nn.Module): __init__(dim, eps=1e-6)


def _one_weight(s, r, ctx):
    names = s.get("parameter names")
    if names != r["parameter names"]:
        return (f"the module's parameters are {names}; RMSNorm has exactly one, `weight` of shape (dim,) "
                f"(no bias), so that nn.RMSNorm's state dict loads")
    return same("weight")(s, r, ctx)


@CHECKS.probe("RMSNorm", "has one parameter, `weight`, of ones", _one_weight, CPU,
              rule="create the gain weight, a Parameter of shape (dim,) filled with ones — and nothing else")
def rmsnorm_params(ctx):
    ctx.manual_seed()
    m = ctx.target(12)
    return {"parameter names": [n for n, _ in m.named_parameters()],
            "weight": getattr(m, "weight", None)}


@CHECKS.probe("RMSNorm", "loads nn.RMSNorm's state dict and matches its output", same(), CPU_AND_GPU,
              rule="the same as an nn.Module with a learned gain, loading nn.RMSNorm's state dict")
def rmsnorm_state_dict(ctx):
    ctx.manual_seed()
    theirs = nn.RMSNorm(24, eps=1e-6)
    with torch.no_grad():
        theirs.weight.copy_(torch.randn(24, generator=ctx.gen))
    theirs = theirs.to(ctx.device, ctx.dtype)
    mine = ctx.target(24).to(ctx.device, ctx.dtype)
    mine.load_state_dict(theirs.state_dict())
    x = ctx.randn(2, 5, 24)  # (B, T, D)
    return {"output": ctx.call(mine, x)}


@CHECKS.probe("RMSNorm", "uses its eps", same(), CPU, hidden=True,
              rule="your rms_norm with the module's weight and eps")
def rmsnorm_eps(ctx):
    m = ctx.target(10, eps=0.5)
    x = ctx.randn(3, 10, scale=0.5)
    return {"output with eps=0.5": ctx.call(m, x)}


@CHECKS.probe("RMSNorm", "gradients reach the weight", same(scale=10), CPU, hidden=True,
              rule="let gradients flow to x and weight")
def rmsnorm_grad(ctx):
    m = ctx.target(9)
    x = ctx.randn(4, 9, requires_grad=True)
    (ctx.call(m, x) * ctx.randn(4, 9)).sum().backward()
    w = getattr(m, "weight", None)
    return {"gradient of x": x.grad, "gradient of weight": None if w is None else w.grad}


@CHECKS.probe("RMSNorm", "float16 inputs above 256 give finite results (compute in float32)",
              _finite_then_same("output"), HALF_ANYWHERE, rule="float16 inputs above 256 must give finite results")
def rmsnorm_large_half(ctx):
    # the module computes on its own, not necessarily through rms_norm: x² of |x| ≥ 256 overflows float16
    ctx.manual_seed()
    m = ctx.target(12).to(ctx.device, ctx.dtype)
    with torch.no_grad():
        m.weight.copy_(torch.randn(12, generator=ctx.gen).to(m.weight.dtype))
    return {"output": ctx.call(m, ctx.randn(5, 12, scale=300.0))}


# The declared domain of RMSNorm: every __init__ argument (dim from 1 to 1024, eps) and forward's x with any
# leading dims, in float32, float64, bfloat16 or float16 while the weight stays float32 (mixed precision: the
# output is x's dtype), any layout, of magnitudes up to ~1000 (x is then given in float16 too, where x²
# overflows above 256: the curriculum's float32 upcast, in the module and with a float32 weight); calls repeated with another batch and
# length, and a second instance alongside (no state kept from a call, none shared between instances).
RMSNORM_DOMAIN = Domain(
    args=(Arg("dim", (16, 1, 1024)), Arg("eps", (1e-6, 0.5)), Arg("leading dims", ("2, 3", "none", "1, 5, 2")),
          Arg("calls", ("one", "then another shape", "beside a second instance")), Arg("scale of x", (2.0, 300.0)),
          PASSED),
    dtypes=(("x", ("float32", "float64", "bfloat16", "float16")),), layouts=(("x", _LAYOUTS),), examples=4)


@CHECKS.domain("RMSNorm", RMSNORM_DOMAIN, _same_at_dtype("output", "output of the second call", "output, x in float16"))
def rmsnorm_domain(ctx, ex):
    dtype, dim = getattr(torch, ex["dtype of x"]), ex["dim"]

    def build():
        theirs = nn.RMSNorm(dim, eps=ex["eps"])
        with torch.no_grad():
            theirs.weight.copy_(torch.randn(dim, generator=ctx.gen))
        ctx.manual_seed()
        args, kwargs = arguments(("eps",), {"eps": ex["eps"]}, {}, ex["passed"])
        mine = ctx.call(ctx.target, dim, *args, **kwargs)
        mine.load_state_dict(theirs.state_dict())
        return mine  # float32 parameters

    m = build()
    x = relaid(ctx.randn(*_dims(ex["leading dims"]), dim, scale=ex["scale of x"]).to(dtype), ex["layout of x"])
    second = ctx.randn(3, 1, dim).to(dtype)  # another batch and length
    if ex["scale of x"] > 256:  # the same x in float16 too, whatever its drawn dtype: x² overflows there
        return {"output": ctx.call(m, x), "output, x in float16": ctx.call(m, x.to(torch.float16))}
    if ex["calls"] == "one":
        return {"output": ctx.call(m, x)}
    if ex["calls"] == "beside a second instance":
        other = build()  # its own weight: it must not leak into m
        ctx.call(other, second)
        return {"output": ctx.call(m, x), "output of the second call": ctx.call(other, second)}
    return {"output": ctx.call(m, x), "output of the second call": ctx.call(m, second)}


# ----------------------------------------------------------------------------------------------
# rms_norm_triton(x, weight, eps=1e-6): a Triton kernel, one program per row


@contextmanager
def _count_launches():
    """Count Triton kernel launches (compiled or interpreted) and the storages each one was given."""
    import triton.runtime.jit as jit

    classes = [jit.JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction
        classes.append(InterpretedFunction)
    except ImportError:  # pragma: no cover - very old triton
        pass
    launches: list[set[int]] = []
    saved = [(cls, cls.__dict__.get("run"), cls.run) for cls in classes]

    def counting(orig):
        def run(self, *args, **kwargs):
            if not kwargs.get("warmup", False):
                launches.append({a.untyped_storage().data_ptr() for a in (*args, *kwargs.values())
                                 if isinstance(a, torch.Tensor)})
            return orig(self, *args, **kwargs)
        return run

    for cls, _, orig in saved:
        cls.run = counting(orig)
    try:
        yield launches
    finally:
        for cls, own, _ in saved:
            if own is None:
                del cls.run
            else:
                cls.run = own


def _run(ctx, *args, **kwargs):
    """Call the student's rms_norm_triton; a kernel body still raising NotImplementedError (which the
    interpreter wraps in an InterpreterError) counts as not implemented, not as an error."""
    try:
        return ctx.call(ctx.target, *args, **kwargs)
    except Exception as exc:
        if type(exc).__name__ == "InterpreterError" and str(exc).startswith("NotImplementedError"):
            raise NotImplementedError("the kernel still raises NotImplementedError") from exc
        raise


def _kernel_ran(s, r, ctx):
    if s.get("kernel launches") == 0:
        return ("no Triton kernel ran while rms_norm_triton computed its result: write a @triton.jit kernel "
                "and launch it with `kernel[(n_rows,)](...)`; torch operations alone do not count here")
    if not s.get("output written by a kernel"):
        return ("a Triton kernel ran, but the returned tensor is not one that was passed to it: allocate the "
                "output (torch.empty_like) in x's dtype, let the kernel tl.store into it, and return it")
    return same("output")(s, r, ctx)


@CHECKS.probe("rms_norm_triton", "a Triton kernel computes the output", _kernel_ran, CPU_AND_GPU,
              rule="the work is done by a real @triton.jit kernel")
def triton_kernel_ran(ctx):
    x, w = ctx.randn(7, 50), ctx.randn(50)  # (rows, D)
    with _count_launches() as launches:
        out = _run(ctx, x, w)
    written = isinstance(out, torch.Tensor) and any(out.untyped_storage().data_ptr() in l for l in launches)
    return {"output": out, "kernel launches": len(launches), "output written by a kernel": written}


@CHECKS.probe("rms_norm_triton", "rows of any length (the tail is masked)", same(), CPU_AND_GPU + CPU_HALF,
              rule="rows of any length D, from 1 to several thousand")
def triton_lengths(ctx):
    obs = {}
    for rows, d in [(3, 129), (4, 64), (5, 7)]:
        x, w = ctx.randn(rows, d, scale=2.0, data=True), ctx.randn(d)  # rows are the data (battery)
        obs[f"output for shape ({rows}, {d})"] = _run(ctx, x, w)
    return obs


@CHECKS.probe("rms_norm_triton", "uses eps inside the square root", same(), CPU,
              rule="y = x / sqrt(mean(x²) + eps) * w")
def triton_eps(ctx):
    tiny = ctx.randn(3, 20, scale=1e-3)
    x, w = ctx.randn(4, 24), ctx.randn(24)
    return {"output for inputs ~1e-3": _run(ctx, tiny, torch.ones(20, device=ctx.device)),
            "output with eps=0.25": _run(ctx, x, w, eps=0.25)}


@CHECKS.probe("rms_norm_triton", "float16 inputs above 256 give finite results (accumulate in float32)",
              _finite_then_same("output"), HALF_ANYWHERE, rule="load in x's dtype, accumulate in float32")
def triton_large_half(ctx):
    x, w = ctx.randn(5, 40, scale=300.0), ctx.randn(40)
    return {"output": _run(ctx, x, w)}


@CHECKS.probe("rms_norm_triton", "any leading dims, and a non-contiguous input", same(), CPU, hidden=True,
              rule="with a non-contiguous x, either pass its row stride to the kernel or make a contiguous copy")
def triton_layouts(ctx):
    x, w = ctx.randn(2, 3, 40), ctx.randn(40)  # (B, T, D)
    strided = ctx.randn(6, 80)[:, ::2]  # (6, 40), row stride 80, column stride 2
    return {"output for shape (2, 3, 40)": _run(ctx, x, w),
            "output for a strided (6, 40) slice": _run(ctx, strided, w)}


# The declared domain of rms_norm_triton: any leading dims (none: one row), rows of one feature, of a masked
# tail (129), wide (1024: one block of 1024) and of several thousand (3000: wider than a block capped at 1024,
# as the text's "from 1 to several thousand" allows), eps from the default to 0.5, inputs from ~1e-3 to ~300,
# float32, float16 or bfloat16, x and weight laid out any way (the kernel walks contiguous rows: make them so),
# eps by keyword or in the signature's order. Run through the Triton interpreter on the CPU: a few rows each.
TRITON_DOMAIN = Domain(
    args=(Arg("leading dims", ("3", "none", "2, 2")), Arg("D", (40, 1, 129, 1024, 3000)), Arg("eps", (1e-6, 0.5)),
          Arg("scale of x", (2.0, 1e-3, 300.0)), PASSED),
    dtypes=(("x, weight", ("float32", "float16", "bfloat16")),),
    layouts=(("x", _LAYOUTS), ("weight", ("contiguous", "strided"))), examples=4)


@CHECKS.domain("rms_norm_triton", TRITON_DOMAIN, _same_at_dtype("output"))
def triton_domain(ctx, ex):
    dtype, D = getattr(torch, ex["dtype of x, weight"]), ex["D"]
    x = relaid(ctx.randn(*_dims(ex["leading dims"]), D, scale=ex["scale of x"]).to(dtype), ex["layout of x"])
    w = _laid(ctx.randn(D).to(dtype), ex["layout of weight"])
    args, kwargs = arguments(("eps",), {"eps": ex["eps"]}, {}, ex["passed"])
    return {"output": _run(ctx, x, w, *args, **kwargs)}


# ----------------------------------------------------------------------------------------------
# Known mistakes, each written as exact edits of the solved notebook's cell that defines its exercise
# (`engine.mistake_source` applies them, so a rename in the solution flows through; every `old` must
# occur exactly once, which tests/test_engine.py checks). Each is run on the same probes as the
# reference; a student whose observations match one is told its message.

MISTAKES = (
    Mistake("rms_norm", "subtract_mean", "RMSNorm does not re-centre: dividing x − mean(x) by its spread is "
            "LayerNorm; divide x itself by √(mean(x²) + eps).",
            edits={"xf = x.float()": "xf = x.float()\n    xf = xf - xf.mean(dim=-1, keepdim=True)"},
            hint="RMSNorm does not re-centre its input. Does your code subtract anything before it divides?"),
    Mistake("rms_norm", "eps_outside_sqrt", "eps is added after the square root; it belongs inside: x / √(mean(x²) + "
            "eps), which matters when mean(x²) is as small as eps.",
            edits={"torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)":
                       "1 / (xf.pow(2).mean(dim=-1, keepdim=True).sqrt() + eps)"},
            hint="Where does eps go: inside the square root, or added after it? Try inputs of magnitude 1e-4."),
    Mistake("rms_norm", "no_upcast", "x² is computed in the input's dtype: in float16 it overflows to inf for |x| ≥ "
            "256; compute in float32 (x.float()) and cast the result back to x.dtype.",
            edits={"xf = x.float()": "xf = x", "weight.float()": "weight"},
            hint="Run your function on float16 inputs of magnitude 1000 and print the intermediate squares: "
                 "what is the largest value float16 can hold?"),
    Mistake("rms_norm", "mean_abs", "the scale is mean(|x|), not the root mean square: use √(mean(x²) + eps).",
            edits={"torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)":
                       "1 / (xf.abs().mean(dim=-1, keepdim=True) + eps)"},
            hint="Which statistic does RMSNorm divide by: the mean absolute value, or the root of the mean "
                 "square?"),
    Mistake("rms_norm", "weight_after_cast", "the weight multiplies after the cast back to x's dtype, so a float32 "
            "weight with bfloat16 x (mixed precision) makes the output float32: multiply by weight.float() in "
            "float32, then cast the result to x.dtype.",
            edits={"        y = y * weight.float()\n    return y.to(x.dtype)":
                       "        return y.to(x.dtype) * weight\n    return y.to(x.dtype)"},
            hint="With bfloat16 input and a float32 weight, print the dtype of your output: where does the "
                 "multiplication by the weight happen, before or after the cast back?"),
    Mistake("RMSNorm", "with_bias", "RMSNorm has no bias, only a `weight` (gain) of ones; drop the bias so the "
            "module matches nn.RMSNorm and its state dict.",
            edits={"self.weight = nn.Parameter(torch.ones(dim))":
                       "self.weight = nn.Parameter(torch.ones(dim))\n"
                       "        self.bias = nn.Parameter(torch.zeros(dim))",
                   "return rms_norm(x, self.weight, self.eps)":
                       "return rms_norm(x, self.weight, self.eps) + self.bias.to(x.dtype)"},
            hint="List your module's parameters and compare them with nn.RMSNorm's: is there anything extra?"),
    Mistake("RMSNorm", "module_no_upcast", "the module squares x in its own dtype: in float16 x² overflows to inf "
            "for |x| ≥ 256; compute in float32 (x.float()), as rms_norm does, and cast back to x.dtype.",
            edits={"return rms_norm(x, self.weight, self.eps)":
                       "return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps) * self.weight.to(x.dtype)"},
            hint="Run your module on float16 inputs of magnitude 1000 and print the intermediate squares: in "
                 "which dtype are they computed?"),
    Mistake("rms_norm_triton", "torch_only", "rms_norm_triton must launch a Triton kernel (@triton.jit, "
            "`kernel[(n_rows,)](...)`); calling torch operations does not count.",
            edits={"n_cols = x.shape[-1]": "return rms_norm(x, weight, eps)"},
            hint="Does a Triton kernel actually run when your function is called? Check where the output is "
                 "computed."),
    Mistake("rms_norm_triton", "triton_no_upcast", "the kernel squares x in float16, which overflows to inf for |x| "
            "≥ 256: load with `.to(tl.float32)` and accumulate in float32.",
            edits={"mask=mask, other=0.0).to(tl.float32)\n    w": "mask=mask, other=0.0)\n    w",
                   "w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)":
                       "w = tl.load(w_ptr + cols, mask=mask, other=0.0)"},
            hint="In which dtype does your kernel square and sum the row? Try float16 inputs of magnitude "
                 "1000."),
)


# ----------------------------------------------------------------------------------------------
# course bench lesson05


def _time_or_note(name, fn, args, device, notes):
    try:
        return median_ms(fn, *args)
    except NotImplementedError:
        notes.append(f"{name} is not implemented yet: not timed")
    except Exception as exc:  # the student's code; report, do not crash the bench
        notes.append(f"{name} raised {type(exc).__name__}: {exc}"[:200])
    return None


def benchmark(ns: dict, device: str) -> dict:
    """Time the student's rms_norm (CPU) or rms_norm_triton (CUDA) against torch's F.rms_norm."""
    notes: list[str] = []
    rows = []
    if device == "cuda":
        name, dtype = "rms_norm_triton", torch.float16
        shapes = [(4096, 1024), (4096, 4096), (16384, 4096), (2048, 8192)]
        notes.append("float16; GB/s = (bytes of x read + weight read + output written) / median time")
    else:
        name, dtype = "rms_norm", torch.float32
        shapes = [(4096, 256), (1024, 1024), (256, 4096)]
        notes.append("on CPU the Triton kernel runs in the interpreter: it is checked for correctness, not timed")
    fn = ns.get(name)
    if fn is None:
        notes.append(f"the notebook defines no `{name}`")
    gen = torch.Generator().manual_seed(0)
    for n, d in shapes:
        x = torch.randn(n, d, generator=gen).to(device, dtype)  # (rows, D)
        w = torch.randn(d, generator=gen).to(device, dtype)  # (D,)
        theirs = median_ms(F.rms_norm, x, (d,), w, 1e-6)
        mine = _time_or_note(name, fn, (x, w, 1e-6), device, notes) if fn is not None else None
        nbytes = (2 * x.numel() + w.numel()) * x.element_size()  # x read, output written, weight read

        def gbs(ms: float) -> float:
            return round(nbytes / (ms * 1e-3) / 1e9, 2)

        if mine is not None:
            err = (fn(x, w, 1e-6).float() - F.rms_norm(x, (d,), w, 1e-6).float()).abs().max().item()
            if not err <= 0.05:
                notes.append(f"at {(n, d)} your output differs from F.rms_norm by up to {err:.3g}: "
                             f"`course check lesson05` says where")
        rows.append([f"({n}, {d})", "—" if mine is None else round(mine, 3), round(theirs, 3),
                     "—" if mine is None else round(mine / theirs, 2),
                     "—" if mine is None else gbs(mine), gbs(theirs)])
        if mine is None:
            break
    return {"title": f"{name}: yours against torch's F.rms_norm ({device}, {str(dtype).removeprefix('torch.')})",
            "columns": ["shape", "yours (ms)", "torch (ms)", "ratio", "yours (GB/s)", "torch (GB/s)"],
            "rows": rows, "notes": notes}


# The battery re-runs a value check of rms_norm_triton (its first check is about the kernel launch) and of
# RMSNorm (its first check looks at the parameters, on no input). The kernel's rows are 2-D (rows, d).
_ROWS = "its input is 2-D rows (rows, d), with no batch or sequence axis; (5, 7) rows of any length are its base check"
CHECKS.add_battery(base={"rms_norm_triton": "rows of any length (the tail is masked)",
                         "RMSNorm": "loads nn.RMSNorm's state dict and matches its output"},
                   skip={"rms_norm_triton": {"a batch of 1": _ROWS, "sequences of length 1": _ROWS}})
