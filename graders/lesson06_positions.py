"""Lesson 06 — positions: sinusoidal tables, learned positions, RoPE in both layouts, stretched RoPE
frequencies, and ALiBi.

Reads like the lesson: each exercise's probes beside their judges, in lesson order, then the known
mistakes. Probes run in the sandboxed child (student code); judges run in the parent.

Two rules run through every RoPE probe: positions are arbitrary and non-contiguous (an implementation
that uses `arange(T)` instead of `positions` must fail), and the base is varied (a hard-coded 10000 must
fail). On a GPU the RoPE probes also run in float16 and bfloat16, judged against the float32 answer on
the same inputs with the tolerance `HALF_TOL` states.
"""

from __future__ import annotations

import math

import torch


from .engine.checks import Arg, Domain
from .engine.compare import Tolerance, close, tolerance
from .engine.probe import relaid
from .engine import CPU_AND_GPU, Checks, Mistake, WrongResult, raises_value_error, same
from .interface import PASSED, arguments

CHECKS = Checks("lesson06")

FORBIDDEN: dict[str, tuple[str, ...]] = {}  # no built-in makes these trivial


# ----------------------------------------------------------------------------------------------
# Helpers shared by the probes


def _positions(ctx, values) -> torch.Tensor:
    """Integer positions on the check's device."""
    return ctx.put(torch.tensor(values, dtype=torch.long))


def _values(s, r, ctx, *keys, tol: Tolerance) -> str | None:
    """Compare values but not dtype (tables, slopes and frequencies may come back in float32 or float64)."""
    for k in keys:
        msg = close(s.get(k), r[k], what=k, tol=tol, check_dtype=False)
        if msg:
            return msg
    return None


def _dims(text: str) -> tuple[int, ...]:
    """"2, 3" -> (2, 3); "none" -> ()."""
    return () if text == "none" else tuple(int(n) for n in text.split(","))


def _angle_tol(base: Tolerance, largest_position: float) -> Tolerance:
    """`base`, widened for angles p·θ of up to `largest_position` rad: two correct float32 computations of a
    frequency differ by ~1e-7 relatively, so the angles (and sin, cos) by ~1e-7·p, beyond 100 too."""
    widen = max(1.0, largest_position / 100.0)
    return Tolerance(base.atol * widen, base.rtol, f"{base.why}; angles up to {largest_position:g} rad")


_LAYOUTS = ("contiguous", "transposed", "strided")


def _same_present(*keys: str, tol=None):
    """A domain judge: each observation `key` the reference made on this example matches it, dtype included,
    within the tolerance of its dtype (float32's for float32 and float64), or `tol(ctx, r, dtype)`."""
    def judge(s, r, ctx):
        for k in keys:
            if k not in r:
                continue  # not observed on this example
            ref = r[k]
            half = isinstance(ref, torch.Tensor) and ref.dtype in (torch.float16, torch.bfloat16)
            t = tol(ctx, r, ref.dtype) if tol else tolerance(ref.dtype) if half else ctx.tol
            msg = close(s.get(k), ref, k, tol=t)
            if msg:
                return msg
        return None
    return judge


# ----------------------------------------------------------------------------------------------
# sinusoidal_table(max_len, d_model, base=10000.0) -> (max_len, d_model)


def _table_values(s, r, ctx):
    return _values(s, r, ctx, *[k for k in r if k.startswith("table")], tol=ctx.tol.scaled(5))


@CHECKS.probe("sinusoidal_table", "matches the reference (max_len=37, d_model=12)", _table_values,
              rule="Return the (max_len, d_model) float32 table above for positions 0..max_len−1")
def table_random(ctx):
    return {"table (37, 12)": ctx.call(ctx.target, 37, 12)}


def _row_zero(s, r, ctx):
    t = s["table (5, 8)"]
    if isinstance(t, torch.Tensor) and t.shape == r["table (5, 8)"].shape:
        row = t[0].double()
        if not torch.allclose(row, r["table (5, 8)"][0].double(), atol=1e-6):
            shown = ", ".join(f"{v:.3g}" for v in row.tolist())
            return (f"position 0 should be (0, 1, 0, 1, ...): sin 0 = 0 in the even columns and cos 0 = 1 in "
                    f"the odd ones; yours is ({shown})")
    return _values(s, r, ctx, "table (5, 8)", tol=ctx.tol.scaled(5))


@CHECKS.probe("sinusoidal_table", "sin in even columns, cos in odd: position 0 is (0, 1, 0, 1, ...)", _row_zero,
              rule="sin in the even columns 2i, cos in the odd columns 2i+1")
def table_row_zero(ctx):
    return {"table (5, 8)": ctx.call(ctx.target, 5, 8)}


@CHECKS.probe("sinusoidal_table", "a base other than the default (base=100, d_model=10)", _table_values,
              hidden=True, rule="use the base argument (other values are checked, from 100 to 500000)")
def table_base(ctx):
    return {"table (23, 10) with base=100": ctx.call(ctx.target, 23, 10, base=100.0)}


@CHECKS.probe("sinusoidal_table", "ValueError for an odd d_model",
              raises_value_error(("d_model=7", "sinusoidal_table(4, 7)", "d_model")),
              rule="an odd d_model cannot be split into pairs: raise ValueError naming d_model")
def table_odd(ctx):
    return {"d_model=7": ctx.raised(ctx.target, 4, 7)}


# The declared domain of sinusoidal_table: one position and a long table (2048), one pair of columns and a
# wide model (512), bases from 100 to 500000. (An odd d_model is the ValueError check's.)
TABLE_DOMAIN = Domain(
    args=(Arg("max_len", (12, 1, 2048)), Arg("d_model", (8, 2, 512)), Arg("base", (10000.0, 100.0, 500000.0))),
    examples=4, tensors=False)


def _table_domain_judge(s, r, ctx):
    return close(s.get("table"), r["table"], "table", check_dtype=False,
                 tol=_angle_tol(ctx.tol.scaled(5), r["largest position"]))


@CHECKS.domain("sinusoidal_table", TABLE_DOMAIN, _table_domain_judge)
def table_domain(ctx, ex):
    return {"table": ctx.call(ctx.target, ex["max_len"], ex["d_model"], base=ex["base"]),
            "largest position": float(ex["max_len"] - 1)}


# ----------------------------------------------------------------------------------------------
# LearnedPositionalEmbedding(max_len, d_model); forward(x, offset=0)


def _table_param(module, max_len: int, d_model: int) -> list:
    return [p for p in module.parameters() if tuple(p.shape) == (max_len, d_model)]


def _init(s, r, ctx):
    n = s["parameters of shape (256, 48)"]
    if n != 1:
        return (f"expected one trainable parameter of shape (max_len, d_model) = (256, 48), found {n} "
                f"(an nn.Parameter or an nn.Embedding's weight; a buffer does not train)")
    if s["std (1 significant digit)"] != 0.02:
        return (f"the table's entries have std ≈ {s['std (1 significant digit)']:g}; initialise them "
                f"N(0, 0.02) (as GPT-2 does), e.g. nn.init.normal_(weight, mean=0.0, std=0.02)")
    if not s["mean within ±0.002"]:
        return "the table's entries should have mean 0 (N(0, 0.02))"
    return None


@CHECKS.probe("LearnedPositionalEmbedding", "one (max_len, d_model) parameter, initialised N(0, 0.02)", _init,
              rule="one trainable (max_len, d_model) table (call it weight, as nn.Embedding does), drawn from "
                   "N(0, 0.02)")
def learned_init(ctx):
    ctx.manual_seed()
    module = ctx.call(ctx.target, 256, 48)
    found = _table_param(module, 256, 48)
    obs = {"parameters of shape (256, 48)": len(found)}
    if len(found) == 1:
        w = found[0].detach().double()
        # coarse on purpose: a loose statistical bound (12,288 draws put a correct std at 0.0200 ± 0.0002),
        # and the same observation for every implementation with the same mistake
        obs["std (1 significant digit)"] = float(f"{w.std().item():.1g}")
        obs["mean within ±0.002"] = abs(w.mean().item()) < 0.002
    return obs


def _module_with_known_table(ctx, max_len: int, d_model: int):
    """The student's module with its table overwritten by seeded values, so outputs are comparable."""
    ctx.manual_seed()
    module = ctx.call(ctx.target, max_len, d_model)
    found = _table_param(module, max_len, d_model)
    if len(found) != 1:
        raise WrongResult(f"expected one parameter of shape (max_len, d_model) = ({max_len}, {d_model}), "
                          f"found {len(found)}")
    with torch.no_grad():
        found[0].copy_(ctx.randn(max_len, d_model))
    return module, found[0]


@CHECKS.probe("LearnedPositionalEmbedding", "adds rows offset..offset+T−1 (offset 0, 9 and 11 of max_len 16)",
              same(), rule="return x plus rows offset..offset+T−1")
def learned_forward(ctx):
    module, _ = _module_with_known_table(ctx, 16, 12)
    x = ctx.randn(2, 5, 12)  # (B, T, D)
    return {f"output with offset={o}": ctx.call(module, x) if o == 0 else ctx.call(module, x, offset=o)
            for o in (0, 9, 11)}


@CHECKS.probe("LearnedPositionalEmbedding", "ValueError naming max_len for positions past the table",
              raises_value_error(("offset=13, T=5", "positions 13..17 with max_len=16", "max_len"),
                                 ("offset=0, T=17", "17 positions with max_len=16", "max_len")),
              rule="positions past the table raise ValueError naming max_len")
def learned_too_long(ctx):
    module, _ = _module_with_known_table(ctx, 16, 12)
    return {"offset=13, T=5": ctx.raised(module, ctx.randn(2, 5, 12), offset=13),
            "offset=0, T=17": ctx.raised(module, ctx.randn(2, 17, 12))}


@CHECKS.probe("LearnedPositionalEmbedding", "gradients reach the table's rows", same(), hidden=True,
              rule="one trainable (max_len, d_model) table")
def learned_grad(ctx):
    module, table = _module_with_known_table(ctx, 16, 12)
    x = ctx.randn(3, 4, 12, requires_grad=True)
    (ctx.call(module, x, offset=6) * ctx.randn(3, 4, 12)).sum().backward()
    return {"gradient of the table": table.grad, "gradient of x": x.grad}


# The declared domain of LearnedPositionalEmbedding: tables from 1 row to 64, d_model from 1 to 256, x with
# any leading dims ((T, D), (B, T, D), (B, H, T, D)), one position, offsets from 0 to the table's last rows
# (offset + T = max_len exactly), x in float32, float64 or bfloat16 while the table stays float32 (the output
# is x's dtype), any layout; calls repeated with another length and offset, and a second instance alongside;
# offset by keyword or in the signature's order. (Its state_dict is not held to the one key `weight`: the text's
# "call it weight, as nn.Embedding does" also reads as an nn.Embedding submodule, `emb.weight`, which
# tests/lessons/test_lesson06.py accepts as a correct alternative.)
LEARNED_DOMAIN = Domain(
    args=(Arg("max_len", (16, 1, 64)), Arg("d_model", (12, 1, 256)), Arg("leading dims", ("2", "none", "2, 3")),
          Arg("T", (5, 1, "max_len − offset")), Arg("offset", (0, 3, "max_len − T")),
          Arg("calls", ("one", "then another length", "beside a second instance")), PASSED),
    dtypes=(("x", ("float32", "float64", "bfloat16")),), layouts=(("x", _LAYOUTS),), examples=5)


def _fit(max_len: int, T, offset) -> tuple[int, int]:
    """(T, offset) inside the table: a symbolic one takes what the table leaves."""
    T, offset = (T if isinstance(T, int) else None), (offset if isinstance(offset, int) else None)
    if T is None and offset is None:
        return max_len, 0
    if T is None:
        T = max_len - min(offset, max_len - 1)
    if offset is None:
        T = min(T, max_len)
        offset = max_len - T
    T = min(T, max_len)
    return T, min(offset, max_len - T)


@CHECKS.domain("LearnedPositionalEmbedding", LEARNED_DOMAIN, _same_present("output", "output of the second call"))
def learned_domain(ctx, ex):
    max_len, d = ex["max_len"], ex["d_model"]
    T, offset = _fit(max_len, ex["T"], ex["offset"])
    dtype = getattr(torch, ex["dtype of x"])
    module, _ = _module_with_known_table(ctx, max_len, d)  # a float32 table
    x = relaid(ctx.randn(*_dims(ex["leading dims"]), T, d).to(dtype), ex["layout of x"])
    args, kwargs = arguments(("offset",), {"offset": offset}, {}, ex["passed"])
    obs = {"output": ctx.call(module, x, *args, **kwargs)}
    second = ctx.randn(2, 1, d).to(dtype)  # one position, at the table's first row
    if ex["calls"] == "then another length":
        obs["output of the second call"] = ctx.call(module, second)
    elif ex["calls"] == "beside a second instance":
        other, _ = _module_with_known_table(ctx, max_len, d)  # its own table: it must not leak into module
        obs["output of the second call"] = ctx.call(other, second)
        obs["output"] = ctx.call(module, x, *args, **kwargs)
    return obs


# ----------------------------------------------------------------------------------------------
# apply_rope(x, positions, base) and apply_rope_half(x, positions, base): the same checks for both
# layouts. Positions are never arange(T).

# Half precision: the float32 answer on the same (rounded) inputs, within these. A correct kernel that
# takes cos/sin in float32 and multiplies in x's dtype errs by ~1e-3 (float16) and ~1e-2 (bfloat16).
HALF_TOL = {
    "float16": Tolerance(5e-3, 5e-3, "float16 RoPE against the float32 answer on the same inputs"),
    "bfloat16": Tolerance(4e-2, 2e-2, "bfloat16 RoPE against the float32 answer on the same inputs"),
}

# float32: angles p·θ of up to ~120 rad computed in different (correct) orders differ by ~1e-5
ROPE_SCALE = 10


def _rope_values(s, r, ctx):
    keys = [k for k in r if k.startswith("output")]
    if ctx.config.dtype == "float32":
        return same(*keys, scale=ROPE_SCALE)(s, r, ctx)
    for k in keys:
        out, ref = s.get(k), r[k]
        if isinstance(out, torch.Tensor) and out.shape == ref.shape and out.dtype != ref.dtype:
            return f"{k} has dtype {str(out.dtype).removeprefix('torch.')}, expected {ctx.config.dtype} (x's dtype)"
        msg = close(out, r["float32 " + k], what=k, tol=HALF_TOL[ctx.config.dtype], check_dtype=False)
        if msg and (not isinstance(out, torch.Tensor) or out.shape != ref.shape):
            return msg
        if msg and close(s.get("float32 " + k), r["float32 " + k], what="float32 " + k, tol=ctx.tol.scaled(ROPE_SCALE)):
            # the precision hint's premise does not hold: the same inputs in float32 are wrong too
            return msg + f" (with the same inputs in float32 too: the difference is not {ctx.config.dtype}'s)"
        if msg:
            return (msg + ". Compute the angles p·θ in float32 (a float16 position is inexact past 2048, a "
                    "bfloat16 one past 256), then cast cos and sin, or the result, to x's dtype")
    return None


def _rope_obs(ctx, key: str, x: torch.Tensor, positions: torch.Tensor, **kwargs) -> dict:
    obs = {key: ctx.call(ctx.target, x, positions, **kwargs)}
    if ctx.config.dtype != "float32":  # the float32 answer on the same inputs, for the half-precision judge
        obs["float32 " + key] = ctx.call(ctx.target, x.float(), positions, **kwargs)
    return obs


@CHECKS.probe("apply_rope", "matches the reference at arbitrary, non-contiguous positions", _rope_values,
              CPU_AND_GPU, rule="interleaved pairs: pair i is (x[..., 2i], x[..., 2i+1]), rotated by "
                                "positions · base^(−2i/D)")
@CHECKS.probe("apply_rope_half", "matches the reference at arbitrary, non-contiguous positions", _rope_values,
              CPU_AND_GPU, rule="except that pair i is (x[..., i], x[..., i + D/2])")
def rope_values(ctx):
    x = ctx.randn(2, 3, 5, 16)  # (B, H, T, D); T is 1 under the battery's "sequences of length 1"
    values = [7, 2, 19, 40, 3] if ctx.config.dtype == "float32" else [7, 300, 19, 2900, 3]
    return _rope_obs(ctx, "output", x, _positions(ctx, values[: x.shape[-2]]))


def _keeps_norms(s, r, ctx):
    out, x = s["output"], r["x"]
    if not isinstance(out, torch.Tensor) or out.shape != x.shape:
        return close(out, r["output"], "output")
    n_out, n_x = out.double().norm(dim=-1), x.double().norm(dim=-1)
    err = (n_out - n_x).abs().max().item()
    if err > 1e-4 * n_x.max().item():
        return (f"a rotation keeps each vector's length, but the norms along the last dim changed by up to "
                f"{err:.3g} (‖x‖ up to {n_x.max().item():.3g}): each pair must be rotated, "
                f"(a, b) → (a cos θ − b sin θ, a sin θ + b cos θ)")
    return None


@CHECKS.probe("apply_rope", "keeps every vector's norm", _keeps_norms,
              rule="a rotation keeps lengths, so ‖RoPE(x)‖ = ‖x‖")
@CHECKS.probe("apply_rope_half", "keeps every vector's norm", _keeps_norms,
              rule="still rotated by positions · base^(−2i/D)")
def rope_norms(ctx):
    x = ctx.randn(3, 7, 12, scale=2.0)  # (B, T, D)
    positions = _positions(ctx, [0, 5, 11, 2, 64, 30, 9])
    return {"output": ctx.call(ctx.target, x, positions), "x": x}


def _relative(s, r, ctx):
    a, b = s["scores"], s["scores with every position shifted by 37"]
    if not isinstance(a, torch.Tensor):
        return close(a, r["scores"], "scores")
    scale = max(a.abs().max().item(), 1.0)
    msg = close(b, a, "scores with every position shifted by 37", check_dtype=False,
                tol=Tolerance(1e-4 * scale, 1e-4, "float32 rounding of angles up to ~120 rad"))
    if msg:
        return ("q·k after RoPE must depend only on the offset m − n, so shifting every position by 37 must "
                "leave the scores unchanged; " + msg.replace("differs from the reference", "differs from the unshifted scores"))
    return None


@CHECKS.probe("apply_rope", "scores depend only on m − n (shift every position: same scores)", _relative,
              rule="The score depends on the positions only through m − n")
@CHECKS.probe("apply_rope_half", "scores depend only on m − n (shift every position: same scores)", _relative,
              rule="scores that depend only on m − n")
def rope_relative(ctx):
    q, k = ctx.randn(3, 6, 16), ctx.randn(3, 8, 16)  # (H, Tq, D), (H, Tk, D)
    pq, pk = _positions(ctx, [4, 9, 1, 25, 13, 40]), _positions(ctx, [0, 3, 17, 8, 30, 12, 41, 22])
    obs = {}
    for name, shift in (("scores", 0), ("scores with every position shifted by 37", 37)):
        q_rot = ctx.call(ctx.target, q, pq + shift)
        k_rot = ctx.call(ctx.target, k, pk + shift)
        obs[name] = q_rot @ k_rot.transpose(-2, -1) if isinstance(q_rot, torch.Tensor) else q_rot  # (H, Tq, Tk)
    return obs


@CHECKS.probe("apply_rope", "positions (T,) or (..., T): one row of positions per sequence", same(scale=ROPE_SCALE),
              rule="either (T,) (the same positions for every sequence) or (..., T)")
@CHECKS.probe("apply_rope_half", "positions (T,) or (..., T): one row of positions per sequence",
              same(scale=ROPE_SCALE), rule="positions (T,) or (..., T) (one row per sequence)")
def rope_batched_positions(ctx):
    x3 = ctx.randn(3, 6, 10)  # (B, T, D)
    p3 = _positions(ctx, [[0, 1, 2, 3, 4, 5], [9, 10, 11, 12, 13, 14], [5, 0, 33, 2, 17, 8]])  # (B, T)
    x4 = ctx.randn(2, 4, 6, 10)  # (B, H, T, D)
    p4 = _positions(ctx, [[[3, 8, 1, 0, 21, 6]], [[50, 51, 52, 53, 54, 55]]])  # (B, 1, T)
    x2 = ctx.randn(6, 10)  # (T, D)
    p2 = _positions(ctx, [12, 4, 4, 0, 7, 60])
    return {"output for x (3, 6, 10), positions (3, 6)": ctx.call(ctx.target, x3, p3),
            "output for x (2, 4, 6, 10), positions (2, 1, 6)": ctx.call(ctx.target, x4, p4),
            "output for x (6, 10), positions (6,)": ctx.call(ctx.target, x2, p2)}


@CHECKS.probe("apply_rope", "a base other than the default (base=500)", same(scale=ROPE_SCALE), hidden=True,
              rule="base varies (10 to 500000): all are checked")
@CHECKS.probe("apply_rope_half", "a base other than the default (base=500)", same(scale=ROPE_SCALE), hidden=True,
              rule="any base, not only the default")
def rope_base(ctx):
    x = ctx.randn(2, 5, 12)  # (B, T, D)
    positions = _positions(ctx, [6, 1, 28, 3, 15])
    return {"output with base=500": ctx.call(ctx.target, x, positions, base=500.0)}


@CHECKS.probe("apply_rope", "positions continuing from an offset (a KV cache at 100..104)", same(scale=ROPE_SCALE),
              hidden=True, rule="positions must be whatever the tokens' real positions are — the number of "
                                 "cached tokens onwards in generation")
@CHECKS.probe("apply_rope_half", "positions continuing from an offset (a KV cache at 100..104)",
              same(scale=ROPE_SCALE), hidden=True, rule="arbitrary or continuing from a KV cache's offset")
def rope_offset(ctx):
    x = ctx.randn(2, 2, 5, 8)  # (B, H, T, D)
    return {"output at positions 100..104": ctx.call(ctx.target, x, _positions(ctx, list(range(100, 105))))}


@CHECKS.probe("apply_rope", "gradients flow to x", same(scale=ROPE_SCALE), hidden=True,
              rule="let gradients flow to x")
def rope_grad(ctx):
    x = ctx.randn(2, 5, 8, requires_grad=True)
    out = ctx.call(ctx.target, x, _positions(ctx, [3, 0, 12, 7, 1]))
    (out * ctx.randn(2, 5, 8)).sum().backward()
    return {"gradient of x": x.grad}


# The declared domain of apply_rope and apply_rope_half: x (T, D), (B, T, D) or (B, H, T, D), one position and
# 64, one pair and a wide head (128), bases from 10 to 500000, positions shuffled, continuing a cache (from
# 100, and in the thousands: from 5000, past a table of 4096 positions, where a bfloat16 position is off by up
# to 16: x is also given in bfloat16 there, whatever its drawn dtype), one row per sequence
# (..., T), a strided view, int64 or int32; x in float32, float64 or bfloat16 (the angles in float32 either
# way), laid out any way; base by keyword or in the signature's order.
ROPE_DOMAIN = Domain(
    args=(Arg("leading dims", ("2, 3", "none", "2")), Arg("T", (5, 1, 64)), Arg("D", (8, 2, 128)),
          Arg("base", (10000.0, 500000.0, 10.0)),
          Arg("positions", ("shuffled", "from 100 (a cache)", "one row per sequence", "a strided view",
                            "from 5000 (a long cache)")), PASSED),
    dtypes=(("x", ("float32", "float64", "bfloat16")), ("positions", ("int64", "int32"))),
    layouts=(("x", _LAYOUTS),), examples=5)


def _rope_positions(ctx, kind: str, lead: tuple[int, ...], T: int) -> torch.Tensor:
    if kind == "from 100 (a cache)":
        return torch.arange(100, 100 + T)
    if kind == "from 5000 (a long cache)":
        return torch.arange(5001, 5001 + T)  # odd from the first: not a bfloat16 number (spacing 32 there)
    if kind == "one row per sequence" and lead:  # (B, T) for x (B, T, D); (B, 1, T) for x (B, H, T, D)
        shape = (lead[0], *[1] * (len(lead) - 1), T)
        return torch.stack([torch.randperm(T + 20, generator=ctx.gen)[:T] for _ in range(lead[0])]).view(shape)
    if kind == "a strided view":
        return torch.randperm(2 * T + 20, generator=ctx.gen)[: 2 * T : 2]
    return torch.randperm(T + 20, generator=ctx.gen)[:T]  # distinct, in no order, not from 0


def _rope_domain_tol(ctx, r, dtype):
    if dtype == torch.bfloat16:
        return HALF_TOL["bfloat16"]
    return _angle_tol(ctx.tol.scaled(ROPE_SCALE), r["largest position"])


@CHECKS.domain("apply_rope", ROPE_DOMAIN, _same_present("output", "output, x in bfloat16", tol=_rope_domain_tol))
@CHECKS.domain("apply_rope_half", ROPE_DOMAIN, _same_present("output", "output, x in bfloat16", tol=_rope_domain_tol))
def rope_domain(ctx, ex):
    lead, T, D = _dims(ex["leading dims"]), ex["T"], ex["D"]
    x = relaid(ctx.randn(*lead, T, D).to(getattr(torch, ex["dtype of x"])), ex["layout of x"])
    positions = _rope_positions(ctx, ex["positions"], lead, T)
    if ex["positions"] == "a strided view":
        wide = torch.zeros(2 * T, dtype=getattr(torch, ex["dtype of positions"]))
        wide[0::2] = positions
        positions = wide[0::2]
    positions = positions.to(getattr(torch, ex["dtype of positions"]))
    args, kwargs = arguments(("base",), {"base": ex["base"]}, {}, ex["passed"])
    obs = {"output": ctx.call(ctx.target, x, positions, *args, **kwargs), "largest position": float(positions.max())}
    if ex["positions"] == "from 5000 (a long cache)":
        obs["output, x in bfloat16"] = ctx.call(ctx.target, x.to(torch.bfloat16), positions, *args, **kwargs)
    return obs


# ----------------------------------------------------------------------------------------------
# rope_inv_freq(dim, base=10000.0, scale=1.0, method="none") -> (dim/2,)


def _freq_values(s, r, ctx):
    return _values(s, r, ctx, *r, tol=ctx.tol.scaled(5))


@CHECKS.probe("rope_inv_freq", "the plain frequencies base^(−2i/dim)", _freq_values,
              rule="\"none\": base^(−2i/dim), i = 0..dim/2−1")
def freq_none(ctx):
    return {"dim=16": ctx.call(ctx.target, 16),
            "dim=12, base=500": ctx.call(ctx.target, 12, base=500.0)}


@CHECKS.probe("rope_inv_freq", "\"linear\" (position interpolation): every frequency divided by scale",
              _freq_values, rule="\"linear\" (position interpolation): those frequencies, each divided by scale")
def freq_linear(ctx):
    return {"dim=16, scale=4, method='linear'": ctx.call(ctx.target, 16, scale=4.0, method="linear"),
            "dim=10, base=500, scale=2.5, method='linear'": ctx.call(ctx.target, 10, base=500.0, scale=2.5,
                                                                      method="linear")}


@CHECKS.probe("rope_inv_freq", "\"ntk\": the base becomes base·scale^(dim/(dim−2))", _freq_values,
              rule="\"ntk\": the same formula with the base replaced by base·scale^(dim/(dim−2))")
def freq_ntk(ctx):
    return {"dim=16, scale=8, method='ntk'": ctx.call(ctx.target, 16, scale=8.0, method="ntk"),
            "dim=24, base=500000, scale=3, method='ntk'": ctx.call(ctx.target, 24, base=5e5, scale=3.0,
                                                                    method="ntk")}


def _ntk_ends(s, r, ctx):
    f, plain = s["ntk"], r["plain"]
    if not isinstance(f, torch.Tensor) or f.shape != plain.shape:
        return close(f, r["ntk"], "rope_inv_freq(32, scale=4, method='ntk')")
    f, plain = f.double(), plain.double()
    if not math.isclose(f[0].item(), plain[0].item(), rel_tol=1e-5):
        return (f"\"ntk\" must keep the highest frequency (i = 0) unchanged at {plain[0].item():.6g}; yours is "
                f"{f[0].item():.6g}. Change the base, not the frequencies")
    factor = plain[-1].item() / f[-1].item()
    if not math.isclose(factor, 4.0, rel_tol=1e-5):
        return (f"\"ntk\" must divide the lowest frequency by exactly scale = 4; yours divides it by "
                f"{factor:.6g}. Which exponent of scale makes base'^(−(dim−2)/dim) = base^(−(dim−2)/dim) / scale?")
    return None


@CHECKS.probe("rope_inv_freq", "\"ntk\" keeps the highest frequency and divides the lowest by exactly scale",
              _ntk_ends, rule="the highest frequency is unchanged and the lowest is divided by exactly scale")
def freq_ntk_ends(ctx):
    return {"ntk": ctx.call(ctx.target, 32, base=10000.0, scale=4.0, method="ntk"),
            "plain": ctx.call(ctx.target, 32, base=10000.0)}


@CHECKS.probe("rope_inv_freq", "ValueError for an unknown method or scale < 1", raises_value_error(
    ("method='yarn'", "rope_inv_freq(16, method='yarn')", "method"),
    ("scale=0.5", "rope_inv_freq(16, scale=0.5, method='linear')", "scale")),
    rule="ValueError for any other method, or for scale < 1")
def freq_bad_args(ctx):
    return {"method='yarn'": ctx.raised(ctx.target, 16, method="yarn"),
            "scale=0.5": ctx.raised(ctx.target, 16, scale=0.5, method="linear")}


# The declared domain of rope_inv_freq: dim from 4 to 128, bases from 10 to 500000, scale from its edge 1 (no
# stretch: every method then gives the plain frequencies) to 32, every method; by keyword or in the signature's
# order.
FREQ_DOMAIN = Domain(
    args=(Arg("dim", (16, 4, 128)), Arg("base", (10000.0, 500000.0, 10.0)), Arg("scale", (1.0, 4.0, 1.5, 32.0)),
          Arg("method", ("none", "linear", "ntk")), PASSED), examples=5, tensors=False)


@CHECKS.domain("rope_inv_freq", FREQ_DOMAIN, _same_present("frequencies", tol=lambda ctx, r, dtype: ctx.tol.scaled(5)))
def freq_domain(ctx, ex):
    args, kwargs = arguments(("base", "scale", "method"), {"base": ex["base"], "scale": ex["scale"],
                                                           "method": ex["method"]}, {}, ex["passed"])
    out = ctx.call(ctx.target, ex["dim"], *args, **kwargs)
    return {"frequencies": out.float() if isinstance(out, torch.Tensor) else out}


# ----------------------------------------------------------------------------------------------
# alibi_slopes(num_heads) -> (H,)


def _slopes(s, r, ctx):
    return _values(s, r, ctx, *r, tol=ctx.tol)


@CHECKS.probe("alibi_slopes", "H = 8 and H = 2: 2^(−8(h+1)/H) for a power of two", _slopes,
              rule="2^(−8(h+1)/H) when H is a power of two")
def slopes_power_of_two(ctx):
    return {f"slopes for H={h}": ctx.call(ctx.target, h) for h in (8, 2)}


@CHECKS.probe("alibi_slopes", "H = 12 and H = 6: the ALiBi paper's rule for other head counts", _slopes,
              rule="takes the slopes for the largest power of two n below H, and fills the remaining H − n "
                   "heads with every other slope from the 2n-head sequence")
def slopes_other(ctx):
    return {f"slopes for H={h}": ctx.call(ctx.target, h) for h in (12, 6)}


# The declared domain of alibi_slopes: one head, powers of two and the head counts between them (3, 5, 6, 7,
# 12, 24, 48), called afresh or after a call with another head count (no state kept between calls).
SLOPES_DOMAIN = Domain(
    args=(Arg("num_heads", (8, 1, 2, 3, 5, 6, 7, 12, 16, 24, 48, 64)), Arg("calls", ("one", "after num_heads=12"))),
    examples=4, tensors=False)


@CHECKS.domain("alibi_slopes", SLOPES_DOMAIN, _same_present("slopes", tol=lambda ctx, r, dtype: ctx.tol))
def slopes_domain(ctx, ex):
    if ex["calls"] != "one":
        ctx.call(ctx.target, 12)
    out = ctx.call(ctx.target, ex["num_heads"])
    return {"slopes": out.float() if isinstance(out, torch.Tensor) else out}


# ----------------------------------------------------------------------------------------------
# alibi_bias(num_heads, t_q, t_k) -> (H, t_q, t_k)


def _bias(s, r, ctx):
    for k in r:
        b = s.get(k)
        if isinstance(b, torch.Tensor) and b.shape == r[k].shape and (b > 0).any():
            return (f"{k} has positive entries (up to {b.max().item():.3g}): ALiBi is a penalty, −m_h·|i − j|, "
                    f"so every bias is ≤ 0 and farther keys get lower scores")
    return _values(s, r, ctx, *r, tol=ctx.tol)


@CHECKS.probe("alibi_bias", "square: bias[h, i, j] = −m_h·|i − j| (H=4, T=5)", _bias,
              rule="Return the (num_heads, t_q, t_k) bias −m_h·|i − j|")
def bias_square(ctx):
    return {"alibi_bias(4, 5, 5)": ctx.call(ctx.target, 4, 5, 5)}


@CHECKS.probe("alibi_bias", "t_q ≠ t_k: queries bottom-right aligned (H=6, t_q=3, t_k=7)", _bias,
              rule="with query i at position i + (t_k − t_q)")
def bias_rect(ctx):
    return {"alibi_bias(6, 3, 7)": ctx.call(ctx.target, 6, 3, 7)}


# The declared domain of alibi_bias: one head and head counts that are not powers of two, one query or key
# and 64, t_q below, equal to and above t_k (the queries always the last t_q positions).
BIAS_DOMAIN = Domain(
    args=(Arg("num_heads", (4, 1, 3, 12)), Arg("t_q", (5, 1, 64)), Arg("t_k", (5, 1, 64))),
    examples=4, tensors=False)


@CHECKS.domain("alibi_bias", BIAS_DOMAIN, _same_present("bias", tol=lambda ctx, r, dtype: ctx.tol))
def bias_domain(ctx, ex):
    out = ctx.call(ctx.target, ex["num_heads"], ex["t_q"], ex["t_k"])
    return {"bias": out.float() if isinstance(out, torch.Tensor) else out}


# ----------------------------------------------------------------------------------------------
# Known mistakes, each written as exact edits of the solved notebook's cell that defines its exercise
# (`engine.mistake_source` applies them, so a rename in the solution flows through; every `old` must
# occur exactly once, which tests/test_engine.py checks). Each is run on the same probes as the
# reference; a student whose observations match one is told its message.

MISTAKES = (
    Mistake("sinusoidal_table", "sin_cos_swapped", "sin and cos are swapped: the even columns 2i take sin(p·ω_i) and "
            "the odd columns 2i+1 take cos(p·ω_i), so position 0 reads (0, 1, 0, 1, ...).",
            edits={"pe[:, 0::2] = angles.sin()": "pe[:, 0::2] = angles.cos()",
                   "pe[:, 1::2] = angles.cos()": "pe[:, 1::2] = angles.sin()"},
            hint="Print row 0 of your table: sin 0 and cos 0 are 0 and 1. Which columns should hold which?"),
    Mistake("sinusoidal_table", "table_exponent_i", "the exponent uses the pair index i instead of the column 2i: "
            "ω_i = base^(−2i/d_model), i.e. torch.arange(0, d_model, 2) / d_model.",
            edits={"torch.arange(0, d_model, 2, dtype=torch.float32) / d_model":
                       "torch.arange(d_model // 2, dtype=torch.float32) / d_model"},
            hint="Print the frequencies of your table's column pairs: is the exponent built from the pair's "
                 "index or from the column's?"),
    Mistake("LearnedPositionalEmbedding", "offset_ignored", "`offset` is ignored: rows 0..T−1 are added whatever the "
            "offset; add rows offset..offset+T−1 (a decoder with a cache is at position offset, not 0).",
            edits={"self.weight[offset:offset + T]": "self.weight[:T]"},
            hint="Call the module with offset = 5 and print which table rows were added: do they start at the "
                 "offset?"),
    Mistake("LearnedPositionalEmbedding", "T_from_axis_1", "T is read from axis 1, which is the sequence axis only "
            "for a (B, T, D) input: x is (..., T, d_model), so take T = x.shape[-2] (a (T, D) or (B, H, T, D) "
            "input has other sizes at axis 1).",
            edits={"T = x.shape[-2]": "T = x.shape[1]"},
            hint="Call the module on a (T, D) input and on a (B, H, T, D) one: which axis holds the sequence "
                 "length in each?"),
    Mistake("LearnedPositionalEmbedding", "default_init", "nn.Embedding initialises N(0, 1); positions here are "
            "initialised N(0, 0.02): call nn.init.normal_(weight, std=0.02).",
            edits={"nn.init.normal_(self.weight, mean=0.0, std=0.02)": "nn.init.normal_(self.weight)"},
            hint="Print the standard deviation of your table right after construction: what should it be?"),
    Mistake("apply_rope", "half_split", 'this rotates the half-split pairs (x[i], x[i + D/2]) (GPT-NeoX\'s "rotate '
            'half" layout); apply_rope uses interleaved pairs (x[2i], x[2i+1]). Mixing the two layouts is a silent '
            "mismatch between implementations.",
            edits={"x[..., 0::2].float(), x[..., 1::2].float()": "x[..., : D // 2].float(), x[..., D // 2 :].float()",
                   "torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1)":
                       "torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)",
                   "rotated.flatten(-2)": "rotated"},
            hint="Which features does this function rotate together: neighbours, or a feature and the one half "
                 "the width away? Compare with the layout the text gives."),
    Mistake("apply_rope", "rope_positions_ignored", "`positions` is ignored (arange(T) is used instead): rotate "
            "token t by positions[..., t], which need not be 0, 1, 2, ... (a KV cache, packed sequences).",
            edits={"positions.to(x.device, torch.float32)":
                       "torch.arange(x.shape[-2], device=x.device, dtype=torch.float32)"},
            hint="Pass positions 100 to 104 and print the angles your code uses: do they come from the "
                 "positions you were given?"),
    Mistake("apply_rope", "rope_base_ignored", "the base is hard-coded to 10000, so `base=` is ignored: the "
            "frequencies are base^(−2i/D) for the base given.",
            edits={"inv_freq = base **": "inv_freq = 10000 **"},
            hint="Call the function with a base other than the default: does the value reach the frequencies?"),
    Mistake("apply_rope_half", "interleaved", "this rotates interleaved pairs (x[2i], x[2i+1]); apply_rope_half uses "
            'the half-split layout, pairs (x[i], x[i + D/2]) ("rotate half"). Mixing the two layouts is a silent '
            "mismatch between implementations.",
            edits={"x[..., : D // 2].float(), x[..., D // 2 :].float()": "x[..., 0::2].float(), x[..., 1::2].float()",
                   "torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)":
                       "torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)"},
            hint="Which features does this function rotate together: a feature and the one half the width "
                 "away, or neighbours? Compare with the layout the text gives."),
    Mistake("apply_rope_half", "half_positions_ignored", "`positions` is ignored (arange(T) is used instead): rotate "
            "token t by positions[..., t], which need not be 0, 1, 2, ...",
            edits={"positions.to(x.device, torch.float32)":
                       "torch.arange(x.shape[-2], device=x.device, dtype=torch.float32)"},
            hint="Pass positions 100 to 104 and print the angles your code uses: do they come from the "
                 "positions you were given?"),
    Mistake("rope_inv_freq", "ntk_exponent_inverted", "the NTK base uses scale^((dim−2)/dim), the exponent upside "
            "down: base·scale^(dim/(dim−2)) is the base that divides the lowest frequency by exactly `scale`.",
            edits={"scale ** (dim / (dim - 2))": "scale ** ((dim - 2) / dim)"},
            hint="With the NTK method, what must happen to the lowest frequency? Print it next to the plain "
                 "one and compute the ratio."),
    Mistake("rope_inv_freq", "linear_multiplies", '"linear" multiplies the frequencies by `scale`; position '
            "interpolation divides them (positions p/scale), so a longer context maps onto the trained angles.",
            edits={"inv_freq = inv_freq / scale": "inv_freq = inv_freq * scale"},
            hint="Position interpolation squeezes a longer context into the trained angles: should the "
                 "frequencies grow or shrink with the scale?"),
    Mistake("alibi_slopes", "slopes_reversed", "the slopes are in reverse order: head 0 gets the steepest slope, "
            "2^(−8/H), and they fall geometrically to 2^(−8) for the last head.",
            edits={"return torch.tensor(slopes)": "return torch.tensor(slopes).flip(0)"},
            hint="Print your slopes for H = 8: does the first head get the steepest slope or the gentlest?"),
    Mistake("alibi_slopes", "one_rule_for_all", "2^(−8(h+1)/H) is the rule for a power-of-two H only; otherwise take "
            "the slopes of the closest power of two below H, then every other slope of twice that many.",
            edits={"power_of_two(n) + power_of_two(2 * n)[0::2][: num_heads - n]": "power_of_two(num_heads)"},
            hint="Is H a power of two? Check the ALiBi rule for a head count that is not."),
    Mistake("alibi_bias", "bias_positive", "the bias is positive: ALiBi subtracts m_h·|i − j|, a penalty that grows "
            "with distance.",
            edits={"return -slopes": "return slopes"},
            hint="Print a row of your bias: should attention to a distant key be favoured or penalised?"),
    Mistake("alibi_bias", "top_left", "with t_q < t_k the queries are the last t_q positions: query i sits at "
            "position i + (t_k − t_q) (bottom-right aligned), not at i.",
            edits={"torch.arange(t_q)[:, None] + (t_k - t_q)": "torch.arange(t_q)[:, None]"},
            hint="With fewer queries than keys, where do the queries sit: at the start of the keys, or at "
                 "their end?"),
)


# The battery re-runs LearnedPositionalEmbedding's forward check (its first check looks at the initial table).
CHECKS.add_battery(
    base={"LearnedPositionalEmbedding": "adds rows offset..offset+T−1 (offset 0, 9 and 11 of max_len 16)"})
