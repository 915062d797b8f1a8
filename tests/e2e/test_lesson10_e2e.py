"""test_lesson10, end to end: the tests of tests/lessons/test_lesson10.py that start a child (the slow tier)."""

from __future__ import annotations

import pytest
import torch
from graders.parts import import_lesson
from graders.registry import find_lesson
from harness import explain, grade_one, with_code
pytestmark = pytest.mark.lesson10
from test_lesson10 import ATTENTION_ALTERNATIVE, FILTER_ALTERNATIVE, L10, ROLLING_ALTERNATIVE, _hf_pair, ref  # noqa: F401 (helpers and fixtures shared with the fast tests)


@pytest.mark.slow  # importing transformers takes seconds
@pytest.mark.load_llama_state_dict
@pytest.mark.parametrize("tie, kv, rope_theta", [(False, 2, 10000.0), (True, 1, 500000.0), (False, 6, 10000.0)],
                         ids=["untied-GQA", "tied-MQA-theta500k", "untied-MHA"])
def test_loader_matches_transformers_logits_in_float64(ref, tie, kv, rope_theta):
    hf, ours = _hf_pair(ref, tie, kv, rope_theta)
    ref.load_llama_state_dict(ours, hf.state_dict())
    idx = torch.randint(0, 89, (2, 40), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = hf(idx).logits
        got, _ = ours(idx)
    # both models round RMSNorm and RoPE's angles through float32 (as Llama does), the rest is float64
    assert got.dtype == want.dtype == torch.float64
    torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-6)
    # and a cached continuation equals transformers' full forward too
    cache = ref.L08.KVCache()
    with torch.no_grad():
        steps = [ours(idx[:, :30], cache=cache)[0]] + [ours(idx[:, t:t + 1], cache=cache)[0] for t in range(30, 40)]
    torch.testing.assert_close(torch.cat(steps, dim=1), want, atol=1e-6, rtol=1e-6)


@pytest.mark.slow
@pytest.mark.load_llama_state_dict
def test_loader_detects_the_interleaved_rope_with_hf_weights(ref):
    """With Hugging Face's weights, lesson 06's interleaved RoPE gives other logits: the lesson's warning holds."""
    hf, ours = _hf_pair(ref, False, 2, 10000.0)
    ref.load_llama_state_dict(ours, hf.state_dict())
    idx = torch.randint(0, 89, (1, 24), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        want = hf(idx).logits
        right, _ = ours(idx)
        ref.L06.apply_rope_half, saved = ref.L06.apply_rope, ref.L06.apply_rope_half
        try:
            wrong, _ = ours(idx)
        finally:
            ref.L06.apply_rope_half = saved
    assert (wrong - want).abs().max() > 1e-4
    assert (wrong - want).abs().max() > 1e3 * (right - want).abs().max()


@pytest.mark.decoder_costs
@pytest.mark.parametrize("tie, kv", [(False, 2), (True, 4), (False, 1)])
def test_costs_match_count_parameters_and_the_flop_counter(ref, tie, kv):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    cfg = ref.LlamaConfig(vocab_size=97, block_size=32, n_layer=2, n_head=4, n_kv_head=kv, n_embd=64, hidden_dim=176,
                          tie_embeddings=tie)
    torch.manual_seed(0)
    model = ref.Llama(cfg)
    idx = torch.randint(0, cfg.vocab_size, (3, cfg.block_size))
    counter = FlopCounterMode(display=False)
    with sdpa_kernel(SDPBackend.MATH), counter:  # the math backend's bmm's are what the counter sees
        _, loss = model(idx, targets=idx)
        loss.backward()
    costs = ref.decoder_costs(cfg, tokens=idx.numel(), dtype=torch.float16)
    assert costs["params"] == ref.L08.count_parameters(model)
    assert costs["train_flops"] == counter.get_total_flops()
    assert costs["adamw_bytes"] == 16 * costs["params"]
    cache = ref.L08.KVCache()
    with torch.no_grad():
        model(idx[:1, :5], cache=cache)
    cached = sum(t.numel() * 2 for t in cache.keys + cache.values)  # float16: 2 bytes a value
    assert costs["kv_bytes_per_token"] * 5 == cached


@pytest.mark.slow
@pytest.mark.parametrize("exercise, code", [("LlamaAttention", ATTENTION_ALTERNATIVE),
                                            ("RollingKVCache", ROLLING_ALTERNATIVE),
                                            ("filter_logits", FILTER_ALTERNATIVE)],
                         ids=["gqa-inside-sdpa", "chunked-rolling-cache", "ascending-top-p"])
def test_correct_alternative_passes(exercise, code, tmp_path):
    ex = grade_one(L10, with_code(L10, exercise, code, tmp_path), exercise)
    assert ex.status == "passed", explain(ex)


@pytest.mark.slow
def test_gpu_checks_are_skipped_not_passed_without_cuda():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the CUDA checks run")
    ex = grade_one(L10, L10.solution_path, "LlamaAttention")
    gpu = [c for c in ex.checks if c.device == "cuda"]
    assert gpu and all(c.status == "skipped" for c in gpu)
    assert any("enable_gqa" in c.name for c in gpu)
