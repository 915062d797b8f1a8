"""lesson09 beyond the generic tests: correct alternatives pass (per-head loops, einsum, other block
sizes, exp2 in the kernel); full score matrices, unskipped causal tiles and kernels that leave the work
to torch are rejected by the recorders, with messages that say so."""

from __future__ import annotations

import pytest

from course_cli.sandboxed.grading import grade_notebook
from graders.registry import find_lesson
from harness import explain, with_code

pytestmark = pytest.mark.lesson09
L09 = find_lesson("lesson09")

LSE_SPLIT = '''
def online_logsumexp(x, block):
    m = x.new_full(x.shape[:-1], float("-inf"))
    s = x.new_zeros(x.shape[:-1])
    for xb in x.split(block, dim=-1):
        m_new = torch.maximum(m, xb.max(dim=-1).values)
        shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)  # all -inf so far: no NaN
        s = s * (m - shift).exp() + (xb - shift[..., None]).exp().sum(-1)
        m = m_new
    return m + s.log()
'''

FLASH_PER_HEAD = '''
def flash_attention(q, k, v, causal=False, block_q=64, block_k=64):
    B, H, Tq, D = q.shape
    Tk = k.shape[2]
    out = torch.empty_like(q)
    lse = torch.empty(B, H, Tq)
    for b in range(B):
        for h in range(H):
            for qs in range(0, Tq, block_q):
                qt = q[b, h, qs:qs + block_q].float()                  # (bq, D), float32 arithmetic
                rows = torch.arange(qs, qs + qt.shape[0]) + Tk - Tq    # bottom-right: the last key each row sees
                m = torch.full((qt.shape[0],), float("-inf"))
                l = torch.zeros(qt.shape[0])
                acc = torch.zeros(qt.shape[0], D)
                for ks in range(0, Tk, block_k):
                    if causal and ks > rows[-1]:
                        break                                          # (also when no row sees a key)
                    kt, vt = k[b, h, ks:ks + block_k].float(), v[b, h, ks:ks + block_k].float()
                    s = torch.einsum("qd,kd->qk", qt, kt) / D ** 0.5
                    if causal:
                        cols = torch.arange(ks, ks + kt.shape[0])
                        s = torch.where(cols[None, :] <= rows[:, None], s, float("-inf"))
                    m_new = torch.maximum(m, s.max(-1).values)
                    shift = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)  # rows seeing nothing
                    p = (s - shift[:, None]).exp()
                    alpha = (m - shift).exp()
                    l = alpha * l + p.sum(-1)
                    acc = alpha[:, None] * acc + torch.einsum("qk,kd->qd", p, vt)
                    m = m_new
                out[b, h, qs:qs + block_q] = torch.where(l[:, None] > 0, acc / l[:, None], 0.0)
                lse[b, h, qs:qs + block_q] = m + l.log()
    return out, lse
'''

TRITON_EXP2 = '''
@triton.jit
def _attn(Q, K, V, O, T, sqb, sqh, sqt, skb, skh, skt, svb, svh, svt, sob, soh, sot, qk_scale, H,
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
    tl.store(O + b * sob + h * soh + r[:, None] * sot + d[None, :], (acc / l[:, None]).to(O.dtype.element_ty),
             mask=r[:, None] < T)


def flash_attention_triton(q, k, v, causal=False):
    B, H, T, D = q.shape
    if D not in (16, 32, 64, 128):
        raise ValueError(f"unsupported head size D={D}")
    q, k, v = q.contiguous(), k.contiguous(), v.contiguous()  # the kernel steps along D with stride 1
    o = torch.empty_like(q)
    _attn[(triton.cdiv(T, 32), B * H)](q, k, v, o, T, *q.stride()[:3], *k.stride()[:3], *v.stride()[:3],
                                       *o.stride()[:3], 1.4426950408889634 / D ** 0.5, H,
                                       CAUSAL=causal, D=D, BM=32, BN=16)
    return o
'''

FLOPS_SHIFT = '''
def attention_flops(b, h, t_q, t_k, d, causal=False):
    per_matmul = 2 * b * h * d
    if not causal:
        return 2 * per_matmul * t_q * t_k
    seen = min(t_q, t_k)  # the queries that see a key: the last min(Tq, Tk), bottom-right
    return per_matmul * seen * (2 * t_k - seen)
'''

KV_ITEMSIZE = '''
def kv_cache_bytes(n_layer, n_kv_heads, d_head, seq_len, batch=1, dtype=torch.float16):
    per_token = 2 * n_layer * n_kv_heads * d_head * dtype.itemsize
    return per_token * seq_len * batch
'''


def _notebook(tmp_path, codes: dict, name: str):
    path = None
    for exercise, code in codes.items():
        path = with_code(L09, exercise, code, tmp_path, name, base=path)
    return path


def test_correct_alternatives_are_accepted(tmp_path):
    codes = {"online_logsumexp": LSE_SPLIT, "flash_attention": FLASH_PER_HEAD,
             "flash_attention_triton": TRITON_EXP2, "attention_flops": FLOPS_SHIFT, "kv_cache_bytes": KV_ITEMSIZE}
    result = grade_notebook(L09, _notebook(tmp_path, codes, "alternatives.ipynb"), list(codes))
    for ex in result.exercises:
        assert ex.status == "passed", explain(ex)


FLASH_NO_SKIP = '''
def flash_attention(q, k, v, causal=False, block_q=64, block_k=64):
    B, H, Tq, D = q.shape
    Tk = k.shape[2]
    outs, lses = [], []
    for qs in range(0, Tq, block_q):
        qt = q[:, :, qs:qs + block_q] / math.sqrt(D)
        n = qt.shape[2]
        m, l = torch.full((B, H, n, 1), float("-inf")), torch.zeros(B, H, n, 1)
        acc = torch.zeros(B, H, n, D)
        for ks in range(0, Tk, block_k):                      # every key tile, masked when causal
            s = qt @ k[:, :, ks:ks + block_k].transpose(-2, -1)
            if causal:
                s = s.masked_fill(torch.arange(qs, qs + n)[:, None] < torch.arange(ks, ks + s.shape[-1]), float("-inf"))
            m_new = torch.maximum(m, s.amax(-1, keepdim=True))
            p, alpha = torch.exp(s - m_new), torch.exp(m - m_new)
            l = alpha * l + p.sum(-1, keepdim=True)
            acc = alpha * acc + p @ v[:, :, ks:ks + block_k]
            m = m_new
        outs.append(acc / l)
        lses.append((m + l.log()).squeeze(-1))
    return torch.cat(outs, 2), torch.cat(lses, 2)
'''

TRITON_TORCH_INSIDE = '''
@triton.jit
def _copy(X, Y, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(Y + offs, tl.load(X + offs, mask=offs < N), mask=offs < N)


def flash_attention_triton(q, k, v, causal=False):
    if q.shape[-1] not in (16, 32, 64, 128):
        raise ValueError("bad D")
    w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1)
    out, res = torch.empty_like(q), (w @ v).contiguous()
    _copy[(triton.cdiv(res.numel(), 256),)](res, out, res.numel(), BLOCK=256)
    return out
'''

FAF_AUTOGRAD_BACKWARD = '''
class FlashAttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal=False):
        out, lse = flash_attention(q, k, v, causal=causal)
        ctx.save_for_backward(q, k, v)
        ctx.causal = causal
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v = (t.detach().requires_grad_(True) for t in ctx.saved_tensors)
        with torch.enable_grad():
            s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])   # the full Tq x Tk scores again
            if ctx.causal:
                s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).tril(s.shape[-1] - s.shape[-2]).logical_not(), float("-inf"))
            out = torch.softmax(s, dim=-1) @ v
        return (*torch.autograd.grad(out, (q, k, v), grad_out), None)
'''


def _check(ex, name):
    """The (first config's) result of the check named name, or of the one check whose name starts with it
    (names say more as checks grow)."""
    found = [c for c in ex.checks if c.name == name] or [c for c in ex.checks if c.name.startswith(name)]
    assert found and len({c.name for c in found}) == 1, f"no one check named {name!r}: {[c.name for c in ex.checks]}"
    return found[0]


def test_full_matrices_and_torch_fallbacks_are_rejected(tmp_path):
    codes = {"flash_attention": FLASH_NO_SKIP, "flash_attention_triton": TRITON_TORCH_INSIDE,
             "FlashAttentionFunction": FAF_AUTOGRAD_BACKWARD}
    result = grade_notebook(L09, _notebook(tmp_path, codes, "rejected.ipynb"), list(codes))
    flash, kernel, faf = result.exercises

    assert flash.status == "failed", explain(flash)
    skipped = _check(flash, "causal mode skips tiles wholly above the diagonal")
    assert skipped.status == "failed" and "Skip key tiles" in skipped.message, explain(flash)
    assert _check(flash, "causal mode matches the reference").status == "passed", explain(flash)

    assert kernel.status == "failed", explain(kernel)
    ran = _check(kernel, "a Triton kernel really runs (no fallback to SDPA or matmuls)")
    assert ran.status == "failed" and "computes with torch" in ran.message, explain(kernel)

    assert faf.status == "failed", explain(faf)
    memory = _check(faf, "neither forward nor backward builds a Tq×Tk tensor")
    assert memory.status == "failed" and "score matrix" in memory.message, explain(faf)
    assert _check(faf, "output and gradients match SDPA's (Tq ≠ Tk, ragged)").status == "passed", explain(faf)


FLASH_VIA_LESSON01 = '''
from graders.parts import import_lesson


def flash_attention(q, k, v, causal=False, block_q=64, block_k=64):
    mask = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).tril() if causal else None
    out, _ = import_lesson("lesson01").scaled_dot_product_attention(q, k, v, mask=mask)
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(~mask, float("-inf"))
    return out, torch.logsumexp(s, dim=-1)
'''


def test_lesson01_attention_is_caught_by_the_memory_check(tmp_path):
    # lesson 09's child sees no solution its own solution does not import (lesson 01's is hidden), so
    # import_lesson("lesson01") there is the student's own lesson 01: a student who finished it
    import shutil

    from graders.registry import find_lesson

    l01 = find_lesson("lesson01")
    shutil.copy(l01.solution_path, tmp_path / l01.notebook)
    path = with_code(L09, "flash_attention", FLASH_VIA_LESSON01, tmp_path, "lesson01.ipynb")
    (ex,) = grade_notebook(L09, path, ["flash_attention"]).exercises
    assert ex.status == "failed", explain(ex)
    memory = _check(ex, "never builds a Tq×Tk tensor (the largest intermediate is a tile)")
    assert memory.status == "failed" and "100, 130)" in memory.message, explain(ex)
    assert _check(ex, "matches the reference (Tq ≠ Tk, ragged tiles, float32 ~1e-5)").status == "passed", explain(ex)
