"""Lesson 09 — flash attention: `online_logsumexp`, `flash_attention`, `flash_attention_triton`,
`attention_flops`, `kv_cache_bytes` and the challenge `FlashAttentionFunction`.

Reads like the lesson. First the two recorders the probes use while the student's code runs (what it
allocates and multiplies, at the level of aten ops; how many Triton kernels it launches), then each
exercise's probes beside their judges, then the known mistakes, then `benchmark` for `course bench`.
Probes run in the sandboxed child (student code); judges run in the parent.
"""

from __future__ import annotations

import itertools
import math
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from .engine.probe import RecordingMode
from torch.utils._pytree import tree_leaves

from .engine.compare import close, describe, tolerance
from .engine import CPU, CPU_AND_GPU, GPU_ONLY, Checks, Config, Mistake, agrees_with, median_ms, same
from .engine.checks import Arg, Domain
from .engine.probe import relaid
from .interface import PASSED, arguments


def causal_mask(Tq: int, Tk: int, device=None) -> torch.Tensor:
    """The course's causal mask, bottom-right aligned (True: may attend): query i sees keys j ≤ i + Tk − Tq."""
    return torch.ones(Tq, Tk, dtype=torch.bool, device=device).tril(diagonal=Tk - Tq)


def sdpa_causal(q, k, v):
    """SDPA with the course's causal alignment: `is_causal` is top-left, so Tq ≠ Tk passes causal_lower_right."""
    if q.shape[-2] == k.shape[-2]:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    # the bottom-right mask causal_lower_right stands for, built here: importing torch.nn.attention.bias pulls in
    # torch._dynamo (1.5-3 s of a cold check); tests/lessons/test_domains_lesson09.py holds the two equal
    return F.scaled_dot_product_attention(q, k, v, attn_mask=causal_mask(q.shape[-2], k.shape[-2], q.device))

CHECKS = Checks("lesson09")
# What this lesson's checks import lazily (triton, and its interpreter's code generator for a kernel),
# imported once by the warm zygote (zygote.preload); tests/e2e/test_warm_imports.py names what is missing.
WARM_IMPORTS = ("triton", "triton.compiler.code_generator")

FORBIDDEN = {
    "online_logsumexp": ("torch.logsumexp", "torch.Tensor.logsumexp", "torch.special.logsumexp"),
    "flash_attention": ("torch.nn.functional.scaled_dot_product_attention",),
    "flash_attention_triton": ("torch.nn.functional.scaled_dot_product_attention",),
    "FlashAttentionFunction": ("torch.nn.functional.scaled_dot_product_attention",),
}

# The tiled exercises and the block sizes their checks call them with (the diagnosis names a tile boundary
# only at a multiple of one; a key that names its blocks, "blocks 16×32", says which). The Triton kernel's
# tiles are the student's choice, and online_logsumexp's blocks run along the axis it reduces: neither is here.
TILED = {"flash_attention": (8, 16, 24, 32, 64), "FlashAttentionFunction": (64,)}

# float16 through the Triton interpreter on CPU; bfloat16 is left out there because the interpreter's
# bfloat16 tl.dot gives wrong results. Compiled kernels on GPU cover float16 and bfloat16.
INTERPRETER = (Config("cpu", "float32"), Config("cpu", "float16"))


# ----------------------------------------------------------------------------------------------
# What the student's code does, seen from below: every aten op it runs passes through this mode.


class OpRecorder(RecordingMode):
    """Records the largest tensor any op creates (views and in-place results do not count: they
    allocate nothing), the output sizes of matrix products, and the names of the ops that ran."""

    MATMULS = {"mm", "bmm", "addmm", "baddbmm", "addbmm", "_addmm_activation", "dot", "vdot", "mv", "matmul"}

    def __init__(self):
        super().__init__()
        self.largest, self.largest_shape = 0, []
        self.matmul_shapes: list[list[int]] = []
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        self.ops.add(name)
        inputs = {_storage(t) for t in tree_leaves((args, kwargs or {})) if isinstance(t, torch.Tensor)}
        for t in tree_leaves(out):
            if not isinstance(t, torch.Tensor):
                continue
            if name in self.MATMULS:
                self.matmul_shapes.append(list(t.shape))
            if _storage(t) in inputs - {None}:
                continue  # a view or an in-place result: no new memory
            if t.numel() > self.largest:
                self.largest, self.largest_shape = t.numel(), list(t.shape)
        return out


def _storage(t: torch.Tensor) -> int | None:
    try:
        return t.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # tensors without a plain storage
        return None


def recorded(fn, recorder: OpRecorder):
    """`fn` with the recorder on while it runs (pass the result to ctx.call)."""
    def run(*args, **kwargs):
        with recorder:
            return fn(*args, **kwargs)
    return run


def score_area(recorder: OpRecorder, d_value: int) -> int:
    """Query-key pairs scored: the entries of every matrix product except those that make the
    output rows (P·V, whose last dim is the value size)."""
    return sum(math.prod(s) for s in recorder.matmul_shapes if s and s[-1] != d_value)


@contextmanager
def count_triton_launches(counter: list):
    """Counts Triton kernel launches (compiled, or through the interpreter) while the block runs.
    Autotuned and heuristic kernels end in the same `run`, so they are counted too."""
    import triton.runtime.jit as jit

    classes = [jit.JITFunction]
    try:
        from triton.runtime.interpreter import InterpretedFunction
        classes.append(InterpretedFunction)
    except ImportError:  # pragma: no cover - older Triton
        pass
    saved = [(cls, cls.__dict__.get("run")) for cls in classes]
    for cls, original in saved:
        def run(self, *args, _original=original, **kwargs):
            if not kwargs.get("warmup", False):
                counter[0] += 1
            return _original(self, *args, **kwargs)
        cls.run = run
    try:
        yield
    finally:
        for cls, original in saved:
            cls.run = original


def _no_tq_by_tk(s, r, ctx, when="while it ran"):
    """The largest new tensor is smaller than one Tq×Tk score matrix."""
    largest, limit = s.get("largest"), r["limit"]
    if not isinstance(largest, int):
        return f"could not read the sizes of the tensors your code created (got {describe(largest)})"
    if largest >= limit:
        shape = tuple(s.get("largest shape") or ())
        return (f"{when}, your code created a tensor of shape {shape} ({largest:,} elements): at least a full "
                f"Tq×Tk = {r['Tq']}×{r['Tk']} = {limit:,} score matrix. Flash attention holds one tile of scores "
                f"(block_q×block_k) at a time and never the whole matrix")
    return None


# ----------------------------------------------------------------------------------------------
# online_logsumexp(x, block) -> Tensor


def _lse_against_torch(s, r, ctx):
    for key in [k for k in r if k.startswith("logsumexp")]:
        msg = close(s.get(key), r[key.replace("logsumexp", "torch.logsumexp")], key, tol=ctx.tol.scaled(2))
        if msg:
            return msg
    return None


@CHECKS.probe("online_logsumexp", "equals torch.logsumexp (block dividing the length or not)", _lse_against_torch,
              CPU_AND_GPU,
              rule="Returns (...), equal to torch.logsumexp(x, dim=-1)")
def lse_random(ctx):
    x = ctx.randn(3, 5, 40, scale=3.0)  # (A, B, N)
    obs = {}
    for block in (8, 7, 1, 64):
        obs[f"logsumexp with block={block}"] = ctx.call(ctx.target, x, block)
        obs[f"torch.logsumexp with block={block}"] = torch.logsumexp(x.float(), dim=-1).to(x.dtype)
    return obs


def _lse_finite(s, r, ctx):
    out = s.get("logsumexp")
    if isinstance(out, torch.Tensor) and not torch.isfinite(out).all():
        return (f"inputs of magnitude ~1e4 gave {int((~torch.isfinite(out)).sum())} inf/NaN values: exp overflows. "
                f"Keep a running max m and exponentiate x − m; when m grows, rescale the sum by exp(m_old − m_new)")
    return _lse_against_torch(s, r, ctx)


@CHECKS.probe("online_logsumexp", "huge magnitudes (±1e4) stay finite", _lse_finite, CPU,
              rule="the max keeps every exponent ≤ 0, so nothing overflows")
def lse_huge(ctx):
    x = ctx.randn(4, 30, scale=1e4)
    return {"logsumexp": ctx.call(ctx.target, x, 8), "torch.logsumexp": torch.logsumexp(x, dim=-1)}


def _lse_masked(s, r, ctx):
    out = s.get("logsumexp")
    if isinstance(out, torch.Tensor) and torch.isnan(out).any():
        rows = (torch.isnan(out)).nonzero().flatten().tolist()
        return (f"rows {rows} came out NaN: those rows start with a whole block of -inf (masked entries), so the "
                f"running max is still -inf and exp(m - m_new) is exp(-inf - (-inf)) = NaN. While the max is "
                f"-inf, subtract 0 instead (torch.logsumexp gives -inf for a row that is all -inf)")
    return _lse_against_torch(s, r, ctx)


@CHECKS.probe("online_logsumexp", "rows whose first blocks are all -inf (masked), and a row all -inf", _lse_masked,
              CPU,
              rule="While the max is −∞, subtract 0 instead; a row that is all −∞ then ends with `s = 0` and "
                   "`lse = −∞`")
def lse_masked(ctx):
    x = ctx.randn(4, 24)  # (rows, N)
    x[0, :8] = float("-inf")  # the first block (block=8) masked
    x[1, :16] = float("-inf")  # the first two blocks masked
    x[2, 3:20] = float("-inf")  # masked inside, across blocks
    x[3] = float("-inf")  # a fully masked row: logsumexp is -inf
    return {"logsumexp": ctx.call(ctx.target, x, 8), "torch.logsumexp": torch.logsumexp(x, dim=-1)}


# The declared domain: blocks of 1, dividing the length or not, and wider than it; a row of one entry and a
# long one (4096); masked (-inf) leading blocks; float32 and float64; any layout.
LSE_DOMAIN = Domain(
    args=(Arg("block", (8, 1, 7, 64, 5000)), Arg("N", (40, 1, 1024)), Arg("rows", (3, 1)),
          Arg("first block", ("random", "all -inf"))),
    dtypes=(("x", ("float32", "float64")),), layouts=(("x", ("contiguous", "transposed", "strided")),), examples=6)


def _lse_domain_judge(s, r, ctx):
    return close(s.get("logsumexp"), r["torch.logsumexp"], "logsumexp", tol=ctx.tol.scaled(2))


@CHECKS.domain("online_logsumexp", LSE_DOMAIN, _lse_domain_judge)
def lse_domain(ctx, ex):
    x = ctx.randn(ex["rows"], ex["N"], scale=3.0).to(getattr(torch, ex["dtype of x"]))
    if ex["first block"] == "all -inf":
        x[:, :min(ex["block"], ex["N"])] = float("-inf")
    x = relaid(x, ex["layout of x"])
    return {"logsumexp": ctx.call(ctx.target, x, ex["block"]), "torch.logsumexp": torch.logsumexp(x, dim=-1)}


def _lse_streamed(s, r, ctx):
    largest, limit = s.get("largest"), r["limit"]
    if isinstance(largest, int) and largest > limit:
        return (f"your code created a tensor of shape {tuple(s.get('largest shape') or ())} ({largest:,} elements) "
                f"for an input of shape {tuple(r['shape'])} with block={r['block']}: stream the last dim block by "
                f"block, so no intermediate holds more than one block ({limit:,} elements) of each row")
    return _lse_against_torch(s, r, ctx)


@CHECKS.probe("online_logsumexp", "streams block by block (no intermediate wider than a block)", _lse_streamed,
              CPU, hidden=True,
              rule="read `block` entries at a time with a running (max, sum)")
def lse_streamed(ctx):
    x = ctx.randn(6, 100)  # (rows, N)
    rec = OpRecorder()
    out = ctx.call(recorded(ctx.target, rec), x, 10)
    return {"logsumexp": out, "torch.logsumexp": torch.logsumexp(x, dim=-1), "largest": rec.largest,
            "largest shape": rec.largest_shape, "limit": 6 * 10, "shape": list(x.shape), "block": 10}


# ----------------------------------------------------------------------------------------------
# flash_attention(q, k, v, causal=False, block_q=64, block_k=64) -> (output, lse)


def _flash(ctx, q, k, v, fn=None, **kwargs):
    result = ctx.call(fn or ctx.target, q, k, v, **kwargs)
    return ctx.unpack(result, 2, "a pair (output, lse)")


def _flash_same(*keys):
    """Outputs within the dtype's tolerance; lse in any float dtype (float32 is usual for half inputs)."""
    def judge(s, r, ctx):
        scale = 1.0 if ctx.config.device == "cpu" else 2.0
        for key in keys or [k for k, v in r.items() if isinstance(v, torch.Tensor) and not k.startswith("torch")]:
            msg = close(s.get(key), r[key], key, tol=ctx.tol.scaled(scale), check_dtype=not key.startswith("lse"))
            if msg:
                return msg
        return None
    return judge


@CHECKS.probe("flash_attention", "matches the reference (Tq ≠ Tk, ragged tiles, float32 ~1e-5)", _flash_same(),
              CPU_AND_GPU,
              rule="Exact softmax(q·kᵀ/√D)·v computed tile by tile")
def flash_random(ctx):
    q = ctx.randn(2, 3, 70, 16)  # (B, H, Tq, D)
    k = ctx.randn(2, 3, 90, 16)  # (B, H, Tk, D)
    v = ctx.randn(2, 3, 90, 16)
    out, lse = _flash(ctx, q, k, v, block_q=32, block_k=24)
    out_d, lse_d = _flash(ctx, q, k, v)  # default blocks
    return {"output": out, "lse": lse, "output (default blocks)": out_d, "lse (default blocks)": lse_d}


def _flash_vs_torch(s, r, ctx):
    scale = 2.0 if ctx.config.device == "cpu" else 4.0
    for key in [k for k in r if k.startswith("output")]:
        msg = close(s.get(key), r[f"torch {key}"], f"{key} against F.scaled_dot_product_attention",
                    tol=ctx.tol.scaled(scale))
        if msg:
            return msg + (". Causal with Tq ≠ Tk is bottom-right aligned: query i sees keys j ≤ i + Tk − Tq "
                          "(the queries are the last Tq positions, as with a KV cache)" if "Tq=" in key else "")
    for key in [k for k in r if k.startswith("lse")]:
        msg = close(s.get(key), r[f"torch {key}"], f"{key} against torch.logsumexp of the scaled scores",
                    tol=ctx.tol.scaled(scale), check_dtype=False)
        if msg:
            return msg
    return None


@CHECKS.probe("flash_attention", "agrees with F.scaled_dot_product_attention; lse with torch.logsumexp "
              "(causal Tq ≠ Tk: causal_lower_right)", _flash_vs_torch, CPU_AND_GPU,
              rule="lse (B, H, Tq) in float32: the log-sum-exp of each row of the scaled scores")
def flash_vs_torch(ctx):
    q, k, v = ctx.randn(1, 4, 50, 32), ctx.randn(1, 4, 50, 32), ctx.randn(1, 4, 50, 32)
    out, lse = _flash(ctx, q, k, v, block_q=16, block_k=16)
    out_c, lse_c = _flash(ctx, q, k, v, causal=True, block_q=16, block_k=16)
    q_new = q[:, :, 30:].clone()  # the last 20 positions queried against all 50 keys (a KV cache's prefill)
    out_r, lse_r = _flash(ctx, q_new, k, v, causal=True, block_q=16, block_k=16)
    # torch's answers, computed here too; the judge only ever reads the reference child's copy
    scores = (q.float() @ k.float().transpose(-2, -1)) / math.sqrt(32)  # (B, H, T, T)
    causal = causal_mask(50, 50, q.device)
    return {"output": out, "lse": lse, "output (causal)": out_c, "lse (causal)": lse_c,
            "output (causal, Tq=20, Tk=50)": out_r, "lse (causal, Tq=20, Tk=50)": lse_r,
            "torch output": F.scaled_dot_product_attention(q, k, v),
            "torch output (causal)": F.scaled_dot_product_attention(q, k, v, is_causal=True),
            "torch output (causal, Tq=20, Tk=50)": sdpa_causal(q_new, k, v),
            "torch lse": torch.logsumexp(scores, dim=-1),
            "torch lse (causal)": torch.logsumexp(scores.masked_fill(~causal, float("-inf")), dim=-1),
            "torch lse (causal, Tq=20, Tk=50)": torch.logsumexp(scores[:, :, 30:].masked_fill(
                ~causal_mask(20, 50, q.device), float("-inf")), dim=-1)}


@CHECKS.probe("flash_attention", "causal mode matches the reference", _flash_same(), CPU_AND_GPU,
              rule="With `causal=True` each query sees only the keys at or before its own position")
def flash_causal(ctx):
    q, k, v = ctx.randn(2, 3, 96, 16), ctx.randn(2, 3, 96, 16), ctx.randn(2, 3, 96, 16)
    out, lse = _flash(ctx, q, k, v, causal=True, block_q=32, block_k=32)
    out_r, lse_r = _flash(ctx, q, k, v, causal=True, block_q=32, block_k=24)  # tiles not square
    return {"output": out, "lse": lse, "output (block_q=32, block_k=24)": out_r, "lse (block_q=32, block_k=24)": lse_r}


@CHECKS.probe("flash_attention", "causal mode with Tq ≠ Tk, bottom-right aligned (fewer queries than keys, and "
              "more: the first Tq − Tk see no key, output 0 and lse −inf)", _flash_same(), CPU, hidden=True,
              rule="the queries are the last Tq of Tk positions, so query i sees keys j ≤ i + Tk − Tq")
def flash_causal_ragged(ctx):
    obs = {}
    for tq, tk in ((40, 70), (70, 40), (1, 37)):  # query i sees keys j ≤ i + Tk − Tq (bottom-right aligned)
        q, k, v = ctx.randn(1, 2, tq, 16), ctx.randn(1, 2, tk, 16), ctx.randn(1, 2, tk, 16)
        out, lse = _flash(ctx, q, k, v, causal=True, block_q=16, block_k=16)
        obs[f"output (Tq={tq}, Tk={tk})"], obs[f"lse (Tq={tq}, Tk={tk})"] = out, lse
    return obs


def _no_full_scores(s, r, ctx):
    return _no_tq_by_tk(s, r, ctx) or _flash_same("output", "lse")(s, r, ctx)


@CHECKS.probe("flash_attention", "never builds a Tq×Tk tensor (the largest intermediate is a tile)",
              _no_full_scores, CPU,
              rule="the grader records the largest tensor your code creates while it runs: it must be smaller than a "
                   "Tq × Tk matrix")
def flash_memory(ctx):
    B, H, Tq, Tk, D = 1, 3, 100, 130, 16
    q, k, v = ctx.randn(B, H, Tq, D), ctx.randn(B, H, Tk, D), ctx.randn(B, H, Tk, D)
    rec = OpRecorder()
    out, lse = _flash(ctx, q, k, v, fn=recorded(ctx.target, rec), block_q=32, block_k=32)
    return {"output": out, "lse": lse, "largest": rec.largest, "largest shape": rec.largest_shape,
            "limit": Tq * Tk, "Tq": Tq, "Tk": Tk}


def causal_tiles(Tq: int, Tk: int, block: int) -> tuple[int, int, int]:
    """(tiles computed, all tiles, query-key pairs scored) of a causal pass with block×block tiles, bottom-right
    aligned: a query tile [qs, qe) needs the key tiles up to key qe − 1 + Tk − Tq."""
    computed, pairs = 0, 0
    for qs in range(0, Tq, block):
        qe = min(qs + block, Tq)
        stop = max(0, min(Tk, qe + Tk - Tq))
        computed += -(-stop // block)
        pairs += (qe - qs) * stop
    return computed, -(-Tq // block) * -(-Tk // block), pairs


def _tiles_skipped(s, r, ctx):
    msg = _no_tq_by_tk(s, r, ctx)
    if msg:
        return msg
    per_head, b = r["B*H"], r["block"]
    for tq, tk in r["shapes"]:
        tag = f" (Tq={tq}, Tk={tk})"
        area, ref_area = s.get("scored pairs" + tag), r["scored pairs" + tag]
        if not isinstance(area, int):
            return f"could not count the scores your code computed (got {describe(area)})"
        if area > ref_area:
            done, tiles, _ = causal_tiles(tq, tk, b)
            return (f"in causal mode your code scored {area // per_head:,} query-key pairs per head, but the tiles "
                    f"on or below the diagonal hold only {ref_area // per_head:,} (Tq={tq}, Tk={tk}, {b}×{b} tiles: "
                    f"{done} of {tiles} tiles; bottom-right, query i sees keys j ≤ i + Tk − Tq). Skip key tiles "
                    f"that start after the last key the query tile's last row may see: they are wholly masked, so "
                    f"computing them is wasted work")
    return _flash_same()(s, r, ctx)


@CHECKS.probe("flash_attention", "causal mode skips tiles wholly above the diagonal (Tq = Tk, and bottom-right "
              "for Tq ≠ Tk)", _tiles_skipped, CPU,
              rule="tiles wholly above that diagonal are skipped")
def flash_tile_count(ctx):
    B, H, D, block = 1, 2, 16, 32
    obs = {"B*H": B * H, "block": block, "shapes": [], "largest": 0, "largest shape": [], "limit": 1, "Tq": 0,
           "Tk": 0}  # the largest tensor, of the shape where it comes closest to a Tq×Tk matrix
    for tq, tk in ((128, 128), (64, 128), (128, 64)):
        q, k, v = ctx.randn(B, H, tq, D), ctx.randn(B, H, tk, D), ctx.randn(B, H, tk, D)
        rec = OpRecorder()
        out, lse = _flash(ctx, q, k, v, fn=recorded(ctx.target, rec), causal=True, block_q=block, block_k=block)
        tag = f" (Tq={tq}, Tk={tk})"
        obs["shapes"].append([tq, tk])
        obs.update({"output" + tag: out, "lse" + tag: lse, "scored pairs" + tag: score_area(rec, D)})
        if rec.largest / (tq * tk) > obs["largest"] / obs["limit"]:
            obs.update({"largest": rec.largest, "largest shape": rec.largest_shape, "limit": tq * tk, "Tq": tq,
                        "Tk": tk})
    return obs


# The declared domain of flash_attention: causal or not, both block sizes (1, dividing T or not, wider than T),
# Tq and Tk from 1 to 70 (Tq ≠ Tk both ways), head sizes, q, k, v in float32, float16 or bfloat16 (the output in
# their dtype, lse in float32), each of q, k, v laid out on its own; causal and the blocks by keyword or in the
# signature's order.
FLASH_DOMAIN = Domain(
    args=(Arg("causal", (False, True)), Arg("block_q", (16, 1, 7, 256)), Arg("block_k", (16, 5, 256)),
          Arg("Tq", (24, 1, 70)), Arg("Tk", (24, 1, 70)), Arg("D", (8, 32)), Arg("B", (1, 2)), PASSED),
    dtypes=(("q, k, v", ("float32", "float16", "bfloat16")),),
    layouts=(("q", ("contiguous", "transposed", "strided")), ("k", ("contiguous", "transposed", "strided")),
             ("v", ("contiguous", "transposed", "strided"))), examples=6)


def _flash_domain_judge(s, r, ctx):
    """The output in q's dtype within that dtype's tolerance; lse in float32 whatever q's dtype (the exercise's
    rule: with half inputs a log-sum-exp kept in float16 or bfloat16 loses the digits the backward needs)."""
    tol = tolerance(r["output"].dtype)
    return close(s.get("output"), r["output"], "output", tol=tol) or close(s.get("lse"), r["lse"], "lse", tol=tol)


@CHECKS.domain("flash_attention", FLASH_DOMAIN, _flash_domain_judge)
def flash_domain(ctx, ex):
    dt = getattr(torch, ex["dtype of q, k, v"])
    q = relaid(ctx.randn(ex["B"], 2, ex["Tq"], ex["D"]).to(dt), ex["layout of q"])
    k = relaid(ctx.randn(ex["B"], 2, ex["Tk"], ex["D"]).to(dt), ex["layout of k"])
    v = relaid(ctx.randn(ex["B"], 2, ex["Tk"], ex["D"]).to(dt), ex["layout of v"])
    args, kwargs = arguments(("causal", "block_q", "block_k"), {n: ex[n] for n in ("causal", "block_q", "block_k")},
                             {}, ex["passed"])
    out, lse = ctx.unpack(ctx.call(ctx.target, q, k, v, *args, **kwargs), 2, "a pair (output, lse)")
    return {"output": out, "lse": lse}


@CHECKS.probe("flash_attention", "tails: T not a multiple of the block", _flash_same(), CPU, hidden=True,
              rule="when T is not a multiple of the block, the last tile is shorter")
def flash_tails(ctx):
    obs = {}
    for tq, tk, bq, bk in ((37, 45, 16, 16), (45, 37, 16, 32), (5, 7, 16, 16), (33, 33, 8, 16)):
        q, k, v = ctx.randn(1, 2, tq, 8), ctx.randn(1, 2, tk, 8), ctx.randn(1, 2, tk, 8)
        out, lse = _flash(ctx, q, k, v, block_q=bq, block_k=bk)
        obs[f"output (Tq={tq}, Tk={tk}, blocks {bq}×{bk})"], obs[f"lse (Tq={tq}, Tk={tk}, blocks {bq}×{bk})"] = out, lse
        if tq == tk:
            out, lse = _flash(ctx, q, k, v, causal=True, block_q=bq, block_k=bk)
            obs[f"output (causal, T={tq}, blocks {bq}×{bk})"], obs[f"lse (causal, T={tq}, blocks {bq}×{bk})"] = out, lse
    return obs


@CHECKS.probe("flash_attention", "large scores (scale 30) stay finite and exact", _flash_same(), CPU, hidden=True,
              rule="Every exponent is taken relative to the running max, so it is ≤ 0 and large scores cannot "
                   "overflow")
def flash_large(ctx):
    q, k, v = ctx.randn(1, 2, 40, 8, scale=30.0), ctx.randn(1, 2, 60, 8, scale=30.0), ctx.randn(1, 2, 60, 8)
    out, lse = _flash(ctx, q, k, v, block_q=16, block_k=16)
    return {"output": out, "lse": lse}


# ----------------------------------------------------------------------------------------------
# flash_attention_triton(q, k, v, causal=False) -> Tensor


SUSPECT_OPS = OpRecorder.MATMULS | {
    "_softmax", "softmax", "_log_softmax", "exp", "exp_", "exp2", "logsumexp", "einsum",
    "scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_attention_math", "_scaled_dot_product_flash_attention",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_cudnn_attention",
    "_flash_attention_forward", "_efficient_attention_forward",
}


def _triton(ctx, q, k, v, causal=False):
    """Call the launcher with launches counted and torch's ops recorded."""
    rec, launches = OpRecorder(), [0]
    with count_triton_launches(launches):
        out = ctx.call(recorded(ctx.target, rec), q, k, v, causal=causal)
    return out, launches[0], sorted(rec.ops & SUSPECT_OPS)


def _no_kernel(s) -> str | None:
    launches, ops = s.get("launches"), s.get("torch ops") or []
    if ops:
        return (f"the launcher computes with torch ({', '.join(ops)}) instead of leaving the work to the kernel: "
                f"the scores, the softmax and the products with V all belong inside the Triton kernel")
    if not launches:
        return ("no Triton kernel ran: launch your @triton.jit kernel with `kernel[grid](...)` and return what it "
                "wrote (a launcher that falls back to F.scaled_dot_product_attention or matmuls does not count)")
    return None


def _kernel_ran(s, r, ctx):
    return _no_kernel(s) or _triton_vs_sdpa(s, r, ctx)


# every output the probe observed, against SDPA's (recorded as "torch " + its key)
_triton_vs_sdpa = agrees_with(scale=2, label="F.scaled_dot_product_attention")


@CHECKS.probe("flash_attention_triton", "a Triton kernel really runs (no fallback to SDPA or matmuls)", _kernel_ran,
              (Config("cpu", "float32"), Config("cuda", "float16")),
              rule="a launcher that falls back to SDPA or to torch matmuls is rejected")
def triton_ran(ctx):
    q, k, v = ctx.randn(1, 2, 40, 16), ctx.randn(1, 2, 40, 16), ctx.randn(1, 2, 40, 16)
    out, launches, ops = _triton(ctx, q, k, v)
    return {"output": out, "torch output": F.scaled_dot_product_attention(q, k, v), "launches": launches,
            "torch ops": ops}


@CHECKS.probe("flash_attention_triton", "matches SDPA through the interpreter (ragged T=37, causal and not)",
              _triton_vs_sdpa, INTERPRETER,
              rule="softmax(q·kᵀ/√D)·v by the Triton kernel above")
def triton_interpreted(ctx):
    q, k, v = ctx.randn(1, 2, 37, 16), ctx.randn(1, 2, 37, 16), ctx.randn(1, 2, 37, 16)  # (B, H, T, D)
    obs = {}
    for causal in (False, True):
        tag = " (causal)" if causal else ""
        obs["output" + tag], _, _ = _triton(ctx, q, k, v, causal)
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal)
        obs["torch output" + tag] = ref.to(q.dtype)
    return obs


@CHECKS.probe("flash_attention_triton", "several tiles and head sizes (T=100 and 70, D=32 and 64)", _triton_vs_sdpa,
              CPU, hidden=True,
              rule="It is checked for any B and H, T from 1 to a few tiles, every D, causal or not")
def triton_sizes(ctx):
    obs = {}
    for B, H, T, D, causal in ((2, 1, 100, 32, False), (1, 3, 70, 64, True)):
        q, k, v = ctx.randn(B, H, T, D), ctx.randn(B, H, T, D), ctx.randn(B, H, T, D)
        key = f"output (B={B}, H={H}, T={T}, D={D}, causal={causal})"
        obs[key], _, _ = _triton(ctx, q, k, v, causal)
        obs["torch " + key] = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return obs


# The declared domain of the launcher, through the interpreter (kept tiny: it runs one program at a time in
# NumPy): causal or not, T of one row or ragged, the head sizes at the ends of the range (32 and 64, and T=100,
# are "several tiles and head sizes"), B and H both above 1, float32 or float16 (the interpreter's bfloat16 dots
# are wrong), and each of q, k, v laid out on its own (a launcher that checks q's layout alone passes the
# battery, which relays all three alike). T up to 1000 and float16/bfloat16 compiled are the GPU check's.
TRITON_DOMAIN = Domain(
    args=(Arg("causal", (False, True)), Arg("T", (21, 1)), Arg("D", (16, 128)), Arg("B, H", ("1, 1", "2, 3"))),
    dtypes=(("q, k, v", ("float32", "float16")),),
    layouts=(("q", ("contiguous", "transposed", "strided")), ("k", ("contiguous", "transposed")),
             ("v", ("contiguous", "strided"))), examples=2)


def _triton_domain_judge(s, r, ctx):
    want = r["torch output"]
    return _no_kernel(s) or close(s.get("output"), want, "output against F.scaled_dot_product_attention's",
                                  tol=tolerance(want.dtype).scaled(2))


@CHECKS.domain("flash_attention_triton", TRITON_DOMAIN, _triton_domain_judge)
def triton_domain(ctx, ex):
    B, H = (int(n) for n in ex["B, H"].split(", "))
    dtype = getattr(torch, ex["dtype of q, k, v"])
    q, k, v = (relaid(ctx.randn(B, H, ex["T"], ex["D"]).to(dtype), ex[f"layout of {n}"]) for n in "qkv")
    out, launches, ops = _triton(ctx, q, k, v, ex["causal"])
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=ex["causal"]).to(dtype)
    return {"output": out, "torch output": ref, "launches": launches, "torch ops": ops}


@CHECKS.probe("flash_attention_triton", "compiled on GPU: T up to 1000, D=64 and 128, against SDPA", _triton_vs_sdpa,
              GPU_ONLY,
              rule="On a GPU it is also checked compiled, in float16 and bfloat16, for T up to 1000 and D up to 128")
def triton_gpu(ctx):
    obs = {}
    for B, H, T, D, causal in ((2, 3, 1000, 64, False), (2, 3, 1000, 64, True), (1, 4, 777, 128, True),
                               (1, 2, 256, 16, False)):
        q, k, v = ctx.randn(B, H, T, D), ctx.randn(B, H, T, D), ctx.randn(B, H, T, D)
        key = f"output (B={B}, H={H}, T={T}, D={D}, causal={causal})"
        obs[key], _, _ = _triton(ctx, q, k, v, causal)
        obs["torch " + key] = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    return obs


def _raises_value_error(s, r, ctx):
    got = s.get("raised")
    if got != "ValueError":
        return (f"a head size D=24 (not 16, 32, 64 or 128) should raise ValueError naming D, but "
                + ("nothing was raised" if got is None else f"{got} was raised"))
    if "D" not in (s.get("message") or ""):
        return f"the ValueError should name the argument D; its message was {s.get('message')!r}"
    return None


@CHECKS.probe("flash_attention_triton", "an unsupported head size D raises ValueError", _raises_value_error, CPU,
              hidden=True,
              rule="D in {16, 32, 64, 128} (raise `ValueError` naming D otherwise)")
def triton_bad_d(ctx):
    q = ctx.randn(1, 2, 20, 24)
    try:
        ctx.call(ctx.target, q, q.clone(), q.clone())
    except ValueError as exc:
        return {"raised": "ValueError", "message": str(exc)}
    except Exception as exc:  # any other error: say which
        return {"raised": type(exc).__name__, "message": str(exc)}
    return {"raised": None, "message": ""}


# ----------------------------------------------------------------------------------------------
# attention_flops(b, h, t_q, t_k, d, causal=False) -> int and
# kv_cache_bytes(n_layer, n_kv_heads, d_head, seq_len, batch=1, dtype=torch.float16) -> int


def _same_ints(s, r, ctx):
    for key, want in r.items():
        got = s.get(key)
        if isinstance(got, bool) or not isinstance(got, int):
            shown = f" ({got:.6g})" if isinstance(got, float) else ""
            return (f"{key} should be a Python int, got {describe(got)}{shown}: keep integer arithmetic "
                    f"(// not /, no float factors)")
        if got != want:
            return f"{key}: expected {want:,}, got {got:,} (off by a factor {got / want:.4g})" if want else \
                f"{key}: expected {want}, got {got:,}"
    return None


@CHECKS.probe("attention_flops", "counts 4·B·H·Tq·Tk·D for a forward pass", _same_ints,
              rule="FLOPs of one attention forward pass: 4·b·h·t_q·t_k·d (QKᵀ and PV)")
def flops_plain(ctx):
    f = ctx.target
    return {"attention_flops(1, 1, 1, 1, 1)": ctx.call(f, 1, 1, 1, 1, 1),
            "attention_flops(2, 3, 5, 7, 11)": ctx.call(f, 2, 3, 5, 7, 11),
            "attention_flops(4, 16, 2048, 2048, 64)": ctx.call(f, 4, 16, 2048, 2048, 64)}


@CHECKS.probe("attention_flops", "causal counts half", _same_ints,
              rule="half of the plain count when t_q = t_k")
def flops_causal(ctx):
    f = ctx.target
    return {"attention_flops(4, 16, 2048, 2048, 64, causal=True)": ctx.call(f, 4, 16, 2048, 2048, 64, causal=True),
            "attention_flops(2, 3, 6, 6, 10, causal=True)": ctx.call(f, 2, 3, 6, 6, 10, causal=True)}


@CHECKS.probe("attention_flops", "exact for huge sizes (a Python int, no float rounding)", _same_ints, hidden=True,
              rule="Both return a Python `int`, computed in integer arithmetic")
def flops_huge(ctx):
    return {"attention_flops(7, 33, 1000003, 999983, 127)": ctx.call(ctx.target, 7, 33, 1000003, 999983, 127)}


@CHECKS.probe("kv_cache_bytes", "K and V for every layer, head and position (float16 by default)", _same_ints,
              rule="a K and a V per layer, KV head, position and sequence")
def kv_plain(ctx):
    f = ctx.target
    return {"kv_cache_bytes(32, 32, 128, 4096)": ctx.call(f, 32, 32, 128, 4096),
            "kv_cache_bytes(2, 3, 5, 7, batch=11)": ctx.call(f, 2, 3, 5, 7, batch=11),
            "kv_cache_bytes(80, 8, 128, 8192, batch=4)": ctx.call(f, 80, 8, 128, 8192, batch=4)}


@CHECKS.probe("kv_cache_bytes", "element size follows dtype (float32, bfloat16, float8)", _same_ints,
              rule="the cache's size in bytes, the element size taken from `dtype`")
def kv_dtypes(ctx):
    f = ctx.target
    obs = {"kv_cache_bytes(2, 3, 5, 7, batch=11, dtype=torch.float32)": ctx.call(f, 2, 3, 5, 7, batch=11,
                                                                                 dtype=torch.float32),
           "kv_cache_bytes(32, 8, 128, 4096, dtype=torch.bfloat16)": ctx.call(f, 32, 8, 128, 4096,
                                                                              dtype=torch.bfloat16)}
    if hasattr(torch, "float8_e4m3fn"):
        obs["kv_cache_bytes(32, 8, 128, 4096, dtype=torch.float8_e4m3fn)"] = ctx.call(
            f, 32, 8, 128, 4096, dtype=torch.float8_e4m3fn)
    return obs


# The declared domains of the two counters: every argument at 1 (the lower edge), a default and a large value
# (past 2⁵³ in products), causal with Tq < Tk (the defaults: a KV cache's prefill), Tq = Tk and Tq > Tk; every
# dtype a cache is kept in, integers included, and the defaults (batch, dtype) left out or given; the optional
# arguments (causal; batch, dtype) by keyword or positionally in the signature's order.
FLOPS_DOMAIN = Domain(
    args=(Arg("causal", (False, True)), Arg("t_q", (5, 1, 12, 20, 1000003)), Arg("t_k", (12, 1, 999983)),
          Arg("b", (2, 1, 7)), Arg("h", (3, 1, 64)), Arg("d", (8, 1, 128)), PASSED), tensors=False, examples=8)


def _same_int(key=None):
    """_same_ints on one observation (`key`), or on those named as calls ("attention_flops(...)")."""
    def judge(s, r, ctx):
        keys = [key] if key else [k for k in r if "(" in k]
        return _same_ints({k: s.get(k) for k in keys}, {k: r[k] for k in keys}, ctx)
    return judge


@CHECKS.domain("attention_flops", FLOPS_DOMAIN, _same_int())
def flops_domain(ctx, ex):
    sizes = (ex["b"], ex["h"], ex["t_q"], ex["t_k"], ex["d"])
    call = f"attention_flops({', '.join(map(str, sizes))}"
    obs = {}
    # the default left out (by keyword) or given as False (in the signature's order); the causal count of the same
    # sizes too, in every example
    cases = ({}, {"causal": True}) if not ex["causal"] else ({"causal": True},)
    for given in cases:
        args, kwargs = arguments(("causal",), given, {"causal": False}, ex["passed"])
        text = "".join(f", {a!r}" for a in args) + "".join(f", {k}={v!r}" for k, v in kwargs.items())
        obs[call + text + ")"] = ctx.call(ctx.target, *sizes, *args, **kwargs)
    return obs


KV_DOMAIN = Domain(
    args=(Arg("dtype", ("float16", "float32", "bfloat16", "float64", "float8_e4m3fn", "int8")),
          Arg("batch", (1, 3, 64)), Arg("n_layer", (2, 1, 80)), Arg("n_kv_heads", (3, 1, 64)),
          Arg("d_head", (5, 1, 256)), Arg("seq_len", (7, 1, 131072)), PASSED), tensors=False, examples=6)


@CHECKS.domain("kv_cache_bytes", KV_DOMAIN, _same_int("kv_cache_bytes"))
def kv_domain(ctx, ex):
    kwargs = {}  # the defaults (batch=1, float16) left out, as a caller would
    if ex["batch"] != 1:
        kwargs["batch"] = ex["batch"]
    if ex["dtype"] != "float16":
        kwargs["dtype"] = getattr(torch, ex["dtype"])
    args, kwargs = arguments(("batch", "dtype"), kwargs, {"batch": 1, "dtype": torch.float16}, ex["passed"])
    return {"kv_cache_bytes": ctx.call(ctx.target, ex["n_layer"], ex["n_kv_heads"], ex["d_head"], ex["seq_len"],
                                       *args, **kwargs)}


# ----------------------------------------------------------------------------------------------
# Challenge: FlashAttentionFunction, forward via flash_attention, backward tile by tile from lse


def _faf_grads(ctx, q, k, v, causal, rec=None):
    """(output, grads of q, k, v) through the student's Function, and SDPA's for the same inputs."""
    q, k, v = (t.detach().requires_grad_(True) for t in (q, k, v))
    w = ctx.randn(*q.shape[:-1], v.shape[-1])  # (B, H, Tq, D): a random upstream gradient

    def forward_backward(q, k, v):
        out = ctx.target.apply(q, k, v, causal)
        if isinstance(out, torch.Tensor) and out.requires_grad:
            (out * w).sum().backward()
        return out

    out = ctx.call(recorded(forward_backward, rec) if rec else forward_backward, q, k, v)
    grads = [t.grad for t in (q, k, v)]
    tq, tk, tv = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    ref = sdpa_causal(tq, tk, tv) if causal else F.scaled_dot_product_attention(tq, tk, tv)
    (ref * w).sum().backward()
    return out, grads, ref, [t.grad for t in (tq, tk, tv)]


def _faf_vs_sdpa(s, r, ctx):
    for key in [k for k in r if k.startswith(("output", "gradient"))]:
        msg = close(s.get(key), r["SDPA " + key], f"{key} against F.scaled_dot_product_attention's",
                    tol=ctx.tol.scaled(10))
        if msg:
            if key.startswith("gradient") and not isinstance(s.get(key), torch.Tensor):
                return f"{key} is {describe(s.get(key))}: backward must return a gradient for q, k and v " \
                       f"(and None for causal)"
            return msg
    return None


def _faf_probe(ctx, causal, Tq, Tk):
    q, k, v = ctx.randn(1, 2, Tq, 16), ctx.randn(1, 2, Tk, 16), ctx.randn(1, 2, Tk, 16)
    out, grads, ref, ref_grads = _faf_grads(ctx, q, k, v, causal)
    obs = {"output": out, "SDPA output": ref}
    for name, g, rg in zip("qkv", grads, ref_grads):
        obs[f"gradient of {name}"], obs[f"SDPA gradient of {name}"] = g, rg
    return obs


@CHECKS.probe("FlashAttentionFunction", "output and gradients match SDPA's (Tq ≠ Tk, ragged)", _faf_vs_sdpa,
              CPU_AND_GPU,
              rule="It is checked against the gradients of `F.scaled_dot_product_attention`")
def faf_plain(ctx):
    return _faf_probe(ctx, False, 75, 140)


@CHECKS.probe("FlashAttentionFunction", "causal gradients match SDPA's", _faf_vs_sdpa, CPU_AND_GPU,
              rule="In causal mode, skip the same tiles as the forward and mask the diagonal ones, bottom-right "
                   "aligned as there")
def faf_causal(ctx):
    return _faf_probe(ctx, True, 150, 150)


@CHECKS.probe("FlashAttentionFunction", "causal gradients match SDPA's with Tq ≠ Tk (bottom-right: "
              "causal_lower_right)", _faf_vs_sdpa, CPU, hidden=True,
              rule="with `causal_lower_right` when Tq ≠ Tk")
def faf_causal_ragged(ctx):
    return _faf_probe(ctx, True, 75, 140)


@CHECKS.probe("FlashAttentionFunction", "neither forward nor backward builds a Tq×Tk tensor",
              lambda s, r, ctx: _no_tq_by_tk(s, r, ctx, "in the forward or backward pass") or _faf_vs_sdpa(s, r, ctx),
              CPU, hidden=True,
              rule="No Tq × Tk tensor appears in either pass")
def faf_memory(ctx):
    Tq, Tk = 300, 330
    q, k, v = ctx.randn(1, 2, Tq, 16), ctx.randn(1, 2, Tk, 16), ctx.randn(1, 2, Tk, 16)
    rec = OpRecorder()
    out, grads, ref, ref_grads = _faf_grads(ctx, q, k, v, False, rec)
    return {"output": out, "SDPA output": ref, "gradient of k": grads[1], "SDPA gradient of k": ref_grads[1],
            "largest": rec.largest, "largest shape": rec.largest_shape, "limit": Tq * Tk, "Tq": Tq, "Tk": Tk}


# The declared domain of the Function: causal or not, Tq and Tk from 1 to past two 64-wide tiles (Tq ≠ Tk both
# ways: bottom-right, queries that see no key), head sizes, each of q, k, v laid out on its own; `causal`
# positional, by keyword or left at its default (apply's *args/**kwargs); and two calls in flight before the
# first one's backward (state kept on ctx, not on the class: `ctx` names it).
FAF_DOMAIN = Domain(
    args=(Arg("causal", (False, True)), Arg("Tq", (24, 1, 150)), Arg("Tk", (24, 1, 140)), Arg("D", (16, 8, 64)),
          Arg("B", (1, 2)), Arg("args, kwargs", ("causal positional", "causal by keyword", "causal left out")),
          Arg("ctx", ("one call", "two calls in flight"))),
    layouts=(("q", ("contiguous", "transposed", "strided")), ("k", ("contiguous", "transposed", "strided")),
             ("v", ("contiguous", "transposed", "strided"))), examples=4)


def _faf_domain_judge(s, r, ctx):
    for key in ("output", "gradient of q", "gradient of k", "gradient of v"):
        msg = close(s.get(key), r[key], key, tol=ctx.tol.scaled(10))
        if msg:
            return msg
    return None


@CHECKS.domain("FlashAttentionFunction", FAF_DOMAIN, _faf_domain_judge)
def faf_domain(ctx, ex):
    def inputs(tq, tk):
        q, k, v = ctx.randn(ex["B"], 2, tq, ex["D"]), ctx.randn(ex["B"], 2, tk, ex["D"]), ctx.randn(ex["B"], 2, tk, ex["D"])
        return [relaid(t, ex[f"layout of {n}"]).requires_grad_(True) for n, t in zip("qkv", (q, k, v))]

    def apply(q, k, v):
        if ex["args, kwargs"] == "causal by keyword":
            return ctx.target.apply(q, k, v, causal=ex["causal"])
        if ex["args, kwargs"] == "causal left out" and not ex["causal"]:
            return ctx.target.apply(q, k, v)
        return ctx.target.apply(q, k, v, ex["causal"])

    q, k, v = inputs(ex["Tq"], ex["Tk"])
    w = ctx.randn(ex["B"], 2, ex["Tq"], ex["D"])  # the upstream gradient

    def run():
        out = apply(q, k, v)
        if ex["ctx"] == "two calls in flight":  # a second call, other shapes, before the first one's backward
            apply(*inputs(ex["Tq"] + 5, ex["Tk"] + 3))
        (out * w).sum().backward()
        return out

    out = ctx.call(run)
    return {"output": out, **{f"gradient of {n}": t.grad for n, t in zip("qkv", (q, k, v))}}


# ----------------------------------------------------------------------------------------------
# Known mistakes. Each is run on the same probes as the reference; a student whose observations
# match one is told which. Their source doubles as test fixtures (tests/test_lesson09.py).


def flash_attention_triton__sdpa_fallback(q, k, v, causal=False):
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


MISTAKES = (
    Mistake("online_logsumexp", "lse_sum_not_rescaled", "the running sum is not rescaled when the max grows: "
            "terms added under the old max are too big by exp(m_old − m_new), so multiply the sum by that factor "
            "before adding the new block.",
            edits={"s = s * torch.exp(m - m_safe) + torch.exp(": "s = s + torch.exp("},
            hint="When a new block raises the running max, what happens to the terms you added under the old "
                 "max? Print the running sum before and after."),
    Mistake("online_logsumexp", "lse_nan_after_masked_block", "a row whose first block is all -inf (masked) comes "
            "out NaN: with the running max still -inf, exp(m - m_new) is exp(-inf - (-inf)). Subtract 0 while the "
            "max is -inf: subtract a copy of the new max with its -inf entries set to 0 (masked_fill).",
            edits={'m_safe = m_new.masked_fill(m_new == float("-inf"), 0.0)': "m_safe = m_new"},
            hint="Run a row whose first block is all -inf and print the running max and sum after each block: "
                 "where does the first NaN appear?"),
    Mistake("flash_attention", "acc_not_rescaled", "the output accumulator is not rescaled when the running max "
            "moves: multiply it by exp(m_old − m_new) before adding the new tile's P·V, as you do for the sum.",
            edits={"acc.mul_(alpha).baddbmm_(p, vf[:, ks:ke])": "acc.baddbmm_(p, vf[:, ks:ke])"},
            hint="When a new tile raises a row's running max, the accumulator holds terms computed under the "
                 "old max. Are they brought to the new max?"),
    Mistake("flash_attention", "sum_not_rescaled", "the running sum of exponentials is not rescaled when the max "
            "moves: l must become l·exp(m_old − m_new) + rowsum(P), like the accumulator.",
            edits={"l.mul_(alpha).add_(p.sum(dim=-1, keepdim=True))": "l.add_(p.sum(dim=-1, keepdim=True))"},
            hint="When a new tile raises a row's running max, is the running sum brought to the new max like "
                 "the accumulator?"),
    Mistake("flash_attention", "divide_inside_loop", "the output is divided by the running sum inside the loop: "
            "keep the accumulator unnormalised across key tiles and divide by l once, after the last tile.",
            edits={"acc.mul_(alpha).baddbmm_(p, vf[:, ks:ke])  # acc ← alpha·acc + p @ v":
                   "acc = acc.mul_(alpha).baddbmm_(p, vf[:, ks:ke]) / l  # normalised at every step",
                   "out[:, qs:qe] = acc / l": "out[:, qs:qe] = acc"},
            hint="At which point does your code normalise the output: after every key tile, or once at the "
                 "end?"),
    Mistake("flash_attention", "full_scores", "the whole Tq×Tk score matrix is built (then sliced): compute each "
            "tile's scores from a tile of q and a tile of k, so memory stays at one tile.",
            edits={"    pos = torch.arange(max(Tq, Tk), device=q.device)":
                   "    scores = torch.bmm(qf * scale, kf.transpose(1, 2))  # (BH, Tq, Tk): every score at once\n"
                   "    pos = torch.arange(max(Tq, Tk), device=q.device)",
                   "s = torch.bmm(q_tile, kf[:, ks:ke].transpose(1, 2))": "s = scores[:, qs:qe, ks:ke]"},
            hint="Print the shape of the largest tensor your function creates: is it one tile or the whole "
                 "score matrix?"),
    Mistake("flash_attention", "diagonal_skipped", "in causal mode the diagonal tile is skipped along with the tiles "
            "above it: the diagonal tile holds each query's own key and keys before it, so compute it, masking "
            "only its upper triangle.",
            edits={"k_stop = max(0, min(Tk, qe + shift)) if causal else Tk":
                   "k_stop = max(0, min(Tk, qs + shift)) if causal else Tk  # keys before the tile's first query's"},
            hint="In causal mode, which tiles does your loop skip? The diagonal tile holds each query's own "
                 "key."),
    Mistake("flash_attention", "causal_top_left", "with Tq ≠ Tk the causal mask is aligned top-left (query i sees "
            "keys j ≤ i, SDPA's is_causal): the course aligns it bottom-right, the queries being the last Tq of Tk "
            "positions (a KV cache's new tokens), so query i sees keys j ≤ i + Tk − Tq; shift the mask and the "
            "tile skipping by Tk − Tq.",
            edits={"shift = Tk - Tq  # causal, bottom-right": "shift = 0  # causal, top-left"},
            hint="With fewer queries than keys, where do the queries sit: at the start of the keys, or at "
                 "their end? Draw the mask for 2 queries and 4 keys."),
    Mistake("flash_attention", "lse_without_scale", "lse is computed from the unscaled scores q·k: the row "
            "log-sum-exp is of the scaled scores q·k/√D, so use m·scale (or scale the scores first).",
            edits={"q_tile = qf[:, qs:qe] * scale": "q_tile = qf[:, qs:qe]  # raw scores; the scale goes in the exponent",
                   "alpha = torch.exp(m - m_safe)": "alpha = torch.exp((m - m_safe) * scale)",
                   "p = s.sub_(m_safe).exp_()": "p = s.sub_(m_safe).mul_(scale).exp_()"},
            hint="Compute torch.logsumexp of the scores SDPA uses and compare with your lse: are the scores "
                 "scaled in both?"),
    Mistake("flash_attention", "no_tail_masking", "the last, partial tile is padded but its padded keys are not "
            "masked: padding rows score 0 and take a share of the softmax, so mask keys at positions ≥ Tk with "
            "-inf (or slice the tile to its real length).",
            edits={"kf = k.float().reshape(BH, Tk, D)": "kf = F.pad(k.float().reshape(BH, Tk, D), (0, 0, 0, -Tk % block_k))",
                   "vf = v.float().reshape(BH, Tk, Dv)": "vf = F.pad(v.float().reshape(BH, Tk, Dv), (0, 0, 0, -Tk % block_k))",
                   "k_stop = max(0, min(Tk, qe + shift)) if causal else Tk":
                   "k_stop = max(0, min(Tk, qe + shift)) if causal else kf.shape[1]  # whole tiles"},
            hint="Use a length that is not a multiple of the block and look at the last tile: what do its "
                 "padded keys score, and do they get any weight?"),
    Mistake("FlashAttentionFunction", "backward_top_left", "the backward's causal mask is aligned top-left "
            "(query i sees keys j ≤ i) while the forward's is bottom-right: with Tq ≠ Tk, query i sees keys "
            "j ≤ i + Tk − Tq in both passes, in the mask of a crossing tile and in which query tiles a key tile "
            "reaches.", edits={"shift = Tk - Tq  # causal, bottom-right (as the forward)": "shift = 0  # causal"},
            hint="With fewer queries than keys, is the causal mask of your backward the same as the forward's? "
                 "Draw both for 2 queries and 4 keys."),
    Mistake("flash_attention_triton", "sdpa_fallback", "the launcher returns F.scaled_dot_product_attention's "
            "answer instead of launching a Triton kernel: write the kernel and launch it with kernel[grid](...).",
            flash_attention_triton__sdpa_fallback,
            hint="Does a Triton kernel actually compute the output? Check what your launcher returns."),
    Mistake("attention_flops", "one_matmul", "only Q·Kᵀ is counted: P·V costs the same 2·Tq·Tk·D per head, so a "
            "forward pass is 4·B·H·Tq·Tk·D.", edits={"per_pair = 4 * b * h * d": "per_pair = 2 * b * h * d"},
            hint="How many matrix products does one attention forward pass make, and what does each cost?"),
    Mistake("attention_flops", "causal_always_half", "causal is counted as half whatever Tq and Tk: half holds for "
            "Tq = Tk only. The causal mask is bottom-right, so one decoding query (Tq = 1) sees every key: count "
            "2·B·H·D·(Tk² − max(Tk − Tq, 0)²).",
            edits={"return per_pair * (t_k * t_k - unqueried * unqueried) // 2":
                   "return per_pair * t_q * t_k // 2  # half, whatever the shape"},
            hint="Count the causal query-key pairs by hand for one query and many keys: is it half of the full "
                 "count?"),
    Mistake("kv_cache_bytes", "keys_only", "only the keys are counted: the cache holds a K and a V per layer, "
            "head and position, so multiply by 2.",
            edits={"return 2 * n_layer * n_kv_heads": "return n_layer * n_kv_heads"},
            hint="What does a KV cache hold for each layer, head and position? Count every tensor it stores."),
)


# ----------------------------------------------------------------------------------------------
# `course bench lesson09`


def _rss_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _release_free_memory() -> None:
    """Hand the C allocator's freed pages back to the OS (glibc), so that a peak measured next counts
    pages the call really touches rather than ones a previous call left cached."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def peak_extra_memory(fn) -> tuple[float | None, object]:
    """(peak resident memory above the starting point while `fn` runs, in MB; fn's result), on Linux
    by resetting the process's high-water mark; (None, result) where that is not possible."""
    _release_free_memory()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current VmRSS
        before = _rss_kib("VmRSS")
    except OSError:
        before = None
    result = fn()
    peak = _rss_kib("VmHWM")
    if before is None or peak is None:
        return None, result
    return max(0, peak - before) * 1024 / 1e6, result


def benchmark(ns: dict, device: str) -> dict:
    """CPU: the tiled `flash_attention` against SDPA (time, extra memory). CUDA: the Triton kernel in TFLOP/s."""
    gen = torch.Generator().manual_seed(0)
    if device == "cpu":
        rows, fn = [], ns["flash_attention"]
        for T in (512, 1024, 2048):
            q, k, v = (torch.randn(1, 8, T, 64, generator=gen) for _ in range(3))  # (B, H, T, D)
            mine = median_ms(lambda: fn(q, k, v, causal=True))
            ref = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
            mem_mine, _ = peak_extra_memory(lambda: fn(q, k, v, causal=True))
            mem_ref, _ = peak_extra_memory(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
            rows.append([f"(1, 8, {T}, 64)", round(mine, 2), round(ref, 2), round(mine / ref, 2),
                         None if mem_mine is None else round(mem_mine, 1),
                         None if mem_ref is None else round(mem_ref, 1)])
        return {"title": "flash_attention (causal, float32): yours against F.scaled_dot_product_attention",
                "columns": ["shape (B, H, T, D)", "yours (ms)", "SDPA (ms)", "ratio", "your extra MB", "SDPA extra MB"],
                "rows": rows,
                "notes": ["your flash_attention runs with its default block sizes; larger blocks (e.g. block_q=256, "
                          "block_k=256) cut Python's per-tile overhead",
                          "on CPU the Triton kernel runs through the interpreter, for correctness only: not timed",
                          "extra MB: peak resident memory above the inputs while the call runs"]}
    rows, fn = [], ns["flash_attention_triton"]
    for dtype in (torch.float16, torch.bfloat16):
        for D, causal, T in itertools.product((64, 128), (False, True), (1024, 4096)):
            B, H = 4, 16
            q, k, v = (torch.randn(B, H, T, D, generator=gen).to(device, dtype) for _ in range(3))
            mine = median_ms(lambda: fn(q, k, v, causal=causal)) / 1e3  # seconds
            ref = median_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)) / 1e3
            flops = 4 * B * H * T * T * D // (2 if causal else 1)
            rows.append([str(dtype).removeprefix("torch."), f"({B}, {H}, {T}, {D})", causal,
                         round(flops / mine / 1e12, 1), round(flops / ref / 1e12, 1), round(mine / ref, 2)])
    return {"title": "flash_attention_triton: yours against F.scaled_dot_product_attention on the same GPU",
            "columns": ["dtype", "shape (B, H, T, D)", "causal", "yours TFLOP/s", "SDPA TFLOP/s", "time ratio"],
            "rows": rows, "notes": ["FLOPs counted as 4·B·H·T²·D per forward, half when causal"]}


# The input battery. The Triton launcher runs through the interpreter on the CPU, where bfloat16 dots come out
# wrong (numpy has no bfloat16) and float64 says nothing of the compiled kernel (GPUs' tl.dot has no float64);
# it keeps float16 and the two layouts (a launcher passes strides). The counters take sizes, not tensors.
# Flash attention skips the offsets (engine.OFFSET_SCORES says why); online_logsumexp takes them.
from .engine import OFFSET_SCORES  # noqa: E402

_BATCH_OF_ONE = "its base check's inputs already have a batch of 1"
CHECKS.add_battery(skip={
    "flash_attention": OFFSET_SCORES,
    "flash_attention_triton": {**OFFSET_SCORES,
        "float64 inputs": "tl.dot has no float64 on GPUs; the interpreter's answer says nothing of the compiled kernel",
        "bfloat16 inputs on the CPU": "the Triton interpreter computes bfloat16 dots wrongly (numpy has no bfloat16)",
        "a batch of 1": _BATCH_OF_ONE,
    },
    "FlashAttentionFunction": {**OFFSET_SCORES, "a batch of 1": _BATCH_OF_ONE},
    "attention_flops": "takes sizes (integers), no tensor",
    "kv_cache_bytes": "takes sizes and a dtype, no tensor",
})
