"""Lesson 09's declared domains and its bottom-right causal alignment (issues 28 and 29).

Wrong implementations the checks before the domains let through, each failing now on the domain check alone
(or, for tile skipping with Tq ≠ Tk, on the tile count alone), with the simplest input that shows it named
first; and the reference's bottom-right alignment against SDPA's `causal_lower_right`, derived here from a mask.
"""

from __future__ import annotations

import importlib
import math
import warnings

import pytest
import torch
import torch.nn.functional as F

from graders.engine import Mistake, mistake_source
from graders.registry import find_lesson
from harness import check_one, explain, reference, with_code

pytestmark = pytest.mark.lesson09
L09 = find_lesson("lesson09")
DOMAIN = "over its declared domain (drawn examples, the simplest failure shown)"


def _edited(exercise: str, edits: dict) -> str:
    return mistake_source(Mistake(exercise, "fixture", "-", edits=edits), "lesson09")


def _failed(code: str, exercise: str, tmp_path):
    ex = check_one(L09, with_code(L09, exercise, code, tmp_path), exercise)
    assert ex.status == "failed", explain(ex)
    return ex, [c for c in ex.checks if c.status == "failed"]


def _only_the_domain_fails(code: str, exercise: str, tmp_path, simplest: str):
    ex, failed = _failed(code, exercise, tmp_path)
    assert [c.name for c in failed] == [DOMAIN], explain(ex)
    msg = failed[0].message  # "fails for X: why" or "fails for X (n of m drawn examples fail): why"
    assert msg.startswith((f"fails for {simplest}: ", f"fails for {simplest} (")), msg
    return ex, failed[0]


# ----------------------------------------------------------------------------------------------
# Escapes of the old checks, caught by the domains


def test_flops_formula_without_the_clamp_fails_for_fewer_keys_than_queries(tmp_path):
    # Tq·(2·Tk − Tq) is right for Tq ≤ Tk only: for Tq > Tk the earlier queries see no key, which the max(…, 0)
    # says; every old check had Tq = Tk when causal
    code = _edited("attention_flops", {"unqueried = max(t_k - t_q, 0)": "unqueried = t_k - t_q"})
    _, check = _only_the_domain_fails(code, "attention_flops", tmp_path, "t_k=1")
    want = 4 * 2 * 3 * 8 * int(_lower_right(5, 1).sum()) - 2 * 2 * 3 * 8 * 1  # the area, from the mask
    assert f"attention_flops(2, 3, 5, 1, 8, causal=True): expected {want:,}," in check.message, check.message


def test_flops_halved_for_any_shape_fails_for_the_default_shape_and_is_named(tmp_path):
    module = importlib.import_module(L09.module)
    mistake = next(m for m in module.MISTAKES if m.id == "causal_always_half")
    ex, check = _only_the_domain_fails(mistake_source(mistake), "attention_flops", tmp_path, "the default arguments")
    assert "attention_flops(2, 3, 5, 12, 8, causal=True): expected" in check.message, check.message
    assert ex.diagnosis == mistake.message, explain(ex)


def test_kv_cache_element_sizes_from_a_table_fail_for_float64(tmp_path):
    code = _edited("kv_cache_bytes", {
        "element = torch.empty((), dtype=dtype).element_size()":
            "element = {torch.float32: 4, torch.float16: 2, torch.bfloat16: 2}.get(dtype, 1)  # float8: 1"})
    _only_the_domain_fails(code, "kv_cache_bytes", tmp_path, "dtype=float64")


FAF_GLOBAL_STATE = '''
_SAVED = []  # what the backward needs, kept here rather than on ctx


class FlashAttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        out, lse = flash_attention(q, k, v, causal=causal)
        _SAVED.append((q, k, v, out, lse, causal))
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse, causal = _SAVED.pop()
        Tq, Tk, D = q.shape[-2], k.shape[-2], q.shape[-1]
        scale = 1.0 / math.sqrt(D)
        do = grad_out.float()
        delta = (do * out.float()).sum(dim=-1, keepdim=True)
        lse_safe = lse.masked_fill(lse == float("-inf"), 0.0)
        dq, dk, dv = torch.zeros(q.shape), torch.zeros(k.shape), torch.zeros(v.shape)
        for ks in range(0, Tk, 64):
            kt, vt = k[:, :, ks:ks + 64].float(), v[:, :, ks:ks + 64].float()
            for qs in range(0, Tq, 64):
                qt = q[:, :, qs:qs + 64].float()
                s = (qt @ kt.transpose(-2, -1)) * scale
                if causal:
                    rows = torch.arange(qs, qs + qt.shape[2])[:, None] + Tk - Tq
                    s = s.masked_fill(rows < torch.arange(ks, ks + kt.shape[2]), float("-inf"))
                p = torch.exp(s - lse_safe[:, :, qs:qs + 64, None])
                dv[:, :, ks:ks + 64] += p.transpose(-2, -1) @ do[:, :, qs:qs + 64]
                ds = p * (do[:, :, qs:qs + 64] @ vt.transpose(-2, -1) - delta[:, :, qs:qs + 64])
                dq[:, :, qs:qs + 64] += (ds @ kt) * scale
                dk[:, :, ks:ks + 64] += (ds.transpose(-2, -1) @ qt) * scale
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None
'''


def test_function_keeping_its_tensors_in_a_global_fails_with_two_calls_in_flight(tmp_path):
    _only_the_domain_fails(FAF_GLOBAL_STATE, "FlashAttentionFunction", tmp_path, "ctx=two calls in flight")


def test_function_without_a_default_for_causal_fails_when_it_is_left_out(tmp_path):
    code = _edited("FlashAttentionFunction", {"causal: bool = False) -> torch.Tensor:": "causal: bool) -> torch.Tensor:"})
    _only_the_domain_fails(code, "FlashAttentionFunction", tmp_path, "args, kwargs=causal left out")


TRITON_Q_CONTIGUITY_ONLY = '''
@triton.jit
def _attn(Q, K, V, O, T, sqb, sqh, sqt, skb, skh, skt, svb, svh, svt, qk_scale, H,
          CAUSAL: tl.constexpr, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    i = tl.program_id(0)
    b = tl.program_id(1) // H
    h = tl.program_id(1) % H
    r = i * BM + tl.arange(0, BM)
    d = tl.arange(0, D)
    q = tl.load(Q + b * sqb + h * sqh + r[:, None] * sqt + d[None, :], mask=r[:, None] < T, other=0.0)
    m = tl.zeros([BM], tl.float32) - float("inf")
    l = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, D], tl.float32)
    for start in range(0, T, BN):
        c = start + tl.arange(0, BN)
        k = tl.load(K + b * skb + h * skh + c[:, None] * skt + d[None, :], mask=c[:, None] < T, other=0.0)
        v = tl.load(V + b * svb + h * svh + c[:, None] * svt + d[None, :], mask=c[:, None] < T, other=0.0)
        s = tl.dot(q, tl.trans(k)) * qk_scale
        ok = c[None, :] < T
        if CAUSAL:
            ok = ok & (c[None, :] <= r[:, None])
        s = tl.where(ok, s, float("-inf"))
        m_new = tl.maximum(m, tl.max(s, 1))
        p = tl.exp2(s - m_new[:, None])
        alpha = tl.exp2(m - m_new)
        l = l * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m = m_new
    o = O + (b * H + h) * T * D
    tl.store(o + r[:, None] * D + d[None, :], (acc / l[:, None]).to(O.dtype.element_ty), mask=r[:, None] < T)


def flash_attention_triton(q, k, v, causal=False):
    B, H, T, D = q.shape
    if D not in (16, 32, 64, 128):
        raise ValueError(f"unsupported head size D={D}")
    if not q.is_contiguous():  # the kernel steps along D with stride 1 (k and v assumed laid out as q)
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
    o = torch.empty(B, H, T, D, dtype=q.dtype, device=q.device)
    _attn[(triton.cdiv(T, 32), B * H)](q, k, v, o, T, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
                                       1.4426950408889634 / D ** 0.5, H, CAUSAL=causal, D=D, BM=32, BN=16)
    return o
'''


def test_launcher_that_checks_only_q_for_contiguity_fails_for_k_transposed_alone(tmp_path):
    # the battery lays out q, k and v alike, so `if not q.is_contiguous()` passed it
    _only_the_domain_fails(TRITON_Q_CONTIGUITY_ONLY, "flash_attention_triton", tmp_path, "layout of k=transposed")


def test_tiles_skipped_only_when_tq_equals_tk_fail_the_tile_count(tmp_path):
    # right outputs, but every key tile scored when Tq ≠ Tk (the old tile count had Tq = Tk only)
    code = _edited("flash_attention", {"k_stop = max(0, min(Tk, qe + shift)) if causal else Tk":
                                       "k_stop = max(0, min(Tk, qe + shift)) if causal and Tq == Tk else Tk"})
    ex, failed = _failed(code, "flash_attention", tmp_path)
    assert [c.name for c in failed] == [
        "causal mode skips tiles wholly above the diagonal (Tq = Tk, and bottom-right for Tq ≠ Tk)"], explain(ex)
    assert "Tq=64, Tk=128" in failed[0].message and "Skip key tiles" in failed[0].message, failed[0].message


def test_top_left_alignment_is_named(tmp_path):
    module = importlib.import_module(L09.module)
    for mid in ("causal_top_left", "backward_top_left"):
        mistake = next(m for m in module.MISTAKES if m.id == mid)
        ex, failed = _failed(mistake_source(mistake), mistake.exercise, tmp_path)
        assert ex.diagnosis == mistake.message, explain(ex)
        assert any("Tq ≠ Tk" in c.name or c.name == DOMAIN for c in failed), explain(ex)


# ----------------------------------------------------------------------------------------------
# The reference, bottom-right aligned, against SDPA and a mask built here


def _lower_right(tq, tk):
    return torch.ones(tq, tk, dtype=torch.bool).tril(diagonal=tk - tq)


@pytest.mark.parametrize("tq, tk", [(20, 50), (1, 37), (50, 20), (33, 33)])
def test_reference_flash_attention_is_bottom_right(tq, tk):
    ns, _ = reference(L09)
    gen = torch.Generator().manual_seed(tq * 100 + tk)
    q, k, v = (torch.randn(2, 3, t, 16, generator=gen) for t in (tq, tk, tk))
    mask = _lower_right(tq, tk)
    out, lse = ns["flash_attention"](q, k, v, causal=True, block_q=16, block_k=8)
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).nan_to_num(0.0)  # rows that see nothing: 0
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-4)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(16)
    torch.testing.assert_close(lse, torch.logsumexp(scores.masked_fill(~mask, float("-inf")), dim=-1))
    blind = ~mask.any(dim=-1)  # the first Tq − Tk queries when Tq > Tk
    assert int(blind.sum()) == max(tq - tk, 0)
    assert (out[:, :, blind] == 0).all() and (lse[:, :, blind] == float("-inf")).all()
    if tq <= tk:  # SDPA's own lower-right bias (its kernels give NaN for rows that see nothing)
        from torch.nn.attention.bias import causal_lower_right
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.testing.assert_close(out, F.scaled_dot_product_attention(
                q, k, v, attn_mask=causal_lower_right(tq, tk)), atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("tq, tk", [(75, 140), (140, 75)])
def test_reference_function_gradients_are_bottom_right(tq, tk):
    ns, _ = reference(L09)
    gen = torch.Generator().manual_seed(tq + tk)
    q, k, v = (torch.randn(1, 2, t, 16, generator=gen).requires_grad_(True) for t in (tq, tk, tk))
    w = torch.randn(1, 2, tq, 16, generator=gen)
    (ns["FlashAttentionFunction"].apply(q, k, v, True) * w).sum().backward()
    q2, k2, v2 = (t.detach().clone().requires_grad_(True) for t in (q, k, v))
    out = F.scaled_dot_product_attention(q2, k2, v2, attn_mask=_lower_right(tq, tk)).nan_to_num(0.0)
    (out * w).sum().backward()
    for mine, want in zip((q.grad, k.grad, v.grad), (q2.grad, k2.grad, v2.grad)):
        assert torch.isfinite(mine).all()
        torch.testing.assert_close(mine, want.nan_to_num(0.0), atol=1e-4, rtol=1e-3)


@pytest.mark.parametrize("tq, tk", [(5, 12), (12, 12), (20, 12), (1, 4096), (4096, 1)])
def test_reference_causal_flops_are_the_area_under_the_bottom_right_diagonal(tq, tk):
    # the pairs a bottom-right mask keeps, counted from the mask, less half its diagonal (the area convention:
    # for Tq = Tk exactly half of Tq·Tk)
    ns, _ = reference(L09)
    b, h, d = 2, 3, 8
    pairs = int(_lower_right(tq, tk).sum())
    want = 4 * b * h * d * pairs - 2 * b * h * d * min(tq, tk)
    got = ns["attention_flops"](b, h, tq, tk, d, causal=True)
    assert isinstance(got, int) and got == want
    if tq == tk:
        assert got == ns["attention_flops"](b, h, tq, tk, d) // 2


def test_a_domain_failure_prints_in_at_most_20_lines_at_80_columns(tmp_path):
    import io

    from rich.console import Console

    from course_cli import render
    from graders.engine.results import LessonResult

    code = _edited("kv_cache_bytes", {
        "element = torch.empty((), dtype=dtype).element_size()": "element = torch.finfo(dtype).bits // 8"})
    ex, _ = _only_the_domain_fails(code, "kv_cache_bytes", tmp_path, "dtype=int8")  # finfo takes no int dtype
    buf = io.StringIO()
    render.render_result(Console(file=buf, width=80, no_color=True, highlight=False, soft_wrap=False),
                         LessonResult("lesson09", "x.ipynb", [ex]), L09.title)
    out = buf.getvalue()
    assert "dtype=int8" in out
    assert out.count("\n") <= 20 and max(len(line.rstrip()) for line in out.splitlines()) <= 80, out


@pytest.mark.parametrize("tq, tk", [(20, 50), (7, 7), (1, 9), (16, 33)])
def test_sdpa_causal_is_sdpa_with_causal_lower_right(tq, tk):
    """The grader's sdpa_causal builds the bottom-right mask itself (importing torch.nn.attention.bias costs a
    cold check 1.5-3 s): it gives what SDPA gives with causal_lower_right."""
    from torch.nn.attention.bias import causal_lower_right

    from graders.lesson09_flash import sdpa_causal

    gen = torch.Generator().manual_seed(tq * 100 + tk)
    q, k, v = (torch.randn(2, 3, t, 16, generator=gen) for t in (tq, tk, tk))
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=causal_lower_right(tq, tk))
    torch.testing.assert_close(sdpa_causal(q, k, v), want, atol=1e-6, rtol=1e-5)
