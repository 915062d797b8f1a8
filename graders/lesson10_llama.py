"""Lesson 10 — a modern decoder: `SwiGLU`, `swiglu_hidden_dim`, `LlamaAttention`, `RollingKVCache`,
`LlamaConfig`, `LlamaBlock`, `Llama`, `load_llama_state_dict`, `filter_logits`, `decoder_costs`.

Reads like the lesson: helpers the probes share (a config without validation, caches and a RoPE of the
grader's own, parameters set by name), then each exercise's probes beside their judges, then the known
mistakes (edits of the solved cells). Probes run in the sandboxed child (student code); judges run in the
parent.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from .engine.compare import close, tolerance
from .engine import CPU, CPU_AND_GPU, GPU_ONLY, Checks, Mistake, WrongResult, expect_value_error, same
from .engine.checks import Arg, Domain
from .engine.probe import relaid
from .interface import PASSED, UPDATE_CALLED, arguments, layout_first, state_layout, update
from . import lm_probes as lm
from .lm_probes import (Cache, cache_judge, call_text, causal_judge, fill_by_name, forward, future_changed,
                        kv_steps, kv_updates, precision_judge, training_steps,
                        TRAINING_COLUMNS, TRAINING_NOTE)

CHECKS = Checks("lesson10")
# What this lesson's checks import lazily (triton),
# imported once by the warm zygote (zygote.preload); tests/e2e/test_warm_imports.py names what is missing.
WARM_IMPORTS = ("triton",)

FORBIDDEN: dict[str, tuple[str, ...]] = {}  # nothing here is a one-call built-in

LLAMA3_8B = dict(vocab_size=128256, block_size=8192, n_layer=32, n_head=32, n_kv_head=8, n_embd=4096,
                 hidden_dim=14336, rope_base=500000.0, norm_eps=1e-5, window=None, tie_embeddings=False)


# ----------------------------------------------------------------------------------------------
# Helpers the probes share


@dataclass
class _Config:
    """LlamaConfig's fields, without the validation that is the LlamaConfig exercise."""

    vocab_size: int = 67
    block_size: int = 24
    n_layer: int = 2
    n_head: int = 6
    n_kv_head: int = 2
    n_embd: int = 36
    hidden_dim: int = 52
    rope_base: float = 10000.0
    norm_eps: float = 1e-5
    window: int | None = None
    tie_embeddings: bool = False


class _Rolling(Cache):
    """The grader's rolling cache, seen from outside: update returns the last `window` positions it had, then
    the new ones; len counts every position. Inside it forgets nothing (a growing cache, whose len is already
    every position), and cuts what it returns out of the whole history."""

    def __init__(self, window):
        super().__init__()
        self.window = window

    def update(self, layer_idx, k, v):
        k_all, v_all = super().update(layer_idx, k, v)
        first = max(k_all.shape[-2] - k.shape[-2] - self.window, 0)  # the oldest position still in the window
        return k_all[..., first:, :], v_all[..., first:, :]


class _Shifted:
    """A cache that claims `start` earlier positions but holds none: it records what it is given."""

    def __init__(self, start):
        self.start, self.given = start, {}

    def update(self, layer_idx, k, v):
        self.given[layer_idx] = (k, v)
        return k, v

    def __len__(self):
        return self.start


def _rope(x, positions, base=10000.0):
    """The grader's own half-split RoPE: pairs (x[i], x[i + D/2]) rotated by position·base^(-2i/D)."""
    D = x.shape[-1]
    inv_freq = base ** (-torch.arange(0, D, 2, dtype=torch.float32, device=x.device) / D)  # (D/2,)
    angles = positions.to(x.device, torch.float32)[:, None] * inv_freq  # (T, D/2)
    cos, sin = angles.cos(), angles.sin()
    a, b = x[..., :D // 2].float(), x[..., D // 2:].float()
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1).to(x.dtype)


def _window_mask(t_q, t_k, window, device=None):
    """Queries last: how far each key lies behind each query's position; a query sees the keys 0 or more
    behind (causal) and, with a window, fewer than `window` behind."""
    behind = (t_k - t_q) + torch.arange(t_q, device=device).unsqueeze(1) - torch.arange(t_k, device=device)
    return (behind >= 0) & (behind < window) if window else behind >= 0


def _fill(model: nn.Module, seed: int) -> nn.Module:
    return fill_by_name(model, seed, ("embed.weight", "lm_head.weight"), 0.5)


def _tokens(ctx, *shape, vocab=67):
    return lm.tokens(ctx, *shape, vocab=vocab)


def _shapes(module: nn.Module) -> dict:
    return {n: list(p.shape) for n, p in module.named_parameters()}


def _shapes_judge(*keys, hint=""):
    def judge(s, r, ctx):
        for key in keys:
            got, want = s[key], r[key]
            if got != want:
                extra = sorted(set(got) - set(want))
                missing = sorted(set(want) - set(got))
                wrong = [f"{n} {got[n]} (expected {want[n]})" for n in sorted(set(got) & set(want)) if got[n] != want[n]]
                why = hint if any(n.endswith("bias") for n in extra) else ""
                return (f"{key}: the parameters should be named and shaped as the course's layout; extra: "
                        f"{extra[:4]}, missing: {missing[:4]}, wrong shape: {wrong[:3]}{why}")
        return None
    return judge


def _precision(ctx, module: nn.Module, run, key: str) -> dict:
    """`run(module, dtype)` on ctx.device in ctx.dtype; in float16/bfloat16 also in float32, the yardstick."""
    obs = {}
    if ctx.dtype != torch.float32:
        obs[f"{key} (float32)"] = run(module.to(ctx.device), torch.float32).float()
    obs[key] = run(module.to(device=ctx.device, dtype=ctx.dtype), ctx.dtype)
    return obs


def _ints_judge(key):
    def judge(s, r, ctx):
        got, want = s[key], r[key]
        for case, value in want.items():
            g = got.get(case) if isinstance(got, dict) else None
            if not isinstance(g, int) or isinstance(g, bool):
                return f"{case}: expected the int {value:,}, got {type(g).__name__} {g!r}"
            if g != value:
                return f"{case}: expected {value:,}, got {g:,}"
        return None
    return judge


# ----------------------------------------------------------------------------------------------
# SwiGLU


@CHECKS.probe("SwiGLU", "gate_proj, up_proj (D → hidden) and down_proj (hidden → D); biases only with bias=True",
              _shapes_judge("bias=False", "bias=True"), CPU,
              rule="work out each one's in and out features from the formula, and pass bias to all three")
def swiglu_names(ctx):
    ctx.manual_seed()
    return {"bias=False": _shapes(ctx.call(ctx.target, 20, 44)),
            "bias=True": _shapes(ctx.call(ctx.target, 20, 44, bias=True))}


@CHECKS.probe("SwiGLU", "output is down_proj(silu(gate_proj(x)) * up_proj(x)) (parameters set by name)",
              precision_judge("output"), CPU_AND_GPU,
              rule="FFN_SwiGLU(x) = (Swish₁(x·W) ⊗ x·V) · W₂")
def swiglu_output(ctx):
    ctx.manual_seed()
    mlp = _fill(ctx.call(ctx.target, 20, 44), ctx.seed)
    x = ctx.randn(3, 7, 20)
    return _precision(ctx, mlp, lambda m, dt: ctx.call(m, x.to(dt)), "output")


@CHECKS.probe("SwiGLU", "gradients match the reference's", same(scale=10), CPU, hidden=True,
              rule="the gradients of x and of every parameter are checked too")
def swiglu_grads(ctx):
    ctx.manual_seed()
    mlp = _fill(ctx.call(ctx.target, 12, 30), ctx.seed)
    x = ctx.randn(2, 5, 12, requires_grad=True)
    ctx.call(mlp, x).pow(2).sum().backward()
    return {"gradient of x": x.grad, **{f"gradient of {n}": p.grad for n, p in mlp.named_parameters()}}


# The declared domain of SwiGLU: both sizes from 1 up to a wide hidden layer, bias on or off, x of any rank
# (the spec's (..., D)), long, in float32 or float64 (the module cast to it), laid out any way, of magnitude
# ~100 (gate pre-activations past 88, where float32's exp overflows and F.silu stays finite); the arguments by
# keyword or in the signature's order; the state_dict's names and shapes.
_SWIGLU_SHAPES = {"(B, T, D)": lambda t, d: (2, t, d), "(D,)": lambda t, d: (d,), "(T, D)": lambda t, d: (t, d),
                  "(B, H, T, D)": lambda t, d: (2, 2, t, d)}
SWIGLU_DOMAIN = Domain(
    args=(Arg("d_model, hidden_dim", ("20, 44", "1, 1", "64, 172")), Arg("bias", (False, True)),
          Arg("shape of x", tuple(_SWIGLU_SHAPES)), Arg("T", (7, 1, 256)), Arg("scale of x", (1.0, 100.0)), PASSED),
    dtypes=(("x", ("float32", "float64")),), layouts=(("x", ("contiguous", "transposed", "strided")),), examples=4)


@CHECKS.domain("SwiGLU", SWIGLU_DOMAIN, layout_first(same("output"), who="SwiGLU"))
def swiglu_domain(ctx, ex):
    ctx.manual_seed()
    d, hidden = (int(n) for n in ex["d_model, hidden_dim"].split(", "))
    dtype = getattr(torch, ex["dtype of x"])
    args, kwargs = arguments(("bias",), {"bias": ex["bias"]}, {}, ex["passed"])
    mlp = ctx.call(ctx.target, d, hidden, *args, **kwargs)
    layout = state_layout(mlp)
    mlp = _fill(mlp, ctx.seed).to(dtype)
    x = ctx.randn(*_SWIGLU_SHAPES[ex["shape of x"]](ex["T"], d), scale=ex["scale of x"])
    x = relaid(x.to(dtype), ex["layout of x"])
    return {"output": ctx.call(mlp, x), "state_dict": layout}


# ----------------------------------------------------------------------------------------------
# swiglu_hidden_dim

_HIDDEN_CASES = (("Llama 2 7B: d_model=4096", (4096,), {}), ("Llama 2 13B: d_model=5120", (5120,), {}),
                 ("Llama 3 8B: 4096, multiple_of=1024, ffn_dim_multiplier=1.3", (4096,),
                  {"multiple_of": 1024, "ffn_dim_multiplier": 1.3}),
                 ("Llama 3 70B: 8192, multiple_of=4096, ffn_dim_multiplier=1.3", (8192,),
                  {"multiple_of": 4096, "ffn_dim_multiplier": 1.3}),
                 ("d_model=128, multiple_of=64", (128,), {"multiple_of": 64}),
                 ("d_model=96, multiple_of=1", (96,), {"multiple_of": 1}),
                 ("d_model=3, multiple_of=8", (3,), {"multiple_of": 8}),
                 ("d_model=768, multiple_of=256, ffn_dim_multiplier=0.5", (768,), {"ffn_dim_multiplier": 0.5}))


@CHECKS.probe("swiglu_hidden_dim", "Llama's published widths (11008, 13824, 14336, 28672) and small cases",
              _ints_judge("widths"), CPU,
              rule="the width that matches a 4·d_model MLP's parameters, widened by ffn_dim_multiplier if given, "
                   "then rounded up to a multiple of multiple_of")
def hidden_values(ctx):
    return {"widths": {name: ctx.call(ctx.target, *args, **kwargs) for name, args, kwargs in _HIDDEN_CASES}}


def _hidden_bad_judge(s, r, ctx):
    return (expect_value_error(s["d_model=0"], "swiglu_hidden_dim(0)", "d_model")
            or expect_value_error(s["d_model=-8"], "swiglu_hidden_dim(-8)", "d_model")
            or expect_value_error(s["multiple_of=0"], "swiglu_hidden_dim(64, multiple_of=0)", "multiple_of")
            or expect_value_error(s["multiple_of=-4"], "swiglu_hidden_dim(64, multiple_of=-4)", "multiple_of"))


@CHECKS.probe("swiglu_hidden_dim", "ValueError for d_model or multiple_of below 1", _hidden_bad_judge, CPU,
              hidden=True, rule="ValueError for a d_model or multiple_of below 1, the message naming the argument")
def hidden_bad(ctx):
    return {"d_model=0": ctx.raised(ctx.target, 0), "d_model=-8": ctx.raised(ctx.target, -8),
            "multiple_of=0": ctx.raised(ctx.target, 64, 0), "multiple_of=-4": ctx.raised(ctx.target, 64, -4)}


# The declared domain of swiglu_hidden_dim: widths from 1 to Llama 3 70B's, every multiple_of from 1 (no rounding,
# where the order of the two truncations shows) to 4096, with and without a multiplier (below and above 1).
HIDDEN_DOMAIN = Domain(
    args=(Arg("d_model", (4096, 1, 3, 768, 5120, 8192)),
          Arg("multiple_of, ffn_dim_multiplier", ("256, None", "1, None", "8, None", "1024, 1.3", "4096, 1.3",
                                                  "1, 1.3", "256, 0.5", "1, 2.0")), PASSED),
    examples=6, tensors=False)


@CHECKS.domain("swiglu_hidden_dim", HIDDEN_DOMAIN, _ints_judge("width"))
def hidden_domain(ctx, ex):
    multiple, mult = ex["multiple_of, ffn_dim_multiplier"].split(", ")
    args, kwargs = arguments(("multiple_of", "ffn_dim_multiplier"), {
        "multiple_of": int(multiple), "ffn_dim_multiplier": None if mult == "None" else float(mult)}, {}, ex["passed"])
    width = ctx.call(ctx.target, ex["d_model"], *args, **kwargs)
    return {"width": {"the width": width}}


# ----------------------------------------------------------------------------------------------
# LlamaAttention (and its sliding_window_mask)


def _attention(ctx, kv=2, window=None, d=36, heads=6):
    ctx.manual_seed()
    return _fill(ctx.call(ctx.get("LlamaAttention"), d, heads, kv, window=window), ctx.seed).eval()


@CHECKS.probe("LlamaAttention", "q_proj (D→D), k_proj and v_proj (D→num_kv_heads·Dh), out_proj; no biases",
              _shapes_judge("num_kv_heads=2", "num_kv_heads=1",
                            hint=". Llama has no biases: nn.Linear(..., bias=False) everywhere"), CPU,
              rule="q_proj (D → D), k_proj and v_proj (D → num_kv_heads·Dh), out_proj (D → D), no biases")
def attn_names(ctx):
    ctx.manual_seed()
    return {"num_kv_heads=2": _shapes(ctx.call(ctx.target, 36, 6, 2)),
            "num_kv_heads=1": _shapes(ctx.call(ctx.target, 36, 6, 1))}


# Each input breaks one rule the spec lists, and its label names that rule.
_ATTN_BAD = (("num_heads=5 does not divide d_model=36", (36, 5, 5), "num_heads"),
             ("num_kv_heads=4 does not divide num_heads=6", (36, 6, 4), "num_kv_heads"),
             ("head size 30 / 6 = 5 is odd (RoPE rotates pairs)", (30, 6, 2), None))


def _attn_bad_judge(s, r, ctx):
    for label, args, name in _ATTN_BAD:
        msg = expect_value_error(s[label], f"LlamaAttention{args} ({label})", name)
        if msg:
            return msg
    return None


@CHECKS.probe("LlamaAttention", "ValueError when num_heads does not divide d_model, num_kv_heads does not divide "
              "num_heads, or the head size is odd", _attn_bad_judge, CPU,
              rule="Three ValueErrors, each naming what it checks: num_heads does not divide d_model; num_kv_heads "
                   "does not divide num_heads; the head size Dh = d_model / num_heads is odd")
def attn_bad(ctx):
    return {label: ctx.raised(ctx.target, *args) for label, args, _ in _ATTN_BAD}


def _gqa_hint(s, r):
    keys = ("output (num_kv_heads=1)", "output (num_kv_heads=2)", "output (num_kv_heads=6)")
    ok = [isinstance(s.get(k), torch.Tensor) and s[k].shape == r[k].shape and torch.allclose(s[k], r[k], atol=1e-4)
          for k in keys]
    if ok == [True, False, True]:
        return (". Only the grouped case (1 < num_kv_heads < num_heads) is wrong: query head h must read KV head "
                "h // n_rep (repeat each KV head n_rep times in a row, as repeat_kv does)")
    return ""


@CHECKS.probe("LlamaAttention", "output matches the reference with 1, some and all KV heads (parameters set by name)",
              precision_judge("output (num_kv_heads=1)", "output (num_kv_heads=2)", "output (num_kv_heads=6)",
                               hint=_gqa_hint), CPU_AND_GPU,
              rule="Causal grouped-query self-attention with RoPE (half-split) on q and k")
def attn_output(ctx):
    x = ctx.randn(2, 9, 36)
    obs = {}
    for kv in (1, 2, 6):
        obs.update(_precision(ctx, _attention(ctx, kv), lambda m, dt: ctx.call(m, x.to(dt)),
                              f"output (num_kv_heads={kv})"))
    return obs


def _attn_cache_judge(s, r, ctx):
    full, pieces = s["full forward"], s["through the cache"]
    if not isinstance(pieces, torch.Tensor) or not isinstance(full, torch.Tensor) or pieces.shape != full.shape:
        return close(pieces, r["through the cache"], "output through the cache")
    msg = close(pieces, full, "output fed through a cache (4 positions, then 2, then one at a time) against "
                "your own full forward", tol=ctx.tol.scaled(5))
    if msg:
        return msg + ("; the first chunk agrees: do the positions of later chunks start at len(cache)?"
                      if torch.allclose(pieces[:, :4], full[:, :4], atol=1e-4) else "")
    return None


@CHECKS.probe("LlamaAttention", "output through a cache, fed in pieces, equals the full forward",
              _attn_cache_judge, CPU,
              rule="fed through a cache in pieces, the outputs equal those of one call on the whole sequence")
def attn_cache(ctx):
    attn = _attention(ctx, 2)
    x = ctx.randn(2, 10, 36)
    full = ctx.call(attn, x)
    cache = Cache()
    pieces = [ctx.call(attn, chunk, cache=cache, layer_idx=0) for chunk in (x[:, :4], x[:, 4:6], *x[:, 6:].split(1, 1))]
    return {"full forward": full, "through the cache": torch.cat(pieces, dim=1)}


# The declared domain of LlamaAttention: every __init__ argument (rope_base and window included) and every
# forward argument (a cache, a layer past 0, an explicit start), sizes from one position up, x laid out any way;
# the calls a LlamaBlock and a Llama make (composition) are among them; at start 5000 the module and x in
# bfloat16 too (the positions, and RoPE's angles, computed in float32 whatever x's dtype, as lesson 06 does).
ATTN_DOMAIN = Domain(
    args=(Arg("d_model, num_heads", ("36, 6", "24, 2", "8, 2")), Arg("num_kv_heads", (2, 1, "num_heads")),
          Arg("rope_base", (10000.0, 500000.0, 10.0)), Arg("window", (None, 1, 3)),
          Arg("B", (2, 1)), Arg("T", (5, 1, 24)), Arg("cache", ("none", "cache, 3 cached", "cache, 0 cached")),
          Arg("layer_idx", (0, 1)), Arg("start", ("from the cache", "given: 7", "given: 0, 3 cached", "given: 5000")),
          PASSED),
    layouts=(("x", ("contiguous", "transposed", "strided")),), examples=3)


def _attn_domain_judge(s, r, ctx):
    """The output as the reference's; at position 5000 also in bfloat16 (module and x), within bfloat16's
    tolerance: positions held in x's dtype round to multiples of 32 there, and RoPE turns by the wrong angles."""
    msg = same("output")(s, r, ctx)
    if msg or "output, module and x in bfloat16" not in r:
        return msg
    return close(s.get("output, module and x in bfloat16"), r["output, module and x in bfloat16"],
                 "output, module and x in bfloat16", tol=tolerance(torch.bfloat16).scaled(4))


@CHECKS.domain("LlamaAttention", ATTN_DOMAIN, layout_first(_attn_domain_judge, who="LlamaAttention"))
def attn_domain(ctx, ex):
    ctx.manual_seed()
    d, heads = (int(n) for n in ex["d_model, num_heads"].split(", "))
    kv = heads if ex["num_kv_heads"] == "num_heads" else ex["num_kv_heads"]
    a, kw = arguments(("rope_base", "window"), {"rope_base": ex["rope_base"], "window": ex["window"]}, {},
                      ex["passed"])
    attn = ctx.call(ctx.target, d, heads, kv, *a, **kw)
    layout = {"state_dict": state_layout(attn)}
    attn = _fill(attn, ctx.seed).eval()
    x = relaid(ctx.randn(ex["B"], ex["T"], d), ex["layout of x"])
    kwargs = {"layer_idx": ex["layer_idx"]}
    if ex["start"] != "from the cache":  # 0 is a start, not "no start"; 5000: past any table a student might cap
        kwargs["start"] = int(ex["start"].split(",")[0].removeprefix("given: "))
    if ex["cache"] == "none" and ex["start"] != "given: 0, 3 cached":
        obs = {"output": _forward_call(ctx, attn, x, kwargs, ex["passed"]), **layout}
        if ex["start"] == "given: 5000":  # half precision where positions in x's dtype lose their digits
            half = copy.deepcopy(attn).to(torch.bfloat16)
            obs["output, module and x in bfloat16"] = _forward_call(ctx, half, x.to(torch.bfloat16), kwargs,
                                                                    ex["passed"])
        return obs
    cache = _Rolling(ex["window"]) if ex["window"] else Cache()
    if ex["cache"] != "cache, 0 cached":  # 3 cached
        for layer in range(ex["layer_idx"] + 1):  # the layers below have cached theirs, as in a model
            ctx.call(attn, ctx.randn(ex["B"], 3, d), cache=cache, layer_idx=layer)
    return {"output": _forward_call(ctx, attn, x, {"cache": cache, **kwargs}, ex["passed"]), **layout}


def _forward_call(ctx, module, x, given: dict, passed: str):
    """`module(x, ...)` with the forward arguments `given` of (cache, layer_idx, start): by keyword, or all three
    positionally in the signature's order, the ones not given at their defaults (cache and start None, given
    explicitly: the course's own block and model pass them so)."""
    args, kwargs = arguments(("cache", "layer_idx", "start"), given, {"cache": None, "layer_idx": 0, "start": None},
                             passed)
    return ctx.call(module, x, *args, **kwargs)


def _absolute_judge(s, r, ctx):
    for key, why in (("values given to the cache", "RoPE rotates q and k only: v goes into the cache as v_proj "
                      "made it"),
                     ("keys given to the cache", "the keys should be rotated at their absolute positions, "
                      "len(cache) = 37 onwards, before they go into the cache")):
        msg = close(s[key], r[key], key)
        if msg:
            return f"{msg}. {why}"
    msg = close(s["output at positions 37..43"], s["output at positions 0..6"],
                "the output at positions 37..43 against the same input at positions 0..6", tol=ctx.tol.scaled(5))
    if msg:
        return msg + ": with RoPE only relative positions matter, so shifting every position must change nothing"
    return None


@CHECKS.probe("LlamaAttention", "RoPE at absolute positions: keys cached rotated at len(cache) onwards, v untouched, "
              "a shift changes nothing", _absolute_judge, CPU,
              rule="the keys that go into the cache are rotated at those absolute positions, once")
def attn_absolute(ctx):
    attn = _attention(ctx, 2)
    x = ctx.randn(2, 7, 36)
    shifted = _Shifted(37)
    out = ctx.call(attn, x, cache=shifted, layer_idx=0)
    k, v = shifted.given.get(0, (None, None))
    return {"keys given to the cache": k, "values given to the cache": v,
            "output at positions 37..43": out, "output at positions 0..6": ctx.call(attn, x)}


def _mask_judge(s, r, ctx):
    for key, want in r.items():
        got = s[key]
        if not isinstance(got, torch.Tensor) or got.dtype != torch.bool:
            return f"sliding_window_mask({key}) should be a bool tensor, got {type(got).__name__}"
        msg = close(got, want, f"sliding_window_mask({key})")
        if msg:
            rows = got.sum(-1).tolist()
            return f"{msg}; the keys each query sees: {rows}, expected {want.sum(-1).tolist()}"
    return None


@CHECKS.probe("LlamaAttention", "sliding_window_mask: causal, queries last, each sees at most `window` keys",
              _mask_judge, CPU,
              rule="The queries are the last t_q of the t_k key positions; each sees itself and the keys before it, "
                   "at most window keys in all")
def attn_mask(ctx):
    mask = ctx.get("sliding_window_mask")
    cases = ((5, 5, None), (3, 8, None), (6, 6, 3), (4, 9, 3), (5, 5, 1))
    return {f"{q}, {k}, window={w}": ctx.call(mask, q, k, w) for q, k, w in cases}


def _window_judge(s, r, ctx):
    msg = same("output (window=3)")(s, r, ctx)
    if msg:
        return msg + ": with window=3 each query sees itself and the 2 keys before it"
    return close(s["through a rolling cache (window=3)"], s["output (window=3)"],
                 "window=3 output through a rolling cache, one position at a time, against your full forward",
                 tol=ctx.tol.scaled(5))


@CHECKS.probe("LlamaAttention", "window=3: the output matches, with and without a rolling cache", _window_judge, CPU,
              rule="With window=W each query sees at most the last W keys, its own included")
def attn_window(ctx):
    attn = _attention(ctx, 2, window=3)
    x = ctx.randn(2, 9, 36)
    cache = _Rolling(3)
    pieces = [ctx.call(attn, chunk, cache=cache, layer_idx=0) for chunk in (x[:, :4], *x[:, 4:].split(1, 1))]
    return {"output (window=3)": ctx.call(attn, x), "through a rolling cache (window=3)": torch.cat(pieces, 1)}


@CHECKS.probe("LlamaAttention", "gradients match the reference's", same(scale=10), CPU, hidden=True,
              rule="the gradients of x and of every parameter are checked too")
def attn_grads(ctx):
    attn = _attention(ctx, 2)
    x = ctx.randn(2, 6, 36, requires_grad=True)
    ctx.call(attn, x).pow(2).sum().backward()
    return {"gradient of x": x.grad, **{f"gradient of {n}": p.grad for n, p in attn.named_parameters()}}


def _fast_judge(s, r, ctx):
    return close(s["output"], r["torch's fused SDPA with enable_gqa"],
                 f"output in {ctx.config.dtype} against SDPA's fused kernels (enable_gqa=True)",
                 tol=ctx.tol.scaled(5), check_dtype=False)


@CHECKS.probe("LlamaAttention", "on a GPU in float16/bfloat16: matches SDPA's fused kernels with enable_gqa",
              _fast_judge, GPU_ONLY,
              rule="On a GPU, in float16 and bfloat16, the output is compared with SDPA's fused kernels (with "
                   "enable_gqa=True)")
def attn_fast_path(ctx):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    attn = _attention(ctx, 2, d=64, heads=8).to(ctx.device, ctx.dtype)  # head size 8: the fused kernels' minimum
    x = ctx.randn(2, 33, 64)
    out = ctx.call(attn, x)
    with torch.no_grad():  # the same weights through torch's own path: GQA inside SDPA, no repeat
        B, T, _ = x.shape
        pos = torch.arange(T, device=ctx.device)
        q = _rope(attn.q_proj(x).view(B, T, 8, 8).transpose(1, 2), pos)
        k = _rope(attn.k_proj(x).view(B, T, 2, 8).transpose(1, 2), pos)
        v = attn.v_proj(x).view(B, T, 2, 8).transpose(1, 2)
        try:
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION]):
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        except RuntimeError:  # no fused kernel for this build: torch's default choice
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        fast = attn.out_proj(y.transpose(1, 2).reshape(B, T, 64))
    return {"output": out, "torch's fused SDPA with enable_gqa": fast}


# ----------------------------------------------------------------------------------------------
# RollingKVCache


def _steps(ctx):
    return kv_steps(ctx, (3, 2, 1, 4, 1))


@CHECKS.probe("RollingKVCache", "update returns the kept positions then the new ones, and keeps the newest `window`",
              same(), CPU,
              rule="Return the kept positions followed by the new k, v (B, H, T_new, Dh); then keep the last window")
def rolling_update(ctx):
    return kv_updates(ctx, ctx.call(ctx.target, 4), _steps(ctx), "{what} returned for layer {layer} at step {step}")


def _len_judge(s, r, ctx):
    if s["lengths"] != r["lengths"]:
        return (f"len(cache) should count every position seen (the next RoPE offset), not the kept ones: with "
                f"window=4, after steps of 3, 2, 1, 4 and 1 positions it should read {r['lengths']}; yours read "
                f"{s['lengths']}")
    return None


@CHECKS.probe("RollingKVCache", "len(cache) counts every position seen, past the window too", _len_judge, CPU,
              rule="len(cache) counts every position seen, not the kept ones")
def rolling_len(ctx):
    cache = ctx.call(ctx.target, 4)
    lengths = [len(cache)]
    for layers in _steps(ctx):
        for layer, (k, v) in enumerate(layers):
            ctx.call(cache.update, layer, k, v)
        lengths.append(len(cache))
    return {"lengths": lengths}


def _mini_attention(weights, x, cache, window):
    """Two layers of single-head windowed attention with RoPE at len(cache) (the grader's own)."""
    B, T, d = x.shape
    pos = torch.arange(T) + (0 if cache is None else len(cache))  # continue after the cached positions
    for layer, (wq, wk, wv) in enumerate(weights):
        q, k, v = _rope((x @ wq)[:, None], pos), _rope((x @ wk)[:, None], pos), (x @ wv)[:, None]  # (B, 1, T, d)
        if cache is not None:
            k, v = cache.update(layer, k, v)
        mask = _window_mask(T, k.shape[-2], window)
        x = x + F.scaled_dot_product_attention(q, k, v, attn_mask=mask)[:, 0]
    return x


def _rolling_model_judge(s, r, ctx):
    msg = close(s["through your cache"], r["full forward with the sliding-window mask"],
                "a windowed attention fed through your cache (5 positions, then one at a time) against the full "
                "forward with a sliding-window mask", tol=ctx.tol.scaled(5))
    if msg:
        pieces, full = s["through your cache"], r["full forward with the sliding-window mask"]
        if isinstance(pieces, torch.Tensor) and pieces.shape == full.shape:
            bad = ((pieces - full).abs().amax(dim=(0, 2)) > 1e-3).nonzero().flatten().tolist()
            msg += f"; positions {bad[:6]} differ"
    return msg


@CHECKS.probe("RollingKVCache", "a windowed attention through the cache equals the full sliding-window forward",
              _rolling_model_judge, CPU,
              rule="so that a chunk of several new queries (a prompt) sees every key it may attend to")
def rolling_model(ctx):
    d, window = 8, 4
    weights = [tuple(ctx.randn(d, d, scale=1 / math.sqrt(d)) for _ in range(3)) for _layer in range(2)]
    x = ctx.randn(2, 14, d)
    cache = ctx.call(ctx.target, window)
    pieces = [_mini_attention(weights, chunk, cache, window) for chunk in (x[:, :5], *x[:, 5:].split(1, 1))]
    return {"through your cache": torch.cat(pieces, 1),
            "full forward with the sliding-window mask": _mini_attention(weights, x, None, window)}


def _rolling_bad_judge(s, r, ctx):
    for window in (0, -3):
        msg = expect_value_error(s[f"window={window}"], f"RollingKVCache({window})", "window")
        if msg:
            return msg
    return None


@CHECKS.probe("RollingKVCache", "ValueError for a window below 1", _rolling_bad_judge, CPU, hidden=True,
              rule="ValueError for a window below 1, the message naming window")
def rolling_bad(ctx):
    return {"window=0": ctx.raised(ctx.target, 0), "window=-3": ctx.raised(ctx.target, -3)}


# The declared domain of RollingKVCache: windows from 1 to past every position given, chunks that pass the window
# one at a time or all at once, one to three layers, any (B, H, Dh), float32 or float64, k and v each laid out
# any way, and two caches used in turn (each keeps its own positions: no state shared between instances); the
# cache made as `RollingKVCache(window)` or `RollingKVCache(window=...)`, and `update(layer_idx, k, v)` called
# positionally or by its parameters' names.
_ROLLING_STEPS = {"3, 2, 1, 4, 1": (3, 2, 1, 4, 1), "one at a time, 9 times": (1,) * 9,
                  "12 at once, then 1, 1": (12, 1, 1), "5, 5, 5": (5, 5, 5)}
ROLLING_DOMAIN = Domain(
    args=(Arg("window", (4, 1, 3, 32)), Arg("steps", tuple(_ROLLING_STEPS)), Arg("layer_idx", ("0, 1", "0", "0, 1, 2")),
          Arg("B, H, Dh", ("2, 3, 5", "1, 1, 8")), Arg("caches", ("one", "two, used in turn")),
          Arg("window given", ("positionally", "by keyword (window=)")), UPDATE_CALLED),
    dtypes=(("k, v", ("float32", "float64")),),
    layouts=(("k", ("contiguous", "transposed", "strided")), ("v", ("contiguous", "transposed", "strided"))),
    examples=4)


def _rolling_domain_judge(s, r, ctx):
    if s["lengths"] != r["lengths"]:
        return f"len(cache) after each step read {s['lengths']}, expected {r['lengths']} (every position seen)"
    for key, want in r.items():
        if isinstance(want, torch.Tensor):
            msg = close(s.get(key), want, key)
            if msg:
                return msg
    return None


@CHECKS.domain("RollingKVCache", ROLLING_DOMAIN, _rolling_domain_judge)
def rolling_domain(ctx, ex):
    B, H, Dh = (int(n) for n in ex["B, H, Dh"].split(", "))
    layers = [int(n) for n in ex["layer_idx"].split(", ")]
    dtype = getattr(torch, ex["dtype of k, v"])
    names = ("A", "B") if ex["caches"] != "one" else ("A",)
    by_name = ex["window given"] != "positionally"
    caches = {name: ctx.call(ctx.target, window=ex["window"]) if by_name else ctx.call(ctx.target, ex["window"])
              for name in names}
    obs, lengths = {}, {name: [] for name in names}
    for step, t in enumerate(_ROLLING_STEPS[ex["steps"]]):
        for name, cache in caches.items():  # in turn: A's layers, then B's, step by step
            for layer in layers:
                k = relaid(ctx.randn(B, H, t, Dh).to(dtype), ex["layout of k"])
                v = relaid(ctx.randn(B, H, t, Dh).to(dtype), ex["layout of v"])
                k_all, v_all = ctx.unpack(update(ctx, cache, ex, layer, k, v), 2, "a pair (k_all, v_all)")
                obs[f"cache {name}: keys returned for layer {layer} at step {step + 1}"] = k_all
                obs[f"cache {name}: values returned for layer {layer} at step {step + 1}"] = v_all
            lengths[name].append(len(cache))
    obs["lengths"] = lengths if len(names) > 1 else lengths["A"]
    return obs


# ----------------------------------------------------------------------------------------------
# LlamaConfig

_REQUIRED = dict(vocab_size=67, block_size=24, n_layer=2, n_head=6, n_kv_head=2, n_embd=36, hidden_dim=52)
_BAD_CONFIGS = (({"vocab_size": 0}, "vocab_size"), ({"block_size": 0}, "block_size"), ({"n_layer": 0}, "n_layer"),
                ({"n_kv_head": 0}, "n_kv_head"), ({"hidden_dim": -1}, "hidden_dim"),
                ({"n_embd": 30}, "n_embd"), ({"n_embd": 30, "n_head": 10, "n_kv_head": 5}, "n_embd"),
                ({"n_kv_head": 4}, "n_kv_head"), ({"window": 0}, "window"), ({"norm_eps": 0.0}, "norm_eps"))


def _config_judge(s, r, ctx):
    if s["is a dataclass"] is not True:
        return "LlamaConfig should stay a @dataclass"
    for key in ("defaults", "custom"):
        if s[key] != r[key]:
            diff = [f"{k}={s[key].get(k)!r} (expected {v!r})" for k, v in r[key].items() if s[key].get(k) != v]
            return f"LlamaConfig's fields ({key}): " + ", ".join(diff)
    for kwargs, name in _BAD_CONFIGS:
        msg = expect_value_error(s[call_text(kwargs)], f"LlamaConfig(..., {call_text(kwargs)})", name)
        if msg:
            return msg
    return None


@CHECKS.probe("LlamaConfig", "the fields and defaults; impossible configs raise ValueError naming the field",
              _config_judge, CPU,
              rule="A dataclass whose __post_init__ raises ValueError, naming the field, for a size below 1")
def config_fields(ctx):
    custom = dict(_REQUIRED, rope_base=500000.0, norm_eps=1e-6, window=8, tie_embeddings=True)
    return lm.config_fields(ctx, _Config, _REQUIRED, custom, _BAD_CONFIGS)


# The declared domain of LlamaConfig: every field at a non-default value and at the edges of its valid range
# (sizes of 1, MHA and MQA, a head size of 2, an odd n_head, a window of 1 and past block_size, a tiny norm_eps),
# each of which must be accepted and kept as given; and just past each rule the exercise states (a size of 0,
# an n_embd not divisible by n_head whose floor quotient is even, an odd head size, an n_kv_head that does not
# divide n_head, a window of 0 and below, a norm_eps of 0 and below), each of which must raise ValueError naming
# a field it breaks. Built by keyword, or positionally in the fields' order.
CONFIG_DOMAIN = Domain(
    args=(Arg("vocab_size", (67, 1, 128256, 0)), Arg("block_size", (24, 1, 8192, 0)), Arg("n_layer", (2, 1, 32, 0)),
          Arg("n_head, n_kv_head, n_embd", ("6, 2, 36", "6, 6, 36", "6, 1, 36", "1, 1, 2", "3, 3, 12", "32, 8, 4096",
                                            "0, 1, 36", "6, 0, 36", "6, 2, 0", "6, 2, 40", "6, 2, 30", "6, 4, 36")),
          Arg("hidden_dim", (52, 1, 14336, 0)), Arg("rope_base", (10000.0, 500000.0, 10.0)),
          Arg("norm_eps", (1e-5, 1e-6, 1e-12, 0.5, 0.0, -1e-5)), Arg("window", (None, 1, 24, 4096, 0, -2)),
          Arg("tie_embeddings", (False, True)), PASSED),
    examples=6, tensors=False)

# The fields in the order the lesson lists them (and the dataclass it gives): a positional call's order.
_CONFIG_ORDER = ("vocab_size", "block_size", "n_layer", "n_head", "n_kv_head", "n_embd", "hidden_dim", "rope_base",
                 "norm_eps", "window", "tie_embeddings")


def _invalid_fields(kw: dict) -> list[str]:
    """The fields the exercise's rules reject in `kw`, derived from the rules as the lesson states them."""
    bad = [n for n in ("vocab_size", "block_size", "n_layer", "n_head", "n_kv_head", "n_embd", "hidden_dim")
           if kw[n] < 1]
    if kw["n_head"] >= 1 and kw["n_embd"] >= 1 and (kw["n_embd"] % kw["n_head"] or (kw["n_embd"] // kw["n_head"]) % 2):
        bad.append("n_embd")  # not divisible by n_head, or an odd head size
    if kw["n_head"] >= 1 and kw["n_kv_head"] >= 1 and kw["n_head"] % kw["n_kv_head"]:
        bad.append("n_kv_head")
    if kw["window"] is not None and kw["window"] < 1:
        bad.append("window")
    if not kw["norm_eps"] > 0:
        bad.append("norm_eps")
    return bad


@CHECKS.domain("LlamaConfig", CONFIG_DOMAIN, lm.config_domain_judge("LlamaConfig"))
def config_domain(ctx, ex):
    heads, kv, d = (int(n) for n in ex["n_head, n_kv_head, n_embd"].split(", "))
    kw = {k: v for k, v in ex.items() if k not in ("n_head, n_kv_head, n_embd", "passed")}
    kw = {**kw, "n_head": heads, "n_kv_head": kv, "n_embd": d}
    return lm.config_made(ctx, _Config, _CONFIG_ORDER, kw, ex["passed"], _invalid_fields(kw))


# ----------------------------------------------------------------------------------------------
# LlamaBlock


def _block(ctx, **overrides):
    ctx.manual_seed()
    return _fill(ctx.call(ctx.get("LlamaBlock"), _Config(**overrides)), ctx.seed).eval()


@CHECKS.probe("LlamaBlock", "ln1, attn (q/k/v/out_proj), ln2, mlp (gate/up/down_proj); no biases",
              _shapes_judge("parameters"), CPU,
              rule="ln1 and ln2 (lesson 05's RMSNorm, with the config's norm_eps), attn (your LlamaAttention, every "
                   "argument taken from the config) and mlp (your SwiGLU, hidden_dim wide)")
def block_names(ctx):
    ctx.manual_seed()
    return {"parameters": _shapes(ctx.call(ctx.target, _Config()))}


@CHECKS.probe("LlamaBlock", "pre-norm output x + attn(ln1(x)), then + mlp(ln2(x)) (parameters set by name)",
              precision_judge("output"), CPU_AND_GPU,
              rule="each sub-layer reads a normalised copy of the residual stream and adds its output back")
def block_output(ctx):
    block = _block(ctx)
    x = ctx.randn(2, 8, 36)
    return _precision(ctx, block, lambda m, dt: ctx.call(m, x.to(dt)), "output")


def _block_cache_judge(s, r, ctx):
    return close(s["through the cache"], s["full forward"], "the block's output through a cache (5 positions, then "
                 "one at a time) against its full forward", tol=ctx.tol.scaled(5))


@CHECKS.probe("LlamaBlock", "output through a cache equals the full forward", _block_cache_judge, CPU,
              rule="The cache arguments are the attention's; pass them through")
def block_cache(ctx):
    block = _block(ctx)
    x = ctx.randn(2, 8, 36)
    cache = Cache()
    pieces = [ctx.call(block, chunk, cache=cache, layer_idx=0) for chunk in (x[:, :5], *x[:, 5:].split(1, 1))]
    return {"full forward": ctx.call(block, x), "through the cache": torch.cat(pieces, 1)}


# The declared domain of LlamaBlock: the config fields a block reads (the others, vocab_size, block_size,
# n_layer and tie_embeddings, are the model's), and the calls a Llama makes: a cache at layer i, a window, start.
BLOCK_DOMAIN = Domain(
    args=(Arg("config.n_head, config.n_kv_head", ("6, 2", "6, 1", "6, 6")),
          Arg("config.n_embd, config.hidden_dim", ("36, 52", "12, 20")),
          Arg("config.rope_base", (10000.0, 500000.0)), Arg("config.norm_eps", (1e-5, 0.5)),
          Arg("config.window", (None, 2)), Arg("T", (5, 1, 24)), Arg("cache", ("none", "cache, 3 cached")),
          Arg("layer_idx", (0, 1)), Arg("start", ("from the cache", "given: 7", "given: 0, 3 cached", "given: 5000")),
          PASSED),
    layouts=(("x", ("contiguous", "transposed")),), examples=2)


@CHECKS.domain("LlamaBlock", BLOCK_DOMAIN, layout_first(same("output"), who="LlamaBlock"))
def block_domain(ctx, ex):
    heads, kv = (int(n) for n in ex["config.n_head, config.n_kv_head"].split(", "))
    d, hidden = (int(n) for n in ex["config.n_embd, config.hidden_dim"].split(", "))
    block = _block(ctx, n_head=heads, n_kv_head=kv, n_embd=d, hidden_dim=hidden, rope_base=ex["config.rope_base"],
                   norm_eps=ex["config.norm_eps"], window=ex["config.window"])
    layout = {"state_dict": state_layout(block)}
    x = relaid(ctx.randn(2, ex["T"], d), ex["layout of x"])
    kwargs = {"layer_idx": ex["layer_idx"]}
    if ex["start"] != "from the cache":  # 0 is a start, not "no start"; 5000: past any table a student might cap
        kwargs["start"] = int(ex["start"].split(",")[0].removeprefix("given: "))
    if ex["cache"] == "none" and ex["start"] != "given: 0, 3 cached":
        return {"output": _forward_call(ctx, block, x, kwargs, ex["passed"]), **layout}
    cache = _Rolling(ex["config.window"]) if ex["config.window"] else Cache()
    for layer in range(ex["layer_idx"] + 1):  # the layers below have cached theirs, as in a model
        ctx.call(block, ctx.randn(2, 3, d), cache=cache, layer_idx=layer)
    return {"output": _forward_call(ctx, block, x, {"cache": cache, **kwargs}, ex["passed"]), **layout}


# ----------------------------------------------------------------------------------------------
# Llama


def _llama(ctx, **overrides):
    ctx.manual_seed()
    return _fill(ctx.call(ctx.get("Llama"), _Config(**overrides)), ctx.seed).eval()


def _llama_names_judge(s, r, ctx):
    msg = _shapes_judge("untied", "tied")(s, r, ctx)
    if msg:
        return msg
    if not s["tied: lm_head.weight is embed.weight"]:
        return ("with tie_embeddings=True, lm_head.weight should be the very Parameter embed.weight: "
                "assign the Parameter `embed.weight` itself to `lm_head.weight`")
    if s["untied: lm_head.weight is embed.weight"]:
        return "with tie_embeddings=False (the default), the head should have a weight of its own"
    return None


@CHECKS.probe("Llama", "embed, blocks.{i}.*, norm, lm_head; no position table; tied only when asked",
              _llama_names_judge, CPU,
              rule="embed (nn.Embedding(vocab_size, n_embd)), blocks (an nn.ModuleList of LlamaBlock), norm "
                   "(RMSNorm), lm_head (nn.Linear(n_embd, vocab_size, bias=False), the very Parameter embed.weight "
                   "when tie_embeddings). No position embedding.")
def llama_names(ctx):
    ctx.manual_seed()
    untied = ctx.call(ctx.target, _Config())
    tied = ctx.call(ctx.target, _Config(tie_embeddings=True))
    return {"untied": _shapes(untied), "tied": _shapes(tied),
            "tied: lm_head.weight is embed.weight": tied.lm_head.weight is tied.embed.weight,
            "untied: lm_head.weight is embed.weight": untied.lm_head.weight is untied.embed.weight}


@CHECKS.probe("Llama", "logits and loss match the reference (parameters set by name)",
              precision_judge("logits", "loss"), CPU_AND_GPU,
              rule="Logits (B, T, vocab_size) for idx (B, T) and the mean cross-entropy against targets when given")
def llama_logits(ctx):
    model = _llama(ctx)
    idx, targets = _tokens(ctx, 3, 11), _tokens(ctx, 3, 11)

    def run(m, dt):
        logits, loss = forward(ctx, m, idx, targets=targets)
        _, no_loss = forward(ctx, m, idx)
        if no_loss is not None:
            raise WrongResult("without targets, forward should return (logits, None)")
        if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
            raise WrongResult("with targets, the loss should be a scalar tensor (the mean cross-entropy)")
        return torch.cat([logits.flatten(), loss.reshape(1).to(logits.dtype)])

    obs = _precision(ctx, model, run, "both")
    out = {"logits": obs["both"][:-1].view(3, 11, 67), "loss": obs["both"][-1]}
    if "both (float32)" in obs:
        out.update({"logits (float32)": obs["both (float32)"][:-1].view(3, 11, 67),
                    "loss (float32)": obs["both (float32)"][-1]})
    return out


@CHECKS.probe("Llama", "the future does not change the past", causal_judge(), CPU,
              rule="The model is causal: changing a later token changes no earlier logit")
def llama_causal(ctx):
    return future_changed(ctx, _llama(ctx), 67)


def _model_cache_judge(what):
    return cache_judge(f"{what} (a prompt of 5, then one token at a time)", 5,
                       "the prompt agrees, so is every layer given the same offset, len(cache) read once before "
                       "layer 0 updates it?")


@CHECKS.probe("Llama", "logits through a KV cache, one token at a time, equal the full forward",
              _model_cache_judge("a growing cache"), CPU,
              rule="Through either cache the logits equal the full forward's, however the tokens are split into "
                   "calls")
def llama_cache(ctx):
    model = _llama(ctx)
    idx = _tokens(ctx, 2, 12)
    cache = Cache()
    pieces = [forward(ctx, model, chunk, cache=cache)[0] for chunk in (idx[:, :5], *idx[:, 5:].split(1, 1))]
    return {"full forward": forward(ctx, model, idx)[0], "through the cache": torch.cat(pieces, 1)}


@CHECKS.probe("Llama", "with window=4, logits through a rolling cache equal the full sliding-window forward",
              _model_cache_judge("a rolling cache (window=4)"), CPU,
              rule="or a RollingKVCache when the config has a window (then the full forward uses the sliding-window "
                   "mask)")
def llama_rolling(ctx):
    model = _llama(ctx, window=4)
    idx = _tokens(ctx, 2, 14)
    cache = _Rolling(4)
    pieces = [forward(ctx, model, chunk, cache=cache)[0] for chunk in (idx[:, :5], *idx[:, 5:].split(1, 1))]
    return {"full forward": forward(ctx, model, idx)[0], "through the cache": torch.cat(pieces, 1)}


def _block_size_judge(s, r, ctx):
    return (expect_value_error(s["25 tokens at block_size=24"], "a sequence of 25 tokens at block_size=24",
                                "block_size")
            or expect_value_error(s["5 new tokens after 20 cached"], "5 new tokens after 20 cached positions "
                                   "(block_size=24, no window)", "block_size")
            or (None if s["24 tokens"] == "nothing" else f"a sequence of exactly block_size tokens should run: "
                f"it raised {s['24 tokens']}")
            or (None if s["window=4: 5 new tokens after 22"] == "nothing" else "with a window, a rolling cache may "
                f"run past block_size, but it raised {s['window=4: 5 new tokens after 22']}"))


@CHECKS.probe("Llama", "ValueError naming block_size past it (a windowed model's cache may run on)",
              _block_size_judge, CPU,
              rule="ValueError naming block_size when start + T passes it — except with a window, where only a "
                   "single call longer than block_size is an error")
def llama_block_size(ctx):
    model = _llama(ctx)
    cache = Cache()
    forward(ctx, model, _tokens(ctx, 1, 20), cache=cache)
    windowed, rolling = _llama(ctx, window=4), _Rolling(4)
    forward(ctx, windowed, _tokens(ctx, 1, 22), cache=rolling)
    return {"25 tokens at block_size=24": ctx.raised(model, _tokens(ctx, 1, 25)),
            "5 new tokens after 20 cached": ctx.raised(model, _tokens(ctx, 1, 5), cache=cache),
            "24 tokens": ctx.raised(model, _tokens(ctx, 1, 24))["raised"],
            "window=4: 5 new tokens after 22": ctx.raised(windowed, _tokens(ctx, 1, 5), cache=rolling)["raised"]}


# The declared domain of Llama: every config field at a non-default value (norm_eps large enough to show where it
# goes, a window from 1 to past the sequence, a tied head), a batch of 1, sequences from 1 token to block_size,
# targets or none, a cache fed in pieces of other lengths or after 7 cached positions (the start offset), two
# models used in turn, each with its own cache (no state shared between instances), token ids in int64 or int32,
# laid out any way; targets and cache by keyword or positionally (None given explicitly).
LLAMA_DOMAIN = Domain(
    args=(Arg("config.vocab_size", (67, 1)), Arg("config.block_size", (24, 40)), Arg("config.n_layer", (1, 2)),
          Arg("config.n_head, config.n_kv_head", ("6, 2", "6, 1", "6, 6")),
          Arg("config.n_embd, config.hidden_dim", ("36, 52", "12, 20")),
          Arg("config.rope_base", (10000.0, 500000.0)), Arg("config.norm_eps", (1e-5, 0.5)),
          Arg("config.window", (None, 1, 3, 64)), Arg("config.tie_embeddings", (False, True)),
          Arg("B", (2, 1)), Arg("T", (5, 1, 17)), Arg("targets", ("none", "given")),
          Arg("cache", ("none", "pieces of 3, 1, then the rest", "7 cached, then all T")),
          Arg("models", ("one", "two, used in turn")), PASSED),
    dtypes=(("idx", ("int64", "int32")),), layouts=(("idx", ("contiguous", "transposed", "strided")),), examples=2)


def _llama_domain_judge(s, r, ctx):
    return layout_first(same(*[k for k, v in r.items() if isinstance(v, torch.Tensor)]), who="Llama")(s, r, ctx)


@CHECKS.domain("Llama", LLAMA_DOMAIN, _llama_domain_judge)
def llama_domain(ctx, ex):
    heads, kv = (int(n) for n in ex["config.n_head, config.n_kv_head"].split(", "))
    d, hidden = (int(n) for n in ex["config.n_embd, config.hidden_dim"].split(", "))
    cfg = _Config(vocab_size=ex["config.vocab_size"], block_size=ex["config.block_size"], n_layer=ex["config.n_layer"],
                  n_head=heads, n_kv_head=kv, n_embd=d, hidden_dim=hidden, rope_base=ex["config.rope_base"],
                  norm_eps=ex["config.norm_eps"], window=ex["config.window"],
                  tie_embeddings=ex["config.tie_embeddings"])
    V, B, T, window = cfg.vocab_size, ex["B"], ex["T"], cfg.window
    names = ("A", "B") if ex["models"] != "one" else ("A",)
    models = {}
    for n, name in enumerate(names):  # every parameter set by name: the model's own init draws do not matter
        models[name] = _fill(ctx.call(ctx.target, cfg), ctx.seed + n).eval()
    idx = {name: relaid(_tokens(ctx, B, T, vocab=V).to(getattr(torch, ex["dtype of idx"])), ex["layout of idx"])
           for name in names}
    targets = {name: _tokens(ctx, B, T, vocab=V) for name in names} if ex["targets"] == "given" else None
    caches = {name: (_Rolling(window) if window else Cache()) for name in names} if ex["cache"] != "none" else None
    if ex["cache"] == "7 cached, then all T":
        for name in names:
            forward(ctx, models[name], _tokens(ctx, B, 7, vocab=V), cache=caches[name])
        cuts = [(0, T)]
    elif ex["cache"] == "none":
        cuts = [(0, T)]
    else:
        cuts = [(a, b) for a, b in ((0, 3), (3, 4), (4, T)) if a < min(b, T)]
        cuts = [(a, min(b, T)) for a, b in cuts]
    obs: dict = {}
    for a, b in cuts:
        for name in names:  # in turn: each model its own piece, its own cache
            given = {"cache": caches[name]} if caches else {}
            if targets:
                given["targets"] = targets[name][:, a:b]
            args, kwargs = arguments(("targets", "cache"), given, {"targets": None, "cache": None}, ex["passed"])
            logits, loss = forward(ctx, models[name], idx[name][:, a:b], *args, **kwargs)
            obs.setdefault(f"logits of model {name}", []).append(logits)
            if targets:
                obs.setdefault(f"loss of model {name}, per call", []).append(loss.reshape(1))
    if ex["passed"] != PASSED.values[0]:  # both given, in the signature's order: (idx, targets, cache)
        both = forward(ctx, models["A"], idx["A"], _tokens(ctx, B, T, vocab=V), _Rolling(window) if window else Cache())
        obs.update({"logits of model(idx, targets, cache)": [both[0]], "loss of model(idx, targets, cache)":
                    [both[1].reshape(1) if isinstance(both[1], torch.Tensor) else both[1]]})
    return {**{k: torch.cat(v, dim=1 if k.startswith("logits") else 0) for k, v in obs.items()},
            "state_dict": state_layout(models["A"])}


INIT = dict(vocab_size=67, block_size=32, n_layer=4, n_head=4, n_kv_head=2, n_embd=128, hidden_dim=352)


def _init_judge(s, r, ctx):
    L = INIT["n_layer"]
    rules = (("std of embed and lm_head / 0.02", "embed.weight and lm_head.weight should be drawn from N(0, 0.02)"),
             ("std of q/k/v_proj, gate/up_proj / 0.02", "the Linear weights should be drawn from N(0, 0.02)"),
             ("std of out_proj and down_proj / 0.02", f"the residual projections (attn.out_proj, mlp.down_proj) should "
              f"be drawn with std 0.02/√(2·n_layer) = {0.02 / math.sqrt(2 * L):.5f}"))
    for key, rule in rules:
        if s[key] != r[key]:
            got = s[key]
            shown = f"about {got * 0.02:.4f}" if isinstance(got, (int, float)) else repr(got)
            return f"{rule}; yours have std {shown}"
    if not s["RMSNorm gains are 1"]:
        return "RMSNorm weights (gains) should start at 1"
    if not s["loss at init within 0.3 of ln V"]:
        return f"the loss at initialisation should be close to ln(vocab_size) = {math.log(INIT['vocab_size']):.2f}"
    return None


@CHECKS.probe("Llama", "init: N(0, 0.02), residual projections scaled by 1/√(2·n_layer), loss at init ≈ ln V",
              _init_judge, CPU,
              rule="every Linear and Embedding weight from N(0, 0.02²), and the two residual projections of each "
                   "block (attn.out_proj, mlp.down_proj) with std 0.02/√(2·n_layer). RMSNorm gains start at 1. With "
                   "this init the loss at initialisation is close to ln(vocab_size)")
def llama_init(ctx):
    ctx.manual_seed()
    model = ctx.call(ctx.target, _Config(**INIT)).eval()
    blocks = list(model.blocks)

    def ratio(ts):  # rounded to one decimal: every correct draw observes the same value
        return round(torch.cat([t.detach().flatten().float() for t in ts]).std().item() / 0.02, 1)

    gains = [p for n, p in model.named_parameters() if p.dim() == 1]
    idx = _tokens(ctx, 4, 16)
    with torch.no_grad():
        _, loss = forward(ctx, model, idx, targets=_tokens(ctx, 4, 16))
    return {"std of embed and lm_head / 0.02": ratio([model.embed.weight, model.lm_head.weight]),
            "std of q/k/v_proj, gate/up_proj / 0.02": ratio([w for b in blocks for w in (
                b.attn.q_proj.weight, b.attn.k_proj.weight, b.attn.v_proj.weight, b.mlp.gate_proj.weight,
                b.mlp.up_proj.weight)]),
            "std of out_proj and down_proj / 0.02": ratio([w for b in blocks for w in (
                b.attn.out_proj.weight, b.mlp.down_proj.weight)]),
            "RMSNorm gains are 1": all(bool((p == 1).all()) for p in gains),
            "loss at init within 0.3 of ln V": abs(float(loss) - math.log(INIT["vocab_size"])) < 0.3}


@CHECKS.probe("Llama", "gradients match the reference's", same(scale=10), CPU, hidden=True,
              rule="the gradients of the loss with respect to every parameter are checked too")
def llama_grads(ctx):
    model = _llama(ctx)
    _, loss = forward(ctx, model, _tokens(ctx, 2, 9), targets=_tokens(ctx, 2, 9))
    loss.backward()
    named = dict(model.named_parameters())
    return {f"gradient of {n}": (named[n].grad if n in named else None)
            for n in ("embed.weight", "blocks.0.attn.q_proj.weight", "blocks.1.mlp.down_proj.weight", "norm.weight",
                      "lm_head.weight")}


# ----------------------------------------------------------------------------------------------
# load_llama_state_dict: a synthetic checkpoint in Hugging Face's layout, loaded into a skeleton of the
# course's parameter names built from torch's modules (so that your Llama does not matter here)


class _Attn(nn.Module):
    def __init__(self, D, kv):
        super().__init__()
        self.q_proj, self.out_proj = nn.Linear(D, D, bias=False), nn.Linear(D, D, bias=False)
        self.k_proj, self.v_proj = nn.Linear(D, kv, bias=False), nn.Linear(D, kv, bias=False)


class _Mlp(nn.Module):
    def __init__(self, D, hidden):
        super().__init__()
        self.gate_proj, self.up_proj = nn.Linear(D, hidden, bias=False), nn.Linear(D, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, D, bias=False)


class _Norm(nn.Module):
    def __init__(self, D):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(D))


class _BlockSkeleton(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        D, kv = cfg.n_embd, cfg.n_kv_head * cfg.n_embd // cfg.n_head
        self.ln1, self.attn, self.ln2, self.mlp = _Norm(D), _Attn(D, kv), _Norm(D), _Mlp(D, cfg.hidden_dim)


class _Skeleton(nn.Module):
    """The course's Llama parameter layout, every parameter zero."""

    def __init__(self, cfg: _Config):
        super().__init__()
        self.config = cfg
        self.embed = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.blocks = nn.ModuleList(_BlockSkeleton(cfg) for _ in range(cfg.n_layer))
        self.norm = _Norm(cfg.n_embd)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:  # from the embedding's side: one Parameter, listed as embed.weight
            self.embed.weight = self.lm_head.weight
        with torch.no_grad():
            for p in self.parameters():
                p.zero_()


def hf_llama_state_dict(cfg, seed: int, tied: bool = False) -> dict:
    """Random tensors under LlamaForCausalLM's keys and shapes (a tied checkpoint has no lm_head.weight)."""
    g = torch.Generator().manual_seed(seed)
    D, kv = cfg.n_embd, cfg.n_kv_head * cfg.n_embd // cfg.n_head
    shapes = {"model.embed_tokens.weight": (cfg.vocab_size, D), "model.norm.weight": (D,)}
    if not tied:
        shapes["lm_head.weight"] = (cfg.vocab_size, D)
    for i in range(cfg.n_layer):
        p = f"model.layers.{i}."
        shapes.update({p + "self_attn.q_proj.weight": (D, D), p + "self_attn.k_proj.weight": (kv, D),
                       p + "self_attn.v_proj.weight": (kv, D), p + "self_attn.o_proj.weight": (D, D),
                       p + "mlp.gate_proj.weight": (cfg.hidden_dim, D), p + "mlp.up_proj.weight": (cfg.hidden_dim, D),
                       p + "mlp.down_proj.weight": (D, cfg.hidden_dim), p + "input_layernorm.weight": (D,),
                       p + "post_attention_layernorm.weight": (D,)})
    return {k: torch.randn(s, generator=g) for k, s in shapes.items()}


def _loaded(ctx, cfg, sd):
    model = _Skeleton(cfg)
    ctx.call(ctx.target, model, sd)
    return {name: p.detach().clone() for name, p in model.named_parameters()}


def _load_judge(key):
    def judge(s, r, ctx):
        got, want = s[key], r[key]
        for name, tensor in want.items():
            msg = close(got.get(name), tensor, f"{key}: {name} after loading")
            if msg:
                return msg + (" (still zero: not loaded?)" if isinstance(got.get(name), torch.Tensor)
                              and not got[name].abs().sum() else "")
        return None
    return judge


@CHECKS.probe("load_llama_state_dict", "every tensor of a synthetic Hugging Face checkpoint lands in its parameter",
              _load_judge("untied, GQA"), CPU,
              rule="Copy every tensor into the model's existing parameters under torch.no_grad()")
def load_untied(ctx):
    cfg = _Config(n_layer=3)
    return {"untied, GQA": _loaded(ctx, cfg, hf_llama_state_dict(cfg, ctx.seed))}


@CHECKS.probe("load_llama_state_dict", "a tied checkpoint without lm_head.weight loads into a tied model",
              _load_judge("tied, one KV head"), CPU,
              rule="lm_head.weight (absent or equal to the embedding when tied)")
def load_tied(ctx):
    cfg = _Config(n_kv_head=1, tie_embeddings=True)
    return {"tied, one KV head": _loaded(ctx, cfg, hf_llama_state_dict(cfg, ctx.seed, tied=True))}


def _load_bad_judge(s, r, ctx):
    return (expect_value_error(s["no model.norm.weight"], "a checkpoint without model.norm.weight")
            or expect_value_error(s["k_proj of the wrong shape"], "a checkpoint whose k_proj has the wrong shape")
            or expect_value_error(s["a layer more than n_layer"], "a checkpoint with more layers than n_layer"))


@CHECKS.probe("load_llama_state_dict", "ValueError for a missing key, a wrong shape, or too many layers",
              _load_bad_judge, CPU, hidden=True,
              rule="ValueError when a key is missing, a shape differs, or the checkpoint has more layers than the "
                   "model")
def load_bad(ctx):
    cfg = _Config()
    sd = hf_llama_state_dict(cfg, ctx.seed)
    missing = {k: v for k, v in sd.items() if k != "model.norm.weight"}
    wrong = dict(sd, **{"model.layers.1.self_attn.k_proj.weight": torch.zeros(36, 36)})
    more = hf_llama_state_dict(_Config(n_layer=3), ctx.seed)
    return {"no model.norm.weight": ctx.raised(ctx.target, _Skeleton(cfg), missing),
            "k_proj of the wrong shape": ctx.raised(ctx.target, _Skeleton(cfg), wrong),
            "a layer more than n_layer": ctx.raised(ctx.target, _Skeleton(cfg), more)}


# The declared domain of load_llama_state_dict: one layer or three, MQA to MHA, another width, a tied model from a
# checkpoint with or without lm_head.weight, extra keys some checkpoints carry (rotary_emb.inv_freq buffers:
# ignored), the checkpoint in another dtype or layout (the parameters keep the model's dtype), a float64 model,
# and the checkpoint changed after loading (the parameters hold copies, not the checkpoint's tensors).
LOAD_DOMAIN = Domain(
    args=(Arg("config.n_layer", (3, 1)), Arg("config.n_kv_head", (2, 1, 6)),
          Arg("config.n_embd, config.hidden_dim", ("36, 52", "12, 20")),
          Arg("config.tie_embeddings, lm_head.weight", ("False, in the checkpoint", "True, absent",
                                                        "True, present (equal to the embedding)")),
          Arg("extra keys", ("none", "rotary_emb.inv_freq of each layer")),
          Arg("after loading", ("nothing", "the checkpoint's tensors changed in place"))),
    dtypes=(("model", ("float32", "float64")), ("state_dict", ("float32", "float64", "bfloat16"))),
    layouts=(("state_dict", ("contiguous", "transposed", "strided")),), examples=4)


def _load_domain_judge(s, r, ctx):
    for key in ("the same Parameter objects", "tied: lm_head.weight is embed.weight"):
        if s[key] != r[key]:
            return (f"{key}: {s[key]} (expected {r[key]}): copy each tensor into the model's existing parameters "
                    f"(param.copy_ under torch.no_grad()), never replace them")
    return _load_judge("loaded")(s, r, ctx)


@CHECKS.domain("load_llama_state_dict", LOAD_DOMAIN, _load_domain_judge)
def load_domain(ctx, ex):
    d, hidden = (int(n) for n in ex["config.n_embd, config.hidden_dim"].split(", "))
    tied, head = ex["config.tie_embeddings, lm_head.weight"].split(", ", 1)
    cfg = _Config(n_layer=ex["config.n_layer"], n_kv_head=ex["config.n_kv_head"], n_embd=d, hidden_dim=hidden,
                  tie_embeddings=tied == "True")
    sd = hf_llama_state_dict(cfg, ctx.seed, tied=head == "absent")
    if head.startswith("present"):
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"].clone()
    if ex["extra keys"] != "none":
        for i in range(cfg.n_layer):
            sd[f"model.layers.{i}.self_attn.rotary_emb.inv_freq"] = torch.rand(d // cfg.n_head // 2)
    dtype = getattr(torch, ex["dtype of state_dict"])
    sd = {k: relaid(v.to(dtype), ex["layout of state_dict"]) for k, v in sd.items()}
    model = _Skeleton(cfg).to(getattr(torch, ex["dtype of model"]))
    before = [id(p) for p in model.parameters()]
    ctx.call(ctx.target, model, sd)
    if ex["after loading"] != "nothing":
        with torch.no_grad():
            for v in sd.values():
                v.add_(1.0)
    return {"loaded": {name: p.detach().clone() for name, p in model.named_parameters()},
            "the same Parameter objects": [id(p) for p in model.parameters()] == before,
            "tied: lm_head.weight is embed.weight": model.lm_head.weight is model.embed.weight}


# ----------------------------------------------------------------------------------------------
# filter_logits

# rows of probabilities where the crossing token, the sort and the max all matter, with no two equal (the spec
# leaves a tie at the k-th value open: (0.70, 0.05, 0.10, 0.05, 0.10) rejected a top_k=2 that kept one of the
# two 0.10s), and no running total or min_p threshold within rounding of a p the checks use (0.35 + 0.30 +
# 0.25 was 0.9, the top_p asked: which side of it is decided by float32 rounding)
_PROBS = ((0.05, 0.40, 0.10, 0.30, 0.15), (0.30, 0.03, 0.06, 0.26, 0.35), (0.70, 0.04, 0.12, 0.05, 0.09))


def _kept_judge(*keys):
    def judge(s, r, ctx):
        for key in keys:
            got, want = s[key], r[key]
            if isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor) and got.shape == want.shape:
                kept, should = got > float("-inf"), want > float("-inf")
                if not torch.equal(kept, should):
                    row = int((kept != should).any(-1).flatten().nonzero()[0])
                    return (f"{key}: row {row} keeps tokens {kept.flatten(0, -2)[row].nonzero().flatten().tolist()}, "
                            f"expected {should.flatten(0, -2)[row].nonzero().flatten().tolist()}")
            msg = close(got, want, key)
            if msg:
                return msg + " (the kept logits must be returned unchanged, the others -inf)"
        return None
    return judge


@CHECKS.probe("filter_logits", "top_k keeps the k largest logits unchanged, the rest -inf; no filter changes nothing",
              _kept_judge("top_k=2", "top_k=7 (more than V)", "no filter"), CPU,
              rule="Top-k keeps the k largest logits (all of them when k ≥ V); a filter left at None removes "
                   "nothing")
def filter_top_k(ctx):
    logits = torch.tensor(_PROBS).log().to(ctx.device)
    return {"top_k=2": ctx.call(ctx.target, logits, top_k=2), "top_k=7 (more than V)": ctx.call(ctx.target, logits, top_k=7),
            "no filter": ctx.call(ctx.target, logits)}


@CHECKS.probe("filter_logits", "top_p keeps the smallest most-likely set reaching p, the crossing token included",
              _kept_judge("top_p=0.6", "top_p=0.9", "top_p=0.5 (3, 5) logits"), CPU,
              rule="keep the smallest set of most likely tokens whose total is at least p. The token whose "
                   "probability makes the running total cross p is kept")
def filter_top_p(ctx):
    logits = torch.tensor(_PROBS).log().to(ctx.device)
    scaled = (2.0 * logits + 1.0)  # not a log-probability any more: the softmax is what counts
    return {"top_p=0.6": ctx.call(ctx.target, logits, top_p=0.6), "top_p=0.9": ctx.call(ctx.target, logits, top_p=0.9),
            "top_p=0.5 (3, 5) logits": ctx.call(ctx.target, scaled, top_p=0.5)}


def _top_p_one_judge(s, r, ctx):
    for key in ("top_p=1.0 (20, 0, -1) logits", "top_p=1.0"):
        got, logits = s[key], r[key + " input"]
        if isinstance(got, torch.Tensor) and got.shape == logits.shape:
            kept = got > float("-inf")
            if not kept.all():  # p = 1: the smallest set reaching all the mass is every token
                row = int((~kept).any(-1).flatten().nonzero()[0])
                return (f"{key}: row {row} keeps tokens {kept.flatten(0, -2)[row].nonzero().flatten().tolist()} of "
                        f"{logits.shape[-1]}: top_p=1.0 keeps every token (float32's cumulative sum reaches 1.0 "
                        f"before the last, tiny probabilities are added, so `before >= 1.0` drops them)")
    return _kept_judge("top_p=1.0 (20, 0, -1) logits", "top_p=1.0", "top_p=0.999")(s, r, ctx)


@CHECKS.probe("filter_logits", "top_p=1.0 keeps every token, however small its probability", _top_p_one_judge, CPU,
              rule="top_p = 1.0 keeps every token, however small its probability")
def filter_top_p_one(ctx):
    peaked = torch.tensor([[20.0, 0.0, -1.0]], device=ctx.device)  # probabilities 1 - 3e-9, 2e-9, 8e-10
    logits = ctx.randn(2, 40, scale=6.0)
    return {"top_p=1.0 (20, 0, -1) logits": ctx.call(ctx.target, peaked, top_p=1.0),
            "top_p=1.0 (20, 0, -1) logits input": peaked,
            "top_p=1.0": ctx.call(ctx.target, logits, top_p=1.0), "top_p=1.0 input": logits,
            "top_p=0.999": ctx.call(ctx.target, logits, top_p=0.999)}


@CHECKS.probe("filter_logits", "min_p keeps the tokens with probability ≥ min_p · the largest",
              _kept_judge("min_p=0.5", "min_p=0.2"), CPU,
              rule="keep the tokens whose probability is at least min_p times the largest probability")
def filter_min_p(ctx):
    logits = torch.tensor(_PROBS).log().to(ctx.device)
    return {"min_p=0.5": ctx.call(ctx.target, logits, min_p=0.5), "min_p=0.2": ctx.call(ctx.target, logits, min_p=0.2)}


@CHECKS.probe("filter_logits", "top_k, then top_p, then min_p, each on what is left; any leading dims",
              _kept_judge("top_k=20, top_p=0.8, min_p=0.05", "top_p=0.7, min_p=0.3"), CPU,
              rule="The filters given apply in the order top-k, top-p, min-p, each to the softmax of what the "
                   "previous one left")
def filter_combined(ctx):
    logits = ctx.randn(2, 3, 50, scale=2.0)
    return {"top_k=20, top_p=0.8, min_p=0.05": ctx.call(ctx.target, logits, top_k=20, top_p=0.8, min_p=0.05),
            "top_p=0.7, min_p=0.3": ctx.call(ctx.target, logits, top_p=0.7, min_p=0.3)}


# The declared domain: every argument with its range and edges (top_p=1.0, min_p=0 and 1, top_k past V),
# the vocabulary from 1 token to a wide one, logits in float32 or float64, laid out any way; the arguments by
# keyword or in the signature's order (there, with all three given too, so that their order shows).
FILTER_DOMAIN = Domain(
    args=(Arg("top_k", (None, 1, 3, 500)), Arg("top_p", (None, 1.0, 0.5, 0.999, 1e-6)),
          Arg("min_p", (None, 0.0, 0.1, 1.0)), Arg("V", (16, 1, 2000)), Arg("rows", (2, 1)), PASSED),
    dtypes=(("logits", ("float32", "float64")),), layouts=(("logits", ("contiguous", "transposed", "strided")),),
    examples=8)


_ALL_IN_ORDER = "filtered by filter_logits(logits, 5, 0.9, 0.05)"


@CHECKS.domain("filter_logits", FILTER_DOMAIN,
               lambda s, r, ctx: _kept_judge(*[k for k in ("filtered", _ALL_IN_ORDER) if k in r])(s, r, ctx))
def filter_domain(ctx, ex):
    logits = ctx.randn(ex["rows"], ex["V"], scale=3.0).to(getattr(torch, ex["dtype of logits"]))
    logits = relaid(logits, ex["layout of logits"])
    args, kwargs = arguments(("top_k", "top_p", "min_p"), {n: ex[n] for n in ("top_k", "top_p", "min_p")}, {},
                             ex["passed"])
    obs = {"filtered": ctx.call(ctx.target, logits, *args, **kwargs)}
    if args:
        obs[_ALL_IN_ORDER] = ctx.call(ctx.target, logits, 5, 0.9, 0.05)  # each filter removes some tokens
    return obs


# just past each stated range, on both sides where it has two (min_p above 1 as well as below 0)
_FILTER_BAD = (("top_k=0", "top_k"), ("top_k=-2", "top_k"), ("top_p=0", "top_p"), ("top_p=-0.5", "top_p"),
               ("top_p=1.5", "top_p"), ("min_p=-0.1", "min_p"), ("min_p=1.5", "min_p"))


def _filter_bad_judge(s, r, ctx):
    for key, name in _FILTER_BAD:
        msg = expect_value_error(s[key], f"filter_logits(..., {key})", name)
        if msg:
            return msg
    return None


@CHECKS.probe("filter_logits", "ValueError for top_k < 1, top_p outside (0, 1], min_p outside [0, 1]",
              _filter_bad_judge, CPU, hidden=True,
              rule="ValueError for top_k < 1, top_p outside (0, 1], min_p outside [0, 1], the message naming the "
                   "argument")
def filter_bad(ctx):
    logits = ctx.randn(2, 9)
    return {key: ctx.raised(ctx.target, logits, **{key.split("=")[0]: float(key.split("=")[1])
                                                          if "." in key else int(key.split("=")[1])})
            for key, _ in _FILTER_BAD}


# ----------------------------------------------------------------------------------------------
# decoder_costs

_COST_CASES = (("tiny, untied, GQA, bfloat16", _REQUIRED, 1000, "bfloat16"),
               ("tiny, tied, MHA, float32", dict(_REQUIRED, n_kv_head=6, tie_embeddings=True), 4096, "float32"),
               ("MQA, float16", dict(_REQUIRED, n_kv_head=1, n_layer=5, block_size=128), 12345, "float16"),
               ("Llama 3 8B's shape, 15T tokens, bfloat16", LLAMA3_8B, 15 * 10 ** 12, "bfloat16"))


def _costs_judge(s, r, ctx):
    for case, want in r["costs"].items():
        got = s["costs"].get(case)
        if not isinstance(got, dict):
            return f"{case}: decoder_costs should return a dict, got {type(got).__name__}"
        for key, value in want.items():
            g = got.get(key)
            if not isinstance(g, int) or isinstance(g, bool):
                return f"{case}: {key} should be the int {value:,}, got {type(g).__name__} {g!r}"
            if g != value:
                return f"{case}: {key} should be {value:,}, got {g:,}"
    return None


@CHECKS.probe("decoder_costs", "params, train_flops, kv_bytes_per_token and adamw_bytes (Llama 3 8B: 8,030,261,248 "
              "parameters)", _costs_judge, CPU,
              rule="Return a dict of Python ints: params (embedding included, a tied head once), train_flops "
                   "(training on tokens tokens at a context of block_size, by the accounting above")
def costs_values(ctx):
    out = {}
    for case, fields, tokens, dtype in _COST_CASES:
        cfg = _Config(**fields)  # the grader's config (LlamaConfig's fields), so that this exercise stands alone
        costs = ctx.call(ctx.target, cfg, tokens, dtype=getattr(torch, dtype))
        out[case] = dict(costs) if isinstance(costs, dict) else costs
    return {"costs": out}


# The declared domain of decoder_costs: every config field at a non-default value (the ones that change no cost
# too), sizes from 1 to Llama 3 8B's, MHA and MQA, a tied head, 1 token to 15T, and the KV cache in any dtype:
# 8 bytes (float64) down to 1 (int8, float8), or the default (bfloat16) left out; `dtype` given by keyword or
# positionally in the signature's order.
COSTS_DOMAIN = Domain(
    args=(Arg("config.vocab_size", (67, 1, 128256)), Arg("config.block_size", (24, 1, 8192)),
          Arg("config.n_layer", (2, 1, 32)),
          Arg("config.n_head, config.n_kv_head, config.n_embd", ("6, 2, 36", "6, 6, 36", "6, 1, 36", "32, 8, 4096")),
          Arg("config.hidden_dim", (52, 1, 14336)), Arg("config.tie_embeddings", (False, True)),
          Arg("config.rope_base, config.norm_eps, config.window", ("10000.0, 1e-05, None", "500000.0, 1e-06, 4")),
          Arg("tokens", (1000, 1, 15 * 10 ** 12)),
          Arg("dtype", ("bfloat16", "float32", "float16", "float64", "int8", "float8_e4m3fn", "omitted")), PASSED),
    examples=6, tensors=False)


@CHECKS.domain("decoder_costs", COSTS_DOMAIN, _costs_judge)
def costs_domain(ctx, ex):
    heads, kv, d = (int(n) for n in ex["config.n_head, config.n_kv_head, config.n_embd"].split(", "))
    base, eps, window = ex["config.rope_base, config.norm_eps, config.window"].split(", ")
    cfg = _Config(vocab_size=ex["config.vocab_size"], block_size=ex["config.block_size"], n_layer=ex["config.n_layer"],
                  n_head=heads, n_kv_head=kv, n_embd=d, hidden_dim=ex["config.hidden_dim"],
                  tie_embeddings=ex["config.tie_embeddings"], rope_base=float(base), norm_eps=float(eps),
                  window=None if window == "None" else int(window))
    given = {} if ex["dtype"] == "omitted" else {"dtype": getattr(torch, ex["dtype"])}
    args, kwargs = arguments(("dtype",), given, {"dtype": torch.bfloat16}, ex["passed"])
    costs = ctx.call(ctx.target, cfg, ex["tokens"], *args, **kwargs)
    return {"costs": {"the costs": dict(costs) if isinstance(costs, dict) else costs}}


# ----------------------------------------------------------------------------------------------
# Known mistakes, as edits of the solved cells

MISTAKES = (
    Mistake("SwiGLU", "silu_on_up", "silu is applied to the up branch instead of the gate: the gate is what goes "
            "through silu, `down_proj(F.silu(gate_proj(x)) * up_proj(x))`.",
            edits={"F.silu(self.gate_proj(x)) * self.up_proj(x)": "self.gate_proj(x) * F.silu(self.up_proj(x))"},
            hint="Of the two branches that are multiplied, which one is the gate? Check which branch your "
                 "activation is applied to."),
    Mistake("swiglu_hidden_dim", "rounded_down", "the width is rounded down to a multiple of multiple_of; Llama "
            "rounds up: `multiple_of * ((hidden + multiple_of - 1) // multiple_of)`.",
            edits={"((hidden + multiple_of - 1) // multiple_of)": "(hidden // multiple_of)"},
            hint="Try a width that is not a multiple of multiple_of: should the result be the multiple just "
                 "below it or just above?"),
    Mistake("LlamaAttention", "rope_on_v", "RoPE is applied to v as well: only q and k are rotated (their dot "
            "product then depends on relative position); v goes into the cache as v_proj made it.",
            edits={"q, k = (L06.apply_rope_half(t, positions, self.rope_base) for t in (q, k))":
                   "q, k, v = (L06.apply_rope_half(t, positions, self.rope_base) for t in (q, k, v))"},
            hint="Which of q, k and v take part in the dot product whose value should depend only on relative "
                 "position? Print which tensors your code rotates."),
    Mistake("LlamaAttention", "rope_positions_from_zero", "with a cache, RoPE's positions restart at 0 at every "
            "step: the new tokens sit at len(cache), len(cache) + 1, ..., so start from len(cache) when start is None.",
            edits={"start = len(cache) if cache is not None else 0": "start = 0"},
            hint="Feed a sequence through the cache in two pieces and print the positions each piece is "
                 "rotated at: where should the second piece start?"),
    Mistake("LlamaAttention", "interleaved_rope", "the interleaved RoPE (pairs x[2i], x[2i+1]) is used, but Hugging "
            "Face's Llama weights expect the half-split pairs (x[i], x[i + Dh/2]): use apply_rope_half.",
            edits={"L06.apply_rope_half(t, positions, self.rope_base)": "L06.apply_rope(t, positions, self.rope_base)"},
            hint="Which pairs of features does this model's RoPE rotate together: neighbours, or a feature and "
                 "the one half a head away?"),
    Mistake("LlamaAttention", "gqa_by_tiling", "the KV heads are tiled with `repeat`, so query head h reads KV head "
            "h % num_kv_heads; in GQA consecutive query heads share a KV head (h // n_rep): repeat each in a row, "
            "with repeat_kv or repeat_interleave.",
            edits={"L03.repeat_kv(k, n_rep), L03.repeat_kv(v, n_rep)": "k.repeat(1, n_rep, 1, 1), v.repeat(1, n_rep, 1, 1)"},
            hint="Print which KV head each query head reads for 4 query heads and 2 KV heads: should "
                 "neighbouring query heads share one, or should they alternate?"),
    Mistake("LlamaAttention", "biases_left_on", "the projections have biases: Llama's have none, so build every "
            "nn.Linear with bias=False (and a Hugging Face checkpoint has no bias tensors to load).",
            edits={"self.q_proj = nn.Linear(d_model, d_model, bias=False)": "self.q_proj = nn.Linear(d_model, d_model)",
                   "self.k_proj = nn.Linear(d_model, kv_dim, bias=False)": "self.k_proj = nn.Linear(d_model, kv_dim)",
                   "self.v_proj = nn.Linear(d_model, kv_dim, bias=False)": "self.v_proj = nn.Linear(d_model, kv_dim)",
                   "self.out_proj = nn.Linear(d_model, d_model, bias=False)": "self.out_proj = nn.Linear(d_model, d_model)"},
            hint="List your module's parameter names and compare them with the layout the text gives: is there "
                 "anything extra?"),
    Mistake("LlamaAttention", "window_off_by_one", "the window is off by one: each query should see exactly `window` "
            "keys (itself and the window - 1 before it), so keep j > i - window, not j >= i - window.",
            edits={"mask & (j > i - window)": "mask & (j >= i - window)"},
            hint="Count the keys one query sees with window = 3: is its own key one of the three? Check the "
                 "comparison at the far edge of the window."),
    Mistake("RollingKVCache", "drops_newest", "the cache keeps the oldest `window` positions and drops the newest: "
            "keep the tail, `k_all[..., -self.window:, :]`.",
            edits={"self.keys[layer_idx] = k_all[..., -self.window:, :]": "self.keys[layer_idx] = k_all[..., :self.window, :]",
                   "self.values[layer_idx] = v_all[..., -self.window:, :]": "self.values[layer_idx] = v_all[..., :self.window, :]"},
            hint="After more updates than the window holds, print the positions your cache keeps: the oldest "
                 "ones or the newest?"),
    Mistake("RollingKVCache", "len_counts_kept", "len(cache) counts the kept positions only, so once the window "
            "fills, the next token's RoPE position stops advancing: count every position seen.",
            edits={"return self.seen": "return self.keys[0].shape[-2] if self.keys else 0"},
            hint="After more steps than the window, what does len(cache) return, and what position must the "
                 "next token be rotated at?"),
    Mistake("LlamaBlock", "rmsnorm_after_add", "RMSNorm is applied after the residual add (post-norm): in a pre-norm "
            "block the norm is on each sub-layer's input, `x + attn(ln1(x))`, and the stream itself is never normalised.",
            edits={"x = x + self.attn(self.ln1(x), cache, layer_idx, start)": "x = self.ln1(x + self.attn(x, cache, layer_idx, start))",
                   "return x + self.mlp(self.ln2(x))": "return self.ln2(x + self.mlp(x))"},
            hint="In a pre-norm block, what does the norm apply to: the sub-layer's input, or the sum after "
                 "the residual add? Follow the stream through your forward."),
    Mistake("Llama", "offset_per_layer", "each layer reads len(cache) itself, after the layers before it have "
            "updated the cache, so layers past the first rotate at the wrong positions: read start = len(cache) once "
            "and pass it to every block.",
            edits={"x = block(x, cache, i, start)": "x = block(x, cache, i)"},
            hint="Print the start position each layer uses during one cached step: are they all the same? When "
                 "does each layer read the cache's length?"),
    Mistake("LlamaAttention", "attn_rope_base_ignored", "rope_base is not passed to the rotation, so every model "
            "rotates with base 10000: Llama 3 uses rope_base=500000, and a checkpoint trained with it attends to the "
            "wrong positions. Pass self.rope_base to apply_rope_half.",
            edits={"L06.apply_rope_half(t, positions, self.rope_base)": "L06.apply_rope_half(t, positions)"},
            hint="Build the layer with a rope_base other than the default and check that the value reaches the "
                 "rotation."),
    Mistake("swiglu_hidden_dim", "multiplier_truncated_once", "the multiplier is applied to 8·D/3 before it is "
            "truncated: Llama truncates twice, `int(2 * 4 * d_model / 3)` first, then int(multiplier × that) (with "
            "multiple_of=1 the one-unit difference shows).",
            edits={"hidden = int(ffn_dim_multiplier * hidden)": "hidden = int(ffn_dim_multiplier * 2 * 4 * d_model / 3)"},
            hint="Follow the width step by step with ffn_dim_multiplier set and multiple_of=1: where is a "
                 "value truncated to an integer, and how many times?"),
    Mistake("RollingKVCache", "trim_only_when_full", "the store is updated only once the join passes the window; "
            "until then each update's new positions are lost: store the last `window` of the join at every update "
            "(while the cache is not full, that is the whole join).",
            edits={"        self.keys[layer_idx] = k_all[..., -self.window:, :]":
                   "        if k_all.shape[-2] > self.window:\n            self.keys[layer_idx] = k_all[..., -self.window:, :]",
                   "        self.values[layer_idx] = v_all[..., -self.window:, :]":
                   "            self.values[layer_idx] = v_all[..., -self.window:, :]"},
            hint="Print what your cache holds after each of the first few updates, before the window is full: "
                 "is every new position kept?"),
    Mistake("LlamaConfig", "rejects_mha", "a config with n_kv_head equal to n_head is rejected, but it is valid: plain "
            "multi-head attention, each query head with its own KV head. Raise only when n_kv_head does not divide "
            "n_head.",
            edits={"if self.n_head % self.n_kv_head:": "if self.n_head % self.n_kv_head or self.n_kv_head >= self.n_head:"},
            hint="Is a config with as many KV heads as query heads valid? Check which configs your validation "
                 "rejects."),
    Mistake("Llama", "final_norm_eps_default", "the final RMSNorm is built with its default eps, not config.norm_eps: "
            "every norm of the model, the final one too, takes the config's eps (a checkpoint's rms_norm_eps).",
            edits={"self.norm = L05.RMSNorm(D, eps=config.norm_eps)": "self.norm = L05.RMSNorm(D)"},
            hint="Which eps does every norm of the model use, the final one included? Print each norm's eps."),
    Mistake("load_llama_state_dict", "param_data_assigned", "each parameter's .data is replaced by the checkpoint's "
            "tensor, so the model shares memory with the checkpoint and takes its dtype: copy into the existing "
            "parameter instead, `param.copy_(tensor)` under torch.no_grad().",
            edits={"param.copy_(ours[name])": "param.data = ours[name]"},
            hint="After loading, change a tensor of the checkpoint and print the model's parameter: does it "
                 "change too? What is the parameter's dtype?"),
    Mistake("decoder_costs", "kv_bytes_from_a_table", "the bytes per value come from a table of a few dtypes, which "
            "fails for the others (float64 takes 8, int8 and float8 one): ask the dtype itself, `dtype.itemsize` "
            "(or `torch.empty((), dtype=dtype).element_size()`).",
            edits={"bytes_per_value = torch.empty((), dtype=dtype).element_size()":
                   "bytes_per_value = {torch.float32: 4, torch.float16: 2, torch.bfloat16: 2}[dtype]"},
            hint="Try a dtype your code did not list, such as float64: where can you ask any dtype for its "
                 "size in bytes?"),
    Mistake("filter_logits", "top_p_drops_crossing", "top-p drops the token that crosses p, so the kept set sums "
            "to less than p (and nothing is left when the top token alone exceeds p): drop a token only when the "
            "tokens before it already reach p, `cumsum - probs >= p`.",
            edits={"before = sorted_probs.cumsum(dim=-1) - sorted_probs": "before = sorted_probs.cumsum(dim=-1)"},
            hint="With top_p = 0.6 and probabilities 0.5, 0.3, 0.2, which tokens must stay? Check whether the "
                 "token that crosses p is kept."),
    Mistake("filter_logits", "top_p_one_drops_tokens", "top_p=1.0 drops the least likely tokens: in float32 the "
            "cumulative sum reaches 1.0 before the tiny probabilities are added, so `before >= top_p` holds for "
            "them. p = 1 keeps every token: filter only when top_p < 1.",
            edits={"if top_p is not None and top_p < 1.0:": "if top_p is not None:"},
            hint="With top_p = 1.0 every token must stay. Print the cumulative sum in float32 near its end: "
                 "does it reach 1.0 early?"),
    Mistake("filter_logits", "top_p_unsorted", "the cumulative sum runs over the probabilities in vocabulary order: "
            "sort them in decreasing order first, then map the decision back with the sort's indices.",
            edits={"sorted_probs, order = probs.sort(dim=-1, descending=True)":
                   "sorted_probs, order = probs, torch.arange(probs.shape[-1], device=probs.device).expand_as(probs)"},
            hint="In which order must the probabilities be added up for top-p? Print the order your cumulative "
                 "sum runs in."),
    Mistake("filter_logits", "min_p_against_sum", "min-p compares against min_p times the sum of the probabilities "
            "(always 1); it is min_p times the largest probability, `probs.amax(-1, keepdim=True)`.",
            edits={"probs.amax(dim=-1, keepdim=True)": "probs.sum(dim=-1, keepdim=True)"},
            hint="min-p compares each probability with min_p times what? Print that threshold for one row."),
    Mistake("decoder_costs", "tied_head_counted_twice", "a tied head is counted as a second V×D matrix: with "
            "tie_embeddings the head is the embedding, counted once in params (it is still a matrix product in N_mm).",
            edits={"head = 0 if config.tie_embeddings else V * D": "head = V * D"},
            hint="With tied embeddings, how many V×D matrices does the model hold? Count the head once only "
                 "when it is its own matrix."),
    Mistake("decoder_costs", "flops_from_all_parameters", "train_flops uses 6 × every parameter: the embedding is a "
            "table lookup (no FLOPs) and the norm gains are not matrix products; N_mm is the layers' matrices plus "
            "the head.",
            edits={"n_matmul = L * per_layer + V * D": "n_matmul = params"},
            hint="Which parameters take part in a matrix product during training, and which are looked up or "
                 "only scale? Count only the first kind."),
)


# ----------------------------------------------------------------------------------------------
# `course bench lesson10`: a training step of your Llama against the same model from torch's own modules


class TorchLlama(nn.Module):
    """The lesson's decoder from torch's own parts: nn.RMSNorm, SDPA with enable_gqa (no repeat_kv), F.silu."""

    def __init__(self, cfg):
        super().__init__()
        D, self.cfg = cfg.n_embd, cfg
        self.embed = nn.Embedding(cfg.vocab_size, D)
        self.blocks = nn.ModuleList()
        kv = cfg.n_kv_head * D // cfg.n_head
        for _ in range(cfg.n_layer):
            block = nn.Module()
            block.ln1, block.ln2 = nn.RMSNorm(D, eps=cfg.norm_eps), nn.RMSNorm(D, eps=cfg.norm_eps)
            block.attn = _Attn(D, kv)
            block.mlp = _Mlp(D, cfg.hidden_dim)
            self.blocks.append(block)
        self.norm = nn.RMSNorm(D, eps=cfg.norm_eps)
        self.lm_head = nn.Linear(D, cfg.vocab_size, bias=False)

    def forward(self, idx, targets=None):
        B, T = idx.shape
        H, Hkv, Dh = self.cfg.n_head, self.cfg.n_kv_head, self.cfg.n_embd // self.cfg.n_head
        pos = torch.arange(T, device=idx.device)
        x = self.embed(idx)
        for b in self.blocks:
            h = b.ln1(x)
            q = _rope(b.attn.q_proj(h).view(B, T, H, Dh).transpose(1, 2), pos, self.cfg.rope_base)
            k = _rope(b.attn.k_proj(h).view(B, T, Hkv, Dh).transpose(1, 2), pos, self.cfg.rope_base)
            v = b.attn.v_proj(h).view(B, T, Hkv, Dh).transpose(1, 2)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
            x = x + b.attn.out_proj(y.transpose(1, 2).reshape(B, T, H * Dh))
            h = b.ln2(x)
            x = x + b.mlp.down_proj(F.silu(b.mlp.gate_proj(h)) * b.mlp.up_proj(h))
        logits = F.linear(self.norm(x), self.lm_head.weight)  # the head as torch's functional linear
        loss = None if targets is None else F.cross_entropy(logits.flatten(0, 1), targets.flatten())
        return logits, loss


BENCH_CONFIGS = ({"vocab_size": 65, "block_size": 128, "n_layer": 4, "n_head": 4, "n_kv_head": 2, "n_embd": 128,
                  "hidden_dim": 384, "batch": 16},
                 {"vocab_size": 512, "block_size": 256, "n_layer": 6, "n_head": 6, "n_kv_head": 2, "n_embd": 384,
                  "hidden_dim": 1024, "batch": 8})


def benchmark(ns: dict, device: str, configs=BENCH_CONFIGS, repeats: int = 7) -> dict:
    """Median time of one AdamW training step (forward, backward, step) of your Llama and of TorchLlama of the
    same size, measured in the same run."""
    def build(c):
        return ns["Llama"](ns["LlamaConfig"](**c)), TorchLlama(_Config(**c))

    rows = training_steps(configs, build, lambda c, b: f"L={c['n_layer']} D={c['n_embd']} H={c['n_head']}/"
                          f"{c['n_kv_head']} T={c['block_size']} B={b}", device, repeats)
    return {"title": f"Llama training step on {device}: yours against nn.RMSNorm + SDPA(enable_gqa)",
            "columns": TRAINING_COLUMNS, "rows": rows, "notes": [TRAINING_NOTE]}


# The input battery, on the check of each exercise that computes on a drawn input (a module's parameters
# follow the input's dtype there: `_precision` moves the module). The others take none the battery could change.
# Attention skips the offsets (engine.OFFSET_SCORES says why), and so does SwiGLU (its products cancel).
from .engine import OFFSET_SCORES  # noqa: E402

CHECKS.add_battery(
    base={"SwiGLU": "output is down_proj(silu(gate_proj(x)) * up_proj(x)) (parameters set by name)",
          "LlamaAttention": "output matches the reference with 1, some and all KV heads (parameters set by name)",
          "LlamaBlock": "pre-norm output x + attn(ln1(x)), then + mlp(ln2(x)) (parameters set by name)",
          "filter_logits": "top_k, then top_p, then min_p, each on what is left; any leading dims"},
    skip={"filter_logits": {
              "bfloat16 inputs on the CPU": "rounded to 8 bits, the 50 logits of a row tie, and which of tied logits "
                                            "top_k keeps is not defined (a correct filter could keep the other)",
              "float16 inputs on the CPU": "rounded to 11 bits the logits may tie, and which of tied logits top_k "
                                           "keeps is not defined",
              "tiny inputs (scaled by 1e-4)": "logits times 1e-4 give probabilities equal to ~7 digits, so their "
                                              "float32 order, which top_p sorts by, is decided by rounding"},
          "LlamaAttention": OFFSET_SCORES,
          "SwiGLU": dict.fromkeys(("inputs offset by +1000", "very negative inputs (about -400)"),
                                  "offset inputs make silu(gate)·up products of ~1e6 that down_proj sums to outputs "
                                  "of ~10: the cancellation is decided by rounding (~5% of seeds differ)"),
          "swiglu_hidden_dim": "takes sizes (integers), no tensor",
          "LlamaConfig": "takes numbers, no tensor",
          "Llama": "its input is integer token ids; its parameters are set by name by the grader",
          "load_llama_state_dict": "takes a checkpoint the grader builds (a dict of float32 weights), not a drawn input",
          "decoder_costs": "takes a config's sizes, no tensor"})
