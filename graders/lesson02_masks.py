"""Lesson 02 — masks: `causal_mask`, `padding_mask`, `sliding_window_mask`, `to_additive`, `masked_attention`.

Reads like the lesson: each exercise's probes and judges in turn, then the known mistakes.
Probes run in the sandboxed child (student code); judges run in the parent.

The mask exercises are judged against the reference *and* by what a mask is for: a causal mask must
keep later tokens from changing earlier outputs, a padding mask must give padded keys zero weight.
Those behavioural probes run the student's mask through torch's own attention, called by the probe
(never inside `ctx.call`, so it is not the student's call).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from .engine.compare import close
from .engine.checks import Arg, Domain, JudgeContext
from .engine.probe import relaid
from .engine import CPU, CPU_AND_GPU, Checks, Config, Mistake, WrongResult, agrees_with, made_on_meta, on_meta, same
from .interface import PASSED, arguments

CHECKS = Checks("lesson02")
# What this lesson's checks import lazily (a tril on the meta device imports symbolic_shapes; not torch._dynamo,
# which engine.probe.defer_dynamo spares every seat), imported once by the warm zygote (zygote.preload);
# tests/e2e/test_warm_imports.py names what is missing.
WARM_IMPORTS = ("torch.fx.experimental.symbolic_shapes",)

FORBIDDEN = {
    # torch's SDPA already returns zeros for rows with no visible key: the exercise is to write that.
    "masked_attention": ("torch.nn.functional.scaled_dot_product_attention",),
}

# a mask has no float dtype: one CPU config, plus one CUDA config where the device is what is checked
CPU_AND_CUDA_DEVICE = (Config("cpu", "float32"), Config("cuda", "float32"))


# ----------------------------------------------------------------------------------------------
# helpers shared by the mask exercises


def _grid(m: torch.Tensor) -> str:
    """A small boolean row as text: '1' may attend, '.' may not."""
    return "".join("1" if bool(x) else "." for x in m.tolist())


def _mask_msg(actual, expected: torch.Tensor, what: str) -> str | None:
    """None when `actual` is the boolean mask `expected`; otherwise which row differs, drawn."""
    if not isinstance(actual, torch.Tensor):
        return close(actual, expected, what)
    if actual.dtype != torch.bool:
        return (f"{what} has dtype {str(actual.dtype).removeprefix('torch.')}; a mask is a bool tensor "
                f"(True = may attend), e.g. build it from a comparison or pass dtype=torch.bool")
    if actual.shape != expected.shape:
        return f"{what} has shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
    bad = actual != expected
    if not bad.any():
        return None
    rows_a = actual.reshape(-1, actual.shape[-1]) if actual.dim() else actual.reshape(1, 1)
    rows_e = expected.reshape(-1, expected.shape[-1]) if expected.dim() else expected.reshape(1, 1)
    r = int(bad.reshape(rows_a.shape).any(-1).nonzero()[0])
    where = f"row {r}" if actual.dim() <= 2 else f"row {tuple(int(i) for i in _unravel(r, actual.shape[:-1]))}"
    return (f"{what} differs at {int(bad.sum())} of {bad.numel()} positions; first at {where}: "
            f"expected {_grid(rows_e[r])}, got {_grid(rows_a[r])} ('1' = may attend)")


def _unravel(i: int, shape) -> tuple:
    out = []
    for size in reversed(tuple(shape)):
        out.append(i % size)
        i //= size
    return tuple(reversed(out))


def masks_equal(*keys: str):
    """A judge: each mask the reference observed (or those under `keys`) equals the student's exactly."""
    def judge(s, r, ctx):
        for k in keys or [k for k, v in r.items() if isinstance(v, torch.Tensor) and v.dtype == torch.bool]:
            msg = _mask_msg(s.get(k), r[k], k)
            if msg:
                return msg
        return None
    return judge


def _as_mask(ctx, m, shape: tuple, what: str) -> torch.Tensor:
    """The student's mask, checked before torch's attention uses it, so a wrong kind fails clearly."""
    if not isinstance(m, torch.Tensor) or m.dtype != torch.bool or tuple(m.shape) != tuple(shape):
        got = (f"a {str(m.dtype).removeprefix('torch.')} Tensor of shape {tuple(m.shape)}"
               if isinstance(m, torch.Tensor) else f"a {type(m).__name__}")
        raise WrongResult(f"{what} should be a bool Tensor of shape {tuple(shape)}, but it is {got}")
    return m.to(ctx.device)


def _unchanged(before_key: str, after_key: str, rows: slice | None, why: str, tol_scale: float = 2.0):
    """A judge: the student's outputs before and after a perturbation agree (on `rows` of the query
    axis), then the output matches the reference."""
    def judge(s, r, ctx):
        a, b = s.get(before_key), s.get(after_key)
        if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape:
            a_, b_ = (a, b) if rows is None else (a[..., rows, :], b[..., rows, :])
            msg = close(b_, a_, "output", tol=ctx.tol.scaled(tol_scale))
            if msg:
                return f"{why} ({msg})"
        return same(before_key)(s, r, ctx)
    return judge


def _attend(q, k, v, mask):
    """Torch's attention with a boolean mask, the probes' yardstick (zeros for rows with no key)."""
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


# ----------------------------------------------------------------------------------------------
# causal_mask(t_q, t_k=None, device=None) -> BoolTensor[t_q, t_k], bottom-right aligned


@CHECKS.probe("causal_mask", "square masks (t_k defaults to t_q)", masks_equal(), CPU,
              rule="With as many queries as keys, query i may see key j when j ≤ i: the lower triangle including the "
                   "diagonal")
def causal_square(ctx):
    f = ctx.target
    return {"causal_mask(5)": ctx.call(f, 5), "causal_mask(1)": ctx.call(f, 1),
            "causal_mask(6, 6)": ctx.call(f, 6, 6)}


@CHECKS.probe("causal_mask", "bottom-right aligned when t_k > t_q (the KV-cache case)", masks_equal(), CPU,
              rule="bottom-right aligned: query i may see key j iff j <= i + (t_k - t_q)")
def causal_kv_cache(ctx):
    f = ctx.target
    return {"causal_mask(3, 8)": ctx.call(f, 3, 8), "causal_mask(1, 6)": ctx.call(f, 1, 6),
            "causal_mask(4, 5)": ctx.call(f, 4, 5)}


def _no_future(s, r, ctx):
    unchanged = _unchanged("output", "output with the future changed", slice(0, 4),
                           "changing the keys and values at positions 4 and later changed the outputs of queries "
                           "0-3: the mask lets a query see keys after its own position")
    return unchanged(s, r, ctx) or masks_equal()(s, r, ctx) or same()(s, r, ctx)


@CHECKS.probe("causal_mask", "future tokens do not change past outputs", _no_future, CPU,
              rule="A causal mask forbids every query from seeing keys after its own position")
def causal_future(ctx):
    T = 7
    mask = ctx.call(ctx.target, T)
    m = _as_mask(ctx, mask, (T, T), "causal_mask(7)")
    q, k, v = ctx.randn(2, 3, T, 8), ctx.randn(2, 3, T, 8), ctx.randn(2, 3, T, 5)  # (B, H, T, D)
    k2, v2 = k.clone(), v.clone()
    k2[..., 4:, :] = ctx.randn(2, 3, T - 4, 8, scale=5.0)  # new tokens from position 4 on
    v2[..., 4:, :] = ctx.randn(2, 3, T - 4, 5, scale=5.0)
    mask_kv = ctx.call(ctx.target, 3, 8)
    m_kv = _as_mask(ctx, mask_kv, (3, 8), "causal_mask(3, 8)")
    qc, kc, vc = ctx.randn(2, 3, 3, 8), ctx.randn(2, 3, 8, 8), ctx.randn(2, 3, 8, 5)
    return {"mask": mask, "mask (3 queries, 8 keys)": mask_kv,
            "output": _attend(q, k, v, m), "output with the future changed": _attend(q, k2, v2, m),
            "output (3 queries, 8 keys)": _attend(qc, kc, vc, m_kv)}


@CHECKS.probe("causal_mask", "t_q > t_k: the first t_q − t_k queries see no key", masks_equal(), CPU, hidden=True,
              rule="It must also work for `t_q > t_k` (the first rows are then all False)")
def causal_more_queries(ctx):
    return {"causal_mask(6, 4)": ctx.call(ctx.target, 6, 4), "causal_mask(3, 1)": ctx.call(ctx.target, 3, 1)}


def _agrees_lower_right(s, r, ctx):
    for key in [k for k in r if k.startswith("causal_mask")]:
        msg = _mask_msg(s.get(key), r[f"torch {key}"], f"{key} against torch.nn.attention.bias.causal_lower_right")
        if msg:
            return msg
    return None


@CHECKS.probe("causal_mask", "agrees with torch.nn.attention.bias.causal_lower_right", _agrees_lower_right, CPU,
              hidden=True,
              rule="pass a bottom-right mask instead, or `torch.nn.attention.bias.causal_lower_right(t_q, t_k)`")
def causal_vs_torch(ctx):
    obs = {}
    for t_q, t_k in LOWER_RIGHT_SIZES:
        obs[f"causal_mask({t_q}, {t_k})"] = ctx.call(ctx.target, t_q, t_k)
        obs[f"torch causal_mask({t_q}, {t_k})"] = lower_right(t_q, t_k)
    return obs


# The sizes causal_vs_torch probes. It builds causal_lower_right's mask with tril rather than importing
# torch.nn.attention.bias, which pulls in torch._dynamo (so would the device probe's meta-device tril, later:
# here the import moves rather than goes); tests/lessons/test_lesson02.py holds the two equal at these sizes.
LOWER_RIGHT_SIZES = ((4, 4), (2, 7), (5, 9), (6, 4))


def lower_right(t_q: int, t_k: int) -> torch.Tensor:
    """torch.nn.attention.bias.causal_lower_right(t_q, t_k)'s mask: query i sees keys j <= i + t_k - t_q."""
    return torch.ones(t_q, t_k, dtype=torch.bool).tril(t_k - t_q)


def _on_device(s, r, ctx):
    if s.get("device") != ctx.config.device:
        return (f"causal_mask(4, 6, device=...) returned a mask on {s.get('device')!r}, not on {ctx.config.device!r}: "
                f"create it with device=device")
    return masks_equal()(s, r, ctx)


@CHECKS.probe("causal_mask", "made on the requested device", _on_device, CPU_AND_CUDA_DEVICE,
              rule="a bool tensor of shape `(t_q, t_k)` on `device`")
def causal_device(ctx):
    m = ctx.call(ctx.target, 4, 6, device=ctx.device)
    return {"causal_mask(4, 6, device=...)": m, "device": m.device.type if isinstance(m, torch.Tensor) else None}


@CHECKS.probe("causal_mask", 'device="meta": made on the device asked for, whatever it is',
              made_on_meta("causal_mask(4, 6)"), CPU, hidden=True,
              rule="a bool tensor of shape `(t_q, t_k)` on `device`")
def causal_meta(ctx):
    return on_meta(ctx.call(ctx.target, 4, 6, device="meta"))


# The declared domain of causal_mask: square (t_k omitted or equal), t_k > t_q (a KV cache) and t_k < t_q (rows
# with no key), one query, and a long one (100 queries over 300 keys); `device` omitted, None, the string "cpu",
# torch.device("cpu") or "meta" (the device honoured on every path, the dtype bool).
# t_k=None given explicitly is the same as t_k omitted; the arguments come by keyword or in the signature's order.
_DEVICES = {"None": None, '"cpu"': "cpu", 'torch.device("cpu")': torch.device("cpu"), '"meta"': "meta"}
CAUSAL_DOMAIN = Domain(
    args=(Arg("t_q, t_k", ("5, omitted", "5, 5", "3, 8", "1, 6", "6, 4", "3, 1", "1, omitted", "100, 300",
                           "5, None", "1, None")),
          Arg("device", ("omitted", *_DEVICES)), PASSED), examples=4, tensors=False)


def _made_like(s, r, what: str) -> str | None:
    """The student's mask (or bias) against the reference's, on the device it was asked for; a result on the
    meta device is judged by its device, shape and dtype (it holds no values)."""
    if r.get("device") == "meta" or s.get("device") == "meta":
        return made_on_meta(what)(s, r, None)
    if s.get("device") != r.get("device"):
        return (f"{what} came back on {s.get('device')!r}, not on {r.get('device')!r}: make every tensor on the "
                f"device asked for")
    return None


def _causal_domain_judge(s, r, ctx):
    msg = _made_like(s, r, "the mask")
    if msg or r.get("device") == "meta":
        return msg
    return masks_equal("mask")(s, r, ctx)


@CHECKS.domain("causal_mask", CAUSAL_DOMAIN, _causal_domain_judge)
def causal_domain(ctx, ex):
    t_q, t_k = ex["t_q, t_k"].split(", ")
    given = {}
    if t_k != "omitted":
        given["t_k"] = None if t_k == "None" else int(t_k)
    if ex["device"] != "omitted":
        given["device"] = _DEVICES[ex["device"]]
    args, kwargs = arguments(("t_k", "device"), given, {"t_k": None, "device": None}, ex["passed"])
    m = ctx.call(ctx.target, int(t_q), *args, **kwargs)
    if isinstance(m, torch.Tensor) and m.is_meta or ex["device"] == '"meta"':
        return on_meta(m)
    return {"mask": m, "device": m.device.type if isinstance(m, torch.Tensor) else None}


# ----------------------------------------------------------------------------------------------
# padding_mask(lengths, t) -> BoolTensor[B, 1, 1, t], True at real keys


def _lengths(ctx, values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.long, device=ctx.device)


@CHECKS.probe("padding_mask", "True at real keys, shape (B, 1, 1, t)", masks_equal(), CPU,
              rule="Return a bool tensor of shape `(B, 1, 1, t)`, True at the real (non-pad) key positions")
def padding_basic(ctx):
    f = ctx.target
    return {"padding_mask([3, 7, 1, 5], 7)": ctx.call(f, _lengths(ctx, [3, 7, 1, 5]), 7),
            "padding_mask([2, 4], 9)": ctx.call(f, _lengths(ctx, [2, 4]), 9)}


def _padded_zero(s, r, ctx):
    w, blocked = s.get("weights"), r["padded"]
    if isinstance(w, torch.Tensor) and w.shape == blocked.shape:
        leaked = blocked & ((w != 0) | w.isnan())
        if leaked.any():
            i = tuple(int(j) for j in leaked.nonzero()[0])
            return (f"{int(leaked.sum())} attention weights on padded keys are not 0, first at (b, h, query, key) "
                    f"= {i}: {w[i].item():.3g}. Key j of sequence b is padding when j ≥ lengths[b]; the mask "
                    f"must be False there")
    return same()(s, r, ctx)


@CHECKS.probe("padding_mask", "padded keys get zero weight", _padded_zero, CPU,
              rule="True at key j of sequence b iff j < lengths[b]")
def padding_weights(ctx):
    lengths, T = [7, 3, 5], 7
    mask = ctx.call(ctx.target, _lengths(ctx, lengths), T)
    m = _as_mask(ctx, mask, (3, 1, 1, T), "padding_mask([7, 3, 5], 7)")
    q, k = ctx.randn(3, 2, 4, 8), ctx.randn(3, 2, T, 8)  # (B, H, Tq, D), (B, H, Tk, D)
    scores = (q @ k.transpose(-2, -1) / math.sqrt(8)).masked_fill(~m, float("-inf"))  # (B, H, Tq, Tk)
    weights = torch.softmax(scores.float(), dim=-1)
    padded = (torch.arange(T) >= torch.tensor(lengths)[:, None]).view(3, 1, 1, T).expand(3, 2, 4, T)
    return {"weights": weights, "padded": padded}


@CHECKS.probe("padding_mask", "a length of 0 and a length of t", masks_equal(), CPU, hidden=True,
              rule="A length of 0 gives an all-False row, a length of `t` an all-True one")
def padding_edges(ctx):
    return {"padding_mask([0, 6, 2], 6)": ctx.call(ctx.target, _lengths(ctx, [0, 6, 2]), 6)}


def _pad_device(s, r, ctx):
    if s.get("device") != ctx.config.device:
        return (f"with `lengths` on {ctx.config.device!r} the mask came back on {s.get('device')!r}: make it on "
                f"lengths.device, so that it can mask scores living there")
    return masks_equal()(s, r, ctx)


@CHECKS.probe("padding_mask", "made on the device of `lengths`", _pad_device, CPU_AND_CUDA_DEVICE,
              rule="real (non-pad) key positions, on `lengths`' device")
def padding_device(ctx):
    m = ctx.call(ctx.target, _lengths(ctx, [4, 2]), 5)
    return {"padding_mask([4, 2], 5)": m, "device": m.device.type if isinstance(m, torch.Tensor) else None}


@CHECKS.probe("padding_mask", "`lengths` on the meta device: the mask is made there too",
              made_on_meta("padding_mask(lengths, 5)"), CPU, hidden=True,
              rule="real (non-pad) key positions, on `lengths`' device")
def padding_meta(ctx):
    return on_meta(ctx.call(ctx.target, torch.empty(2, dtype=torch.long, device="meta"), 5))


# The declared domain of padding_mask: batches of four, one and two sequences with lengths from 0 to t (all
# padding, none), t from 1 to 300, `lengths` as int64 or int32, contiguous or a strided view.
PADDING_DOMAIN = Domain(
    args=(Arg("lengths", ("mixed, 4 sequences", "one sequence", "0 and t", "all 0", "all t")), Arg("t", (7, 1, 300))),
    dtypes=(("lengths", ("int64", "int32")),), layouts=(("lengths", ("contiguous", "strided")),), examples=4)


@CHECKS.domain("padding_mask", PADDING_DOMAIN, masks_equal("mask"))
def padding_domain(ctx, ex):
    t = ex["t"]
    values = {"mixed, 4 sequences": [min(3, t), t, 1, min(5, t)], "one sequence": [max(t - 1, 1)], "0 and t": [0, t],
              "all 0": [0, 0], "all t": [t, t, t]}[ex["lengths"]]
    lengths = torch.tensor(values, dtype=getattr(torch, ex["dtype of lengths"]))
    if ex["layout of lengths"] == "strided":
        lengths = torch.stack([lengths, torch.zeros_like(lengths)], dim=-1)[:, 0]  # every other entry of a wider row
    return {"mask": ctx.call(ctx.target, lengths, t)}


# ----------------------------------------------------------------------------------------------
# sliding_window_mask(t, window) -> BoolTensor[t, t]: i − window < j ≤ i


@CHECKS.probe("sliding_window_mask", "i − window < j ≤ i", masks_equal(), CPU,
              rule="Return a bool tensor of shape `(t, t)`, True where i − window < j ≤ i")
def window_basic(ctx):
    f = ctx.target
    return {"sliding_window_mask(9, 3)": ctx.call(f, 9, 3), "sliding_window_mask(6, 2)": ctx.call(f, 6, 2),
            "sliding_window_mask(5, 1)": ctx.call(f, 5, 1)}


def _at_most_window(s, r, ctx):
    m = s.get("sliding_window_mask(10, 4)")
    if isinstance(m, torch.Tensor) and m.dtype == torch.bool and m.shape == (10, 10):
        counts = m.sum(-1)
        if (counts > 4).any():
            i = int((counts > 4).nonzero()[0])
            return (f"query {i} may see {int(counts[i])} keys ({_grid(m[i])}), but window=4 allows at most 4: "
                    f"the window is the key itself and the 3 before it")
        if (counts != r["sliding_window_mask(10, 4)"].sum(-1)).any():
            i = int((counts != r["sliding_window_mask(10, 4)"].sum(-1)).nonzero()[0])
            return (f"query {i} may see {int(counts[i])} keys ({_grid(m[i])}); it should see "
                    f"min(i + 1, window) = {min(i + 1, 4)}")
    return masks_equal()(s, r, ctx)


@CHECKS.probe("sliding_window_mask", "each query sees at most `window` keys", _at_most_window, CPU,
              rule="Each query sees at most `window` keys (fewer near the start)")
def window_count(ctx):
    return {"sliding_window_mask(10, 4)": ctx.call(ctx.target, 10, 4)}


@CHECKS.probe("sliding_window_mask", "a window of t or more is the plain causal mask", masks_equal(), CPU,
              hidden=True, rule="a window of `t` or more is the plain causal mask")
def window_wide(ctx):
    return {"sliding_window_mask(5, 5)": ctx.call(ctx.target, 5, 5),
            "sliding_window_mask(4, 100)": ctx.call(ctx.target, 4, 100)}



# (issue 17, feedback) the lesson's text says a window below 1 is a ValueError: graded as it says
def _raised(ctx, *args) -> str:
    try:
        ctx.call(ctx.target, *args)
    except NotImplementedError:
        raise  # the stub: not implemented, not failed
    except Exception as exc:  # noqa: BLE001 - which exception is the observation
        return type(exc).__name__
    return "nothing"


def _window_below_one(s, r, ctx):
    for key, want in r.items():
        if s.get(key) != want:
            got = "raised nothing" if s.get(key) == "nothing" else f"raised {s.get(key)}"
            return (f"{key} {got}; a window below 1 would leave a query no key at all, so raise {want} "
                    f"(as the exercise says)")
    return None


@CHECKS.probe("sliding_window_mask", "a window below 1 raises ValueError", _window_below_one, CPU,
              rule="A `window` below 1 is an error (`ValueError`)")
def window_below_one(ctx):
    return {f"sliding_window_mask(5, {w})": _raised(ctx, 5, w) for w in (0, -2)}


# The declared domain of sliding_window_mask: t from 1 to 64, windows of 1, 2, 3, t − 1, t, t + 1 and far wider.
WINDOW_DOMAIN = Domain(args=(Arg("t", (6, 1, 2, 64)), Arg("window", (3, 1, 2, "t - 1", "t", "t + 1", 1000))),
                       examples=4, tensors=False)


@CHECKS.domain("sliding_window_mask", WINDOW_DOMAIN, masks_equal("mask"))
def window_domain(ctx, ex):
    t, w = ex["t"], ex["window"]
    w = {"t - 1": t - 1, "t": t, "t + 1": t + 1}.get(w, w)
    return {"mask": ctx.call(ctx.target, t, w)}  # a window below 1 (t = 1, t - 1) raises: outside the domain


# ----------------------------------------------------------------------------------------------
# to_additive(mask, dtype=torch.float32) -> 0 where True, −inf where False


def _additive_msg(a, mask: torch.Tensor, dtype: torch.dtype, what: str) -> str | None:
    if not isinstance(a, torch.Tensor):
        return f"{what} should be a Tensor, but it is a {type(a).__name__}"
    if a.shape != mask.shape:
        return f"{what} has shape {tuple(a.shape)}, expected the mask's shape {tuple(mask.shape)}"
    if a.dtype != dtype:
        return (f"{what} has dtype {str(a.dtype).removeprefix('torch.')}, but "
                f"{str(dtype).removeprefix('torch.')} was asked for")
    kept, dropped = a[mask], a[~mask]
    if kept.isnan().any() or (kept != 0).any():
        bad = kept[kept.isnan() | (kept != 0)][0].item()
        return (f"{what}: where the mask is True the bias must be exactly 0 (scores unchanged), got {bad:.4g}"
                + (" (0 × −inf is NaN: do not multiply by −inf, select with torch.where or masked_fill)"
                   if math.isnan(bad) else ""))
    if (dropped != float("-inf")).any():
        bad = dropped[dropped != float("-inf")][0].item()
        return (f"{what}: where the mask is False the bias must be exactly -inf, got {bad:.4g}. A large finite "
                f"number is not the same: a row with no visible key then averages the values instead of being "
                f"detectable, and the bias depends on the dtype")
    return None


def _additive_exact(s, r, ctx):
    for key in [k for k in r if k.startswith("to_additive")]:
        mask, dtype = r[f"mask for {key}"], r[key].dtype
        msg = _additive_msg(s.get(key), mask, dtype, key)
        if msg:
            return msg
    return None


@CHECKS.probe("to_additive", "exactly 0 where True and −inf where False", _additive_exact, CPU_AND_GPU,
              rule="exactly 0 where the mask is True and exactly −inf where it is False")
def additive_exact(ctx):
    mask = ctx.bernoulli(2, 1, 5, 7, p=0.6)  # (B, 1, Tq, Tk)
    dt = str(ctx.dtype).removeprefix("torch.")
    return {"to_additive(mask)": ctx.call(ctx.target, mask), "mask for to_additive(mask)": mask,
            f"to_additive(mask, dtype={dt})": ctx.call(ctx.target, mask, dtype=ctx.dtype),
            f"mask for to_additive(mask, dtype={dt})": mask}


@CHECKS.probe("to_additive", "in the requested dtype", _additive_exact, CPU,
              rule="turned into a bias of the same shape and device, in `dtype`")
def additive_dtypes(ctx):
    mask = ctx.bernoulli(3, 4, p=0.5)
    obs = {}
    for dt in (torch.float16, torch.bfloat16, torch.float64):
        key = f"to_additive(mask, dtype={str(dt).removeprefix('torch.')})"
        obs[key], obs[f"mask for {key}"] = ctx.call(ctx.target, mask, dtype=dt), mask
    return obs


@CHECKS.probe("to_additive", "as attn_mask, the same attention as the boolean mask", agrees_with(
    ("output (additive mask)", "torch output (boolean mask)"), scale=2,
    label="F.scaled_dot_product_attention with the boolean mask"), CPU_AND_GPU,
    rule="the same mask as a bias added to the scores")
def additive_in_sdpa(ctx):
    q, k, v = ctx.randn(2, 3, 5, 8), ctx.randn(2, 3, 9, 8), ctx.randn(2, 3, 9, 4)
    mask = ctx.bernoulli(5, 9, p=0.6)
    mask[:, 0] = True  # every query sees a key
    bias = ctx.call(ctx.target, mask, dtype=ctx.dtype)
    if not isinstance(bias, torch.Tensor) or bias.shape != mask.shape or not bias.is_floating_point():
        raise WrongResult("to_additive(mask, dtype=...) should return a floating-point Tensor of the mask's shape")
    return {"output (additive mask)": F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(ctx.dtype)),
            "torch output (boolean mask)": F.scaled_dot_product_attention(q, k, v, attn_mask=mask)}


# The declared domain of to_additive: masks of 1 to 4 dims, a single entry and a wide one, random, all True and
# all False; `dtype` omitted or any floating dtype; the mask on the CPU or the meta device (the bias is made on
# the mask's device), laid out any way.
ADDITIVE_DOMAIN = Domain(
    args=(Arg("mask shape", ("2, 1, 5, 7", "5", "3, 4", "1, 1", "2, 1, 1, 300")),
          Arg("dtype", ("omitted", "float32", "float16", "bfloat16", "float64")),
          Arg("mask values", ("random", "all True", "all False")), Arg("device of mask", ("cpu", "meta")), PASSED),
    layouts=(("mask", ("contiguous", "transposed", "strided")),), examples=5)


def _additive_domain_judge(s, r, ctx):
    msg = _made_like(s, r, "the bias")
    if msg or r.get("device") == "meta":
        return msg
    return _additive_msg(s.get("bias"), r["mask"], r["bias"].dtype, "the bias")


@CHECKS.domain("to_additive", ADDITIVE_DOMAIN, _additive_domain_judge)
def additive_domain(ctx, ex):
    shape = tuple(int(n) for n in ex["mask shape"].split(", "))
    mask = {"random": ctx.bernoulli(*shape, p=0.6), "all True": torch.ones(shape, dtype=torch.bool),
            "all False": torch.zeros(shape, dtype=torch.bool)}[ex["mask values"]]
    mask = relaid(mask.to(ex["device of mask"]), ex["layout of mask"])
    given = {} if ex["dtype"] == "omitted" else {"dtype": getattr(torch, ex["dtype"])}
    args, kwargs = arguments(("dtype",), given, {"dtype": torch.float32}, ex["passed"])
    bias = ctx.call(ctx.target, mask, *args, **kwargs)
    if ex["device of mask"] == "meta":
        return on_meta(bias)
    return {"bias": bias, "mask": mask, "device": bias.device.type if isinstance(bias, torch.Tensor) else None}


# ----------------------------------------------------------------------------------------------
# masked_attention(q, k, v, mask) -> Tensor; a query with no visible key outputs zeros


def _rand_mask(ctx, *shape: int, p: float = 0.6) -> torch.Tensor:
    m = ctx.bernoulli(*shape, p=p)
    m[..., 0] = True  # every query sees at least one key
    return m


@CHECKS.probe("masked_attention", "matches the reference (t_q ≠ t_k, mask broadcast over heads)", same(),
              CPU_AND_GPU, rule="`t_q ≠ t_k` is allowed; `mask` is bool and broadcastable to `(..., t_q, t_k)`")
def attn_random(ctx):
    q, k, v = ctx.randn(2, 3, 5, 8), ctx.randn(2, 3, 7, 8), ctx.randn(2, 3, 7, 6)  # (B, H, T, D)
    mask = _rand_mask(ctx, 2, 1, 5, 7)  # (B, 1, Tq, Tk)
    return {"output": ctx.call(ctx.target, q, k, v, mask)}


_agrees_with_sdpa = agrees_with(scale=2, label="F.scaled_dot_product_attention")


@CHECKS.probe("masked_attention", "agrees with F.scaled_dot_product_attention(attn_mask=...)", _agrees_with_sdpa,
              CPU_AND_GPU,
              rule="Where every query may see at least one key, your output must equal "
                   "`F.scaled_dot_product_attention(q, k, v, attn_mask=mask)`")
def attn_vs_sdpa(ctx):
    q, k, v = ctx.randn(3, 2, 6, 16), ctx.randn(3, 2, 9, 16), ctx.randn(3, 2, 9, 4)
    masks = {
        "padding (B, 1, 1, Tk)": (torch.arange(9) < torch.tensor([9, 4, 1])[:, None]).view(3, 1, 1, 9),
        "causal, bottom-right (Tq, Tk)": torch.ones(6, 9, dtype=torch.bool).tril(diagonal=3),
        "random (B, H, Tq, Tk)": _rand_mask(ctx, 3, 2, 6, 9).cpu(),
    }
    obs = {}
    for name, m in masks.items():
        m = m.to(ctx.device)
        obs[f"output, {name} mask"] = ctx.call(ctx.target, q, k, v, m)
        obs[f"torch output, {name} mask"] = F.scaled_dot_product_attention(q, k, v, attn_mask=m)
    return obs


@CHECKS.probe("masked_attention", "future tokens do not change past outputs", _unchanged(
    "output", "output with the future changed", slice(0, 4),
    "changing the tokens at positions 4 and later changed the outputs of queries 0-3 under a causal mask: "
    "positions where the mask is False must get exactly zero weight"), CPU_AND_GPU,
    rule="changing it (a future token, a padded key) does not change that query's output")
def attn_future(ctx):
    T = 7
    q, k, v = ctx.randn(2, 2, T, 8), ctx.randn(2, 2, T, 8), ctx.randn(2, 2, T, 5)
    q2, k2, v2 = q.clone(), k.clone(), v.clone()
    for t, d in ((q2, 8), (k2, 8), (v2, 5)):
        t[..., 4:, :] = ctx.randn(2, 2, T - 4, d, scale=5.0)
    mask = torch.ones(T, T, dtype=torch.bool, device=ctx.device).tril()  # (T, T)
    return {"output": ctx.call(ctx.target, q, k, v, mask),
            "output with the future changed": ctx.call(ctx.target, q2, k2, v2, mask)}


@CHECKS.probe("masked_attention", "padded keys get zero weight", _unchanged(
    "output", "output with the padding changed", None,
    "changing the keys and values at padded positions changed the output: keys where the mask is False "
    "must get exactly zero weight"), CPU_AND_GPU, rule="A key where the mask is False gets weight exactly 0")
def attn_padding(ctx):
    lengths, T = torch.tensor([7, 3, 5]), 7
    padded = (torch.arange(T) >= lengths[:, None]).view(3, 1, T, 1).to(ctx.device)  # (B, 1, Tk, 1)
    q, k, v = ctx.randn(3, 2, 4, 8), ctx.randn(3, 2, T, 8), ctx.randn(3, 2, T, 5)
    k2 = torch.where(padded, ctx.randn(3, 2, T, 8, scale=10.0), k)
    v2 = torch.where(padded, ctx.randn(3, 2, T, 5, scale=100.0), v)
    mask = ~padded.view(3, 1, 1, T)  # (B, 1, 1, Tk): True at real keys
    return {"output": ctx.call(ctx.target, q, k, v, mask),
            "output with the padding changed": ctx.call(ctx.target, q, k2, v2, mask)}


def _empty_rows_zero(s, r, ctx):
    out, empty = s.get("output"), r["empty rows"]
    if isinstance(out, torch.Tensor) and out.shape == r["output"].shape:
        if out.isnan().any():
            i = tuple(int(j) for j in out.isnan().nonzero()[0])
            return (f"the output has {int(out.isnan().sum())} NaN values, first at {i}: a query whose mask row is "
                    f"all False gets softmax over all -inf scores, which is 0/0 = NaN. Give such rows zeros")
        rows = out[empty.expand(out.shape[:-1])]
        if (rows != 0).any():
            i = tuple(int(j) for j in (empty.expand(out.shape[:-1]) & (out != 0).any(-1)).nonzero()[0])
            return (f"query (b, h, i) = {i} may see no key, so its output must be all zeros, but it is "
                    f"{out[i][:4].tolist()}...: a large negative fill instead of -inf spreads its weight evenly "
                    f"over the masked keys")
    return same()(s, r, ctx)


@CHECKS.probe("masked_attention", "a query with no visible key outputs zeros, with no NaN", _empty_rows_zero,
              CPU_AND_GPU, rule="a query with no visible key outputs zeros, with no NaN anywhere")
def attn_empty_rows(ctx):
    q, k, v = ctx.randn(2, 3, 6, 8), ctx.randn(2, 3, 4, 8), ctx.randn(2, 3, 4, 5)
    causal = torch.ones(6, 4, dtype=torch.bool).tril(diagonal=-2)  # (Tq, Tk): queries 0 and 1 see nothing
    padding = (torch.arange(4) < torch.tensor([4, 0])[:, None]).view(2, 1, 1, 4)  # sequence 1 is all padding
    mask = (causal & padding).to(ctx.device)  # (B, 1, Tq, Tk)
    empty = ~mask.any(-1)  # (B, 1, Tq)
    return {"output": ctx.call(ctx.target, q, k, v, mask), "empty rows": empty}


def _grads_finite(s, r, ctx):
    for n in ("q", "k", "v"):
        g = s.get(f"gradient of {n}")
        if g is None:
            return f"no gradient reached {n}: keep the computation differentiable (no .detach(), no torch.no_grad)"
        if isinstance(g, torch.Tensor) and not torch.isfinite(g).all():
            return (f"the gradient of {n} has {int((~torch.isfinite(g)).sum())} NaN/inf values although the output "
                    f"has none: a softmax over all -inf scores is NaN, and zeroing it afterwards (nan_to_num, "
                    f"torch.where) does not stop 0 × NaN = NaN in the backward pass. Make the scores of a row with "
                    f"no visible key finite before the softmax")
    return same(scale=10)(s, r, ctx)


@CHECKS.probe("masked_attention", "no NaN in the gradients of q, k and v with a fully masked row", _grads_finite,
              CPU, rule="No NaN in the output, nor in the gradients of `q`, `k` and `v`, even with such rows present")
def attn_grads(ctx):
    q = ctx.randn(2, 5, 8, requires_grad=True)  # (B, Tq, D)
    k = ctx.randn(2, 6, 8, requires_grad=True)  # (B, Tk, D)
    v = ctx.randn(2, 6, 3, requires_grad=True)  # (B, Tk, Dv)
    mask = _rand_mask(ctx, 2, 5, 6, p=0.5)
    mask[0, 2] = False  # query 2 of sequence 0 sees nothing
    mask[1, 4] = False
    out = ctx.call(ctx.target, q, k, v, mask)
    if not isinstance(out, torch.Tensor) or out.shape != (2, 5, 3):
        raise WrongResult(f"masked_attention should return a Tensor of shape (2, 5, 3) here, got "
                          f"{tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__}")
    (out * ctx.randn(2, 5, 3)).sum().backward()
    return {f"gradient of {n}": t.grad for n, t in (("q", q), ("k", k), ("v", v))}


@CHECKS.probe("masked_attention", "KV-cache shapes: a few new queries over many keys", _agrees_with_sdpa, CPU,
              hidden=True, rule="`t_q ≠ t_k` is allowed")
def attn_kv_cache(ctx):
    # the bottom-right mask is built here, so this grades masked_attention alone (causal_mask has its own
    # check against torch.nn.attention.bias.causal_lower_right)
    obs = {}
    for t_q, t_k in ((3, 8), (1, 6)):
        q, k, v = ctx.randn(2, 2, t_q, 8), ctx.randn(2, 2, t_k, 8), ctx.randn(2, 2, t_k, 4)
        mask = torch.ones(t_q, t_k, dtype=torch.bool).tril(diagonal=t_k - t_q)  # (t_q, t_k), bottom-right
        obs[f"output, t_q={t_q}, t_k={t_k}"] = ctx.call(ctx.target, q, k, v, mask)
        obs[f"torch output, t_q={t_q}, t_k={t_k}"] = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    return obs


@CHECKS.probe("masked_attention", "any number of leading dims", same(), CPU, hidden=True,
              rule="with any number of leading dims")
def attn_leading(ctx):
    obs = {}
    for shape in [(), (2,), (2, 1, 3)]:
        q, k, v = ctx.randn(*shape, 4, 6), ctx.randn(*shape, 5, 6), ctx.randn(*shape, 5, 3)
        obs[f"output for leading dims {shape}"] = ctx.call(ctx.target, q, k, v, _rand_mask(ctx, 4, 5))
    return obs


# The declared domain of masked_attention: ranks 2 to 5, t_q ≠ t_k both ways, lengths of 1 and a long key axis
# (300), d_v ≠ d, masks of every broadcast shape, among them masks that leave queries with no key (a
# bottom-right causal mask with t_q > t_k, a sequence of length 0), q, k, v in each floating dtype, each of q,
# k, v and the mask laid out on its own.
MASKED_DOMAIN = Domain(
    args=(Arg("leading dims", ("2, 3", "none", "2", "2, 1, 3")),
          Arg("t_q, t_k", ("5, 7", "7, 4", "1, 1", "1, 6", "3, 300")), Arg("d, d_v", ("8, 5", "1, 3", "64, 2")),
          Arg("mask", ("(t_q, t_k) causal", "(B, 1, 1, t_k) padding, a length 0", "(..., t_q, t_k) random",
                       "(t_k,)", "causal & padding"))),
    dtypes=(("q, k, v", ("float32", "float64", "float16", "bfloat16")),),
    layouts=tuple((n, ("contiguous", "transposed", "strided")) for n in ("q", "k", "v", "mask")), examples=3)


def _domain_mask(ctx, kind: str, lead: tuple, t_q: int, t_k: int) -> torch.Tensor:
    causal = torch.ones(t_q, t_k, dtype=torch.bool).tril(diagonal=t_k - t_q)  # bottom-right
    b = lead[0] if lead else 1
    lengths = torch.tensor([t_k] + [(3 * i) % (t_k + 1) for i in range(b - 1)])[:b]  # (b,): t_k, 0, ...
    padding = (torch.arange(t_k) < lengths[:, None]).view(b, *(1,) * max(len(lead) - 1, 0), 1, t_k)
    if not lead:
        padding = padding.view(1, t_k)
    if kind == "(t_q, t_k) causal":
        return causal
    if kind == "(B, 1, 1, t_k) padding, a length 0":
        return padding
    if kind == "(..., t_q, t_k) random":
        return _rand_mask(ctx, *lead, t_q, t_k)
    if kind == "(t_k,)":
        return _rand_mask(ctx, t_k)
    return causal & padding


def _masked_domain_judge(s, r, ctx):
    dtype = str(r["output"].dtype).removeprefix("torch.")  # judged at the example's own dtype
    return _empty_rows_zero(s, r, JudgeContext(Config("cpu", dtype)))


@CHECKS.domain("masked_attention", MASKED_DOMAIN, _masked_domain_judge)
def masked_domain(ctx, ex):
    lead = () if ex["leading dims"] == "none" else tuple(int(n) for n in ex["leading dims"].split(", "))
    t_q, t_k = (int(n) for n in ex["t_q, t_k"].split(", "))
    d, d_v = (int(n) for n in ex["d, d_v"].split(", "))
    dt = getattr(torch, ex["dtype of q, k, v"])
    q, k, v = (relaid(ctx.randn(*lead, t, n).to(dt), ex[f"layout of {name}"])
               for name, t, n in (("q", t_q, d), ("k", t_k, d), ("v", t_k, d_v)))
    mask = _domain_mask(ctx, ex["mask"], lead, t_q, t_k)
    empty = ~mask.any(-1).expand(*lead, t_q) if lead else ~mask.any(-1).expand(t_q)
    out = ctx.call(ctx.target, q, k, v, relaid(mask, ex["layout of mask"]))
    return {"output": out, "empty rows": empty}


# ----------------------------------------------------------------------------------------------
# Known mistakes, each written as exact edits of the solved notebook's cell that defines its exercise
# (`engine.mistake_source` applies them, so a rename in the solution flows through; every `old` must
# occur exactly once, which tests/test_engine.py checks). Each is run on the same probes as the
# reference; a student whose observations match one is told its message.

MISTAKES = (
    Mistake("causal_mask", "triu", "`triu` keeps the upper triangle, the future: a causal mask keeps keys at or "
            "before the query, the lower triangle (`tril`).",
            edits={"ones.tril(": "ones.triu("},
            hint="Draw the mask for t = 4 by hand, rows the queries and columns the keys: which triangle holds "
                 "the keys a query may see, and which triangle does your call keep?"),
    Mistake("causal_mask", "no_diagonal", "the diagonal is excluded, so a query cannot see its own key (and the "
            "first query sees nothing): use j ≤ i + (t_k − t_q), not <.",
            edits={"tril(diagonal=t_k - t_q)": "tril(diagonal=t_k - t_q - 1)"},
            hint="Look at the first query of a square mask: how many keys may it see? Check whether your mask "
                 "keeps the diagonal itself."),
    Mistake("causal_mask", "top_left", "the mask is aligned top-left: with t_k > t_q (a KV cache holding earlier "
            "keys) the queries are the *last* t_q positions, so query i may see keys up to i + (t_k − t_q): "
            "`tril(diagonal=t_k - t_q)`.",
            edits={"tril(diagonal=t_k - t_q)": "tril()"},
            hint="Print your mask for 2 queries and 5 keys. The queries are the last two positions: which keys "
                 "may the last query see?"),
    Mistake("padding_mask", "inverted", "the padding mask is inverted: it is True at the padding. In this course "
            "(and in SDPA) True means 'may attend', so real keys, j < lengths[b], are True; nn.MultiheadAttention's "
            "key_padding_mask is the opposite convention.",
            edits={"positions[None, :] < lengths": "positions[None, :] >= lengths"},
            hint="In this course True in a mask means 'may attend'. For a sequence of length 3 out of 5, which "
                 "positions should be True?"),
    Mistake("sliding_window_mask", "off_by_one", "the window is one too wide: i − j ≤ window lets a query see window "
            "+ 1 keys; the window counts the query's own key, so it is i − window < j ≤ i.",
            edits={"(j > i - window)": "(j >= i - window)"},
            hint="Count the keys one query sees with window = 3: is its own key one of the three? Check the "
                 "comparison at the far edge of the window."),
    Mistake("to_additive", "large_negative", "masked positions get −1e9 instead of −inf: write exactly "
            "float('-inf'), which gives weight exactly 0 in every dtype and marks rows with no visible key.",
            edits={'float("-inf")': "-1e9"},
            hint="What is the weight of a masked position after the softmax in float16, and what marks a row "
                 "that sees no key at all? Which fill value is exact in every dtype?"),
    Mistake("to_additive", "times_inf", "multiplying the inverted mask by −inf gives 0 × −inf = NaN where the mask "
            "is True: select the two values instead (torch.where or masked_fill).",
            edits={'zeros.masked_fill(~mask, float("-inf"))': '(~mask).to(dtype) * float("-inf")'},
            hint="What is 0 × −inf in floating point? Print your bias where the mask is True."),
    Mistake("to_additive", "additive_no_device", "the bias is made on the default device, not the mask's: build it "
            "with device=mask.device (or from the mask itself, torch.zeros_like / masked_fill), so it can be added "
            "to scores living on a GPU.",
            edits={"torch.zeros(mask.shape, dtype=dtype, device=mask.device)": "torch.zeros(mask.shape, dtype=dtype)"},
            hint="Print the device of your result for a mask on the meta device: where is the bias made?"),
    Mistake("masked_attention", "nan_rows", "a query whose mask row is all False gets softmax over all −inf scores, "
            "which is NaN: detect rows with no visible key (mask.any(-1)) and give them zeros.",
            edits={"scores = scores.masked_fill(~visible, 0.0)": "pass",
                   "softmax(scores, dim=-1).masked_fill(~visible, 0.0)": "softmax(scores, dim=-1)"},
            hint="Give your function a mask with one row all False and print that row of the output. What is "
                 "the softmax of a row of only −inf, and what should such a query output?"),
    Mistake("masked_attention", "nan_grads", "the output is right but a NaN from the softmax of an all −inf row "
            "survives in the backward pass (0 × NaN = NaN): make those rows' scores finite before the softmax, then "
            "zero their weights.",
            edits={'scores.masked_fill(~mask, float("-inf"))':
                       'scores + torch.zeros_like(scores).masked_fill(~mask, float("-inf"))',
                   "scores = scores.masked_fill(~visible, 0.0)": "pass"},
            hint="Call backward through your function with a row that sees no key, and print the gradients: "
                 "where does a NaN appear, even though the output has none?"),
    Mistake("masked_attention", "finite_fill", "masked scores are filled with a large finite number, so a query with "
            "no visible key averages all the values instead of giving zeros: fill with −inf and zero the rows with "
            "no visible key.",
            edits={'float("-inf")': "-1e9",
                   "scores = scores.masked_fill(~visible, 0.0)": "pass",
                   "softmax(scores, dim=-1).masked_fill(~visible, 0.0)": "softmax(scores, dim=-1)"},
            hint="Give your function a mask with one row all False and print that row of the output: what does "
                 "a query that may see no key output, and which fill value makes its weights vanish?"),
)



# The input battery; attention skips the offsets (engine.OFFSET_SCORES says why).
from .engine import OFFSET_SCORES  # noqa: E402

CHECKS.add_battery(skip={"masked_attention": OFFSET_SCORES})
