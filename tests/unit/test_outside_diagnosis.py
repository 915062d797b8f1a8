"""Wrong causes the outside measure found (benchmarks/outside_measure.py, issue 44), each planted here.

l03-csa-kqv: a student unpacks the fused projection as `k, q, v = self.qkv_proj(x).chunk(3, dim=-1)` and calls
SDPA as written, `F.scaled_dot_product_attention(q, k, v, ...)`. The engine's mutant that swaps SDPA's first two
arguments reproduces every observation, and its sentence said "the first two arguments of
`scaled_dot_product_attention` in `out` are in the wrong order": a claim about a call the student wrote right.
What the reproduction shows is that q and k reach the call swapped; the sentence now says that, and that the swap
may be where they are made.
"""

from __future__ import annotations

import torch

from graders.engine import solved_cell
from graders.engine.mutations import mutants

STUDENT = ("q, k, v = self.qkv_proj(x).chunk(3, dim=-1)", "k, q, v = self.qkv_proj(x).chunk(3, dim=-1)")


def _module(src: str):
    ns = {"torch": torch, "nn": torch.nn, "F": torch.nn.functional, "math": __import__("math")}
    exec(compile(solved_cell("lesson03", "split_heads"), "<split>", "exec"), ns)
    exec(compile(src, "<csa>", "exec"), ns)
    torch.manual_seed(0)
    return ns["CausalSelfAttention"](8, 2).eval()


def test_swapped_call_arguments_reproduce_a_swap_made_upstream_and_the_sentence_allows_it():
    ref = solved_cell("lesson03", "CausalSelfAttention")
    student = ref.replace(*STUDENT)
    swap = [m for m in mutants(ref, "CausalSelfAttention") if m.operator == "arguments-swapped"
            and "scaled_dot_product_attention" in m.sentence]
    assert swap, [m.operator for m in mutants(ref, "CausalSelfAttention")]
    x = torch.randn(2, 5, 8)
    got = _module(student)(x)
    # the premise of the finding: the mutant at the call and the student's unpacking give the same outputs
    assert torch.allclose(_module(swap[0].source)(x), got, atol=1e-6)
    assert not torch.allclose(_module(ref)(x), got, atol=1e-3)
    # the student's call is the reference's, so the sentence must not say that the call is where it went wrong
    assert "F.scaled_dot_product_attention(q, k, v" in student
    assert "are in the wrong order" not in swap[0].sentence
    assert "q and k swapped" in swap[0].sentence and "where they are made" in swap[0].sentence
