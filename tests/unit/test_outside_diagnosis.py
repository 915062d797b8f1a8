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


# l09-lse-m0: a student starts online_logsumexp's running max at 0 (torch.zeros) instead of -inf. The engine's
# mutant that turns that -inf into 0 reproduces it (the same edit), but its sentence spoke of a mask: "the removed
# entries of `m` are set to 0, not -inf: 0 is an ordinary score, so they still get weight". Nothing is removed
# and nothing is weighted there: -inf is where the running max starts. A -inf given to torch.full is now said as
# a start; a -inf a mask fills in keeps its sentence.
LSE_STUDENT = ('m = torch.full(x.shape[:-1], float("-inf"), dtype=x.dtype, device=x.device)',
               "m = torch.zeros(x.shape[:-1], dtype=x.dtype, device=x.device)")


def _lse(src: str):
    ns = {"torch": torch}
    exec(compile(src, "<lse>", "exec"), ns)
    return ns["online_logsumexp"]


def test_a_running_max_that_starts_at_zero_is_said_as_a_start_not_as_masked_entries():
    ref = solved_cell("lesson09", "online_logsumexp")
    student = ref.replace(*LSE_STUDENT)
    zero = [m for m in mutants(ref, "online_logsumexp") if m.operator == "neginf-zero"
            and "torch.full(x.shape[:-1], 0.0" in m.source]
    assert len(zero) == 1
    x = torch.randn(3, 10) - 2000.0  # every score far below 0: a max that starts at 0 is never replaced
    assert torch.equal(_lse(zero[0].source)(x, 4), _lse(student)(x, 4))
    assert not torch.allclose(_lse(student)(x, 4), torch.logsumexp(x, -1))
    assert "removed entries" not in zero[0].sentence and "weight" not in zero[0].sentence
    assert zero[0].sentence.startswith("`m` starts at 0, not -inf")
    # the same -inf tested for (a row that has seen nothing yet) is said as a test, not as removed entries
    test = [m for m in mutants(ref, "online_logsumexp") if m.operator == "neginf-zero"
            and m.source != zero[0].source]
    assert test and all("removed entries" not in m.sentence and "tests for 0" in m.sentence for m in test)


def test_a_minus_inf_that_a_mask_fills_in_keeps_its_sentence():
    ref = solved_cell("lesson01", "scaled_dot_product_attention")
    zero = [m for m in mutants(ref, "scaled_dot_product_attention") if m.operator == "neginf-zero"]
    assert zero and all("removed entries" in m.sentence for m in zero)


# l08-gen-no-crop: a student feeds generate's whole context to the model (`model(out)`) instead of its last
# block_size tokens (`model(out[:, -block_size:])`). The engine's mutant that moves the slice's start one further
# out (`-block_size - 1`) reproduces every observation: the model rejects a context past block_size at the first
# step where it is block_size + 1 long, with or without the extra entries before. Its sentence said "a slice ... is
# off by one at its start": an amount the observations cannot show. The sentence now says the direction, "or
# further", which is true of the student's code.
CROP = '''
def generate(model, out: torch.Tensor, block_size: int) -> torch.Tensor:
    for _ in range(3):
        logits = model(out[:, -block_size:])
        out = torch.cat([out, logits.argmax(-1, keepdim=True)], dim=1)
    return out
'''


def _generate(src: str):
    ns = {"torch": torch}
    exec(compile(src, "<crop>", "exec"), ns)
    return ns["generate"]


def _model(ctx: torch.Tensor) -> torch.Tensor:
    if ctx.shape[1] > 4:
        raise ValueError(f"the sequence reaches position {ctx.shape[1]}, past block_size=4")
    return ctx.float().sum(1, keepdim=True).expand(-1, 5)


def _outcome(fn, x):
    try:
        return fn(_model, x, 4)
    except ValueError as exc:
        return str(exc)


def test_a_slice_bound_one_further_out_is_said_as_a_direction_not_an_amount():
    student = CROP.replace("model(out[:, -block_size:])", "model(out)")
    (further,) = [m for m in mutants(CROP, "generate", cap=100) if m.operator == "slice-off-by-one"
                  and "-block_size - 1" in m.source]
    x = torch.tensor([[1, 2, 3]])
    # the premise of the finding: one entry further out and no crop at all fail the same way on this input
    assert _outcome(_generate(student), x) == _outcome(_generate(further.source), x)
    assert isinstance(_outcome(_generate(student), x), str)
    assert not isinstance(_outcome(_generate(CROP), x), str)
    # so the sentence claims the direction only, which holds for the student's code too
    assert "off by one" not in further.sentence
    assert "starts too early (-block_size - 1, or further): it keeps entries before -block_size" in further.sentence
    for m in mutants(CROP, "generate", cap=100):
        if m.operator == "slice-off-by-one":
            assert "or further" in m.sentence
