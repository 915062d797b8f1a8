"""Wrong code of the classes issue 28 lists, written without looking at the declared domains: how many the grader
rejects, and what it says.

Each case is one edit of a solved cell (lessons 03-10): a non-default argument or config field ignored, a mode
(train/eval, dropout) ignored, an edge of a range, a dtype or device dropped, state across calls, an offset.
None is a catalogued mistake (a case whose edit is one is reported as such and not counted). Each exercise is
graded in process (tests/harness.py: the same probes and judges as a sandboxed check, without the child), and
the line says whether it was rejected, by which checks, and the diagnosis.

    python benchmarks/escapes.py [--json docs/data/escapes.json] [--lessons lesson03 lesson10]

Run it on two trees (the code before the domains and after) to compare; the figures go to docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "tests"))

CASES = [  # (lesson, exercise, old, new, class, what the student did)
    ("lesson03", "MultiHeadAttention", "weights = F.dropout(weights, p=self.dropout, training=self.training)",
     "weights = weights", "mode", "never applies dropout to the attention weights"),
    ("lesson03", "MultiHeadAttention", "weights = F.dropout(weights, p=self.dropout, training=self.training)",
     "weights = F.dropout(weights, p=self.dropout, training=True)", "mode", "drops out in eval mode too"),
    ("lesson03", "MultiHeadAttention", "self.q_proj = nn.Linear(d_model, d_model, bias=bias)",
     "self.q_proj = nn.Linear(d_model, d_model, bias=True)", "argument", "ignores bias=False for q_proj"),
    ("lesson03", "CausalSelfAttention", "is_causal=is_causal)", "is_causal=True)", "argument",
     "ignores is_causal=False"),
    ("lesson03", "GroupedQueryAttention",
     "k = repeat_kv(split_heads(self.k_proj(x), self.num_kv_heads), n_rep)",
     "k = split_heads(self.k_proj(x), self.num_kv_heads).repeat(1, n_rep, 1, 1)", "argument",
     "tiles the KV heads (h % Hkv) instead of repeating each (h // n_rep)"),
    ("lesson04", "layer_norm", "torch.sqrt(var + eps)", "torch.sqrt(var + 1e-5)", "argument", "ignores eps"),
    ("lesson04", "LayerNorm", "if elementwise_affine:", "if True:", "argument",
     "ignores elementwise_affine=False"),
    ("lesson04", "group_norm", "xg = x.reshape(N, num_groups, -1)",
     "xg = x.reshape(N, -1, num_groups).transpose(1, 2)", "argument", "groups channels c % G, not runs"),
    ("lesson05", "rms_norm", "return y.to(x.dtype)", "return y", "dtype", "returns float32 for half inputs"),
    ("lesson05", "rms_norm", "inv_rms = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)",
     "inv_rms = torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + 1e-6)", "argument", "ignores eps"),
    ("lesson06", "apply_rope", "inv_freq = base ** (", "inv_freq = 10000.0 ** (", "argument", "ignores base"),
    ("lesson06", "sinusoidal_table", "inv_freq = base ** (", "inv_freq = 10000.0 ** (", "argument",
     "ignores base"),
    ("lesson06", "LearnedPositionalEmbedding", "return x + self.weight[offset:offset + T]",
     "return x + self.weight[:T]", "argument", "ignores offset"),
    ("lesson06", "rope_inv_freq", "inv_freq = inv_freq / scale", "inv_freq = inv_freq", "argument",
     "linear scaling ignores scale"),
    ("lesson06", "alibi_bias", "i = torch.arange(t_q)[:, None] + (t_k - t_q)", "i = torch.arange(t_q)[:, None]",
     "edge", "aligns the queries top-left when t_q < t_k"),
    ("lesson07", "MLP", "hidden = expansion * d_model", "hidden = 4 * d_model", "argument", "ignores expansion"),
    ("lesson07", "TransformerBlock", "if self.norm_first:", "if True:", "argument", "ignores norm_first=False"),
    ("lesson07", "TransformerBlock", "mask = causal if mask is None else mask & causal", "mask = causal",
     "argument", "drops the given mask when causal"),
    ("lesson07", "TransformerBlock", "x = x + self.dropout(self.attn(self.ln1(x), mask=mask)[0])",
     "x = x + self.attn(self.ln1(x), mask=mask)[0]", "mode", "no dropout on the attention branch (pre-LN)"),
    ("lesson08", "GPT", "x = self.drop(self.wte(idx) + self.wpe(pos))", "x = self.wte(idx) + self.wpe(pos)",
     "mode", "no dropout on the embeddings"),
    ("lesson08", "count_parameters", "return sum(p.numel() for p in model.parameters())",
     "return sum(p.numel() for _, p in model.named_parameters(remove_duplicate=False))", "state",
     "counts a tied weight twice"),
    ("lesson08", "KVCache", "return self.keys[0].shape[-2] if self.keys else 0", "return len(self.keys)",
     "state", "len() is the number of layers"),
    ("lesson08", "generate", "logits, _ = model(out[:, -block_size:])", "logits, _ = model(out)", "edge",
     "never crops the context without a cache"),
    ("lesson09", "kv_cache_bytes", "element = torch.empty((), dtype=dtype).element_size()", "element = 2",
     "dtype", "assumes two bytes per value"),
    ("lesson09", "kv_cache_bytes", "* seq_len * batch * element", "* seq_len * element", "argument",
     "ignores batch"),
    ("lesson10", "LlamaAttention", "mask = sliding_window_mask(T, k.shape[-2], self.window, x.device)",
     "mask = sliding_window_mask(T, k.shape[-2], None, x.device)", "argument", "ignores window"),
    ("lesson10", "SwiGLU", "self.gate_proj = nn.Linear(d_model, hidden_dim, bias=bias)",
     "self.gate_proj = nn.Linear(d_model, hidden_dim, bias=False)", "argument", "ignores bias=True on gate_proj"),
    ("lesson10", "swiglu_hidden_dim", "hidden = int(ffn_dim_multiplier * hidden)", "hidden = hidden", "argument",
     "ignores ffn_dim_multiplier"),
    ("lesson10", "RollingKVCache", "return self.seen", "return self.keys[0].shape[-2] if self.keys else 0",
     "state", "len() is the kept positions, not every position seen"),
    ("lesson10", "Llama", "if config.tie_embeddings:", "if False:", "argument", "ignores tie_embeddings"),
    ("lesson10", "LlamaBlock", "self.ln1 = L05.RMSNorm(D, eps=config.norm_eps)", "self.ln1 = L05.RMSNorm(D)",
     "argument", "ignores norm_eps in the first norm"),
    ("lesson10", "filter_logits", "probs < min_p * probs.amax(dim=-1, keepdim=True)", "probs < min_p",
     "argument", "min_p not relative to the top probability"),
    ("lesson10", "decoder_costs", "bytes_per_value = torch.empty((), dtype=dtype).element_size()",
     "bytes_per_value = 2", "dtype", "assumes two bytes per value"),
]


def catalogued(lesson_id: str, exercise: str, old: str, new: str) -> bool:
    import importlib

    from graders.registry import find_lesson

    module = importlib.import_module(find_lesson(lesson_id).module)
    return any(m.exercise == exercise and dict(m.edits or ()).get(old) == new for m in getattr(module, "MISTAKES", ()))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--lessons", nargs="*", help="only these lessons")
    args = parser.parse_args()

    from graders.engine import solved_cell
    from graders.registry import find_lesson
    from harness import check_one, with_code

    rows, rejected, counted = [], 0, 0
    for lid, ex, old, new, kind, what in CASES:
        if args.lessons and lid not in args.lessons:
            continue
        lesson = find_lesson(lid)
        src = solved_cell(lid, ex)
        if src.count(old) != 1:
            rows.append({"lesson": lid, "exercise": ex, "what": what, "class": kind, "status": "edit not found"})
            print(f"{lid} {ex}: {what}: the edit no longer applies (the solution changed)")
            continue
        if catalogued(lid, ex, old, new):
            rows.append({"lesson": lid, "exercise": ex, "what": what, "class": kind, "status": "catalogued"})
            print(f"{lid} {ex}: {what}: a catalogued mistake (not counted)")
            continue
        res = check_one(lesson, with_code(lesson, ex, src.replace(old, new), Path(tempfile.mkdtemp())), ex)
        failed = [c.name for c in res.checks if c.status not in ("passed", "skipped")]
        counted += 1
        rejected += res.status != "passed"
        rows.append({"lesson": lid, "exercise": ex, "what": what, "class": kind, "status": res.status,
                     "failed_checks": failed, "diagnosis": res.diagnosis})
        verdict = "REJECTED" if res.status != "passed" else "passed (escaped)"
        print(f"{lid} {ex}: {what}: {verdict}"
              + (f"\n    by: {'; '.join(failed[:3])}" if failed else "")
              + (f"\n    diagnosis: {res.diagnosis}" if res.diagnosis else ""))
    print(f"rejected {rejected} of {counted}")
    if args.json:
        args.json.write_text(json.dumps({"rejected": rejected, "counted": counted, "cases": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
