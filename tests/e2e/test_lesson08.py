"""lesson08 beyond the generic tests: correct alternatives pass (hand-written cached attention, a tie made the
other way round, a dict-based cache, counting by identity, a sorted top-k, loading through load_state_dict)."""

from __future__ import annotations

import pytest

from graders.registry import find_lesson
from course_cli.sandboxed.grading import grade_notebook
from harness import explain, with_code

pytestmark = pytest.mark.lesson08
L08 = find_lesson("lesson08")

# The tie made from the other side, init through self.apply, the cached attention written out by hand
# (einsum, masked_fill, softmax) instead of F.scaled_dot_product_attention, the loss through log_softmax.
GPT_ALTERNATIVE = '''
class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.wte = nn.Embedding(config.vocab_size, config.n_embd)
        self.wpe = nn.Embedding(config.block_size, config.n_embd)
        self.drop = nn.Dropout(config.dropout)
        self.blocks = nn.ModuleList([L07.TransformerBlock(config.n_embd, config.n_head, dropout=config.dropout,
                                                          causal=True, bias=config.bias)
                                     for _ in range(config.n_layer)])
        self.ln_f = L04.LayerNorm(config.n_embd, bias=config.bias)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.wte.weight = self.lm_head.weight
        self.apply(self._init)
        for name, p in self.named_parameters():
            if name.endswith(("attn.out_proj.weight", "mlp.fc2.weight")):
                torch.nn.init.normal_(p, std=0.02 * (2 * config.n_layer) ** -0.5)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            torch.nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            torch.nn.init.zeros_(m.bias)

    def forward(self, idx, targets=None, cache=None):
        T = idx.size(1)
        past = 0 if cache is None else len(cache)
        if past + T > self.config.block_size:
            raise ValueError(f"cannot go past block_size {self.config.block_size}")
        x = self.wte(idx) + self.wpe.weight[past:past + T]
        x = self.drop(x)
        for layer, block in enumerate(self.blocks):
            if cache is None:
                x = block(x)
                continue
            h = block.ln1(x)
            B, _, D = h.shape
            H = self.config.n_head
            q, k, v = (p(h).reshape(B, T, H, D // H).permute(0, 2, 1, 3)
                       for p in (block.attn.q_proj, block.attn.k_proj, block.attn.v_proj))
            k, v = cache.update(layer, k, v)
            S = k.shape[2]
            scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(D // H)
            allowed = torch.arange(S)[None, :] <= torch.arange(S - T, S)[:, None]
            w = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
            y = torch.einsum("bhqk,bhkd->bhqd", w, v).permute(0, 2, 1, 3).reshape(B, T, D)
            x = x + block.attn.out_proj(y)
            x = x + block.mlp(block.ln2(x))
        logits = self.lm_head(self.ln_f(x))
        if targets is None:
            return logits, None
        logp = torch.log_softmax(logits, -1)
        return logits, -logp.gather(-1, targets.unsqueeze(-1)).mean()
'''

KVCACHE_DICT = '''
class KVCache:
    def __init__(self):
        self.store = {}
        self.n = 0

    def update(self, layer_idx, k, v):
        if layer_idx in self.store:
            old_k, old_v = self.store[layer_idx]
            k, v = torch.cat((old_k, k), 2), torch.cat((old_v, v), 2)
        self.store[layer_idx] = (k, v)
        if layer_idx == 0:
            self.n = k.shape[2]
        return k, v

    def __len__(self):
        return self.n
'''

COUNT_BY_ID = '''
def count_parameters(model):
    seen = {}
    for module in model.modules():
        for p in module.parameters(recurse=False):
            seen[id(p)] = p.numel()
    return sum(seen.values())
'''

# A sorted top-k (the value at index k - 1) and torch.where instead of masked_fill; max().indices for argmax.
GENERATE_ALTERNATIVE = '''
@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None, use_cache=True, generator=None):
    if temperature < 0 or (top_k is not None and top_k <= 0):
        raise ValueError("temperature must be >= 0 and top_k >= 1")
    mode = model.training
    model.eval()
    T_max = model.config.block_size
    cache = KVCache() if use_cache else None
    seq = idx.clone()
    feed = seq[:, -T_max:]
    for _ in range(max_new_tokens):
        if cache is not None and len(cache) + feed.shape[1] > T_max:
            cache, feed = KVCache(), seq[:, -T_max:]
        logits = (model(feed, cache=cache) if cache is not None else model(seq[:, -T_max:]))[0][:, -1]
        if temperature == 0:
            nxt = logits.max(dim=-1).indices[:, None]
        else:
            scaled = logits / temperature
            if top_k:
                cut = scaled.sort(dim=-1, descending=True).values[:, top_k - 1:top_k]
                scaled = torch.where(scaled >= cut, scaled, torch.full_like(scaled, -float("inf")))
            nxt = torch.multinomial(F.softmax(scaled, dim=-1), num_samples=1, generator=generator)
        nxt = nxt.to(seq.dtype)  # token ids keep the prompt's dtype (int32 in, int32 out)
        seq = torch.cat((seq, nxt), dim=1)
        feed = nxt
    model.train(mode)
    return seq
'''

LOAD_THROUGH_LOAD_STATE_DICT = '''
def load_gpt2_state_dict(model, state_dict):
    D = model.config.n_embd
    new = {}
    for key, t in state_dict.items():
        key = key.replace("transformer.", "", 1)
        if key.endswith((".attn.bias", ".attn.masked_bias")):
            continue
        key = key.replace("h.", "blocks.", 1) if key.startswith("h.") else key
        key = key.replace("ln_1", "ln1").replace("ln_2", "ln2")
        if ".c_attn." in key:
            for name, part in zip(("q_proj", "k_proj", "v_proj"), t.chunk(3, dim=-1)):
                new[key.replace("c_attn", name)] = part.T if part.dim() == 2 else part
            continue
        key = (key.replace("attn.c_proj", "attn.out_proj").replace("mlp.c_fc", "mlp.fc1")
                  .replace("mlp.c_proj", "mlp.fc2"))
        new[key] = t.T.contiguous() if t.dim() == 2 and key.startswith("blocks.") else t
    own = model.state_dict()
    for key, t in own.items():
        if key not in new:
            raise ValueError(f"missing {key}")
        if new[key].shape != t.shape:
            raise ValueError(f"{key}: shape {tuple(new[key].shape)} does not fit {tuple(t.shape)}")
    model.load_state_dict({k: new[k] for k in own})
'''


ALTERNATIVES = {"GPT": GPT_ALTERNATIVE, "KVCache": KVCACHE_DICT, "count_parameters": COUNT_BY_ID,
                "generate": GENERATE_ALTERNATIVE, "load_gpt2_state_dict": LOAD_THROUGH_LOAD_STATE_DICT}


def test_correct_alternatives_are_accepted(tmp_path):
    """Every alternative in one notebook, graded once (each graded notebook costs a child process)."""
    path = None
    for exercise, code in ALTERNATIVES.items():
        path = with_code(L08, exercise, code, tmp_path, name=f"alt-{exercise}.ipynb", base=path)
    result = grade_notebook(L08, path, list(ALTERNATIVES))
    for ex in result.exercises:
        assert ex.status == "passed", explain(ex)
    assert not result.notes, result.notes
