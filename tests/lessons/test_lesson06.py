"""Lesson 06 beyond the generic tests: correct alternatives are accepted (complex-number RoPE, cos/sin
caches, nn.Embedding, other formulas), some wrong answers get the message that helps, and the
half-precision RoPE judge (GPU-only, so skipped here) is exercised on CPU-made observations."""

from __future__ import annotations

import pytest
import torch

from graders.engine import Config, JudgeContext
from graders.registry import find_lesson
from harness import check_in_process, check_one, explain, with_code

LESSON = find_lesson("lesson06")
DOMAIN = "over its declared domain (drawn examples, the simplest failure shown)"
pytestmark = pytest.mark.lesson06


ALTERNATIVES = {
    "sinusoidal_table": '''
def sinusoidal_table(max_len, d_model, base=10000.0):
    if d_model % 2 != 0:
        raise ValueError("d_model must be even")
    position = torch.arange(0, max_len).unsqueeze(1).double()
    div_term = torch.exp(torch.arange(0, d_model, 2).double() * -(math.log(base) / d_model))
    pe = torch.zeros(max_len, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(position * div_term)
    pe[:, 1::2] = torch.cos(position * div_term)
    return pe  # float64 is accepted too
''',
    "LearnedPositionalEmbedding": '''
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.max_len = max_len
        self.emb = nn.Embedding(max_len, d_model)
        nn.init.normal_(self.emb.weight, std=0.02)

    def forward(self, x, offset=0):
        T = x.size(-2)
        if offset + T > self.max_len:
            raise ValueError(f"sequence of {T} at offset {offset} exceeds max_len {self.max_len}")
        pos = torch.arange(offset, offset + T, device=x.device)
        return x + self.emb(pos).to(x.dtype)
''',
    # Meta's Llama style: pairs as complex numbers, rotation as multiplication by e^{i p theta}
    "apply_rope": '''
def apply_rope(x, positions, base=10000.0):
    D = x.shape[-1]
    freqs = 1.0 / (base ** (torch.arange(0, D, 2, device=x.device)[: D // 2].float() / D))
    angles = torch.einsum("...t,f->...tf", positions.to(x.device).float(), freqs)
    rot = torch.polar(torch.ones_like(angles), angles)
    xc = torch.view_as_complex(x.float().contiguous().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(xc * rot).flatten(-2).type_as(x)
''',
    # Hugging Face style: a cos/sin cache indexed by the positions, and rotate_half
    "apply_rope_half": '''
def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)

def apply_rope_half(x, positions, base=10000.0):
    D = x.shape[-1]
    inv_freq = 1.0 / (base ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
    t = torch.arange(int(positions.max()) + 1, dtype=torch.float32)
    freqs = torch.outer(t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos_cache, sin_cache = emb.cos().to(x.device), emb.sin().to(x.device)
    cos, sin = cos_cache[positions], sin_cache[positions]
    return (x * cos.to(x.dtype)) + (rotate_half(x) * sin.to(x.dtype))
''',
    "rope_inv_freq": '''
def rope_inv_freq(dim, base=10000.0, scale=1.0, method="none"):
    if scale < 1:
        raise ValueError(f"scale={scale} < 1")
    if method == "none":
        return 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
    if method == "linear":
        return 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim)) / scale
    if method == "ntk":
        new_base = base * scale ** (dim / (dim - 2))
        return 1.0 / (new_base ** (torch.arange(0, dim, 2).float() / dim))
    raise ValueError(f"unknown method {method}")
''',
    "alibi_slopes": '''
def alibi_slopes(num_heads):
    def get(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start ** i for i in range(n)]
    if math.log2(num_heads).is_integer():
        return torch.tensor(get(num_heads))
    closest = 2 ** math.floor(math.log2(num_heads))
    return torch.tensor(get(closest) + get(2 * closest)[0::2][: num_heads - closest])
''',
    "alibi_bias": '''
def alibi_bias(num_heads, t_q, t_k):
    q_pos = torch.arange(t_k - t_q, t_k)
    k_pos = torch.arange(t_k)
    dist = (k_pos[None, :] - q_pos[:, None]).abs()
    return torch.einsum("h,qk->hqk", alibi_slopes(num_heads), -dist.float())
''',
}


def _notebook(codes: dict[str, str], tmp_path, name: str):
    path = None
    for exercise, code in codes.items():
        path = with_code(LESSON, exercise, code, tmp_path, name, base=path)
    return path


def test_correct_alternatives_are_accepted(tmp_path):
    path = _notebook(ALTERNATIVES, tmp_path, "alternatives.ipynb")
    result = check_in_process(LESSON, path)
    for ex in result.exercises:
        assert ex.status == "passed", explain(ex)


WRONG = {
    # arange instead of positions, even though every checked position would be right for arange + offset 0
    "apply_rope": '''
def apply_rope(x, positions, base=10000.0):
    T, D = x.shape[-2:]
    inv_freq = base ** (-torch.arange(0, D, 2).float() / D)
    angles = (positions[..., :1].float() + torch.arange(T).float())[..., None] * inv_freq
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()), -1).flatten(-2)
''',
    # slicing past the end of the table instead of raising
    "LearnedPositionalEmbedding": '''
class LearnedPositionalEmbedding(nn.Module):
    def __init__(self, max_len, d_model):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(max_len, d_model) * 0.02)

    def forward(self, x, offset=0):
        return x + self.weight[offset:offset + x.shape[-2]]
''',
    # "ntk" written as linear scaling
    "rope_inv_freq": '''
def rope_inv_freq(dim, base=10000.0, scale=1.0, method="none"):
    if method not in ("none", "linear", "ntk") or scale < 1:
        raise ValueError(f"bad method={method} or scale={scale}")
    inv_freq = base ** (-torch.arange(0, dim, 2).float() / dim)
    return inv_freq if method == "none" else inv_freq / scale
''',
}


def test_wrong_answers_get_useful_messages(tmp_path):
    path = _notebook(WRONG, tmp_path, "wrong.ipynb")
    result = check_in_process(LESSON, path, list(WRONG))
    by_id = {ex.id: ex for ex in result.exercises}

    rope = by_id["apply_rope"]
    assert rope.status == "failed", explain(rope)
    failed = {c.name for c in rope.checks if c.status == "failed"}
    assert "matches the reference at arbitrary, non-contiguous positions" in failed, explain(rope)
    assert "positions (T,) or (..., T): one row of positions per sequence" in failed, explain(rope)

    learned = by_id["LearnedPositionalEmbedding"]
    (past,) = [c for c in learned.checks if c.name.startswith("ValueError naming max_len")]
    assert past.status == "failed" and "should raise ValueError" in past.message, explain(learned)

    freq = by_id["rope_inv_freq"]
    (ends,) = [c for c in freq.checks if c.name.startswith('"ntk" keeps the highest')]
    assert ends.status == "failed" and "highest frequency" in ends.message, explain(freq)


# ----------------------------------------------------------------------------------------------
# The GPU judge, on observations made here in float16/bfloat16 (the same arithmetic a GPU runs)


def _solution():
    from graders.parts import import_lesson
    return import_lesson("lesson06")


def _rope_in_half(x, positions, base=10000.0):
    """A correct RoPE whose cos/sin are cast to x's dtype and multiplied there (Hugging Face's way)."""
    D = x.shape[-1]
    angles = positions.float()[..., None] * base ** (-torch.arange(0, D, 2).float() / D)
    cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * cos - b * sin, a * sin + b * cos), -1).flatten(-2)


def _angles_in_half(x, positions, base=10000.0):
    """Wrong in half precision: the positions and angles are rounded to x's dtype."""
    D = x.shape[-1]
    angles = positions.to(x.dtype)[..., None] * base ** (-torch.arange(0, D, 2, dtype=x.dtype) / D)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack((a * angles.cos() - b * angles.sin(), a * angles.sin() + b * angles.cos()), -1).flatten(-2)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_rope_judge(dtype):
    from graders.lesson06_positions import _rope_values

    sol = _solution()
    x = torch.randn(2, 3, 5, 16, generator=torch.Generator().manual_seed(0)).to(getattr(torch, dtype))
    positions = torch.tensor([7, 300, 19, 2900, 3])  # as the GPU probe uses
    reference = {"output": sol.apply_rope(x, positions), "float32 output": sol.apply_rope(x.float(), positions)}
    ctx = JudgeContext(Config("cuda", dtype))
    assert _rope_values({"output": sol.apply_rope(x, positions)}, reference, ctx) is None
    assert _rope_values({"output": _rope_in_half(x, positions)}, reference, ctx) is None
    msg = _rope_values({"output": _angles_in_half(x, positions)}, reference, ctx)
    assert msg and "float32" in msg and "tolerance" in msg, msg
    msg = _rope_values({"output": sol.apply_rope(x, positions).float()}, reference, ctx)
    assert msg and "dtype" in msg, msg


@pytest.mark.apply_rope
def test_a_rope_that_needs_contiguous_inputs_fails_only_the_layout_checks(tmp_path):
    """Meta's complex-number RoPE without .contiguous(): view_as_complex needs a last stride of 1 and even
    strides, so the input battery's transposed and row-strided inputs fail it, and so does the declared
    domain (which lays x out the same ways), at a layout of x; nothing else does."""
    code = ALTERNATIVES["apply_rope"].replace("x.float().contiguous().reshape", "x.float().reshape")
    ex = check_one(LESSON, with_code(LESSON, "apply_rope", code, tmp_path), "apply_rope")
    failed = {c.name: c for c in ex.checks if c.status not in ("passed", "skipped")}
    assert ex.status == "failed", explain(ex)
    battery = {"transposed (non-contiguous) inputs", "row-strided inputs (views of wider rows)"}
    assert set(failed) == battery | {DOMAIN}, explain(ex)
    assert all("it raised RuntimeError" in failed[n].message and "same values" in failed[n].message
               for n in battery), explain(ex)
    assert failed[DOMAIN].message.startswith("fails for layout of x="), explain(ex)
