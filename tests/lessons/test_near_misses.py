"""Structural and catalogued diagnoses against near misses (issue 28, item 3): realistic wrong code that
resembles a named pattern without being it must not be given that name. Each near miss is written as the
student would (an edit of the solved cell), graded as a notebook in process, and must fail (it is wrong)
without the wrong name: a tile named outside a tiled exercise or off a block boundary, `positions` said
ignored when they were shifted, the mean and std said constant when the arithmetic is float32."""

from __future__ import annotations

import importlib

import pytest
import torch

from graders.engine import Mistake, mistake_source
from graders.engine.diagnosis import explain
from graders.registry import find_lesson
from harness import check_one, explain as explain_result, with_code


def _edited(lesson_id: str, exercise: str, edits: dict) -> str:
    return mistake_source(Mistake(exercise, "near_miss", "-", edits=edits), lesson_id)


def _message(lesson_id: str, mistake_id: str) -> str:
    module = importlib.import_module(find_lesson(lesson_id).module)
    return next(m.message for m in module.MISTAKES if m.id == mistake_id)


def _graded(lesson_id, exercise, edits, tmp_path):
    lesson = find_lesson(lesson_id)
    ex = check_one(lesson, with_code(lesson, exercise, _edited(lesson_id, exercise, edits), tmp_path), exercise)
    assert ex.status in ("failed", "error"), explain_result(ex)  # a near miss is still wrong
    return ex


# ----------------------------------------------------------------------------------------------
# The tile boundary, as a unit: named only in a tiled exercise, at a multiple of a block the call used


def _slab_case():
    e = torch.randn(2, 12, 4, dtype=torch.float64)
    a = e.clone()
    a[:, 8:] += 1.0  # right up to row 7, wrong from row 8 on
    return a, e


def test_tile_named_at_a_multiple_of_the_block():
    a, e = _slab_case()
    assert "tile" in explain(a, e, blocks=(8,))
    assert "tile" in explain(a, e, blocks=(4,))


@pytest.mark.parametrize("blocks", [(), (5,), (3, 16), (1,)], ids=["untiled", "5", "3-and-16", "1"])
def test_tile_not_named_off_the_block_or_outside_a_tiled_exercise(blocks):
    a, e = _slab_case()
    msg = explain(a, e, blocks=blocks)
    assert "matches the reference up to index 7 along axis -2" in msg  # the fact is still said
    assert "tile" not in msg and "block" not in msg


# ----------------------------------------------------------------------------------------------
# Near misses graded as notebooks

ROPE_ACROSS_HEADS = {  # lesson 10: RoPE on (B, T, D) before the split, so across every head at once
    "q = L03.split_heads(self.q_proj(x), self.num_heads)  # (B, H, T, Dh)":
        "q = L03.split_heads(L06.apply_rope_half(self.q_proj(x), positions, self.rope_base), self.num_heads)",
    "k = L03.split_heads(self.k_proj(x), self.num_kv_heads)  # (B, Hkv, T, Dh)":
        "k = L03.split_heads(L06.apply_rope_half(self.k_proj(x), positions, self.rope_base), self.num_kv_heads)",
    "q, k = (L06.apply_rope_half(t, positions, self.rope_base) for t in (q, k))  # v is not rotated": "pass",
}

FLASH_Q_SCALED_IN_PLACE = {  # lesson 09: q scaled in place inside the key loop (once per key tile)
    "q_tile = qf[:, qs:qe] * scale  # (BH, bq, D)": "q_tile = qf[:, qs:qe]",
    "s = torch.bmm(q_tile, kf[:, ks:ke].transpose(1, 2))": "s = torch.bmm(q_tile.mul_(scale), kf[:, ks:ke].transpose(1, 2))",
}

SPLIT_HEADS_STRIDES = {  # lesson 03: heads read with the wrong strides (a view in the wrong order)
    "return x.view(B, T, num_heads, D // num_heads).transpose(1, 2)  # (B, H, T, Dh)":
        "return x.view(B, num_heads, T, D // num_heads)  # (B, H, T, Dh)",
}


@pytest.mark.parametrize("lesson_id, exercise, edits", [
    pytest.param("lesson10", "LlamaAttention", ROPE_ACROSS_HEADS, id="rope-across-heads", marks=pytest.mark.lesson10),
    pytest.param("lesson09", "flash_attention", FLASH_Q_SCALED_IN_PLACE, id="flash-q-in-place",
                 marks=pytest.mark.lesson09),
    pytest.param("lesson03", "split_heads", SPLIT_HEADS_STRIDES, id="split-heads-strides", marks=pytest.mark.lesson03),
])
def test_no_tile_named_on_code_that_is_not_a_tiling_bug(lesson_id, exercise, edits, tmp_path):
    ex = _graded(lesson_id, exercise, edits, tmp_path)
    assert "tile" not in (ex.diagnosis or "") and "first block" not in (ex.diagnosis or ""), explain_result(ex)


@pytest.mark.lesson06
def test_positions_shifted_to_start_at_zero_are_not_called_ignored(tmp_path):
    ex = _graded("lesson06", "apply_rope", {
        "angles = positions.to(x.device, torch.float32)[..., None] * inv_freq":
            "angles = (positions - positions[..., :1]).to(x.device, torch.float32)[..., None] * inv_freq"}, tmp_path)
    assert ex.diagnosis != _message("lesson06", "rope_positions_ignored"), explain_result(ex)


@pytest.mark.lesson06
def test_positions_ignored_is_still_named_when_they_are(tmp_path):
    """The near miss's twin: positions really replaced by arange(T) is the catalogued mistake."""
    ex = _graded("lesson06", "apply_rope", {
        "angles = positions.to(x.device, torch.float32)[..., None] * inv_freq":
            "angles = torch.arange(x.shape[-2], device=x.device, dtype=torch.float32)[:, None] * inv_freq"}, tmp_path)
    assert ex.diagnosis == _message("lesson06", "rope_positions_ignored"), explain_result(ex)


@pytest.mark.lesson04
def test_layernorm_in_float32_inside_is_not_called_constant_stats(tmp_path):
    ex = _graded("lesson04", "layer_norm_manual", {
        "mean = x.mean(dim=-1, keepdim=True)  # (..., 1)": "x = x.float()\n        mean = x.mean(dim=-1, keepdim=True)",
        "ctx.save_for_backward(x_hat, weight, rstd)": "ctx.save_for_backward(x_hat, weight.float(), rstd)",
        "return x_hat * weight + bias\n": "return (x_hat * weight + bias).to(weight.dtype)\n",
    }, tmp_path)
    assert ex.diagnosis != _message("lesson04", "constant_stats"), explain_result(ex)
