"""lesson10 beyond the generic tests: the loader against transformers' LlamaForCausalLM (float64), the cost
accounting against count_parameters and torch's FLOP counter, and correct alternatives accepted (GQA inside
SDPA, a hand-written mask, a chunked rolling cache, Hugging Face's ascending top-p)."""

from __future__ import annotations

import pytest
import torch

from graders.parts import import_lesson
from graders.registry import find_lesson
from harness import explain, grade_one, with_code

pytestmark = pytest.mark.lesson10
L10 = find_lesson("lesson10")


@pytest.fixture(scope="module")
def ref():
    """The solved lesson10 (its graded cells), as a module."""
    return import_lesson("lesson10")


# ----------------------------------------------------------------------------------------------
# load_llama_state_dict against transformers


def _hf_pair(ref, tie: bool, kv: int, rope_theta: float):
    transformers = pytest.importorskip("transformers", reason="transformers is not installed (pip install -e '.[test]')")
    hf_cfg = transformers.LlamaConfig(vocab_size=89, hidden_size=48, intermediate_size=112, num_hidden_layers=3,
                                      num_attention_heads=6, num_key_value_heads=kv, max_position_embeddings=64,
                                      rms_norm_eps=1e-5, rope_theta=rope_theta, tie_word_embeddings=tie)
    hf_cfg.rope_parameters = {"rope_type": "default", "rope_theta": rope_theta}  # transformers 5 reads it from here
    torch.manual_seed(0)
    hf = transformers.LlamaForCausalLM(hf_cfg).double().eval()
    with torch.no_grad():  # RMSNorm gains of 1 would hide a swapped ln1/ln2: make every one different
        for name, p in hf.named_parameters():
            if name.endswith("layernorm.weight") or name == "model.norm.weight":
                p.copy_(1 + 0.2 * torch.randn_like(p))
    ours = ref.Llama(ref.LlamaConfig(vocab_size=89, block_size=64, n_layer=3, n_head=6, n_kv_head=kv, n_embd=48,
                                     hidden_dim=112, rope_base=rope_theta, norm_eps=1e-5,
                                     tie_embeddings=tie)).double().eval()
    return hf, ours


# ----------------------------------------------------------------------------------------------
# decoder_costs, checked by counting


@pytest.mark.decoder_costs
def test_llama3_8b_shape_counts_on_the_meta_device(ref):
    from graders.lesson10_llama import LLAMA3_8B

    cfg = ref.LlamaConfig(**LLAMA3_8B)
    with torch.device("meta"):
        model = ref.Llama(cfg)
    costs = ref.decoder_costs(cfg, tokens=1)
    assert costs["params"] == ref.L08.count_parameters(model)
    assert costs["kv_bytes_per_token"] == 2 * 32 * 8 * 128 * 2  # K and V, 32 layers, 8 KV heads of 128, bfloat16


# ----------------------------------------------------------------------------------------------
# Correct alternatives are accepted (whole notebooks through the sandbox: slow)

ATTENTION_ALTERNATIVE = '''
def sliding_window_mask(t_q, t_k, window=None, device=None):
    mask = torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(t_k - t_q)
    if window is not None:
        mask = mask & ~torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril(t_k - t_q - window)
    return mask


class LlamaAttention(nn.Module):
    def __init__(self, d_model, num_heads, num_kv_heads, rope_base=10000.0, window=None):
        super().__init__()
        if d_model % num_heads or num_heads % num_kv_heads or (d_model // num_heads) % 2:
            raise ValueError(f"num_kv_heads={num_kv_heads} must divide num_heads={num_heads}, "
                             f"num_heads must divide d_model and the head size be even")
        self.h, self.hkv, self.base, self.window = num_heads, num_kv_heads, rope_base, window
        dh = d_model // num_heads
        self.q_proj = nn.Linear(d_model, d_model, bias=False)
        self.k_proj = nn.Linear(d_model, num_kv_heads * dh, bias=False)
        self.v_proj = nn.Linear(d_model, num_kv_heads * dh, bias=False)
        self.out_proj = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, cache=None, layer_idx=0, start=None):
        B, T, D = x.shape
        offset = start if start is not None else (0 if cache is None else len(cache))
        pos = torch.arange(offset, offset + T, device=x.device)
        q = self.q_proj(x).view(B, T, self.h, -1).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.hkv, -1).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.hkv, -1).transpose(1, 2)
        q, k = L06.apply_rope_half(q, pos, self.base), L06.apply_rope_half(k, pos, self.base)
        if cache is not None:
            k, v = cache.update(layer_idx, k, v)
        mask = sliding_window_mask(T, k.shape[2], self.window, x.device)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)  # GQA inside SDPA
        return self.out_proj(y.transpose(1, 2).reshape(B, T, D))
'''

ROLLING_ALTERNATIVE = '''
class RollingKVCache:
    def __init__(self, window):
        if window < 1:
            raise ValueError(f"window must be >= 1, got {window}")
        self.window, self.store, self.count = window, {}, 0

    def update(self, layer_idx, k, v):
        if layer_idx == 0:
            self.count += k.size(2)
        old = self.store.get(layer_idx)
        k_all = k if old is None else torch.cat((old[0], k), 2)
        v_all = v if old is None else torch.cat((old[1], v), 2)
        keep = min(self.window, k_all.size(2))
        self.store[layer_idx] = (k_all.narrow(2, k_all.size(2) - keep, keep), v_all.narrow(2, v_all.size(2) - keep, keep))
        return k_all, v_all

    def __len__(self):
        return self.count
'''

FILTER_ALTERNATIVE = '''
def filter_logits(logits, top_k=None, top_p=None, min_p=None):
    if (top_k is not None and top_k < 1) or (top_p is not None and not 0 < top_p <= 1) or (
            min_p is not None and not 0 <= min_p <= 1):
        raise ValueError(f"bad filter: top_k={top_k}, top_p={top_p}, min_p={min_p}")
    out = logits.clone()
    if top_k is not None:
        k = min(top_k, out.size(-1))
        out[out < out.topk(k, dim=-1).values[..., -1, None]] = float("-inf")
    if top_p is not None:  # Hugging Face's way: ascending sort, drop while the low tail holds at most 1 - p
        sorted_logits, idx = out.sort(dim=-1)
        cum = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
        remove = cum <= 1 - top_p
        remove[..., -1] = False
        out = out.masked_fill(remove.scatter(-1, idx, remove), float("-inf"))
    if min_p is not None:
        p = out.softmax(dim=-1)
        out = torch.where(p >= min_p * p.max(dim=-1, keepdim=True).values, out, torch.full_like(out, float("-inf")))
    return out
'''


def test_the_benchmark_compares_the_same_function(ref):
    """benchmarks/lesson10_train_step.py times TorchLlama against the course's Llama: same parameters, same logits."""
    from graders.lesson10_llama import TorchLlama, _Config

    fields = dict(vocab_size=61, block_size=20, n_layer=2, n_head=4, n_kv_head=2, n_embd=32, hidden_dim=96)
    torch.manual_seed(0)
    ours = ref.Llama(ref.LlamaConfig(**fields)).eval()
    theirs = TorchLlama(_Config(**fields)).eval()
    theirs.load_state_dict(ours.state_dict())  # strict: the same names and shapes
    idx = torch.randint(0, 61, (3, 20))
    with torch.no_grad():
        torch.testing.assert_close(theirs(idx)[0], ours(idx)[0], atol=1e-5, rtol=1e-4)
